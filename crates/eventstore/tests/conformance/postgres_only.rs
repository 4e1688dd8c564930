//! Tests that need PostgreSQL itself: killed connections, NOTIFY, transactions, the batch
//! function (they print that they were skipped when `DATABASE_URL` is unset).

use super::*;

/// A connection whose open transaction holds `id` in `schema`'s events (an uncommitted row):
/// an append of an event with that id waits on the unique index until it ends. Keep it alive.
async fn hold_event_id(url: &str, schema: &str, id: Uuid) -> tokio_postgres::Client {
    let blocker = raw_client(url, Some(schema)).await;
    blocker.batch_execute("BEGIN").await.unwrap();
    blocker
        .execute(
            "INSERT INTO events (position, stream_no, stream_id, version, event_id, event_type, data, metadata) \
             VALUES (-1, -1, 'blocker', 0, $1, 'B', '{}', '{}')",
            &[&id],
        )
        .await
        .unwrap();
    blocker
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_killed_connection_mid_append_leaves_nothing() {
    let _turn = XMIN_HOLDERS.lock().await;
    run_postgres(|ctx: Ctx| async move {
        let s = &ctx.store;
        let schema = ctx.pg_schema.clone().unwrap();
        let batch = events(5_000);
        let last_id = batch.last().unwrap().id;
        // Another transaction holds the last event's id, uncommitted: the append inserts 4 999
        // rows and then waits on the unique index. Then its backend is killed.
        let blocker = hold_event_id(&ctx.url, &schema, last_id).await;
        let store = s.clone();
        let append = tokio::spawn(async move { store.append("killed", ExpectedVersion::NoStream, batch).await });
        let killer = raw_client(&ctx.url, None).await;
        let killed = terminate_when_blocked(
            &killer,
            &schema,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'transactionid' \
               AND query LIKE '%galleon_append%'",
        )
        .await;
        assert_eq!(killed, 1, "the append never blocked where expected");
        let err = append.await.unwrap().unwrap_err();
        assert!(err.is_transient(), "{err:?}");
        blocker.batch_execute("ROLLBACK").await.unwrap();
        assert_eq!(stream_len(s, "killed").await, None);
        let raw = raw_client(&ctx.url, Some(&schema)).await;
        let n: i64 = raw.query_one("SELECT count(*) FROM events", &[]).await.unwrap().get(0);
        assert_eq!(n, 0, "no half-written rows");
        let n: i64 = raw.query_one("SELECT count(*) FROM streams", &[]).await.unwrap().get(0);
        assert_eq!(n, 0, "no stream row");
        // The pool drops the dead connection; the same append now succeeds.
        let r = s.append("killed", ExpectedVersion::NoStream, events(5_000)).await.unwrap();
        assert_eq!(r.last_version, 4_999);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_all_waits_for_earlier_transaction() {
    let _turn = XMIN_HOLDERS.lock().await;
    run_postgres(|ctx: Ctx| async move {
        let s = &ctx.store;
        let schema = ctx.pg_schema.clone().unwrap();
        let mut sub = s.subscribe_all(0);
        // A slow transaction takes its transaction id (and so its position) first...
        let slow = raw_client(&ctx.url, Some(&schema)).await;
        slow.batch_execute("BEGIN").await.unwrap();
        let slow_id = Uuid::new_v4();
        let row = slow
            .query_one(
                "SELECT status, first_position FROM galleon_append('slow', -1, ARRAY[$1::uuid], \
                 ARRAY['Slow'], ARRAY['{}'::json], ARRAY['{}'::json])",
                &[&slow_id],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), 0);
        let slow_position: i64 = row.get(1);
        // ...a fast one commits after it with a later position...
        let fast = s
            .append("fast", ExpectedVersion::Any, events(1))
            .await
            .unwrap();
        assert!(fast.first_position > slow_position as u64);
        // ...and is not visible in $all while the slow one may still commit before it.
        assert!(s.read_all(0, 100).await.unwrap().is_empty());
        assert_eq!(
            s.read_stream("fast", 0, 10, Direction::Forward)
                .await
                .unwrap()
                .len(),
            1
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            sub.next().now_or_never().is_none(),
            "subscriber must not see the fast event yet"
        );
        slow.batch_execute("COMMIT").await.unwrap();
        let all = all_events(s, 2).await;
        assert_eq!(
            all.iter().map(|e| e.stream_id.as_str()).collect::<Vec<_>>(),
            ["slow", "fast"]
        );
        let got = collect(&mut sub, 2).await;
        assert_eq!((got[0].id, got[1].stream_id.as_str()), (slow_id, "fast"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_subscription_survives_killed_connections() {
    run_postgres(|ctx: Ctx| async move {
        let s = &ctx.store;
        let schema = ctx.pg_schema.clone().unwrap();
        s.append("survive", ExpectedVersion::NoStream, events(3)).await.unwrap();
        let mut sub = s.subscribe_all(0);
        assert_eq!(collect(&mut sub, 3).await.len(), 3);
        // Kill every connection of this store: the pool's and the LISTEN one.
        let killer = raw_client(&ctx.url, None).await;
        let killed = killer
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&schema],
            )
            .await
            .unwrap()
            .len();
        assert!(killed >= 1, "nothing to kill");
        // Appending may meet a dead pooled connection once; a retry with the same ids is safe.
        let batch = events(2);
        let mut result = None;
        for _ in 0..5 {
            match s.append("survive", ExpectedVersion::Exact(2), batch.clone()).await {
                Ok(r) => {
                    result = Some(r);
                    break;
                }
                Err(e) if e.is_transient() => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(result.expect("append after kill").first_version, 3);
        let got = collect(&mut sub, 2).await;
        assert_eq!(got.iter().map(|e| e.version).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(stream_len(s, "survive").await, Some(5));
    })
    .await;
}

#[tokio::test]
async fn bad_urls_are_clear_errors() {
    for (url, needle) in [
        ("mysql://x", "expected `sqlite:PATH` or `postgres://...`"),
        ("sqlite:", "empty"),
        ("sqlite::memory:", "in-memory"),
        ("postgres://user@host:notaport/db", "invalid store URL"),
    ] {
        let err = Store::open(url).await.unwrap_err().to_string();
        assert!(err.contains(needle), "{url}: {err}");
    }
    let opts = OpenOptions {
        pg_schema: Some("Robert'); DROP TABLE x;--".into()),
        ..OpenOptions::default()
    };
    let err = Store::open_with("postgres://postgres@127.0.0.1:1/x", opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("schema name"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_notify_wakes_another_handle_before_the_poll() {
    let _turn = XMIN_HOLDERS.lock().await;
    run_postgres(|ctx: Ctx| async move {
        // A second handle on the same schema stands in for another galleon process: it shares
        // nothing in-process with the first, so only NOTIFY (or the 1 s poll) can wake it.
        let other = ctx.reopen().await;
        let mut sub = other.subscribe_all(0);
        // Let the subscriber find `$all` empty and go to sleep on its wake-ups.
        assert!(
            tokio::time::timeout(Duration::from_millis(200), sub.next())
                .await
                .is_err()
        );
        let appended = std::time::Instant::now();
        ctx.store
            .append("notified", ExpectedVersion::NoStream, events(1))
            .await
            .unwrap();
        let got = collect(&mut sub, 1).await;
        let waited = appended.elapsed();
        assert_eq!(got[0].stream_id, "notified");
        // Without the NOTIFY the subscriber would sleep until its poll, ~800 ms from here.
        assert!(
            waited < galleon_eventstore::SUBSCRIPTION_POLL_INTERVAL / 2,
            "woken after {waited:?}: NOTIFY did not arrive"
        );
    })
    .await;
}

#[tokio::test]
async fn sqlite_refuses_a_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.db");
    let url = format!("sqlite:{}", path.display());
    drop(Store::open(&url).await.unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("INSERT INTO schema_version (version) VALUES (99)", [])
        .unwrap();
    drop(conn);
    let err = Store::open(&url).await.unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { found: 99, .. }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_appends_in_one_transaction_get_distinct_positions() {
    let _turn = XMIN_HOLDERS.lock().await;
    run_postgres(|ctx: Ctx| async move {
        let schema = ctx.pg_schema.clone().unwrap();
        let raw = raw_client(&ctx.url, Some(&schema)).await;
        let append = "SELECT status, first_position FROM galleon_append($1, -1, ARRAY[$2::uuid, $3::uuid], \
                      ARRAY['A', 'B'], ARRAY['{}'::json, '[]'::json], ARRAY['{}'::json, '{}'::json])";
        raw.batch_execute("BEGIN").await.unwrap();
        let mut firsts = Vec::new();
        for stream in ["txn-a", "txn-b"] {
            let row = raw.query_one(append, &[&stream, &Uuid::new_v4(), &Uuid::new_v4()]).await.unwrap();
            assert_eq!(row.get::<_, i32>(0), 0);
            firsts.push(row.get::<_, i64>(1));
        }
        raw.batch_execute("COMMIT").await.unwrap();
        assert_eq!(firsts[1], firsts[0] + 2, "the second append continues after the first");
        let all = all_events(&ctx.store, 4).await;
        let positions: Vec<i64> = all.iter().map(|e| e.position as i64).collect();
        assert_eq!(positions, [firsts[0], firsts[0] + 1, firsts[1], firsts[1] + 1]);
    })
    .await;
}

/// A result row of `galleon_append_batch`: status, actual, first version, first position.
type BatchRow = (i32, Option<i64>, Option<i64>, Option<i64>);

/// `galleon_append_batch` on its own: one result row per append in input order, checks in
/// input order within a stream, nothing reserved for rejected appends, positions contiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_append_batch_function() {
    let _turn = XMIN_HOLDERS.lock().await;
    run_postgres(|ctx: Ctx| async move {
        let s = &ctx.store;
        let schema = ctx.pg_schema.clone().unwrap();
        let stored = events(2);
        s.append("fb-old", ExpectedVersion::NoStream, stored.clone()).await.unwrap();
        let raw = raw_client(&ctx.url, Some(&schema)).await;
        let streams = ["fb-b", "fb-a", "fb-b", "fb-old", "fb-old", "fb-none", "fb-b"];
        let expected: [i64; 7] = [-2, -1, 1, -2, 1, 3, -2];
        let counts: [i32; 7] = [2, 1, 3, 1, 4, 1, 1];
        let mut first_ids: Vec<Uuid> = (0..7).map(|_| Uuid::new_v4()).collect();
        first_ids[3] = stored[0].id;
        raw.batch_execute("BEGIN").await.unwrap();
        let rows = raw
            .query(
                "SELECT status, actual, first_version, first_position, stream_no FROM galleon_append_batch($1, $2, $3, $4)",
                &[&streams.as_slice(), &expected.as_slice(), &counts.as_slice(), &first_ids],
            )
            .await
            .unwrap();
        let xid: i64 = raw
            .query_one("SELECT pg_current_xact_id()::text::bigint", &[])
            .await
            .unwrap()
            .get(0);
        let got: Vec<BatchRow> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        // Grouped by stream in name order: fb-a (1 event), fb-b (2 + 3), fb-old (4).
        let base = xid << 16;
        assert_eq!(
            got,
            vec![
                (0, None, Some(0), Some(base + 1)),     // fb-b: created, versions 0..1
                (0, None, Some(0), Some(base)),         // fb-a: created, version 0
                (0, None, Some(2), Some(base + 3)),     // fb-b: Exact(1) after the first
                (4, None, None, None),                  // fb-old: first id stored: for galleon_append
                (0, None, Some(2), Some(base + 6)),     // fb-old: Exact(1)
                (2, None, None, None),                  // fb-none: Exact(3), no stream
                (2, Some(4), None, None),               // fb-b: NoStream, but it is at 4 by now
            ]
        );
        // Stream numbers: one per stream, the stored stream's kept, none for rejected appends.
        let nos: Vec<Option<i64>> = rows.iter().map(|r| r.get(4)).collect();
        let old_no: i64 = raw
            .query_one("SELECT stream_no FROM streams WHERE stream_id = 'fb-old'", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!((nos[3], nos[4], nos[5], nos[6]), (None, Some(old_no), None, None));
        assert_eq!(nos[0], nos[2]);
        assert!(nos[0].is_some() && nos[1].is_some() && nos[0] != nos[1] && nos[0] != nos[4]);
        let streams: Vec<(String, i64, i64)> = raw
            .query(
                "SELECT stream_id, stream_no, version FROM streams ORDER BY stream_id",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        assert_eq!(
            streams,
            [
                ("fb-a".to_owned(), nos[1].unwrap(), 0),
                ("fb-b".to_owned(), nos[0].unwrap(), 4),
                ("fb-old".to_owned(), old_no, 5)
            ]
        );
        // The caller is to COPY the events; without them nothing may commit.
        raw.batch_execute("ROLLBACK").await.unwrap();
    })
    .await;
}

/// A group commit whose connection is killed while it waits inside the COPY leaves nothing
/// half-written; its appends are then run one by one, and every append ends up stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_killed_group_commit_leaves_nothing_half_written() {
    let _turn = XMIN_HOLDERS.lock().await;
    run_postgres(|ctx: Ctx| async move {
        const APPENDS: usize = 40;
        let s = &ctx.store;
        let schema = ctx.pg_schema.clone().unwrap();
        let batches: Vec<Vec<EventData>> = (0..APPENDS).map(|_| events(50)).collect();
        // Another transaction holds the last id of the last append, uncommitted.
        let blocked_id = batches[APPENDS - 1][49].id;
        let blocker = hold_event_id(&ctx.url, &schema, blocked_id).await;
        let tasks: Vec<_> = batches
            .iter()
            .enumerate()
            .map(|(i, evs)| {
                let store = s.clone();
                let evs = evs.clone();
                tokio::spawn(async move {
                    store.append(&format!("kgc-{i}"), ExpectedVersion::NoStream, evs).await
                })
            })
            .collect();
        let killer = raw_client(&ctx.url, None).await;
        let killed = terminate_when_blocked(
            &killer,
            &schema,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'transactionid' \
               AND (query LIKE 'COPY events%' OR query LIKE '%galleon_append%')",
        )
        .await;
        assert_eq!(killed, 1, "no append blocked where expected");
        // Let the blocked append through: it either failed with the killed connection (it was
        // alone in its transaction) or is run again on its own (it was in a group).
        tokio::time::sleep(Duration::from_millis(200)).await;
        blocker.batch_execute("ROLLBACK").await.unwrap();
        let mut failed = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.unwrap() {
                Ok(r) => assert_eq!((r.first_version, r.last_version), (0, 49)),
                Err(e) => {
                    assert!(e.is_transient(), "{e:?}");
                    failed.push(i);
                }
            }
        }
        // Whatever failed was not written at all; retrying it stores it once.
        for &i in &failed {
            assert_eq!(stream_len(s, &format!("kgc-{i}")).await, None);
            s.append(&format!("kgc-{i}"), ExpectedVersion::NoStream, batches[i].clone())
                .await
                .unwrap();
        }
        for i in 0..APPENDS {
            assert_eq!(stream_len(s, &format!("kgc-{i}")).await, Some(50), "kgc-{i}");
        }
        let all = all_events(s, APPENDS * 50).await;
        let ids: HashSet<Uuid> = all.iter().map(|e| e.id).collect();
        assert_eq!(ids.len(), APPENDS * 50);
    })
    .await;
}

// Upgrades of genuine version 1 and 2 schemas: `upgrades_version_1_and_2_schemas_in_place` in
// src/postgres.rs (it builds them with the crate's own migrations).
