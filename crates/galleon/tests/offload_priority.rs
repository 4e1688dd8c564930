//! `galleon serve --offload-priority`: a bad value is refused. The classes the pool threads take
//! are tested in-process in `crates/site/tests/offload_priority.rs`.

#![cfg(target_os = "linux")]

mod serve_support;

use serve_support::galleon;

#[test]
fn a_bad_priority_is_refused_at_start() {
    let out = galleon()
        .args(["serve", "--events", "off", "--offload-priority", "realtime"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected normal or idle"), "{err}");
}
