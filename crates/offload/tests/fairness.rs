//! No kind of job holds the pool while another waits: lanes taken in turn, and caps per kind.
//! Deterministic: jobs are held at gates and conditions awaited, never slept for.

mod support;

use galleon_offload::Policy;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{gated, pool, spawn_run, until};

#[tokio::test]
async fn a_job_of_another_kind_waits_for_one_job_of_a_flood_not_for_all_of_it() {
    let p = pool(1, 64, Policy::Offload);
    let (blocker, flood, light) = (p.kind("blocker"), p.kind("flood"), p.kind("light"));
    let (gate, job) = gated(0);
    let held = spawn_run(&p, &blocker, job);
    until("the blocker started", || gate.started()).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiting = Vec::new();
    for i in 0..8u32 {
        let order = order.clone();
        waiting.push(spawn_run(&p, &flood, move || {
            order.lock().unwrap().push(format!("flood {i}"));
            i
        }));
        until("the flood job is queued", || {
            p.snapshot().queued == i as usize + 1
        })
        .await;
    }
    let log = order.clone();
    let last = spawn_run(&p, &light, move || {
        log.lock().unwrap().push("light".to_owned());
        99
    });
    until("the light job is queued", || p.snapshot().queued == 9).await;
    drop(gate.open);
    assert_eq!(held.await.unwrap(), Ok(0));
    assert_eq!(last.await.unwrap(), Ok(99));
    for (i, w) in waiting.into_iter().enumerate() {
        assert_eq!(
            w.await.unwrap(),
            Ok(i as u32),
            "each kind's jobs keep their order"
        );
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(
        &order[..2],
        ["flood 0", "light"],
        "the light job took the next turn: {order:?}"
    );
}

#[tokio::test]
async fn a_capped_kind_leaves_a_thread_free_for_the_others() {
    let p = pool(2, 64, Policy::Offload);
    let (heavy, light) = (p.kind("heavy"), p.kind("light"));
    heavy.set_max_threads(1);
    let (first, job) = gated(1);
    let held = spawn_run(&p, &heavy, job);
    until("the first heavy job started", || first.started()).await;
    let (second, job) = gated(2);
    let queued = spawn_run(&p, &heavy, job);
    until("the second heavy job is queued", || {
        p.snapshot().queued == 1
    })
    .await;
    // The second thread is free, but the heavy kind holds its one thread: the light job takes
    // the free thread, however many heavy jobs wait.
    let ran = tokio::time::timeout(Duration::from_secs(20), p.run(&light, None, || 3));
    assert_eq!(
        ran.await.expect("the light job waited for a heavy one"),
        Ok(3)
    );
    assert!(!second.started(), "the heavy kind went over its cap");
    drop(first.open);
    assert_eq!(held.await.unwrap(), Ok(1));
    until("the second heavy job started", || second.started()).await;
    drop(second.open);
    assert_eq!(queued.await.unwrap(), Ok(2));
    assert_eq!(p.snapshot().queued, 0);
}

#[tokio::test]
async fn an_uncapped_kind_uses_every_thread() {
    let p = pool(2, 64, Policy::Offload);
    let heavy = p.kind("heavy");
    assert_eq!(heavy.max_threads(), 0, "no cap by default");
    let (a, job_a) = gated(1);
    let (b, job_b) = gated(2);
    let (ra, rb) = (spawn_run(&p, &heavy, job_a), spawn_run(&p, &heavy, job_b));
    until("both jobs started", || a.started() && b.started()).await;
    drop((a.open, b.open));
    assert_eq!((ra.await.unwrap(), rb.await.unwrap()), (Ok(1), Ok(2)));
}

#[tokio::test]
async fn removing_a_cap_lets_the_waiting_jobs_use_every_thread() {
    let p = pool(2, 64, Policy::Offload);
    let heavy = p.kind("heavy");
    heavy.set_max_threads(1);
    let (a, job_a) = gated(1);
    let ra = spawn_run(&p, &heavy, job_a);
    until("the first job started", || a.started()).await;
    heavy.set_max_threads(0);
    let (b, job_b) = gated(2);
    let rb = spawn_run(&p, &heavy, job_b);
    until("the second job started beside the first", || b.started()).await;
    drop((a.open, b.open));
    assert_eq!((ra.await.unwrap(), rb.await.unwrap()), (Ok(1), Ok(2)));
}
