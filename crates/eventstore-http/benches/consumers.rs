//! Consumers of the event store (issue 19's done-when), on both backends, in one run, one table.
//!
//! 1. **Catch-up read**: a fresh store is filled with 200,000 small events (appends of 1,000
//!    from 4 tasks; the fill rate is reported too), then `$all` is read from position 0 through a
//!    [`Subscription`] and, for reference, by [`Store::read_all`] pages of
//!    [`MAX_READ_EVENTS`]: events/s, median of 3 interleaved rounds. Target (PostgreSQL):
//!    >= 200,000 events/s through the subscription.
//! 2. **Live latency** append -> subscriber, p50/p99 in microseconds, under 10 and under 100
//!    concurrent writers, each appending 3 events per call in a loop. The writer puts a
//!    monotonic timestamp (nanoseconds since a process-wide `Instant`) in each event's data just
//!    before its append; one subscriber of `$all` subtracts it from the time it receives the
//!    event. The append call's own latency is reported beside it (the commit is part of it).
//! 3. **Append throughput** (appends/s, 10 writers, 1-event appends) with 0, 200 and 1,000 live
//!    subscribers (and 1, to tell the fan-out reader's cost from the wake-ups'), each following
//!    its own stream. [`EventFilter`] has no per-stream filter, so subscriber `i` follows the
//!    category `sub{i}` (its stream would be `sub{i}-x`); the writers append to other streams
//!    (`apw{k}-x`), so no subscriber receives anything and the row shows what filtered
//!    subscribers that match nothing cost the writers. 3 rounds, the order of the levels
//!    alternating, medians. Target: 1,000 subscribers at most 20% below 0.
//! 4. **Fan-out to sockets**: 200 subscribers of `$all` (`Store::subscribe_frames` with
//!    [`sse_frame`], as `galleon serve`: each live batch formatted once, its bytes shared),
//!    each writing the frames to its own loopback TCP socket (127.0.0.1, pairs made here, a task
//!    reading and discarding the other end). As `galleon serve` does, a subscriber writes the
//!    frames ready at once in one gathered write (taking no more once it holds 64 frames or
//!    64 KiB; a live batch's frames come as one shared slice), the shared bytes referenced and
//!    only runs of frames under 4 KiB copied (its default write policy). Meanwhile 8 writers
//!    append 1,000-event batches paced at 1.25x what the floor could deliver (so the subscribers,
//!    not the writers, should be the limit; the notes say which was). Floor, same run: 200
//!    tasks writing the same kind of frames, made beforehand and grouped 64 per write
//!    (`GALLEON_BENCH_FLOOR_FRAMES`), to 200 other socket pairs and doing nothing else. All 400
//!    sockets are written through, untimed, before the first round; rounds floor, subscribers,
//!    subscribers, floor; means. Target: delivered events/s (all subscribers together) >= 0.5x
//!    the floor. The notes also time `RecordedEvent::clone` and `sse_frame` alone, per event,
//!    and give the CPU per frame of this process and of the PostgreSQL server (its processes'
//!    schedstat, other clients included) in the floor and in the subscriber rounds.
//! 5. **Idle subscribers**: 1,000 live subscribers of `$all`, no appends, 5 s: CPU of this
//!    process (`/proc/self/stat` utime + stime, in 1/100 s ticks; the sum of the threads'
//!    `schedstat` in ns beside it) over wall time. Target: under 2% of one core. The
//!    PostgreSQL server's own CPU is not counted.
//!
//! Everything runs in this one process on a multi-thread tokio runtime with 2 workers. Run:
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo bench -p galleon-eventstore-http --bench consumers
//! ```
//!
//! PostgreSQL rows need `DATABASE_URL` (a fresh schema per run, dropped at the end); without it
//! they are printed as SKIPPED. Knobs: `GALLEON_BENCH_FILL` (events in the catch-up store,
//! default 200000), `GALLEON_BENCH_WINDOW_SECS` (each timed window of rows 2-4, default 2),
//! `GALLEON_BENCH_FLOOR_FRAMES` (frames per write of row 4's floor, default 64),
//! `GALLEON_BENCH_IDLE_SECS` (row 5, default 5), `GALLEON_BENCH_SQLITE=0` (no SQLite rows).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use galleon_eventstore::{
    EventData, EventFilter, ExpectedVersion, FanoutStats, MAX_READ_EVENTS, OpenOptions,
    RecordedEvent, Store, Subscription, TAIL_BATCH_MAX,
};
use galleon_eventstore_http::sse_frame;
use tokio::task::JoinHandle;
use uuid::Uuid;

/// Events in the store read back by row 1 (`GALLEON_BENCH_FILL`).
const FILL_EVENTS: usize = 200_000;
/// Events per append while filling.
const FILL_BATCH: usize = 1_000;
/// Tasks appending the fill concurrently.
const FILL_TASKS: usize = 4;
/// Rounds of each catch-up read (subscription, read_all), interleaved.
const CATCH_UP_ROUNDS: usize = 3;
/// Row 1's target on PostgreSQL, events/s.
const CATCH_UP_TARGET: f64 = 200_000.0;

/// Writer counts of row 2.
const LATENCY_WRITERS: [usize; 2] = [10, 100];
/// Events per append in row 2.
const LATENCY_BATCH: usize = 3;

/// Writers of row 3.
const APPEND_WRITERS: usize = 10;
/// Subscriber counts of row 3.
/// Subscriber counts of row 3: issue 19's 0, 200 and 1,000, and 1: the tailer running (one
/// `$all` read per batch) with a single wake-up per batch, to tell its cost from the wake-ups'.
const SUBSCRIBER_LEVELS: [usize; 4] = [0, 1, 200, 1_000];
/// Rounds of row 3 (all levels per round).
const APPEND_ROUNDS: usize = 3;
/// Row 3's target: appends/s with 1,000 subscribers over appends/s with none.
const APPEND_TARGET: f64 = 0.8;

/// Subscribers (and sockets) of row 4.
const SSE_SUBSCRIBERS: usize = 200;
/// Most frames per socket write, as `galleon serve` batches ready events (its
/// `SSE_BATCH_EVENTS`, `SSE_BATCH_BYTES`).
const SSE_BATCH_EVENTS: usize = 64;
const SSE_BATCH_BYTES: usize = 64 * 1024;
/// Frames shorter than this are copied into one buffer before the write, longer ones written
/// from the shared bytes: the iolist writer's default `coalesce_below`, under which `galleon
/// serve` writes its SSE bodies.
const COALESCE_BELOW: usize = 4096;
/// Most slices per `writev` (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;
/// Writer tasks of row 4, and events per append.
const SSE_WRITERS: usize = 8;
const SSE_APPEND_EVENTS: usize = 1_000;
/// Row 4's offered append rate, as a multiple of the first floor round over the subscribers.
const SSE_OFFER: f64 = 1.25;
/// Row 4's untimed writes through every socket before the first round (after [`SETTLE`]).
const WARM_UP: Duration = Duration::from_millis(500);
/// Row 4's target: delivered over floor.
const SSE_TARGET: f64 = 0.5;

/// Subscribers of row 5.
const IDLE_SUBSCRIBERS: usize = 1_000;
/// Row 5's target, % of one core.
const IDLE_TARGET_PCT: f64 = 2.0;
/// `/proc/[pid]/stat` counts CPU time in USER_HZ ticks, 100 per second on Linux (x86 and
/// arm alike); this crate has no libc to ask `sysconf(_SC_CLK_TCK)`.
const USER_HZ: f64 = 100.0;

/// Longest wait for anything that should happen (subscribers joining, events arriving).
const WAIT: Duration = Duration::from_secs(90);
/// Settling time after subscribers are live and before the clock starts.
const SETTLE: Duration = Duration::from_millis(300);

/// Nanoseconds since the first call in this process: the clock of row 2's timestamps.
fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// A small event (~40 bytes of data): a send timestamp, the writer and a counter.
fn small_event(event_type: &str, t: u64, writer: usize, i: u64) -> EventData {
    EventData::json(
        event_type,
        &serde_json::json!({"t": t, "w": writer, "i": i}),
    )
    .expect("a small JSON object serialises")
}

/// What row 2's subscriber reads back from an event.
#[derive(serde::Deserialize)]
struct Probe {
    t: u64,
}

struct Config {
    fill: usize,
    window: Duration,
    idle: Duration,
}

fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// Polls `cond` every 5 ms; panics naming `what` after [`WAIT`].
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > WAIT {
            panic!("timed out after {WAIT:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until exactly `n` subscribers follow the store's live feed.
async fn wait_live(store: &Store, n: usize) {
    wait_until(&format!("{n} live subscribers"), || {
        store.fanout_stats().live_subscribers == n
    })
    .await;
}

/// Aborts `tasks` and waits until the fan-out has no subscriber left.
async fn stop_subscribers(store: &Store, tasks: Vec<JoinHandle<()>>) {
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        match t.await {
            Ok(()) => {}
            Err(e) if e.is_cancelled() => {}
            Err(e) => panic!("a subscriber task failed: {e}"),
        }
    }
    wait_live(store, 0).await;
}

/// The next event of `sub`, panicking on an error, an end or [`WAIT`] of silence.
async fn next_event(sub: &mut Subscription) -> RecordedEvent {
    match tokio::time::timeout(WAIT, sub.next()).await {
        Ok(Some(Ok(e))) => e,
        Ok(Some(Err(e))) => panic!("subscription failed: {e}"),
        Ok(None) => panic!("subscription ended"),
        Err(_) => panic!("no event for {WAIT:?}"),
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len() - 1);
    sorted[i]
}

/// CPU time of this process so far, seconds, from `/proc/self/stat` (utime + stime).
fn proc_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("reading /proc/self/stat");
    // Fields after the command name (which may hold spaces) in parentheses: state is field 3,
    // utime 14, stime 15.
    let rest = &stat[stat.rfind(')').expect("/proc/self/stat has `(comm)`") + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    ticks as f64 / USER_HZ
}

/// On-CPU time of the threads alive now, seconds, from `/proc/self/task/*/schedstat` (ns);
/// `None` where the kernel has no schedstat. Threads that exited are missing from it.
fn sched_cpu_secs() -> Option<f64> {
    let mut ns = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path().join("schedstat");
        let text = std::fs::read_to_string(path).ok()?;
        ns += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 / 1e9)
}

// ---- row 1 ----------------------------------------------------------------------------------

/// Appends `n` events in appends of [`FILL_BATCH`] from [`FILL_TASKS`] tasks; wall time.
async fn fill(store: &Store, n: usize) -> Duration {
    assert!(
        n.is_multiple_of(FILL_BATCH * FILL_TASKS),
        "GALLEON_BENCH_FILL must be a multiple of {}",
        FILL_BATCH * FILL_TASKS
    );
    let per_task = n / FILL_BATCH / FILL_TASKS;
    let start = Instant::now();
    let tasks: Vec<_> = (0..FILL_TASKS)
        .map(|k| {
            let store = store.clone();
            tokio::spawn(async move {
                let stream = format!("fill{k}-x");
                for b in 0..per_task {
                    let events = (0..FILL_BATCH)
                        .map(|i| small_event("Filled", 0, k, (b * FILL_BATCH + i) as u64))
                        .collect();
                    store
                        .append(&stream, ExpectedVersion::Any, events)
                        .await
                        .expect("fill append");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("fill task");
    }
    start.elapsed()
}

/// Reads `$all` from 0 through a subscription until `n` events came; events/s.
async fn catch_up_subscription(store: &Store, n: usize) -> f64 {
    let start = Instant::now();
    let mut sub = store.subscribe_all(0);
    let mut last = None;
    for _ in 0..n {
        let e = next_event(&mut sub).await;
        assert!(last < Some(e.position), "positions out of order");
        last = Some(e.position);
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Reads `$all` from 0 by `read_all` pages of [`MAX_READ_EVENTS`] until `n` events came;
/// events/s.
async fn catch_up_read_all(store: &Store, n: usize) -> f64 {
    let start = Instant::now();
    let (mut from, mut got) = (0, 0);
    while got < n {
        let page = store
            .read_all(from, MAX_READ_EVENTS)
            .await
            .expect("read_all");
        let last = page
            .last()
            .expect("read_all came back empty before the end");
        from = last.position + 1;
        got += page.len();
    }
    assert_eq!(got, n, "$all holds more than the fill");
    n as f64 / start.elapsed().as_secs_f64()
}

// ---- row 2 ----------------------------------------------------------------------------------

struct Latency {
    events: u64,
    events_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    append_p50_us: f64,
    append_p99_us: f64,
}

async fn latency(store: &Store, writers: usize, window: Duration) -> Latency {
    let head = store.head_position().await.expect("head");
    let mut sub = store.subscribe_all(head);
    // Set to the number of events appended once the writers are done.
    let expected = Arc::new(AtomicU64::new(u64::MAX));
    let collector = {
        let expected = expected.clone();
        tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut last = None;
            let mut quiet = Instant::now();
            while (lat.len() as u64) < expected.load(Ordering::Acquire) {
                match tokio::time::timeout(Duration::from_millis(20), sub.next()).await {
                    Ok(Some(Ok(e))) => {
                        let now = now_ns();
                        assert!(last < Some(e.position), "positions out of order");
                        last = Some(e.position);
                        let p: Probe = e.data.parse().expect("a probe event");
                        lat.push(now.saturating_sub(p.t));
                        quiet = Instant::now();
                    }
                    Ok(Some(Err(e))) => panic!("latency subscription failed: {e}"),
                    Ok(None) => panic!("latency subscription ended"),
                    Err(_) => assert!(
                        quiet.elapsed() < WAIT,
                        "latency subscriber: {} events, then nothing for {WAIT:?}",
                        lat.len()
                    ),
                }
            }
            lat
        })
    };
    wait_live(store, 1).await;
    tokio::time::sleep(SETTLE).await;
    let start = Instant::now();
    let deadline = start + window;
    let tasks: Vec<_> = (0..writers)
        .map(|k| {
            let store = store.clone();
            tokio::spawn(async move {
                let stream = format!("lat{k}-x");
                let (mut n, mut calls) = (0u64, Vec::new());
                while Instant::now() < deadline {
                    let t = now_ns();
                    let events = (0..LATENCY_BATCH)
                        .map(|i| small_event("Probe", t, k, n + i as u64))
                        .collect();
                    store
                        .append(&stream, ExpectedVersion::Any, events)
                        .await
                        .expect("latency append");
                    calls.push(now_ns() - t);
                    n += LATENCY_BATCH as u64;
                }
                (n, calls)
            })
        })
        .collect();
    let (mut total, mut calls) = (0, Vec::new());
    for t in tasks {
        let (n, c) = t.await.expect("latency writer");
        total += n;
        calls.extend(c);
    }
    let elapsed = start.elapsed();
    expected.store(total, Ordering::Release);
    let mut lat = tokio::time::timeout(WAIT, collector)
        .await
        .expect("latency subscriber did not finish")
        .expect("latency subscriber panicked");
    assert_eq!(
        lat.len() as u64,
        total,
        "latency subscriber: events lost or repeated"
    );
    wait_live(store, 0).await;
    lat.sort_unstable();
    calls.sort_unstable();
    Latency {
        events: total,
        events_per_s: total as f64 / elapsed.as_secs_f64(),
        p50_us: percentile(&lat, 0.50) as f64 / 1e3,
        p99_us: percentile(&lat, 0.99) as f64 / 1e3,
        append_p50_us: percentile(&calls, 0.50) as f64 / 1e3,
        append_p99_us: percentile(&calls, 0.99) as f64 / 1e3,
    }
}

// ---- row 3 ----------------------------------------------------------------------------------

/// Appends/s of [`APPEND_WRITERS`] writers of 1-event appends, for `window`, with
/// `subscribers` live subscribers each following its own (empty) category. Also the fan-out's
/// counters over the window.
async fn append_rate(store: &Store, subscribers: usize, window: Duration) -> (f64, Counters) {
    let head = store.head_position().await.expect("head");
    let received = Arc::new(AtomicU64::new(0));
    let subs: Vec<_> = (0..subscribers)
        .map(|i| {
            let filter = EventFilter::category(format!("sub{i}")).expect("a category");
            let mut sub = store.subscribe(head, filter);
            let received = received.clone();
            tokio::spawn(async move {
                while let Some(r) = sub.next().await {
                    r.expect("own-stream subscription failed");
                    received.fetch_add(1, Ordering::Relaxed);
                }
                panic!("own-stream subscription ended");
            })
        })
        .collect();
    wait_live(store, subscribers).await;
    tokio::time::sleep(SETTLE).await;
    let before = store.fanout_stats();
    let start = Instant::now();
    let deadline = start + window;
    let tasks: Vec<_> = (0..APPEND_WRITERS)
        .map(|k| {
            let store = store.clone();
            tokio::spawn(async move {
                let stream = format!("apw{k}-x");
                let mut n = 0u64;
                while Instant::now() < deadline {
                    store
                        .append(
                            &stream,
                            ExpectedVersion::Any,
                            vec![small_event("Appended", 0, k, n)],
                        )
                        .await
                        .expect("append");
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("append writer");
    }
    let elapsed = start.elapsed();
    let rate = total as f64 / elapsed.as_secs_f64();
    let counters = Counters::between(before, store.fanout_stats(), elapsed);
    stop_subscribers(store, subs).await;
    assert_eq!(
        received.load(Ordering::Relaxed),
        0,
        "an own-stream subscriber received another stream's event"
    );
    (rate, counters)
}

/// The fan-out's counters over a window.
#[derive(Clone, Copy, Default)]
struct Counters {
    batches: u64,
    events: u64,
    lagged: u64,
    reads: u64,
    secs: f64,
}

impl Counters {
    fn between(a: FanoutStats, b: FanoutStats, window: Duration) -> Counters {
        Counters {
            batches: b.batches_published - a.batches_published,
            events: b.events_published - a.events_published,
            lagged: b.lagged - a.lagged,
            reads: b.subscriber_reads - a.subscriber_reads,
            secs: window.as_secs_f64(),
        }
    }

    fn add(&mut self, o: Counters) {
        self.batches += o.batches;
        self.events += o.events;
        self.lagged += o.lagged;
        self.reads += o.reads;
        self.secs += o.secs;
    }

    fn describe(&self) -> String {
        format!(
            "{} batches/s published, lagged {}, subscriber reads {}",
            int(self.batches as f64 / self.secs),
            self.lagged,
            self.reads
        )
    }
}

// ---- row 4: benches/consumers/sse.rs -------------------------------------------------------

#[path = "consumers/sse.rs"]
mod sse;
use sse::{SseResult, sse_fanout};

// ---- the table: benches/consumers/report.rs --------------------------------------------------

#[path = "consumers/report.rs"]
mod report;
use report::int;

// ---- row 5 ----------------------------------------------------------------------------------

/// % of one core used by this process with [`IDLE_SUBSCRIBERS`] live subscribers and no
/// appends: from `/proc/self/stat`, and from the threads' schedstat.
async fn idle_cpu(store: &Store, idle: Duration) -> (f64, Option<f64>) {
    let head = store.head_position().await.expect("head");
    let subs: Vec<_> = (0..IDLE_SUBSCRIBERS)
        .map(|_| {
            let mut sub = store.subscribe_all(head);
            tokio::spawn(async move {
                let e = sub.next().await;
                panic!("an idle subscriber received something: {e:?}");
            })
        })
        .collect();
    wait_live(store, IDLE_SUBSCRIBERS).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (cpu0, sched0, t0) = (proc_cpu_secs(), sched_cpu_secs(), Instant::now());
    tokio::time::sleep(idle).await;
    let (cpu1, sched1, t1) = (proc_cpu_secs(), sched_cpu_secs(), Instant::now());
    stop_subscribers(store, subs).await;
    let wall = (t1 - t0).as_secs_f64();
    let sched = match (sched0, sched1) {
        (Some(a), Some(b)) => Some((b - a) / wall * 100.0),
        _ => None,
    };
    ((cpu1 - cpu0) / wall * 100.0, sched)
}

// ---- the run --------------------------------------------------------------------------------

struct Results {
    fill: Duration,
    catch_sub: f64,
    catch_read: f64,
    latency: Vec<Latency>,
    appends: Vec<f64>,
    append_counters: Vec<Counters>,
    sse: SseResult,
    idle_pct: f64,
    idle_sched_pct: Option<f64>,
}

async fn run_backend(store: Store, cfg: &Config) -> Results {
    let name = store.backend_name();
    eprintln!("{name}: filling {} events...", cfg.fill);
    let fill_time = fill(&store, cfg.fill).await;
    eprintln!("{name}: catch-up reads...");
    let (mut subs, mut reads) = (Vec::new(), Vec::new());
    for round in 0..CATCH_UP_ROUNDS {
        if round % 2 == 0 {
            subs.push(catch_up_subscription(&store, cfg.fill).await);
            reads.push(catch_up_read_all(&store, cfg.fill).await);
        } else {
            reads.push(catch_up_read_all(&store, cfg.fill).await);
            subs.push(catch_up_subscription(&store, cfg.fill).await);
        }
    }
    let mut lat = Vec::new();
    for w in LATENCY_WRITERS {
        eprintln!("{name}: live latency, {w} writers...");
        lat.push(latency(&store, w, cfg.window).await);
    }
    let mut rates = vec![Vec::new(); SUBSCRIBER_LEVELS.len()];
    let mut counters = vec![Counters::default(); SUBSCRIBER_LEVELS.len()];
    for round in 0..APPEND_ROUNDS {
        for k in 0..SUBSCRIBER_LEVELS.len() {
            let i = if round % 2 == 0 {
                k
            } else {
                SUBSCRIBER_LEVELS.len() - 1 - k
            };
            let n = SUBSCRIBER_LEVELS[i];
            eprintln!("{name}: appends, {n} own-stream subscribers (round {round})...");
            let (rate, c) = append_rate(&store, n, cfg.window).await;
            rates[i].push(rate);
            counters[i].add(c);
        }
    }
    eprintln!("{name}: fan-out to {SSE_SUBSCRIBERS} sockets...");
    let sse = sse_fanout(&store, cfg.window).await;
    eprintln!("{name}: {IDLE_SUBSCRIBERS} idle subscribers...");
    let (idle_pct, idle_sched_pct) = idle_cpu(&store, cfg.idle).await;
    Results {
        fill: fill_time,
        catch_sub: median(subs),
        catch_read: median(reads),
        latency: lat,
        appends: rates.into_iter().map(median).collect(),
        append_counters: counters,
        sse,
        idle_pct,
        idle_sched_pct,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs us without it: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let started = Instant::now();
    now_ns();
    let cfg = Config {
        fill: env_num("GALLEON_BENCH_FILL", FILL_EVENTS),
        window: Duration::from_secs_f64(env_num("GALLEON_BENCH_WINDOW_SECS", 2.0)),
        idle: Duration::from_secs_f64(env_num("GALLEON_BENCH_IDLE_SECS", 5.0)),
    };

    let mut results: [Option<Results>; 2] = [None, None];
    let dir = tempfile::tempdir().expect("a temporary directory");
    if std::env::var("GALLEON_BENCH_SQLITE").as_deref() == Ok("0") {
        eprintln!("\n*** SQLite rows SKIPPED: GALLEON_BENCH_SQLITE=0 ***\n");
    } else {
        let sqlite = Store::open(&format!("sqlite:{}/consumers.db", dir.path().display()))
            .await
            .expect("opening the SQLite store");
        results[0] = Some(run_backend(sqlite, &cfg).await);
    }
    match std::env::var("DATABASE_URL") {
        Err(_) => eprintln!("\n*** PostgreSQL rows SKIPPED: DATABASE_URL is not set ***\n"),
        Ok(url) => {
            let schema = format!("galleon_consumers_{}", Uuid::new_v4().simple());
            let options = OpenOptions {
                pg_schema: Some(schema.clone()),
                ..OpenOptions::default()
            };
            let pg = Store::open_with(&url, options)
                .await
                .expect("opening the PostgreSQL store");
            results[1] = Some(run_backend(pg, &cfg).await);
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connecting to drop the schema");
            tokio::spawn(connection);
            client
                .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .await
                .expect("dropping the bench schema");
        }
    }
    report::print(&results, &cfg, started);
}
