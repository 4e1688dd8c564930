//! Writing one response on a connection: the head and a whole body in one gathered write, a
//! file with `sendfile`, or a stream of chunks; each under the connection's write timeout.
//!
//! The response's write policy (its own, or the server's) is set here for every kind of body. A
//! file goes out in 1 MiB slices, each under the write timeout; an iterator body's chunks come
//! through `h1/chunks.rs`. Before a connection's first streamed body or file it bounds the socket's
//! unsent bytes (`TCP_NOTSENT_LOWAT`, `h1/unsent.rs`); for a reader with the raised bound, chunks
//! that are ready at once go out in the same write.

use std::io;
use std::pin::Pin;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use galleon_iolist::{IoList, IoWriter, WriteStats};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep, timeout};

use super::{Conn, INIT_READ_BUF, reserve, timed};
use crate::h1::chunks::offload_iter;
use crate::h1::encode::{Framing, KeepAlive, push_chunk, push_last_chunk, write_head};
use crate::h1::unsent::UnsentBound;
use crate::response::{BodyKind, ChunkStream, Response};
use crate::trace::{ResponseTrace, Syscall, WriteRecord, collect, log_record};

/// Bytes of a file sent under one write timeout: a download is cut only when it stops moving
/// (less than 1 MiB per `write_timeout`, 17 KB/s at the default 60 s), not when the whole file
/// takes longer than the timeout.
const FILE_PROGRESS_SLICE: u64 = 1024 * 1024;

impl Conn {
    /// Writes one response. Returns whether the connection stays open.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write_response(
        &mut self,
        resp: Response,
        head_only: bool,
        minor: u8,
        keep: bool,
        token: Option<String>,
        label: Option<String>,
    ) -> io::Result<bool> {
        let parts = resp.into_parts();
        let status = parts.status;
        self.writer
            .set_policy(parts.policy.unwrap_or(self.shared.config.write_policy));
        let _ = self.writer.take_stats();
        let tracing_this = match (&token, &self.sink) {
            (Some(_), Some(sink)) => {
                *sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(ResponseTrace {
                    request: format!("{} -> {}", label.unwrap_or_default(), status.0),
                    ..ResponseTrace::default()
                });
                true
            }
            _ => false,
        };
        let mut keep = keep;
        let framing = if status.is_bodiless() {
            Framing::None
        } else {
            match &parts.body.kind {
                BodyKind::Full(l) => Framing::Length(l.len() as u64),
                BodyKind::File(_, _, n) => Framing::Length(*n),
                // Only with 101, which is bodiless: never reached.
                BodyKind::Upgrade(_) => Framing::None,
                BodyKind::Stream(_) | BodyKind::Iter(_) if minor >= 1 => Framing::Chunked,
                BodyKind::Stream(_) | BodyKind::Iter(_) => {
                    keep = false;
                    Framing::Close
                }
            }
        };
        let ka = match (keep, minor) {
            (false, _) => KeepAlive::Close,
            (true, 0) => KeepAlive::KeepAlive10,
            (true, _) => KeepAlive::Default,
        };
        self.msg.clear();
        write_head(&mut self.msg, status, &parts.headers, framing, ka);
        let send_body = !head_only && framing != Framing::None;
        if send_body && !matches!(parts.body.kind, BodyKind::Full(_)) {
            self.bound_unsent();
        }
        let mut extra = WriteStats::default();
        let result = if !send_body {
            self.write_msg().await
        } else {
            match parts.body.kind {
                BodyKind::Full(ref list) => self.write_msg_and(list).await,
                BodyKind::Upgrade(_) => self.write_msg().await,
                BodyKind::File(file, offset, len) => match self.write_msg().await {
                    Ok(()) => self.write_file(&file, offset, len, &mut extra).await,
                    Err(e) => Err(e),
                },
                BodyKind::Iter(it) => {
                    let chunks = offload_iter(it, self.shared.chunk_pool.as_ref());
                    self.write_chunks(chunks, false, framing == Framing::Chunked)
                        .await
                }
                BodyKind::Stream(s) => {
                    self.write_chunks(s, true, framing == Framing::Chunked)
                        .await
                }
            }
        };
        self.msg.clear();
        self.last_status = status.0;
        self.last_writes = self.writer.take_stats();
        self.last_writes += extra;
        if tracing_this && let (Some(token), Some(sink)) = (token, &self.sink) {
            let trace = sink.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(mut trace) = trace {
                trace.stats = self.last_writes;
                if let Some(traces) = &self.shared.traces {
                    traces.put(token, trace);
                }
            }
        }
        result.map(|()| keep)
    }

    /// Bounds the bytes that may wait unsent in the kernel on this connection before a streamed
    /// body or file ([`Limits::stream_unsent_bytes`](crate::Limits)): past it the socket stops
    /// being writable, so a slow reader pins that much kernel memory rather than a send buffer
    /// grown to megabytes. Set once, at the connection's first such response; each one measures
    /// the reader's pace afresh ([`UnsentBound`]).
    fn bound_unsent(&mut self) {
        let limits = &self.shared.config.limits;
        let now = std::time::Instant::now();
        let bound = self.unsent.get_or_insert_with(|| {
            UnsentBound::new(
                limits.stream_unsent_bytes,
                limits.stream_unsent_max_bytes,
                now,
            )
        });
        if let Some(bytes) = bound.begin(now) {
            self.set_unsent(bytes);
        }
    }

    /// `bytes` of a streamed body or file were written: the bound follows the reader's pace.
    fn unsent_written(&mut self, bytes: u64) {
        let Some(bound) = self.unsent.as_mut() else {
            return;
        };
        if let Some(bytes) = bound.written(bytes, std::time::Instant::now()) {
            self.set_unsent(bytes);
        }
    }

    /// Gives the socket `TCP_NOTSENT_LOWAT` = `bytes`; a refusal (not TCP, an old kernel) leaves
    /// the default.
    fn set_unsent(&self, bytes: u32) {
        if let Err(e) = socket2::SockRef::from(&self.stream).set_tcp_notsent_lowat(bytes) {
            tracing::debug!(peer = %self.peer, error = %e, "TCP_NOTSENT_LOWAT refused");
        }
    }

    /// Writes `self.msg` under the write timeout.
    pub(super) async fn write_msg(&mut self) -> io::Result<()> {
        self.write_msg_and(&IoList::new()).await
    }

    /// Writes `self.msg` and then `body` in the same calls, under the write timeout.
    pub(super) async fn write_msg_and(&mut self, body: &IoList) -> io::Result<()> {
        let t = self.shared.config.limits.write_timeout;
        let lists = [&self.msg, body];
        write_timed(
            &mut self.writer,
            &mut self.stream,
            &mut self.timer,
            t,
            &lists,
        )
        .await
    }

    /// Sends `len` bytes of `file` from `offset` with `sendfile`, [`FILE_PROGRESS_SLICE`] at a
    /// time, each under the write timeout: a slow but moving download goes on however long it
    /// takes; one that stops for the write timeout is cut.
    pub(super) async fn write_file(
        &mut self,
        file: &std::fs::File,
        offset: u64,
        len: u64,
        extra: &mut WriteStats,
    ) -> io::Result<()> {
        let fd = self.fd;
        let log = self.shared.config.trace_writes;
        let sink = self.sink.clone();
        let t = self.shared.config.limits.write_timeout;
        let mut on_call = |offered: usize, r: &io::Result<usize>| {
            extra.syscalls += 1;
            extra.iovecs += 1;
            if let Ok(n) = r {
                extra.bytes += *n as u64;
                extra.bytes_referenced += *n as u64;
                if *n < offered {
                    extra.short_writes += 1;
                }
            }
            if log || sink.is_some() {
                let rec = WriteRecord {
                    syscall: Syscall::Sendfile,
                    fd,
                    iovcnt: 1,
                    offered: offered as u64,
                    result: match r {
                        Ok(n) => Ok(*n as u64),
                        Err(e) => Err(e.to_string()),
                    },
                    segments: Vec::new(),
                };
                if log {
                    log_record(&rec);
                }
                if let Some(s) = &sink {
                    collect(s, rec);
                }
            }
        };
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let slice = (end - at).min(FILE_PROGRESS_SLICE);
            let sent = crate::sendfile::send_file(&mut self.stream, file, at, slice, &mut on_call);
            match timeout(t, sent).await {
                Ok(Ok(_)) => {
                    at += slice;
                    self.unsent_written(slice);
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "client stopped taking the file",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Writes a body chunk by chunk: each chunk goes out (with the head in front of the first)
    /// before the next is awaited. A client that closes while the body is waiting for its next
    /// chunk ends it at once; so does server shutdown when `end_on_shutdown` (event streams, which
    /// would otherwise never end; a rendered page instead runs on to its end within the grace).
    pub(super) async fn write_chunks(
        &mut self,
        mut chunks: ChunkStream,
        end_on_shutdown: bool,
        chunked: bool,
    ) -> io::Result<()> {
        let mut head_pending = true;
        let max_buffered = self.shared.config.limits.max_head_bytes;
        loop {
            let next = loop {
                let reading = self.buf.len() < max_buffered;
                reserve(&mut self.buf, INIT_READ_BUF);
                if end_on_shutdown && self.shared.stopping() {
                    break None;
                }
                tokio::select! {
                    biased;
                    _ = &mut self.stop, if end_on_shutdown => break None,
                    item = chunks.next() => break item,
                    r = self.stream.read_buf(&mut self.buf), if reading => match r {
                        Ok(0) | Err(_) => {
                            return Err(io::Error::new(
                                io::ErrorKind::ConnectionAborted,
                                "client closed during a stream",
                            ));
                        }
                        // A pipelined request: keep it for after the stream.
                        Ok(_) => {}
                    },
                }
            };
            let chunk = match next {
                None => break,
                Some(Err(e)) => {
                    tracing::warn!(peer = %self.peer, error = %e, "body stream failed; closing");
                    return Err(io::Error::other(e));
                }
                Some(Ok(c)) if c.is_empty() => continue,
                Some(Ok(c)) => c,
            };
            if !head_pending {
                self.msg.clear();
            }
            head_pending = false;
            if chunked {
                push_chunk(&mut self.msg, chunk);
            } else {
                self.msg.push_list(chunk);
            }
            // A reader that has shown it is fast gets the chunks that are ready at once in the
            // same write, up to a batch: one call, and one wake-up of the reader, for several.
            let batch = self.unsent.as_ref().map_or(0, UnsentBound::batch_bytes);
            let mut ended = false;
            while self.msg.len() < batch {
                match chunks.next().now_or_never() {
                    // Framed, an empty chunk would be the last one.
                    Some(Some(Ok(c))) if c.is_empty() => {}
                    Some(Some(Ok(c))) if chunked => push_chunk(&mut self.msg, c),
                    Some(Some(Ok(c))) => self.msg.push_list(c),
                    Some(Some(Err(e))) => {
                        tracing::warn!(peer = %self.peer, error = %e, "body stream failed; closing");
                        return Err(io::Error::other(e));
                    }
                    Some(None) => {
                        ended = true;
                        break;
                    }
                    None => break,
                }
            }
            let bytes = self.msg.len() as u64;
            self.write_msg().await?;
            self.unsent_written(bytes);
            if ended {
                break;
            }
        }
        if !head_pending {
            self.msg.clear();
        }
        if chunked {
            push_last_chunk(&mut self.msg);
        }
        self.write_msg().await
    }
}

/// Writes `lists` one after the other in gathered calls, under the write timeout `t` (on the
/// connection's timer): what every whole response and every batch of them goes out through.
pub(super) async fn write_timed(
    writer: &mut IoWriter,
    stream: &mut TcpStream,
    timer: &mut Pin<Box<Sleep>>,
    t: Duration,
    lists: &[&IoList],
) -> io::Result<()> {
    let write = std::pin::pin!(writer.write_lists_async(stream, lists));
    match timed(timer, || Instant::now() + t, write).await {
        Some(r) => r,
        None => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "client did not accept the response in time",
        )),
    }
}
