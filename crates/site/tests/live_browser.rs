//! The site's live pages in headless Chromium with the real LiveView client: the counter, the
//! sign-up form, and the orders list changed by an append made from another connection (on one
//! site with SQLite, and across two sites on one PostgreSQL). Skipped loudly without chromium.

mod support;
// galleon-live's WebDriver harness, shared rather than copied.
#[path = "../../live/tests/common/webdriver.rs"]
#[allow(dead_code, unreachable_pub)]
mod webdriver;

use serde_json::json;
use support::live_client::{event, join};
use support::{TestSite, config, site_dir};
use webdriver::{Browser, WAIT};

/// Waits until the page's live container is connected.
fn connected(b: &Browser) {
    b.wait_until("the page to connect", WAIT, |b| {
        let js = "return !!document.querySelector('[data-phx-main].phx-connected')";
        b.execute(js, vec![]) == json!(true)
    });
}

fn sqlite_site(dir: &tempfile::TempDir) -> TestSite {
    let url = format!("sqlite:{}/events.db", dir.path().display());
    let options = galleon_eventstore::OpenOptions::default();
    TestSite::start_with_events(config(&site_dir()), Some((url, options)))
}

#[test]
fn the_counter_and_the_form_work_in_a_browser() {
    let Some(b) = Browser::start() else { return };
    let site = TestSite::start(config(&site_dir()));
    b.goto(&format!("http://{}/live/counter", site.addr));
    connected(&b);
    b.click("#inc");
    b.click("#inc");
    b.wait_text("#count", "2");
    b.click("#dec");
    b.wait_text("#count", "1");
    b.click("#reset");
    b.wait_text("#count", "0");

    b.goto(&format!("http://{}/live/signup", site.addr));
    connected(&b);
    b.send_keys("#name", "A");
    b.wait_text("#name-error", "at least 2 characters");
    b.send_keys("#name", "da");
    b.wait_text("#name-error", "");
    b.send_keys("#email", "ada@example.com");
    b.click("#save");
    b.wait_text("#result", "Welcome, Ada! We will write to ada@example.com.");
    let severe: Vec<String> = b
        .console_logs()
        .into_iter()
        .filter(|l| l.contains("SEVERE") || l.contains("mismatch"))
        .collect();
    assert!(severe.is_empty(), "{severe:?}");
}

#[test]
fn an_append_from_another_connection_updates_the_orders_in_the_browser() {
    let Some(b) = Browser::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let site = sqlite_site(&dir);
    b.goto(&format!("http://{}/live/orders", site.addr));
    connected(&b);
    // This page's own click: appended, and shown when the append comes back.
    b.click("#order-5 button");
    b.wait_text("#order-5 .status", "packed");
    // Another client's click: its append reaches this page.
    let (mut other, _) = join(site.addr, &site, "/live/orders");
    let r = event(&mut other, "2", "click", "advance", json!({"id": "9"}));
    assert_eq!(r["status"], "ok", "{r}");
    b.wait_text("#order-9 .status", "packed");
    assert_eq!(b.text("#order-8 .status"), "pending");
    // A patch link filters without a reload.
    b.execute("window.__kept = 1", vec![]);
    b.click("#show-packed");
    b.wait_text("#shown", "2");
    assert!(b.current_url().ends_with("/live/orders?status=packed"));
    assert_eq!(b.execute("return window.__kept", vec![]), json!(1));
}

#[test]
fn a_page_held_on_one_node_shows_an_append_made_through_another() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: the two-node browser test: DATABASE_URL is not set ***\n");
        return;
    };
    let Some(b) = Browser::start() else { return };
    let schema = format!("live_browser_{}", uuid::Uuid::new_v4().simple());
    let options = || galleon_eventstore::OpenOptions {
        pg_schema: Some(schema.clone()),
        ..galleon_eventstore::OpenOptions::default()
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let node_a =
            TestSite::start_with_events(config(&site_dir()), Some((url.clone(), options())));
        let node_b =
            TestSite::start_with_events(config(&site_dir()), Some((url.clone(), options())));
        b.goto(&format!("http://{}/live/orders", node_b.addr));
        connected(&b);
        let (mut on_a, _) = join(node_a.addr, &node_a, "/live/orders");
        let r = event(&mut on_a, "2", "click", "advance", json!({"id": "3"}));
        assert_eq!(r["status"], "ok", "{r}");
        b.wait_text("#order-3 .status", "packed");
    }));
    support::drop_pg_schema(&url, &schema);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn the_event_browsers_tail_takes_new_events_at_the_top_in_a_browser() {
    let Some(b) = Browser::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let site = sqlite_site(&dir);
    b.goto(&format!("http://{}/live/events", site.addr));
    connected(&b);
    // Each append lands at the top: the rows below move down (sent as moves, `km`).
    let (mut orders, _) = join(site.addr, &site, "/live/orders");
    let tail = "return Array.from(document.querySelectorAll('#tail tr'))\
                .map(r => r.cells[1].textContent).join(' ')";
    let mut want = Vec::new();
    for (i, id) in ["4", "8", "15", "16"].iter().enumerate() {
        let r = event(
            &mut orders,
            &format!("r{i}"),
            "click",
            "advance",
            json!({"id": id}),
        );
        assert_eq!(r["status"], "ok", "{r}");
        want.insert(0, format!("order-{id}"));
        let want = want.join(" ");
        b.wait_until(&format!("the tail to read {want}"), WAIT, |b| {
            b.execute(tail, vec![]) == json!(want)
        });
    }
}
