//! The batching writer: appends routed to one writer task per core, stored one transaction at a
//! time per writer (a lone append directly, concurrent ones as a group commit: one check of
//! every expected version, one binary COPY of all their events, one commit).
//!
//! Routing (`StreamRoutes`): an append goes to the writer that has appends of its stream pending,
//! else to the least busy; when no writer has anything queued or running, the caller runs it at
//! once as `galleon_append`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use deadpool_postgres::Pool;
use futures::SinkExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::read::discard_if_broken;
use crate::error::{Error, Result};
use crate::types::{AppendResult, EventData, ExpectedVersion};

/// Bits of a position that number the events of one transaction; the bits above hold the
/// transaction id. 16 bits allow 65 536 events per append ([`crate::MAX_APPEND_EVENTS`] is
/// below that) and leave 47 bits of transaction ids: 1.4e14 transactions, 44 years at 100 000
/// appends per second.
pub(crate) const POSITION_SHIFT: u32 = 16;

const _: () = assert!(crate::types::MAX_APPEND_EVENTS < (1 << POSITION_SHIFT));
// An append's length is stored with its first event as a `smallint` (schema version 4).
const _: () = assert!(crate::types::MAX_APPEND_EVENTS <= i16::MAX as usize);

const SQL_APPEND: &str = "SELECT status, actual, first_version, first_position \
     FROM galleon_append($1, $2, $3, $4, $5, $6)";

const SQL_APPEND_BATCH: &str = "SELECT status, actual, first_version, first_position, stream_no \
     FROM galleon_append_batch($1, $2, $3, $4)";

/// The events of a batch's accepted appends, in PostgreSQL's binary COPY format. COPY inserts
/// them in bulk (one WAL record per heap page, no per-row executor work), measurably cheaper per
/// event than `INSERT ... SELECT FROM unnest(...)`.
const SQL_COPY_EVENTS: &str = "COPY events (position, stream_no, stream_id, version, event_id, event_type, data, metadata, append_len) \
     FROM STDIN (FORMAT binary)";

/// Writer tasks, each with its own queue. An append goes to the writer that has appends of its
/// stream queued or running, if any (so appends to one stream stay in order and one process's
/// batches never wait on each other's stream locks), else to the writer with the fewest appends
/// queued or running ([`StreamRoutes`]): a burst of appends to many streams is split evenly
/// (hashing the stream name left some writers with twice the appends of others, and the busiest
/// set the wall time). Each writer runs one transaction at a time (a direct append or a batch),
/// so this is also the number of server backends appending at once. A batch keeps one server
/// core busy copying rows, and fewer writers make bigger batches (a batch's fixed server cost
/// spreads over more events): one writer per core, at least 2, at most [`MAX_WRITERS`]; with the
/// WAL writer woken during batches (`notify.rs`) no extra writer is needed to overlap commit
/// flushes. The bench pairs that chose this: DESIGN-NOTES.md, "Schema 4 and the 100-writer ratio".
fn writer_count() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, MAX_WRITERS)
}

/// Most writer tasks (and backends appending at once) of one store, whatever the core count.
const MAX_WRITERS: usize = 16;

/// Most appends one writer puts in one transaction. Bounds the latency one batch adds to the
/// appends queued behind it.
const MAX_BATCH_APPENDS: usize = 256;

/// Most events in one batch transaction: positions number the events of a transaction in 16 bits.
/// A batch always takes its first append ([`crate::MAX_APPEND_EVENTS`] fits), then more while
/// they fit.
pub(super) const MAX_BATCH_EVENTS: usize = 1 << POSITION_SHIFT;

const _: () = assert!(crate::types::MAX_APPEND_EVENTS <= MAX_BATCH_EVENTS);

/// Times one append is run again because another process's newer transaction appended to its
/// stream first. Each retry's transaction is newer than every one committed before it, so a
/// retry fails again only when yet another newer append wins the stream's lock.
const MAX_REORDER_RETRIES: u32 = 32;

/// Bytes of COPY data sent per message: large enough that framing costs nothing, small enough
/// that the server starts inserting while the rest is still being encoded.
const COPY_CHUNK_BYTES: usize = 256 * 1024;

/// The writer tasks of one store and the routing of appends between them.
pub(super) struct Writers {
    writers: Vec<Writer>,
    routes: Arc<StreamRoutes>,
    shared: WriterShared,
}

impl Writers {
    /// Starts [`writer_count`] writer tasks; each ends once this is dropped and its queue is
    /// empty.
    pub(super) fn start(shared: WriterShared) -> Writers {
        let writers = (0..writer_count())
            .map(|_| {
                let (queue, rx) = mpsc::channel(MAX_BATCH_APPENDS);
                let slot = Arc::new(tokio::sync::Mutex::new(()));
                tokio::spawn(writer_loop(shared.clone(), rx, slot.clone()));
                Writer {
                    queue,
                    busy: Arc::new(AtomicUsize::new(0)),
                    slot,
                }
            })
            .collect();
        Writers {
            writers,
            routes: Arc::default(),
            shared,
        }
    }

    /// Routes the append to a writer ([`StreamRoutes::pick`]) and waits for the result: run at
    /// once by the caller when every writer is idle, else queued for the writer's next batch.
    pub(super) async fn append(
        &self,
        stream: &str,
        expected: ExpectedVersion,
        events: Vec<EventData>,
    ) -> Result<AppendResult> {
        let expected_code: i64 = match expected {
            ExpectedVersion::Any => -1,
            ExpectedVersion::NoStream => -2,
            ExpectedVersion::StreamExists => -3,
            ExpectedVersion::Exact(v) => i64::try_from(v).map_err(|_| {
                Error::InvalidInput(format!("expected version {v} is out of range"))
            })?,
        };
        let (w, idle, route) = self.routes.pick(stream, &self.writers);
        let writer = &self.writers[w];
        let busy = BusyGuard(writer.busy.clone());
        let (reply, rx) = oneshot::channel();
        let pending = PendingAppend {
            stream: stream.to_owned(),
            expected,
            expected_code,
            events,
            reply,
            _route: route,
            _busy: busy,
        };
        let direct = if idle {
            writer.slot.clone().try_lock_owned().ok()
        } else {
            None
        };
        if let Some(_slot) = direct {
            // No other append of this writer's is queued or running: no group to join.
            let result = append_single(&self.shared.pool, &pending).await;
            if matches!(result, Ok((_, true))) {
                self.shared.announce();
            }
            return result.map(|(r, _)| r);
        }
        if writer.queue.send(pending).await.is_err() {
            return Err(Error::Closed);
        }
        rx.await.map_err(|_| Error::Closed)?
    }
}

/// An append waiting in a writer's queue.
struct PendingAppend {
    stream: String,
    expected: ExpectedVersion,
    /// `expected` as `galleon_append` takes it.
    expected_code: i64,
    events: Vec<EventData>,
    reply: oneshot::Sender<Result<AppendResult>>,
    /// Keeps the stream routed to this append's writer until the append is done with.
    _route: StreamRouteGuard,
    /// Counts the append in its writer's `busy` until it is done with (answered or dropped).
    _busy: BusyGuard,
}

/// Which writer has appends of which stream queued or running. An append of a stream listed
/// here goes to that writer (so one process never has two transactions appending to one stream:
/// they would queue on its row lock, or both try to create it); any other append goes to the
/// writer with the fewest appends queued or running, so a burst is spread evenly.
#[derive(Default)]
struct StreamRoutes {
    /// Stream name -> (writer index, appends of the stream routed and not yet done).
    streams: std::sync::Mutex<std::collections::HashMap<String, (usize, usize)>>,
}

impl StreamRoutes {
    /// Picks the writer for an append of `stream` and counts the append in its `busy`; `true`
    /// with it when no writer had anything queued or running: then the caller runs the append
    /// itself. Under concurrency every append queues, so a burst goes in batches (COPY) and none
    /// through `galleon_append`'s slower per-row insert (measured at 10 writers, DESIGN-NOTES.md).
    fn pick(self: &Arc<Self>, stream: &str, writers: &[Writer]) -> (usize, bool, StreamRouteGuard) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let w = match streams.get_mut(stream) {
            Some((w, n)) => {
                *n += 1;
                *w
            }
            None => {
                let w = (0..writers.len())
                    .min_by_key(|&i| writers[i].busy.load(Ordering::Acquire))
                    .expect("at least one writer");
                streams.insert(stream.to_owned(), (w, 1));
                w
            }
        };
        let idle = writers[w].busy.fetch_add(1, Ordering::AcqRel) == 0
            && writers
                .iter()
                .enumerate()
                .all(|(i, other)| i == w || other.busy.load(Ordering::Acquire) == 0);
        let guard = StreamRouteGuard {
            routes: self.clone(),
            stream: stream.to_owned(),
        };
        (w, idle, guard)
    }
}

/// Releases an append's routing entry when the append is done (or dropped).
struct StreamRouteGuard {
    routes: Arc<StreamRoutes>,
    stream: String,
}

impl Drop for StreamRouteGuard {
    fn drop(&mut self) {
        let mut streams = self
            .routes
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((_, n)) = streams.get_mut(&self.stream) {
            *n -= 1;
            if *n == 0 {
                streams.remove(&self.stream);
            }
        }
    }
}

/// One writer: its task's queue, and how many appends of its streams are queued or running.
struct Writer {
    queue: mpsc::Sender<PendingAppend>,
    /// Appends of this writer's streams queued or in flight, including ones run directly by
    /// their caller. An append that finds 0 here and in every other writer runs at once in its
    /// caller's task: a lone writer pays no hand-over to the writer task and back.
    busy: Arc<AtomicUsize>,
    /// Held by whichever transaction of this writer runs: an append run directly by its caller,
    /// or the writer task's batch. One at a time, so appends that queue behind a direct one wait
    /// for it and then go in one batch, instead of a small batch racing it.
    slot: Arc<tokio::sync::Mutex<()>>,
}

/// Decrements a writer's `busy` count when an append it counted is answered (or dropped).
struct BusyGuard(Arc<AtomicUsize>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Counts a group-commit batch in `WriterShared::batches` while it lives, so the count drops
/// even if the batch's future unwinds.
struct BatchGuard<'a>(&'a watch::Sender<usize>);

impl<'a> BatchGuard<'a> {
    fn new(batches: &'a watch::Sender<usize>) -> Self {
        batches.send_modify(|n| *n += 1);
        BatchGuard(batches)
    }
}

impl Drop for BatchGuard<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// What a writer task shares with the store.
#[derive(Clone)]
pub(super) struct WriterShared {
    pub(super) pool: Pool,
    pub(super) wake: Arc<watch::Sender<u64>>,
    /// Bumped after each committed batch; the background task turns it into NOTIFYs.
    pub(super) appended: Arc<watch::Sender<u64>>,
    /// Group-commit batches being written; the WAL nudge (`notify.rs`) works while this is
    /// above 0.
    pub(super) batches: Arc<watch::Sender<usize>>,
}

/// A writer task: takes the appends queued for it, as many as are waiting (up to
/// [`MAX_BATCH_APPENDS`] and [`MAX_BATCH_EVENTS`]), and stores them in one transaction: group
/// commit. Ends when the store is dropped and its queue is empty.
async fn writer_loop(
    shared: WriterShared,
    mut rx: mpsc::Receiver<PendingAppend>,
    slot: Arc<tokio::sync::Mutex<()>>,
) {
    let mut carry: Option<PendingAppend> = None;
    loop {
        let first = match carry.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        // Appends reach a writer only while another of its appends is queued or running, that is
        // under concurrency: wait for a direct append of this writer to finish, and let the other
        // ready tasks run (and queue theirs) before taking.
        let _slot = slot.lock().await;
        tokio::task::yield_now().await;
        let mut events = first.events.len();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_APPENDS {
            match rx.try_recv() {
                Ok(p) if events + p.events.len() > MAX_BATCH_EVENTS => {
                    carry = Some(p);
                    break;
                }
                Ok(p) => {
                    events += p.events.len();
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        let answers = if batch.len() == 1 {
            let p = batch.pop().expect("one append");
            let result = append_single(&shared.pool, &p).await;
            vec![(p.reply, result)]
        } else {
            let _writing = BatchGuard::new(&shared.batches);
            append_batch(&shared.pool, batch).await
        };
        // Subscribers are woken before the callers learn of their appends, as with a direct one.
        if answers.iter().any(|(_, r)| matches!(r, Ok((_, true)))) {
            shared.announce();
        }
        for (reply, result) in answers {
            let _ = reply.send(result.map(|(r, _)| r));
        }
    }
}

/// An append's caller and its outcome (`true` with it when events were stored now).
type Answer = (
    oneshot::Sender<Result<AppendResult>>,
    Result<(AppendResult, bool)>,
);

impl WriterShared {
    /// Wakes local subscribers and has the background task NOTIFY other processes.
    fn announce(&self) {
        self.wake.send_modify(|v| *v = v.wrapping_add(1));
        self.appended.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// Result row of `galleon_append` / `galleon_append_batch`.
#[derive(Clone, Copy)]
struct Outcome {
    status: i32,
    actual: Option<i64>,
    first_version: Option<i64>,
    first_position: Option<i64>,
    /// The stream's number (`galleon_append_batch` only, for the events the caller COPYs).
    stream_no: Option<i64>,
}

impl Outcome {
    fn from_row(row: &tokio_postgres::Row) -> Result<Outcome> {
        Ok(Outcome {
            status: row.try_get(0)?,
            actual: row.try_get(1)?,
            first_version: row.try_get(2)?,
            first_position: row.try_get(3)?,
            stream_no: if row.len() > 4 { row.try_get(4)? } else { None },
        })
    }

    /// The caller's answer; `true` with it when the append stored events now.
    fn into_result(self, p: &PendingAppend) -> Result<(AppendResult, bool)> {
        let n = p.events.len() as u64;
        match (self.status, self.first_version, self.first_position) {
            (0 | 1, Some(fv), Some(fp)) => {
                let (fv, fp) = (fv as u64, fp as u64);
                Ok((
                    AppendResult {
                        first_version: fv,
                        last_version: fv + n - 1,
                        first_position: fp,
                        last_position: fp + n - 1,
                    },
                    self.status == 0,
                ))
            }
            (2, _, _) => Err(Error::WrongExpectedVersion {
                expected: p.expected,
                actual: self.actual.map(|v| v as u64),
            }),
            (3, _, _) => Err(Error::DuplicateEventId(p.events[0].id)),
            (other, _, _) => Err(Error::Corrupt(format!(
                "galleon_append returned status {other} without the expected fields"
            ))),
        }
    }
}

/// One append in its own transaction: one `galleon_append` call, one round trip. Used for a
/// batch of one (no latency added to a lone writer) and, per append, when a batch fails.
async fn append_single(pool: &Pool, p: &PendingAppend) -> Result<(AppendResult, bool)> {
    let ids: Vec<uuid::Uuid> = p.events.iter().map(|e| e.id).collect();
    let types: Vec<&str> = p.events.iter().map(|e| e.event_type.as_str()).collect();
    let data: Vec<JsonText<'_>> = p.events.iter().map(|e| JsonText(e.data.get())).collect();
    let meta: Vec<JsonText<'_>> = p
        .events
        .iter()
        .map(|e| JsonText(e.metadata.get()))
        .collect();
    let client = pool.get().await?;
    let stmt = match client.prepare_cached(SQL_APPEND).await {
        Ok(stmt) => stmt,
        Err(e) => {
            discard_if_broken(client, &e);
            return Err(e.into());
        }
    };
    // A unique violation means an id of this append was stored by a concurrent call between
    // our idempotency check and our insert; one more try sees it and answers accordingly. A
    // serialization failure means another process's newer transaction appended to the stream
    // first (migration 7); a new transaction gets a newer id, so the append is run again.
    let mut attempt = 0;
    let mut reordered = 0;
    let row = loop {
        attempt += 1;
        match client
            .query_one(
                &stmt,
                &[&p.stream, &p.expected_code, &ids, &types, &data, &meta],
            )
            .await
        {
            Ok(row) => break row,
            Err(e)
                if e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
                    && reordered < MAX_REORDER_RETRIES =>
            {
                reordered += 1;
                attempt -= 1;
                continue;
            }
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) && attempt < 2 => continue,
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                let dup: Option<uuid::Uuid> = client
                    .query_opt(
                        "SELECT event_id FROM events WHERE event_id = ANY($1) LIMIT 1",
                        &[&ids],
                    )
                    .await?
                    .and_then(|r| r.try_get(0).ok());
                return match dup {
                    Some(id) => Err(Error::DuplicateEventId(id)),
                    None => Err(e.into()),
                };
            }
            Err(e) => {
                discard_if_broken(client, &e);
                return Err(e.into());
            }
        }
    };
    drop(client);
    let (result, stored) = Outcome::from_row(&row)?.into_result(p)?;
    if !stored && !p.expected.accepts(result.first_version.checked_sub(1)) {
        // A replay counts as one only under the expectation the original append met
        // (EventStoreDB's rule); otherwise it is the conflict it would have been.
        let actual = current_version(pool, &p.stream).await?;
        return Err(Error::WrongExpectedVersion {
            expected: p.expected,
            actual,
        });
    }
    Ok((result, stored))
}

/// The version of the stream's last event, `None` when the stream has none.
async fn current_version(pool: &Pool, stream: &str) -> Result<Option<u64>> {
    let client = pool.get().await?;
    let row = client
        .query_opt(
            "SELECT version FROM streams WHERE stream_id = $1",
            &[&stream],
        )
        .await?;
    let version: Option<i64> = row.map(|r| r.try_get(0)).transpose()?;
    Ok(version.and_then(|v| u64::try_from(v).ok()))
}

/// Group commit of two or more appends: one transaction, in which `galleon_append_batch` checks
/// every append and reserves versions and positions for the accepted ones, then one COPY of all
/// their events, then one commit (one WAL flush). Appends whose first id is stored already
/// (retries, duplicates) are answered afterwards by `galleon_append`. If the batch fails in any
/// way (a concurrent process wrote the same stream or id, a dropped connection), nothing of it is
/// known to be committed, so every append is run again on its own: a retry with the same ids is
/// idempotent, so even a batch that did commit before the connection dropped is answered
/// correctly, and every caller gets the outcome of its own append.
async fn append_batch(pool: &Pool, batch: Vec<PendingAppend>) -> Vec<Answer> {
    let outcomes = match try_batch(pool, &batch).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            tracing::debug!(error = %e, appends = batch.len(), "group commit failed; appending one by one");
            vec![None; batch.len()]
        }
    };
    let mut answers = Vec::with_capacity(batch.len());
    for (p, outcome) in batch.into_iter().zip(outcomes) {
        let result = match outcome {
            Some(o) => o.into_result(&p),
            None => append_single(pool, &p).await,
        };
        answers.push((p.reply, result));
    }
    answers
}

/// The batch transaction. Returns one entry per append: its outcome, or `None` when it is to be
/// run on its own (its first id is stored already).
async fn try_batch(pool: &Pool, batch: &[PendingAppend]) -> Result<Vec<Option<Outcome>>> {
    let streams: Vec<&str> = batch.iter().map(|p| p.stream.as_str()).collect();
    let expected: Vec<i64> = batch.iter().map(|p| p.expected_code).collect();
    let counts: Vec<i32> = batch.iter().map(|p| p.events.len() as i32).collect();
    let first_ids: Vec<uuid::Uuid> = batch.iter().map(|p| p.events[0].id).collect();
    let mut client = pool.get().await?;
    let result = async {
        let check = client.prepare_cached(SQL_APPEND_BATCH).await?;
        let copy = client.prepare_cached(SQL_COPY_EVENTS).await?;
        let tx = client.transaction().await?;
        let rows = tx
            .query(&check, &[&streams, &expected, &counts, &first_ids])
            .await?;
        if rows.len() != batch.len() {
            return Err(Error::Corrupt(format!(
                "galleon_append_batch returned {} rows for {} appends",
                rows.len(),
                batch.len()
            )));
        }
        let outcomes = rows
            .iter()
            .map(Outcome::from_row)
            .collect::<Result<Vec<_>>>()?;
        let mut accepted: Vec<(&PendingAppend, i64, i64, i64)> = batch
            .iter()
            .zip(&outcomes)
            .filter_map(
                |(p, o)| match (o.status, o.first_version, o.first_position, o.stream_no) {
                    (0, Some(fv), Some(fp), Some(sno)) => Some((p, fv, fp, sno)),
                    _ => None,
                },
            )
            .collect();
        // An accepted append must have all three (else its events would not be copied).
        if accepted.len() != outcomes.iter().filter(|o| o.status == 0).count() {
            return Err(Error::Corrupt(
                "galleon_append_batch accepted an append without version, position or stream number"
                    .to_owned(),
            ));
        }
        // In position order (the function numbers the appends grouped by stream): each
        // insert into the primary key then lands at its right end. Each append's first row
        // carries its length, and only that row enters the stream indexes (schema version 4).
        accepted.sort_unstable_by_key(|&(_, _, fp, _)| fp);
        if !accepted.is_empty() {
            let sink = tx.copy_in::<_, bytes::Bytes>(&copy).await?;
            futures::pin_mut!(sink);
            let mut buf = bytes::BytesMut::with_capacity(COPY_CHUNK_BYTES + 4096);
            buf.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
            buf.extend_from_slice(&0i32.to_be_bytes()); // flags
            buf.extend_from_slice(&0i32.to_be_bytes()); // header extension
            for (p, fv, fp, sno) in accepted {
                // The append's length on its first event, 0 on the rest (schema version 4).
                let len = i16::try_from(p.events.len()).expect("MAX_APPEND_EVENTS fits i16");
                for (i, e) in p.events.iter().enumerate() {
                    let append_len = if i == 0 { len } else { 0 };
                    copy_row(
                        &mut buf,
                        fp + i as i64,
                        sno,
                        &p.stream,
                        fv + i as i64,
                        e,
                        append_len,
                    );
                    if buf.len() >= COPY_CHUNK_BYTES {
                        sink.send(buf.split().freeze()).await?;
                    }
                }
            }
            buf.extend_from_slice(&(-1i16).to_be_bytes());
            sink.send(buf.freeze()).await?;
            sink.finish().await?;
        }
        tx.commit().await?;
        Ok(outcomes)
    }
    .await;
    match result {
        Ok(outcomes) => Ok(outcomes
            .into_iter()
            .map(|o| (o.status != 4).then_some(o))
            .collect()),
        Err(e) => {
            if let Some(pg) = e.as_postgres() {
                discard_if_broken(client, pg);
            }
            Err(e)
        }
    }
}

/// Appends one event row to binary COPY data: field count, then each field as length + bytes
/// (`json` travels as its text, like `text`).
fn copy_row(
    buf: &mut bytes::BytesMut,
    position: i64,
    stream_no: i64,
    stream: &str,
    version: i64,
    e: &EventData,
    append_len: i16,
) {
    fn field(buf: &mut bytes::BytesMut, bytes: &[u8]) {
        buf.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        buf.extend_from_slice(bytes);
    }
    buf.extend_from_slice(&9i16.to_be_bytes());
    field(buf, &position.to_be_bytes());
    field(buf, &stream_no.to_be_bytes());
    field(buf, stream.as_bytes());
    field(buf, &version.to_be_bytes());
    field(buf, e.id.as_bytes());
    field(buf, e.event_type.as_bytes());
    field(buf, e.data.get().as_bytes());
    field(buf, e.metadata.get().as_bytes());
    field(buf, &append_len.to_be_bytes());
}

/// Checked JSON text bound to a `json` parameter: the binary wire format of `json` is the text
/// itself, so it is copied into the message as is (no serde on the way out).
#[derive(Debug)]
pub(super) struct JsonText<'a>(pub(super) &'a str);

impl ToSql for JsonText<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_spreads_streams_and_keeps_a_stream_on_one_writer() {
        let writers: Vec<Writer> = (0..4)
            .map(|_| Writer {
                queue: mpsc::channel(1).0,
                busy: Arc::new(AtomicUsize::new(0)),
                slot: Arc::default(),
            })
            .collect();
        let router = Arc::new(StreamRoutes::default());
        let mut guards = Vec::new();
        let mut idle = 0;
        for i in 0..100 {
            let (_, was_idle, g) = router.pick(&format!("s-{i}"), &writers);
            idle += usize::from(was_idle);
            guards.push(g);
        }
        assert_eq!(
            idle, 1,
            "only an append that finds every writer idle runs directly; the rest queue"
        );
        let busy: Vec<usize> = writers
            .iter()
            .map(|w| w.busy.load(Ordering::Acquire))
            .collect();
        assert_eq!(busy, [25, 25, 25, 25]);
        // A stream with an append pending stays on its writer, however busy that one is.
        let (w0, _, g0) = router.pick("s-7", &writers);
        let (w1, _, g1) = router.pick("s-7", &writers);
        assert_eq!(w0, w1);
        let first = guards.remove(7);
        let (w2, _, g2) = router.pick("s-7", &writers);
        assert_eq!(w2, w0);
        drop((first, g0, g1, g2));
        assert!(!router.streams.lock().unwrap().contains_key("s-7"));
        drop(guards);
        assert!(router.streams.lock().unwrap().is_empty());
    }
}
