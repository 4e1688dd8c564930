//! [`Stats`], the recorder: requests by route, method and status, latency histograms, the write
//! calls of every response, connections. It is galleon-http's [`Observer`]; the axum layer
//! feeds it through [`Stats::answered`]. Per answered request: one uncontended lock of the
//! calling thread's shard, a few counters and one histogram record. (One lock shared by both
//! workers cost ~4% of a 4 KB page's throughput in cache-line transfers.)

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use galleon_http::{Exchange, Observer, WriteStats};
use hdrhistogram::Histogram;

use crate::access;
use crate::snapshot::{
    CALLS_BOUNDS, Connections, IOVECS_BOUNDS, Latency, RouteSnapshot, Snapshot, Source,
    WriteTotals, Writes, bucket_of, counted,
};

/// The label of requests no route answered (404, 405, malformed).
pub const UNMATCHED: &str = "(unmatched)";

/// Largest latency kept apart: an hour, in µs (a streamed download can take that long).
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Methods kept apart; any other token a client sends is counted as `OTHER`, so requests
/// cannot grow the table.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
];

/// The row `method` is counted under: its slot (an index into [`METHODS`], then `-` for no
/// request line, then `OTHER`) and label. A `match` rather than a search of [`METHODS`]: the
/// compiler compares each candidate's few bytes inline; rows are then found by slot.
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

/// What [`Stats`] keeps and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsConfig {
    /// Keep the tables (default on). Off, only the access log is written and the diagnostics
    /// routes but health answer 404 (`galleon serve --stats off`).
    pub record: bool,
    /// Emit one `tracing` event per request at target [`ACCESS_TARGET`](crate::ACCESS_TARGET),
    /// level info (default off).
    pub access_log: bool,
}

impl Default for StatsConfig {
    fn default() -> StatsConfig {
        StatsConfig {
            record: true,
            access_log: false,
        }
    }
}

/// A server's own statistics: hand it to galleon-http as the server's observer
/// ([`Server::with_observer`](galleon_http::Server::with_observer)) or to axum as a layer
/// (feature `axum`), and serve it with [`mount`](crate::mount) or `axum::routes`.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use galleon_http::{Router, Server, ServerConfig};
/// use galleon_stats::{Stats, StatsConfig};
///
/// let stats = Arc::new(Stats::new(StatsConfig { access_log: true, ..StatsConfig::default() }));
/// let router = galleon_stats::mount(Router::new(), &stats);
/// let server = Server::new(router, ServerConfig::default()).with_observer(stats.clone());
/// assert_eq!(stats.snapshot().requests, 0);
/// # let _ = server;
/// ```
pub struct Stats {
    started: Instant,
    config: StatsConfig,
    /// What requests add up to, one shard per recording thread (by a thread-local index).
    shards: Box<[Shard]>,
    open: AtomicI64,
    connections: AtomicU64,
    refused: AtomicU64,
    /// An axum layer records into these statistics (see [`Source`]).
    axum: AtomicBool,
}

impl std::fmt::Debug for Stats {
    /// The configuration and uptime (the tables are many histograms: see [`Stats::snapshot`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stats")
            .field("config", &self.config)
            .field("uptime", &self.uptime())
            .finish_non_exhaustive()
    }
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
    /// Routes known by label only (axum's `MatchedPath`), then method.
    labelled: HashMap<Box<str>, Vec<MethodEntry>>,
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

/// Which row a request is counted under.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RouteKey<'a> {
    /// A galleon-http route: its index in the router and its pattern.
    Indexed(usize, &'a str),
    /// A route known by its pattern only (axum's `MatchedPath`).
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    Labelled(&'a str),
    /// No route answered.
    Unmatched,
}

/// One answered request, whoever reports it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answered<'a> {
    pub(crate) method: &'a str,
    pub(crate) route: RouteKey<'a>,
    pub(crate) status: u16,
    pub(crate) elapsed: Duration,
    /// Response bytes.
    pub(crate) bytes: u64,
    /// The response's write calls, when the server measures them.
    pub(crate) writes: Option<WriteStats>,
    pub(crate) completed: bool,
}

fn histogram(max: u64) -> Histogram<u64> {
    Histogram::new_with_bounds(1, max, 2).expect("constant bounds are valid")
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Stats {
    /// Statistics that record and log as `config` says; the uptime counts from now.
    pub fn new(config: StatsConfig) -> Stats {
        Stats {
            started: Instant::now(),
            config,
            shards: (0..SHARDS)
                .map(|_| Shard(Mutex::new(Inner::default())))
                .collect(),
            open: AtomicI64::new(0),
            connections: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            axum: AtomicBool::new(false),
        }
    }

    /// What these statistics were created with.
    pub fn config(&self) -> StatsConfig {
        self.config
    }

    /// Whether the tables are kept (else the diagnostics routes but health answer 404).
    pub fn recording(&self) -> bool {
        self.config.record
    }

    /// Time since the statistics were created.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Marks these statistics as fed by the axum layer (see [`Source::Axum`]).
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) fn mark_axum(&self) {
        self.axum.store(true, Ordering::Relaxed);
    }

    /// Everything recorded so far, as plain data.
    pub fn snapshot(&self) -> Snapshot {
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
                .chain(inner.labelled.iter().map(|(l, m)| (&**l, m)))
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
        let source = if self.axum.load(Ordering::Relaxed) && writes.responses == 0 {
            Source::Axum
        } else {
            Source::GalleonHttp
        };
        let measured = source == Source::GalleonHttp;
        Snapshot {
            source,
            uptime_s: self.uptime().as_secs_f64(),
            rss_bytes: rss_bytes(),
            connections: measured.then(|| Connections {
                open: self.open.load(Ordering::Relaxed).max(0) as u64,
                total: self.connections.load(Ordering::Relaxed),
                refused: self.refused.load(Ordering::Relaxed),
            }),
            requests: routes.iter().map(|r| r.count).sum(),
            routes,
            writes: measured.then(|| Writes {
                totals: writes,
                calls_per_response: counted(&calls, &CALLS_BOUNDS),
                iovecs_per_response: counted(&iovecs, &IOVECS_BOUNDS),
            }),
        }
    }

    /// Counts one answered request (when recording).
    pub(crate) fn answered(&self, a: &Answered<'_>) {
        if !self.config.record {
            return;
        }
        let (slot, method) = method_slot(a.method);
        // Whole microseconds without the u128 arithmetic of `as_micros`.
        let us = a
            .elapsed
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(a.elapsed.subsec_micros()));
        let mut inner = lock(&self.shards[shard_index()].0);
        let inner = &mut *inner;
        let methods = match a.route {
            RouteKey::Indexed(i, label) => {
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
            RouteKey::Labelled(label) => {
                if !inner.labelled.contains_key(label) {
                    inner.labelled.insert(label.into(), Vec::new());
                }
                inner.labelled.get_mut(label).expect("just inserted")
            }
            RouteKey::Unmatched => &mut inner.unmatched,
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
        match entry.statuses.iter_mut().find(|s| s.0 == a.status) {
            Some(s) => s.1 += 1,
            None => entry.statuses.push((a.status, 1)),
        }
        entry.bytes += a.bytes;
        entry.incomplete += u64::from(!a.completed);
        entry.latency_sum_us = entry.latency_sum_us.saturating_add(us);
        entry.latency_us.saturating_record(us.max(1));
        let Some(w) = a.writes else {
            return;
        };
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
        if self.config.access_log {
            access::exchange(e);
        }
        let route = match (e.route_index, e.route) {
            (Some(i), Some(label)) => RouteKey::Indexed(i, label),
            _ => RouteKey::Unmatched,
        };
        self.answered(&Answered {
            method: e.method,
            route,
            status: e.status,
            elapsed: e.elapsed,
            bytes: e.writes.bytes,
            writes: Some(e.writes),
            completed: e.completed,
        });
    }

    fn wants_target(&self) -> bool {
        self.config.access_log
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

/// The resident set of this process, from `/proc/self/status` (`None` elsewhere).
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> Stats {
        Stats::new(StatsConfig::default())
    }

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

    fn writes(snap: &Snapshot) -> &Writes {
        snap.writes.as_ref().expect("galleon-http measures writes")
    }

    #[test]
    fn requests_are_counted_by_route_method_and_status() {
        let s = stats();
        for _ in 0..3 {
            s.exchange(&exchange("GET", Some("/blah"), 200, 80));
        }
        s.exchange(&exchange("GET", Some("/blah"), 400, 30));
        s.exchange(&exchange("POST", Some("/blah"), 405, 30));
        s.exchange(&exchange("GET", None, 404, 20_000));
        let snap = s.snapshot();
        assert_eq!(snap.requests, 6);
        assert_eq!(snap.source, Source::GalleonHttp);
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
        let w = writes(&snap);
        assert_eq!(w.totals.responses, 6);
        assert_eq!(w.totals.bytes_copied, 240);
        assert_eq!(w.calls_per_response[0].count, 6);
        assert_eq!(w.iovecs_per_response[2].count, 6, "3 iovecs: the 4 bucket");
    }

    #[test]
    fn threads_record_into_their_own_shards_and_the_snapshot_adds_them_up() {
        let s = std::sync::Arc::new(stats());
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
        assert_eq!(writes(&snap).totals.responses, 600);
        assert_eq!(writes(&snap).calls_per_response[0].count, 600);
    }

    #[test]
    fn unknown_methods_share_one_row() {
        let s = stats();
        for m in ["FOO", "BAR", "BAZ"] {
            s.exchange(&exchange(m, None, 405, 10));
        }
        let snap = s.snapshot();
        assert_eq!(snap.routes.len(), 1);
        assert_eq!(snap.routes[0].method, "OTHER");
    }

    #[test]
    fn every_method_keeps_its_own_row_and_only_exact_tokens_match() {
        let s = stats();
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
        let s = stats();
        s.connection(true);
        s.connection(true);
        s.connection(false);
        s.refused();
        let c = s.snapshot().connections.unwrap();
        assert_eq!((c.open, c.total, c.refused), (1, 2, 1));
    }

    #[test]
    fn labelled_routes_share_rows_with_nothing_else_and_have_no_write_figures() {
        let s = stats();
        s.mark_axum();
        for status in [200, 200, 500] {
            s.answered(&Answered {
                method: "GET",
                route: RouteKey::Labelled("/users/{id}"),
                status,
                elapsed: Duration::from_micros(70),
                bytes: 12,
                writes: None,
                completed: true,
            });
        }
        let snap = s.snapshot();
        assert_eq!(snap.source, Source::Axum);
        assert!(snap.writes.is_none() && snap.connections.is_none());
        let r = &snap.routes[0];
        assert_eq!((r.route.as_str(), r.count, r.bytes), ("/users/{id}", 3, 36));
        assert_eq!((r.statuses["200"], r.statuses["500"]), (2, 1));
    }

    #[test]
    fn with_recording_off_nothing_is_counted() {
        let s = Stats::new(StatsConfig {
            record: false,
            access_log: false,
        });
        s.exchange(&exchange("GET", Some("/blah"), 200, 80));
        assert_eq!(s.snapshot().requests, 0);
        assert!(!s.recording());
    }
}
