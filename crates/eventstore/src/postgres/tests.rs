//! Tests of the backend as a whole: the migrations' SQL, upgrades of old schemas in place, the WAL
//! nudge. (The conformance suite in `tests/` checks the store's behaviour on both backends.)

use super::notify::nudge_wal_writer;
use super::read::SQL_READ_ALL;
use super::schema::{MIGRATIONS, migrate_to};
use std::time::Duration;

use super::writer::{JsonText, MAX_BATCH_EVENTS, POSITION_SHIFT};
use super::*;
use tokio_postgres::NoTls;

#[test]
fn sql_uses_the_position_shift() {
    let shift = format!("<< {POSITION_SHIFT}");
    let per_txn = format!("{}", 1u64 << POSITION_SHIFT);
    // Migration 3 replaces both functions of 1 and 2; migration 4 `galleon_append` again.
    for (m, functions) in [(0, 1), (1, 1), (2, 2), (3, 1)] {
        assert!(
            MIGRATIONS[m].matches(&shift).count() >= functions,
            "migration {m}"
        );
        assert_eq!(
            MIGRATIONS[m].matches(&per_txn).count(),
            3 * functions,
            "migration {m}"
        );
    }
    assert_eq!(MAX_BATCH_EVENTS, 1 << POSITION_SHIFT);
    assert!(SQL_READ_ALL.contains(&shift));
}

/// Schemas of versions 1, 2 and 3, built by the real migrations and holding events written by
/// their own functions, are upgraded in place when a store opens them: every stream gets a
/// number, every event its stream's, old events read as appends of one event each, and the
/// store reads, appends (alone and group-committed) and checks expected versions across the
/// old and new data.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upgrades_version_1_2_and_3_schemas_in_place() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: PostgreSQL upgrade test, DATABASE_URL is not set ***\n");
        return;
    };
    for old in [1, 2, 3] {
        let schema = format!("galleon_test_{}", uuid::Uuid::new_v4().simple());
        let result = upgrade_from(&url, &schema, old).await;
        let (admin, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(conn);
        admin
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
        result.unwrap_or_else(|e| panic!("upgrade from version {old}: {e}"));
    }
}

fn data(n: usize) -> Vec<EventData> {
    (0..n)
        .map(|i| {
            EventData::json("Old", &serde_json::json!({ "i": i }))
                .unwrap()
                .with_metadata(&serde_json::json!({ "m": i }))
                .unwrap()
        })
        .collect()
}

async fn upgrade_from(url: &str, schema: &str, old: usize) -> Result<()> {
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.options(format!("-c search_path={schema}"));
    let (raw, conn) = config.connect(NoTls).await?;
    tokio::spawn(conn);
    migrate_to(&raw, Some(schema), old).await?;
    // Events as the old schema's own function stores them.
    let old_append = "SELECT status FROM galleon_append($1, -2, $2, $3, $4, $5)";
    for (stream, n) in [("old-a", 3), ("old-b", 2)] {
        let evs = data(n);
        let ids: Vec<uuid::Uuid> = evs.iter().map(|e| e.id).collect();
        let types: Vec<&str> = evs.iter().map(|e| e.event_type.as_str()).collect();
        let d: Vec<JsonText<'_>> = evs.iter().map(|e| JsonText(e.data.get())).collect();
        let m: Vec<JsonText<'_>> = evs.iter().map(|e| JsonText(e.metadata.get())).collect();
        let status: i32 = raw
            .query_one(old_append, &[&stream, &ids, &types, &d, &m])
            .await?
            .get(0);
        assert_eq!(status, 0);
    }

    let store = PgStore::open(
        url,
        PgOptions {
            schema: Some(schema.to_owned()),
            pool_size: Some(8),
            application_name: None,
            held_back_warning: None,
        },
    )
    .await?;
    let version: i64 = raw
        .query_one("SELECT max(version) FROM schema_version", &[])
        .await?
        .get(0);
    assert_eq!(version, MIGRATIONS.len() as i64);
    let unnumbered: i64 = raw
        .query_one(
            "SELECT count(*) FROM events e JOIN streams s USING (stream_id) \
             WHERE e.stream_no IS DISTINCT FROM s.stream_no",
            &[],
        )
        .await?
        .get(0);
    assert_eq!(unnumbered, 0, "every event carries its stream's number");
    let numbers: i64 = raw
        .query_one("SELECT count(DISTINCT stream_no) FROM streams", &[])
        .await?
        .get(0);
    assert_eq!(numbers, 2);
    let constraints: Vec<String> = raw
        .query(
            "SELECT conname::text FROM pg_constraint \
             WHERE conrelid = 'events'::regclass AND contype = 'u' ORDER BY 1",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(constraints, ["events_event_id_key"]);
    // Version 4: the stream index is unique over the first events of appends only.
    let index: String = raw
        .query_one(
            "SELECT pg_get_indexdef('events_stream_heads'::regclass)",
            &[],
        )
        .await?
        .get(0);
    assert!(
        index.contains("UNIQUE") && index.contains("(stream_no, version) WHERE (append_len > 0)"),
        "{index}"
    );
    let multi: String = raw
        .query_one(
            "SELECT pg_get_indexdef('events_stream_multi'::regclass)",
            &[],
        )
        .await?
        .get(0);
    assert!(
        multi.contains("(stream_no, version) WHERE (append_len > 1)"),
        "{multi}"
    );
    let old_heads: i64 = raw
        .query_one("SELECT count(*) FROM events WHERE append_len = 1", &[])
        .await?
        .get(0);
    assert_eq!(
        old_heads, 5,
        "events stored before version 4 are heads of their own"
    );

    // Old data reads as before; appends continue its versions and respect expectations.
    let a = store
        .read_stream("old-a", 0, 10, Direction::Forward)
        .await?;
    assert_eq!(a.iter().map(|e| e.version).collect::<Vec<_>>(), [0, 1, 2]);
    let back = store
        .read_stream("old-a", 5, 2, Direction::Backward)
        .await?;
    assert_eq!(back.iter().map(|e| e.version).collect::<Vec<_>>(), [2, 1]);
    let r = store
        .append("old-a", ExpectedVersion::Exact(2), data(2))
        .await?;
    assert_eq!((r.first_version, r.last_version), (3, 4));
    match store
        .append("old-b", ExpectedVersion::NoStream, data(1))
        .await
    {
        Err(Error::WrongExpectedVersion { actual, .. }) => assert_eq!(actual, Some(1)),
        other => panic!("expected a wrong-version error, got {other:?}"),
    }
    // Concurrent appends (group-committed) to old and new streams.
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                if i == 0 {
                    store
                        .append("old-b", ExpectedVersion::Exact(1), data(3))
                        .await
                } else {
                    store
                        .append(&format!("new-{i}"), ExpectedVersion::NoStream, data(3))
                        .await
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap()?;
    }
    let b = store
        .read_stream("old-b", 0, 10, Direction::Forward)
        .await?;
    assert_eq!(b.len(), 5);
    // `$all` shows an append once every transaction of the cluster older than it ended, and
    // other tests hold transactions open meanwhile (some on purpose): read until it is all
    // there, for up to a minute, as a subscriber would wait.
    let want = 3 + 2 + 2 + 3 + 19 * 3;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut all = store.read_all(0, 1000).await?;
    while all.len() < want && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        all = store.read_all(0, 1000).await?;
    }
    assert_eq!(all.len(), want);
    let places: i64 = raw
        .query_one(
            "SELECT count(DISTINCT (stream_no, version)) - count(DISTINCT (stream_id, version)) \
             FROM events",
            &[],
        )
        .await?
        .get(0);
    assert_eq!(
        places, 0,
        "stream numbers and names identify the same streams"
    );
    // One head per append since the upgrade (1 + 19 + 1 appends of 2 or 3 events), carrying
    // the append's length; the old events are heads of 1.
    let heads: Vec<(i16, i64)> = raw
        .query(
            "SELECT append_len, count(*) FROM events WHERE append_len > 0 \
             GROUP BY 1 ORDER BY 1",
            &[],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(heads, [(1, 5), (2, 1), (3, 20)]);
    let back = store
        .read_stream("old-b", u64::MAX, 4, Direction::Backward)
        .await?;
    assert_eq!(
        back.iter().map(|e| e.version).collect::<Vec<_>>(),
        [4, 3, 2, 1]
    );
    Ok(())
}

/// A version-4 schema (the last before `recorded_at`) holding events is upgraded in place: old
/// events read back the time of the upgrade, new ones their append's, and reads by category
/// and type (migration 5's indexes) find old and new events alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_a_version_4_schema_in_place() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: PostgreSQL upgrade test, DATABASE_URL is not set ***\n");
        return;
    };
    let schema = format!("galleon_test_{}", uuid::Uuid::new_v4().simple());
    let result = upgrade_from_4(&url, &schema).await;
    let (admin, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
    result.unwrap();
}

async fn upgrade_from_4(url: &str, schema: &str) -> Result<()> {
    use crate::filter::EventFilter;
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.options(format!("-c search_path={schema}"));
    let (raw, conn) = config.connect(NoTls).await?;
    tokio::spawn(conn);
    migrate_to(&raw, Some(schema), 4).await?;
    let old_append = "SELECT status FROM galleon_append($1, -2, $2, $3, $4, $5)";
    for stream in ["acct-1", "other-1"] {
        let evs = data(2);
        let ids: Vec<uuid::Uuid> = evs.iter().map(|e| e.id).collect();
        let types: Vec<&str> = evs.iter().map(|e| e.event_type.as_str()).collect();
        let d: Vec<JsonText<'_>> = evs.iter().map(|e| JsonText(e.data.get())).collect();
        let m: Vec<JsonText<'_>> = evs.iter().map(|e| JsonText(e.metadata.get())).collect();
        let status: i32 = raw
            .query_one(old_append, &[&stream, &ids, &types, &d, &m])
            .await?
            .get(0);
        assert_eq!(status, 0);
    }
    // PostgreSQL's clock, which `now()` reads, with a margin for rounding.
    let clock =
        |r: tokio_postgres::Row| crate::Timestamp::from(r.get::<_, std::time::SystemTime>(0));
    let before = clock(raw.query_one("SELECT now()", &[]).await?);
    let store = PgStore::open(
        url,
        PgOptions {
            schema: Some(schema.to_owned()),
            pool_size: Some(4),
            application_name: None,
            held_back_warning: None,
        },
    )
    .await?;
    let upgraded = clock(raw.query_one("SELECT now()", &[]).await?);
    store
        .append("acct-2", ExpectedVersion::NoStream, data(1))
        .await?;
    // `$all` shows the new event once every transaction of the cluster older than it ended
    // (other tests run meanwhile): wait for it as a subscriber does.
    let all: Vec<RecordedEvent> = {
        use futures::StreamExt;
        let store = crate::Store::open_with(
            url,
            crate::OpenOptions {
                pg_schema: Some(schema.to_owned()),
                ..crate::OpenOptions::default()
            },
        )
        .await?;
        let sub = store.subscribe_all(0).take(5);
        tokio::time::timeout(Duration::from_secs(60), sub.collect::<Vec<_>>())
            .await
            .expect("5 events within a minute")
            .into_iter()
            .collect::<Result<_>>()?
    };
    for e in &all[..4] {
        assert!(
            before <= e.recorded_at && e.recorded_at <= upgraded,
            "old event recorded at the upgrade: {} not in {before}..={upgraded}",
            e.recorded_at
        );
    }
    assert!(all[4].recorded_at >= all[3].recorded_at);
    let acct = store
        .read_filtered(0, 100, &EventFilter::category("acct")?)
        .await?;
    let streams: Vec<&str> = acct.iter().map(|e| e.stream_id.as_str()).collect();
    assert_eq!(streams, ["acct-1", "acct-1", "acct-2"]);
    let typed = store
        .read_filtered(0, 100, &EventFilter::all().with_types(["Old", "None"])?)
        .await?;
    assert_eq!(typed.len(), 5);
    let plan: Vec<String> = raw
        .query(
            "EXPLAIN SELECT position FROM events WHERE split_part(stream_id, '-', 1) = 'acct' \
             AND position >= 0 ORDER BY position LIMIT 10",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    raw.batch_execute("SET enable_seqscan = off").await?;
    assert!(
        plan.iter().any(|l| l.contains("events_category"))
            || {
                // Tiny tables may be scanned; with scans off the index must be usable.
                let forced: Vec<String> = raw
                .query(
                    "EXPLAIN SELECT position FROM events WHERE split_part(stream_id, '-', 1) = 'acct' \
                     AND position >= 0 ORDER BY position LIMIT 10",
                    &[],
                )
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
                forced.iter().any(|l| l.contains("events_category"))
            },
        "{plan:?}"
    );
    Ok(())
}

/// The WAL writer is nudged while a batch is being written and not otherwise: no connection
/// before the first batch, a nudge every few milliseconds during one, none after it, and the
/// task ends with the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_nudges_run_only_while_batches_are_written() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: PostgreSQL WAL nudge test, DATABASE_URL is not set ***\n");
        return;
    };
    let app = format!("galleon_nudge_{}", uuid::Uuid::new_v4().simple());
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.application_name(&app);
    let (batches, rx) = watch::channel(0usize);
    let split = super::tls::split(&url).unwrap();
    config.ssl_mode(super::tls::ssl_mode(split.mode));
    let tls = super::tls::connector(&split).unwrap();
    let task = tokio::spawn(nudge_wal_writer(config, tls, rx));
    let (admin, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let look = || async {
        admin
            .query_opt(
                "SELECT query, query_start FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .unwrap()
            // A connection that has run no query yet has no `query_start`.
            .map(|r| {
                (
                    r.get::<_, String>(0),
                    r.get::<_, Option<std::time::SystemTime>>(1),
                )
            })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(look().await.is_none(), "no connection before any batch");
    batches.send_replace(1);
    let mut seen = None;
    for _ in 0..100 {
        if let Some((query, Some(at))) = look().await
            && query.contains("pg_current_xact_id")
        {
            seen = Some(at);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = seen.expect("a nudge within 2 s of a batch starting");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_, later) = look().await.expect("the nudge connection stays open");
    assert!(
        later > Some(first),
        "nudges repeat while the batch is written"
    );
    batches.send_replace(0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_, stopped) = look()
        .await
        .expect("the connection stays open between batches");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_, still) = look().await.unwrap();
    assert_eq!(stopped, still, "no nudges without a batch");
    drop(batches);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the nudge task ends with the store")
        .unwrap();
}

/// Two processes on one stream (migration 7): an append whose transaction got its id before
/// waiting for the stream's lock, while a newer transaction took the lock and appended first,
/// is refused with `serialization_failure` (the writer runs it again in a new transaction)
/// rather than storing a later version at a lower position. Deterministic: the older
/// transaction takes its id before the newer one starts; both functions are checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_that_lost_the_stream_lock_to_a_newer_transaction_is_refused() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: PostgreSQL stream order test, DATABASE_URL is not set ***\n");
        return;
    };
    let schema = format!("galleon_test_{}", uuid::Uuid::new_v4().simple());
    let result = lost_lock_is_refused(&url, &schema).await;
    let (admin, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
    result.unwrap();
}

/// One event appended to `stream` by `galleon_append` on `client`; its status.
async fn raw_append(
    client: std::sync::Arc<tokio_postgres::Client>,
    stream: &'static str,
) -> std::result::Result<i32, tokio_postgres::Error> {
    let evs = data(1);
    let ids: Vec<uuid::Uuid> = evs.iter().map(|e| e.id).collect();
    let types: Vec<&str> = evs.iter().map(|e| e.event_type.as_str()).collect();
    let d: Vec<JsonText<'_>> = evs.iter().map(|e| JsonText(e.data.get())).collect();
    let m: Vec<JsonText<'_>> = evs.iter().map(|e| JsonText(e.metadata.get())).collect();
    let sql = "SELECT status FROM galleon_append($1, -1, $2, $3, $4, $5)";
    client
        .query_one(sql, &[&stream, &ids, &types, &d, &m])
        .await
        .map(|r| r.get::<_, i32>(0))
}

/// `galleon_append_batch` of one event each to streams `s` and `t` on `client`.
async fn raw_batch(
    client: std::sync::Arc<tokio_postgres::Client>,
) -> std::result::Result<(), tokio_postgres::Error> {
    let streams = vec!["s", "t"];
    let ids = vec![uuid::Uuid::new_v4(), uuid::Uuid::new_v4()];
    client
        .query(
            "SELECT status FROM galleon_append_batch($1, $2, $3, $4)",
            &[&streams, &vec![-1i64, -1], &vec![1i32, 1], &ids],
        )
        .await
        .map(|_| ())
}

async fn lost_lock_is_refused(url: &str, schema: &str) -> Result<()> {
    let connect = || async {
        let mut config: tokio_postgres::Config = url.parse().unwrap();
        config.options(format!("-c search_path={schema}"));
        let (client, conn) = config.connect(NoTls).await.unwrap();
        tokio::spawn(conn);
        client
    };
    let admin = connect().await;
    migrate_to(&admin, Some(schema), MIGRATIONS.len()).await?;
    let admin = std::sync::Arc::new(admin);
    assert_eq!(raw_append(admin.clone(), "s").await?, 0);
    assert_eq!(raw_append(admin.clone(), "t").await?, 0);
    for use_batch in [false, true] {
        let older = std::sync::Arc::new(connect().await);
        let newer = std::sync::Arc::new(connect().await);
        older
            .batch_execute("BEGIN; SELECT pg_current_xact_id()")
            .await?;
        let older_pid: i32 = older
            .query_one("SELECT pg_backend_pid()", &[])
            .await?
            .get(0);
        newer.batch_execute("BEGIN").await?;
        assert_eq!(
            raw_append(newer.clone(), "s").await?,
            0,
            "the newer one appends"
        );
        let waiting = tokio::spawn({
            let older = older.clone();
            async move {
                if use_batch {
                    raw_batch(older).await
                } else {
                    raw_append(older, "s").await.map(|_| ())
                }
            }
        });
        let mut blocked = false;
        for _ in 0..250 {
            let row = admin
                .query_one(
                    "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity \
                     WHERE pid = $1",
                    &[&older_pid],
                )
                .await?;
            if row.get::<_, bool>(0) {
                blocked = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(blocked, "the older transaction waits for the stream's lock");
        newer.batch_execute("COMMIT").await?;
        let outcome = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the older append ends once the lock is free")
            .unwrap();
        let err = outcome.expect_err("the older append must not store a later version lower");
        assert_eq!(
            err.code(),
            Some(&tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE),
            "batch: {use_batch}: {err}"
        );
        older.batch_execute("ROLLBACK").await?;
    }
    // Run again in a new transaction, the append succeeds and lands after the newer one.
    assert_eq!(raw_append(admin.clone(), "s").await?, 0);
    let rows = admin
        .query(
            "SELECT position FROM events WHERE stream_id = 's' ORDER BY version",
            &[],
        )
        .await?;
    let positions: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "versions and positions in one order: {positions:?}"
    );
    Ok(())
}
