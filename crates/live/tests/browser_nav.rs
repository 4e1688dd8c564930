//! Leaving and losing a live page in headless Chromium, the vendored clients unmodified: a
//! server restarted under the client (the same secret: it rejoins in place; another secret: its
//! tokens are stale and it reloads), `push_navigate` and live links between two views, and a
//! redirect to a plain page. Skipped loudly without chromium.

mod common;

use common::browser_server::{
    BrowserServer, assert_clean_console, recording_layout, sent, wait_connected,
};
use common::serve::WAIT;
use common::webdriver::Browser;
use galleon_live::{Live, LiveView, Signer, Socket, ViewError};
use galleon_template::Engine;
use serde_json::{Value, json};

/// A counter that can also send its client elsewhere.
struct Counter(&'static str);

impl LiveView for Counter {
    fn mount(&mut self, _: &Value, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("count", 0);
        s.assign("name", self.0);
        s.page_title(self.0);
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        match ev {
            "inc" => s.update_int("count", |n| n + 1),
            "to_b" => s.push_navigate("/b"),
            "plain" => s.redirect("/plain"),
            other => return Err(format!("unknown event {other}").into()),
        }
        Ok(())
    }
}

const VIEW: &str = r#"<h1 id="name"><%= @name %></h1><p id="count"><%= @count %></p>
<button id="inc" phx-click="inc">+</button>
<button id="to_b" phx-click="to_b">to b</button>
<button id="plain" phx-click="plain">plain</button>
<a id="link_a" href="/a" data-phx-link="redirect" data-phx-link-state="push">to a</a>"#;

/// Views `/a` and `/b`, their tokens signed with `secret`.
fn live(secret: u8) -> Live {
    let engine = Engine::builder()
        .live(true)
        .from_source("view", VIEW)
        .unwrap();
    Live::builder(&engine)
        .view("/a", "view", || Counter("view a"))
        .view("/b", "view", || Counter("view b"))
        .signer(Signer::new(&[secret; 32]).unwrap())
        .layout(recording_layout)
        .build()
        .unwrap()
}

fn marker(b: &Browser) -> Value {
    b.execute(
        "return window.__marker === undefined ? null : window.__marker;",
        vec![],
    )
}

/// Clicks `+` and waits for the count to read 1, 2, .. `n`.
fn count_to(b: &Browser, n: u32) {
    for i in 1..=n {
        b.click("#inc");
        b.wait_text("#count", &i.to_string());
    }
}

/// Waits until the client noticed its socket is gone.
fn wait_disconnected(b: &Browser) {
    b.wait_until("the view to lose its socket", WAIT, |b| {
        b.execute(
            "var m = document.querySelector('[data-phx-main]');\
             return !!m && !m.classList.contains('phx-connected');",
            vec![],
        ) == json!(true)
    });
}

#[test]
fn the_client_rejoins_a_restarted_server_or_reloads_when_its_tokens_are_stale() {
    let Some(b) = Browser::start() else { return };
    let first = live(7);
    let s = BrowserServer::start(&first);
    let port = s.addr.port();
    let url = s.url("/a");
    b.goto(&url);
    wait_connected(&b);
    count_to(&b, 2);
    b.execute("window.__marker = 1;", vec![]);

    // The same secret: the page's tokens still verify, the client rejoins where it is.
    s.stop();
    wait_disconnected(&b);
    let second = live(7);
    let s = BrowserServer::start_on(&second, port);
    wait_connected(&b);
    // A new server mounts the view afresh.
    b.wait_text("#count", "0");
    count_to(&b, 3);
    assert_eq!(marker(&b), json!(1), "the page reloaded");
    let st = second.stats();
    assert_eq!(
        (st.page_renders, st.joins, st.joins_refused),
        (0, 1, 0),
        "{st:?}"
    );

    // Another secret: the client's tokens are stale, it reloads the page and works again.
    s.stop();
    wait_disconnected(&b);
    let third = live(9);
    let s = BrowserServer::start_on(&third, port);
    b.wait_until("the page to reload", WAIT, |b| marker(b) == Value::Null);
    wait_connected(&b);
    b.wait_text("#name", "view a");
    count_to(&b, 2);
    assert_eq!(b.current_url(), url);
    let st = third.stats();
    assert!(st.page_renders >= 1, "{st:?}");
    // The old page's join was refused as stale (its socket opened with a token that no
    // longer verifies); the reloaded page joined.
    assert!(st.joins_refused >= 1 && st.joins >= 1, "{st:?}");
    assert_eq!(st.sockets_refused, 0, "{st:?}");
    s.stop();
}

#[test]
fn push_navigate_and_live_links_switch_views_and_redirect_loads_a_plain_page() {
    let Some(b) = Browser::start() else { return };
    let live = live(7);
    let s = BrowserServer::start(&live);
    b.goto(&s.url("/a"));
    wait_connected(&b);
    count_to(&b, 1);
    b.execute("window.__marker = 1;", vec![]);

    // push_navigate from an event: another live view, no reload.
    b.click("#to_b");
    b.wait_until("view b's URL", WAIT, |b| b.current_url() == s.url("/b"));
    b.wait_text("#name", "view b");
    wait_connected(&b);
    b.wait_text("#count", "0");
    count_to(&b, 2);
    assert_eq!(marker(&b), json!(1), "the page reloaded");
    b.wait_until("view b's title", WAIT, |b| {
        b.execute("return document.title;", vec![]) == json!("view b")
    });

    // A live redirect link back to a, then browser back to b: both without a reload.
    b.click("#link_a");
    b.wait_until("view a's URL", WAIT, |b| b.current_url() == s.url("/a"));
    b.wait_text("#name", "view a");
    count_to(&b, 1);
    b.back();
    b.wait_until("view b's URL again", WAIT, |b| {
        b.current_url() == s.url("/b")
    });
    b.wait_text("#name", "view b");
    count_to(&b, 1);
    assert_eq!(marker(&b), json!(1), "the page reloaded");
    // Each navigation leaves the view and joins the next on the same topic, with `redirect`
    // where a first join has `url`.
    let events = b.execute(
        "return window.__sent.map(function(f){return JSON.parse(f)[3];})\
         .filter(function(e){return e.indexOf('phx_') == 0;});",
        vec![],
    );
    assert_eq!(
        events,
        json!([
            "phx_join",
            "phx_leave",
            "phx_join",
            "phx_leave",
            "phx_join",
            "phx_leave",
            "phx_join"
        ])
    );
    let joins = sent(&b, "phx_join");
    assert!(joins.iter().all(|j| j[2] == joins[0][2]), "{joins:?}");
    assert_eq!(joins[1][4]["redirect"], s.url("/b"), "{:?}", joins[1]);
    assert_eq!(
        joins[1][4]["params"]["_live_referer"],
        s.url("/a"),
        "{:?}",
        joins[1]
    );
    assert_eq!(live.stats().page_renders, 1);
    assert_eq!(live.stats().views_open, 1, "{:?}", live.stats());
    assert_clean_console(&b);

    // redirect: a full load of a page that is not live.
    b.click("#plain");
    b.wait_until("the plain page", WAIT, |b| {
        b.current_url() == s.url("/plain")
    });
    b.wait_text("#plain", "a plain page");
    assert!(b.page_source().contains("a plain page"));
    assert_eq!(marker(&b), Value::Null);
    // Leaving the page closed its socket, and the view with it.
    b.wait_until("the view to end", WAIT, |_| live.stats().views_open == 0);
}
