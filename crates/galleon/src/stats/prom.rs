//! `/metrics`: the statistics in Prometheus's text format (0.0.4), encoded by `prometheus-client`
//! from a snapshot taken at scrape time (nothing is recorded twice).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::record::{Bucket, Snapshot};
use galleon_offload::{HistogramSummary, PoolSnapshot};

/// The `content-type` of the answer.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

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
    /// The CPU pool.
    pub(crate) pool: PoolSnapshot,
    /// The event store's counters, by name (`None`: no store).
    pub(crate) events: Option<Vec<(&'static str, &'static str, MetricType, f64)>>,
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

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> std::fmt::Result {
        let s = &self.stats;
        let route = |r: &super::record::RouteSnapshot| -> Labels {
            vec![("route", r.route.clone()), ("method", r.method.to_owned())]
        };
        counter(
            &mut e,
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
            &mut e,
            "galleon_http_request_duration_seconds",
            "From the request head to the response's last byte handed to the socket",
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
            &mut e,
            "galleon_http_response_bytes",
            "Response bytes written (head and body)",
            s.routes.iter().map(|r| (route(r), r.bytes)),
        )?;
        counter(
            &mut e,
            "galleon_http_responses_incomplete",
            "Responses not written whole (the client left, a write timed out)",
            s.routes.iter().map(|r| (route(r), r.incomplete)),
        )?;
        let w = &s.writes;
        counter(
            &mut e,
            "galleon_write_syscalls",
            "Write system calls (writev, write, sendfile) made for responses",
            [(vec![], w.syscalls)],
        )?;
        counter(
            &mut e,
            "galleon_write_iovecs",
            "iovecs handed to those calls",
            [(vec![], w.iovecs)],
        )?;
        counter(
            &mut e,
            "galleon_write_short_writes",
            "Write calls that took less than they were given",
            [(vec![], w.short_writes)],
        )?;
        counter(
            &mut e,
            "galleon_write_bytes",
            "Response bytes sent from where the page holds them (referenced) or copied first",
            [
                (vec![("how", "referenced".to_owned())], w.bytes_referenced),
                (vec![("how", "copied".to_owned())], w.bytes_copied),
            ],
        )?;
        histogram(
            &mut e,
            "galleon_write_calls_per_response",
            "Write calls per response (1: one gathered writev)",
            vec![HistRow {
                labels: vec![],
                sum: w.syscalls as f64,
                buckets: s.calls_per_response.clone(),
            }],
        )?;
        histogram(
            &mut e,
            "galleon_write_iovecs_per_response",
            "iovecs per response, over all its calls",
            vec![HistRow {
                labels: vec![],
                sum: w.iovecs as f64,
                buckets: s.iovecs_per_response.clone(),
            }],
        )?;
        gauge(
            &mut e,
            "galleon_connections_open",
            "Connections open now",
            [(vec![], s.connections.open as f64)],
        )?;
        counter(
            &mut e,
            "galleon_connections_accepted",
            "Connections accepted",
            [(vec![], s.connections.total)],
        )?;
        counter(
            &mut e,
            "galleon_connections_refused",
            "Connections refused with 503 over --max-connections",
            [(vec![], s.connections.refused)],
        )?;
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
            "Seconds since the server started",
            [(vec![], s.uptime_s)],
        )?;
        let p = &self.pool;
        gauge(
            &mut e,
            "galleon_offload_queued",
            "CPU pool jobs queued, not started",
            [(vec![], p.queued as f64)],
        )?;
        gauge(
            &mut e,
            "galleon_offload_busy_threads",
            "CPU pool threads running a job",
            [(vec![], p.busy as f64)],
        )?;
        counter(
            &mut e,
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
            &mut e,
            "galleon_offload_hop_seconds",
            "A job's hop to the CPU pool and back to its request",
            hops,
        )?;
        if let Some(events) = &self.events {
            for (name, help, kind, v) in events {
                match kind {
                    MetricType::Counter => counter(&mut e, name, help, [(vec![], *v as u64)])?,
                    _ => gauge(&mut e, name, help, [(vec![], *v)])?,
                }
            }
        }
        Ok(())
    }
}
