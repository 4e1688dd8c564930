//! `/_galleon`: the live stats page, one self-contained HTML document (inline CSS and SVG,
//! nothing fetched) rendered on the server from a snapshot, which reloads itself every
//! [`REFRESH_SECS`] seconds: requests by route, latency and write histograms, connections,
//! memory, the CPU pool's hops and the event store.

use std::fmt::Write as _;

use super::record::{Bucket, LATENCY_BOUNDS_S, Snapshot};
use crate::html::escape as esc;
use galleon_offload::{HistogramSummary, PoolSnapshot};

/// Seconds between the page's reloads.
pub(crate) const REFRESH_SECS: u32 = 2;

/// Routes whose latency histograms are drawn (the busiest); the table lists them all.
const CHARTED_ROUTES: usize = 6;

/// The page for this snapshot. `events` are the store's counters as (name, value) rows.
pub(crate) fn render(
    s: &Snapshot,
    pool: &PoolSnapshot,
    events: Option<&[(String, String)]>,
) -> String {
    let mut h = String::with_capacity(32 * 1024);
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">\
         <title>galleon: live stats</title><style>{CSS}</style></head><body>\
         <h1>galleon <small>live stats, reloads every {REFRESH_SECS} s \
         (<a href=\"/_galleon/stats.json\">stats.json</a>, <a href=\"/metrics\">/metrics</a>)</small></h1>"
    );
    let _ = write!(
        h,
        "<section class=\"cards\">{}{}{}{}{}</section>",
        card("uptime", &format!("{:.0} s", s.uptime_s)),
        card("requests", &s.requests.to_string()),
        card(
            "connections open",
            &format!(
                "{} <small>of {} accepted, {} refused</small>",
                s.connections.open, s.connections.total, s.connections.refused
            )
        ),
        card("resident memory", &s.rss_bytes.map_or("?".to_owned(), mib)),
        card(
            "write calls per response",
            &if s.writes.responses == 0 {
                "-".to_owned()
            } else {
                format!(
                    "{:.2}",
                    s.writes.syscalls as f64 / s.writes.responses as f64
                )
            }
        ),
    );

    h.push_str("<h2>Requests by route</h2><table><tr><th>route</th><th>method</th><th>requests</th><th>statuses</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>bytes</th></tr>");
    for r in &s.routes {
        let statuses: Vec<String> = r
            .statuses
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.route),
            r.method,
            r.count,
            esc(&statuses.join(", ")),
            us(r.latency.p50_us),
            us(r.latency.p90_us),
            us(r.latency.p99_us),
            us(r.latency.max_us),
            mib(r.bytes),
        );
    }
    h.push_str("</table><h2>Latency, head to last byte</h2><div class=\"charts\">");
    let bounds: Vec<String> = LATENCY_BOUNDS_S.iter().map(|&b| seconds_label(b)).collect();
    for r in s.routes.iter().take(CHARTED_ROUTES) {
        let title = format!("{} {}", r.method, r.route);
        h.push_str(&chart(
            &title,
            "latency",
            &labelled(&r.latency.buckets, &bounds),
        ));
    }
    h.push_str("</div>");

    let w = &s.writes;
    let _ = write!(
        h,
        "<h2>Writes</h2><p>{} responses in {} write calls with {} iovecs; {} short writes. \
         {} sent from where the page holds it, {} copied first.</p>{}<div class=\"charts\">",
        w.responses,
        w.syscalls,
        w.iovecs,
        w.short_writes,
        mib(w.bytes_referenced),
        mib(w.bytes_copied),
        split_bar(w.bytes_referenced, w.bytes_copied),
    );
    let calls: Vec<String> = super::record::CALLS_BOUNDS
        .iter()
        .map(|b| format!("≤{b}"))
        .collect();
    let iovecs: Vec<String> = super::record::IOVECS_BOUNDS
        .iter()
        .map(|b| format!("≤{b}"))
        .collect();
    h.push_str(&chart(
        "write calls per response",
        "calls",
        &labelled(&s.calls_per_response, &calls),
    ));
    h.push_str(&chart(
        "iovecs per response",
        "iovecs",
        &labelled(&s.iovecs_per_response, &iovecs),
    ));
    h.push_str("</div>");

    let _ = write!(
        h,
        "<h2>CPU pool</h2><p>{} threads, {} busy, {} queued (of {}), policy {}; hop round trip estimate {}.</p>\
         <table><tr><th>kind</th><th>policy</th><th>inline</th><th>offloaded</th><th>hop to pool p50 / p99</th><th>hop back p50 / p99</th><th>run p50 / p99</th></tr>",
        pool.threads,
        pool.busy,
        pool.queued,
        pool.queue_capacity,
        esc(&pool.policy),
        pool.hop_estimate_ns
            .map_or("-".to_owned(), |n| format!("{:.1} µs", n / 1000.0)),
    );
    for k in &pool.kinds {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&k.name),
            esc(&k.policy),
            k.inline,
            k.offloaded,
            pair(&k.to_pool),
            pair(&k.back),
            pair(&k.run),
        );
    }
    h.push_str("</table><div class=\"charts\">");
    for k in pool.kinds.iter().filter(|k| k.to_pool.count > 0) {
        h.push_str(&chart(
            &format!("hop to pool: {}", k.name),
            "hops",
            &hop_buckets(&k.to_pool),
        ));
    }
    h.push_str("</div>");

    if let Some(rows) = events {
        h.push_str("<h2>Event store</h2><table>");
        for (k, v) in rows {
            let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>");
    h
}

const CSS: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
h1 small{font-size:.55em;color:#666;font-weight:normal}h2{margin-top:1.4em}\
table{border-collapse:collapse}td,th{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:right}\
td:first-child,th:first-child{text-align:left}\
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #ccc;border-radius:6px;padding:.5em 1em}\
.card b{display:block;font-size:1.5em}.charts{display:flex;flex-wrap:wrap;gap:1.5em}\
.hist rect.bar{fill:#3b7dd8}.hist text{font-size:10px;fill:#444}.split{width:600px;height:14px;display:flex}\
.split span{display:block;height:14px}";

fn card(title: &str, value: &str) -> String {
    format!("<div class=\"card\">{title}<b>{value}</b></div>")
}

fn mib(bytes: u64) -> String {
    if bytes < 10 * 1024 {
        format!("{bytes} B")
    } else if bytes < 10 * 1024 * 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

fn us(v: u64) -> String {
    if v >= 10_000 {
        format!("{:.1} ms", v as f64 / 1000.0)
    } else {
        format!("{v} µs")
    }
}

fn seconds_label(s: f64) -> String {
    if s < 0.001 {
        format!("≤{:.0}µs", s * 1e6)
    } else if s < 1.0 {
        format!("≤{}ms", s * 1e3)
    } else {
        format!("≤{s}s")
    }
}

fn pair(h: &HistogramSummary) -> String {
    if h.count == 0 {
        return "-".to_owned();
    }
    format!("{:.1} / {:.1} µs", h.p50 as f64 / 1e3, h.p99 as f64 / 1e3)
}

/// Buckets with their labels; the last (unbounded) one is "more".
fn labelled(buckets: &[Bucket], labels: &[String]) -> Vec<(String, u64)> {
    buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            (
                labels.get(i).cloned().unwrap_or_else(|| "more".to_owned()),
                b.count,
            )
        })
        .collect()
}

/// A pool hop histogram (ns, every value) in power-of-two microsecond buckets, 1 µs to 1 s.
fn hop_buckets(h: &HistogramSummary) -> Vec<(String, u64)> {
    let bounds: Vec<u64> = (0..21).map(|i| 1000u64 << i).collect();
    let mut counts = vec![0u64; bounds.len() + 1];
    for &(ns, n) in &h.recorded {
        let i = bounds.iter().position(|&b| ns <= b).unwrap_or(bounds.len());
        counts[i] += n;
    }
    // Trim empty buckets off both ends so the bars have room.
    let first = counts.iter().position(|&c| c > 0).unwrap_or(0);
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
    (first..=last)
        .map(|i| {
            let label = bounds
                .get(i)
                .map_or("more".to_owned(), |b| us(b / 1000).replace(' ', ""));
            (format!("≤{label}"), counts[i])
        })
        .collect()
}

/// One histogram as an inline SVG bar chart; `data-total` (the samples) and each bar's
/// `data-count` let a test read it back.
fn chart(title: &str, unit: &str, bars: &[(String, u64)]) -> String {
    let total: u64 = bars.iter().map(|b| b.1).sum();
    let max = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    let (w, bh, gap, top, base) = (22u32, 120u32, 4u32, 18u32, 150u32);
    // Room on the right and below for the last labels, drawn at an angle.
    let width = ((bars.len() as u32).max(1) * (w + gap) + 50).max(260);
    let mut s = format!(
        "<figure><svg class=\"hist\" data-total=\"{total}\" data-unit=\"{unit}\" width=\"{width}\" height=\"{}\" role=\"img\" aria-label=\"{}\">\
         <text x=\"0\" y=\"12\">{} ({total})</text>",
        base + 60,
        esc(title),
        esc(title),
    );
    for (i, (label, n)) in bars.iter().enumerate() {
        let x = 5 + i as u32 * (w + gap);
        let hgt = ((*n as f64 / max as f64) * f64::from(bh)).round() as u32;
        let y = top + bh - hgt;
        let _ = write!(
            s,
            "<rect class=\"bar\" data-count=\"{n}\" x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{hgt}\"><title>{}: {n}</title></rect>\
             <text transform=\"translate({},{}) rotate(60)\">{}</text>",
            esc(label),
            x + 4,
            base - 8,
            esc(label),
        );
    }
    s.push_str("</svg></figure>");
    s
}

/// Referenced vs copied bytes as one split bar.
fn split_bar(referenced: u64, copied: u64) -> String {
    let total = (referenced + copied).max(1) as f64;
    let r = referenced as f64 / total * 100.0;
    format!(
        "<div class=\"split\" title=\"referenced {r:.1}%\"><span style=\"width:{r:.1}%;background:#3b7dd8\"></span>\
         <span style=\"width:{:.1}%;background:#e8a33d\"></span></div><p><small>blue: referenced, orange: copied</small></p>",
        100.0 - r
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_carries_its_counts_and_escapes_its_labels() {
        let svg = chart(
            "GET /a<b>",
            "latency",
            &[("≤1".into(), 3), ("more".into(), 1)],
        );
        assert!(svg.contains("data-total=\"4\""));
        assert!(svg.contains("data-count=\"3\""));
        assert!(svg.contains("GET /a&lt;b&gt;"));
        assert!(!svg.contains("<b>"));
    }

    #[test]
    fn hop_buckets_trim_the_empty_ends() {
        let h = HistogramSummary {
            count: 3,
            min: 1500,
            max: 3000,
            mean: 2000.0,
            p50: 1500,
            p90: 3000,
            p99: 3000,
            p999: 3000,
            recorded: vec![(1500, 2), (3000, 1)],
        };
        let b = hop_buckets(&h);
        assert_eq!(b, vec![("≤2µs".to_owned(), 2), ("≤4µs".to_owned(), 1)]);
    }
}
