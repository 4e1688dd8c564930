//! Where a render's output goes: small pieces gathered in a buffer that becomes one segment,
//! long ones referenced; and how a value is written (escaped or not).
//!
//! Static text under `copy_below` and values' strings and safe HTML under `value_copy_below` (4 KiB
//! by default) are copied into the buffer, longer ones referenced; integers are written in place.
//! The list pins a program's text at its first reference, once per render, so a static reference
//! costs no reference count (a value's costs one) and a page of copies only pins nothing.

use bytes::Bytes;
use galleon_iolist::{IoList, escape_html_into};
use smallvec::SmallVec;

use std::sync::Arc;

use crate::float::write_float;
use crate::ops::describe;
use crate::program::Repeat;
use crate::value::{Value, word8};

/// Size of the buffers small copies gather in, in bytes. A full buffer becomes a segment of the
/// list as it is (moved, not copied) and a fresh one is started. A guess: large enough that a
/// table is a few dozen segments and allocations, small enough that a stream chunk is many.
pub(super) const FLUSH_AT: usize = 4096;

/// Most bytes an integer takes in decimal (`i64::MIN`).
pub(super) const MAX_INT_LEN: usize = 20;

/// The decimal digits of 0 to 99, two bytes each: integers are written two digits at a time.
static DIGITS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// A render's output: the list, with a buffer in front of it where small pieces (tags between
/// cells, digits) gather first, so a table cell costs a few register moves, not list pushes.
/// Everything that goes to the list by reference flushes the buffer first, so order is kept.
///
/// The buffer is written by position: `buf[..pos]` is output, the rest of `buf` zeroed room,
/// so a piece is copied with fixed-size moves into room checked once (no `memcpy` call, no
/// `unsafe`), and an integer is written digit pairs in place.
pub(crate) struct Out<'o> {
    pub(super) list: &'o mut IoList,
    buf: &'o mut Vec<u8>,
    pos: usize,
    copy_below: usize,
    /// Strings and safe HTML from values shorter than this are copied.
    value_copy_below: usize,
    /// Capacity `buf` gets when it has none.
    first_buf: usize,
    /// Program texts to pin in the list before the first reference (see `Vm::run`).
    unpinned: SmallVec<[&'o Bytes; 2]>,
}

/// Copies `src` into `dst` (of the same length) with at most two fixed-size moves for pieces of
/// up to 64 bytes, overlapping when the length is not a power of two, instead of a `memcpy`
/// call sized at run time (a page's static lines run to 40 or 50 bytes).
#[inline(always)]
pub(super) fn copy_into(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n > 64 || dst.len() != n {
        dst.copy_from_slice(src);
    } else if n > 32 {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
    } else if n >= 16 {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..].copy_from_slice(&src[n - 16..]);
    } else if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..].copy_from_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..].copy_from_slice(&src[n - 4..]);
    } else if n > 0 {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

/// True when HTML escaping leaves `s` as it is (no `&` `<` `>` `"` `'`, the bytes
/// `galleon_iolist::needs_escape` looks for). Eight bytes at a time, without early exit: a
/// short string (a name, a title) is a word or two of arithmetic, not a loop over its bytes.
#[inline(always)]
pub(super) fn clean(s: &[u8]) -> bool {
    // Up to eight bytes (a name, a word): one word of them; up to sixteen, two overlapping
    // words (each tested on its own: OR-ing two clean bytes can make a special one).
    if s.len() <= 8 {
        return specials(word8(s)) == 0;
    }
    if s.len() <= 16
        && let (Some(h), Some(l)) = (s.first_chunk::<8>(), s.last_chunk::<8>())
    {
        return (specials(u64::from_le_bytes(*h)) | specials(u64::from_le_bytes(*l))) == 0;
    }
    let mut chunks = s.chunks_exact(8);
    let mut dirty = 0;
    for c in &mut chunks {
        if let Ok(w) = <[u8; 8]>::try_from(c) {
            dirty |= specials(u64::from_le_bytes(w));
        }
    }
    // The last bytes, as a word of them and zeros (repeats and zeros match nothing new):
    // overlapping loads rather than a copy sized at run time.
    let rest = chunks.remainder();
    let n = rest.len();
    let last = if n == 0 {
        0
    } else if let Some(w) = s.last_chunk::<8>() {
        u64::from_le_bytes(*w)
    } else if let (Some(h), Some(l)) = (rest.first_chunk::<4>(), rest.last_chunk::<4>()) {
        u64::from(u32::from_le_bytes(*h)) | u64::from(u32::from_le_bytes(*l)) << 32
    } else {
        u64::from(rest[0]) | u64::from(rest[n / 2]) << 8 | u64::from(rest[n - 1]) << 16
    };
    (dirty | specials(last)) == 0
}

/// The entity `Out::escaped` writes for byte `c`, or `None` for a byte written as it is.
#[inline(always)]
fn entity(c: u8) -> Option<&'static [u8]> {
    Some(match c {
        b'&' => b"&amp;",
        b'<' => b"&lt;",
        b'>' => b"&gt;",
        b'"' => b"&quot;",
        b'\'' => b"&#39;",
        _ => return None,
    })
}

/// Bytes of `s` HTML-escaped.
pub(super) fn escaped_len(s: &[u8]) -> usize {
    s.iter().map(|&c| entity(c).map_or(1, <[u8]>::len)).sum()
}

/// Writes `s` HTML-escaped into `dst`, of [`escaped_len`] bytes.
pub(super) fn write_escaped(dst: &mut [u8], s: &[u8]) {
    let mut at = 0;
    for &c in s {
        match entity(c) {
            Some(e) => {
                dst[at..at + e.len()].copy_from_slice(e);
                at += e.len();
            }
            None => {
                dst[at] = c;
                at += 1;
            }
        }
    }
}

/// Non-zero when a byte of `w` is `"` (0x22), `&` (0x26), `'` (0x27), `<` (0x3C) or `>`
/// (0x3E): three exact zero-byte tests, on `w`, `w | 1` and `w | 2` against 0x22, 0x27, 0x3E.
#[inline(always)]
fn specials(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    zero(w ^ (0x22 * ONES))
        | zero((w | ONES) ^ (0x27 * ONES))
        | zero((w | (2 * ONES)) ^ (0x3E * ONES))
}

/// Writes `v` in decimal at the start of `dst` (at least [`MAX_INT_LEN`] bytes); returns its
/// length. Two digits per division, from a table.
#[inline(always)]
fn write_u64(dst: &mut [u8], mut v: u64) -> usize {
    if v < 10 {
        dst[0] = b'0' + v as u8;
        return 1;
    }
    if v < 100 {
        dst[..2].copy_from_slice(&DIGITS[v as usize]);
        return 2;
    }
    let len = v.ilog10() as usize + 1;
    let dst = &mut dst[..len];
    let mut end = len;
    while v >= 100 {
        let pair = (v % 100) as usize;
        v /= 100;
        end -= 2;
        dst[end..end + 2].copy_from_slice(&DIGITS[pair]);
    }
    if v >= 10 {
        dst[..2].copy_from_slice(&DIGITS[v as usize]);
    } else {
        dst[0] = b'0' + v as u8;
    }
    len
}

/// Writes `i` in decimal at the start of `dst` (at least [`MAX_INT_LEN`] bytes); returns its
/// length.
#[inline(always)]
pub(super) fn write_int(dst: &mut [u8], i: i64) -> usize {
    if i >= 0 {
        write_u64(dst, i as u64)
    } else {
        dst[0] = b'-';
        1 + write_u64(&mut dst[1..], i.unsigned_abs())
    }
}

/// [`write_int`], with three- and four-digit integers (years, counts) as digit pairs rather
/// than through the general loop: for integers output one at a time. (The plain loop's
/// batches, one integer after another, keep [`write_int`], whose code is smaller.)
#[inline(always)]
fn write_int_wide(dst: &mut [u8], i: i64) -> usize {
    if (100..10_000).contains(&i) {
        let (hi, lo) = ((i / 100) as usize, (i % 100) as usize);
        if hi < 10 {
            dst[0] = b'0' + hi as u8;
            dst[1..3].copy_from_slice(&DIGITS[lo]);
            return 3;
        }
        dst[..2].copy_from_slice(&DIGITS[hi]);
        dst[2..4].copy_from_slice(&DIGITS[lo]);
        return 4;
    }
    write_int(dst, i)
}

impl<'o> Out<'o> {
    /// An output into `list`, gathering small pieces in `buf` (whose contents are overwritten).
    pub(super) fn new(
        list: &'o mut IoList,
        buf: &'o mut Vec<u8>,
        copy_below: usize,
        value_copy_below: usize,
        first_buf: usize,
    ) -> Out<'o> {
        Out {
            list,
            buf,
            pos: 0,
            copy_below,
            value_copy_below,
            first_buf,
            unpinned: SmallVec::new(),
        }
    }

    /// Pins `text` in the list before anything is referenced (not at all if nothing is).
    pub(super) fn pin_later(&mut self, text: &'o Bytes) {
        self.unpinned.push(text);
    }

    /// Pins the texts waiting to be, before a reference.
    #[inline(always)]
    fn pin_waiting(&mut self) {
        if !self.unpinned.is_empty() {
            self.pin_now();
        }
    }

    #[cold]
    #[inline(never)]
    fn pin_now(&mut self) {
        for text in self.unpinned.drain(..) {
            self.list.pin(text);
        }
    }

    /// Bytes output so far (list plus buffer).
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.list.len() + self.pos
    }

    /// Hands the buffered bytes to the list: a buffer of at least `copy_below` bytes is moved in
    /// whole (no copy) and replaced by a new one of `next` bytes; a shorter one is copied into the
    /// list's scratch, where it merges with its neighbours.
    pub(super) fn flush_with(&mut self, next: usize) {
        if self.pos >= self.copy_below.max(1) {
            let mut full = std::mem::replace(self.buf, Vec::with_capacity(next));
            full.truncate(self.pos);
            self.list.push_bytes(Bytes::from(full));
        } else if self.pos > 0 {
            self.list.push_copy(&self.buf[..self.pos]);
        }
        self.pos = 0;
    }

    /// Flush before a reference, the render going on. Inline for the common case of nothing to
    /// flush (a run of referenced pieces, such as a loop over static text).
    #[inline]
    pub(super) fn flush(&mut self) {
        if self.pos > 0 {
            self.flush_with(FLUSH_AT);
        }
    }

    /// Flush at the end of a render or chunk: nothing is pushed after it, so a buffer of at
    /// least `copy_below` bytes goes to the list as it is ([`IoList::push_vec`]: adopted as the
    /// list's scratch when that is empty, so a page of copies only makes no segment table and
    /// no shared header for its bytes).
    pub(super) fn finish(&mut self) {
        if self.pos >= self.copy_below.max(1) {
            let mut full = std::mem::take(self.buf);
            full.truncate(self.pos);
            self.list.push_vec(full);
            self.pos = 0;
        } else {
            self.flush_with(0);
        }
    }

    /// Room for `n` more bytes at `pos`: the room `buf[pos..pos + n]` that the caller then fills.
    #[inline(always)]
    fn room(&mut self, n: usize) -> &mut [u8] {
        if n > self.buf.len() - self.pos {
            self.grow(n);
        }
        &mut self.buf[self.pos..self.pos + n]
    }

    /// Room for `n` more bytes, made as a piece of `n` bytes would get it.
    #[inline]
    pub(super) fn reserve(&mut self, n: usize) {
        if n > self.buf.len() - self.pos {
            self.grow(n);
        }
    }

    /// Makes room for `n` bytes, as the buffer always has: the first copy allocates `first_buf`
    /// bytes; a buffer at least half of [`FLUSH_AT`] full that has no room is flushed; a
    /// shorter one grows. The room is zeroed once, when it is made.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        if self.buf.capacity() == 0 {
            // Allocated at its size (no growth arithmetic), zeroed below.
            *self.buf = Vec::with_capacity(self.first_buf.max(n));
        } else if self.pos + n > self.buf.capacity() && self.pos >= FLUSH_AT / 2 {
            self.flush();
        }
        if self.pos + n > self.buf.capacity() {
            // Doubling, as `Vec` grows (only the bytes before `pos` are kept).
            self.buf.truncate(self.pos);
            self.buf
                .reserve((self.pos + n).max(2 * self.buf.capacity()) - self.pos);
        }
        let cap = self.buf.capacity();
        self.buf.resize(cap, 0);
    }

    /// The buffer and the position in it, for a writer that keeps both in registers
    /// (`vm/plain.rs`); it hands the position back with [`Out::set_pos`] before any other call.
    #[inline(always)]
    pub(super) fn cursor(&mut self) -> (&mut [u8], usize) {
        (&mut self.buf[..], self.pos)
    }

    /// Where the next byte goes: after the bytes a [`Out::cursor`] writer put in the buffer.
    #[inline(always)]
    pub(super) fn set_pos(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// Pieces at least this long are referenced, shorter ones copied.
    #[inline(always)]
    pub(super) fn copy_below(&self) -> usize {
        self.copy_below
    }

    /// Values' strings and safe HTML at least this long are referenced, shorter ones copied.
    #[inline(always)]
    pub(super) fn value_copy_below(&self) -> usize {
        self.value_copy_below
    }

    /// Copies a small piece.
    #[inline(always)]
    pub(super) fn copy(&mut self, s: &[u8]) {
        let n = s.len();
        copy_into(self.room(n), s);
        self.pos += n;
    }

    /// An integer, written in place.
    #[inline(always)]
    pub(super) fn int(&mut self, i: i64) {
        self.pos += write_int_wide(self.room(MAX_INT_LEN), i);
    }

    /// Shared bytes: referenced when at least `copy_below` long, copied otherwise. Static text
    /// lies inside a pinned program text and costs no reference count (see [`Vm::run`]); other
    /// bytes (a string assign) are cloned.
    ///
    /// [`Vm::run`]: super::Vm::run
    #[inline(always)]
    pub(super) fn text(&mut self, b: &Bytes) {
        if b.len() >= self.copy_below {
            self.reference(b);
        } else {
            self.copy(b);
        }
    }

    /// Shared bytes by reference, after the buffered ones.
    #[inline(never)]
    fn reference(&mut self, b: &Bytes) {
        self.flush();
        self.pin_waiting();
        self.list.push_shared(b);
    }

    /// A value's string as is: referenced when at least `value_copy_below` long, else copied.
    #[inline(always)]
    pub(super) fn value_text(&mut self, b: &Bytes) {
        if b.len() >= self.value_copy_below {
            self.reference(b);
        } else {
            self.copy(b);
        }
    }

    /// A value's string, HTML-escaped: short strings (under `value_copy_below`) are escaped into
    /// the buffer; long ones become references to their clean runs.
    pub(super) fn escaped(&mut self, b: &Bytes) {
        if b.len() >= self.value_copy_below {
            self.flush();
            escape_html_into(self.list, b, self.value_copy_below);
        } else if clean(b) {
            self.copy(b);
        } else {
            for &c in b.iter() {
                match entity(c) {
                    Some(e) => self.copy(e),
                    None => self.copy(&[c]),
                }
            }
        }
    }

    /// Outputs `rep`'s body up to `n` times, in references to its block, stopping early once
    /// the output holds `pause_at` bytes. Returns how many times it was output.
    pub(super) fn repeat(&mut self, rep: &Repeat, n: u64, pause_at: usize) -> u64 {
        let per_block = (rep.block.len() / rep.unit) as u64;
        let mut done = 0;
        while done < n && self.len() < pause_at {
            // No further than the iteration that reaches `pause_at`, where the loop run one
            // iteration at a time would have paused: chunks keep their size and step budget.
            let to_pause = (pause_at - self.len()).div_ceil(rep.unit) as u64;
            let k = per_block.min(n - done).min(to_pause);
            // A prefix of the block, by reference to the pinned text: no slice is made.
            let len = k as usize * rep.unit;
            if len >= self.copy_below {
                self.flush();
                self.pin_waiting();
                self.list.push_shared_range(&rep.block, 0..len);
            } else {
                self.copy(&rep.block[..len]);
            }
            done += k;
        }
        done
    }

    /// Already-rendered HTML: copied under `value_copy_below` bytes (no reference count on
    /// the value, no segment), referenced as a nested list from there up.
    pub(super) fn html(&mut self, html: &Arc<IoList>) {
        if html.len() < self.value_copy_below {
            for s in html.segments() {
                self.copy(s);
            }
        } else {
            self.flush();
            self.list.push_shared_list(Arc::clone(html));
        }
    }
}

/// Appends a value's output: escaped (unless `escape` is false or it is already safe HTML),
/// referenced when at least `copy_below` bytes long, copied otherwise.
#[inline]
pub(crate) fn emit(out: &mut Out<'_>, v: &Value, escape: bool) -> Result<(), String> {
    match v {
        Value::Int(i) => out.int(*i),
        Value::Str(s) | Value::Atom(s) if escape => out.escaped(s.bytes()),
        Value::Str(s) | Value::Atom(s) => out.value_text(s.bytes()),
        Value::Nil => {}
        _ => return emit_other(out, v, escape),
    }
    Ok(())
}

/// [`emit`] of the rarer kinds of value, out of line.
#[inline(never)]
fn emit_other(out: &mut Out<'_>, v: &Value, escape: bool) -> Result<(), String> {
    match v {
        Value::Nil => {}
        Value::Int(i) => out.int(*i),
        Value::Str(s) | Value::Atom(s) if escape => out.escaped(s.bytes()),
        Value::Str(s) | Value::Atom(s) => out.value_text(s.bytes()),
        Value::Safe(html) => out.html(html),
        Value::Bool(b) => out.copy(if *b { b"true" } else { b"false" }),
        Value::Float(x) => {
            let mut buf = Vec::new();
            write_float(*x, &mut buf);
            out.copy(&buf);
        }
        Value::List(items) => emit_list(out, items, escape)?,
        Value::Map(_) | Value::Tuple(_) => {
            return Err(format!(
                "cannot output a {} (iterate it with `for`, or pick an element)",
                v.type_name()
            ));
        }
        Value::Regex(_) => return Err(crate::ops::REGEX_OUTPUT.to_owned()),
    }
    Ok(())
}

/// A list (iodata), by Phoenix's rule: strings and nested lists in order, safe HTML as is,
/// integers 0..=255 as bytes. The lists being output are an explicit stack, so a deeply nested
/// one needs no thread stack (an unoptimized build's `emit` frame is about 10 KB).
#[inline(never)]
fn emit_list(out: &mut Out<'_>, items: &[Value], escape: bool) -> Result<(), String> {
    let mut stack: Vec<std::slice::Iter<'_, Value>> = vec![items.iter()];
    while let Some(top) = stack.last_mut() {
        let Some(item) = top.next() else {
            stack.pop();
            continue;
        };
        match item {
            Value::Int(b @ 0..=255) => {
                let b = *b as u8;
                if escape {
                    out.escaped(&Bytes::copy_from_slice(&[b]));
                } else {
                    out.copy(&[b]);
                }
            }
            Value::List(l) => stack.push(l.iter()),
            Value::Str(_) | Value::Safe(_) => emit(out, item, escape)?,
            other => {
                return Err(format!(
                    "cannot output a list holding {} (lists output strings, safe HTML and bytes)",
                    describe(other)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_rust_writes_them() {
        let mut list = IoList::new();
        let mut buf = Vec::new();
        let mut out = Out::new(&mut list, &mut buf, 256, 256, 0);
        let mut want = Vec::new();
        let mut ints = vec![
            0,
            9,
            10,
            99,
            100,
            999,
            1000,
            12345,
            i64::MAX,
            i64::MIN,
            -1,
            -99,
        ];
        ints.extend((0..64).map(|s| 1i64 << s));
        ints.extend((1..19).map(|e| 10i64.pow(e) - 1));
        ints.extend((1..19).map(|e| 10i64.pow(e)));
        for i in ints {
            out.int(i);
            out.int(-i.saturating_abs());
            want.extend_from_slice(format!("{i}{}", -i.saturating_abs()).as_bytes());
        }
        out.finish();
        drop(out);
        assert_eq!(list.to_vec(), want);
    }

    #[test]
    fn escaping_in_place_writes_what_the_buffer_escapes() {
        for s in [
            "",
            "plain",
            "O'Brien & <Co> \"x\"",
            "&&&",
            "a<",
            "\u{e9}t\u{e9}'",
        ] {
            let mut list = IoList::new();
            let mut buf = Vec::new();
            let mut out = Out::new(&mut list, &mut buf, 256, 256, 0);
            out.escaped(&Bytes::copy_from_slice(s.as_bytes()));
            out.finish();
            drop(out);
            let mut dst = vec![0; escaped_len(s.as_bytes())];
            write_escaped(&mut dst, s.as_bytes());
            assert_eq!(dst, list.to_vec(), "{s}");
        }
    }

    #[test]
    fn clean_finds_exactly_the_escaped_bytes() {
        for b in 0..=255u8 {
            let special = matches!(b, b'&' | b'<' | b'>' | b'"' | b'\'');
            for len in 1..20 {
                for at in 0..len {
                    let mut s = vec![b'a'; len];
                    s[at] = b;
                    assert_eq!(clean(&s), !special, "{b:#x} at {at} of {len}");
                }
            }
        }
        assert!(clean(b""));
    }

    #[test]
    fn pieces_of_every_short_length_copy_exactly() {
        let src: Vec<u8> = (0..=255u8).collect();
        let mut list = IoList::new();
        let mut buf = Vec::new();
        let mut out = Out::new(&mut list, &mut buf, usize::MAX, usize::MAX, 0);
        let mut want = Vec::new();
        for n in 0..=80 {
            out.copy(&src[..n]);
            want.extend_from_slice(&src[..n]);
        }
        out.finish();
        drop(out);
        assert_eq!(list.to_vec(), want);
    }
}
