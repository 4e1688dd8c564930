//! The write path: an [`IoList`] to gathered write calls, under a [`WritePolicy`].
//!
//! # Contract
//! - Every byte of the list is written exactly once, in order, or an error is returned.
//! - Each call is handed at most `policy.iov_limit()` iovecs, none of them empty.
//! - A short write (the writer accepted `n` bytes of more) is resumed at byte `n`, whatever
//!   segment or coalesced buffer that falls in; a write of 0 bytes is `ErrorKind::WriteZero`;
//!   `ErrorKind::Interrupted` is retried.
//! - Nothing panics, whatever the list or the policy (a `max_iov` of 0 is taken as 1).
//! - An empty list makes no call at all.
//!
//! The loop works in batches: it fills up to `max_iov` entries from the list (coalescing short runs
//! into the writer's reusable buffer), writes the batch until it is gone, then fills the next.
//!
//! A batch copies at most about 1 MiB (`MAX_BATCH_COPY`), so a slow reader's connection holds that
//! much, not its page; a coalescing buffer over 64 KiB goes back to a small process-wide pool after
//! the write. Blocking (`std::io::Write`) and tokio (`AsyncWrite`) front ends share the planner and
//! the accounting; an installed `WriteTracer` sees every call's iovecs.

use std::io::{self, IoSlice, Write};
use std::ops::Range;

use crate::list::{Cursor, IoList, SegmentKind, next_leaf};
use crate::policy::{WritePolicy, WriteStats};

/// Sees every write call the writer makes: the iovecs it was handed and what it returned.
///
/// This is how `galleon --trace-writes` prints each `writev` with its segments' sizes and addresses
/// without root or DTrace. Implementations must be cheap when disabled; the writer only calls
/// them when one is installed.
pub trait WriteTracer: Send {
    /// Called after each write call with the iovecs given to it and its result.
    fn on_write(&mut self, iov: &[IoSlice<'_>], result: &io::Result<usize>);
}

/// Writes [`IoList`]s to blocking or async writers under a [`WritePolicy`], keeping a reusable
/// coalescing buffer and cumulative [`WriteStats`]. One per connection.
///
/// # Examples
/// ```
/// use galleon_iolist::{IoList, IoWriter, WritePolicy};
///
/// let mut list = IoList::new();
/// list.push_static(&[b'x'; 8192]); // long: its own iovec
/// list.push_copy(b"short");
/// list.push_static(b" pieces"); // two short neighbours: copied into one iovec
///
/// let mut out = Vec::new();
/// let mut writer = IoWriter::new(WritePolicy::default());
/// writer.write_all(&mut out, &list).unwrap();
/// assert_eq!(out, list.to_vec());
/// let stats = writer.stats();
/// assert_eq!(stats.iovecs, 2);
/// assert_eq!(stats.bytes_copied, 12);
/// ```
pub struct IoWriter {
    policy: WritePolicy,
    buf: Vec<u8>,
    stats: WriteStats,
    tracer: Option<Box<dyn WriteTracer>>,
    spare: Spare,
}

/// The vectors a write needs (walk stack, batch entries, iovecs), kept empty between writes so
/// a keep-alive connection allocates them once, not three times per response. They are kept
/// with `'static` lifetimes and converted to and from a write's own lifetime by [`recycle`].
#[derive(Default)]
struct Spare {
    stack: Vec<Cursor<'static>>,
    entries: Vec<Entry<'static>>,
    slices: Vec<IoSlice<'static>>,
}

/// An emptied vector as a vector of another type of the same size and alignment (here: the
/// same type with another lifetime), keeping its allocation: std collects a `vec::IntoIter`
/// through `map` in place. Were it ever not to, this would allocate, not misbehave.
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter()
        .map(|_| unreachable!("the vector is empty"))
        .collect()
}

impl std::fmt::Debug for IoWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoWriter")
            .field("policy", &self.policy)
            .field("stats", &self.stats)
            .field("traced", &self.tracer.is_some())
            .finish()
    }
}

/// Most bytes the coalescing buffer keeps allocated between calls; a larger buffer (a flattened
/// 400 KB response) goes back to [`BIG_BUFFERS`] after use so an idle connection does not pin it.
const KEEP_BUF_CAPACITY: usize = 64 * 1024;

/// Most large coalescing buffers kept for reuse, process-wide: 8, a few per worker thread on
/// small machines. A write uses its buffer only while a batch is copied and sent, but a slow
/// reader's write can hold one for long, so many are in use at once only under such load, and
/// keeping them all afterwards left their memory (up to 32 x 4 MiB before) pinned for good.
const BIG_BUFFERS_KEPT: usize = 8;

/// Most bytes one batch copies into the writer's buffer: a list of small pieces larger than this
/// (a 3.6 MB page of 65-byte strings, flattened) goes out in several batches, so a connection's
/// buffer, which a slow reader keeps for as long as it reads, stays about this size instead of
/// the page's. 1 MiB keeps every page of the seed (410 KB at most) one `writev`.
const MAX_BATCH_COPY: usize = 1024 * 1024;

/// Largest buffer kept for reuse (bytes); a bigger one is freed. A batch copies at most about
/// [`MAX_BATCH_COPY`], so this keeps every buffer a batch makes.
const BIG_BUFFER_MAX: usize = MAX_BATCH_COPY + 64 * 1024;

/// Large coalescing buffers between writes. Without it every flattened 400 KB response allocated
/// and freed 400 KB, which glibc served from fresh pages: a page fault per 4 KiB, and `flatten`
/// lost a third of its throughput in `bench/http.sh` (`bench/results/http.txt`).
static BIG_BUFFERS: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Frees the large coalescing buffers kept for reuse. A server calls it when a burst of load is
/// over, so that what the burst needed is not kept for good (they are made again when needed).
pub fn release_buffer_pool() {
    BIG_BUFFERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
}

/// A kept large buffer, if any (empty, with its capacity).
fn take_big_buffer() -> Option<Vec<u8>> {
    BIG_BUFFERS.lock().ok()?.pop()
}

/// Keeps `buf` for the next large write, or frees it when it is too big or enough are kept.
fn give_big_buffer(mut buf: Vec<u8>) {
    if buf.capacity() > BIG_BUFFER_MAX {
        return;
    }
    buf.clear();
    if let Ok(mut kept) = BIG_BUFFERS.lock()
        && kept.len() < BIG_BUFFERS_KEPT
    {
        kept.push(buf);
    }
}

/// The batch loop of [`IoWriter::write_lists`] and [`IoWriter::write_lists_async`], written once:
/// plan a batch (copying short runs into the writer's buffer), then write it until it is gone,
/// resuming short writes. `$write` is the one call that differs: `w.write_vectored(rest)`, or the
/// same awaited.
macro_rules! write_batches {
    ($self:ident, $lists:ident, |$rest:ident| $write:expr) => {{
        $self.prepare($lists);
        let spare = std::mem::take(&mut $self.spare);
        let mut planner = Planner::new($lists, $self.policy, recycle(spare.stack));
        let mut entries = recycle(spare.entries);
        let mut spare_slices = spare.slices;
        let result = 'batches: loop {
            $self.buf.clear();
            if !planner.fill(&mut entries, &mut $self.buf, &mut $self.stats) {
                break Ok(());
            }
            let mut slices: Vec<IoSlice<'_>> = recycle(std::mem::take(&mut spare_slices));
            slices.extend(entries.iter().map(|e| e.slice(&$self.buf)));
            let mut $rest = &mut slices[..];
            let mut advanced = None;
            while !$rest.is_empty() {
                let want: usize = $rest.iter().map(|s| s.len()).sum();
                let r = $write;
                if let Err(e) = account(
                    &mut $self.stats,
                    &mut $self.tracer,
                    $rest,
                    want,
                    r,
                    &mut advanced,
                ) {
                    break 'batches Err(e);
                }
                if let Some(n) = advanced.take() {
                    IoSlice::advance_slices(&mut $rest, n);
                }
            }
            spare_slices = recycle(slices);
        };
        $self.spare = Spare {
            stack: recycle(planner.stack),
            entries: recycle(entries),
            slices: spare_slices,
        };
        $self.finish(result)
    }};
}

impl IoWriter {
    /// A writer with the given policy and no tracer.
    pub fn new(policy: WritePolicy) -> Self {
        IoWriter {
            policy,
            buf: Vec::new(),
            stats: WriteStats::default(),
            tracer: None,
            spare: Spare::default(),
        }
    }

    /// The current policy.
    pub fn policy(&self) -> WritePolicy {
        self.policy
    }

    /// Changes the policy for the following writes.
    pub fn set_policy(&mut self, policy: WritePolicy) {
        self.policy = policy;
    }

    /// Installs (or with `None` removes) a tracer that sees every write call.
    pub fn set_tracer(&mut self, tracer: Option<Box<dyn WriteTracer>>) {
        self.tracer = tracer;
    }

    /// Takes the tracer back out.
    pub fn take_tracer(&mut self) -> Option<Box<dyn WriteTracer>> {
        self.tracer.take()
    }

    /// Statistics summed over every write since creation or the last [`IoWriter::take_stats`],
    /// including the partial progress of a write that failed.
    pub fn stats(&self) -> WriteStats {
        self.stats
    }

    /// Returns the statistics and resets them to zero.
    pub fn take_stats(&mut self) -> WriteStats {
        std::mem::take(&mut self.stats)
    }

    /// Writes the whole list to a blocking writer.
    pub fn write_all<W: Write + ?Sized>(&mut self, w: &mut W, list: &IoList) -> io::Result<()> {
        self.write_lists(w, &[list])
    }

    /// Writes several lists, one after the other, as if they were one: a response's head and
    /// body go out in the same calls without first nesting the body in the head's list (an
    /// allocation per response).
    pub fn write_lists<W: Write + ?Sized>(
        &mut self,
        w: &mut W,
        lists: &[&IoList],
    ) -> io::Result<()> {
        write_batches!(self, lists, |rest| w.write_vectored(rest))
    }

    /// Writes the whole list to an async writer. Cancel-safe only in the sense that dropping the
    /// future stops writing; how much was written is then in [`IoWriter::stats`].
    #[cfg(feature = "tokio")]
    pub async fn write_all_async<W>(&mut self, w: &mut W, list: &IoList) -> io::Result<()>
    where
        W: tokio::io::AsyncWrite + Unpin + ?Sized,
    {
        self.write_lists_async(w, &[list]).await
    }

    /// [`IoWriter::write_lists`] to an async writer.
    #[cfg(feature = "tokio")]
    pub async fn write_lists_async<W>(&mut self, w: &mut W, lists: &[&IoList]) -> io::Result<()>
    where
        W: tokio::io::AsyncWrite + Unpin + ?Sized,
    {
        use tokio::io::AsyncWriteExt;
        write_batches!(self, lists, |rest| w.write_vectored(rest).await)
    }

    /// Before a write: a list that may need a large coalescing buffer borrows a kept one.
    fn prepare(&mut self, lists: &[&IoList]) {
        let len: usize = lists.iter().map(|l| l.len()).sum();
        if len > KEEP_BUF_CAPACITY
            && self.buf.capacity() < len
            && self.policy.coalesce_below > 0
            && let Some(big) = take_big_buffer()
        {
            let small = std::mem::replace(&mut self.buf, big);
            drop(small);
        }
    }

    fn finish(&mut self, r: io::Result<()>) -> io::Result<()> {
        if self.buf.capacity() > KEEP_BUF_CAPACITY {
            give_big_buffer(std::mem::take(&mut self.buf));
        }
        r
    }
}

/// Books one call's result: stats, tracer, errors. Sets `advance` to the bytes written, or
/// leaves it `None` for a retried interruption.
fn account(
    stats: &mut WriteStats,
    tracer: &mut Option<Box<dyn WriteTracer>>,
    iov: &[IoSlice<'_>],
    want: usize,
    r: io::Result<usize>,
    advance: &mut Option<usize>,
) -> io::Result<()> {
    stats.syscalls += 1;
    stats.iovecs += iov.len() as u64;
    if let Some(t) = tracer.as_mut() {
        t.on_write(iov, &r);
    }
    match r {
        Ok(0) => Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "failed to write the whole io list",
        )),
        Ok(n) => {
            let n = n.min(want);
            if n < want {
                stats.short_writes += 1;
            }
            stats.bytes += n as u64;
            *advance = Some(n);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
        Err(e) => Err(e),
    }
}

impl Default for IoWriter {
    fn default() -> Self {
        IoWriter::new(WritePolicy::default())
    }
}

/// Writes `list` to `w` under `policy` with a fresh [`IoWriter`]; returns what it did.
pub fn write_iolist<W: Write + ?Sized>(
    w: &mut W,
    list: &IoList,
    policy: WritePolicy,
) -> io::Result<WriteStats> {
    let mut writer = IoWriter::new(policy);
    writer.write_all(w, list)?;
    Ok(writer.take_stats())
}

/// Async twin of [`write_iolist`].
#[cfg(feature = "tokio")]
pub async fn write_iolist_async<W>(
    w: &mut W,
    list: &IoList,
    policy: WritePolicy,
) -> io::Result<WriteStats>
where
    W: tokio::io::AsyncWrite + Unpin + ?Sized,
{
    let mut writer = IoWriter::new(policy);
    writer.write_all_async(w, list).await?;
    Ok(writer.take_stats())
}

/// One iovec of a batch: a segment by reference, or a run of the coalescing buffer.
#[derive(Debug, Clone)]
enum Entry<'a> {
    Ref(&'a [u8]),
    Buf(Range<usize>),
}

impl<'a> Entry<'a> {
    fn slice<'b>(&self, buf: &'b [u8]) -> IoSlice<'b>
    where
        'a: 'b,
    {
        match self {
            Entry::Ref(s) => IoSlice::new(s),
            Entry::Buf(r) => IoSlice::new(&buf[r.clone()]),
        }
    }
}

/// Walks a list and cuts it into batches under a policy.
struct Planner<'a> {
    stack: Vec<Cursor<'a>>,
    peeked: Option<&'a [u8]>,
    policy: WritePolicy,
    iov_limit: usize,
    /// The whole plan when it was known at the start (see [`two_leaves`]): the batch `fill`
    /// returns first, with an empty `stack`.
    ready: Option<[Option<&'a [u8]>; 2]>,
}

/// The common response (a head, then a body rendered into one buffer: one leaf each) planned
/// without walking: at most two lists of at most one top-level leaf each, not both short (two
/// short ones are coalesced), and room for two iovecs. The general walk gives the same batch:
/// every leaf by reference.
fn two_leaves<'a>(lists: &[&'a IoList], policy: WritePolicy) -> Option<[Option<&'a [u8]>; 2]> {
    if lists.len() > 2 || policy.iov_limit() < 2 {
        return None;
    }
    let mut out = [None, None];
    let mut n = 0;
    for l in lists {
        if l.is_empty() {
            continue;
        }
        out[n] = Some(l.single_leaf()?);
        n += 1;
    }
    let small = policy.coalesce_below;
    match out {
        [Some(a), Some(b)] if a.len() < small && b.len() < small => None,
        _ => Some(out),
    }
}

impl<'a> Planner<'a> {
    /// A planner walking `lists` in order with `stack` (empty; its capacity is reused).
    fn new(lists: &[&'a IoList], policy: WritePolicy, mut stack: Vec<Cursor<'a>>) -> Self {
        let ready = two_leaves(lists, policy);
        if ready.is_none() {
            // The walk pops from the end: the first list goes on top.
            stack.extend(lists.iter().rev().map(|l| l.cursor()));
        }
        Planner {
            stack,
            peeked: None,
            policy,
            iov_limit: policy.iov_limit(),
            ready,
        }
    }

    fn next_seg(&mut self) -> Option<&'a [u8]> {
        if let Some(s) = self.peeked.take() {
            return Some(s);
        }
        // Empty segments are never stored, so every leaf is non-empty.
        next_leaf(&mut self.stack).map(|(_, s): (SegmentKind, &[u8])| s)
    }

    /// Refills `entries` (cleared first) with the next batch; `buf` must be empty. Returns false
    /// when the list is exhausted.
    fn fill(
        &mut self,
        entries: &mut Vec<Entry<'a>>,
        buf: &mut Vec<u8>,
        stats: &mut WriteStats,
    ) -> bool {
        entries.clear();
        if let Some(ready) = self.ready.take() {
            for seg in ready.into_iter().flatten() {
                stats.bytes_referenced += seg.len() as u64;
                entries.push(Entry::Ref(seg));
            }
            return !entries.is_empty();
        }
        let small = self.policy.coalesce_below;
        while entries.len() < self.iov_limit && buf.len() < MAX_BATCH_COPY {
            let Some(seg) = self.next_seg() else { break };
            if seg.len() >= small {
                stats.bytes_referenced += seg.len() as u64;
                entries.push(Entry::Ref(seg));
                continue;
            }
            // A run of short segments: copy them together, unless the run is a lone segment.
            let start = buf.len();
            let mut count = 1;
            while let Some(next) = self.next_seg() {
                if next.len() >= small || (count > 1 && buf.len() + next.len() > MAX_BATCH_COPY) {
                    self.peeked = Some(next);
                    break;
                }
                if count == 1 {
                    buf.extend_from_slice(seg);
                }
                buf.extend_from_slice(next);
                count += 1;
            }
            if count == 1 {
                stats.bytes_referenced += seg.len() as u64;
                entries.push(Entry::Ref(seg));
            } else {
                stats.bytes_copied += (buf.len() - start) as u64;
                entries.push(Entry::Buf(start..buf.len()));
            }
        }
        !entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// Regression (issue 13, class 6): a page of small pieces was copied whole into the
    /// connection's buffer (a slow reader of a 3.6 MB page pinned ~5.6 MiB); batches now copy at
    /// most `MAX_BATCH_COPY` each.
    #[test]
    fn a_batch_copies_at_most_max_batch_copy_bytes() {
        let piece = Bytes::from(vec![b'p'; 65]);
        let mut list = IoList::new();
        for _ in 0..55_000 {
            list.push_bytes(piece.clone());
        }
        /// Records the largest single write it was handed.
        struct Largest(Vec<u8>, usize);
        impl Write for Largest {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.write_vectored(&[IoSlice::new(b)])
            }
            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                let n: usize = bufs.iter().map(|b| b.len()).sum();
                self.1 = self.1.max(n);
                bufs.iter().for_each(|b| self.0.extend_from_slice(b));
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut w = IoWriter::new(WritePolicy::default());
        let mut out = Largest(Vec::new(), 0);
        w.write_all(&mut out, &list).unwrap();
        assert_eq!(out.0, list.to_vec());
        // A batch may pass the bound by less than one short segment.
        assert!(
            out.1 < MAX_BATCH_COPY + 4096,
            "one write of {} bytes",
            out.1
        );
        let stats = w.stats();
        assert_eq!(stats.bytes_copied, 55_000 * 65);
        assert!(stats.syscalls >= 4, "{stats:?}");
    }

    #[test]
    fn a_writer_reuses_its_vectors_from_write_to_write() {
        let mut list = IoList::new();
        for _ in 0..10 {
            list.push_bytes(Bytes::from(vec![b'x'; 5000]));
        }
        let mut w = IoWriter::new(WritePolicy::vectored());
        let addrs = |w: &IoWriter| {
            (
                w.spare.stack.as_ptr() as usize,
                w.spare.entries.as_ptr() as usize,
                w.spare.slices.as_ptr() as usize,
            )
        };
        let mut out = Vec::new();
        w.write_all(&mut out, &list).unwrap();
        let first = addrs(&w);
        assert!(w.spare.entries.capacity() >= 10 && w.spare.slices.capacity() >= 10);
        for _ in 0..3 {
            w.write_all(&mut out, &list).unwrap();
            assert_eq!(addrs(&w), first, "the same allocations");
        }
        assert_eq!(out.len(), 4 * 50_000);
    }

    /// Accepts at most `cap` bytes and `max_iov` iovecs per call, and records each call.
    struct Chunky {
        out: Vec<u8>,
        cap: usize,
        calls: Vec<usize>,
    }

    impl Write for Chunky {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(b)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.calls.push(bufs.len());
            let mut left = self.cap;
            for b in bufs {
                let n = b.len().min(left);
                self.out.extend_from_slice(&b[..n]);
                left -= n;
                if left == 0 {
                    break;
                }
            }
            Ok(self.cap - left)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn sample() -> IoList {
        let mut l = IoList::new();
        l.push_static(b"HTTP/1.1 200 OK\r\n\r\n");
        for i in 0..50 {
            l.push_bytes(Bytes::from(vec![b'a' + (i % 26) as u8; 10 + i * 37]));
            l.push_copy(b"<td>");
        }
        l
    }

    #[test]
    fn flatten_sends_one_buffer() {
        let l = sample();
        let mut w = Chunky {
            out: vec![],
            cap: usize::MAX,
            calls: vec![],
        };
        let st = write_iolist(&mut w, &l, WritePolicy::flatten()).unwrap();
        assert_eq!(w.out, l.to_vec());
        assert_eq!(w.calls, vec![1]);
        assert_eq!(st.bytes_copied, l.len() as u64);
    }

    #[test]
    fn vectored_copies_nothing_and_respects_iov_max() {
        let mut l = IoList::new();
        for _ in 0..3000 {
            l.push_static(b"x");
        }
        let mut w = Chunky {
            out: vec![],
            cap: usize::MAX,
            calls: vec![],
        };
        let st = write_iolist(&mut w, &l, WritePolicy::vectored()).unwrap();
        assert_eq!(w.out.len(), 3000);
        assert_eq!(st.bytes_copied, 0);
        assert_eq!(w.calls, vec![1024, 1024, 952]);
    }

    #[test]
    fn short_writes_resume_at_the_right_byte() {
        let l = sample();
        for cap in [1, 2, 3, 7, 64, 1000] {
            for policy in [
                WritePolicy::flatten(),
                WritePolicy::vectored(),
                WritePolicy::default(),
                WritePolicy::new(100, 3),
            ] {
                let mut w = Chunky {
                    out: vec![],
                    cap,
                    calls: vec![],
                };
                write_iolist(&mut w, &l, policy).unwrap();
                assert_eq!(w.out, l.to_vec(), "cap {cap} policy {policy:?}");
                assert!(w.calls.iter().all(|&n| n <= policy.iov_limit()));
            }
        }
    }

    #[test]
    fn lone_short_segment_is_not_copied() {
        let mut l = IoList::new();
        l.push_bytes(Bytes::from(vec![1; 5000]));
        l.push_static(b"tiny");
        l.push_bytes(Bytes::from(vec![2; 5000]));
        let mut w = Chunky {
            out: vec![],
            cap: usize::MAX,
            calls: vec![],
        };
        let st = write_iolist(&mut w, &l, WritePolicy::new(1024, 64)).unwrap();
        assert_eq!(st.bytes_copied, 0);
        assert_eq!(st.iovecs, 3);
    }

    /// A head and a body of one leaf each take the planned-at-start path; its calls, iovecs and
    /// counts are the general walk's: both by reference unless both are short, then coalesced.
    #[test]
    fn a_head_and_a_one_leaf_body_are_planned_like_any_list() {
        let policy = WritePolicy::new(1024, 64);
        let short = |b: u8| {
            let mut l = IoList::new();
            l.push_copy(&[b; 40]);
            l
        };
        let long = |b: u8| IoList::from_scratch(vec![b; 3000]);
        // (first, second, cap per call, expected iovecs in the first call, bytes copied)
        let cases = [
            (short(1), long(2), usize::MAX, 2, 0),
            (long(1), short(2), usize::MAX, 2, 0),
            (long(1), long(2), usize::MAX, 2, 0),
            (short(1), short(2), usize::MAX, 1, 80),
            (short(1), IoList::new(), usize::MAX, 1, 0),
            (IoList::new(), long(2), usize::MAX, 1, 0),
            (short(1), long(2), 7, 2, 0),
        ];
        for (i, (a, b, cap, iov, copied)) in cases.into_iter().enumerate() {
            let mut w = Chunky {
                out: vec![],
                cap,
                calls: vec![],
            };
            let mut writer = IoWriter::new(policy);
            writer.write_lists(&mut w, &[&a, &b]).unwrap();
            let mut want = a.to_vec();
            want.extend(b.to_vec());
            assert_eq!(w.out, want, "case {i}");
            assert_eq!(w.calls[0], iov, "case {i}");
            let st = writer.take_stats();
            assert_eq!(st.bytes, want.len() as u64, "case {i}");
            assert_eq!(st.bytes_copied, copied, "case {i}");
            assert_eq!(st.bytes_referenced, want.len() as u64 - copied, "case {i}");
            if cap == usize::MAX {
                assert_eq!(w.calls.len(), 1, "case {i}");
            } else {
                assert_eq!(w.calls.len(), want.len().div_ceil(cap), "case {i}");
            }
        }
        // Nothing at all: no call.
        let mut w = Chunky {
            out: vec![],
            cap: usize::MAX,
            calls: vec![],
        };
        IoWriter::new(policy)
            .write_lists(&mut w, &[&IoList::new(), &IoList::new()])
            .unwrap();
        assert!(w.calls.is_empty());
    }

    #[test]
    fn zero_write_is_an_error_not_a_hang() {
        struct Zero;
        impl Write for Zero {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Ok(0)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let err = write_iolist(&mut Zero, &sample(), WritePolicy::default()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
    }

    #[test]
    fn empty_list_makes_no_call() {
        let mut w = Chunky {
            out: vec![],
            cap: 10,
            calls: vec![],
        };
        let st = write_iolist(&mut w, &IoList::new(), WritePolicy::default()).unwrap();
        assert!(w.calls.is_empty());
        assert_eq!(st, WriteStats::default());
    }

    #[test]
    fn large_coalescing_buffers_are_kept_for_the_next_write() {
        // Regression: every flattened 400 KB response used to allocate and free its buffer,
        // which cost ~70 page faults a response once glibc handed out fresh pages.
        let mut l = IoList::new();
        for _ in 0..1000 {
            l.push_static(&[b'x'; 410]);
        }
        let mut w = Chunky {
            out: vec![],
            cap: usize::MAX,
            calls: vec![],
        };
        let mut a = IoWriter::new(WritePolicy::flatten());
        a.write_all(&mut w, &l).unwrap();
        assert_eq!(a.buf.capacity(), 0, "an idle writer pins no large buffer");
        let kept = take_big_buffer().expect("the buffer was kept");
        assert!(kept.capacity() >= l.len() && kept.is_empty());
        let ptr = kept.as_ptr();
        give_big_buffer(kept);
        let mut b = IoWriter::new(WritePolicy::default());
        b.prepare(&[&l]);
        assert_eq!(b.buf.as_ptr(), ptr, "the next large write reuses it");
        b.write_all(&mut w, &l).unwrap();
        assert_eq!(w.out.len(), 2 * l.len());
        assert!(w.out.iter().all(|&c| c == b'x'));
    }

    #[test]
    fn zero_max_iov_is_taken_as_one() {
        let l = sample();
        let mut w = Chunky {
            out: vec![],
            cap: usize::MAX,
            calls: vec![],
        };
        write_iolist(&mut w, &l, WritePolicy::new(0, 0)).unwrap();
        assert_eq!(w.out, l.to_vec());
        assert!(w.calls.iter().all(|&n| n == 1));
    }
}
