//! What `galleon serve` records about itself: requests by route, method and status, latency
//! histograms, the write calls of every response, connections; and [`Snapshot`], the plain data
//! the stats page, `stats.json` and `/metrics` are drawn from. It is the server's
//! [`Observer`]: per answered request, one uncontended lock of the calling thread's shard, a few
//! counters and one histogram record. (One lock shared by both workers cost ~4% of a 4 KB
//! page's throughput in cache-line transfers; `bench/results/http.txt`.)

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use galleon_http::{Exchange, Observer};
use hdrhistogram::Histogram;
use serde::Serialize;

/// `tracing` target of the access log: one event per request (`--access-log`, or
/// `RUST_LOG=galleon::access=info`).
pub(crate) const ACCESS_TARGET: &str = "galleon::access";

/// The label of requests no route answered (404, 405, malformed).
pub(crate) const UNMATCHED: &str = "(unmatched)";

/// Latency bucket bounds in seconds: Prometheus's defaults, extended down to 50 µs, where a
/// small page's whole exchange takes place.
pub(crate) const LATENCY_BOUNDS_S: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Bounds of the write calls per response (one is the goal: one gathered `writev`).
pub(crate) const CALLS_BOUNDS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, 1024.0, 4096.0];

/// Bounds of the iovecs per response, summed over its calls.
pub(crate) const IOVECS_BOUNDS: [f64; 12] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0, 4096.0, 16384.0,
];

/// Largest latency kept apart: an hour, in µs (a streamed download can take that long).
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Methods kept apart; any other token a client sends is counted as `OTHER`, so requests
/// cannot grow the table.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
];

/// The row `method` is counted under: its slot (an index into [`METHODS`], then `-` for no
/// request line, then `OTHER`) and label. A `match` rather than a search of [`METHODS`]: the
/// compiler compares each candidate's few bytes inline, where the search called `memcmp` per
/// candidate on every request; rows are then found by slot, not by comparing strings again.
fn method_slot(method: &str) -> (u8, &'static str) {
    let slot = match method {
        "GET" => 0,
        "HEAD" => 1,
        "POST" => 2,
        "PUT" => 3,
        "DELETE" => 4,
        "PATCH" => 5,
        "OPTIONS" => 6,
        "CONNECT" => 7,
        "TRACE" => 8,
        "-" => return (9, "-"),
        _ => return (10, "OTHER"),
    };
    (slot, METHODS[usize::from(slot)])
}

/// The server's own statistics (see the module docs).
#[derive(Debug)]
pub(crate) struct Stats {
    started: Instant,
    /// Emit one access-log event per request.
    access_log: bool,
    /// Keep the tables (`--stats on`); off, only the access log is written.
    record: bool,
    /// What requests add up to, one shard per recording thread (by a thread-local index).
    shards: Box<[Shard]>,
    open: AtomicI64,
    connections: AtomicU64,
    refused: AtomicU64,
}

/// Shards: a worker thread keeps to its own, so two workers never write one cache line.
const SHARDS: usize = 16;

/// One shard, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(Mutex<Inner>);

/// The calling thread's shard index: threads are numbered as they first record.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    INDEX.with(|i| *i)
}

#[derive(Debug, Default)]
struct Inner {
    /// By the router's route index (no hashing per request), then method.
    routes: Vec<Option<Route>>,
    /// Requests no route answered, by method.
    unmatched: Vec<MethodEntry>,
    writes: WriteTotals,
    /// Responses by write calls and by iovecs, per bucket of [`CALLS_BOUNDS`] and
    /// [`IOVECS_BOUNDS`] (plus one above the last bound).
    calls: [u64; CALLS_BOUNDS.len() + 1],
    iovecs: [u64; IOVECS_BOUNDS.len() + 1],
}

#[derive(Debug)]
struct Route {
    label: Box<str>,
    methods: Vec<MethodEntry>,
}

#[derive(Debug)]
struct MethodEntry {
    /// See [`method_slot`].
    slot: u8,
    method: &'static str,
    /// (status, count), in the order first seen: a route answers few statuses.
    statuses: Vec<(u16, u64)>,
    bytes: u64,
    incomplete: u64,
    latency_sum_us: u64,
    latency_us: Histogram<u64>,
}

/// One route and method, merged over the shards.
struct Merged {
    statuses: BTreeMap<u16, u64>,
    bytes: u64,
    incomplete: u64,
    sum_us: u64,
    latency_us: Histogram<u64>,
}

/// The write calls of all responses, added up.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(crate) struct WriteTotals {
    /// Responses written (or attempted).
    pub(crate) responses: u64,
    /// Write system calls.
    pub(crate) syscalls: u64,
    /// iovecs handed to them.
    pub(crate) iovecs: u64,
    /// Calls that wrote less than they were given (a slow reader, a full socket buffer).
    pub(crate) short_writes: u64,
    /// Bytes written.
    pub(crate) bytes: u64,
    /// Bytes sent from where the page holds them, without a copy.
    pub(crate) bytes_referenced: u64,
    /// Bytes copied into a coalescing buffer first.
    pub(crate) bytes_copied: u64,
}

impl WriteTotals {
    fn add(&mut self, o: &WriteTotals) {
        self.responses += o.responses;
        self.syscalls += o.syscalls;
        self.iovecs += o.iovecs;
        self.short_writes += o.short_writes;
        self.bytes += o.bytes;
        self.bytes_referenced += o.bytes_referenced;
        self.bytes_copied += o.bytes_copied;
    }
}

fn histogram(max: u64) -> Histogram<u64> {
    Histogram::new_with_bounds(1, max, 2).expect("constant bounds are valid")
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Stats {
    /// Statistics that `record` the tables and/or write the `access_log`.
    pub(crate) fn new(record: bool, access_log: bool) -> Stats {
        Stats {
            started: Instant::now(),
            access_log,
            record,
            shards: (0..SHARDS)
                .map(|_| Shard(Mutex::new(Inner::default())))
                .collect(),
            open: AtomicI64::new(0),
            connections: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Whether the tables are kept (else the stats routes answer 404).
    pub(crate) fn recording(&self) -> bool {
        self.record
    }

    /// Seconds since the server started.
    pub(crate) fn uptime_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Everything recorded so far, as plain data.
    pub(crate) fn snapshot(&self) -> Snapshot {
        // The shards merged: by route label and method.
        let mut merged: BTreeMap<(String, &'static str), Merged> = BTreeMap::new();
        let mut writes = WriteTotals::default();
        let mut calls = [0u64; CALLS_BOUNDS.len() + 1];
        let mut iovecs = [0u64; IOVECS_BOUNDS.len() + 1];
        for shard in self.shards.iter() {
            let inner = lock(&shard.0);
            let rows = inner
                .routes
                .iter()
                .flatten()
                .map(|r| (&*r.label, &r.methods))
                .chain(std::iter::once((UNMATCHED, &inner.unmatched)));
            for (route, methods) in rows {
                for m in methods {
                    let row = merged
                        .entry((route.to_owned(), m.method))
                        .or_insert_with(|| Merged {
                            statuses: BTreeMap::new(),
                            bytes: 0,
                            incomplete: 0,
                            sum_us: 0,
                            latency_us: histogram(MAX_LATENCY_US),
                        });
                    for &(status, n) in &m.statuses {
                        *row.statuses.entry(status).or_default() += n;
                    }
                    row.bytes += m.bytes;
                    row.incomplete += m.incomplete;
                    row.sum_us = row.sum_us.saturating_add(m.latency_sum_us);
                    // Same bounds, so adding cannot fail.
                    let _ = row.latency_us.add(&m.latency_us);
                }
            }
            writes.add(&inner.writes);
            for (a, b) in calls.iter_mut().zip(inner.calls) {
                *a += b;
            }
            for (a, b) in iovecs.iter_mut().zip(inner.iovecs) {
                *a += b;
            }
        }
        let mut routes: Vec<RouteSnapshot> = merged
            .into_iter()
            .map(|((route, method), m)| RouteSnapshot {
                route,
                method,
                count: m.statuses.values().sum(),
                statuses: m
                    .statuses
                    .iter()
                    .map(|(s, n)| (s.to_string(), *n))
                    .collect(),
                bytes: m.bytes,
                incomplete: m.incomplete,
                latency: Latency::of(&m.latency_us, m.sum_us),
            })
            .collect();
        routes.sort_by(|a, b| b.count.cmp(&a.count).then(a.route.cmp(&b.route)));
        Snapshot {
            uptime_s: self.uptime_s(),
            rss_bytes: rss_bytes(),
            connections: Connections {
                open: self.open.load(Ordering::Relaxed).max(0) as u64,
                total: self.connections.load(Ordering::Relaxed),
                refused: self.refused.load(Ordering::Relaxed),
            },
            requests: routes.iter().map(|r| r.count).sum(),
            routes,
            writes,
            calls_per_response: counted(&calls, &CALLS_BOUNDS),
            iovecs_per_response: counted(&iovecs, &IOVECS_BOUNDS),
        }
    }

    fn record(&self, e: &Exchange<'_>) {
        let (slot, method) = method_slot(e.method);
        // Whole microseconds without the u128 arithmetic of `as_micros`.
        let us = e
            .elapsed
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(e.elapsed.subsec_micros()));
        let w = e.writes;
        let mut inner = lock(&self.shards[shard_index()].0);
        let inner = &mut *inner;
        let methods = match (e.route_index, e.route) {
            (Some(i), Some(label)) => {
                if inner.routes.len() <= i {
                    inner.routes.resize_with(i + 1, || None);
                }
                &mut inner.routes[i]
                    .get_or_insert_with(|| Route {
                        label: label.into(),
                        methods: Vec::new(),
                    })
                    .methods
            }
            _ => &mut inner.unmatched,
        };
        let entry = match methods.iter().position(|m| m.slot == slot) {
            Some(i) => &mut methods[i],
            None => {
                methods.push(MethodEntry {
                    slot,
                    method,
                    statuses: Vec::new(),
                    bytes: 0,
                    incomplete: 0,
                    latency_sum_us: 0,
                    latency_us: histogram(MAX_LATENCY_US),
                });
                methods.last_mut().expect("just pushed")
            }
        };
        match entry.statuses.iter_mut().find(|s| s.0 == e.status) {
            Some(s) => s.1 += 1,
            None => entry.statuses.push((e.status, 1)),
        }
        entry.bytes += w.bytes;
        entry.incomplete += u64::from(!e.completed);
        entry.latency_sum_us = entry.latency_sum_us.saturating_add(us);
        entry.latency_us.saturating_record(us.max(1));
        let t = &mut inner.writes;
        t.responses += 1;
        t.syscalls += w.syscalls;
        t.iovecs += w.iovecs;
        t.short_writes += w.short_writes;
        t.bytes += w.bytes;
        t.bytes_referenced += w.bytes_referenced;
        t.bytes_copied += w.bytes_copied;
        if w.syscalls > 0 {
            inner.calls[bucket_of(w.syscalls, &CALLS_BOUNDS)] += 1;
            inner.iovecs[bucket_of(w.iovecs, &IOVECS_BOUNDS)] += 1;
        }
    }
}

impl Observer for Stats {
    fn exchange(&self, e: &Exchange<'_>) {
        if self.access_log {
            tracing::info!(
                target: ACCESS_TARGET,
                method = e.method,
                path = e.target,
                status = e.status,
                bytes = e.writes.bytes,
                us = u64::try_from(e.elapsed.as_micros()).unwrap_or(u64::MAX),
                writes = e.writes.syscalls,
                peer = %e.peer,
                completed = e.completed,
            );
        }
        if self.record {
            self.record(e);
        }
    }

    fn wants_target(&self) -> bool {
        self.access_log
    }

    fn connection(&self, opened: bool) {
        if opened {
            self.open.fetch_add(1, Ordering::Relaxed);
            self.connections.fetch_add(1, Ordering::Relaxed);
        } else {
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts per bucket (not cumulative): `le` is the bucket's upper bound, the last one
/// `f64::INFINITY` (serialized as `null`). `scale` turns a bound into the histogram's unit.
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

/// The bucket of `v`: the first bound at or above it, else the one past the last.
fn bucket_of(v: u64, bounds: &[f64]) -> usize {
    let v = v as f64;
    bounds.iter().position(|&b| v <= b).unwrap_or(bounds.len())
}

/// Bucket counts kept as an array, as [`Bucket`]s.
fn counted(counts: &[u64], bounds: &[f64]) -> Vec<Bucket> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &count)| Bucket {
            le: bounds.get(i).copied(),
            count,
        })
        .collect()
}

/// The resident set of this process, from `/proc/self/status` (`None` elsewhere).
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Everything [`Stats`] holds, as plain data (`/_galleon/stats.json`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Snapshot {
    /// Seconds since the server started.
    pub(crate) uptime_s: f64,
    /// Resident memory, bytes.
    pub(crate) rss_bytes: Option<u64>,
    /// Connections open, accepted and refused.
    pub(crate) connections: Connections,
    /// Requests answered.
    pub(crate) requests: u64,
    /// By route and method, busiest first.
    pub(crate) routes: Vec<RouteSnapshot>,
    /// The write calls of all responses.
    pub(crate) writes: WriteTotals,
    /// Responses by their number of write calls.
    pub(crate) calls_per_response: Vec<Bucket>,
    /// Responses by their number of iovecs.
    pub(crate) iovecs_per_response: Vec<Bucket>,
}

/// Connection counts.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Connections {
    /// Open now.
    pub(crate) open: u64,
    /// Accepted since the start.
    pub(crate) total: u64,
    /// Refused with 503 over `--max-connections`.
    pub(crate) refused: u64,
}

/// One route and method.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RouteSnapshot {
    /// The route's pattern, or [`UNMATCHED`].
    pub(crate) route: String,
    /// The method (`OTHER` for unknown tokens, `-` for requests refused before parsing).
    pub(crate) method: &'static str,
    /// Requests.
    pub(crate) count: u64,
    /// Requests by status code.
    pub(crate) statuses: BTreeMap<String, u64>,
    /// Response bytes written.
    pub(crate) bytes: u64,
    /// Responses not written whole (client gone, write timeout).
    pub(crate) incomplete: u64,
    /// Time from the request's head to the response's last byte.
    pub(crate) latency: Latency,
}

/// A latency histogram, in µs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Latency {
    /// Samples.
    pub(crate) count: u64,
    /// Sum of the samples, µs.
    pub(crate) sum_us: u64,
    /// Percentiles, µs.
    pub(crate) p50_us: u64,
    /// 90th percentile, µs.
    pub(crate) p90_us: u64,
    /// 99th percentile, µs.
    pub(crate) p99_us: u64,
    /// Largest, µs.
    pub(crate) max_us: u64,
    /// Counts by [`LATENCY_BOUNDS_S`] (seconds).
    pub(crate) buckets: Vec<Bucket>,
}

impl Latency {
    fn of(h: &Histogram<u64>, sum_us: u64) -> Latency {
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
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Bucket {
    /// Upper bound (inclusive); `None`: no bound (+Inf).
    pub(crate) le: Option<f64>,
    /// Samples in this bucket.
    pub(crate) count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use galleon_http::WriteStats;
    use std::time::Duration;

    fn exchange(method: &str, route: Option<&str>, status: u16, us: u64) -> Exchange<'static> {
        let method: &'static str = Box::leak(method.to_owned().into_boxed_str());
        let route = route.map(|r| &*Box::leak(r.to_owned().into_boxed_str()));
        Exchange {
            method,
            target: "/x",
            route,
            route_index: route.map(|r| r.len()),
            status,
            elapsed: Duration::from_micros(us),
            writes: WriteStats {
                syscalls: 1,
                iovecs: 3,
                short_writes: 0,
                bytes: 100,
                bytes_referenced: 60,
                bytes_copied: 40,
            },
            completed: true,
            peer: "127.0.0.1:1".parse().unwrap(),
        }
    }

    #[test]
    fn requests_are_counted_by_route_method_and_status() {
        let s = Stats::new(true, false);
        for _ in 0..3 {
            s.exchange(&exchange("GET", Some("/blah"), 200, 80));
        }
        s.exchange(&exchange("GET", Some("/blah"), 400, 30));
        s.exchange(&exchange("POST", Some("/blah"), 405, 30));
        s.exchange(&exchange("GET", None, 404, 20_000));
        let snap = s.snapshot();
        assert_eq!(snap.requests, 6);
        let blah = &snap.routes[0];
        assert_eq!(
            (blah.route.as_str(), blah.method, blah.count),
            ("/blah", "GET", 4)
        );
        assert_eq!(blah.statuses["200"], 3);
        assert_eq!(blah.statuses["400"], 1);
        // 80 µs and 30 µs fall in the 100 µs and 50 µs buckets.
        let counts: Vec<u64> = blah.latency.buckets.iter().map(|b| b.count).collect();
        assert_eq!(&counts[..3], &[1, 3, 0]);
        assert_eq!(counts.iter().sum::<u64>(), 4);
        let missing = snap.routes.iter().find(|r| r.route == UNMATCHED).unwrap();
        assert_eq!(
            missing.latency.buckets[8].count, 1,
            "20 ms is in the 25 ms bucket"
        );
        assert_eq!(snap.writes.responses, 6);
        assert_eq!(snap.writes.bytes_copied, 240);
        assert_eq!(snap.calls_per_response[0].count, 6);
        assert_eq!(
            snap.iovecs_per_response[2].count, 6,
            "3 iovecs: the 4 bucket"
        );
    }

    #[test]
    fn threads_record_into_their_own_shards_and_the_snapshot_adds_them_up() {
        let s = std::sync::Arc::new(Stats::new(true, false));
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        s.exchange(&exchange("GET", Some("/blah"), 200 + t % 2, 80));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let snap = s.snapshot();
        assert_eq!(
            snap.routes.len(),
            1,
            "one row per route and method, not per shard"
        );
        let r = &snap.routes[0];
        assert_eq!((r.count, r.latency.count), (600, 600));
        assert_eq!((r.statuses["200"], r.statuses["201"]), (300, 300));
        assert_eq!(r.latency.sum_us, 600 * 80);
        assert_eq!(snap.writes.responses, 600);
        assert_eq!(snap.calls_per_response[0].count, 600);
    }

    #[test]
    fn unknown_methods_share_one_row() {
        let s = Stats::new(true, false);
        for m in ["FOO", "BAR", "BAZ"] {
            s.exchange(&exchange(m, None, 405, 10));
        }
        let snap = s.snapshot();
        assert_eq!(snap.routes.len(), 1);
        assert_eq!(snap.routes[0].method, "OTHER");
    }

    #[test]
    fn every_method_keeps_its_own_row_and_only_exact_tokens_match() {
        let s = Stats::new(true, false);
        let sent = [
            "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "-",
            "get", "GETS", "",
        ];
        for m in sent.iter().chain(&sent) {
            s.exchange(&exchange(m, Some("/m"), 200, 10));
        }
        let rows: BTreeMap<&str, u64> = s
            .snapshot()
            .routes
            .iter()
            .map(|r| (r.method, r.count))
            .collect();
        let mut want: BTreeMap<&str, u64> = METHODS.iter().map(|m| (*m, 2)).collect();
        want.insert("-", 2);
        want.insert("OTHER", 6);
        assert_eq!(rows, want);
    }

    #[test]
    fn connections_open_and_close() {
        let s = Stats::new(true, false);
        s.connection(true);
        s.connection(true);
        s.connection(false);
        s.refused();
        let c = s.snapshot().connections;
        assert_eq!((c.open, c.total, c.refused), (1, 2, 1));
    }
}
