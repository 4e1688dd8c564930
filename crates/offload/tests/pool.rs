//! The pool's behaviour, deterministically: conditions are awaited (never slept for), jobs held
//! at a gate, the adaptive model fed injected measurements.

mod support;

use galleon_offload::{Config, OffloadError, Policy, Pool};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::{busy, gated, on_pool_thread, pool, spawn_run, until};

#[tokio::test]
async fn a_panicking_job_is_an_error_and_the_pool_goes_on() {
    let pool = pool(1, 16, Policy::Offload);
    let k = pool.kind("boom");
    let r = pool.run(&k, None, || -> u32 { panic!("boom") }).await;
    assert_eq!(r, Err(OffloadError::Panicked("boom".into())));
    let r = pool
        .run(&k, None, || -> u32 { panic!("formatted {}", 7) })
        .await;
    assert_eq!(r, Err(OffloadError::Panicked("formatted 7".into())));
    // The single pool thread survived: it still runs jobs.
    for i in 0..10u32 {
        assert_eq!(
            pool.run(&k, None, move || (i, on_pool_thread())).await,
            Ok((i, true))
        );
    }
    // Inline too: a panic is the caller's error, not a crashed task.
    k.set_policy(Policy::Inline);
    let r = pool.run(&k, None, || -> u32 { panic!("inline") }).await;
    assert_eq!(r, Err(OffloadError::Panicked("inline".into())));
    let s = k.snapshot();
    assert_eq!((s.panicked, s.offloaded, s.inline), (3, 12, 1));
}

#[tokio::test]
async fn inline_runs_on_the_callers_thread_offload_on_a_pool_thread() {
    let pool = pool(2, 16, Policy::Inline);
    let k = pool.kind("where");
    let caller = std::thread::current().id();
    let ran_on = pool.run(&k, None, || std::thread::current().id()).await;
    assert_eq!(ran_on, Ok(caller));
    assert!(!pool.run(&k, None, on_pool_thread).await.unwrap());
    k.set_policy(Policy::Offload);
    assert_ne!(
        pool.run(&k, None, || std::thread::current().id()).await,
        Ok(caller)
    );
    assert!(pool.run(&k, None, on_pool_thread).await.unwrap());
    let s = k.snapshot();
    assert_eq!((s.inline, s.offloaded), (2, 2));
    // Offloaded jobs were measured both ways; inline ones only ran, and of those the second
    // took the fast path (untimed: one in SAMPLE_EVERY is timed once inline is preferred).
    assert_eq!((s.to_pool.count, s.back.count, s.run.count), (2, 2, 3));
}

#[tokio::test]
async fn a_full_queue_pushes_back() {
    let pool = pool(1, 2, Policy::Offload);
    let k = pool.kind("full");
    let (open_a, job_a) = gated(1);
    let a = spawn_run(&pool, &k, job_a);
    until("job a running", || open_a.started()).await;
    let b = spawn_run(&pool, &k, || 2);
    let c = spawn_run(&pool, &k, || 3);
    until("two jobs queued", || pool.snapshot().queued == 2).await;
    // No room: try_run says so at once; run waits.
    assert_eq!(
        pool.try_run(&k, None, || 4).await,
        Err(OffloadError::QueueFull)
    );
    let d = spawn_run(&pool, &k, || 5);
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert!(!d.is_finished(), "run must wait for room, not fail");
    assert_eq!(
        pool.snapshot().queued,
        2,
        "the queue never grows past its bound"
    );
    open_a.open.send(()).unwrap();
    assert_eq!(a.await.unwrap(), Ok(1));
    assert_eq!(b.await.unwrap(), Ok(2));
    assert_eq!(c.await.unwrap(), Ok(3));
    assert_eq!(d.await.unwrap(), Ok(5));
    assert_eq!(pool.try_run(&k, None, || 6).await, Ok(6));
}

#[tokio::test]
async fn shutdown_finishes_running_jobs_and_cancels_queued_ones() {
    let pool = pool(1, 2, Policy::Offload);
    let k = pool.kind("shutdown");
    let (open_a, job_a) = gated(1);
    let a = spawn_run(&pool, &k, job_a);
    until("job a running", || open_a.started()).await;
    let b_ran = Arc::new(AtomicBool::new(false));
    let flag = b_ran.clone();
    let b = spawn_run(&pool, &k, move || {
        flag.store(true, Ordering::SeqCst);
        2
    });
    let c = spawn_run(&pool, &k, || 3);
    until("two jobs queued", || pool.snapshot().queued == 2).await;
    // A fourth caller waits for room.
    let d = spawn_run(&pool, &k, || 4);
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    pool.shutdown();
    // Queued and waiting jobs are cancelled; new ones refused, either way.
    assert_eq!(b.await.unwrap(), Err(OffloadError::ShutDown));
    assert_eq!(c.await.unwrap(), Err(OffloadError::ShutDown));
    assert_eq!(d.await.unwrap(), Err(OffloadError::ShutDown));
    assert_eq!(pool.run(&k, None, || 5).await, Err(OffloadError::ShutDown));
    assert_eq!(
        pool.try_run(&k, None, || 6).await,
        Err(OffloadError::ShutDown)
    );
    assert!(pool.snapshot().shut_down);
    // The running job finishes and its caller gets the result.
    assert!(!a.is_finished());
    open_a.open.send(()).unwrap();
    assert_eq!(a.await.unwrap(), Ok(1));
    assert!(!b_ran.load(Ordering::SeqCst), "a cancelled job never runs");
    // And the threads exit.
    let joiner = pool.clone();
    tokio::task::spawn_blocking(move || joiner.join())
        .await
        .unwrap();
}

/// Threads of this process whose name starts with `prefix` (Linux).
#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with(prefix))
        .count()
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn dropping_the_last_pool_handle_stops_the_threads() {
    let pool = Pool::new(Config {
        threads: 2,
        policy: Policy::Offload,
        thread_name: "drop-test".into(),
        ..Config::default()
    })
    .unwrap();
    let k = pool.kind("drop");
    let clone = pool.clone();
    assert_eq!(clone.run(&k, None, || 1).await, Ok(1));
    until("threads named", || threads_named("drop-test-") == 2).await;
    drop(pool);
    assert_eq!(
        clone.run(&k, None, || 2).await,
        Ok(2),
        "a clone keeps it running"
    );
    drop(clone);
    until("threads exit", || threads_named("drop-test-") == 0).await;
    // A kind outlives its pool harmlessly.
    assert_eq!(k.snapshot().offloaded, 2);
}

#[tokio::test]
async fn a_dropped_caller_skips_its_queued_job_and_the_pool_goes_on() {
    let pool = pool(1, 4, Policy::Offload);
    let k = pool.kind("abandon");
    let (open_a, job_a) = gated(1);
    let a = spawn_run(&pool, &k, job_a);
    until("job a running", || open_a.started()).await;
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let b = spawn_run(&pool, &k, move || {
        flag.store(true, Ordering::SeqCst);
        2
    });
    until("b queued", || pool.snapshot().queued == 1).await;
    b.abort();
    assert!(b.await.unwrap_err().is_cancelled());
    open_a.open.send(()).unwrap();
    assert_eq!(a.await.unwrap(), Ok(1));
    assert_eq!(pool.run(&k, None, || 3).await, Ok(3));
    assert!(!ran.load(Ordering::SeqCst), "the abandoned job was skipped");
    assert_eq!(pool.snapshot().abandoned, 1);
    // Dropping a caller whose job is running: the job finishes, the result is dropped.
    let (open_c, job_c) = gated(4);
    let c = spawn_run(&pool, &k, job_c);
    until("c running", || open_c.started()).await;
    c.abort();
    assert!(c.await.unwrap_err().is_cancelled());
    open_c.open.send(()).unwrap();
    assert_eq!(pool.run(&k, None, || 5).await, Ok(5));
}

#[tokio::test]
async fn adaptive_switches_when_a_kinds_cost_changes() {
    let pool = pool(2, 16, Policy::adaptive());
    let k = pool.kind("changing");
    // Unknown cost: offloaded, to measure it.
    assert!(pool.run(&k, None, on_pool_thread).await.unwrap());
    // Injected measurements (no clock): a 2 us hop, 5 us jobs -> the hop is 40%: inline.
    let us = Duration::from_micros(1);
    for _ in 0..60 {
        k.observe(None, 5 * us, Some(2 * us));
    }
    assert!(!pool.run(&k, None, on_pool_thread).await.unwrap());
    // The kind became 500 us a job: the hop is 0.4%: offload.
    for _ in 0..60 {
        k.observe(None, 500 * us, None);
    }
    assert!(pool.run(&k, None, on_pool_thread).await.unwrap());
    // 5 ms a job, over the 1 ms budget: offloaded even if the hop looked huge.
    for _ in 0..60 {
        k.observe(None, 5000 * us, Some(Duration::from_millis(10)));
    }
    assert!(pool.run(&k, None, on_pool_thread).await.unwrap());
    // Cheap again, and the hop is back to 2 us: inline.
    for _ in 0..60 {
        k.observe(None, 3 * us, Some(2 * us));
    }
    assert!(!pool.run(&k, None, on_pool_thread).await.unwrap());
}

#[tokio::test]
async fn adaptive_switch_point_by_size() {
    let pool = pool(2, 16, Policy::adaptive());
    let k = pool.kind("seal");
    assert_eq!(k.switch_point(), None);
    let us = Duration::from_micros(1);
    // Seed 001's secretbox: ~4 ns a byte; a 2 us hop.
    for _ in 0..20 {
        for size in [64u64, 1024, 4096, 8192, 65536, 1 << 20] {
            k.observe(Some(size), Duration::from_nanos(4 * size), Some(2 * us));
        }
    }
    assert_eq!(k.switch_point(), Some(8192));
    let snap = pool.snapshot();
    assert_eq!(snap.kinds[0].switch_point, Some(8192));
    let json = serde_json::to_string(&snap).unwrap();
    assert!(json.contains("\"name\":\"seal\""), "{json}");
    assert!(json.contains("\"switch_point\":8192"), "{json}");
    // (The runs below measure real hops, which move the estimates: no switch point after them.)
    assert!(!pool.run(&k, Some(4096), on_pool_thread).await.unwrap());
    assert!(pool.run(&k, Some(8192), on_pool_thread).await.unwrap());
    assert!(pool.run(&k, Some(1 << 20), on_pool_thread).await.unwrap());
    assert_eq!(k.snapshot().offloaded, 2);
    k.set_policy(Policy::Offload);
    assert_eq!(k.switch_point(), None);
}

#[tokio::test]
async fn idle_pool_threads_park() {
    let pool = pool(2, 16, Policy::Offload);
    let k = pool.kind("idle");
    for i in 0..100u32 {
        assert_eq!(pool.run(&k, None, move || i).await, Ok(i));
    }
    // Spinning is bounded (20 us by default): both threads end up parked, using no CPU.
    until("both threads parked", || pool.snapshot().parked == 2).await;
    assert_eq!(pool.snapshot().busy, 0);
}

#[test]
fn the_same_name_is_the_same_kind() {
    let pool = pool(1, 4, Policy::Inline);
    let a = pool.kind("x");
    a.set_policy(Policy::Offload);
    assert_eq!(pool.kind("x").policy(), Policy::Offload);
    assert_eq!(pool.kind("y").policy(), Policy::Inline);
    assert_eq!(pool.snapshot().kinds.len(), 2);
    pool.join();
}

#[tokio::test(flavor = "current_thread")]
async fn the_awaiting_spin_lets_the_workers_other_tasks_run() {
    // A hang guard: if the spin held the (only) runtime thread, the job below would never be let
    // through its gate.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(60));
        eprintln!("the awaiting side blocked its runtime thread");
        std::process::exit(1);
    });
    let pool = Pool::new(Config {
        threads: 1,
        policy: Policy::Offload,
        await_spin: Duration::from_secs(3600),
        ..Config::default()
    })
    .unwrap();
    let k = pool.kind("spin");
    // A cheap kind, so the caller spins (politely) rather than parking.
    k.observe(None, Duration::from_micros(1), None);
    let (gate, job) = gated(7);
    let opener = tokio::spawn(async move {
        while !gate.started() {
            tokio::task::yield_now().await;
        }
        gate.open.send(()).unwrap();
    });
    assert_eq!(pool.run(&k, None, job).await, Ok(7));
    opener.await.unwrap();
}

#[tokio::test]
async fn try_inline_runs_here_or_hands_the_job_back_for_offload() {
    let p = pool(1, 4, Policy::Inline);
    let k = p.kind("hot");
    let local = 7;
    // Inline: run now, borrowing the caller's data, on the caller's thread.
    assert_eq!(
        p.try_inline(&k, None, || (local, on_pool_thread())),
        Some(Ok((7, false)))
    );
    assert_eq!(
        p.try_inline(&k, None, || -> u32 { panic!("hot") }),
        Some(Err(OffloadError::Panicked("hot".into())))
    );
    // Offload: not run; the owned job goes to a pool thread, counted once.
    k.set_policy(Policy::Offload);
    let ran = AtomicBool::new(false);
    assert_eq!(
        p.try_inline(&k, None, || ran.store(true, Ordering::SeqCst)),
        None
    );
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(p.offload(&k, None, on_pool_thread).await, Ok(true));
    let s = k.snapshot();
    assert_eq!((s.inline, s.offloaded, s.panicked), (2, 1, 1));
    p.shutdown();
    assert_eq!(
        p.try_inline(&k, None, || 1),
        Some(Err(OffloadError::ShutDown))
    );
    assert_eq!(p.offload(&k, None, || 1).await, Err(OffloadError::ShutDown));
}

#[tokio::test]
async fn preferred_inline_jobs_are_counted_all_and_timed_one_in_sixteen() {
    let pool = pool(1, 4, Policy::adaptive());
    let k = pool.kind("hot");
    let us = Duration::from_micros(1);
    for _ in 0..60 {
        k.observe(None, 5 * us, Some(2 * us));
    }
    for _ in 0..64 {
        assert!(!pool.run(&k, None, on_pool_thread).await.unwrap());
    }
    let s = k.snapshot();
    assert_eq!(s.inline, 64);
    // One in 16 per thread took the full path, timed (and may have resampled to the pool).
    assert!((4..=8).contains(&(s.run.count)), "timed {}", s.run.count);
    // The cost jumps past the budget: the next job is offloaded, not run on the fast path.
    k.observe(None, 5000 * us, None);
    assert!(pool.run(&k, None, on_pool_thread).await.unwrap());
}

/// The nice value of the calling thread, from /proc (Linux).
fn own_nice() -> i64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Fields after the command's closing parenthesis; nice is field 19 of the whole line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split_whitespace().nth(16).unwrap().parse().unwrap()
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn pool_threads_take_the_configured_nice_value_and_callers_keep_theirs() {
    let base = own_nice();
    let p = Pool::new(Config {
        threads: 1,
        policy: Policy::Offload,
        nice: 7,
        ..Config::default()
    })
    .unwrap();
    let k = p.kind("nice");
    assert_eq!(p.run(&k, None, own_nice).await, Ok((base + 7).min(19)));
    assert_eq!(own_nice(), base, "the caller's thread is untouched");
}

#[tokio::test]
async fn a_resample_does_not_wait_behind_a_busy_pool() {
    // A budget no preempted 5 us job can exceed: on a loaded machine one inline job preempted
    // for a time slice (several ms) would jump the cost over the default 1 ms budget, and that
    // job, forced to the pool rather than resampled, would rightly wait behind the blocker.
    let p = pool(
        1,
        16,
        Policy::Adaptive {
            max_overhead: galleon_offload::DEFAULT_MAX_OVERHEAD,
            latency_budget: Duration::from_secs(3600),
        },
    );
    let cheap = p.kind("cheap");
    let us = Duration::from_micros(1);
    for _ in 0..60 {
        cheap.observe(None, 5 * us, Some(2 * us));
    }
    // Idle pool: among 4096 jobs, resamples (one in 64 full decisions) go to the pool. The jobs
    // take 5 us: a job too short for any hop to pay is never resampled.
    for _ in 0..4096 {
        p.run(&cheap, None, move || busy(5 * us)).await.unwrap();
    }
    let idle = cheap.snapshot().offloaded;
    assert!(idle > 0, "no resample reached the pool");
    // A long job holds the only thread: resamples now run inline instead of queueing.
    let blocker = p.kind("blocker");
    blocker.set_policy(Policy::Offload);
    let (gate, job) = gated(1);
    let held = spawn_run(&p, &blocker, job);
    until("the blocker started", || gate.started()).await;
    for _ in 0..4096 {
        let job = move || {
            busy(5 * us);
            on_pool_thread()
        };
        let ran = tokio::time::timeout(Duration::from_secs(20), p.run(&cheap, None, job));
        let on_pool = ran.await.expect("a cheap job queued behind the blocker");
        assert!(!on_pool.unwrap());
    }
    assert_eq!(
        cheap.snapshot().offloaded,
        idle,
        "a resample queued behind the blocker"
    );
    drop(gate.open);
    assert_eq!(held.await.unwrap(), Ok(1));
}

#[tokio::test]
async fn a_job_under_the_budget_runs_inline_rather_than_wait_behind_a_busy_pool() {
    let p = pool(1, 16, Policy::adaptive());
    let mid = p.kind("mid");
    let us = Duration::from_micros(1);
    // 100 us of work and a 2 us hop: the estimates prefer the pool, and 100 us is well under the
    // 1 ms budget, so inline is allowed too.
    for _ in 0..60 {
        mid.observe(None, 100 * us, Some(2 * us));
    }
    assert!(p.run(&mid, None, on_pool_thread).await.unwrap());
    let blocker = p.kind("blocker");
    blocker.set_policy(Policy::Offload);
    let (gate, job) = gated(1);
    let held = spawn_run(&p, &blocker, job);
    until("the blocker started", || gate.started()).await;
    // The pool's only thread is held: the wait would be the blocker's whole run, which the hop
    // estimate leaves out. The job runs here instead.
    let ran = tokio::time::timeout(Duration::from_secs(20), p.run(&mid, None, on_pool_thread));
    let on_pool = ran.await.expect("the job queued behind the blocker");
    assert!(!on_pool.unwrap());
    // A job over the budget still goes to the pool and waits its turn.
    let heavy = p.kind("heavy");
    for _ in 0..60 {
        heavy.observe(None, 5000 * us, Some(2 * us));
    }
    let waiting = spawn_run(&p, &heavy, || u32::from(on_pool_thread()));
    until("the heavy job is queued", || p.snapshot().queued == 1).await;
    drop(gate.open);
    assert_eq!(held.await.unwrap(), Ok(1));
    assert_eq!(
        waiting.await.unwrap(),
        Ok(1),
        "the heavy job ran on the pool"
    );
}

#[tokio::test]
async fn waiting_for_a_busy_thread_is_measured_but_not_counted_as_the_hop() {
    let p = pool(1, 16, Policy::Offload);
    let blocker = p.kind("blocker");
    let queued = p.kind("queued");
    let (gate, job) = gated(1);
    let held = spawn_run(&p, &blocker, job);
    until("the blocker started", || gate.started()).await;
    let waiting = spawn_run(&p, &queued, || 2);
    until("the second job is queued", || p.snapshot().queued == 1).await;
    let hold = Duration::from_millis(60);
    tokio::time::sleep(hold).await;
    gate.open.send(()).unwrap();
    assert_eq!(held.await.unwrap(), Ok(1));
    assert_eq!(waiting.await.unwrap(), Ok(2));
    let h = queued.histograms();
    let (to_pool, waited) = (h.to_pool.max(), h.waited.max());
    assert!(to_pool >= hold.as_nanos() as u64, "to_pool {to_pool}");
    assert!(waited >= hold.as_nanos() as u64, "waited {waited}");
    assert!(waited <= to_pool, "waited {waited} > to_pool {to_pool}");
    // The model's hop is what is left: the move itself, not the 60 ms in the queue.
    let hop = queued.estimated_hop(None);
    assert!(hop < hold / 2, "hop estimate {hop:?} includes the wait");
    // A job that found the thread free waited for nothing. The thread counts itself free only
    // after it has sent the last result: wait for that, or the job may find it finishing.
    until("the thread is free", || p.snapshot().busy == 0).await;
    let free = p.kind("free");
    assert_eq!(p.run(&free, None, || 3).await, Ok(3));
    assert_eq!(free.histograms().waited.max(), 0);
    assert_eq!(queued.snapshot().waited.count, 1);
}
