//! Tests of the SQLite backend's internals: schema upgrades and the reader threads.

use std::cell::RefCell;
use std::sync::RwLock;
use std::sync::mpsc as std_mpsc;

use super::*;
use crate::filter::EventFilter;
use crate::{OpenOptions, Store};

async fn open_temp(reader_threads: Option<usize>) -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("events.db"), reader_threads)
        .await
        .unwrap();
    (dir, store)
}

fn event(stream: usize, i: usize) -> EventData {
    EventData::json("Read", &serde_json::json!({"stream": stream, "i": i})).unwrap()
}

/// A version-1 file holding events is upgraded in place: old events read back the time of
/// the upgrade, and reads by category and type find old and new events alike.
#[tokio::test]
async fn upgrades_a_version_1_file_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.db");
    {
        let mut conn = open_connection(&path).unwrap();
        migrate_to(&mut conn, 1).unwrap();
        for (i, stream) in ["acct-1", "acct-1", "other-1"].iter().enumerate() {
            conn.execute(
                "INSERT INTO events (stream_id, version, event_id, event_type, data, metadata) \
                 VALUES (?1, ?2, ?3, 'Old', '{}', '{}')",
                params![stream, i as i64 % 2, Uuid::now_v7().as_bytes()],
            )
            .unwrap();
        }
    }
    // SQLite's clock has millisecond precision: allow for rounding down.
    let before = Timestamp::from_micros(Timestamp::now().as_micros() - 1_000);
    let store = SqliteStore::open(path, None).await.unwrap();
    let upgraded = Timestamp::now();
    let acct = store
        .read_filtered(0, 10, &EventFilter::category("acct").unwrap())
        .await
        .unwrap();
    assert_eq!(acct.len(), 2);
    let all = store.read_all(0, 10).await.unwrap();
    assert_eq!(all.len(), 3);
    for e in &all {
        assert!(
            before <= e.recorded_at && e.recorded_at <= upgraded,
            "{} not in {before}..={upgraded}",
            e.recorded_at
        );
    }
    let typed = store
        .read_filtered(0, 10, &EventFilter::all().with_types(["Old"]).unwrap())
        .await
        .unwrap();
    assert_eq!(typed.len(), 3);
}

#[tokio::test]
async fn reads_run_on_the_reader_threads() {
    let (_dir, store) = open_temp(None).await;
    assert_eq!(store.inner.pool.threads(), DEFAULT_SQLITE_READER_THREADS);
    store
        .append("s-1", ExpectedVersion::NoStream, vec![event(1, 0)])
        .await
        .unwrap();
    let read = store
        .read_stream("s-1", 0, 10, Direction::Forward)
        .await
        .unwrap();
    assert_eq!(read.len(), 1);
    let name = store
        .with_reader(|_| Ok(std::thread::current().name().map(str::to_owned)))
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(name.starts_with("galleon-sqlite-read-"), "{name:?}");
}

/// The point of the reader threads: with every thread of tokio's blocking pool busy (a burst of
/// slow file reads, say), opening the store and 200 concurrent reads still complete.
#[test]
fn reads_do_not_wait_for_a_saturated_blocking_pool() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Held until the reads are done; dropped first (even on a failed assert), freeing the pool.
    let gate = Arc::new(RwLock::new(()));
    let closed = gate.write().unwrap();
    rt.block_on(async {
        for _ in 0..8 {
            let gate = gate.clone();
            tokio::task::spawn_blocking(move || drop(gate.read()));
        }
        let canary = tokio::task::spawn_blocking(|| ());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!canary.is_finished(), "the blocking pool is not saturated");

        let work = async {
            let (_dir, store) = open_temp(None).await;
            for s in 0..20 {
                let events = (0..5).map(|i| event(s, i)).collect();
                store
                    .append(&format!("s-{s}"), ExpectedVersion::NoStream, events)
                    .await
                    .unwrap();
            }
            let reads: Vec<_> = (0..200)
                .map(|n| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        let s = n % 20;
                        let stream = format!("s-{s}");
                        let read = store
                            .read_stream(&stream, 0, 10, Direction::Forward)
                            .await
                            .unwrap();
                        assert_eq!(read.len(), 5);
                        for (i, e) in read.iter().enumerate() {
                            assert_eq!(
                                (e.stream_id.as_str(), e.version),
                                (stream.as_str(), i as u64)
                            );
                            let data: serde_json::Value =
                                serde_json::from_str(e.data.get()).unwrap();
                            assert_eq!(data, serde_json::json!({"stream": s, "i": i}));
                        }
                    })
                })
                .collect();
            for r in reads {
                r.await.unwrap();
            }
            assert_eq!(store.read_all(0, 1000).await.unwrap().len(), 100);
        };
        tokio::time::timeout(Duration::from_secs(60), work)
            .await
            .expect("reads waited for the blocking pool");
        assert!(
            !canary.is_finished(),
            "the blocking pool freed up during the test"
        );
    });
    drop(closed);
}

#[tokio::test]
async fn reader_threads_are_range_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.db");
    let url = format!("sqlite:{}", path.display());
    for bad in [0, MAX_SQLITE_READER_THREADS + 1, usize::MAX] {
        let options = OpenOptions {
            sqlite_reader_threads: Some(bad),
            ..OpenOptions::default()
        };
        match Store::open_with(&url, options).await {
            Err(Error::InvalidInput(m)) => {
                assert!(m.contains(&format!("sqlite reader threads {bad}")), "{m}");
                assert!(
                    m.contains(&format!("1 to {MAX_SQLITE_READER_THREADS}")),
                    "{m}"
                );
            }
            other => panic!("{bad} reader threads: {other:?}"),
        }
        assert!(!path.exists(), "checked before the file is created");
    }
    for good in [1, 2] {
        let store = SqliteStore::open(path.clone(), Some(good)).await.unwrap();
        assert_eq!(store.inner.pool.threads(), good);
        assert_eq!(store.head().await.unwrap(), 1);
    }
}

#[tokio::test]
async fn a_panicking_read_is_an_error_for_its_caller() {
    let (_dir, store) = open_temp(Some(1)).await;
    let err = store
        .with_reader(|_| -> Result<()> { panic!("boom") })
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::Panicked(m) if m == "boom"), "{err:?}");
    assert_eq!(err.to_string(), "event store operation panicked: boom");
    // The one reader thread goes on.
    assert_eq!(store.head().await.unwrap(), 1);
}

/// Sends on its channel when the thread holding it exits.
struct ExitSignal(std_mpsc::Sender<()>);

impl Drop for ExitSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

thread_local! {
    static ON_EXIT: RefCell<Option<ExitSignal>> = const { RefCell::new(None) };
}

/// Dropping the last clone while a read runs neither blocks nor leaks: the read finishes, then
/// the reader thread exits.
#[tokio::test]
async fn dropping_the_store_ends_its_reader_threads_even_with_a_read_in_flight() {
    let (_dir, store) = open_temp(Some(1)).await;
    let (exited_tx, exited) = std_mpsc::channel();
    store
        .with_reader(move |_| {
            ON_EXIT.with(|s| *s.borrow_mut() = Some(ExitSignal(exited_tx)));
            Ok(())
        })
        .await
        .unwrap();
    let (started_tx, started) = oneshot::channel();
    let (release, release_rx) = std_mpsc::channel::<()>();
    let in_flight = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .with_reader(move |_| {
                    let _ = started_tx.send(());
                    let _ = release_rx.recv();
                    Ok(())
                })
                .await
        }
    });
    started.await.unwrap();
    in_flight.abort();
    assert!(in_flight.await.unwrap_err().is_cancelled());
    drop(store);
    drop(release);
    let exited = tokio::task::spawn_blocking(move || exited.recv_timeout(Duration::from_secs(30)));
    assert_eq!(
        exited.await.unwrap(),
        Ok(()),
        "the reader thread did not exit"
    );
}
