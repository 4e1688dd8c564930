//! `IoList`: the rope itself, its segments and their iteration.
//!
//! A segment is a `&'static` slice, a shared `Bytes`, a run of the list's scratch buffer (pieces
//! copied by `push_copy`; consecutive copies merge into one segment, so a 100x100 table is not
//! 30,000 iovecs), a slice of a pinned allocation (`pin`: one reference for the whole list, none
//! per slice) or a shared nested list. Empty pieces are never stored. The pins stand at the front
//! of the segment table, which keeps the struct at 72 bytes on 64-bit targets (moved with inline
//! stores); a list of copies only has no table and drops without a walk; `push_vec` adopts a filled
//! `Vec` as the scratch buffer without another allocation.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

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
    /// without touching their reference count. `pin` indexes the pins at the table's front.
    Pinned { pin: u32, off: usize, len: usize },
    /// A whole other list, shared. Its bytes stand here in order.
    List(Arc<IoList>),
    /// All of the list's scratch buffer: the one segment of a list of copies only, which keeps
    /// no segment table (see [`IoList::table`]). Never stored in a table.
    AllScratch,
}

/// The segment table a list of copies only is walked with.
static ALL_SCRATCH: [Seg; 1] = [Seg::AllScratch];

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
    /// The pins (see [`IoList::pin`]), as `Seg::Shared`, then the segments; empty while the
    /// list holds only copies, which are then all of `scratch` (a page rendered into one buffer
    /// needs no table, so no allocation for it). Pins share the table's allocation and keep the
    /// struct small enough to move with inline stores. Dropped by hand (see `Drop`), so that a
    /// list without a table drops without a walk.
    segs: ManuallyDrop<Vec<Seg>>,
    scratch: Vec<u8>,
    /// How many of `segs`' first entries are pins: allocations this list holds one reference
    /// to, so that segments inside them need none.
    pins: u32,
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
            segs: ManuallyDrop::new(Vec::new()),
            scratch: Vec::new(),
            pins: 0,
            len: 0,
            leaves: 0,
        }
    }

    /// An empty list with room for `segments` segments and `scratch` bytes of copied pieces.
    pub fn with_capacity(segments: usize, scratch: usize) -> Self {
        // Room for the usual two pins too, which share the table.
        let table = if segments > 0 { segments + 2 } else { 0 };
        IoList {
            segs: ManuallyDrop::new(Vec::with_capacity(table)),
            scratch: Vec::with_capacity(scratch),
            pins: 0,
            len: 0,
            leaves: 0,
        }
    }

    /// A list of `v`'s bytes, adopted as its scratch buffer: no copy, and no allocation (a list
    /// of copies only has no segment table).
    #[inline]
    pub fn from_scratch(v: Vec<u8>) -> Self {
        IoList {
            segs: ManuallyDrop::new(Vec::new()),
            len: v.len(),
            leaves: usize::from(!v.is_empty()),
            scratch: v,
            pins: 0,
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
        self.table_mut().push(Seg::Static(s));
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
        self.table_mut().push(Seg::Shared(b));
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
        if self.segs.is_empty() && !self.scratch.is_empty() {
            self.open_table();
        }
        // Pins stand before the segments: one taken after them shifts the table by an entry.
        self.segs.insert(self.pins as usize, Seg::Shared(b.clone()));
        self.pins += 1;
    }

    /// Pin number `pin`: the `pin`th entry of the table.
    #[inline(always)]
    fn pinned(&self, pin: u32) -> &Bytes {
        match &self.segs[pin as usize] {
            Seg::Shared(b) => b,
            _ => unreachable!("a pin is stored as a shared segment"),
        }
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
                self.table_mut().push(Seg::Pinned {
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
        for (i, seg) in self.segs[..self.pins as usize].iter().enumerate().rev() {
            if let Seg::Shared(p) = seg {
                let ps = p.as_ptr() as usize;
                if start >= ps && end <= ps + p.len() {
                    return Some((i as u32, start - ps));
                }
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
        match self.segs.last_mut() {
            // No table: the list was empty or copies only; now it is copies only.
            None => self.leaves = 1,
            Some(Seg::Scratch { off: o, len }) if *o + *len == off => *len += n,
            Some(_) => {
                self.leaves += 1;
                self.segs.push(Seg::Scratch { off, len: n });
            }
        }
    }

    /// The segments, as walked: a list of copies only has no table of its own.
    #[inline(always)]
    fn table(&self) -> &[Seg] {
        if self.segs.is_empty() && !self.scratch.is_empty() {
            &ALL_SCRATCH
        } else {
            &self.segs[self.pins as usize..]
        }
    }

    /// The table, to store a segment in: a list of copies only gets one first, its scratch as
    /// the first segment.
    #[inline(always)]
    fn table_mut(&mut self) -> &mut Vec<Seg> {
        if self.segs.is_empty() && !self.scratch.is_empty() {
            self.open_table();
        }
        &mut self.segs
    }

    #[inline(never)]
    fn open_table(&mut self) {
        self.segs.reserve(4);
        self.segs.push(Seg::Scratch {
            off: 0,
            len: self.scratch.len(),
        });
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
        self.table_mut().push(Seg::List(other));
    }

    /// Appends every segment of `other` to this list, copying its scratch bytes (but not its
    /// referenced segments). O(segments of `other`). Prefer [`IoList::push_list`] for big lists.
    pub fn append(&mut self, other: &IoList) {
        for seg in other.table() {
            match seg {
                Seg::Static(s) => self.push_static(s),
                Seg::Shared(b) => self.push_bytes(b.clone()),
                Seg::Scratch { off, len } => self.push_copy(&other.scratch[*off..*off + *len]),
                Seg::Pinned { pin, off, len } => {
                    let p = other.pinned(*pin);
                    self.pin(p);
                    self.push_shared(&p.slice(*off..*off + *len));
                }
                Seg::List(l) => self.push_shared_list(l.clone()),
                Seg::AllScratch => self.push_copy(&other.scratch),
            }
        }
    }

    /// Removes everything, keeping allocated capacity for reuse.
    pub fn clear(&mut self) {
        self.segs.clear();
        self.scratch.clear();
        self.pins = 0;
        self.len = 0;
        self.leaves = 0;
    }

    /// Iterates the non-empty segments in order, descending into nested lists.
    #[inline]
    pub fn segments(&self) -> Segments<'_> {
        if self.segs.is_empty() {
            // No table: the scratch buffer is the whole list, handed out without a walk.
            return Segments {
                whole: Some(&self.scratch[..]).filter(|s| !s.is_empty()),
                walk: None,
            };
        }
        Segments {
            whole: None,
            walk: Some(Walk::new(self)),
        }
    }

    /// Iterates the segments with their kind, for tracing and tests.
    pub fn segments_with_kind(&self) -> impl Iterator<Item = (SegmentKind, &[u8])> + '_ {
        Leaves {
            walk: Walk::new(self),
        }
    }

    /// Flattens the list into one contiguous buffer (one allocation, one copy of every byte).
    pub fn to_bytes(&self) -> Bytes {
        // A list of exactly one shared segment needs no copy at all.
        if self.leaves == 1 {
            match self.table().first() {
                Some(Seg::Shared(b)) => return b.clone(),
                Some(Seg::Pinned { pin, off, len }) => {
                    return self.pinned(*pin).slice(*off..*off + *len);
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
    /// The one run of a list of copies only (no segment table), until it is handed out: the
    /// usual rendered page, iterated without setting up a walk.
    whole: Option<&'a [u8]>,
    /// The walk of a list with a segment table.
    walk: Option<Walk<'a>>,
}

impl fmt::Debug for Segments<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segments")
            .field(
                "depth",
                &self.walk.as_ref().map_or(1, |w| w.nested.len() + 1),
            )
            .finish()
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if let Some(s) = self.whole.take() {
            return Some(s);
        }
        self.walk.as_mut()?.next().map(|(_, s)| s)
    }
}

struct Leaves<'a> {
    walk: Walk<'a>,
}

impl<'a> Iterator for Leaves<'a> {
    type Item = (SegmentKind, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        self.walk.next()
    }
}

/// A depth-first walk from one list: its cursor, and a stack for nested lists only, so that
/// iterating a flat list allocates nothing.
struct Walk<'a> {
    top: Cursor<'a>,
    nested: Vec<Cursor<'a>>,
}

impl<'a> Walk<'a> {
    #[inline]
    fn new(list: &'a IoList) -> Walk<'a> {
        Walk {
            top: list.cursor(),
            nested: Vec::new(),
        }
    }

    #[inline]
    fn next(&mut self) -> Option<(SegmentKind, &'a [u8])> {
        loop {
            if !self.nested.is_empty()
                && let Some(leaf) = next_leaf(&mut self.nested)
            {
                return Some(leaf);
            }
            let list: &'a IoList = self.top.0;
            match leaf(list, self.top.1.next()?) {
                Ok(leaf) => return Some(leaf),
                Err(nested) => self.nested.push(nested.cursor()),
            }
        }
    }
}

/// A position in one list: the list (for its scratch and pins) and its remaining segments.
pub(crate) type Cursor<'a> = (&'a IoList, std::slice::Iter<'a, Seg>);

impl IoList {
    /// A cursor at the first segment of this list.
    pub(crate) fn cursor(&self) -> Cursor<'_> {
        (self, self.table().iter())
    }

    /// The bytes of a list that holds exactly one leaf at its top (not inside a nested list):
    /// what the writer needs to plan the usual response without walking it.
    #[inline]
    pub(crate) fn single_leaf(&self) -> Option<&[u8]> {
        match self.table() {
            [seg] => leaf(self, seg).ok().map(|(_, s)| s),
            _ => None,
        }
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
        match leaf(list, seg) {
            Ok(leaf) => return Some(leaf),
            Err(nested) => stack.push(nested.cursor()),
        }
    }
}

/// Segment `seg` of `list`: its bytes, or the nested list it stands for.
#[inline(always)]
fn leaf<'a>(list: &'a IoList, seg: &'a Seg) -> Result<(SegmentKind, &'a [u8]), &'a IoList> {
    Ok(match seg {
        Seg::Static(s) => (SegmentKind::Static, s),
        Seg::Shared(b) => (SegmentKind::Shared, &b[..]),
        Seg::Scratch { off, len } => (SegmentKind::Scratch, &list.scratch[*off..*off + *len]),
        Seg::AllScratch => (SegmentKind::Scratch, &list.scratch[..]),
        Seg::Pinned { pin, off, len } => {
            (SegmentKind::Shared, &list.pinned(*pin)[*off..*off + *len])
        }
        Seg::List(l) => return Err(l),
    })
}

impl Drop for IoList {
    /// A list without a table (copies only) drops with one check and its scratch buffer's free,
    /// small enough to inline; a table's walk over its segments is out of line.
    #[inline]
    fn drop(&mut self) {
        if self.segs.capacity() != 0 {
            drop_table(std::mem::take(&mut *self.segs));
        }
    }
}

/// Drops a segment table: releases its segments' references, then frees it.
#[inline(never)]
fn drop_table(segs: Vec<Seg>) {
    drop(segs);
}

impl fmt::Debug for IoList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoList")
            .field("len", &self.len)
            .field("segments", &self.leaves)
            .field("scratch", &self.scratch.len())
            .field("pins", &self.pins)
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
mod tests;
