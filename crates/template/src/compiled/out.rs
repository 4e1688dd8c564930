//! [`Out`]: where a compiled template writes. Small pieces are copied into a buffer that becomes
//! one segment of the list when full; large statics and long shared strings are referenced.

use std::sync::Arc;

use bytes::Bytes;
use galleon_iolist::{ByteCursor, IoList};

/// Capacity of each buffer after the first: a full one is moved into the list (no copy).
pub const BUF_BYTES: usize = 16 * 1024;

/// Largest first buffer sized from a template's previous render.
const MAX_FIRST_BUF: usize = 256 * 1024;

/// `"00"` to `"99"`.
static DIGITS: [[u8; 2]; 100] = {
    let mut t = [[0; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

#[inline(always)]
fn entity(b: u8) -> &'static [u8] {
    match b {
        b'&' => b"&amp;",
        b'<' => b"&lt;",
        b'>' => b"&gt;",
        b'"' => b"&quot;",
        _ => b"&#39;",
    }
}

/// Every byte of a word: `LO * b` is `b` eight times.
const LO: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// The high bit of each byte of `x` that is zero, and no other bit (exact, so the lowest one
/// is the first zero byte).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW7).wrapping_add(LOW7)) | x | LOW7)
}

/// The high bit of each byte of `x` (eight bytes, little-endian) that needs an HTML entity
/// (Phoenix's five: `& < > " '`). `&` and `'` differ in bit 0 only, `<` and `>` in bit 1
/// only, so three comparisons cover the five.
#[inline(always)]
fn specials(x: u64) -> u64 {
    zero_bytes((x | LO) ^ (LO * u64::from(b'\'')))
        | zero_bytes((x | (LO * 2)) ^ (LO * u64::from(b'>')))
        | zero_bytes(x ^ (LO * u64::from(b'"')))
}

/// Non-zero when some byte of `x` needs an entity, like [`specials`] but only as a yes or no:
/// the zero-byte test without exactness (a hit may also flag the bytes above it), one operation
/// shorter per comparison.
#[inline(always)]
fn any_special(x: u64) -> u64 {
    const HIGH: u64 = LO << 7;
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HIGH;
    zero((x | LO) ^ (LO * u64::from(b'\'')))
        | zero((x | (LO * 2)) ^ (LO * u64::from(b'>')))
        | zero(x ^ (LO * u64::from(b'"')))
}

/// True when no byte of `s` needs escaping: up to sixteen bytes (a name, a word) as one or two
/// overlapping words with no loop and no branch on the bytes; longer text as [`first_special`].
#[inline(always)]
fn clean(s: &[u8]) -> bool {
    let n = s.len();
    if n <= 8 {
        any_special(short_word(s)) == 0
    } else if n <= 16 {
        // Each word tested on its own: OR-ing two clean bytes can make a special one.
        (any_special(word_at(s, 0)) | any_special(word_at(s, n - 8))) == 0
    } else {
        first_special(s).is_none()
    }
}

/// Eight bytes of `s` from `at` (`at + 8 <= s.len()`), little-endian.
#[inline(always)]
fn word_at(s: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().expect("eight bytes"))
}

/// `s` (at most eight bytes) as a little-endian word padded with zero bytes (which need no
/// escaping), read with at most two overlapping loads and no loop.
#[inline(always)]
fn short_word(s: &[u8]) -> u64 {
    let n = s.len();
    if n >= 4 {
        let lo = u32::from_le_bytes(s[..4].try_into().expect("four bytes"));
        let hi = u32::from_le_bytes(s[n - 4..].try_into().expect("four bytes"));
        // The overlap, if any, is ORed with the same bytes.
        u64::from(lo) | (u64::from(hi) << ((n - 4) * 8))
    } else if n > 0 {
        u64::from(s[0])
            | (u64::from(s[n / 2]) << (n / 2 * 8))
            | (u64::from(s[n - 1]) << ((n - 1) * 8))
    } else {
        0
    }
}

/// Position of the first byte of `s` that needs escaping, eight bytes at a time with no
/// per-byte branch (short strings, the usual value, take no loop at all).
#[inline]
fn first_special(s: &[u8]) -> Option<usize> {
    let n = s.len();
    let byte = |m: u64| m.trailing_zeros() as usize / 8;
    if n <= 8 {
        let m = specials(short_word(s));
        return (m != 0).then(|| byte(m));
    }
    let mut at = 0;
    while at + 8 <= n {
        let m = specials(word_at(s, at));
        if m != 0 {
            return Some(at + byte(m));
        }
        at += 8;
    }
    if at < n {
        // The last eight bytes: those before `at` are clean, so the first hit is at or past it.
        let m = specials(word_at(s, n - 8));
        if m != 0 {
            return Some(n - 8 + byte(m));
        }
    }
    None
}

/// A compiled render's output: an [`IoList`] with a buffer in front of it. Generated code calls
/// [`Out::copy`] with constant-size statics (a fixed-size copy once inlined),
/// [`Out::push_static`] for statics at least the copy threshold long, and the [`Render`]
/// impls for values.
///
/// [`Render`]: super::Render
#[derive(Debug)]
pub struct Out {
    /// Bytes handed over before the buffer: none until a reference or a full buffer (the
    /// usual page never has any, and so never builds or drops a list of its own). Boxed: a
    /// render starts with one store of a null pointer, not a 72-byte `None` moved into place.
    list: Option<Box<IoList>>,
    buf: ByteCursor,
    copy_below: usize,
    /// Shared values (strings, safe HTML) shorter than this are copied, as the engine's
    /// [`DEFAULT_VALUE_COPY_BELOW`](crate::DEFAULT_VALUE_COPY_BELOW).
    value_copy_below: usize,
}

impl Out {
    /// An empty output: static pieces shorter than `copy_below` bytes are copied, and shared
    /// values shorter than [`DEFAULT_VALUE_COPY_BELOW`](crate::DEFAULT_VALUE_COPY_BELOW); the
    /// first buffer holds `first_buf` bytes (clamped), the next ones [`BUF_BYTES`].
    #[inline]
    pub fn new(copy_below: usize, first_buf: usize) -> Out {
        Out {
            list: None,
            buf: ByteCursor::new(Vec::with_capacity(first_buf.clamp(256, MAX_FIRST_BUF))),
            copy_below,
            value_copy_below: crate::DEFAULT_VALUE_COPY_BELOW,
        }
    }

    /// The same output with another copy threshold for shared values.
    pub fn with_value_copy_below(mut self, bytes: usize) -> Out {
        self.value_copy_below = bytes;
        self
    }

    /// The list bytes are handed to (made on first use).
    #[inline]
    fn list(&mut self) -> &mut IoList {
        self.list.get_or_insert_with(Box::default)
    }

    /// Bytes handed to the list.
    #[inline(always)]
    fn listed(&self) -> usize {
        self.list.as_ref().map_or(0, |l| l.len())
    }

    /// Bytes written so far.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.listed() + self.buf.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The copy threshold in force.
    pub fn copy_below(&self) -> usize {
        self.copy_below
    }

    /// A writer over this output keeping the buffer's position in locals (generated code
    /// writes through one); the output is whole again when it is dropped.
    #[inline(always)]
    pub fn writer(&mut self) -> Writer<'_> {
        let cur = std::mem::take(&mut self.buf);
        Writer { out: self, cur }
    }

    /// Copies a small piece into the buffer.
    #[inline(always)]
    pub fn copy(&mut self, s: &[u8]) {
        if s.len() > self.buf.spare() {
            self.make_room(s.len());
        }
        self.buf.push(s);
    }

    #[cold]
    #[inline(never)]
    fn make_room(&mut self, n: usize) {
        let mut v = std::mem::take(&mut self.buf).into_vec();
        if !v.is_empty() {
            self.list().push_vec(v);
            v = Vec::new();
        }
        v.reserve(n.max(BUF_BYTES));
        self.buf = ByteCursor::new(v);
    }

    /// [`Writer::copy`]'s slow path: `cur` is the writer's buffer; returns the new one, holding
    /// `s` (by value, so that the writer's locals keep no address).
    #[cold]
    #[inline(never)]
    fn room_and_copy(&mut self, cur: ByteCursor, s: &[u8]) -> ByteCursor {
        self.buf = cur;
        self.copy(s);
        std::mem::take(&mut self.buf)
    }

    /// Hands the buffered bytes to the list before a reference: a buffer of at least
    /// `copy_below` bytes is moved in whole; a shorter one is copied into the list's scratch.
    #[inline]
    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let mut v = std::mem::take(&mut self.buf).into_vec();
        if v.len() >= self.copy_below.max(1) {
            self.list().push_vec(v);
        } else {
            self.list().push_copy(&v);
            v.clear();
            self.buf = ByteCursor::new(v);
        }
    }

    /// A static piece by reference (generated code passes those of at least the copy
    /// threshold; shorter ones go through [`Out::copy`]).
    #[inline]
    pub fn push_static(&mut self, s: &'static [u8]) {
        self.flush();
        self.list().push_static(s);
    }

    /// A static piece: referenced when at least the copy threshold long, copied otherwise.
    #[inline]
    pub fn static_or_copy(&mut self, s: &'static [u8]) {
        if s.len() >= self.copy_below {
            self.push_static(s);
        } else {
            self.copy(s);
        }
    }

    /// Shared bytes (a value): referenced when at least the value threshold long, else copied.
    #[inline]
    pub fn shared(&mut self, b: &Bytes) {
        if b.len() >= self.value_copy_below {
            self.flush();
            self.list().push_bytes(b.clone());
        } else {
            self.copy(b);
        }
    }

    /// An integer, formatted in place.
    #[inline(always)]
    pub fn int(&mut self, v: i64) {
        int(self, v);
    }

    /// An unsigned integer, formatted in place: below 10,000 as a fixed-size copy of one to four
    /// digits (pairs from a table), larger ones through `itoa`.
    #[inline(always)]
    pub fn uint(&mut self, v: u64) {
        uint(self, v);
    }

    /// Borrowed text, HTML-escaped, copied.
    #[inline]
    pub fn escaped(&mut self, s: &[u8]) {
        match first_special(s) {
            None => self.copy(s),
            Some(at) => self.escape_from(s, at),
        }
    }

    #[inline(never)]
    fn escape_from(&mut self, s: &[u8], mut at: usize) {
        let mut start = 0;
        loop {
            self.copy(&s[start..at]);
            self.copy(entity(s[at]));
            start = at + 1;
            match first_special(&s[start..]) {
                Some(i) => at = start + i,
                None => break,
            }
        }
        self.copy(&s[start..]);
    }

    /// Shared text (a value), HTML-escaped: clean runs of at least the value threshold are
    /// referenced (slices of `b`, no copy); the rest is copied.
    pub fn escaped_shared(&mut self, b: &Bytes) {
        if b.len() < self.value_copy_below {
            return self.escaped(b);
        }
        let mut start = 0;
        while start < b.len() {
            let end = first_special(&b[start..]).map_or(b.len(), |i| start + i);
            if end - start >= self.value_copy_below {
                self.flush();
                self.list().push_bytes(b.slice(start..end));
            } else {
                self.copy(&b[start..end]);
            }
            if end < b.len() {
                self.copy(entity(b[end]));
            }
            start = end + 1;
        }
    }

    /// Already-rendered HTML, shared: a short list is copied, a long one nested.
    pub fn html(&mut self, html: &Arc<IoList>) {
        if html.len() < self.value_copy_below {
            for seg in html.segments() {
                self.copy(seg);
            }
        } else {
            self.flush();
            self.list().push_shared_list(Arc::clone(html));
        }
    }

    /// Already-rendered HTML, appended segment by segment (referenced segments stay referenced).
    pub fn append(&mut self, html: &IoList) {
        if html.len() < self.value_copy_below {
            for seg in html.segments() {
                self.copy(seg);
            }
        } else {
            self.flush();
            self.list().append(html);
        }
    }

    /// A whole list moved in (a fallback render's output).
    pub fn push_list(&mut self, list: IoList) {
        self.flush();
        self.list().push_list(list);
    }

    /// The output so far, as one list: the buffer adopted whole (no copy) when nothing was
    /// handed to the list before it.
    #[inline(always)]
    pub fn finish(self) -> IoList {
        match self.list {
            None => IoList::from_scratch(self.buf.into_vec()),
            Some(_) => self.finish_list(),
        }
    }

    /// [`Out::finish`] as a successful render's result, built in place: `Ok(out.finish())`
    /// built the list, then copied it into the `Result` with wider loads than the stores that
    /// had just written it, a store-forwarding stall on every render (~1-2 ns of a 30 ns page;
    /// bench/results/templates.txt).
    #[inline(always)]
    pub(crate) fn finish_ok(self) -> Result<IoList, crate::Error> {
        match self.list {
            None => Ok(IoList::from_scratch(self.buf.into_vec())),
            Some(_) => Ok(self.finish_list()),
        }
    }

    /// [`Out::finish`] of an output with bytes in the list: the buffer flushed into it.
    #[inline(never)]
    fn finish_list(mut self) -> IoList {
        self.flush();
        self.list.take().map(|l| *l).unwrap_or_default()
    }
}

/// Where integers are formatted: [`Out`] and [`Writer`].
trait Sink {
    fn copy(&mut self, s: &[u8]);
}

impl Sink for Out {
    #[inline(always)]
    fn copy(&mut self, s: &[u8]) {
        Out::copy(self, s);
    }
}

impl Sink for Writer<'_> {
    #[inline(always)]
    fn copy(&mut self, s: &[u8]) {
        Writer::copy(self, s);
    }
}

#[inline(always)]
fn int(out: &mut impl Sink, v: i64) {
    if v >= 0 {
        uint(out, v as u64);
    } else {
        out.copy(itoa::Buffer::new().format(v).as_bytes());
    }
}

#[inline(always)]
fn uint(out: &mut impl Sink, v: u64) {
    if v < 10 {
        out.copy(&[b'0' + v as u8]);
    } else if v < 100 {
        out.copy(&DIGITS[v as usize]);
    } else if v < 1000 {
        let [a, b] = DIGITS[(v % 100) as usize];
        out.copy(&[b'0' + (v / 100) as u8, a, b]);
    } else if v < 10_000 {
        let [a, b] = DIGITS[(v / 100) as usize];
        let [c, d] = DIGITS[(v % 100) as usize];
        out.copy(&[a, b, c, d]);
    } else {
        out.copy(itoa::Buffer::new().format(v).as_bytes());
    }
}

/// An [`Out`] being written by generated code: its buffer taken out of it for the writer's
/// life, so that the write position stays in locals across the many small copies. Anything
/// other than a copy goes through [`Writer::with_out`]; dropping the writer puts the buffer back.
#[derive(Debug)]
pub struct Writer<'a> {
    out: &'a mut Out,
    cur: ByteCursor,
}

impl Writer<'_> {
    /// Bytes written so far.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.out.listed() + self.cur.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies a small piece into the buffer, as [`Out::copy`].
    #[inline(always)]
    pub fn copy(&mut self, s: &[u8]) {
        if s.len() <= self.cur.spare() {
            self.cur.push(s);
        } else {
            let cur = std::mem::take(&mut self.cur);
            self.cur = self.out.room_and_copy(cur, s);
        }
    }

    /// Copies text whose length is known only at run time (a string's value): short text
    /// without a `memcpy` call.
    #[inline(always)]
    pub fn copy_text(&mut self, s: &[u8]) {
        if s.len() <= self.cur.spare() {
            self.cur.push_short(s);
        } else {
            let cur = std::mem::take(&mut self.cur);
            self.cur = self.out.room_and_copy(cur, s);
        }
    }

    /// Runs `f` on the whole output (buffer put back for it).
    #[inline(always)]
    pub fn with_out<R>(&mut self, f: impl FnOnce(&mut Out) -> R) -> R {
        self.out.buf = std::mem::take(&mut self.cur);
        let r = f(self.out);
        self.cur = std::mem::take(&mut self.out.buf);
        r
    }

    /// A static piece by reference, as [`Out::push_static`].
    #[inline]
    pub fn push_static(&mut self, s: &'static [u8]) {
        self.with_out(|o| o.push_static(s));
    }

    /// An integer, formatted in place.
    #[inline(always)]
    pub fn int(&mut self, v: i64) {
        int(self, v);
    }

    /// An unsigned integer, formatted in place.
    #[inline(always)]
    pub fn uint(&mut self, v: u64) {
        uint(self, v);
    }

    /// Borrowed text, HTML-escaped, copied, as [`Out::escaped`]: clean text (the usual value)
    /// is known clean without finding where its first entity would be.
    #[inline]
    pub fn escaped(&mut self, s: &[u8]) {
        if clean(s) {
            return self.copy_text(s);
        }
        match first_special(s) {
            None => self.copy_text(s),
            Some(at) => self.with_out(|o| o.escape_from(s, at)),
        }
    }
}

impl Drop for Writer<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.out.buf = std::mem::take(&mut self.cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `first_special` as a plain byte search.
    fn first_special_naive(s: &[u8]) -> Option<usize> {
        s.iter().position(|b| b"&<>\"'".contains(b))
    }

    #[test]
    fn first_special_and_clean_find_every_entity_byte_at_every_position() {
        for n in 0..40 {
            for at in 0..n {
                for b in 0..=255u8 {
                    let mut s = vec![b'a'; n];
                    s[at] = b;
                    let want = first_special_naive(&s);
                    assert_eq!(first_special(&s), want, "n {n} at {at} b {b}");
                    assert_eq!(clean(&s), want.is_none(), "n {n} at {at} b {b}");
                }
            }
        }
    }

    proptest! {
        /// The word-at-a-time search finds the byte a plain search finds, in any text.
        #[test]
        fn first_special_matches_naive(s in proptest::collection::vec(any::<u8>(), 0..80)) {
            prop_assert_eq!(first_special(&s), first_special_naive(&s));
        }
    }

    /// One write of generated code.
    #[derive(Debug, Clone)]
    enum Piece {
        Copy(Vec<u8>),
        Static(usize),
        Int(i64),
        Escaped(String),
        Text(Vec<u8>),
    }

    static STATICS: [&[u8]; 2] = [&[b's'; 300], b"<short static>"];

    fn piece() -> impl Strategy<Value = Piece> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600).prop_map(Piece::Copy),
            (0..STATICS.len()).prop_map(Piece::Static),
            any::<i64>().prop_map(Piece::Int),
            "[a-z<>&\"' ]{0,40}".prop_map(Piece::Escaped),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Piece::Text),
        ]
    }

    fn write_out(out: &mut Out, p: &Piece) {
        match p {
            Piece::Copy(b) => out.copy(b),
            Piece::Static(i) => out.static_or_copy(STATICS[*i]),
            Piece::Int(v) => out.int(*v),
            Piece::Escaped(s) => out.escaped(s.as_bytes()),
            Piece::Text(b) => out.copy(b),
        }
    }

    fn write_writer(w: &mut Writer<'_>, p: &Piece) {
        match p {
            Piece::Copy(b) => w.copy(b),
            Piece::Static(i) if STATICS[*i].len() >= 256 => w.push_static(STATICS[*i]),
            Piece::Static(i) => w.copy(STATICS[*i]),
            Piece::Int(v) => w.int(*v),
            Piece::Escaped(s) => w.escaped(s.as_bytes()),
            Piece::Text(b) => w.copy_text(b),
        }
    }

    proptest! {
        /// Any sequence of writes through a [`Writer`] (which writes through `ByteCursor`'s
        /// unchecked copies), dropped and re-made at arbitrary points, gives the bytes and the
        /// length the same writes give through [`Out`] itself.
        #[test]
        fn writer_matches_out(
            pieces in proptest::collection::vec(piece(), 0..60),
            breaks in proptest::collection::vec(any::<bool>(), 60),
            first_buf in 0usize..2048,
        ) {
            let mut want = Out::new(256, first_buf);
            for p in &pieces {
                write_out(&mut want, p);
            }
            let mut out = Out::new(256, first_buf);
            let mut w = out.writer();
            for (p, stop) in pieces.iter().zip(&breaks) {
                write_writer(&mut w, p);
                if *stop {
                    let len = w.len();
                    drop(w);
                    prop_assert_eq!(out.len(), len);
                    w = out.writer();
                }
            }
            drop(w);
            prop_assert_eq!(out.len(), want.len());
            prop_assert_eq!(out.finish().to_vec(), want.finish().to_vec());
        }
    }

    #[test]
    fn writer_fills_buffers_and_puts_them_back() {
        let mut out = Out::new(256, 0);
        {
            let mut w = out.writer();
            for i in 0..5_000u64 {
                w.copy(b"<td>");
                w.uint(i);
                w.copy(b"</td>");
            }
            w.with_out(|o| o.copy(b"|"));
            w.escaped(b"a<b");
            assert!(!w.is_empty());
        }
        let mut want = Vec::new();
        for i in 0..5_000u64 {
            want.extend_from_slice(format!("<td>{i}</td>").as_bytes());
        }
        want.extend_from_slice(b"|a&lt;b");
        assert_eq!(out.len(), want.len());
        assert_eq!(out.finish().to_vec(), want);
    }

    #[test]
    fn escapes_and_copies() {
        let mut out = Out::new(256, 0);
        out.escaped(b"a<b>&\"c'd plain text longer than eight");
        out.int(-42);
        out.uint(7);
        for v in [10, 99, 100, 999, 1000, 2015, 9999, 10_000, u64::MAX] {
            out.copy(b",");
            out.uint(v);
        }
        assert_eq!(
            out.finish().to_vec(),
            b"a&lt;b&gt;&amp;&quot;c&#39;d plain text longer than eight-427,10,99,100,999,1000,2015,9999,10000,18446744073709551615"
        );
    }

    #[test]
    fn long_clean_runs_are_referenced() {
        let long = Bytes::from(format!("{}&{}", "x".repeat(300), "y".repeat(10)));
        let mut want = b"<p>".to_vec();
        want.extend_from_slice(format!("{}&amp;{}", "x".repeat(300), "y".repeat(10)).as_bytes());
        // Under the default value threshold (4 KiB) the value is copied, as the engine copies it.
        let mut out = Out::new(256, 0);
        out.copy(b"<p>");
        out.escaped_shared(&long);
        let list = out.finish();
        assert!(
            list.segments().all(|s| s.as_ptr() != long.as_ptr()),
            "copied"
        );
        assert_eq!(list.to_vec(), want);
        // From the threshold up, a clean run is a slice of the value.
        let mut out = Out::new(256, 0).with_value_copy_below(256);
        out.copy(b"<p>");
        out.escaped_shared(&long);
        let list = out.finish();
        let segs: Vec<&[u8]> = list.segments().collect();
        assert_eq!(segs[1].as_ptr(), long.as_ptr(), "the clean run is a slice");
        assert_eq!(list.to_vec(), want);
    }

    #[test]
    fn full_buffers_become_segments_and_statics_stay_referenced() {
        static BIG: [u8; 300] = [b'z'; 300];
        let mut out = Out::new(256, 0);
        for _ in 0..10_000 {
            out.copy(b"<td>1</td>");
        }
        out.push_static(&BIG);
        let list = out.finish();
        assert_eq!(list.len(), 100_300);
        let last = list.segments().last().unwrap();
        assert_eq!(last.as_ptr(), BIG.as_ptr());
        assert!(list.segment_count() < 20);
    }
}
