//! The pool threads' scheduling class (`Config::priority`), read back from /proc, and what the
//! idle class must still guarantee: jobs finish while normal threads keep every core busy.

#![cfg(target_os = "linux")]

use galleon_offload::{Config, Policy, Pool, Priority};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `SCHED_IDLE` as /proc reports it.
const SCHED_IDLE: u32 = 5;

/// The calling thread's (scheduling policy, nice value), from /proc/thread-self/stat.
fn own_class() -> (u32, i64) {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Fields after the command's closing parenthesis start at field 3: nice is field 19,
    // policy field 41.
    let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    (rest[38].parse().unwrap(), rest[16].parse().unwrap())
}

fn pool(threads: usize, priority: Priority, nice: i32) -> Pool {
    Pool::new(Config {
        threads,
        policy: Policy::Offload,
        priority,
        nice,
        ..Config::default()
    })
    .unwrap()
}

#[tokio::test]
async fn idle_puts_the_pool_threads_in_sched_idle_and_leaves_the_caller_alone() {
    let caller = own_class();
    let p = pool(2, Priority::Idle, 0);
    let k = p.kind("class");
    for _ in 0..8 {
        assert_eq!(p.run(&k, None, own_class).await.unwrap().0, SCHED_IDLE);
    }
    assert_eq!(own_class(), caller, "the caller's thread is untouched");
    assert_eq!(p.snapshot().priority, "idle");
    p.join();
}

#[tokio::test]
async fn normal_keeps_the_normal_class_at_the_configured_nice_value() {
    let (policy, nice) = own_class();
    let p = pool(1, Priority::Normal, 6);
    let k = p.kind("class");
    assert_eq!(
        p.run(&k, None, own_class).await.unwrap(),
        (policy, (nice + 6).min(19))
    );
    assert_eq!(p.snapshot().priority, "normal");
    assert_eq!(Config::default().priority, Priority::Normal);
    p.join();
}

/// Busy threads of the normal class, one per core, in this process (so in the pool's own
/// scheduling group: the worst case), spinning until `stop` or a bound.
fn hogs(stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (0..cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(120);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    std::hint::spin_loop();
                }
            })
        })
        .collect()
}

/// Jobs, and the loop length of each.
const JOBS: u64 = 6;
const WORK: u64 = 50_000;

#[tokio::test]
async fn an_idle_pool_still_finishes_jobs_while_normal_threads_keep_every_core_busy() {
    let p = pool(2, Priority::Idle, 0);
    let k = p.kind("starved");
    let stop = Arc::new(AtomicBool::new(false));
    let running = hogs(&stop);
    // Jobs of real work (tens of microseconds each), all on the idle threads: slowed (each may
    // wait a good part of a second for a sliver of CPU), not stopped.
    let mut sums = Vec::new();
    for i in 0..JOBS {
        let job = move || (0..WORK).fold(i, |a, x| a.wrapping_add(x * x) % 1_000_003);
        sums.push(tokio::time::timeout(Duration::from_secs(50), p.run(&k, None, job)).await);
    }
    let hogs_still_running = running.iter().all(|h| !h.is_finished());
    stop.store(true, Ordering::Relaxed);
    for h in running {
        h.join().unwrap();
    }
    assert!(
        hogs_still_running,
        "the hogs stopped before the jobs finished"
    );
    for (i, s) in sums.into_iter().enumerate() {
        let expected = (0..WORK).fold(i as u64, |a, x| a.wrapping_add(x * x) % 1_000_003);
        assert_eq!(s.expect("a job did not finish in 50 s"), Ok(expected));
    }
    assert_eq!(p.snapshot().kinds[0].offloaded, JOBS);
    p.join();
}
