//! Headless Chromium renders the live page with histograms that hold data while traffic runs
//! (skipped, loudly, without chromium; failing then if `GALLEON_REQUIRE_CHROMIUM` is set).

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use common::{TIMEOUT, TestServer, chart_totals, chromium, get_ok};

#[test]
fn chromium_renders_the_live_page_with_nonzero_histograms_while_traffic_runs() {
    let Some(browser) = chromium() else {
        return;
    };
    let pool = common::pool();
    let s = TestServer::with_pool(&pool);
    // Traffic before the page loads, so every chart has data whatever the timing...
    let mut c = s.client();
    for _ in 0..200 {
        get_ok(&mut c, "/blah?iters=3");
    }
    drop(c);
    // ... and more while it loads.
    let addr = s.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut c = galleon_client::Client::connect(addr, TIMEOUT).unwrap();
            let start = Instant::now();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) && n < 20_000 && start.elapsed() < TIMEOUT {
                assert_eq!(c.get("/blah?iters=3", &[]).unwrap().status, 200);
                n += 1;
            }
            n
        }
    });
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
    traffic.join().unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("galleon: live stats"),
        "chromium did not load the page (status {:?}): {}\n{}",
        out.status,
        dom,
        String::from_utf8_lossy(&out.stderr)
    );
    // Every chart's total, as the browser's DOM has it.
    let totals = chart_totals(&dom);
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
}
