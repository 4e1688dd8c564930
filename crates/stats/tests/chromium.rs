//! Headless Chromium renders the live page with histograms that hold data while traffic runs,
//! and, driven through chromedriver, keeps it live: the LiveView client joins and the numbers
//! update in place, without a reload (skipped, loudly, without chromium or chromedriver;
//! failing then if `GALLEON_REQUIRE_CHROMIUM` is set).

mod common;
// galleon-live's WebDriver client, read from its tests as it is.
#[allow(dead_code, unreachable_pub)]
#[path = "../../live/tests/common/webdriver.rs"]
mod webdriver;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use common::{TIMEOUT, TestServer, chart_totals, chromium, get_ok};
use serde_json::json;
use webdriver::{Browser, WAIT};

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

/// The text of `css` as a number (0 when missing or not one).
fn number(b: &Browser, css: &str) -> u64 {
    b.try_text(css)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_live_page_updates_its_numbers_in_place_without_a_reload() {
    let Some(b) = Browser::start() else {
        return;
    };
    let pool = common::pool();
    let s = TestServer::with_pool(&pool);
    let mut c = s.client();
    get_ok(&mut c, "/blah");
    b.goto(&format!("http://{}/_galleon", s.addr));
    b.wait_until("the stats view to connect", WAIT, |b| {
        b.execute(
            "var m = document.querySelector('[data-phx-main]');\
             return !!m && m.classList.contains('phx-connected');",
            vec![],
        ) == json!(true)
    });
    // A reload would drop this.
    b.execute("window.__marker = 'kept';", vec![]);
    let before = number(&b, "#requests");
    assert!(before >= 1, "the first render counts /blah: {before}");
    for _ in 0..7 {
        get_ok(&mut c, "/blah");
    }
    // The next tick (every 2 s) brings the new count.
    b.wait_until("the request count to grow by the 7 sent", WAIT, |b| {
        number(b, "#requests") >= before + 7
    });
    b.wait_until("the /blah row to count 8", WAIT, |b| {
        b.execute(
            "return [...document.querySelectorAll('tr')].some(r => \
             r.cells.length > 2 && r.cells[0].textContent === '/blah' && \
             r.cells[2].textContent === '8');",
            vec![],
        ) == json!(true)
    });
    assert_eq!(
        b.execute("return window.__marker || null;", vec![]),
        json!("kept"),
        "the page was reloaded instead of patched"
    );
    assert_eq!(
        b.execute("return document.title;", vec![]),
        json!("galleon: live stats")
    );
    let logs = b.console_logs();
    let bad: Vec<&String> = logs.iter().filter(|l| l.starts_with("SEVERE")).collect();
    assert!(bad.is_empty(), "console errors: {bad:#?}\nall: {logs:#?}");
}
