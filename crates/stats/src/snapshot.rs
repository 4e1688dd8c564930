//! [`Snapshot`]: everything a [`Stats`](crate::Stats) holds, as plain data: what the live page,
//! `stats.json` and `/metrics` are drawn from (`stats.json`'s `server` object is its JSON).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latency bucket bounds in seconds: Prometheus's defaults, extended down to 50 µs, where a
/// small page's whole exchange takes place.
pub const LATENCY_BOUNDS_S: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Bounds of the write calls per response (one is the goal: one gathered `writev`).
pub const CALLS_BOUNDS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, 1024.0, 4096.0];

/// Bounds of the iovecs per response, summed over its calls.
pub const IOVECS_BOUNDS: [f64; 12] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0, 4096.0, 16384.0,
];

/// Everything [`Stats`](crate::Stats) holds, as plain data (`/_galleon/stats.json`'s `server`).
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Which adapter fed the statistics: it decides what was measured.
    pub source: Source,
    /// Seconds since the statistics were created.
    pub uptime_s: f64,
    /// Resident memory, bytes (`None` where `/proc/self/status` cannot be read).
    pub rss_bytes: Option<u64>,
    /// Connections open, accepted and refused; `None` where the server does not report them
    /// (axum).
    pub connections: Option<Connections>,
    /// Requests answered.
    pub requests: u64,
    /// By route and method, busiest first.
    pub routes: Vec<RouteSnapshot>,
    /// The write calls of the responses; `None` where the server does not report them (axum).
    /// In JSON its fields are the snapshot's own (`writes`, `calls_per_response`, ...), absent
    /// when `None`.
    #[serde(flatten)]
    pub writes: Option<Writes>,
}

/// Who reported the requests, and so what their figures mean. Statistics given to an axum layer
/// report `Axum` until (if ever) galleon-http reports a response to them too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// galleon-http's [`Observer`](galleon_http::Observer): latency to the response's last
    /// byte, bytes as written (head and body), every write call, connections.
    GalleonHttp,
    /// The axum layer: latency to the response head, body bytes when the body's size is
    /// known up front; no write calls, no connections.
    Axum,
}

/// The write calls of all responses, their totals and distributions.
#[derive(Debug, Clone, Serialize)]
pub struct Writes {
    /// Totals.
    #[serde(rename = "writes")]
    pub totals: WriteTotals,
    /// Responses by their number of write calls (bounds [`CALLS_BOUNDS`]).
    pub calls_per_response: Vec<Bucket>,
    /// Responses by their number of iovecs (bounds [`IOVECS_BOUNDS`]).
    pub iovecs_per_response: Vec<Bucket>,
}

/// The write calls of all responses, added up.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct WriteTotals {
    /// Responses written (or attempted) whose write calls were measured.
    pub responses: u64,
    /// Write system calls.
    pub syscalls: u64,
    /// iovecs handed to them.
    pub iovecs: u64,
    /// Calls that wrote less than they were given (a slow reader, a full socket buffer).
    pub short_writes: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Bytes sent from where the page holds them, without a copy.
    pub bytes_referenced: u64,
    /// Bytes copied into a coalescing buffer first.
    pub bytes_copied: u64,
}

impl WriteTotals {
    pub(crate) fn add(&mut self, o: &WriteTotals) {
        self.responses += o.responses;
        self.syscalls += o.syscalls;
        self.iovecs += o.iovecs;
        self.short_writes += o.short_writes;
        self.bytes += o.bytes;
        self.bytes_referenced += o.bytes_referenced;
        self.bytes_copied += o.bytes_copied;
    }
}

/// Connection counts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Connections {
    /// Open now.
    pub open: u64,
    /// Accepted since the start.
    pub total: u64,
    /// Refused with 503 over the server's connection limit.
    pub refused: u64,
}

/// One route and method.
#[derive(Debug, Clone, Serialize)]
pub struct RouteSnapshot {
    /// The route's pattern, or [`UNMATCHED`](crate::UNMATCHED).
    pub route: String,
    /// The method (`OTHER` for unknown tokens, `-` for requests refused before parsing).
    pub method: &'static str,
    /// Requests.
    pub count: u64,
    /// Requests by status code.
    pub statuses: BTreeMap<String, u64>,
    /// Response bytes: written (galleon-http), or body bytes known up front (axum).
    pub bytes: u64,
    /// Responses not written whole (client gone, write timeout); always 0 under axum.
    pub incomplete: u64,
    /// Time from the request's head to the response's last byte (galleon-http) or head (axum).
    pub latency: Latency,
}

/// A latency histogram, in µs.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Samples.
    pub count: u64,
    /// Sum of the samples, µs.
    pub sum_us: u64,
    /// Median, µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
    /// Counts by [`LATENCY_BOUNDS_S`] (seconds).
    pub buckets: Vec<Bucket>,
}

impl Latency {
    /// The figures of a histogram of µs whose samples add up to `sum_us`.
    pub(crate) fn of(h: &Histogram<u64>, sum_us: u64) -> Latency {
        Latency {
            count: h.len(),
            sum_us,
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
            buckets: buckets(h, &LATENCY_BOUNDS_S, 1e6),
        }
    }
}

/// A histogram bucket: the samples above the previous bound, up to `le`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bucket {
    /// Upper bound (inclusive); `None`: no bound (+Inf, `null` in JSON).
    pub le: Option<f64>,
    /// Samples in this bucket.
    pub count: u64,
}

/// Counts per bucket (not cumulative) of `h` by `bounds`, the last one unbounded. `scale` turns
/// a bound into the histogram's unit.
fn buckets(h: &Histogram<u64>, bounds: &[f64], scale: f64) -> Vec<Bucket> {
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut below = 0u64;
    for &le in bounds {
        let upto = h.count_between(0, (le * scale) as u64);
        out.push(Bucket {
            le: Some(le),
            count: upto.saturating_sub(below),
        });
        below = upto.max(below);
    }
    out.push(Bucket {
        le: None,
        count: h.len().saturating_sub(below),
    });
    out
}

/// The bucket of `v` by `bounds`: the first bound at or above it, else the one past the last.
pub(crate) fn bucket_of(v: u64, bounds: &[f64]) -> usize {
    let v = v as f64;
    bounds.iter().position(|&b| v <= b).unwrap_or(bounds.len())
}

/// Bucket counts kept as an array (one per bound, then one above), as [`Bucket`]s.
pub(crate) fn counted(counts: &[u64], bounds: &[f64]) -> Vec<Bucket> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &count)| Bucket {
            le: bounds.get(i).copied(),
            count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_count_each_sample_once_and_the_last_is_unbounded() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 2).unwrap();
        for us in [30, 80, 80, 20_000, 20_000_000] {
            h.record(us).unwrap();
        }
        let b = buckets(&h, &LATENCY_BOUNDS_S, 1e6);
        assert_eq!(b.len(), LATENCY_BOUNDS_S.len() + 1);
        assert_eq!((b[0].count, b[1].count), (1, 2), "≤50 µs, ≤100 µs");
        assert_eq!(b[8].count, 1, "20 ms: the 25 ms bucket");
        assert_eq!(b.last().unwrap(), &Bucket { le: None, count: 1 });
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 5);
    }

    #[test]
    fn bucket_of_takes_the_first_bound_at_or_above() {
        assert_eq!(bucket_of(1, &CALLS_BOUNDS), 0);
        assert_eq!(bucket_of(3, &CALLS_BOUNDS), 2);
        assert_eq!(bucket_of(5000, &CALLS_BOUNDS), CALLS_BOUNDS.len());
    }

    #[test]
    fn snapshots_without_write_figures_leave_them_out_of_the_json() {
        let s = Snapshot {
            source: Source::Axum,
            uptime_s: 1.0,
            rss_bytes: None,
            connections: None,
            requests: 0,
            routes: vec![],
            writes: None,
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["source"], "axum");
        assert!(v.get("writes").is_none() && v.get("calls_per_response").is_none());
        assert!(v["connections"].is_null());
        let with = Snapshot {
            source: Source::GalleonHttp,
            writes: Some(Writes {
                totals: WriteTotals {
                    syscalls: 3,
                    ..WriteTotals::default()
                },
                calls_per_response: vec![],
                iovecs_per_response: vec![],
            }),
            ..s
        };
        let v = serde_json::to_value(&with).unwrap();
        assert_eq!(v["source"], "galleon-http");
        assert_eq!(v["writes"]["syscalls"], 3, "stats.json's shape: {v}");
        assert!(v["calls_per_response"].is_array());
    }
}
