//! `rules`: the shared-state example's costs on the site's rule set (`data/rules.json`): one
//! match through the indexes, the same with its JSON body, one match by scanning every rule,
//! and one deep copy of the set (what `--rules-mode copy` pays per request). Measured by
//! `galleon rules-bench` itself (`rules/bench.rs`, run as a child of this same executable, one
//! run per round), so both commands time exactly the same code and query mix; this suite reads
//! the figures it prints.

use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::bench::measure::{Collector, Ctx};

/// The figures `galleon rules-bench` prints: (line prefix, benchmark name, unit).
const FIGURES: [(&str, &str, &str); 4] = [
    (
        "per match, indexed (read the query + intersect):",
        "one match, indexed",
        "us/match",
    ),
    (
        "per match + JSON body (references to the rules' JSON):",
        "one match + JSON body",
        "us/match",
    ),
    (
        "per match, scanning every rule instead:",
        "one match, scanning every rule",
        "us/match",
    ),
    (
        "deep copy of the whole set (--rules-mode copy, per request):",
        "one deep copy of the set",
        "ms/copy",
    ),
];

/// The number after `prefix` on its line of `text` (`... : 0.512 us (...)` gives 0.512).
fn figure(text: &str, prefix: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with(prefix))?;
    line[prefix.len()..].split_whitespace().next()?.parse().ok()
}

/// Runs the suite.
pub(super) fn run(ctx: &Ctx, out: &mut Collector) -> anyhow::Result<()> {
    let file = ctx.site.join("data").join("rules.json");
    if !file.is_file() {
        bail!("{}: no rule set", file.display());
    }
    let exe = std::env::current_exe().context("finding this executable")?;
    let passes = ctx.pick("400", "20");
    for (_, name, unit) in FIGURES {
        out.declare(name, unit, true);
    }
    let rounds = ctx.rounds(9);
    ctx.start(rounds, "galleon rules-bench");
    for _ in 0..rounds {
        let o = Command::new(&exe)
            .arg("rules-bench")
            .arg("--rules")
            .arg(&file)
            .args(["--rounds", passes])
            .stdin(Stdio::null())
            .output()
            .context("running `galleon rules-bench`")?;
        let text = String::from_utf8_lossy(&o.stdout);
        if !o.status.success() {
            bail!(
                "`galleon rules-bench` failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        for (prefix, name, unit) in FIGURES {
            let v = figure(&text, prefix).with_context(|| {
                format!("`galleon rules-bench` printed no figure for {prefix:?}:\n{text}")
            })?;
            out.push(name, unit, true, v);
        }
        ctx.step("one run of galleon rules-bench");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_read_from_rules_bench_output() {
        let text = "rules: 5000 x 27 fields\n\
            per match, indexed (read the query + intersect): 0.512 us (273x faster than the BEAM's 140 us)\n\
            per match, scanning every rule instead: 80.1 us\n";
        assert_eq!(figure(text, FIGURES[0].0), Some(0.512));
        assert_eq!(figure(text, FIGURES[2].0), Some(80.1));
        assert_eq!(figure(text, FIGURES[3].0), None);
    }
}
