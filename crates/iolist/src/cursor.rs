//! [`ByteCursor`]: appends to a `Vec<u8>` with the write position in a field of its own, so a
//! writer kept in locals keeps it in a register (stores through the `Vec` cannot clobber it).
//!
//! One of the workspace's five files with `unsafe`: each block has a `// SAFETY:` comment, and a
//! proptest holds the cursor to `extend_from_slice`.

/// An owned `Vec<u8>` being appended to. The bytes written are in the `Vec`'s spare capacity
/// until [`ByteCursor::into_vec`] commits the length: used by the compiled templates' writer,
/// whose many small constant-size copies would otherwise reload and store the `Vec`'s length
/// around every one.
///
/// # Examples
/// ```
/// use galleon_iolist::ByteCursor;
///
/// let mut c = ByteCursor::new(b"<td>".to_vec());
/// c.push(b"42");
/// c.push(b"</td>");
/// assert_eq!(c.len(), 11);
/// assert_eq!(c.into_vec(), b"<td>42</td>");
/// ```
#[derive(Debug, Default)]
pub struct ByteCursor {
    vec: Vec<u8>,
    /// Bytes written: `vec.len() <= len <= vec.capacity()`, all initialized.
    len: usize,
}

impl ByteCursor {
    /// A cursor appending after `vec`'s bytes.
    #[inline(always)]
    pub fn new(vec: Vec<u8>) -> ByteCursor {
        let len = vec.len();
        ByteCursor { vec, len }
    }

    /// Bytes in the buffer, written before and through the cursor.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds nothing.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes that can be pushed without growing the buffer.
    #[inline(always)]
    pub fn spare(&self) -> usize {
        self.vec.capacity() - self.len
    }

    /// Appends `s`, growing the buffer (like `Vec::reserve`) when it does not fit.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn push(&mut self, s: &[u8]) {
        if s.len() > self.spare() {
            *self = std::mem::take(self).grown(s.len());
        }
        // SAFETY: `len <= capacity` and `s.len() <= capacity - len` (checked or grown just
        // above), so the destination is inside the `Vec`'s allocation; `s` is borrowed shared
        // while `self.vec` is owned here, so the two do not overlap. The bytes past `vec.len()`
        // are only read after `commit` marks them initialized, which they now are.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), self.vec.as_mut_ptr().add(self.len), s.len());
        }
        self.len += s.len();
    }

    /// Appends `s`, whose length is not known at compile time (an escaped string's clean run):
    /// from 4 to 16 bytes as two overlapping word stores, where [`ByteCursor::push`] would call
    /// `memcpy`; other lengths as `push`.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn push_short(&mut self, s: &[u8]) {
        let n = s.len();
        if !(4..=16).contains(&n) || n > self.spare() {
            return self.push(s);
        }
        let dst = self.vec.as_mut_ptr().wrapping_add(self.len);
        if n >= 8 {
            let head = u64::from_le_bytes(s[..8].try_into().expect("eight bytes"));
            let tail = u64::from_le_bytes(s[n - 8..].try_into().expect("eight bytes"));
            // SAFETY: `8 <= n <= capacity - len` (checked above), so both eight-byte stores,
            // at `len` and at `len + n - 8`, are inside the `Vec`'s allocation; unaligned
            // stores need no alignment. Together they write every byte from `len` to `len + n`
            // (the overlap twice, with the same byte of `s`), so the bytes are initialized
            // when `commit` counts them.
            unsafe {
                dst.cast::<u64>().write_unaligned(head.to_le());
                dst.add(n - 8).cast::<u64>().write_unaligned(tail.to_le());
            }
        } else {
            let head = u32::from_le_bytes(s[..4].try_into().expect("four bytes"));
            let tail = u32::from_le_bytes(s[n - 4..].try_into().expect("four bytes"));
            // SAFETY: as above with four-byte stores: `4 <= n <= capacity - len`.
            unsafe {
                dst.cast::<u32>().write_unaligned(head.to_le());
                dst.add(n - 4).cast::<u32>().write_unaligned(tail.to_le());
            }
        }
        self.len += n;
    }

    /// The cursor with room for `n` more bytes (taken and returned by value so that a caller
    /// keeping the cursor in locals does not hand out its address).
    #[cold]
    #[inline(never)]
    fn grown(mut self, n: usize) -> ByteCursor {
        self.commit();
        self.vec.reserve(n);
        self
    }

    /// Marks the bytes written as the `Vec`'s own.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn commit(&mut self) {
        debug_assert!(self.len >= self.vec.len() && self.len <= self.vec.capacity());
        // SAFETY: `len <= capacity` (every push checks it) and the bytes up to `len` are
        // initialized: those below the `Vec`'s length were, and `push` wrote every byte from
        // there to `len` (the cursor only ever appends, with no gaps).
        unsafe { self.vec.set_len(self.len) }
    }

    /// The buffer, with every byte pushed.
    ///
    /// Made again from its parts rather than moved: a moved `Vec` is copied as a 16-byte
    /// (capacity, pointer) pair, and when those were stored one by one just before (a writer
    /// putting its cursor back), that wider load waits for the stores to reach the cache (a
    /// store-forwarding stall, ~2 ns on a compiled page; bench/results/templates.txt).
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn into_vec(self) -> Vec<u8> {
        let mut vec = std::mem::ManuallyDrop::new(self.vec);
        debug_assert!(self.len >= vec.len() && self.len <= vec.capacity());
        // SAFETY: the pointer and capacity are those of `vec`'s allocation, which is not
        // dropped (`ManuallyDrop`), so the new `Vec` owns it alone; `len <= capacity` and the
        // bytes up to `len` are initialized (see `commit`).
        unsafe { Vec::from_raw_parts(vec.as_mut_ptr(), self.len, vec.capacity()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn grows_past_capacity_and_keeps_earlier_bytes() {
        let mut c = ByteCursor::new(Vec::with_capacity(4));
        c.push(b"ab");
        c.push(b"cdefgh");
        c.push(b"");
        assert_eq!(c.len(), 8);
        assert!(c.spare() <= c.vec.capacity());
        assert_eq!(c.into_vec(), b"abcdefgh");
        assert!(ByteCursor::default().is_empty());
        assert_eq!(ByteCursor::default().into_vec(), b"");
    }

    #[test]
    fn into_vec_hands_back_the_same_allocation() {
        let mut v = Vec::with_capacity(100);
        v.extend_from_slice(b"<p>");
        let (ptr, cap) = (v.as_ptr(), v.capacity());
        let mut c = ByteCursor::new(v);
        c.push(b"hello");
        c.push_short(b"</p>");
        let v = c.into_vec();
        assert_eq!(
            (v.as_ptr(), v.capacity()),
            (ptr, cap),
            "no copy, no reallocation"
        );
        assert_eq!(v, b"<p>hello</p>");
        // Still an ordinary `Vec`: it grows and frees as one.
        let mut v = v;
        v.extend_from_slice(&[b'x'; 200]);
        assert_eq!(v.len(), 212);
    }

    #[test]
    fn short_pushes_write_every_length_exactly() {
        let text: Vec<u8> = (0..40u8).collect();
        for n in 0..=20 {
            for spare in 0..24 {
                let mut c = ByteCursor::new(b"ab".to_vec());
                c.vec.reserve_exact(spare);
                c.push_short(&text[3..3 + n]);
                c.push_short(b"xyz!");
                let mut want = b"ab".to_vec();
                want.extend_from_slice(&text[3..3 + n]);
                want.extend_from_slice(b"xyz!");
                assert_eq!(c.into_vec(), want, "n {n} spare {spare}");
            }
        }
    }

    proptest! {
        /// Any sequence of pushes (plain and short), from any starting buffer, leaves the
        /// bytes a plain `extend_from_slice` would.
        #[test]
        fn pushes_match_extend(
            start in proptest::collection::vec(any::<u8>(), 0..40),
            cap in 0usize..64,
            pieces in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..70), 0..40),
        ) {
            let mut v = start.clone();
            v.reserve(cap);
            let mut want = start;
            let mut c = ByteCursor::new(v);
            for (i, p) in pieces.iter().enumerate() {
                if i % 2 == 0 {
                    c.push(p);
                } else {
                    c.push_short(p);
                }
                want.extend_from_slice(p);
                prop_assert_eq!(c.len(), want.len());
            }
            prop_assert_eq!(c.into_vec(), want);
        }
    }
}
