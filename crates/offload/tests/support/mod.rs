//! Helpers the pool's tests share: a pool, awaiting a condition, gated and busy jobs.
#![allow(dead_code)]

use galleon_offload::{Config, Kind, OffloadError, Policy, Pool};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) fn pool(threads: usize, capacity: usize, policy: Policy) -> Pool {
    Pool::new(Config {
        threads,
        queue_capacity: capacity,
        policy,
        ..Config::default()
    })
    .unwrap()
}

/// Wait until `cond` holds (polling; a deadline turns a hang into a failure).
pub(crate) async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A job that says when it started and then blocks its pool thread until the returned sender
/// sends (or is dropped).
pub(crate) struct Gate {
    pub(crate) open: mpsc::Sender<()>,
    pub(crate) started: Arc<AtomicBool>,
}

impl Gate {
    pub(crate) fn started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }
}

pub(crate) fn gated(value: u32) -> (Gate, impl FnOnce() -> u32 + Send + 'static) {
    let (tx, rx) = mpsc::channel::<()>();
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    let job = move || {
        flag.store(true, Ordering::SeqCst);
        let _ = rx.recv();
        value
    };
    (Gate { open: tx, started }, job)
}

/// Spins for `d`: a job of a known cost.
pub(crate) fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

pub(crate) fn on_pool_thread() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with("galleon-offload-"))
}

pub(crate) fn spawn_run(
    pool: &Pool,
    kind: &Kind,
    job: impl FnOnce() -> u32 + Send + 'static,
) -> tokio::task::JoinHandle<Result<u32, OffloadError>> {
    let (pool, kind) = (pool.clone(), kind.clone());
    tokio::spawn(async move { pool.run(&kind, None, job).await })
}
