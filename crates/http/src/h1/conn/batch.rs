//! Pipelined requests answered together: while the read buffer still holds the next request, a
//! whole response waits in the connection's batch instead of going out alone; the batch is
//! written in one gathered write (as few as the write policy's iovec limit allows) once the
//! buffer has no complete request left, before anything else is written or awaited (a handler
//! not ready at once included: `Conn::run` polls it once first), or when it
//! reaches [`Limits::pipeline_batch_bytes`](crate::Limits::pipeline_batch_bytes) or the iovec
//! limit. Responses keep their order; a client that pipelines holds at most one batch.

use std::io;

use super::respond::write_timed;
use super::{Conn, Observed};
use crate::h1::encode::{Framing, KeepAlive, write_head};
use crate::response::{BodyKind, Parts, Response};
use galleon_iolist::{IoList, WriteStats};

/// Responses waiting to be written together, and what their exchanges report once they are.
#[derive(Default)]
pub(super) struct Batch {
    queued: Vec<Queued>,
    /// Cleared head lists, kept for the next batch's heads.
    spare: Vec<IoList>,
    bytes: usize,
    segments: usize,
}

/// One waiting response: its head, its parts (the body, and what it holds until sent), and its
/// exchange.
struct Queued {
    head: IoList,
    parts: Box<Parts>,
    send_body: bool,
    observed: Option<Observed>,
    route: Option<usize>,
}

impl Batch {
    /// Whether responses are waiting.
    pub(super) fn pending(&self) -> bool {
        !self.queued.is_empty()
    }
}

impl Conn {
    /// Whether `resp` can wait in the batch: a whole body written under the server's policy,
    /// not traced, with batching on.
    pub(super) fn batchable(&self, resp: &Response, token: &Option<String>) -> bool {
        self.shared.config.limits.pipeline_batch_bytes > 0
            && token.is_none()
            && resp.policy().is_none()
            && matches!(resp.body().kind, BodyKind::Full(_))
    }

    /// Whether the next response should wait for the ones behind it: the connection goes on and
    /// the read buffer already holds bytes of the next request.
    pub(super) fn more_behind(&self, keep: bool) -> bool {
        keep && !self.buf.is_empty()
    }

    /// Whether the batch has reached its bytes or the write policy's iovecs and should go out.
    pub(super) fn batch_full(&self) -> bool {
        self.batch.bytes >= self.shared.config.limits.pipeline_batch_bytes
            || self.batch.segments >= self.shared.config.write_policy.iov_limit()
    }

    /// Adds a [`batchable`](Self::batchable) response to the batch, its head framed as
    /// [`write_response`](Self::write_response) frames a whole body.
    pub(super) fn queue(
        &mut self,
        resp: Response,
        head_only: bool,
        minor: u8,
        keep: bool,
        observed: Option<Observed>,
        route: Option<usize>,
    ) {
        let parts = resp.into_parts();
        let len = parts.body.as_full().map_or(0, IoList::len);
        let framing = if parts.status.is_bodiless() {
            Framing::None
        } else {
            Framing::Length(len as u64)
        };
        let ka = match (keep, minor) {
            (false, _) => KeepAlive::Close,
            (true, 0) => KeepAlive::KeepAlive10,
            (true, _) => KeepAlive::Default,
        };
        let mut head = self.batch.spare.pop().unwrap_or_default();
        write_head(&mut head, parts.status, &parts.headers, framing, ka);
        let send_body = !head_only && framing != Framing::None;
        self.batch.bytes += head.len();
        self.batch.segments += head.segment_count();
        if send_body && let Some(body) = parts.body.as_full() {
            self.batch.bytes += body.len();
            self.batch.segments += body.segment_count();
        }
        self.batch.queued.push(Queued {
            head,
            parts,
            send_body,
            observed,
            route,
        });
    }

    /// Writes the batch under the write timeout, then ends its exchanges (the write calls are
    /// booked to the last response, so the observer's sums stay true). `Err`: the connection
    /// failed and must close.
    pub(super) async fn flush_batch(&mut self) -> Result<(), ()> {
        if !self.batch.pending() {
            return Ok(());
        }
        let mut queued = std::mem::take(&mut self.batch.queued);
        self.batch.bytes = 0;
        self.batch.segments = 0;
        self.writer.set_policy(self.shared.config.write_policy);
        let _ = self.writer.take_stats();
        let result = {
            let mut lists: Vec<&IoList> = Vec::with_capacity(queued.len() * 2);
            for q in &queued {
                lists.push(&q.head);
                if q.send_body
                    && let Some(body) = q.parts.body.as_full()
                {
                    lists.push(body);
                }
            }
            let t = self.shared.config.limits.write_timeout;
            write_timed(
                &mut self.writer,
                &mut self.stream,
                &mut self.timer,
                t,
                &lists,
            )
            .await
        };
        let stats = self.writer.take_stats();
        let n = queued.len();
        for (i, q) in queued.drain(..).enumerate() {
            self.last_status = q.parts.status.0;
            self.last_writes = if i + 1 == n {
                stats
            } else {
                WriteStats::default()
            };
            let written = match &result {
                Ok(()) => Ok(true),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            let _ = self.end_exchange(written, q.observed, q.route);
            let mut head = q.head;
            head.clear();
            self.batch.spare.push(head);
        }
        // The drained vector keeps its capacity for the next batch.
        self.batch.queued = queued;
        result.map_err(|_| ())
    }
}
