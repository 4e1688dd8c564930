//! The conformance suite: one set of `check_*` functions, each run against SQLite (a temporary
//! file) and PostgreSQL (`DATABASE_URL`, one fresh schema per test, dropped afterwards; the
//! PostgreSQL runs print loudly and pass when `DATABASE_URL` is unset).
//!
//! The checks live by subject in the files beside this one; `on_both_backends!` at the end
//! of this file runs each on both. Tests that need PostgreSQL itself are in `postgres_only.rs`.

#[path = "../support/mod.rs"]
mod support;

use std::collections::HashSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use galleon_eventstore::{
    Direction, Error, EventData, ExpectedVersion, Json, MAX_JSON_DEPTH, OpenOptions, RecordedEvent,
    Store,
};
use support::{DELIVERY_TIMEOUT, collect};
use uuid::Uuid;

#[derive(Clone)]
struct Ctx {
    store: Store,
    url: String,
    options: OpenOptions,
    /// Set on PostgreSQL: the schema of this test (also the `application_name` of its connections).
    pg_schema: Option<String>,
}

impl Ctx {
    async fn reopen(&self) -> Store {
        Store::open_with(&self.url, self.options.clone())
            .await
            .expect("reopen")
    }
}

fn event(i: usize) -> EventData {
    // ~200 bytes of data and ~100 of metadata, like the seed's benchmark.
    let data = serde_json::json!({
        "index": i,
        "name": "a product with a reasonably long descriptive name",
        "description": "some free text that pads the payload out to about two hundred bytes",
        "price_cents": 1999,
    });
    let meta = serde_json::json!({"correlation_id": Uuid::new_v4(), "user": "conformance-suite"});
    EventData::json("TestEvent", &data)
        .unwrap()
        .with_metadata(&meta)
        .unwrap()
}

fn events(n: usize) -> Vec<EventData> {
    (0..n).map(event).collect()
}

async fn run_sqlite<F, Fut>(check: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}/nested/dir/events.db", dir.path().display());
    let options = OpenOptions::default();
    let store = Store::open_with(&url, options.clone()).await.unwrap();
    assert_eq!(store.backend_name(), "sqlite");
    check(Ctx {
        store,
        url,
        options,
        pg_schema: None,
    })
    .await;
}

/// Taken by the tests that keep a transaction open on purpose and by the one that times a NOTIFY
/// wake-up. An open transaction holds back `$all` in every schema of the cluster (the line is
/// `pg_snapshot_xmin`, which is cluster-wide), so while one of the first kind runs, an event
/// appended by the timed test can be invisible past its 500 ms bound: a correct delay, not a lost
/// NOTIFY, which made that test fail about once in eight runs.
static XMIN_HOLDERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn run_postgres<F, Fut>(check: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: PostgreSQL conformance check, DATABASE_URL is not set ***\n");
        return;
    };
    let schema = format!("galleon_test_{}", Uuid::new_v4().simple());
    let options = OpenOptions {
        pg_schema: Some(schema.clone()),
        pg_pool_size: Some(8),
        pg_application_name: Some(schema.clone()),
        ..OpenOptions::default()
    };
    let store = Store::open_with(&url, options.clone()).await.unwrap();
    assert_eq!(store.backend_name(), "postgres");
    let ctx = Ctx {
        store,
        url: url.clone(),
        options,
        pg_schema: Some(schema.clone()),
    };
    let outcome = AssertUnwindSafe(check(ctx)).catch_unwind().await;
    let client = raw_client(&url, None).await;
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Terminates the backends that `sql` (taking the application name, `$1`) selects, retrying
/// for up to 5 s until there is one: returns how many were terminated. Callers select backends
/// waiting on another transaction (`wait_event = 'transactionid'`): a backend of a busy COPY
/// also waits under `wait_event_type = 'Lock'` while it extends the table (`extend`), and
/// selecting those killed two backends instead of one about once in fifty runs.
async fn terminate_when_blocked(killer: &tokio_postgres::Client, schema: &str, sql: &str) -> usize {
    for _ in 0..200 {
        let killed = killer.query(sql, &[&schema]).await.unwrap().len();
        if killed > 0 {
            return killed;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    0
}

async fn raw_client(url: &str, schema: Option<&str>) -> tokio_postgres::Client {
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    if let Some(schema) = schema {
        config.options(format!("-c search_path={schema}"));
    }
    let (client, conn) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

macro_rules! on_both_backends {
    ($($file:ident :: $check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                super::run_sqlite(super::$file::$check).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                super::run_postgres(super::$file::$check).await;
            }
        }
    )*};
}

fn wrong_version(e: Error) -> (ExpectedVersion, Option<u64>) {
    match e {
        Error::WrongExpectedVersion { expected, actual } => (expected, actual),
        other => panic!("expected WrongExpectedVersion, got {other:?}"),
    }
}

async fn stream_len(store: &Store, stream: &str) -> Option<usize> {
    match store
        .read_stream(stream, 0, 100_000, Direction::Forward)
        .await
    {
        Ok(events) => Some(events.len()),
        Err(Error::StreamNotFound(_)) => None,
        Err(e) => panic!("read_stream({stream}): {e}"),
    }
}

/// All of `$all`, once it holds `n` events. On PostgreSQL `$all` shows an event once every
/// transaction older than it has finished, anywhere in the cluster: a concurrent test holding a
/// transaction open delays (never reorders) what this one sees, so wait for it.
async fn all_events(store: &Store, n: usize) -> Vec<RecordedEvent> {
    let deadline = tokio::time::Instant::now() + DELIVERY_TIMEOUT;
    loop {
        let all = store.read_all(0, 100_000).await.unwrap();
        assert!(
            all.len() <= n,
            "$all holds {} events, expected {n}",
            all.len()
        );
        if all.len() == n {
            return all;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "$all holds {} of {n} events",
            all.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

mod appends;
mod postgres_only;
mod reads;

on_both_backends!(
    appends::check_expected_version_semantics,
    appends::check_atomic_append,
    appends::check_idempotent_retry,
    appends::check_group_commit_mixed_outcomes,
    appends::check_json_nesting_limit,
    reads::check_read_stream_directions_and_limits,
    reads::check_reads_across_appends_match_a_model,
    reads::check_concurrent_exact_appends,
    reads::check_subscription_with_100_writers,
    reads::check_dropped_append_future,
    reads::check_reopen_keeps_data,
);
