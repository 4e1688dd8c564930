//! An [`IoList`] as a short sequence of owned [`Bytes`] frames, for bodies that must own their
//! data (`http_body::Body`, hyper, axum) instead of lending slices to one `writev`.
//!
//! The rule is the writer's (see [`WritePolicy`]): a segment of at least `coalesce_below` bytes
//! that can be owned without a copy is its own frame, a reference; every run of shorter
//! segments between two such references is copied into one buffer, one frame. So a 410 KB Blah
//! page (13 references into its template's text: 12 to the 32 KiB block of repeated body, one
//! to the rest) becomes 13 frames, not 1,000, and hyper writes it, after its head, with one
//! `writev` of 14 buffers (it queues at most 16 per flush and passes at most 64 iovecs per call;
//! measured with strace in `bench/results/axum.txt`).
//!
//! What can be owned without a copy:
//! - a `&'static` segment ([`Bytes::from_static`]);
//! - a shared segment ([`IoList::push_bytes`], or a shared range not inside a pin): a clone of
//!   the list's own [`Bytes`], one reference-count increment;
//! - a pinned segment ([`IoList::pin`] then [`IoList::push_shared`], which is how a template
//!   render references its compiled text): a [`Bytes::slice_ref`] of its allocation, when that
//!   allocation is among the [`Owners`] passed in. A list keeps its pins to itself, so the
//!   caller names them: `galleon-template`'s `Engine::static_text` gives every template's.
//!
//! What cannot: bytes in the list's scratch buffer ([`IoList::push_copy`]: borrowed from the
//! list, which the frames outlive), and pinned segments whose allocation is not among the
//! owners. Those are **copied**, into the merged buffer of the run they stand in, whatever
//! their length (a copy is a copy: it may as well merge with its neighbours).

use bytes::{Bytes, BytesMut};

use crate::list::{Cursor, IoList, Seg, next_leaf};
use crate::policy::WritePolicy;

/// Allocations that pinned segments of a list may lie in: the [`Bytes`] a caller pinned (for a
/// template engine, each template's static text), so that [`to_frames`] can hand out slices of
/// them instead of copies. Sorted by address once; a lookup is a binary search.
///
/// # Examples
/// ```
/// use bytes::Bytes;
/// use galleon_iolist::{IoList, Owners, WritePolicy, to_frames};
///
/// let text = Bytes::from(vec![b'x'; 8192]);
/// let mut page = IoList::new();
/// page.pin(&text);
/// page.push_shared(&text); // stored as an offset into the pin
///
/// let owned = to_frames(&page, WritePolicy::default(), &Owners::new([text.clone()]));
/// assert_eq!(owned.frames()[0].as_ptr(), text.as_ptr()); // referenced
/// assert_eq!(owned.copied(), 0);
///
/// let unknown = to_frames(&page, WritePolicy::default(), &Owners::default());
/// assert_ne!(unknown.frames()[0].as_ptr(), text.as_ptr()); // copied
/// assert_eq!(unknown.copied(), 8192);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Owners {
    /// `(start address, allocation)`, by start address.
    by_addr: Vec<(usize, Bytes)>,
}

impl Owners {
    /// The owners `bytes` (empty ones are ignored).
    pub fn new(bytes: impl IntoIterator<Item = Bytes>) -> Owners {
        let mut by_addr: Vec<(usize, Bytes)> = bytes
            .into_iter()
            .filter(|b| !b.is_empty())
            .map(|b| (b.as_ptr() as usize, b))
            .collect();
        by_addr.sort_by_key(|(addr, _)| *addr);
        Owners { by_addr }
    }

    /// Number of owners.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }

    /// `s` as a slice of the owner it lies inside, without a copy; `None` when it lies in none.
    /// (Owners that overlap each other are allowed: `s` is looked for in the one starting
    /// closest below it, and copied if that one does not hold all of it.)
    pub fn slice_of(&self, s: &[u8]) -> Option<Bytes> {
        let start = s.as_ptr() as usize;
        let i = self.by_addr.partition_point(|(addr, _)| *addr <= start);
        let (addr, owner) = self.by_addr.get(i.checked_sub(1)?)?;
        (start + s.len() <= addr + owner.len()).then(|| owner.slice_ref(s))
    }
}

/// An [`IoList`] as owned frames, from [`to_frames`]: the frames in order, and how many of
/// their bytes were copied (the rest are references).
#[derive(Debug, Clone, Default)]
pub struct OwnedFrames {
    frames: Vec<Bytes>,
    copied: usize,
    len: usize,
}

impl OwnedFrames {
    /// The frames, in order; none is empty.
    pub fn frames(&self) -> &[Bytes] {
        &self.frames
    }

    /// Bytes that were copied into merged buffers (the others are referenced).
    pub fn copied(&self) -> usize {
        self.copied
    }

    /// Total bytes: the list's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no bytes (and so no frames).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The frames, for a body to hand out one by one.
    pub fn into_frames(self) -> Vec<Bytes> {
        self.frames
    }
}

impl IntoIterator for OwnedFrames {
    type Item = Bytes;
    type IntoIter = std::vec::IntoIter<Bytes>;

    fn into_iter(self) -> Self::IntoIter {
        self.frames.into_iter()
    }
}

/// Turns `list` into owned [`Bytes`] frames under `policy`'s `coalesce_below` (see the module
/// docs): segments of at least that length that can be owned without a copy are referenced,
/// one frame each; the runs between them are copied, one frame per run, and so are scratch
/// bytes and pinned bytes outside `owners`, whatever their length. A run of exactly one short
/// segment that can be owned is referenced, not copied (copying it would save no frame).
///
/// The frames' concatenation is the list's bytes. Of two adjacent frames at least one is a
/// reference of `coalesce_below` bytes or more, so the count is at most twice the number of
/// large segments plus one. `max_iov` is not used: frames are not write calls.
///
/// # Examples
/// ```
/// use bytes::Bytes;
/// use galleon_iolist::{IoList, Owners, WritePolicy, to_frames};
///
/// static BLOCK: [u8; 32768] = [b'B'; 32768];
/// let mut page = IoList::new();
/// page.push_copy(b"<html>");
/// for _ in 0..12 {
///     page.push_static(&BLOCK); // large: referenced
/// }
/// for i in 0..500 {
///     page.push_static(b"<li>"); // small: merged with the copies around it
///     page.push_copy(i.to_string().as_bytes());
/// }
/// let out = to_frames(&page, WritePolicy::default(), &Owners::default());
/// assert_eq!(out.frames().len(), 14); // the head, 12 blocks, one run of 500 items
/// assert_eq!(out.frames()[1].as_ptr(), BLOCK.as_ptr());
/// assert_eq!(out.len(), page.len());
/// assert_eq!(out.frames().concat(), page.to_vec());
/// ```
pub fn to_frames(list: &IoList, policy: WritePolicy, owners: &Owners) -> OwnedFrames {
    let mut b = Builder {
        coalesce_below: policy.coalesce_below,
        owners,
        out: OwnedFrames {
            frames: Vec::new(),
            copied: 0,
            len: list.len(),
        },
        pending: None,
        run: BytesMut::new(),
    };
    let mut stack: Vec<Cursor<'_>> = list.walk();
    while let Some((holder, segs)) = stack.last_mut() {
        let holder = *holder;
        let Some(seg) = segs.next() else {
            stack.pop();
            continue;
        };
        let leaf = match seg {
            Seg::Static(s) => Leaf::Owned(Owned::Static(s)),
            Seg::Shared(bytes) => Leaf::Owned(Owned::Shared(bytes)),
            Seg::List(nested) => {
                stack.push(nested.cursor());
                continue;
            }
            Seg::Scratch { .. } | Seg::AllScratch | Seg::Pinned { .. } => {
                // A scratch or pinned segment's bytes are in buffers of the list that holds it:
                // read them through a cursor over this one segment, pushed on the walk's own
                // stack (no second stack per call) and popped once read.
                stack.push((holder, std::slice::from_ref(seg).iter()));
                let (_, s) = next_leaf(&mut stack).expect("a scratch or pinned segment is a leaf");
                stack.pop();
                match seg {
                    Seg::Pinned { .. } => Leaf::Owned(Owned::Pinned(s)),
                    _ => Leaf::Borrowed(s),
                }
            }
        };
        b.push(leaf);
    }
    b.finish()
}

/// A segment that can become a [`Bytes`] without a copy (pinned ones only if an owner holds
/// them: see [`Owned::own`]).
#[derive(Clone, Copy)]
enum Owned<'a> {
    Static(&'static [u8]),
    Shared(&'a Bytes),
    Pinned(&'a [u8]),
}

impl<'a> Owned<'a> {
    fn bytes(&self) -> &'a [u8] {
        match *self {
            Owned::Static(s) => s,
            Owned::Shared(b) => b,
            Owned::Pinned(s) => s,
        }
    }

    /// The segment as owned bytes, if it can be had without a copy.
    fn own(&self, owners: &Owners) -> Option<Bytes> {
        match *self {
            Owned::Static(s) => Some(Bytes::from_static(s)),
            Owned::Shared(b) => Some(b.clone()),
            Owned::Pinned(s) => owners.slice_of(s),
        }
    }
}

enum Leaf<'a> {
    Owned(Owned<'a>),
    /// Only borrowed from the list: must be copied.
    Borrowed(&'a [u8]),
}

struct Builder<'o, 'a> {
    coalesce_below: usize,
    owners: &'o Owners,
    out: OwnedFrames,
    /// A short segment that may stay alone (then it is referenced, not copied).
    pending: Option<Owned<'a>>,
    /// The run being merged (bytes copied so far), `pending` not yet in it.
    run: BytesMut,
}

impl<'a> Builder<'_, 'a> {
    fn push(&mut self, leaf: Leaf<'a>) {
        match leaf {
            Leaf::Owned(o) if o.bytes().len() >= self.coalesce_below => match o.own(self.owners) {
                Some(bytes) => {
                    self.end_run();
                    self.out.frames.push(bytes);
                }
                None => self.copy(o.bytes()),
            },
            Leaf::Owned(o) => {
                if self.pending.is_none() && self.run.is_empty() {
                    self.pending = Some(o);
                } else {
                    self.copy(o.bytes());
                }
            }
            Leaf::Borrowed(s) => self.copy(s),
        }
    }

    /// Appends `s` to the run being merged (after the pending segment, copied first).
    fn copy(&mut self, s: &[u8]) {
        if let Some(p) = self.pending.take() {
            self.run.extend_from_slice(p.bytes());
        }
        self.run.extend_from_slice(s);
    }

    /// Ends the current run: a lone pending segment is referenced if it can be, else the
    /// merged bytes become one frame.
    fn end_run(&mut self) {
        if let Some(p) = self.pending.take() {
            debug_assert!(self.run.is_empty());
            match p.own(self.owners) {
                Some(bytes) => {
                    self.out.frames.push(bytes);
                    return;
                }
                None => self.run.extend_from_slice(p.bytes()),
            }
        }
        if !self.run.is_empty() {
            self.out.copied += self.run.len();
            // The next run starts a new buffer: this one is now a frame, shared with its reader.
            self.out.frames.push(self.run.split().freeze());
        }
    }

    fn finish(mut self) -> OwnedFrames {
        self.end_run();
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use proptest::prelude::*;

    fn concat(f: &OwnedFrames) -> Vec<u8> {
        f.frames().concat()
    }

    #[test]
    fn an_empty_list_has_no_frames() {
        let out = to_frames(&IoList::new(), WritePolicy::default(), &Owners::default());
        assert!(out.is_empty());
        assert!(out.frames().is_empty());
        assert_eq!(out.copied(), 0);
    }

    #[test]
    fn large_static_and_shared_segments_are_referenced_small_runs_merged() {
        static BIG: [u8; 5000] = [b's'; 5000];
        let shared = Bytes::from(vec![b'h'; 6000]);
        let mut l = IoList::new();
        l.push_static(b"<a>");
        l.push_copy(b"12");
        l.push_static(&BIG);
        l.push_bytes(shared.clone());
        l.push_static(b"<b>");
        l.push_bytes(Bytes::from_static(b"<c>"));
        l.push_copy(b"3");
        let out = to_frames(&l, WritePolicy::default(), &Owners::default());
        let f = out.frames();
        assert_eq!(f.len(), 4);
        assert_eq!(&f[0][..], b"<a>12");
        assert_eq!(f[1].as_ptr(), BIG.as_ptr());
        assert_eq!(f[2].as_ptr(), shared.as_ptr());
        assert_eq!(&f[3][..], b"<b><c>3");
        assert_eq!(out.copied(), 5 + 7);
        assert_eq!(concat(&out), l.to_vec());
    }

    #[test]
    fn a_lone_small_owned_segment_is_referenced_a_lone_scratch_copied() {
        static BIG: [u8; 4096] = [b'x'; 4096];
        static SMALL: &[u8] = b"<hr>";
        let mut l = IoList::new();
        l.push_static(&BIG);
        l.push_static(SMALL);
        l.push_static(&BIG);
        l.push_copy(b"42");
        l.push_static(&BIG);
        let out = to_frames(&l, WritePolicy::default(), &Owners::default());
        let f = out.frames();
        assert_eq!(f.len(), 5);
        assert_eq!(f[1].as_ptr(), SMALL.as_ptr());
        assert_eq!(&f[3][..], b"42");
        assert_eq!(out.copied(), 2);
    }

    #[test]
    fn pinned_segments_are_slices_of_their_owner_or_copies() {
        let text = Bytes::from((0..20000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        let mut l = IoList::new();
        l.pin(&text);
        l.push_shared_range(&text, 0..10);
        l.push_shared_range(&text, 100..10100);
        l.push_shared_range(&text, 10..20);
        let owners = Owners::new([Bytes::from_static(b"unrelated"), text.clone()]);
        let out = to_frames(&l, WritePolicy::default(), &owners);
        let f = out.frames();
        assert_eq!(f.len(), 3);
        assert_eq!(f[0].as_ptr(), text.as_ptr(), "a lone short pinned piece");
        assert_eq!(f[1].as_ptr(), text[100..].as_ptr());
        assert_eq!(out.copied(), 0);
        assert_eq!(concat(&out), l.to_vec());
        // Without its owner the same list is copied, and merged into one frame.
        let out = to_frames(&l, WritePolicy::default(), &Owners::default());
        assert_eq!(out.frames().len(), 1);
        assert_eq!(out.copied(), l.len());
        assert_eq!(concat(&out), l.to_vec());
    }

    #[test]
    fn scratch_is_copied_whatever_its_length_and_merges_with_neighbours() {
        let mut l = IoList::new();
        l.push_copy(&[b'a'; 10000]);
        l.push_static(b"tail");
        let out = to_frames(&l, WritePolicy::default(), &Owners::default());
        assert_eq!(out.frames().len(), 1);
        assert_eq!(out.copied(), 10004);
        // A list of copies only (no segment table), alone and nested.
        let only = IoList::from_scratch(vec![b'c'; 5000]);
        let out = to_frames(&only, WritePolicy::default(), &Owners::default());
        assert_eq!(concat(&out), only.to_vec());
        let mut outer = IoList::new();
        outer.push_static(&[b's'; 4096]);
        outer.push_shared_list(Arc::new(only));
        let out = to_frames(&outer, WritePolicy::default(), &Owners::default());
        assert_eq!(out.frames().len(), 2);
        assert_eq!(out.copied(), 5000);
        assert_eq!(concat(&out), outer.to_vec());
    }

    #[test]
    fn nested_lists_are_walked_and_their_own_pins_and_scratch_used() {
        let text = Bytes::from(vec![b't'; 9000]);
        let mut inner = IoList::new();
        inner.pin(&text);
        inner.push_copy(b"[inner]");
        inner.push_shared(&text);
        let inner = Arc::new(inner);
        let mut l = IoList::new();
        l.push_copy(b"<outer>");
        l.push_shared_list(inner.clone());
        l.push_shared_list(inner);
        l.push_copy(b"</outer>");
        let out = to_frames(&l, WritePolicy::default(), &Owners::new([text.clone()]));
        let f = out.frames();
        assert_eq!(f.len(), 5);
        assert_eq!(&f[0][..], b"<outer>[inner]");
        assert_eq!(f[1].as_ptr(), text.as_ptr());
        assert_eq!(&f[2][..], b"[inner]");
        assert_eq!(f[3].as_ptr(), text.as_ptr());
        assert_eq!(&f[4][..], b"</outer>");
        assert_eq!(concat(&out), l.to_vec());
    }

    #[test]
    fn flatten_makes_one_frame_and_vectored_references_every_owned_segment() {
        let mut l = IoList::new();
        for i in 0..100 {
            l.push_static(b"<td>");
            l.push_copy(i.to_string().as_bytes());
            l.push_static(b"</td>");
        }
        let flat = to_frames(&l, WritePolicy::flatten(), &Owners::default());
        assert_eq!(flat.frames().len(), 1);
        assert_eq!(flat.copied(), l.len());
        let vectored = to_frames(&l, WritePolicy::vectored(), &Owners::default());
        assert_eq!(vectored.frames().len(), 300);
        assert_eq!(concat(&vectored), l.to_vec());
    }

    #[test]
    fn owners_find_the_allocation_a_slice_lies_in() {
        let a = Bytes::from(vec![1u8; 100]);
        let b = Bytes::from(vec![2u8; 100]);
        let owners = Owners::new([b.clone(), Bytes::new(), a.clone()]);
        assert_eq!(owners.len(), 2);
        assert_eq!(
            owners.slice_of(&a[10..20]).unwrap().as_ptr(),
            a[10..].as_ptr()
        );
        assert_eq!(owners.slice_of(&b[..]).unwrap().as_ptr(), b.as_ptr());
        assert!(owners.slice_of(&[1u8; 10]).is_none());
        assert!(Owners::default().slice_of(&a).is_none());
    }

    /// One piece of a generated list.
    #[derive(Debug, Clone)]
    enum Piece {
        Static(usize),
        Shared(Vec<u8>),
        Copy(Vec<u8>),
        Pinned(usize, usize),
        Nested(Vec<Piece>),
    }

    static STATIC_TEXT: [u8; 10000] = {
        let mut a = [0u8; 10000];
        let mut i = 0;
        while i < a.len() {
            a[i] = b'a' + (i % 26) as u8;
            i += 1;
        }
        a
    };

    fn piece() -> impl Strategy<Value = Piece> {
        let bytes = || {
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..40),
                prop::collection::vec(any::<u8>(), 3000..6000),
            ]
        };
        let leaf = prop_oneof![
            (0usize..10000).prop_map(Piece::Static),
            bytes().prop_map(Piece::Shared),
            bytes().prop_map(Piece::Copy),
            (0usize..10000, 0usize..10000).prop_map(|(a, b)| Piece::Pinned(a.min(b), a.max(b))),
        ];
        leaf.prop_recursive(2, 40, 6, |inner| {
            prop::collection::vec(inner, 0..6).prop_map(Piece::Nested)
        })
    }

    fn build(pieces: &[Piece], pin: &Bytes) -> IoList {
        let mut l = IoList::new();
        l.pin(pin);
        for p in pieces {
            match p {
                Piece::Static(n) => l.push_static(&STATIC_TEXT[..*n]),
                Piece::Shared(v) => l.push_bytes(Bytes::from(v.clone())),
                Piece::Copy(v) => l.push_copy(v),
                Piece::Pinned(a, b) => l.push_shared_range(pin, *a..*b),
                Piece::Nested(ps) => l.push_list(build(ps, pin)),
            }
        }
        l
    }

    proptest! {
        #[test]
        fn frames_concatenate_to_the_list(
            pieces in prop::collection::vec(piece(), 0..30),
            coalesce_below in prop_oneof![Just(0usize), 1usize..6000, Just(usize::MAX)],
            with_owner in any::<bool>(),
        ) {
            let pin = Bytes::from(STATIC_TEXT.to_vec());
            let list = build(&pieces, &pin);
            let owners = if with_owner { Owners::new([pin.clone()]) } else { Owners::default() };
            let out = to_frames(&list, WritePolicy::new(coalesce_below, 64), &owners);
            prop_assert_eq!(out.len(), list.len());
            prop_assert_eq!(concat(&out), list.to_vec());
            prop_assert!(out.frames().iter().all(|f| !f.is_empty()));
            prop_assert!(out.copied() <= list.len());
            // Two frames side by side: at least one is a large reference, or they would have
            // been one run.
            for w in out.frames().windows(2) {
                prop_assert!(
                    w[0].len() >= coalesce_below || w[1].len() >= coalesce_below,
                    "adjacent short frames {} and {}", w[0].len(), w[1].len()
                );
            }
            // Scratch bytes are always copied; with the pin's owner, nothing else is copied
            // unless merged into a run.
            let scratch: usize = list
                .segments_with_kind()
                .filter(|(k, _)| *k == crate::SegmentKind::Scratch)
                .map(|(_, s)| s.len())
                .sum();
            prop_assert!(out.copied() >= scratch);
            if coalesce_below == 0 && with_owner {
                prop_assert_eq!(out.copied(), scratch);
            }
        }
    }
}
