//! `/_galleon`: the stats page, rendered from a snapshot by `templates/page.html.eex` (a
//! runtime live template, embedded): requests by route, latency and write histograms (inline
//! SVG), connections, memory, the CPU pool's hops and the extra figures. Figures the source
//! does not measure say so instead of showing zeros. The same template is served two ways: as
//! a live page kept current over galleon-live's socket (see `live.rs`), and as a plain page
//! that reloads itself every [`REFRESH_SECS`] seconds (the axum routes, [`Diagnostics::page`]).
//!
//! [`Diagnostics::page`]: crate::Diagnostics::page

use std::sync::OnceLock;

use galleon_offload::PoolSnapshot;
use galleon_template::compiled::IoList;
use galleon_template::{Assigns, Engine, Error};
use serde::Serialize;
use serde_json::Value as Json;

use crate::figures::Figure;
use crate::format::{figure_value, hop_buckets, labelled, mib, pair, seconds_label, us};
use crate::snapshot::{CALLS_BOUNDS, IOVECS_BOUNDS, LATENCY_BOUNDS_S, Snapshot, Source};

/// Seconds between the live page's updates (a tick broadcast to its views), and between the
/// plain page's reloads (`<meta http-equiv="refresh">`, also the live page's `<noscript>`).
pub const REFRESH_SECS: u32 = 2;

/// The page's `<title>`.
pub(crate) const TITLE: &str = "galleon: live stats";

/// The template's name in its engine.
pub(crate) const TEMPLATE: &str = "page.html.eex";

/// The template: the page's body, inside the live container or the plain document.
const SOURCE: &str = include_str!("../templates/page.html.eex");

/// The page's stylesheet.
const STYLE: &str = "<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1 small{font-size:.55em;color:#666;font-weight:normal}h2{margin-top:1.4em}
table{border-collapse:collapse}td,th{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #ccc;border-radius:6px;padding:.5em 1em}
.card b{display:block;font-size:1.5em}.charts{display:flex;flex-wrap:wrap;gap:1.5em}
.hist rect.bar{fill:#3b7dd8}.hist text{font-size:10px;fill:#444}.split{width:600px;height:14px;display:flex}
.split span{display:block;height:14px}
</style>";

/// Routes whose latency histograms are drawn (the busiest); the table lists them all.
const CHARTED_ROUTES: usize = 6;

/// What the page shows beside the statistics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extras<'a> {
    /// The CPU pool.
    pub(crate) pool: Option<&'a PoolSnapshot>,
    /// Extra figures: each set's heading and figures, one table each.
    pub(crate) figures: &'a [(&'a str, Vec<Figure>)],
}

/// The live engine holding the page's template, compiled once.
pub(crate) fn engine() -> Result<&'static Engine, Error> {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    if let Some(e) = ENGINE.get() {
        return Ok(e);
    }
    let built = Engine::builder().live(true).from_source(TEMPLATE, SOURCE)?;
    Ok(ENGINE.get_or_init(|| built))
}

/// The whole document around `body` (the rendered template, or the live container holding
/// it). A live page (`csrf_meta` and `scripts` given) falls back to reloading itself only
/// without JavaScript; a plain one always reloads.
pub(crate) fn document(body: &str, csrf_meta: &str, scripts: &str, live: bool) -> String {
    let refresh = format!("<meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">");
    let refresh = if live {
        format!("<noscript>{refresh}</noscript>")
    } else {
        refresh
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\n{csrf_meta}{refresh}\n\
         <title>{TITLE}</title><link rel=\"icon\" href=\"data:,\">{STYLE}</head><body>\n{body}\n{scripts}</body></html>\n"
    )
}

/// The plain page (no socket, reloading itself) for this snapshot.
pub(crate) fn render(s: &Snapshot, extras: Extras<'_>) -> Result<IoList, Error> {
    let assigns = Assigns::from_json(Json::Object(assigns(s, extras)))?;
    let body = engine()?.render(TEMPLATE, &assigns)?.to_vec();
    let body = String::from_utf8_lossy(&body);
    Ok(IoList::from_scratch(
        document(&body, "", "", false).into_bytes(),
    ))
}

/// The page's assigns for this snapshot: a JSON object of the template's assign names.
pub(crate) fn assigns(s: &Snapshot, extras: Extras<'_>) -> serde_json::Map<String, Json> {
    let source = match s.source {
        Source::GalleonHttp => "galleon-http",
        Source::Axum => "axum",
    };
    let bounds: Vec<String> = LATENCY_BOUNDS_S.iter().map(|&b| seconds_label(b)).collect();
    let latency_charts = s
        .routes
        .iter()
        .take(CHARTED_ROUTES)
        .map(|r| {
            let title = format!("{} {}", r.method, r.route);
            chart(title, "latency", &labelled(&r.latency.buckets, &bounds))
        })
        .collect();
    let mut write_charts = Vec::new();
    if let Some(w) = &s.writes {
        let calls: Vec<String> = CALLS_BOUNDS.iter().map(|b| format!("≤{b}")).collect();
        let iovecs: Vec<String> = IOVECS_BOUNDS.iter().map(|b| format!("≤{b}")).collect();
        write_charts.push(chart(
            "write calls per response".to_owned(),
            "calls",
            &labelled(&w.calls_per_response, &calls),
        ));
        write_charts.push(chart(
            "iovecs per response".to_owned(),
            "iovecs",
            &labelled(&w.iovecs_per_response, &iovecs),
        ));
    }
    let pool = extras.pool;
    let hop_charts = pool
        .into_iter()
        .flat_map(|p| &p.kinds)
        .filter(|k| k.to_pool.count > 0)
        .map(|k| {
            chart(
                format!("hop to pool: {}", k.name),
                "hops",
                &hop_buckets(&k.to_pool),
            )
        })
        .collect();
    let page = Page {
        refresh_secs: REFRESH_SECS,
        source,
        uptime: format!("{:.0} s", s.uptime_s),
        requests: s.requests,
        connections: s.connections.map(|c| ConnectionsView {
            open: c.open,
            total: c.total,
            refused: c.refused,
        }),
        rss: s.rss_bytes.map_or("?".to_owned(), mib),
        calls_per_response: match &s.writes {
            None => "not measured".to_owned(),
            Some(w) if w.totals.responses == 0 => "-".to_owned(),
            Some(w) => format!(
                "{:.2}",
                w.totals.syscalls as f64 / w.totals.responses as f64
            ),
        },
        routes: s
            .routes
            .iter()
            .map(|r| RouteRow {
                route: r.route.clone(),
                method: r.method,
                count: r.count,
                statuses: r
                    .statuses
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                p50: us(r.latency.p50_us),
                p90: us(r.latency.p90_us),
                p99: us(r.latency.p99_us),
                max: us(r.latency.max_us),
                bytes: mib(r.bytes),
            })
            .collect(),
        latency_span: match s.source {
            Source::GalleonHttp => "head to last byte",
            Source::Axum => "request to response head",
        },
        latency_charts,
        writes: s.writes.as_ref().map(|w| {
            let t = &w.totals;
            let total = (t.bytes_referenced + t.bytes_copied).max(1) as f64;
            let r = t.bytes_referenced as f64 / total * 100.0;
            WritesView {
                responses: t.responses,
                syscalls: t.syscalls,
                iovecs: t.iovecs,
                short_writes: t.short_writes,
                referenced: mib(t.bytes_referenced),
                copied: mib(t.bytes_copied),
                referenced_pct: format!("{r:.1}"),
                copied_pct: format!("{:.1}", 100.0 - r),
            }
        }),
        write_charts,
        pool: pool.map(|p| PoolView {
            threads: p.threads,
            busy: p.busy,
            queued: p.queued,
            queue_capacity: p.queue_capacity,
            policy: p.policy.clone(),
            hop_estimate: p
                .hop_estimate_ns
                .map_or("-".to_owned(), |n| format!("{:.1} µs", n / 1000.0)),
        }),
        kinds: pool
            .into_iter()
            .flat_map(|p| &p.kinds)
            .map(|k| KindRow {
                name: k.name.clone(),
                policy: k.policy.clone(),
                inline: k.inline,
                offloaded: k.offloaded,
                to_pool: pair(&k.to_pool),
                back: pair(&k.back),
                run: pair(&k.run),
            })
            .collect(),
        hop_charts,
        figure_sets: extras
            .figures
            .iter()
            .map(|(title, figures)| FigureSet {
                title: (*title).to_owned(),
                rows: figures
                    .iter()
                    .map(|f| FigureRow {
                        label: f.row_label(),
                        value: figure_value(f.value),
                    })
                    .collect(),
            })
            .collect(),
    };
    match serde_json::to_value(page) {
        Ok(Json::Object(map)) => map,
        // Plain structs of strings and numbers: always an object.
        _ => serde_json::Map::new(),
    }
}

/// The page's assigns, serialized into the template's.
#[derive(Serialize)]
struct Page {
    refresh_secs: u32,
    /// Who reported the requests, named where a figure is not measured.
    source: &'static str,
    uptime: String,
    requests: u64,
    connections: Option<ConnectionsView>,
    rss: String,
    calls_per_response: String,
    routes: Vec<RouteRow>,
    latency_span: &'static str,
    latency_charts: Vec<Chart>,
    writes: Option<WritesView>,
    write_charts: Vec<Chart>,
    pool: Option<PoolView>,
    kinds: Vec<KindRow>,
    hop_charts: Vec<Chart>,
    figure_sets: Vec<FigureSet>,
}

#[derive(Serialize)]
struct ConnectionsView {
    open: u64,
    total: u64,
    refused: u64,
}

#[derive(Serialize)]
struct RouteRow {
    route: String,
    method: &'static str,
    count: u64,
    statuses: String,
    p50: String,
    p90: String,
    p99: String,
    max: String,
    bytes: String,
}

#[derive(Serialize)]
struct WritesView {
    responses: u64,
    syscalls: u64,
    iovecs: u64,
    short_writes: u64,
    referenced: String,
    copied: String,
    referenced_pct: String,
    copied_pct: String,
}

#[derive(Serialize)]
struct PoolView {
    threads: usize,
    busy: usize,
    queued: usize,
    queue_capacity: usize,
    policy: String,
    hop_estimate: String,
}

#[derive(Serialize)]
struct KindRow {
    name: String,
    policy: String,
    inline: u64,
    offloaded: u64,
    to_pool: String,
    back: String,
    run: String,
}

#[derive(Serialize)]
struct FigureSet {
    title: String,
    rows: Vec<FigureRow>,
}

#[derive(Serialize)]
struct FigureRow {
    label: String,
    value: String,
}

/// One histogram as an inline SVG bar chart; `data-total` (the samples) and each bar's
/// `data-count` let a test (or a script) read it back.
#[derive(Serialize)]
struct Chart {
    title: String,
    unit: &'static str,
    total: u64,
    width: u32,
    height: u32,
    bars: Vec<Bar>,
}

#[derive(Serialize)]
struct Bar {
    label: String,
    count: u64,
    x: u32,
    y: u32,
    width: u32,
    height: u32,
    label_x: u32,
    label_y: u32,
}

/// `bars` (label, count) drawn: bar heights scaled to the largest count.
fn chart(title: String, unit: &'static str, bars: &[(String, u64)]) -> Chart {
    let total: u64 = bars.iter().map(|b| b.1).sum();
    let max = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    let (w, bh, gap, top, base) = (22u32, 120u32, 4u32, 18u32, 150u32);
    // Room on the right and below for the last labels, drawn at an angle.
    let width = ((bars.len() as u32).max(1) * (w + gap) + 50).max(260);
    Chart {
        title,
        unit,
        total,
        width,
        height: base + 60,
        bars: bars
            .iter()
            .enumerate()
            .map(|(i, (label, n))| {
                let x = 5 + i as u32 * (w + gap);
                let height = ((*n as f64 / max as f64) * f64::from(bh)).round() as u32;
                Bar {
                    label: label.clone(),
                    count: *n,
                    x,
                    y: top + bh - height,
                    width: w,
                    height,
                    label_x: x + 4,
                    label_y: base - 8,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `c` drawn alone, through the page's own template.
    fn svg(c: Chart) -> String {
        let mut page = Page {
            refresh_secs: REFRESH_SECS,
            source: "axum",
            uptime: String::new(),
            requests: 0,
            connections: None,
            rss: String::new(),
            calls_per_response: String::new(),
            routes: Vec::new(),
            latency_span: "",
            latency_charts: Vec::new(),
            writes: None,
            write_charts: Vec::new(),
            pool: None,
            kinds: Vec::new(),
            hop_charts: Vec::new(),
            figure_sets: Vec::new(),
        };
        page.latency_charts.push(c);
        let assigns = Assigns::from_serialize(&page).unwrap();
        let html = engine()
            .unwrap()
            .render(TEMPLATE, &assigns)
            .unwrap()
            .to_vec();
        let html = String::from_utf8(html).unwrap();
        let start = html.find("<figure>").unwrap();
        let end = html.find("</figure>").unwrap();
        html[start..end].to_owned()
    }

    #[test]
    fn a_chart_carries_its_counts_and_escapes_its_labels() {
        let svg = svg(chart(
            "GET /a<b>".to_owned(),
            "latency",
            &[("≤1".into(), 3), ("<i>".into(), 1)],
        ));
        assert!(svg.contains("data-total=\"4\""), "{svg}");
        assert!(svg.contains("data-count=\"3\""));
        assert!(svg.contains("aria-label=\"GET /a&lt;b&gt;\""), "{svg}");
        assert!(svg.contains("GET /a&lt;b&gt; (4)"));
        assert!(svg.contains("<title>&lt;i&gt;: 1</title>"), "{svg}");
        assert!(!svg.contains("<b>") && !svg.contains("<i>"));
        // The largest bar is drawn full height (120), the other in proportion.
        assert!(
            svg.contains("y=\"18\" width=\"22\" height=\"120\""),
            "{svg}"
        );
        assert!(svg.contains("y=\"98\" width=\"22\" height=\"40\""), "{svg}");
    }

    #[test]
    fn the_live_document_reloads_only_without_javascript() {
        let live = document(
            "<p>x</p>",
            "<meta name=\"csrf-token\" content=\"t\">",
            "<script></script>",
            true,
        );
        assert!(
            live.contains("<noscript><meta http-equiv=\"refresh\" content=\"2\"></noscript>"),
            "{live}"
        );
        let plain = document("<p>x</p>", "", "", false);
        assert!(
            plain.contains(
                "<head><meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"2\">"
            ),
            "{plain}"
        );
        assert!(!plain.contains("noscript"));
    }
}
