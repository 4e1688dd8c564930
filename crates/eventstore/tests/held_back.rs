//! `$all` held back by a transaction left open (PostgreSQL reads `$all` below the cluster's
//! oldest running transaction): the store names the transaction's `pid` in its stats once it is
//! older than the warning age, and forgets it when it ends. On SQLite nothing holds `$all` back.
//! The PostgreSQL check is skipped loudly without `DATABASE_URL`.

mod support;

use std::time::{Duration, Instant};

use galleon_eventstore::{ExpectedVersion, OpenOptions, Store, StoreStats};
use support::{Ctx, event};

fn options() -> OpenOptions {
    OpenOptions {
        held_back_warning: Some(Duration::from_millis(300)),
        ..OpenOptions::default()
    }
}

/// Polls the store's stats until `cond` holds, failing after 20 s.
async fn until(store: &Store, what: &str, cond: impl Fn(&StoreStats) -> bool) -> StoreStats {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = store.stats();
        if cond(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn check_a_transaction_left_open_is_named_until_it_ends(ctx: Ctx) {
    let (client, conn) = tokio_postgres::connect(&ctx.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    // A transaction with a transaction id, left open (in the test's database; any database of
    // the cluster would do).
    client
        .batch_execute("BEGIN; SELECT pg_current_xact_id();")
        .await
        .unwrap();
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let store = &ctx.store;
    store
        .append("held-1", ExpectedVersion::Any, vec![event("T", 0)])
        .await
        .unwrap();
    let held = until(store, "the holder to be named", |s| {
        s.all_held_back_by == Some(pid as u32)
    })
    .await;
    assert!(held.all_held_back_micros.unwrap() >= 300_000, "{held:?}");
    // `$all` stops below the open transaction: the event is stored but not readable yet.
    assert!(store.read_all(0, 10).await.unwrap().is_empty());
    client.batch_execute("COMMIT").await.unwrap();
    until(store, "the holder to be forgotten", |s| {
        s.all_held_back_by.is_none()
    })
    .await;
    assert_eq!(store.read_all(0, 10).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_names_a_transaction_holding_all_back_until_it_ends() {
    support::run_postgres(
        options(),
        check_a_transaction_left_open_is_named_until_it_ends,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_has_nothing_holding_all_back() {
    support::run_sqlite(options(), |ctx: Ctx| async move {
        ctx.store
            .append("held-1", ExpectedVersion::Any, vec![event("T", 0)])
            .await
            .unwrap();
        let s = ctx.store.stats();
        assert_eq!((s.all_held_back_by, s.all_held_back_micros), (None, None));
    })
    .await;
}
