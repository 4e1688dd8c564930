//! `templates`: rendering the site's pages to I/O lists, compiled and configured as `galleon
//! serve` does (the site's templates, its copy threshold): the 4 KB and 400 KB Blah pages
//! (`/blah?iters=10`, `/blah?iters=1000`), the 100x100 big table and the teams page, their
//! turns interleaved. The figure is wall time per render on this thread; no socket.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use galleon_template::{Assigns, Limits};

use crate::bench::measure::{Collector, Ctx, rotation, us};
use galleon_site::pages::SERVE_COPY_BELOW;
use galleon_site::templates::{CopyBelow, Templates};

/// One page to render: the benchmark's name, the template, its assigns, and the least output
/// that shows it rendered what it should.
struct Page {
    name: &'static str,
    template: &'static str,
    assigns: Assigns,
    min_len: usize,
}

/// The page's data file's assigns (`data/NAME.json`), as the site loads them.
fn data(ctx: &Ctx, name: &str) -> anyhow::Result<Assigns> {
    let path = ctx.site.join("data").join(format!("{name}.json"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", path.display()))?;
    Assigns::from_json(json).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Runs the suite.
pub(super) fn run(ctx: &Ctx, out: &mut Collector) -> anyhow::Result<()> {
    let templates = Templates::load(
        &ctx.site,
        CopyBelow::text(SERVE_COPY_BELOW),
        Limits::default(),
        false,
    )
    .with_context(|| format!("loading the site's templates from {}", ctx.site.display()))?;
    let iters = |n: i64| {
        let mut a = Assigns::new();
        a.insert("iters", n);
        a
    };
    let pages = [
        Page {
            name: "blah iters=10 (4 KB)",
            template: "pages/blah.html.eex",
            assigns: iters(10),
            min_len: 4_000,
        },
        Page {
            name: "blah iters=1000 (400 KB)",
            template: "pages/blah.html.eex",
            assigns: iters(1000),
            min_len: 400_000,
        },
        Page {
            name: "big-table 100x100",
            template: "pages/big-table.html.eex",
            assigns: data(ctx, "big-table")?,
            min_len: 10_000,
        },
        Page {
            name: "teams",
            template: "pages/teams.html.eex",
            assigns: data(ctx, "teams")?,
            min_len: 100,
        },
    ];
    let render = |p: &Page| -> anyhow::Result<usize> {
        templates.with_current(|c| {
            c.engine
                .render(p.template, &p.assigns)
                .map(|list| black_box(list).len())
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.template))
        })
    };
    // Calibrate: renders per measurement so that one lasts about `target`.
    let target = ctx.pick(Duration::from_millis(60), Duration::from_millis(5));
    let mut counts = Vec::new();
    for p in &pages {
        let len = render(p)?;
        if len < p.min_len {
            bail!(
                "{}: rendered {len} bytes, expected at least {}",
                p.name,
                p.min_len
            );
        }
        let t = Instant::now();
        let mut n = 0u32;
        while t.elapsed() < target / 4 && n < 1_000_000 {
            render(p)?;
            n += 1;
        }
        let each = t.elapsed() / n.max(1);
        counts.push((target.as_nanos() / each.as_nanos().max(1)).clamp(1, 1_000_000) as u32);
        out.declare(p.name, "us/render", true);
    }
    let rounds = ctx.rounds(15);
    ctx.start(rounds * pages.len(), "rendering");
    for round in 0..rounds {
        for i in rotation(round, pages.len()) {
            let p = &pages[i];
            let t = Instant::now();
            for _ in 0..counts[i] {
                render(p)?;
            }
            out.push(
                p.name,
                "us/render",
                true,
                us(t.elapsed()) / f64::from(counts[i]),
            );
            ctx.step(p.name);
        }
    }
    Ok(())
}
