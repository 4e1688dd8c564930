//! The site's CPU pool (issue 14) in-process: every `OffloadConfig::policy` serves the same
//! bytes, and the pool counts where each job ran. `galleon hops` is `galleon serve`'s test
//! (`crates/galleon/tests/offload.rs`).

mod support;

use galleon_client::Client;
use galleon_offload::Policy;
use support::TestSite;

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
    let servers: Vec<TestSite> = [
        (Policy::Inline, None),
        (Policy::Offload, None),
        (Policy::adaptive(), None),
        (Policy::adaptive(), Some(0)),
    ]
    .into_iter()
    .map(|(policy, bulk_writers)| {
        let mut config = support::config(&support::site_dir());
        config.pages.full_body_max = 8192;
        config.offload.policy = policy;
        if let Some(n) = bulk_writers {
            config.bulk_writers = n;
        }
        TestSite::start(config)
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
        let mut c = s.client();
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

    let inline = stats(&mut servers[0].client());
    assert_eq!(counts(&inline, "render:/blah"), (2, 0));
    assert_eq!(counts(&inline, "seal"), (1, 0));
    assert_eq!(counts(&inline, "stream-chunk").1, 0);
    let offload = stats(&mut servers[1].client());
    assert_eq!(counts(&offload, "render:/blah"), (0, 2));
    assert_eq!(counts(&offload, "render:/big-table"), (0, 1));
    assert_eq!(counts(&offload, "seal"), (0, 1));
    let (_, chunks) = counts(&offload, "stream-chunk");
    assert!(chunks >= 2, "{offload}");
    assert_eq!(offload["policy"], "offload");
    // Under adaptive, streams written on the bulk writers have their chunks placed by the
    // model: a template's chunks cost far less than a hop, so they stay on the writer.
    let adaptive = stats(&mut servers[2].client());
    let chunk_kind = |s: &serde_json::Value| {
        let mut k = s["kinds"].as_array().unwrap().iter();
        let policy = &k.find(|k| k["name"] == "stream-chunk").unwrap()["policy"];
        policy.as_str().unwrap().to_owned()
    };
    assert!(chunk_kind(&adaptive).starts_with("adaptive"), "{adaptive}");
    let (inline_chunks, _) = counts(&adaptive, "stream-chunk");
    assert!(inline_chunks >= 2, "{adaptive}");
    // Streams written on the request workers: their chunks always leave the workers.
    let on_workers = stats(&mut servers[3].client());
    assert_eq!(chunk_kind(&on_workers), "offload", "{on_workers}");
    let (inline_chunks, offloaded_chunks) = counts(&on_workers, "stream-chunk");
    assert_eq!(inline_chunks, 0, "{on_workers}");
    assert!(offloaded_chunks >= 2, "{on_workers}");
}

#[test]
fn with_a_diagnostics_token_the_pool_statistics_and_the_reloads_need_it_from_loopback_too() {
    let token = "a-diagnostics-token-0123";
    let mut config = support::config(&support::site_dir());
    config.diagnostics = galleon_http::Guard::default().with_token(token).unwrap();
    let site = TestSite::start(config);
    let mut c = site.client();
    let bearer = format!("Bearer {token}");
    let with = [("authorization", bearer.as_str())];
    for (method, path) in [
        ("GET", "/_galleon/offload"),
        ("POST", "/templates/reload"),
        ("POST", "/rules/reload"),
    ] {
        let send = |c: &mut Client, headers: &[(&str, &str)]| {
            c.request(method, path, headers, b"").unwrap()
        };
        // The test's client is a loopback peer, as every client is behind a local proxy.
        let r = send(&mut c, &[]);
        assert_eq!(r.status, 401, "{method} {path}: {}", r.text());
        let r = send(&mut c, &with);
        assert_eq!(r.status, 200, "{method} {path}: {}", r.text());
    }
}
