//! `/metrics`: the statistics in Prometheus's text format (0.0.4), encoded by `prometheus-client`
//! from a snapshot taken at scrape time (nothing is recorded twice). Figures a source does not
//! measure (axum's write calls and connections) are left out, not sent as zeros.

use galleon_offload::{HistogramSummary, PoolSnapshot};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::figures::{Figure, FigureKind};
use crate::snapshot::{Bucket, RouteSnapshot, Snapshot, Source};

/// The `content-type` of `/metrics`.
pub const METRICS_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Hop bucket bounds, seconds: the pool's hops take 1-100 µs; a queued job waits longer.
const HOP_BOUNDS_S: [f64; 12] = [
    0.000_001, 0.000_002, 0.000_005, 0.000_01, 0.000_02, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.01,
    0.1, 1.0,
];

/// What one scrape shows.
#[derive(Debug)]
pub(crate) struct Scrape {
    /// The server's own statistics.
    pub(crate) stats: Snapshot,
    /// The CPU pool, when one is shown.
    pub(crate) pool: Option<PoolSnapshot>,
    /// Extra figures (an event store's).
    pub(crate) figures: Vec<Figure>,
}

/// The scrape in Prometheus's text format.
pub(crate) fn render(scrape: Scrape) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
    Ok(out)
}

type Labels = Vec<(&'static str, String)>;

fn counter(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, u64)>,
) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
    }
    Ok(())
}

fn gauge(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, f64)>,
) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        m.encode_family(&labels)?.encode_gauge(&v)?;
    }
    Ok(())
}

/// One histogram row: labels, sum, and per-bucket (not cumulative) counts.
struct HistRow {
    labels: Labels,
    sum: f64,
    buckets: Vec<Bucket>,
}

fn histogram(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: Vec<HistRow>,
) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for row in rows {
        // Per-bucket counts: the encoder adds them up into Prometheus's cumulative `le` buckets.
        let buckets: Vec<(f64, u64)> = row
            .buckets
            .iter()
            .map(|b| (b.le.unwrap_or(f64::INFINITY), b.count))
            .collect();
        let count = row.buckets.iter().map(|b| b.count).sum();
        m.encode_family(&row.labels)?
            .encode_histogram::<NoLabelSet>(row.sum, count, &buckets, None)?;
    }
    Ok(())
}

/// A pool histogram (ns, every recorded value) in buckets of seconds.
fn hop_buckets(h: &HistogramSummary) -> (f64, Vec<Bucket>) {
    let mut counts = vec![0u64; HOP_BOUNDS_S.len() + 1];
    let mut sum = 0.0;
    for &(ns, n) in &h.recorded {
        let s = ns as f64 / 1e9;
        sum += s * n as f64;
        let i = HOP_BOUNDS_S
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(HOP_BOUNDS_S.len());
        counts[i] += n;
    }
    let buckets = counts
        .into_iter()
        .enumerate()
        .map(|(i, count)| Bucket {
            le: HOP_BOUNDS_S.get(i).copied(),
            count,
        })
        .collect();
    (sum, buckets)
}

fn route(r: &RouteSnapshot) -> Labels {
    vec![("route", r.route.clone()), ("method", r.method.to_owned())]
}

/// Requests, latency, bytes: every source has them (with its own meaning of latency and bytes).
fn requests(e: &mut DescriptorEncoder<'_>, s: &Snapshot) -> std::fmt::Result {
    let (latency_help, bytes_help) = match s.source {
        Source::GalleonHttp => (
            "From the request head to the response's last byte handed to the socket",
            "Response bytes written (head and body)",
        ),
        Source::Axum => (
            "From the request to the response head",
            "Response body bytes, of bodies whose size was known up front",
        ),
    };
    counter(
        e,
        "galleon_http_requests",
        "Requests answered, by route pattern, method and status",
        s.routes.iter().flat_map(|r| {
            r.statuses.iter().map(move |(status, n)| {
                let mut l = route(r);
                l.push(("status", status.clone()));
                (l, *n)
            })
        }),
    )?;
    histogram(
        e,
        "galleon_http_request_duration_seconds",
        latency_help,
        s.routes
            .iter()
            .map(|r| HistRow {
                labels: route(r),
                sum: r.latency.sum_us as f64 / 1e6,
                buckets: r.latency.buckets.clone(),
            })
            .collect(),
    )?;
    counter(
        e,
        "galleon_http_response_bytes",
        bytes_help,
        s.routes.iter().map(|r| (route(r), r.bytes)),
    )?;
    if s.source == Source::GalleonHttp {
        counter(
            e,
            "galleon_http_responses_incomplete",
            "Responses not written whole (the client left, a write timed out)",
            s.routes.iter().map(|r| (route(r), r.incomplete)),
        )?;
    }
    Ok(())
}

/// Write calls and connections, where the source measures them.
fn writes_and_connections(e: &mut DescriptorEncoder<'_>, s: &Snapshot) -> std::fmt::Result {
    if let Some(writes) = &s.writes {
        let w = &writes.totals;
        counter(
            e,
            "galleon_write_syscalls",
            "Write system calls (writev, write, sendfile) made for responses",
            [(vec![], w.syscalls)],
        )?;
        counter(
            e,
            "galleon_write_iovecs",
            "iovecs handed to those calls",
            [(vec![], w.iovecs)],
        )?;
        counter(
            e,
            "galleon_write_short_writes",
            "Write calls that took less than they were given",
            [(vec![], w.short_writes)],
        )?;
        counter(
            e,
            "galleon_write_bytes",
            "Response bytes sent from where the page holds them (referenced) or copied first",
            [
                (vec![("how", "referenced".to_owned())], w.bytes_referenced),
                (vec![("how", "copied".to_owned())], w.bytes_copied),
            ],
        )?;
        histogram(
            e,
            "galleon_write_calls_per_response",
            "Write calls per response (1: one gathered writev)",
            vec![HistRow {
                labels: vec![],
                sum: w.syscalls as f64,
                buckets: writes.calls_per_response.clone(),
            }],
        )?;
        histogram(
            e,
            "galleon_write_iovecs_per_response",
            "iovecs per response, over all its calls",
            vec![HistRow {
                labels: vec![],
                sum: w.iovecs as f64,
                buckets: writes.iovecs_per_response.clone(),
            }],
        )?;
    }
    if let Some(c) = &s.connections {
        gauge(
            e,
            "galleon_connections_open",
            "Connections open now",
            [(vec![], c.open as f64)],
        )?;
        counter(
            e,
            "galleon_connections_accepted",
            "Connections accepted",
            [(vec![], c.total)],
        )?;
        counter(
            e,
            "galleon_connections_refused",
            "Connections refused with 503 over the connection limit",
            [(vec![], c.refused)],
        )?;
    }
    Ok(())
}

fn pool(e: &mut DescriptorEncoder<'_>, p: &PoolSnapshot) -> std::fmt::Result {
    gauge(
        e,
        "galleon_offload_queued",
        "CPU pool jobs queued, not started",
        [(vec![], p.queued as f64)],
    )?;
    gauge(
        e,
        "galleon_offload_busy_threads",
        "CPU pool threads running a job",
        [(vec![], p.busy as f64)],
    )?;
    counter(
        e,
        "galleon_offload_jobs",
        "CPU jobs by kind and where they ran (the policy's decision)",
        p.kinds.iter().flat_map(|k| {
            [
                (
                    vec![("kind", k.name.clone()), ("ran", "inline".to_owned())],
                    k.inline,
                ),
                (
                    vec![("kind", k.name.clone()), ("ran", "offloaded".to_owned())],
                    k.offloaded,
                ),
            ]
        }),
    )?;
    let mut hops = Vec::new();
    for k in &p.kinds {
        for (hop, h) in [("to_pool", &k.to_pool), ("back", &k.back)] {
            let (sum, buckets) = hop_buckets(h);
            hops.push(HistRow {
                labels: vec![("kind", k.name.clone()), ("hop", hop.to_owned())],
                sum,
                buckets,
            });
        }
    }
    histogram(
        e,
        "galleon_offload_hop_seconds",
        "A job's hop to the CPU pool and back to its request",
        hops,
    )
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> std::fmt::Result {
        let s = &self.stats;
        requests(&mut e, s)?;
        writes_and_connections(&mut e, s)?;
        if let Some(rss) = s.rss_bytes {
            gauge(
                &mut e,
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                [(vec![], rss as f64)],
            )?;
        }
        gauge(
            &mut e,
            "galleon_uptime_seconds",
            "Seconds since the statistics started",
            [(vec![], s.uptime_s)],
        )?;
        if let Some(p) = &self.pool {
            pool(&mut e, p)?;
        }
        // Consecutive figures of one name (told apart by their labels) are one metric.
        for run in self
            .figures
            .chunk_by(|a, b| a.name == b.name && a.kind == b.kind)
        {
            let f = &run[0];
            let labels = |f: &Figure| -> Labels {
                f.label
                    .map(|(k, v)| vec![(k, v.to_owned())])
                    .unwrap_or_default()
            };
            match f.kind {
                FigureKind::Counter => counter(
                    &mut e,
                    f.name,
                    f.help,
                    run.iter().map(|f| (labels(f), f.value as u64)),
                )?,
                FigureKind::Gauge => gauge(
                    &mut e,
                    f.name,
                    f.help,
                    run.iter().map(|f| (labels(f), f.value)),
                )?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hops_are_bucketed_in_seconds_and_summed() {
        let h = HistogramSummary {
            count: 3,
            min: 1500,
            max: 3_000_000,
            mean: 0.0,
            p50: 1500,
            p90: 3_000_000,
            p99: 3_000_000,
            p999: 3_000_000,
            recorded: vec![(1500, 2), (3_000_000, 1)],
        };
        let (sum, b) = hop_buckets(&h);
        assert!((sum - (2.0 * 1.5e-6 + 3e-3)).abs() < 1e-12, "{sum}");
        assert_eq!(b[1].count, 2, "1.5 µs: the 2 µs bucket");
        assert_eq!(b[9].count, 1, "3 ms: the 10 ms bucket");
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 3);
    }
}
