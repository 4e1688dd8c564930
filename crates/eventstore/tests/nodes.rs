//! Two galleon nodes on one PostgreSQL (issue 19): appends through both, a subscriber on each;
//! both see every event once, in the same order, and agree with `$all` as each reads it.
//! Skipped loudly without `DATABASE_URL`.

mod support;

use std::collections::HashSet;

use galleon_eventstore::{ExpectedVersion, RecordedEvent};
use support::{Ctx, collect, event};
use uuid::Uuid;

/// Writers per node, batches per writer, events per batch.
const WRITERS: usize = 4;
const BATCHES: usize = 25;
const PER_BATCH: usize = 2;

async fn check_two_nodes_agree_on_all(ctx: Ctx) {
    let a = ctx.store.clone();
    let b = ctx.reopen().await;
    let mut sub_a = a.subscribe_all(0);
    let mut sub_b = b.subscribe_all(0);
    let mut writers = Vec::new();
    for (n, node) in [a.clone(), b.clone()].into_iter().enumerate() {
        for w in 0..WRITERS {
            let node = node.clone();
            writers.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..BATCHES {
                    // Half the writers share one stream across both nodes, half own theirs.
                    let stream = if w % 2 == 0 {
                        "shared-0".to_owned()
                    } else {
                        format!("node{n}-{w}")
                    };
                    let batch: Vec<_> = (0..PER_BATCH)
                        .map(|k| event("T", i * PER_BATCH + k))
                        .collect();
                    ids.extend(batch.iter().map(|e| e.id));
                    node.append(&stream, ExpectedVersion::Any, batch)
                        .await
                        .unwrap();
                }
                ids
            }));
        }
    }
    let mut appended = HashSet::new();
    for w in writers {
        appended.extend(w.await.unwrap());
    }
    let total = 2 * WRITERS * BATCHES * PER_BATCH;
    assert_eq!(appended.len(), total);

    let seen_a = collect(&mut sub_a, total).await;
    let seen_b = collect(&mut sub_b, total).await;
    let key = |es: &[RecordedEvent]| -> Vec<(u64, Uuid)> {
        es.iter().map(|e| (e.position, e.id)).collect()
    };
    assert_eq!(
        key(&seen_a),
        key(&seen_b),
        "the nodes' subscribers disagree"
    );
    assert!(
        seen_a.windows(2).all(|w| w[0].position < w[1].position),
        "positions not increasing"
    );
    let ids: HashSet<Uuid> = seen_a.iter().map(|e| e.id).collect();
    assert_eq!(ids, appended, "not every event exactly once");
    // Each stream's versions are consecutive in $all order, whichever node appended.
    let shared: Vec<u64> = seen_a
        .iter()
        .filter(|e| e.stream_id == "shared-0")
        .map(|e| e.version)
        .collect();
    assert_eq!(shared, (0..shared.len() as u64).collect::<Vec<_>>());
    // And each node's own read of $all is the same list.
    let read_a = a.read_all(0, total + 10).await.unwrap();
    let read_b = b.read_all(0, total + 10).await.unwrap();
    assert_eq!(key(&read_a), key(&seen_a));
    assert_eq!(key(&read_b), key(&seen_a));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_on_one_postgres_agree_on_all() {
    support::run_postgres(Default::default(), check_two_nodes_agree_on_all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_handles_on_one_sqlite_file_agree_on_all() {
    support::run_sqlite(Default::default(), check_two_nodes_agree_on_all).await;
}
