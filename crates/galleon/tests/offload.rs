//! The CPU pool in `galleon serve` (issue 14): `galleon hops` prints its histograms. The policies
//! and the pool's counts are tested in-process in `crates/site/tests/offload.rs`.

mod serve_support;

use std::time::Duration;

use galleon_client::Client;
use serve_support::{ServeProcess, galleon};

const TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn hops_prints_the_pools_histograms() {
    let s = ServeProcess::start(&["--events", "off", "--offload", "offload"]);
    let mut c = Client::connect(s.addr, TIMEOUT).unwrap();
    for _ in 0..20 {
        assert_eq!(c.get("/seal?bytes=2000", &[]).unwrap().status, 200);
    }
    let out = galleon()
        .args(["hops", "--addr", &s.addr.to_string(), "--kind", "seal"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("pool: "), "{text}");
    assert!(
        text.contains("kind seal: policy offload, inline 0, offloaded 20"),
        "{text}"
    );
    for what in [
        "hop to the pool (nanos)",
        "hop back (nanos)",
        "run time (nanos)",
    ] {
        assert!(text.contains(what), "{what}: {text}");
    }
    assert!(
        text.contains("------------- Distribution ------------- count"),
        "{text}"
    );
    assert!(!text.contains("kind render"), "filtered by --kind: {text}");

    // Nothing listening: a clear error, not a panic.
    let out = galleon()
        .args(["hops", "--addr", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("connecting to 127.0.0.1:1"));
}
