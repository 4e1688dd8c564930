//! A loop whose body is static text is output as references to the body repeated back to back,
//! not one iteration at a time. These tests hold it to the loop it replaces: the same bytes,
//! the same chunks when streamed, the same step-limit errors, for any body, count and chunk size.

use galleon_template::{Assigns, Engine, Limits};
use proptest::prelude::*;

/// The same loop twice: `fast` has a static body (repeated), `slow` adds an `if` that outputs
/// nothing, which keeps the body from being static, so it runs one iteration at a time. The
/// slow loop spends a second step per iteration on its `if`, so it gets twice the steps.
fn engines(body: &str, generator: &str, max_steps: u64) -> (Engine, Engine) {
    let limits = |max_steps| Limits {
        max_steps,
        ..Limits::default()
    };
    let fast = Engine::from_source(
        "t",
        &format!("<%= for x <- {generator} do %>{body}<% end %>"),
    )
    .unwrap()
    .with_limits(limits(max_steps));
    let slow = Engine::from_source(
        "t",
        &format!("<%= for x <- {generator} do %>{body}<%= if false do %><% end %><% end %>"),
    )
    .unwrap()
    .with_limits(limits(max_steps.saturating_mul(2)));
    (fast, slow)
}

fn assigns(n: i64) -> Assigns {
    let mut a = Assigns::new();
    a.insert("n", n);
    a.insert("items", (0..n).collect::<Vec<i64>>());
    a
}

/// Every chunk (as bytes) until the stream ends, and whether it ended in a step-limit error.
fn stream(engine: &Engine, n: i64, chunk: usize) -> (Vec<Vec<u8>>, bool) {
    let mut chunks = Vec::new();
    for c in engine.stream("t", assigns(n), chunk).unwrap() {
        match c {
            Ok(c) => chunks.push(c.to_vec()),
            Err(e) => {
                assert!(e.is_limit(), "{e}");
                return (chunks, true);
            }
        }
    }
    (chunks, false)
}

fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z \n]{1,8}",
        "[a-z]{1,40}".prop_map(|s| s.repeat(37)),
        // Past half a block: not repeated, one segment per iteration as before.
        Just("y".repeat(20_000)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_repeated_body_renders_and_streams_like_the_loop(
        body in body(),
        n in prop_oneof![0i64..4, 0i64..3000],
        list in any::<bool>(),
        chunk in prop_oneof![1usize..64, 64usize..70_000],
        max_steps in prop_oneof![Just(100_000_000u64), 1u64..5000],
    ) {
        let generator = if list { "@items" } else { "1..@n//1" };
        let (fast, slow) = engines(&body, generator, max_steps);
        let f = fast.render("t", &assigns(n));
        let s = slow.render("t", &assigns(n));
        match (f, s) {
            (Ok(f), Ok(s)) => {
                prop_assert_eq!(f.to_vec(), s.to_vec());
                prop_assert_eq!(f.to_vec(), body.repeat(n as usize).into_bytes());
            }
            (Err(f), _) => prop_assert!(f.is_limit(), "{}", f),
            (Ok(_), Err(e)) => prop_assert!(false, "only the slow loop failed: {}", e),
        }
        let (fc, ferr) = stream(&fast, n, chunk);
        let (sc, serr) = stream(&slow, n, chunk);
        if !ferr && !serr {
            prop_assert_eq!(&fc, &sc, "same chunks");
            prop_assert_eq!(fc.concat(), body.repeat(n as usize).into_bytes());
        }
    }
}

#[test]
fn the_step_limit_counts_every_repeated_iteration() {
    // The fewest steps that render 10 iterations: the same whether the body is repeated ("ab")
    // or too long to be (20,000 bytes, run one iteration at a time).
    let fewest = |body: &str| {
        (1..100)
            .find(|&steps| {
                engines(body, "1..10", steps)
                    .0
                    .render("t", &assigns(0))
                    .is_ok()
            })
            .unwrap()
    };
    let long = "y".repeat(20_000);
    assert_eq!(fewest("ab"), fewest(&long));
    assert!(fewest("ab") > 10, "at least one step per iteration");
    let (fast, _) = engines("ab", "1..10", fewest("ab") - 1);
    assert!(fast.render("t", &assigns(0)).unwrap_err().is_limit());
}

#[test]
fn a_repeated_body_is_a_few_large_references() {
    let (fast, _) = engines(&"z".repeat(410), "1..@n", 100_000_000);
    let out = fast.render("t", &assigns(1000)).unwrap();
    assert_eq!(out.len(), 410_000);
    // Blocks of 79 bodies (32 KiB / 410 bytes), then the rest.
    assert_eq!(out.segment_count(), 1000usize.div_ceil(79));
    assert_eq!(out.scratch_len(), 0, "nothing copied");
}
