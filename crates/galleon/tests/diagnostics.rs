//! What `galleon serve` shows about itself (issue 16): `/metrics` parses as Prometheus text and
//! counts the traffic sent, `stats.json` has the routes, writes and pool, the access log writes
//! one line per request, `--stats off` turns the pages off, and headless Chromium renders the
//! live page's histograms with data while traffic runs.

mod serve_support;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use galleon_client::Client;
use serve_support::ServeProcess;

const TIMEOUT: Duration = Duration::from_secs(30);

fn client(s: &ServeProcess) -> Client {
    Client::connect(s.addr, TIMEOUT).unwrap()
}

fn get_ok(c: &mut Client, path: &str) -> Vec<u8> {
    let r = c.get(path, &[]).unwrap();
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.body
}

/// The samples of one metric family by their labels (sorted `k=v` pairs joined by `,`).
fn samples(scrape: &prometheus_parse::Scrape, metric: &str) -> HashMap<String, f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .map(|s| {
            let mut labels: Vec<String> =
                s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.sort();
            let v = match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                prometheus_parse::Value::Histogram(h) => {
                    h.iter().map(|b| b.count).fold(0.0, f64::max)
                }
                prometheus_parse::Value::Summary(_) => f64::NAN,
            };
            (labels.join(","), v)
        })
        .collect()
}

#[test]
fn metrics_parse_as_prometheus_text_and_count_the_traffic() {
    let s = ServeProcess::start(&[]);
    let mut c = client(&s);
    for _ in 0..20 {
        get_ok(&mut c, "/blah?iters=2");
    }
    for _ in 0..3 {
        assert_eq!(c.get("/no/such/page", &[]).unwrap().status, 404);
    }
    let r = c.get("/metrics", &[]).unwrap();
    assert_eq!(r.status, 200);
    let ct = r.header("content-type").unwrap_or_default().to_owned();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let text = r.text();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("/metrics does not parse: {e}\n{text}"));
    let requests = samples(&scrape, "galleon_http_requests_total");
    assert_eq!(
        requests.get("method=GET,route=/blah,status=200"),
        Some(&20.0),
        "{requests:?}"
    );
    assert_eq!(
        requests.get("method=GET,route=(unmatched),status=404"),
        Some(&3.0),
        "{requests:?}"
    );
    // The latency histogram of /blah holds the 20 requests (its +Inf bucket).
    let latency = samples(&scrape, "galleon_http_request_duration_seconds");
    assert_eq!(
        latency.get("method=GET,route=/blah"),
        Some(&20.0),
        "{latency:?}"
    );
    let syscalls = samples(&scrape, "galleon_write_syscalls_total");
    assert!(syscalls[""] >= 23.0, "{syscalls:?}");
    let bytes = samples(&scrape, "galleon_write_bytes_total");
    assert!(bytes["how=referenced"] + bytes["how=copied"] > 0.0);
    let open = samples(&scrape, "galleon_connections_open");
    assert_eq!(open[""], 1.0, "this client's connection");
    assert!(samples(&scrape, "process_resident_memory_bytes")[""] > 1e6);
    // The pool's page renders are counted by kind.
    let jobs = samples(&scrape, "galleon_offload_jobs_total");
    let blah: f64 = jobs
        .iter()
        .filter(|(k, _)| k.contains("kind=render:/blah"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(blah, 20.0, "{jobs:?}");
}

#[test]
fn stats_json_shows_routes_writes_connections_and_the_pool() {
    let s = ServeProcess::start(&[]);
    let mut c = client(&s);
    for _ in 0..5 {
        get_ok(&mut c, "/blah?iters=1");
    }
    let v: serde_json::Value =
        serde_json::from_slice(&get_ok(&mut c, "/_galleon/stats.json")).unwrap();
    let server = &v["server"];
    let blah = server["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["route"] == "/blah")
        .unwrap_or_else(|| panic!("no /blah row: {v}"));
    assert_eq!(blah["count"], 5);
    assert_eq!(blah["statuses"]["200"], 5);
    assert_eq!(blah["latency"]["count"], 5);
    let buckets: u64 = blah["latency"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(buckets, 5);
    assert!(server["writes"]["syscalls"].as_u64().unwrap() >= 5);
    assert_eq!(server["connections"]["open"], 1);
    assert!(
        v["offload"]["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["name"] == "render:/blah")
    );
    // The store's figures are there when a store is served (the default SQLite one).
    assert!(v["events"].is_object(), "{}", v["events"]);
    let health = get_ok(&mut c, "/_galleon/health");
    assert!(String::from_utf8_lossy(&health).contains("\"status\":\"ok\""));
}

#[test]
fn the_access_log_writes_one_line_per_request_and_stats_can_be_off() {
    let s = ServeProcess::start(&["--access-log", "--stats", "off"]);
    let mut c = client(&s);
    get_ok(&mut c, "/blah?iters=1");
    assert_eq!(c.get("/missing", &[]).unwrap().status, 404);
    // Statistics off: the pages say so; health still answers.
    assert_eq!(c.get("/_galleon/stats.json", &[]).unwrap().status, 404);
    assert_eq!(c.get("/metrics", &[]).unwrap().status, 404);
    get_ok(&mut c, "/_galleon/health");
    let start = Instant::now();
    let log = loop {
        let log = s.stderr();
        if log.matches("galleon::access").count() >= 5 || start.elapsed() > TIMEOUT {
            break log;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("galleon::access"))
        .collect();
    assert_eq!(lines.len(), 5, "{log}");
    assert!(
        lines[0].contains("method=\"GET\"") || lines[0].contains("method=GET"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("/blah?iters=1") && lines[0].contains("status=200"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("bytes=") && lines[0].contains("us=") && lines[0].contains("writes=")
    );
    assert!(lines[1].contains("status=404"), "{}", lines[1]);
}

#[test]
fn without_the_access_log_nothing_is_logged_per_request() {
    let s = ServeProcess::start(&[]);
    let mut c = client(&s);
    get_ok(&mut c, "/blah?iters=1");
    get_ok(&mut c, "/_galleon/health");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!s.stderr().contains("galleon::access"), "{}", s.stderr());
}

/// Headless Chromium, if installed (`.ci/run` installs it and sets `GALLEON_REQUIRE_CHROMIUM`).
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("GALLEON_REQUIRE_CHROMIUM").is_none(),
            "GALLEON_REQUIRE_CHROMIUM is set but no chromium is installed"
        );
        eprintln!("\n*** SKIPPED: the /_galleon browser test, no chromium installed ***\n");
    }
    found
}

#[test]
fn chromium_renders_the_live_page_with_nonzero_histograms_while_traffic_runs() {
    let Some(browser) = chromium() else {
        return;
    };
    let s = ServeProcess::start(&[]);
    let addr = s.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut c = Client::connect(addr, TIMEOUT).unwrap();
            let start = Instant::now();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) && n < 20_000 && start.elapsed() < TIMEOUT {
                assert_eq!(c.get("/blah?iters=3", &[]).unwrap().status, 200);
                n += 1;
            }
            n
        }
    });
    // Some traffic before the page loads.
    std::thread::sleep(Duration::from_millis(300));
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--timeout=10000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("http://{addr}/_galleon"))
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs");
    stop.store(true, Ordering::Relaxed);
    let sent = traffic.join().unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("galleon: live stats"),
        "chromium did not load the page (status {:?}): {}\n{}",
        out.status,
        dom,
        String::from_utf8_lossy(&out.stderr)
    );
    // Every chart's total, as the browser's DOM has it.
    let totals: Vec<u64> = dom
        .split("class=\"hist\" data-total=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        totals.len() >= 3,
        "latency, calls and iovecs charts: {totals:?}"
    );
    assert!(
        totals.iter().all(|&t| t > 0),
        "a chart with no data: {totals:?}"
    );
    let bars_with_data = dom
        .split("data-count=\"")
        .skip(1)
        .filter(|rest| rest.split('"').next().is_some_and(|n| n != "0"))
        .count();
    assert!(bars_with_data >= 3, "{bars_with_data} bars with data");
    assert!(dom.contains("/blah"), "the busiest route is listed");
    assert!(sent > 0);
}
