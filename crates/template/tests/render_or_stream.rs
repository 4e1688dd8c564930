//! `Engine::render_or_stream`: a page within the bound comes back whole; a longer one comes back
//! as what was rendered so far plus a stream that continues from there, never rendered twice.

use galleon_template::{Engine, ErrorKind, Limits, Rendered, Value};

/// One byte of output per loop iteration, each a dynamic value (no static loop body that the
/// compiler could repeat in one block), so the output can end on any byte.
const ONE_BYTE_EACH: &str = "<%= for c <- @chars do %><%= c %><% end %>";

fn engine() -> Engine {
    Engine::from_source("t", ONE_BYTE_EACH).unwrap()
}

/// `n` one-character strings cycling through `a..z`.
fn chars(n: usize) -> Value {
    Value::list((0..n).map(|i| Value::str(&((b'a' + (i % 26) as u8) as char).to_string())))
}

fn assign(n: usize) -> impl Fn(&str) -> Option<Value> {
    let list = chars(n);
    move |k: &str| (k == "chars").then(|| list.clone())
}

/// The whole output of the render, by whichever way it came.
fn bytes_of(r: Rendered) -> (bool, Vec<u8>) {
    match r {
        Rendered::Whole(l) => (true, l.to_vec()),
        Rendered::Streaming { first, rest } => {
            let mut out = first.to_vec();
            for chunk in rest {
                out.extend_from_slice(&chunk.unwrap().to_vec());
            }
            (false, out)
        }
    }
}

#[test]
fn pages_up_to_the_bound_are_whole_and_longer_ones_stream() {
    let e = engine();
    for (n, whole) in [
        (0, true),
        (99, true),
        (100, true),
        (101, false),
        (5_000, false),
    ] {
        let expected = e.render_with("t", assign(n)).unwrap().to_vec();
        assert_eq!(expected.len(), n);
        let (was_whole, got) = bytes_of(e.render_or_stream("t", assign(n), 100, 64).unwrap());
        assert_eq!(was_whole, whole, "{n} bytes against a bound of 100");
        assert_eq!(got, expected, "{n} bytes: the parts make the whole render");
    }
}

#[test]
fn the_stream_starts_where_the_whole_part_stopped() {
    let e = engine();
    let Rendered::Streaming { first, rest } =
        e.render_or_stream("t", assign(1_000), 100, 64).unwrap()
    else {
        panic!("1,000 bytes is over the bound")
    };
    // The render pauses between ops: the first part holds the bound, and no more than one op's
    // output past it.
    assert!((100..=101).contains(&first.len()), "{}", first.len());
    let sizes: Vec<usize> = rest.map(|c| c.unwrap().len()).collect();
    assert_eq!(first.len() + sizes.iter().sum::<usize>(), 1_000);
    assert!(sizes.len() >= 13, "chunks of about 64 bytes: {sizes:?}");
    assert!(sizes.iter().all(|&s| s <= 65), "{sizes:?}");
}

#[test]
fn steps_are_charged_like_a_render_then_like_a_stream() {
    let limits = Limits {
        max_steps: 1_000,
        ..Limits::default()
    };
    let e = engine().with_limits(limits);
    // A render of 10,000 bytes takes more than 1,000 steps: whole, it fails...
    let err = e.render_with("t", assign(10_000)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Limit);
    let err = e
        .render_or_stream("t", assign(10_000), 1 << 20, 64)
        .unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::Limit,
        "the whole part has one budget"
    );
    // ...but past a small bound the rest streams, its budget refilled per chunk.
    let (was_whole, got) = bytes_of(e.render_or_stream("t", assign(10_000), 100, 64).unwrap());
    assert!(!was_whole);
    assert_eq!(got.len(), 10_000);
}
