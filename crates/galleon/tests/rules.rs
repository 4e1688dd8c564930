//! The rules example of `galleon serve` (issue 15): SIGHUP reloads the rules. Matching, errors,
//! the modes and reloads under load are tested in-process in `crates/site/tests/rules.rs`.

mod serve_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use galleon_client::{Client, ClientResponse};
use serve_support::{ServeProcess, galleon};

const TIMEOUT: Duration = Duration::from_secs(30);

fn client(s: &ServeProcess) -> Client {
    Client::connect(s.addr, TIMEOUT).unwrap()
}

/// `galleon gen-rules` into `path` (written to a temporary name and renamed into place).
fn gen_rules(path: &Path, seed: u64, count: usize, revision: &str) {
    let out = galleon()
        .args(["gen-rules", "--seed", &seed.to_string()])
        .args(["--count", &count.to_string(), "--revision", revision, "-o"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn start(rules: &Path, extra: &[&str]) -> ServeProcess {
    let mut args = vec!["--events", "off", "--rules", rules.to_str().unwrap()];
    args.extend_from_slice(extra);
    ServeProcess::start(&args)
}

fn json(r: &ClientResponse) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < TIMEOUT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sighup_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.json");
    gen_rules(&rules, 1, 20, "before");
    let s = start(&rules, &["--rules-poll-ms", "0"]);
    let mut c = client(&s);
    gen_rules(&rules, 2, 20, "after");
    // Polling is off: nothing changes until the signal.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(json(&c.get("/rules", &[]).unwrap())["revision"], "before");
    let st = Command::new("kill")
        .args(["-HUP", &s.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_for("the SIGHUP reload", || {
        json(&c.get("/rules", &[]).unwrap())["revision"] == "after"
    });
    assert_eq!(json(&c.get("/rules", &[]).unwrap())["version"], 2);
}
