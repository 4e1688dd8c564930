//! Property and edge-case tests of the write path: however a list is built and whatever the
//! policy, and however short the writes the writer accepts, the bytes out equal `to_bytes()`.

use std::io::{self, IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;

use bytes::Bytes;
use galleon_iolist::{
    IOV_MAX, IoList, IoWriter, WritePolicy, WriteStats, WriteTracer, escape_html,
    escape_html_copy_into, escape_html_into, escape_html_static_into, write_iolist,
};
use proptest::prelude::*;

/// Static slices of assorted lengths, for lists that mix static segments in.
static POOL: [&[u8]; 6] = [
    b"",
    b"a",
    b"<td>",
    b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    &[b'S'; 300],
    &[b'L'; 3000],
];

#[derive(Debug, Clone)]
enum Op {
    Static(usize),
    Shared(Vec<u8>),
    Copy(Vec<u8>),
    /// A slice of one pinned allocation (the way a template references its static text).
    Pinned(usize, usize),
    Nested(Vec<Op>),
}

/// The allocation `Op::Pinned` slices, like a compiled template's text.
fn pinned_text() -> Bytes {
    static TEXT: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        Bytes::from(
            (0..4000u32)
                .map(|i| (i % 97) as u8 + 30)
                .collect::<Vec<_>>(),
        )
    })
    .clone()
}

fn op() -> impl Strategy<Value = Op> {
    let leaf = prop_oneof![
        (0..POOL.len()).prop_map(Op::Static),
        prop::collection::vec(any::<u8>(), 0..2500).prop_map(Op::Shared),
        prop::collection::vec(any::<u8>(), 0..300).prop_map(Op::Copy),
        (0usize..4000, 0usize..4000).prop_map(|(a, b)| Op::Pinned(a.min(b), a.max(b))),
    ];
    leaf.prop_recursive(2, 64, 8, |inner| {
        prop::collection::vec(inner, 0..8).prop_map(Op::Nested)
    })
}

fn build(ops: &[Op]) -> IoList {
    let mut l = IoList::new();
    for op in ops {
        match op {
            Op::Static(i) => l.push_static(POOL[*i]),
            Op::Shared(v) => l.push_bytes(Bytes::from(v.clone())),
            Op::Copy(v) => l.push_copy(v),
            Op::Pinned(a, b) => {
                let text = pinned_text();
                l.pin(&text);
                l.push_shared(&text.slice(*a..*b));
            }
            Op::Nested(v) => {
                let inner = build(v);
                // Share some nested lists twice, to exercise `push_shared_list`.
                if v.len() % 2 == 0 {
                    let inner = Arc::new(inner);
                    l.push_shared_list(inner.clone());
                    l.push_shared_list(inner);
                } else {
                    l.push_list(inner);
                }
            }
        }
    }
    l
}

/// What `build(ops)` must hold, computed without `IoList`.
fn expected(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        match op {
            Op::Static(i) => out.extend_from_slice(POOL[*i]),
            Op::Shared(v) | Op::Copy(v) => out.extend_from_slice(v),
            Op::Pinned(a, b) => out.extend_from_slice(&pinned_text()[*a..*b]),
            Op::Nested(v) => {
                let inner = expected(v);
                out.extend_from_slice(&inner);
                if v.len() % 2 == 0 {
                    out.extend_from_slice(&inner);
                }
            }
        }
    }
    out
}

fn policy() -> impl Strategy<Value = WritePolicy> {
    prop_oneof![
        Just(WritePolicy::flatten()),
        Just(WritePolicy::vectored()),
        Just(WritePolicy::default()),
        (0usize..5000, 0usize..2000).prop_map(|(c, m)| WritePolicy::new(c, m)),
    ]
}

/// A writer that accepts a scripted number of bytes per call (cycling), sometimes fails with
/// `Interrupted`, and checks the vectored-write contract on every call.
struct Stingy {
    out: Vec<u8>,
    caps: Vec<usize>,
    call: usize,
    max_iov_seen: usize,
    empty_iov_seen: bool,
}

impl Write for Stingy {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(b)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.max_iov_seen = self.max_iov_seen.max(bufs.len());
        self.empty_iov_seen |= bufs.iter().any(|b| b.is_empty());
        let cap = self.caps[self.call % self.caps.len()];
        self.call += 1;
        if cap == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let mut left = cap;
        for b in bufs {
            let n = b.len().min(left);
            self.out.extend_from_slice(&b[..n]);
            left -= n;
            if left == 0 {
                break;
            }
        }
        Ok(cap - left)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn reference_escape(s: &[u8]) -> Vec<u8> {
    let mut o = Vec::new();
    for &b in s {
        match b {
            b'&' => o.extend_from_slice(b"&amp;"),
            b'<' => o.extend_from_slice(b"&lt;"),
            b'>' => o.extend_from_slice(b"&gt;"),
            b'"' => o.extend_from_slice(b"&quot;"),
            b'\'' => o.extend_from_slice(b"&#39;"),
            _ => o.push(b),
        }
    }
    o
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_list_any_policy_any_short_writes(
        ops in prop::collection::vec(op(), 0..40),
        policy in policy(),
        caps in prop::collection::vec(prop_oneof![Just(0usize), 1usize..64, 1usize..100_000], 1..16),
    ) {
        // A script of only interruptions would never make progress; keep one real write.
        let mut caps = caps;
        if caps.iter().all(|&c| c == 0) {
            caps.push(1);
        }
        let list = build(&ops);
        let mut w = Stingy { out: Vec::new(), caps, call: 0, max_iov_seen: 0, empty_iov_seen: false };
        let stats = write_iolist(&mut w, &list, policy).unwrap();
        prop_assert_eq!(&w.out[..], &list.to_bytes()[..]);
        prop_assert!(w.max_iov_seen <= policy.iov_limit());
        prop_assert!(w.max_iov_seen <= IOV_MAX);
        prop_assert!(!w.empty_iov_seen, "an empty iovec was handed to write");
        prop_assert_eq!(stats.bytes, list.len() as u64);
        prop_assert_eq!(stats.bytes_copied + stats.bytes_referenced, list.len() as u64);
        if list.is_empty() {
            prop_assert_eq!(stats.syscalls, 0);
        }
    }

    #[test]
    fn several_lists_write_as_their_concatenation(
        parts in prop::collection::vec(prop::collection::vec(op(), 0..12), 0..5),
        policy in policy(),
        caps in prop::collection::vec(1usize..5000, 1..8),
    ) {
        let lists: Vec<IoList> = parts.iter().map(|ops| build(ops)).collect();
        let refs: Vec<&IoList> = lists.iter().collect();
        let want: Vec<u8> = lists.iter().flat_map(|l| l.to_vec()).collect();
        let mut writer = IoWriter::new(policy);
        let mut w = Stingy { out: Vec::new(), caps, call: 0, max_iov_seen: 0, empty_iov_seen: false };
        writer.write_lists(&mut w, &refs).unwrap();
        prop_assert_eq!(&w.out, &want);
        prop_assert!(w.max_iov_seen <= policy.iov_limit());
        prop_assert!(!w.empty_iov_seen, "an empty iovec was handed to write");
        prop_assert_eq!(writer.stats().bytes, want.len() as u64);
    }

    #[test]
    fn segments_and_len_agree(ops in prop::collection::vec(op(), 0..40)) {
        let list = build(&ops);
        prop_assert_eq!(list.to_vec(), expected(&ops));
        let total: usize = list.segments().map(<[u8]>::len).sum();
        prop_assert_eq!(total, list.len());
        prop_assert_eq!(list.segments().count(), list.segment_count());
        prop_assert!(list.segments().all(|s| !s.is_empty()));
        prop_assert_eq!(list.to_vec(), list.to_bytes().to_vec());
    }

    #[test]
    fn escaping_equals_the_reference(input in prop::collection::vec(any::<u8>(), 0..600), min_ref in 0usize..80) {
        let want = reference_escape(&input);
        let b = Bytes::from(input.clone());
        prop_assert_eq!(&escape_html(&b).to_bytes()[..], &want[..]);
        let mut l = IoList::new();
        escape_html_into(&mut l, &b, min_ref);
        prop_assert_eq!(&l.to_bytes()[..], &want[..]);
        let mut l = IoList::new();
        escape_html_copy_into(&mut l, &input);
        prop_assert_eq!(&l.to_bytes()[..], &want[..]);
        let leaked: &'static [u8] = Box::leak(input.into_boxed_slice());
        let mut l = IoList::new();
        escape_html_static_into(&mut l, leaked, min_ref);
        prop_assert_eq!(&l.to_bytes()[..], &want[..]);
    }

    #[test]
    fn escaping_text_without_specials_is_one_reference(input in "[a-zA-Z0-9 ,.;:!?/-]{1,300}") {
        let b = Bytes::from(input);
        let l = escape_html(&b);
        prop_assert_eq!(l.segment_count(), 1);
        prop_assert_eq!(l.segments().next().unwrap().as_ptr(), b.as_ptr());
    }
}

/// Sends `list` over a real loopback TCP connection and returns what the reader received.
fn over_loopback(list: &IoList, policy: WritePolicy) -> (Vec<u8>, WriteStats) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got
    });
    let mut s = TcpStream::connect(addr).unwrap();
    let stats = write_iolist(&mut s, list, policy).unwrap();
    drop(s);
    (reader.join().unwrap(), stats)
}

#[test]
fn more_segments_than_iov_max_over_a_socket() {
    let mut list = IoList::new();
    for i in 0..5000u32 {
        list.push_bytes(Bytes::from(i.to_le_bytes().to_vec()));
    }
    let (got, stats) = over_loopback(&list, WritePolicy::vectored());
    assert_eq!(got, list.to_vec());
    assert!(
        stats.syscalls >= 5,
        "5000 iovecs need at least 5 calls of 1024"
    );
    assert_eq!(stats.bytes_copied, 0);
}

#[test]
fn one_huge_segment_goes_out_uncopied() {
    let big: Vec<u8> = (0..24 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut list = IoList::new();
    list.push_static(b"head\r\n");
    list.push_bytes(Bytes::from(big));
    list.push_static(b"tail");
    for policy in [WritePolicy::vectored(), WritePolicy::default()] {
        let (got, stats) = over_loopback(&list, policy);
        assert_eq!(got.len(), list.len());
        assert!(got == list.to_vec(), "bytes differ under {policy:?}");
        assert_eq!(
            stats.bytes_copied, 0,
            "the 24 MiB segment must not be copied"
        );
    }
}

#[test]
fn tracer_sees_every_call_and_its_iovecs() {
    struct Log(Arc<std::sync::Mutex<Vec<(usize, usize)>>>);
    impl WriteTracer for Log {
        fn on_write(&mut self, iov: &[IoSlice<'_>], result: &io::Result<usize>) {
            let n = *result.as_ref().unwrap();
            self.0.lock().unwrap().push((iov.len(), n));
        }
    }
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut list = IoList::new();
    for _ in 0..10 {
        list.push_static(&[b'x'; 410]);
    }
    let mut w = IoWriter::new(WritePolicy::vectored());
    w.set_tracer(Some(Box::new(Log(log.clone()))));
    let mut out = Stingy {
        out: Vec::new(),
        caps: vec![1000],
        call: 0,
        max_iov_seen: 0,
        empty_iov_seen: false,
    };
    w.write_all(&mut out, &list).unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.len() as u64, w.stats().syscalls);
    assert_eq!(log[0], (10, 1000));
    assert_eq!(log.iter().map(|c| c.1).sum::<usize>(), 4100);
}

#[test]
fn async_writer_survives_a_tiny_pipe() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::AsyncReadExt;
        let (mut a, mut b) = tokio::io::duplex(37);
        let mut list = IoList::new();
        for i in 0..300u32 {
            list.push_copy(i.to_string().as_bytes());
            list.push_static(&[b'-'; 100]);
            list.push_bytes(Bytes::from(vec![
                b'a' + (i % 26) as u8;
                (i as usize * 13) % 700
            ]));
        }
        let want = list.to_vec();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut w = IoWriter::new(WritePolicy::default());
        w.write_all_async(&mut a, &list).await.unwrap();
        drop(a);
        assert_eq!(reader.await.unwrap(), want);
        assert!(w.stats().short_writes > 0);
    });
}

#[test]
fn a_closed_peer_is_an_error_not_a_panic() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let closer = thread::spawn(move || drop(listener.accept().unwrap()));
    let mut s = TcpStream::connect(addr).unwrap();
    closer.join().unwrap();
    let mut list = IoList::new();
    list.push_bytes(Bytes::from(vec![0u8; 8 * 1024 * 1024]));
    let mut w = IoWriter::default();
    // The first writes may land in the socket buffer; a later one must fail (EPIPE/ECONNRESET).
    let mut result = Ok(());
    for _ in 0..16 {
        result = w.write_all(&mut s, &list);
        if result.is_err() {
            break;
        }
    }
    let err = result.unwrap_err();
    assert!(
        matches!(
            err.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ),
        "{err:?}"
    );
    assert!(w.stats().bytes < 16 * list.len() as u64);
}
