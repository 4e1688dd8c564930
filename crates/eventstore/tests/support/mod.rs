//! What the consumer-side test files share: a store on each backend (SQLite in a temporary
//! directory; PostgreSQL named by `DATABASE_URL` in a fresh schema, dropped afterwards, skipped
//! loudly when unset) and collecting from subscriptions with a deadline.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use galleon_eventstore::{EventData, OpenOptions, RecordedEvent, Store, Subscription};

/// How long a test waits for a subscription to deliver what it expects before failing.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// A store under test and how to open it again (a "restart").
#[derive(Clone)]
pub struct Ctx {
    pub store: Store,
    pub url: String,
    pub options: OpenOptions,
}

impl Ctx {
    pub async fn reopen(&self) -> Store {
        Store::open_with(&self.url, self.options.clone())
            .await
            .expect("reopen")
    }
}

pub async fn run_sqlite<F, Fut>(options: OpenOptions, check: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}/events.db", dir.path().display());
    let store = Store::open_with(&url, options.clone()).await.unwrap();
    check(Ctx {
        store,
        url,
        options,
    })
    .await;
}

pub async fn run_postgres<F, Fut>(mut options: OpenOptions, check: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: PostgreSQL check, DATABASE_URL is not set ***\n");
        return;
    };
    let schema = format!("galleon_test_{}", uuid::Uuid::new_v4().simple());
    options.pg_schema = Some(schema.clone());
    options.pg_pool_size = Some(8);
    options.pg_application_name = Some(schema.clone());
    let store = Store::open_with(&url, options.clone()).await.unwrap();
    let ctx = Ctx {
        store,
        url: url.clone(),
        options,
    };
    let outcome = AssertUnwindSafe(check(ctx)).catch_unwind().await;
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Runs each `check_*` named on SQLite and on PostgreSQL, with the options `$options` gives.
#[macro_export]
macro_rules! on_both_backends {
    ($options:expr; $($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                $crate::support::run_sqlite($options, super::$check).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                $crate::support::run_postgres($options, super::$check).await;
            }
        }
    )*};
}

/// Collects `n` events from `sub`, failing after [`DELIVERY_TIMEOUT`].
pub async fn collect(sub: &mut Subscription, n: usize) -> Vec<RecordedEvent> {
    let mut out = Vec::with_capacity(n);
    tokio::time::timeout(DELIVERY_TIMEOUT, async {
        while out.len() < n {
            out.push(
                sub.next()
                    .await
                    .expect("subscription ended")
                    .expect("subscription error"),
            );
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "subscription delivered {} of {n} events in {DELIVERY_TIMEOUT:?}",
            out.len()
        )
    });
    out
}

/// An event of type `ty` whose data says `i`.
pub fn event(ty: &str, i: usize) -> EventData {
    EventData::json(ty, &serde_json::json!({ "i": i })).unwrap()
}

/// The first `n` events of `$all`, waiting until they are readable (on PostgreSQL `$all` shows
/// an event once every older transaction of the cluster has ended), and checking that `$all`
/// holds no more.
pub async fn all_events(store: &Store, n: usize) -> Vec<RecordedEvent> {
    let out = collect(&mut store.subscribe_all(0), n).await;
    let after = out.last().map_or(0, |e| e.position + 1);
    assert!(
        store.read_all(after, 10).await.unwrap().is_empty(),
        "$all holds more than {n} events"
    );
    out
}
