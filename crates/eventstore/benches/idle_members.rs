//! Idle consumer-group members against appends, SQLite (the hostile-client report: 1,000
//! members of one group, member timeout 3 s, took 48% of a core while idle and cut appends from
//! 1,456/s to 389/s).
//!
//! 1. **Appends/s with 0 vs 1,000 idle members** of one group (16 partitions, member timeout
//!    3 s, so a heartbeat interval of 1 s): 10 writers appending 1-event batches to their own
//!    streams, outside the group's filter (so no member receives anything), for a window of
//!    `GALLEON_BENCH_WINDOW_SECS` (default 3). Rounds alternate 0 and 1,000 members (starting
//!    with either in turn), `GALLEON_BENCH_ROUNDS` pairs (default 5); medians. Before a
//!    1,000-member window every member's stream is polled by its own task and the group's
//!    status lists all 1,000, then 1 s passes; before a 0-member window the streams are dropped
//!    and the status lists none.
//! 2. **Idle CPU** with the 1,000 members and no appends, `GALLEON_BENCH_IDLE_SECS` (default
//!    5): this process's `/proc/self/stat` utime + stime (1/100 s ticks) over wall time, and the
//!    group heartbeat transactions per second ([`galleon_eventstore::StoreStats`]).
//!
//! One process, a tokio multi-thread runtime with 2 workers. Run:
//!
//! ```text
//! cargo bench -p galleon-eventstore --bench idle_members
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use galleon_eventstore::{EventData, EventFilter, ExpectedVersion, GroupSettings, Store};

const MEMBERS: usize = 1000;
const WRITERS: usize = 10;
const GROUP: &str = "idle";

/// `/proc/[pid]/stat` counts CPU time in USER_HZ ticks, 100 per second on Linux.
const USER_HZ: f64 = 100.0;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time of this process so far, seconds, from `/proc/self/stat` (utime + stime).
fn proc_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("reading /proc/self/stat");
    // Fields after the command name (which may hold spaces): utime is field 14, stime 15.
    let rest = &stat[stat.rfind(')').expect("/proc/self/stat has `(comm)`") + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    ticks as f64 / USER_HZ
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Waits until the group's status lists `n` live members.
async fn wait_members(store: &Store, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if store.group_status(GROUP).await.unwrap().members.len() == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the group never reached {n} members"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts `MEMBERS` members, each polled by its own task, and waits until all are live.
async fn start_members(store: &Store) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::with_capacity(MEMBERS);
    for i in 0..MEMBERS {
        let (_, mut sub) = store
            .consume_group(GROUP, &format!("member-{i:04}"))
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            while let Some(r) = sub.next().await {
                r.unwrap();
            }
        }));
    }
    wait_members(store, MEMBERS).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    tasks
}

async fn stop_members(store: &Store, tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    wait_members(store, 0).await;
}

/// Appends/s of `WRITERS` writers over `window`.
async fn appends_per_sec(store: &Store, window: Duration, round: usize) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (store, stop, count) = (store.clone(), stop.clone(), count.clone());
            tokio::spawn(async move {
                let stream = format!("writer{w}-r{round}");
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let e = EventData::json("Tick", &serde_json::json!({ "i": i })).unwrap();
                    store
                        .append(&stream, ExpectedVersion::Any, vec![e])
                        .await
                        .unwrap();
                    count.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    let started = Instant::now();
    let before = count.load(Ordering::Relaxed);
    tokio::time::sleep(window).await;
    let n = count.load(Ordering::Relaxed) - before;
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    n as f64 / secs
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs us without it: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}

async fn run() {
    let window = Duration::from_secs(env_u64("GALLEON_BENCH_WINDOW_SECS", 3));
    let rounds = env_u64("GALLEON_BENCH_ROUNDS", 5) as usize;
    let idle = Duration::from_secs(env_u64("GALLEON_BENCH_IDLE_SECS", 5));
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("sqlite:{}/bench.db", dir.path().display()))
        .await
        .unwrap();
    let settings = GroupSettings {
        partitions: 16,
        member_timeout: Duration::from_secs(3),
    };
    store
        .create_group(GROUP, 0, EventFilter::category("grp").unwrap(), settings)
        .await
        .unwrap();
    // Warm-up: the file, the statements, the writer.
    appends_per_sec(&store, Duration::from_millis(500), 0).await;

    let (mut zero, mut many) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let order: [bool; 2] = if r % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for with_members in order {
            if with_members {
                let tasks = start_members(&store).await;
                many.push(appends_per_sec(&store, window, 2 * r + 1).await);
                stop_members(&store, tasks).await;
            } else {
                zero.push(appends_per_sec(&store, window, 2 * r + 2).await);
            }
        }
        eprintln!(
            "round {r}: 0 members {:.0}/s, {MEMBERS} members {:.0}/s",
            zero[r], many[r]
        );
    }

    let tasks = start_members(&store).await;
    let beats0 = store.stats().group_heartbeats;
    let cpu0 = proc_cpu_secs();
    let wall = Instant::now();
    tokio::time::sleep(idle).await;
    let cpu = proc_cpu_secs() - cpu0;
    let wall = wall.elapsed().as_secs_f64();
    let beats = store.stats().group_heartbeats - beats0;
    stop_members(&store, tasks).await;

    let (z, m) = (median(zero.clone()), median(many.clone()));
    let fmt = |xs: &[f64]| {
        xs.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "galleon-eventstore idle members, SQLite: {WRITERS} writers x 1-event appends, \
         windows {:.0} s, {rounds} interleaved pairs; group of 16 partitions, timeout 3 s",
        window.as_secs_f64()
    );
    println!("{:<58} {:>12}", "scenario", "sqlite");
    println!("{:<58} {:>12.0}", "appends/s, 0 members (median)", z);
    println!(
        "{:<58} {:>12.0}",
        format!("appends/s, {MEMBERS} idle members (median)"),
        m
    );
    println!(
        "{:<58} {:>12.2}",
        format!("{MEMBERS} members / 0 members"),
        m / z
    );
    println!(
        "{:<58} {:>11.2}%",
        format!("CPU of this process, {MEMBERS} idle members, no appends"),
        100.0 * cpu / wall
    );
    println!(
        "{:<58} {:>12.1}",
        "group heartbeat transactions/s while idle",
        beats as f64 / wall
    );
    println!("rounds, 0 members: {}", fmt(&zero));
    println!("rounds, {MEMBERS} members: {}", fmt(&many));
    println!(
        "idle window {wall:.1} s, CPU {cpu:.2} s; bench run took {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
