//! Unit tests of [`IoList`]'s building and walking.

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

#[test]
fn a_list_of_copies_only_keeps_no_table_and_walks_alike() {
    let mut l = IoList::new();
    l.push_copy(b"<p>");
    l.push_copy_with(|b| b.push(b"one"));
    l.push_vec(Vec::new());
    assert_eq!(l.segs.capacity(), 0, "no segment table for copies only");
    assert_eq!(l.segment_count(), 1);
    assert_eq!(l.segments().collect::<Vec<_>>(), [b"<p>one".as_slice()]);
    assert_eq!(
        l.segments_with_kind().collect::<Vec<_>>(),
        [(SegmentKind::Scratch, b"<p>one".as_slice())]
    );
    let mut copy = IoList::new();
    copy.append(&l);
    copy.push_copy(b"!");
    assert_eq!(copy.to_vec(), b"<p>one!");
    assert_eq!(copy.segment_count(), 1);

    // A reference after copies: the copies become the first segment, in order.
    l.push_static(b"<b>");
    l.push_copy(b"two");
    assert_eq!(l.segment_count(), 3);
    assert_eq!(l.to_vec(), b"<p>one<b>two");
    assert_eq!(l.len(), 12);
    let mut nested = IoList::new();
    nested.push_shared_list(Arc::new(copy));
    nested.push_list(IoList::from_scratch(b"-".to_vec()));
    nested.push_copy(b"+");
    assert_eq!(nested.to_vec(), b"<p>one!-+");
    assert_eq!(nested.segment_count(), 3);
    l.clear();
    assert!(l.is_empty());
    assert_eq!(l.segments().count(), 0);
}

#[test]
fn a_buffer_is_adopted_whole_as_a_list() {
    let v = b"<html>whole page</html>".to_vec();
    let ptr = v.as_ptr();
    let l = IoList::from_scratch(v);
    assert_eq!(l.len(), 23);
    assert_eq!(l.segment_count(), 1);
    assert_eq!(l.segments().next().unwrap().as_ptr(), ptr, "no copy");
    assert_eq!(l.to_bytes(), &b"<html>whole page</html>"[..]);
    let empty = IoList::from_scratch(Vec::new());
    assert_eq!(empty.segment_count(), 0);
    assert_eq!(
        empty.segments().count(),
        0,
        "an empty scratch is no segment"
    );
    assert_eq!(empty, IoList::new());
}

#[test]
fn pins_taken_between_pieces_keep_every_segment_in_place() {
    let page = Bytes::from(b"<html><body>page text</body></html>".to_vec());
    let part = Bytes::from(b"<li>partial text</li>".to_vec());
    let extra = Bytes::from(b"<footer>third pin</footer>".to_vec());
    let mut l = IoList::new();
    l.push_copy(b"head;");
    l.pin(&page); // the copies so far become the first segment, behind the pin
    l.push_shared(&page.slice(0..12));
    l.push_copy(b"x");
    l.pin(&part);
    l.push_shared(&part.slice(4..16));
    l.pin(&extra);
    l.push_shared(&extra.slice(8..17));
    l.push_shared(&page.slice(21..));
    assert_eq!(l.segment_count(), 6);
    assert_eq!(
        l.to_vec(),
        b"head;<html><body>xpartial textthird pin</body></html>"
    );
    assert_eq!(
        l.segments_with_kind().map(|(k, _)| k).collect::<Vec<_>>(),
        [
            SegmentKind::Scratch,
            SegmentKind::Shared,
            SegmentKind::Scratch,
            SegmentKind::Shared,
            SegmentKind::Shared,
            SegmentKind::Shared,
        ]
    );
    let mut copy = IoList::new();
    copy.append(&l);
    assert_eq!(copy, l);
    l.clear();
    assert!(l.is_empty());
    l.push_copy(b"again");
    assert_eq!(l.segments().collect::<Vec<_>>(), [b"again".as_slice()]);
}

#[test]
fn a_list_moves_with_inline_stores() {
    // Larger than this, a move out of a function is a call to `memcpy`.
    assert!(std::mem::size_of::<IoList>() <= 128);
}

#[test]
fn dropping_a_list_releases_what_its_table_holds() {
    let shared = Arc::new(IoList::from_scratch(b"fragment".to_vec()));
    let mut l = IoList::new();
    l.push_copy(b"copies, then a table: ");
    l.push_shared_list(Arc::clone(&shared));
    l.pin(&Bytes::from(b"pinned text".to_vec()));
    assert_eq!(Arc::strong_count(&shared), 2);
    drop(l);
    assert_eq!(
        Arc::strong_count(&shared),
        1,
        "the table's references are released"
    );
    let mut copies = IoList::from_scratch(b"no table".to_vec());
    copies.push_copy(b"!");
    drop(copies);
}
