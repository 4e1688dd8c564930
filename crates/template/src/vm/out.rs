//! Where a render's output goes: small pieces gathered in a buffer that becomes one segment,
//! long ones referenced; and how a value is written (escaped or not).

use bytes::Bytes;
use galleon_iolist::{IoList, escape_html_into, needs_escape};

use std::sync::Arc;

use crate::ops::describe;
use crate::program::Repeat;
use crate::scalar::write_scalar;
use crate::value::Value;

/// Size of the buffers small copies gather in, in bytes. A full buffer becomes a segment of the
/// list as it is (moved, not copied) and a fresh one is started. A guess: large enough that a
/// table is a few dozen segments and allocations, small enough that a stream chunk is many.
pub(super) const FLUSH_AT: usize = 4096;

/// A render's output: the list, with a buffer in front of it where small pieces (tags between
/// cells, digits) gather first, so a table cell costs three `memcpy`s, not three list pushes.
/// Everything that goes to the list by reference flushes the buffer first, so order is kept.
/// (Gathering cut a big-table render from 55.5 M to 38.6 M instructions under callgrind.)
pub(crate) struct Out<'o> {
    pub(super) list: &'o mut IoList,
    pub(super) buf: &'o mut Vec<u8>,
    pub(super) copy_below: usize,
    /// Capacity `buf` gets when it has none.
    pub(super) first_buf: usize,
}

impl Out<'_> {
    /// Bytes output so far (list plus buffer).
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.list.len() + self.buf.len()
    }

    /// Hands the buffered bytes to the list: a buffer of at least `copy_below` bytes is moved in
    /// whole (no copy) and replaced by a new one of `next` bytes; a shorter one is copied into the
    /// list's scratch, where it merges with its neighbours.
    pub(super) fn flush_with(&mut self, next: usize) {
        if self.buf.len() >= self.copy_below.max(1) {
            let full = std::mem::replace(self.buf, Vec::with_capacity(next));
            self.list.push_bytes(Bytes::from(full));
        } else if !self.buf.is_empty() {
            self.list.push_copy(self.buf);
            self.buf.clear();
        }
    }

    /// Flush before a reference, the render going on. Inline for the common case of nothing to
    /// flush (a run of referenced pieces, such as a loop over static text).
    #[inline]
    pub(super) fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.flush_with(FLUSH_AT);
        }
    }

    /// Flush at the end of a render or chunk.
    pub(super) fn finish(&mut self) {
        self.flush_with(0);
    }

    /// Copies a small piece.
    #[inline]
    pub(super) fn copy(&mut self, s: &[u8]) {
        if self.buf.len() + s.len() > self.buf.capacity() {
            if self.buf.capacity() == 0 {
                self.buf.reserve(self.first_buf);
            } else if self.buf.len() >= FLUSH_AT / 2 {
                self.flush();
            }
        }
        self.buf.extend_from_slice(s);
    }

    /// Shared bytes: referenced when at least `copy_below` long, copied otherwise. Static text
    /// lies inside a pinned program text and costs no reference count (see [`Vm::run`]); other
    /// bytes (a string assign) are cloned.
    #[inline]
    pub(super) fn text(&mut self, b: &Bytes) {
        if b.len() >= self.copy_below {
            self.flush();
            self.list.push_shared(b);
        } else {
            self.copy(b);
        }
    }

    /// Shared bytes, HTML-escaped: short strings are escaped into the buffer; long ones become
    /// references to their clean runs.
    pub(super) fn escaped(&mut self, b: &Bytes) {
        if b.len() >= self.copy_below {
            self.flush();
            escape_html_into(self.list, b, self.copy_below);
        } else if !needs_escape(b) {
            self.copy(b);
        } else {
            for &c in b.iter() {
                match c {
                    b'&' => self.copy(b"&amp;"),
                    b'<' => self.copy(b"&lt;"),
                    b'>' => self.copy(b"&gt;"),
                    b'"' => self.copy(b"&quot;"),
                    b'\'' => self.copy(b"&#39;"),
                    c => self.copy(&[c]),
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
                self.list.push_shared_range(&rep.block, 0..len);
            } else {
                self.copy(&rep.block[..len]);
            }
            done += k;
        }
        done
    }

    /// Already-rendered HTML.
    pub(super) fn html(&mut self, html: &Arc<IoList>) {
        self.flush();
        if html.len() < self.copy_below {
            self.list.append(html);
        } else {
            self.list.push_shared_list(Arc::clone(html));
        }
    }
}

/// Appends a value's output: escaped (unless `escape` is false or it is already safe HTML),
/// referenced when at least `copy_below` bytes long, copied otherwise.
pub(crate) fn emit(out: &mut Out<'_>, v: &Value, escape: bool) -> Result<(), String> {
    match v {
        Value::Nil => {}
        Value::Int(i) => out.copy(itoa::Buffer::new().format(*i).as_bytes()),
        Value::Str(s) | Value::Atom(s) if escape => out.escaped(s.bytes()),
        Value::Str(s) | Value::Atom(s) => out.text(s.bytes()),
        Value::Safe(html) => out.html(html),
        Value::Bool(_) | Value::Float(_) => {
            let mut buf = Vec::new();
            write_scalar(v, false, &mut buf);
            out.copy(&buf);
        }
        Value::List(items) => {
            // Phoenix's rule for lists (iodata): strings and nested lists in order, safe HTML as
            // is, integers 0..=255 as bytes.
            for item in items.iter() {
                match item {
                    Value::Int(b @ 0..=255) => {
                        let b = *b as u8;
                        if escape {
                            out.escaped(&Bytes::copy_from_slice(&[b]));
                        } else {
                            out.copy(&[b]);
                        }
                    }
                    Value::Str(_) | Value::Safe(_) | Value::List(_) => emit(out, item, escape)?,
                    other => {
                        return Err(format!(
                            "cannot output a list holding {} (lists output strings, safe HTML and bytes)",
                            describe(other)
                        ));
                    }
                }
            }
        }
        Value::Map(_) | Value::Tuple(_) => {
            return Err(format!(
                "cannot output a {} (iterate it with `for`, or pick an element)",
                v.type_name()
            ));
        }
    }
    Ok(())
}
