//! HTML escaping into an [`IoList`] that references the input instead of copying it.
//!
//! The escaped characters are those Phoenix escapes: `&` `<` `>` `"` `'`. Runs of input that need
//! no escaping are referenced (a slice of the input [`Bytes`], or of the `'static` input); the
//! entities are `'static` segments. With a `min_ref` above zero, runs and entities shorter than it
//! are copied into the list's scratch buffer instead, so that many short pieces do not become many
//! iovecs.

use std::ops::Range;

use bytes::Bytes;

use crate::list::IoList;

/// The entity for each byte, or `None` when the byte stands for itself.
const fn entity(b: u8) -> Option<&'static [u8]> {
    match b {
        b'&' => Some(b"&amp;"),
        b'<' => Some(b"&lt;"),
        b'>' => Some(b"&gt;"),
        b'"' => Some(b"&quot;"),
        b'\'' => Some(b"&#39;"),
        _ => None,
    }
}

const NEEDS: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = entity(i as u8).is_some();
        i += 1;
    }
    t
};

/// True when `s` holds a byte that HTML escaping would change.
pub fn needs_escape(s: &[u8]) -> bool {
    s.iter().any(|&b| NEEDS[b as usize])
}

/// A piece of escaped output.
enum Piece {
    /// A range of the input that needs no escaping.
    Run(Range<usize>),
    /// The entity replacing one input byte.
    Entity(&'static [u8]),
}

/// Calls `f` for each maximal run needing no escape and for each entity, in order.
fn scan(s: &[u8], mut f: impl FnMut(Piece)) {
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        if NEEDS[b as usize] {
            if start < i {
                f(Piece::Run(start..i));
            }
            // NEEDS and entity agree by construction.
            if let Some(e) = entity(b) {
                f(Piece::Entity(e));
            }
            start = i + 1;
        }
    }
    if start < s.len() {
        f(Piece::Run(start..s.len()));
    }
}

/// Escapes `src` into a new list: unescaped runs are slices of `src` (no copy), entities static.
pub fn escape_html(src: &Bytes) -> IoList {
    let mut out = IoList::new();
    escape_html_into(&mut out, src, 0);
    out
}

/// Escapes `src` onto `out`. Runs of at least `min_ref` bytes are slices of `src` (no copy);
/// shorter runs and entities are copied into `out`'s scratch buffer when `min_ref > 0`.
pub fn escape_html_into(out: &mut IoList, src: &Bytes, min_ref: usize) {
    scan(src, |p| match p {
        Piece::Run(r) if r.len() >= min_ref => out.push_bytes(src.slice(r)),
        Piece::Run(r) => out.push_copy(&src[r]),
        Piece::Entity(e) => out.push_static_or_copy(e, min_ref),
    });
}

/// Escapes a `'static` input onto `out`, referencing runs of at least `min_ref` bytes.
pub fn escape_html_static_into(out: &mut IoList, src: &'static [u8], min_ref: usize) {
    scan(src, |p| match p {
        Piece::Run(r) => out.push_static_or_copy(&src[r], min_ref),
        Piece::Entity(e) => out.push_static_or_copy(e, min_ref),
    });
}

/// Escapes a borrowed input onto `out` by copying it (escaped) into `out`'s scratch buffer. For
/// values that do not outlive the render (a formatted number, a temporary string).
pub fn escape_html_copy_into(out: &mut IoList, src: &[u8]) {
    scan(src, |p| match p {
        Piece::Run(r) => out.push_copy(&src[r]),
        Piece::Entity(e) => out.push_copy(e),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_the_five_characters() {
        let b = Bytes::from_static(b"a<b>&\"c'd");
        assert_eq!(
            &escape_html(&b).to_bytes()[..],
            b"a&lt;b&gt;&amp;&quot;c&#39;d"
        );
    }

    #[test]
    fn clean_input_is_one_reference() {
        let b = Bytes::from(vec![b'x'; 300]);
        let l = escape_html(&b);
        assert_eq!(l.segment_count(), 1);
        assert_eq!(l.segments().next().unwrap().as_ptr(), b.as_ptr());
        assert_eq!(l.scratch_len(), 0);
    }

    #[test]
    fn runs_reference_the_input() {
        let b = Bytes::from("hello & goodbye".to_string());
        let l = escape_html(&b);
        let segs: Vec<&[u8]> = l.segments().collect();
        assert_eq!(segs.len(), 3);
        assert_eq!(segs[0].as_ptr(), b.as_ptr());
        assert_eq!(segs[2].as_ptr(), b[7..].as_ptr());
        assert_eq!(l.scratch_len(), 0);
    }

    #[test]
    fn min_ref_copies_short_pieces_together() {
        let b = Bytes::from("a<b".to_string());
        let mut l = IoList::new();
        escape_html_into(&mut l, &b, 64);
        assert_eq!(l.segment_count(), 1);
        assert_eq!(&l.to_bytes()[..], b"a&lt;b");
    }
}
