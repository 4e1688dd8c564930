//! The CPU pool in `galleon serve` (issue 14) end to end: every `--offload` policy serves the
//! same bytes, the pool counts where each job ran, and `galleon hops` prints its histograms.

mod serve_support;

use std::time::Duration;

use galleon_client::Client;
use serve_support::{ServeProcess, galleon};

const TIMEOUT: Duration = Duration::from_secs(30);

fn stats(c: &mut Client) -> serde_json::Value {
    let r = c.get("/_galleon/offload", &[]).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

/// `(inline, offloaded)` of the kind `name`.
fn counts(stats: &serde_json::Value, name: &str) -> (u64, u64) {
    let k = stats["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == name)
        .unwrap_or_else(|| panic!("no kind {name} in {stats}"));
    (
        k["inline"].as_u64().unwrap(),
        k["offloaded"].as_u64().unwrap(),
    )
}

#[test]
fn every_policy_serves_the_same_bytes_and_the_pool_counts_where_jobs_ran() {
    // 40 KB pages are streamed past --full-body-max, so stream chunks are jobs too.
    // The fourth writes streams on the request workers, not on the bulk writers.
    let servers: Vec<ServeProcess> = [
        &["--offload", "inline"][..],
        &["--offload", "offload"],
        &["--offload", "adaptive"],
        &["--offload", "adaptive", "--bulk-writers", "0"],
    ]
    .iter()
    .map(|flags| {
        let mut args = vec!["--events", "off", "--full-body-max", "8192"];
        args.extend_from_slice(flags);
        ServeProcess::start(&args)
    })
    .collect();
    let paths = [
        "/blah?iters=10",
        "/blah?iters=100",
        "/big-table",
        "/seal?bytes=5000",
    ];
    let mut bodies: Vec<Vec<Vec<u8>>> = Vec::new();
    for s in &servers {
        let mut c = Client::connect(s.addr, TIMEOUT).unwrap();
        bodies.push(
            paths
                .iter()
                .map(|p| {
                    let r = c.get(p, &[]).unwrap();
                    assert_eq!(r.status, 200, "{p}: {}", r.text());
                    r.body
                })
                .collect(),
        );
    }
    // /seal's nonce counts per server, so its tag is the same on each server's first request.
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(bodies[1], bodies[2]);
    assert_eq!(bodies[2], bodies[3]);
    assert_eq!(bodies[0][1].len(), 41_000);

    let inline = stats(&mut Client::connect(servers[0].addr, TIMEOUT).unwrap());
    assert_eq!(counts(&inline, "render:/blah"), (2, 0));
    assert_eq!(counts(&inline, "seal"), (1, 0));
    assert_eq!(counts(&inline, "stream-chunk").1, 0);
    let offload = stats(&mut Client::connect(servers[1].addr, TIMEOUT).unwrap());
    assert_eq!(counts(&offload, "render:/blah"), (0, 2));
    assert_eq!(counts(&offload, "render:/big-table"), (0, 1));
    assert_eq!(counts(&offload, "seal"), (0, 1));
    let (_, chunks) = counts(&offload, "stream-chunk");
    assert!(chunks >= 2, "{offload}");
    assert_eq!(offload["policy"], "offload");
    // Under adaptive, streams written on the bulk writers have their chunks placed by the
    // model: a template's chunks cost far less than a hop, so they stay on the writer.
    let adaptive = stats(&mut Client::connect(servers[2].addr, TIMEOUT).unwrap());
    let chunk_kind = |s: &serde_json::Value| {
        let mut k = s["kinds"].as_array().unwrap().iter();
        let policy = &k.find(|k| k["name"] == "stream-chunk").unwrap()["policy"];
        policy.as_str().unwrap().to_owned()
    };
    assert!(chunk_kind(&adaptive).starts_with("adaptive"), "{adaptive}");
    let (inline_chunks, _) = counts(&adaptive, "stream-chunk");
    assert!(inline_chunks >= 2, "{adaptive}");
    // Streams written on the request workers: their chunks always leave the workers.
    let on_workers = stats(&mut Client::connect(servers[3].addr, TIMEOUT).unwrap());
    assert_eq!(chunk_kind(&on_workers), "offload", "{on_workers}");
    let (inline_chunks, offloaded_chunks) = counts(&on_workers, "stream-chunk");
    assert_eq!(inline_chunks, 0, "{on_workers}");
    assert!(offloaded_chunks >= 2, "{on_workers}");
}

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
