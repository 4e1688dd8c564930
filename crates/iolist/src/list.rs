//! `IoList`: the rope itself, its segments and their iteration.

use std::fmt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

/// One piece of an [`IoList`], as stored.
#[derive(Clone)]
pub(crate) enum Seg {
    /// Bytes that live for the whole program: template text, literals, entities.
    Static(&'static [u8]),
    /// Reference-counted bytes shared with their owner (an assign, a file, a compiled template).
    Shared(Bytes),
    /// A run of the list's own scratch buffer: small pieces copied as they were pushed.
    Scratch { off: usize, len: usize },
    /// A run of one of the list's pinned allocations (see [`IoList::pin`]): shared bytes held
    /// without touching their reference count.
    Pinned { pin: u32, off: usize, len: usize },
    /// A whole other list, shared. Its bytes stand here in order.
    List(Arc<IoList>),
}

/// A byte rope: an ordered list of references to byte slices, in the manner of the Erlang VM's
/// I/O lists.
///
/// Appending never copies large data: `&'static` slices and [`Bytes`] are stored as references,
/// and another `IoList` is attached as a shared subtree in O(1). Small pieces that are not worth
/// an iovec of their own go through [`IoList::push_copy`], which copies them into one scratch
/// buffer owned by the list; consecutive copies merge into a single segment, so a row of numbers
/// separated by `</td><td>` becomes one segment, not hundreds.
///
/// `len()` is O(1). [`IoList::segments`] visits the non-empty slices in order, descending into
/// nested lists; [`IoList::to_bytes`] flattens once.
///
/// # Examples
/// ```
/// use bytes::Bytes;
/// use galleon_iolist::IoList;
///
/// static HEADER: &str = "<table>\n";
/// let row = Bytes::from_static(b"<tr><td>a long shared row</td></tr>\n");
///
/// let mut page = IoList::new();
/// page.push_static_str(HEADER); // referenced by address
/// page.push_bytes(row.clone()); // a reference count, no copy
/// page.push_copy(b"<!-- 1 -->"); // small: copied into the list's scratch
/// page.push_copy(b"</table>\n"); // merges with the copy before it
/// assert_eq!(page.segment_count(), 3);
/// assert_eq!(page.len(), HEADER.len() + row.len() + 19);
/// assert!(page.to_vec().ends_with(b"<!-- 1 --></table>\n"));
/// ```
#[derive(Clone, Default)]
pub struct IoList {
    segs: Vec<Seg>,
    scratch: Vec<u8>,
    /// Allocations this list holds one reference to, so that segments inside them need none.
    /// Inline for the usual one or two (a page and its layout): no allocation per render.
    pins: SmallVec<[Bytes; 2]>,
    len: usize,
    /// Number of leaf segments, nested lists counted by their own leaves.
    leaves: usize,
}

/// Appends bytes to an [`IoList`]'s scratch buffer, inside [`IoList::push_copy_with`]. It can
/// only append: the bytes already in the list stay as they are.
#[derive(Debug)]
pub struct CopyBuf<'a> {
    buf: &'a mut Vec<u8>,
}

impl CopyBuf<'_> {
    /// Appends `s`.
    pub fn push(&mut self, s: &[u8]) {
        self.buf.extend_from_slice(s);
    }
}

impl IoList {
    /// An empty list.
    pub const fn new() -> Self {
        IoList {
            segs: Vec::new(),
            scratch: Vec::new(),
            pins: SmallVec::new_const(),
            len: 0,
            leaves: 0,
        }
    }

    /// An empty list with room for `segments` segments and `scratch` bytes of copied pieces.
    pub fn with_capacity(segments: usize, scratch: usize) -> Self {
        IoList {
            segs: Vec::with_capacity(segments),
            scratch: Vec::with_capacity(scratch),
            pins: SmallVec::new(),
            len: 0,
            leaves: 0,
        }
    }

    /// Total number of bytes in the list. O(1).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the list holds no bytes (it may still hold empty segments).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of leaf segments (static, shared or scratch runs), counting through nested lists.
    /// Empty segments are not stored, so they are not counted.
    pub fn segment_count(&self) -> usize {
        self.leaves
    }

    /// Bytes held in this list's own scratch buffer (copied at push time).
    pub fn scratch_len(&self) -> usize {
        self.scratch.len()
    }

    /// Appends a slice that lives forever, by reference.
    pub fn push_static(&mut self, s: &'static [u8]) {
        if s.is_empty() {
            return;
        }
        self.len += s.len();
        self.leaves += 1;
        self.segs.push(Seg::Static(s));
    }

    /// Appends a `&'static str`, by reference.
    pub fn push_static_str(&mut self, s: &'static str) {
        self.push_static(s.as_bytes());
    }

    /// Appends shared bytes, by reference: no copy, one reference-count increment at most.
    pub fn push_bytes(&mut self, b: Bytes) {
        if b.is_empty() {
            return;
        }
        self.len += b.len();
        self.leaves += 1;
        self.segs.push(Seg::Shared(b));
    }

    /// Appends an owned buffer: adopted as the list's scratch when that holds nothing yet (no
    /// allocation, where `push_bytes(Bytes::from(v))` makes one for a `Vec` with spare room),
    /// moved into shared bytes otherwise. A builder's first full buffer costs no extra allocation.
    pub fn push_vec(&mut self, v: Vec<u8>) {
        if v.is_empty() {
            return;
        }
        if self.scratch.is_empty() {
            self.scratch = v;
            self.copied(0);
        } else {
            self.push_bytes(Bytes::from(v));
        }
    }

    /// Pins `b`: the list keeps one reference to it, and every later [`IoList::push_shared`] of
    /// bytes that lie inside `b` is stored as an offset into it, with no reference-count traffic.
    ///
    /// This is how a template render references its compiled static text: one pin per render
    /// instead of one atomic increment (and decrement) per static piece, on a count that every
    /// worker thread rendering the same template would otherwise contend for. Pinning bytes that
    /// are already pinned is a no-op.
    pub fn pin(&mut self, b: &Bytes) {
        if b.is_empty() || self.find_pin(b).is_some() {
            return;
        }
        self.pins.push(b.clone());
    }

    /// Appends shared bytes by reference. If they lie inside a pinned allocation, the segment is
    /// an offset into it (no reference-count change); otherwise `b` is cloned (one increment).
    #[inline]
    pub fn push_shared(&mut self, b: &Bytes) {
        self.push_shared_range(b, 0..b.len());
    }

    /// Appends `b[range]` by reference, like [`IoList::push_shared`] of `b.slice(range)` but
    /// without making that slice: when `b` is pinned there is no reference-count change at all.
    ///
    /// # Panics
    /// If `range` is out of `b`'s bounds, like slicing.
    #[inline]
    pub fn push_shared_range(&mut self, b: &Bytes, range: std::ops::Range<usize>) {
        let s = &b[range.clone()];
        if s.is_empty() {
            return;
        }
        match self.find_pin(s) {
            Some((pin, off)) => {
                self.len += s.len();
                self.leaves += 1;
                self.segs.push(Seg::Pinned {
                    pin,
                    off,
                    len: s.len(),
                });
            }
            None => self.push_bytes(b.slice(range)),
        }
    }

    /// Which pin holds `s`, and where. Two live allocations never overlap and `Bytes` never
    /// change, so bytes whose addresses lie inside a pinned `Bytes` are that `Bytes`' bytes.
    #[inline]
    fn find_pin(&self, s: &[u8]) -> Option<(u32, usize)> {
        let start = s.as_ptr() as usize;
        let end = start + s.len();
        // Newest first: a render pins its page, then each partial as it is called.
        let mut i = self.pins.len();
        while i > 0 {
            i -= 1;
            let ps = self.pins[i].as_ptr() as usize;
            if start >= ps && end <= ps + self.pins[i].len() {
                return Some((i as u32, start - ps));
            }
        }
        None
    }

    /// Copies `s` into the list's scratch buffer. If the previous segment is also a scratch run,
    /// the two merge into one segment (so a run of small pieces costs one iovec).
    pub fn push_copy(&mut self, s: &[u8]) {
        if s.is_empty() {
            return;
        }
        let off = self.scratch.len();
        self.scratch.extend_from_slice(s);
        self.copied(off);
    }

    /// Copies everything `f` puts into the [`CopyBuf`] into the scratch buffer as one run, like
    /// as many [`IoList::push_copy`] calls, with one segment's bookkeeping for all of them: for
    /// building a run of small pieces, such as a response head, in one pass.
    ///
    /// ```
    /// # use galleon_iolist::IoList;
    /// let mut head = IoList::new();
    /// head.push_copy_with(|b| {
    ///     b.push(b"HTTP/1.1 200 OK\r\n");
    ///     b.push(b"content-length: 2\r\n\r\n");
    /// });
    /// assert_eq!(head.segment_count(), 1);
    /// assert_eq!(head.to_vec(), b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n");
    /// ```
    pub fn push_copy_with<R>(&mut self, f: impl FnOnce(&mut CopyBuf<'_>) -> R) -> R {
        let off = self.scratch.len();
        let r = f(&mut CopyBuf {
            buf: &mut self.scratch,
        });
        if self.scratch.len() > off {
            self.copied(off);
        }
        r
    }

    /// Records the scratch bytes from `off` to the end, just appended, as a segment (merged into
    /// the previous one when that is the scratch run right before them).
    fn copied(&mut self, off: usize) {
        let n = self.scratch.len() - off;
        self.len += n;
        if let Some(Seg::Scratch { off: o, len }) = self.segs.last_mut()
            && *o + *len == off
        {
            *len += n;
            return;
        }
        self.leaves += 1;
        self.segs.push(Seg::Scratch { off, len: n });
    }

    /// Appends `b` by reference when it is at least `min_ref` bytes long, otherwise copies it into
    /// scratch. This is the build-time half of coalescing: the template renderer uses it so that a
    /// table of small cells does not become thousands of segments.
    pub fn push_bytes_or_copy(&mut self, b: &Bytes, min_ref: usize) {
        if b.len() >= min_ref {
            self.push_bytes(b.clone());
        } else {
            self.push_copy(b);
        }
    }

    /// Like [`IoList::push_bytes_or_copy`] for a static slice.
    pub fn push_static_or_copy(&mut self, s: &'static [u8], min_ref: usize) {
        if s.len() >= min_ref {
            self.push_static(s);
        } else {
            self.push_copy(s);
        }
    }

    /// Appends another list in O(1) (it is moved behind an [`Arc`]). An empty list is dropped.
    pub fn push_list(&mut self, other: IoList) {
        if other.is_empty() {
            return;
        }
        self.push_shared_list(Arc::new(other));
    }

    /// Appends a shared list in O(1): the same rendered fragment can stand in many lists.
    pub fn push_shared_list(&mut self, other: Arc<IoList>) {
        if other.is_empty() {
            return;
        }
        self.len += other.len;
        self.leaves += other.leaves;
        self.segs.push(Seg::List(other));
    }

    /// Appends every segment of `other` to this list, copying its scratch bytes (but not its
    /// referenced segments). O(segments of `other`). Prefer [`IoList::push_list`] for big lists.
    pub fn append(&mut self, other: &IoList) {
        for seg in &other.segs {
            match seg {
                Seg::Static(s) => self.push_static(s),
                Seg::Shared(b) => self.push_bytes(b.clone()),
                Seg::Scratch { off, len } => self.push_copy(&other.scratch[*off..*off + *len]),
                Seg::Pinned { pin, off, len } => {
                    let p = &other.pins[*pin as usize];
                    self.pin(p);
                    self.push_shared(&p.slice(*off..*off + *len));
                }
                Seg::List(l) => self.push_shared_list(l.clone()),
            }
        }
    }

    /// Removes everything, keeping allocated capacity for reuse.
    pub fn clear(&mut self) {
        self.segs.clear();
        self.scratch.clear();
        self.pins.clear();
        self.len = 0;
        self.leaves = 0;
    }

    /// Iterates the non-empty segments in order, descending into nested lists.
    pub fn segments(&self) -> Segments<'_> {
        Segments { stack: self.walk() }
    }

    /// Iterates the segments with their kind, for tracing and tests.
    pub fn segments_with_kind(&self) -> impl Iterator<Item = (SegmentKind, &[u8])> + '_ {
        Leaves { stack: self.walk() }
    }

    /// Flattens the list into one contiguous buffer (one allocation, one copy of every byte).
    pub fn to_bytes(&self) -> Bytes {
        // A list of exactly one shared segment needs no copy at all.
        if self.leaves == 1 {
            match self.segs.first() {
                Some(Seg::Shared(b)) => return b.clone(),
                Some(Seg::Pinned { pin, off, len }) => {
                    return self.pins[*pin as usize].slice(*off..*off + *len);
                }
                _ => {}
            }
        }
        let mut out = BytesMut::with_capacity(self.len);
        for s in self.segments() {
            out.extend_from_slice(s);
        }
        out.freeze()
    }

    /// Flattens into a `Vec<u8>`.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for s in self.segments() {
            out.extend_from_slice(s);
        }
        out
    }
}

/// What kind of storage a segment refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// `&'static` bytes, stored once for the life of the program.
    Static,
    /// Reference-counted [`Bytes`].
    Shared,
    /// The list's own scratch buffer (bytes copied at push time).
    Scratch,
}

/// Iterator over the segments of an [`IoList`], from [`IoList::segments`].
pub struct Segments<'a> {
    stack: Vec<Cursor<'a>>,
}

impl fmt::Debug for Segments<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segments")
            .field("depth", &self.stack.len())
            .finish()
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        next_leaf(&mut self.stack).map(|(_, s)| s)
    }
}

struct Leaves<'a> {
    stack: Vec<Cursor<'a>>,
}

impl<'a> Iterator for Leaves<'a> {
    type Item = (SegmentKind, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        next_leaf(&mut self.stack)
    }
}

/// A position in one list: the list (for its scratch and pins) and its remaining segments.
pub(crate) type Cursor<'a> = (&'a IoList, std::slice::Iter<'a, Seg>);

impl IoList {
    /// A cursor at the first segment of this list.
    pub(crate) fn cursor(&self) -> Cursor<'_> {
        (self, self.segs.iter())
    }

    /// The stack of a depth-first walk, started at this list. Room for a few levels of nesting
    /// up front: a response (head, then the body as a nested list) would otherwise grow it, an
    /// allocation and a copy per write.
    pub(crate) fn walk(&self) -> Vec<Cursor<'_>> {
        let mut stack = Vec::with_capacity(4);
        stack.push(self.cursor());
        stack
    }
}

/// Depth-first walk shared by every iterator and by the writer's cursor.
#[inline]
pub(crate) fn next_leaf<'a>(stack: &mut Vec<Cursor<'a>>) -> Option<(SegmentKind, &'a [u8])> {
    loop {
        let (list, segs) = stack.last_mut()?;
        let list: &'a IoList = list;
        let Some(seg) = segs.next() else {
            stack.pop();
            continue;
        };
        match seg {
            Seg::Static(s) => return Some((SegmentKind::Static, s)),
            Seg::Shared(b) => return Some((SegmentKind::Shared, &b[..])),
            Seg::Scratch { off, len } => {
                return Some((SegmentKind::Scratch, &list.scratch[*off..*off + *len]));
            }
            Seg::Pinned { pin, off, len } => {
                return Some((
                    SegmentKind::Shared,
                    &list.pins[*pin as usize][*off..*off + *len],
                ));
            }
            Seg::List(l) => stack.push(l.cursor()),
        }
    }
}

impl fmt::Debug for IoList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoList")
            .field("len", &self.len)
            .field("segments", &self.leaves)
            .field("scratch", &self.scratch.len())
            .field("pins", &self.pins.len())
            .finish()
    }
}

impl PartialEq for IoList {
    /// Two lists are equal when they hold the same bytes, however they are segmented.
    fn eq(&self, other: &Self) -> bool {
        if self.len != other.len {
            return false;
        }
        let mut a = self.segments();
        let mut b = other.segments();
        let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
        loop {
            if x.is_empty() {
                x = match a.next() {
                    Some(s) => s,
                    None => return y.is_empty() && b.next().is_none(),
                };
            }
            if y.is_empty() {
                y = match b.next() {
                    Some(s) => s,
                    None => return false,
                };
            }
            let n = x.len().min(y.len());
            if x[..n] != y[..n] {
                return false;
            }
            x = &x[n..];
            y = &y[n..];
        }
    }
}

impl Eq for IoList {}

impl From<&'static str> for IoList {
    fn from(s: &'static str) -> Self {
        let mut l = IoList::new();
        l.push_static_str(s);
        l
    }
}

impl From<&'static [u8]> for IoList {
    fn from(s: &'static [u8]) -> Self {
        let mut l = IoList::new();
        l.push_static(s);
        l
    }
}

impl From<Bytes> for IoList {
    fn from(b: Bytes) -> Self {
        let mut l = IoList::new();
        l.push_bytes(b);
        l
    }
}

impl From<String> for IoList {
    fn from(s: String) -> Self {
        Bytes::from(s).into()
    }
}

impl From<Vec<u8>> for IoList {
    fn from(v: Vec<u8>) -> Self {
        Bytes::from(v).into()
    }
}

impl Extend<Bytes> for IoList {
    fn extend<T: IntoIterator<Item = Bytes>>(&mut self, iter: T) {
        for b in iter {
            self.push_bytes(b);
        }
    }
}

impl FromIterator<Bytes> for IoList {
    fn from_iter<T: IntoIterator<Item = Bytes>>(iter: T) -> Self {
        let mut l = IoList::new();
        l.extend(iter);
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_segments_are_not_stored() {
        let mut l = IoList::new();
        l.push_static(b"");
        l.push_bytes(Bytes::new());
        l.push_copy(b"");
        l.push_list(IoList::new());
        assert_eq!(l.len(), 0);
        assert_eq!(l.segment_count(), 0);
        assert_eq!(l.segments().count(), 0);
        assert!(l.to_bytes().is_empty());
    }

    #[test]
    fn adjacent_copies_merge_into_one_segment() {
        let mut l = IoList::new();
        for i in 0..100 {
            l.push_copy(i.to_string().as_bytes());
            l.push_copy(b"</td><td>");
        }
        assert_eq!(l.segment_count(), 1);
        l.push_static(b"<tr>");
        l.push_copy(b"x");
        assert_eq!(l.segment_count(), 3);
    }

    #[test]
    fn nested_lists_keep_order_and_length() {
        let mut inner = IoList::new();
        inner.push_static(b"b");
        inner.push_copy(b"c");
        let inner = Arc::new(inner);
        let mut l = IoList::new();
        l.push_static(b"a");
        l.push_shared_list(inner.clone());
        l.push_bytes(Bytes::from_static(b"d"));
        l.push_shared_list(inner);
        assert_eq!(l.len(), 6);
        assert_eq!(l.segment_count(), 6);
        assert_eq!(&l.to_bytes()[..], b"abcdbc");
    }

    #[test]
    fn static_segments_are_referenced_not_copied() {
        static TEXT: &[u8] = b"shared text";
        let mut l = IoList::new();
        l.push_static(TEXT);
        let seg = l.segments().next().unwrap();
        assert_eq!(seg.as_ptr(), TEXT.as_ptr());
        let b = Bytes::from(vec![7u8; 100]);
        let ptr = b.as_ptr();
        let mut l = IoList::new();
        l.push_bytes(b);
        assert_eq!(l.segments().next().unwrap().as_ptr(), ptr);
        assert_eq!(
            l.to_bytes().as_ptr(),
            ptr,
            "one shared segment flattens without a copy"
        );
    }

    #[test]
    fn pinned_pieces_are_offsets_into_the_pin() {
        let text = Bytes::from(b"<html>static text of a compiled template</html>".to_vec());
        let mut l = IoList::new();
        l.pin(&text);
        l.pin(&text);
        let before = Bytes::clone(&text); // count now: text + pin + before
        l.push_shared(&text.slice(0..6));
        l.push_shared(&text.slice(6..20));
        let unpinned = Bytes::from(b"elsewhere".to_vec());
        l.push_shared(&unpinned);
        let segs: Vec<&[u8]> = l.segments().collect();
        assert_eq!(segs[0].as_ptr(), text.as_ptr());
        assert_eq!(segs[1].as_ptr(), text[6..].as_ptr());
        assert_eq!(segs[2].as_ptr(), unpinned.as_ptr());
        assert_eq!(&l.to_bytes()[..], b"<html>static text ofelsewhere");
        assert_eq!(l.len(), 29);
        drop(before);
        // The pin keeps the text alive after every other handle is gone.
        let expect = text.slice(0..20).to_vec();
        drop(text);
        assert_eq!(&l.to_vec()[..20], &expect[..]);
        let mut copy = IoList::new();
        copy.append(&l);
        assert_eq!(copy, l);
    }

    #[test]
    fn ranges_of_shared_bytes_are_referenced_pinned_or_not() {
        let text = Bytes::from(b"0123456789abcdef".to_vec());
        let other = Bytes::from(b"ABCDEFGHIJ".to_vec());
        let mut l = IoList::new();
        l.pin(&text);
        l.push_shared_range(&text, 2..6);
        l.push_shared_range(&other, 1..4);
        l.push_shared_range(&text, 5..5);
        let segs: Vec<&[u8]> = l.segments().collect();
        assert_eq!(segs.len(), 2, "the empty range adds nothing");
        assert_eq!(segs[0].as_ptr(), text[2..].as_ptr());
        assert_eq!(segs[1].as_ptr(), other[1..].as_ptr());
        assert_eq!(l.to_vec(), b"2345BCD");
        assert_eq!(l.len(), 7);
        // The unpinned range holds its own reference: it outlives `other`.
        drop(other);
        assert_eq!(l.to_vec(), b"2345BCD");
    }

    #[test]
    fn copy_with_makes_one_run_after_earlier_copies() {
        let mut l = IoList::new();
        l.push_copy(b"ab");
        l.push_copy_with(|b| {
            b.push(b"cd");
            b.push(b"ef");
        });
        l.push_copy_with(|_| {});
        assert_eq!(l.segment_count(), 1);
        l.push_static(b"--");
        l.push_copy_with(|b| b.push(b"gh"));
        assert_eq!(l.segment_count(), 3);
        assert_eq!(l.to_vec(), b"abcdef--gh");
        assert_eq!(l.len(), 10);
    }

    #[test]
    fn pushed_vecs_are_adopted_as_scratch_then_shared() {
        let first = b"<p>first</p>".to_vec();
        let ptr = first.as_ptr();
        let mut l = IoList::new();
        l.push_vec(Vec::new());
        l.push_vec(first);
        l.push_copy(b"+");
        l.push_vec(b"second".to_vec());
        l.push_static(b"!");
        let segs: Vec<&[u8]> = l.segments().collect();
        assert_eq!(
            segs[0].as_ptr(),
            ptr,
            "the first buffer is the scratch, not a copy"
        );
        assert_eq!(l.segment_count(), 3);
        assert_eq!(l.to_vec(), b"<p>first</p>+second!");
        assert_eq!(l.len(), 20);
    }

    #[test]
    fn equality_ignores_segmentation() {
        let mut a = IoList::new();
        a.push_static(b"hello ");
        a.push_copy(b"world");
        let mut b = IoList::new();
        b.push_copy(b"hel");
        b.push_bytes(Bytes::from_static(b"lo wor"));
        b.push_static(b"ld");
        assert_eq!(a, b);
        b.push_static(b"!");
        assert_ne!(a, b);
    }
}
