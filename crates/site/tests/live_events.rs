//! `/live/events`, the event browser, over its socket with an SQLite store: the categories and
//! the tail from the first scan, a later append reaching the open page as a diff, a stream's
//! events by patch link (escaped), the subscriptions with their lag, and bad `?stream=` ids
//! answered with a message on the page.

mod support;

use std::time::Instant;

use galleon_eventstore::{EventData, EventFilter, ExpectedVersion, GroupSettings, Store};
use serde_json::{Value, json};
use support::live_client::{Ws, join, next};
use support::{TIMEOUT, TestSite, config, site_dir};
use tungstenite::Message;

/// Patches the view to `url` and returns the reply's diff as text (pushed diffs that come
/// first are skipped).
fn patch(ws: &mut Ws, r: &str, url: &str) -> String {
    let m = json!(["1", r, "lv:v", "live_patch", {"url": url}]);
    ws.send(Message::text(m.to_string())).unwrap();
    loop {
        let m = next(ws);
        if m[3] == "phx_reply" && m[1] == r {
            assert_eq!(m[4]["status"], "ok", "{m}");
            return m[4]["response"]["diff"].to_string();
        }
    }
}

/// Reads pushed diffs until one satisfies `wanted`; returns it as text.
fn diff_until(ws: &mut Ws, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < TIMEOUT, "timed out waiting for {what}");
        let m = next(ws);
        if m[3] == "diff" {
            let d = m[4].to_string();
            if wanted(&d) {
                return d;
            }
        }
    }
}

fn event(ty: &str, data: Value) -> EventData {
    EventData::json(ty, &data).unwrap()
}

/// A store at `url` (a handle of the test's own, beside the site's) and its runtime.
fn open(url: &str) -> (tokio::runtime::Runtime, Store) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(Store::open(url)).unwrap();
    (rt, store)
}

#[test]
fn the_browser_lists_categories_follows_appends_and_shows_a_stream() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}/events.db", dir.path().display());
    let (rt, store) = open(&url);
    rt.block_on(async {
        let any = ExpectedVersion::Any;
        for (stream, ty, data) in [
            ("order-1", "OrderPlaced", json!({"total": 30})),
            ("order-1", "OrderPaid", json!({"total": 30})),
            ("order-2", "OrderPlaced", json!({"total": 12})),
            ("x-1", "ThingMade", json!({"n": 1, "tag": "<b>bold</b>"})),
            (
                "x-1",
                "ThingMade",
                json!({"n": 2, "big": 12345678901234567890u64}),
            ),
            ("x-2", "ThingMade", json!({})),
        ] {
            store
                .append(stream, any, vec![event(ty, data)])
                .await
                .unwrap();
        }
        store
            .create_subscription("audit", 0, EventFilter::all())
            .await
            .unwrap();
        let orders = EventFilter::category("order").unwrap();
        store
            .create_group("packers", 0, orders, GroupSettings::default())
            .await
            .unwrap();
    });
    let site = TestSite::start_with_events(
        config(&site_dir()),
        Some((url.clone(), galleon_eventstore::OpenOptions::default())),
    );

    // The first render already has the scan: both categories, their counts, the tail.
    let mut html = String::new();
    support::wait_for("the scan of $all", || {
        html = site.client().get("/live/events", &[]).unwrap().text();
        html.contains("Up to date")
    });
    assert!(html.contains("Counted 6 events"), "{html}");
    assert!(html.contains("4 streams and 2 categories"), "{html}");
    assert!(
        html.contains(
            "<tr id=\"category-order\"><td>order</td><td class=\"events\">3</td><td>2</td>"
        ),
        "{html}"
    );
    assert!(
        html.contains("<tr id=\"category-x\"><td>x</td><td class=\"events\">3</td>"),
        "{html}"
    );
    assert!(html.contains("href=\"/live/events?stream=x-1\""), "{html}");
    let tail = &html[html.find("<tbody id=\"tail\">").unwrap()..];
    let (newest, oldest) = (tail.find("x-2").unwrap(), tail.find("order-1").unwrap());
    assert!(newest < oldest, "the tail is newest first: {tail}");
    assert!(html.contains("No stream selected"), "{html}");

    let (mut ws, rendered) = join(site.addr, &site, "/live/events");
    let whole = rendered.to_string();
    assert!(
        whole.contains("ThingMade") && whole.contains("OrderPaid"),
        "{whole}"
    );

    // The persistent subscriptions, read once the page is connected: 6 events behind "audit",
    // 3 behind the group of `order` streams, which has no member yet.
    let subs = diff_until(&mut ws, "the subscriptions", |d| d.contains("packers"));
    assert!(
        subs.contains("\"audit\"") && subs.contains("\"6\""),
        "{subs}"
    );
    assert!(
        subs.contains("\"group\"") && subs.contains("\"none\""),
        "{subs}"
    );
    assert!(subs.contains("category order"), "{subs}");

    // An append through another handle reaches the open page's tail.
    rt.block_on(store.append(
        "order-3",
        ExpectedVersion::NoStream,
        vec![event("OrderLate", json!({}))],
    ))
    .unwrap();
    let d = diff_until(&mut ws, "the new event in the tail", |d| {
        d.contains("OrderLate")
    });
    assert!(d.contains("order-3"), "{d}");
    // The older events moved down a row: sent as their old places, not again.
    assert!(d.contains(r#""km":1"#), "{d}");
    assert!(!d.contains("x-2"), "a moved row carries no values: {d}");

    // A stream by patch link: its events, newest first, data pretty-printed and escaped, the
    // big integer as stored.
    let reply = patch(
        &mut ws,
        "2",
        &format!("http://{}/live/events?stream=x-1", site.addr),
    );
    assert!(reply.contains("Reading stream"), "{reply}");
    let shown = diff_until(&mut ws, "the stream's events", |d| d.contains("ThingMade"));
    assert!(shown.contains("&lt;b&gt;bold&lt;/b&gt;"), "{shown}");
    assert!(!shown.contains("<b>"), "{shown}");
    let big = "&quot;big&quot;: 12345678901234567890,\\n  &quot;n&quot;: 2";
    assert!(shown.contains(big), "{shown}");
    let (two, one) = (
        shown.find("&quot;n&quot;: 2").unwrap(),
        shown.find("&quot;n&quot;: 1").unwrap(),
    );
    assert!(two < one, "newest first: {shown}");

    // The shown stream gets a new event: the page reads it again.
    rt.block_on(store.append(
        "x-1",
        ExpectedVersion::Exact(1),
        vec![event("ThingFixed", json!({"n": 3}))],
    ))
    .unwrap();
    diff_until(&mut ws, "the shown stream's new event", |d| {
        d.contains("&quot;n&quot;: 3")
    });

    // A valid id with no events, then bad ones: a message each, the view alive.
    patch(&mut ws, "3", "/live/events?stream=nothing-here");
    diff_until(&mut ws, "the empty stream's message", |d| {
        d.contains("has no events")
    });
    let dollar = patch(&mut ws, "4", "/live/events?stream=%24all");
    assert!(
        dollar.contains("is not a valid stream id") && dollar.contains("reserved"),
        "{dollar}"
    );
    let long = patch(
        &mut ws,
        "5",
        &format!("/live/events?stream={}", "a".repeat(300)),
    );
    assert!(long.contains("300 bytes long, the limit is 255"), "{long}");
    let none = patch(&mut ws, "6", "/live/events");
    assert!(none.contains("No stream selected"), "{none}");
    let control = patch(&mut ws, "7", "/live/events?stream=a%0Ab");
    assert!(control.contains("control character"), "{control}");
    // And the form opens a stream by patching the URL.
    let m = json!(["1", "8", "lv:v", "event", {"type": "form", "event": "open", "value": "stream=order-1"}]);
    ws.send(Message::text(m.to_string())).unwrap();
    diff_until(&mut ws, "order-1's events", |d| d.contains("OrderPaid"));

    // Over plain HTTP too: the message, not an error page.
    let page = site
        .client()
        .get("/live/events?stream=%24all", &[])
        .unwrap();
    assert_eq!(page.status, 200);
    assert!(
        page.text().contains("is not a valid stream id"),
        "{}",
        page.text()
    );
}

#[test]
fn without_a_store_there_is_no_event_browser() {
    let site = TestSite::start(config(&site_dir()));
    assert_eq!(site.client().get("/live/events", &[]).unwrap().status, 404);
    assert_eq!(site.client().get("/live/orders", &[]).unwrap().status, 200);
}
