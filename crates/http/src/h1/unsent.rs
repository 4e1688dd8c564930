//! How many bytes of a streamed body or file a connection may leave unsent in the kernel
//! (Linux `TCP_NOTSENT_LOWAT`): the floor ([`Limits::stream_unsent_bytes`]) while the reader has
//! not shown it is fast, raised for one that drains its socket fast, up to
//! [`Limits::stream_unsent_max_bytes`].
//!
//! Why two figures: the floor (128 KiB) bounds what a slow reader pins (before it, 1,000 slow
//! readers queued ~2 MB each and drove loopback TCP to its memory limit). But past the bound the
//! writer is woken each time the reader drains half of it, and a reader taking 3 GB/s drains
//! 64 KiB in 20 µs, less than a wake-up takes on a busy machine: the socket ran dry between
//! writes (`/doom` at ~0.8x of a raw sender with a fast reader). So a reader that has taken
//! [`WINDOW_BYTES`] at over twice the floor per [`DRAIN_TIME`] gets the ceiling (4 MiB: what
//! Linux would give the socket anyway). That is far more than its socket buffers absorb unread,
//! so a client that reads nothing or little never gets it; one whose pace falls under a floor
//! per [`DRAIN_TIME`] loses it again.
//!
//! [`Limits::stream_unsent_bytes`]: crate::Limits::stream_unsent_bytes
//! [`Limits::stream_unsent_max_bytes`]: crate::Limits::stream_unsent_max_bytes

use std::time::{Duration, Instant};

/// The pace that earns the raise: over twice the floor drained in this long (256 MB/s at the
/// default floor); under one floor in this long loses it.
pub(crate) const DRAIN_TIME: Duration = Duration::from_millis(1);

/// Bytes written between two measurements of the reader's pace: 8 MiB, more than a client's
/// receive buffer and the floor together take from a client that does not read.
pub(crate) const WINDOW_BYTES: u64 = 8 * 1024 * 1024;

/// A window shorter in bytes is measured anyway after this long, so that a reader whose pace
/// fell loses its raise without having to take another [`WINDOW_BYTES`].
pub(crate) const WINDOW_TIME: Duration = Duration::from_secs(1);

/// Bytes of a stream's chunks that are ready at once written in one call for a reader that has
/// the raise: a quarter of the default ceiling. Fewer calls, and fewer wake-ups of the reader:
/// `/doom` in 256 KiB chunks made four times the raw sender's calls and ran at ~0.75x its speed
/// with a fast reader; 1 MiB chunks ran at its speed.
pub(crate) const BATCH_BYTES: usize = 1024 * 1024;

/// One connection's bound on unsent bytes, and the pace measured since it was last set.
#[derive(Debug)]
pub(crate) struct UnsentBound {
    floor: u32,
    ceiling: u32,
    /// What the socket was last given; `None` before the connection's first stream.
    set: Option<u32>,
    /// The current window: when it began and the bytes written since.
    since: Instant,
    bytes: u64,
}

impl UnsentBound {
    /// A bound between `floor` and `ceiling` (0 floor: the kernel's default, never set; a
    /// ceiling at or under the floor: the floor, never raised).
    pub(crate) fn new(floor: u32, ceiling: u32, now: Instant) -> UnsentBound {
        UnsentBound {
            floor,
            ceiling: ceiling.max(floor),
            set: None,
            since: now,
            bytes: 0,
        }
    }

    /// How many bytes of ready chunks to gather into one write: [`BATCH_BYTES`] while the bound
    /// is raised, else 0 (each chunk on its own: what a slow reader's connection holds stays
    /// one chunk).
    pub(crate) fn batch_bytes(&self) -> usize {
        match self.set {
            Some(b) if b > self.floor => BATCH_BYTES,
            _ => 0,
        }
    }

    /// A streamed body or file starts at `now`: the pace is measured afresh. The bound to give
    /// the socket, the floor, before the connection's first one; `None` after (it keeps what
    /// it has) and when the floor is 0.
    pub(crate) fn begin(&mut self, now: Instant) -> Option<u32> {
        self.since = now;
        self.bytes = 0;
        if self.floor == 0 || self.set.is_some() {
            return None;
        }
        self.set = Some(self.floor);
        self.set
    }

    /// `bytes` more were written by `now`: a new bound for the socket when the window just
    /// ended calls for one. A window that drained more than twice the floor per [`DRAIN_TIME`]
    /// raises the bound to the ceiling; one that drained less than the floor puts it back.
    /// Between the two it stays: the pace measured under a bound is held back by it, so a
    /// bound that followed the pace would ratchet itself down.
    pub(crate) fn written(&mut self, bytes: u64, now: Instant) -> Option<u32> {
        let current = self.set?;
        self.bytes += bytes;
        let elapsed = now.saturating_duration_since(self.since);
        if self.bytes < WINDOW_BYTES && elapsed < WINDOW_TIME {
            return None;
        }
        let per_drain =
            self.bytes as f64 * DRAIN_TIME.as_secs_f64() / elapsed.as_secs_f64().max(1e-9);
        self.since = now;
        self.bytes = 0;
        let want = if per_drain > 2.0 * f64::from(self.floor) {
            self.ceiling
        } else if per_drain < f64::from(self.floor) {
            self.floor
        } else {
            current
        };
        if want == current {
            return None;
        }
        self.set = Some(want);
        self.set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u32 = 1024;
    const FLOOR: u32 = 128 * KIB;
    const CEILING: u32 = 4096 * KIB;

    /// Writes `total` bytes in 256 KiB chunks at `per_sec`; the bounds set on the way.
    fn stream(b: &mut UnsentBound, t: &mut Instant, total: u64, per_sec: f64) -> Vec<u32> {
        let chunk = 256 * 1024u64;
        let mut set = Vec::new();
        let mut sent = 0;
        while sent < total {
            *t += Duration::from_secs_f64(chunk as f64 / per_sec);
            sent += chunk;
            set.extend(b.written(chunk, *t));
        }
        set
    }

    #[test]
    fn the_floor_is_set_once_before_the_first_stream() {
        let mut t = Instant::now();
        let mut b = UnsentBound::new(FLOOR, CEILING, t);
        assert_eq!(b.begin(t), Some(FLOOR));
        t += Duration::from_secs(1);
        assert_eq!(b.begin(t), None);
        // A floor of 0 leaves the kernel's default: nothing is ever set.
        let mut off = UnsentBound::new(0, CEILING, t);
        assert_eq!(off.begin(t), None);
        assert!(stream(&mut off, &mut t, 64 << 20, 3e9).is_empty());
    }

    #[test]
    fn a_fast_reader_gets_the_ceiling_and_keeps_it() {
        let mut t = Instant::now();
        let mut b = UnsentBound::new(FLOOR, CEILING, t);
        b.begin(t);
        // 1 GB/s: a millisecond is ~1 MB, over twice the floor: raised after the first 8 MiB,
        // and its ready chunks are batched from then on.
        assert_eq!(b.batch_bytes(), 0);
        assert_eq!(stream(&mut b, &mut t, 64 << 20, 1e9), [CEILING]);
        assert_eq!(b.batch_bytes(), BATCH_BYTES);
        // Its pace under the bound wavers (200 MB/s: between one and two floors a
        // millisecond): the bound stays.
        assert!(stream(&mut b, &mut t, 64 << 20, 200e6).is_empty());
        // A ceiling at the floor: never raised.
        let mut d = UnsentBound::new(FLOOR, FLOOR, t);
        d.begin(t);
        assert!(stream(&mut d, &mut t, 64 << 20, 3e9).is_empty());
    }

    #[test]
    fn a_slow_reader_or_one_that_never_reads_keeps_the_floor() {
        let mut t = Instant::now();
        let mut b = UnsentBound::new(FLOOR, CEILING, t);
        b.begin(t);
        // What the socket absorbs unread (a few MB, at once), then nothing: no raise.
        assert!(stream(&mut b, &mut t, 4 << 20, 1e12).is_empty());
        // 1 KB/s afterwards, and 50 MB/s (a millisecond of it is under the floor): none either.
        assert!(stream(&mut b, &mut t, 2 << 20, 1e3).is_empty());
        assert!(stream(&mut b, &mut t, 64 << 20, 50e6).is_empty());
    }

    #[test]
    fn a_reader_whose_pace_falls_loses_its_raise() {
        let mut t = Instant::now();
        let mut b = UnsentBound::new(FLOOR, CEILING, t);
        b.begin(t);
        assert_eq!(stream(&mut b, &mut t, 16 << 20, 6e9), [CEILING]);
        // Then 100 KB/s: measured after a second, back to the floor, and no more batches.
        assert_eq!(stream(&mut b, &mut t, 1 << 20, 1e5), [FLOOR]);
        assert_eq!(b.batch_bytes(), 0);
        // A new response on the connection keeps the bound it has and measures afresh.
        assert_eq!(b.begin(t), None);
        assert_eq!(stream(&mut b, &mut t, 16 << 20, 6e9), [CEILING]);
    }
}
