//! The pages as a LiveView user meets them: headless Chromium running the vendored, unmodified
//! `phoenix` and `phoenix_live_view` clients against a live mount served here. A counter, a
//! validated form, a 300-row list changed from elsewhere, and patched URLs. Navigation and
//! reconnects are in `browser_nav.rs`. Skipped loudly without chromium.

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use common::browser_server::{
    BrowserServer, assert_clean_console, recording_layout, sent, wait_connected,
};
use common::serve::{self, WAIT};
use common::webdriver::Browser;
use galleon_live::{Info, Live, LiveView, Socket, ViewError};
use galleon_template::{Engine, Value as TValue};
use serde_json::{Value, json};

fn engine(sources: &[(&str, &str)]) -> Engine {
    Engine::builder()
        .live(true)
        .from_sources(sources.iter().copied())
        .unwrap()
}

struct Counter;

impl LiveView for Counter {
    fn mount(&mut self, _: &Value, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("count", 0);
        s.page_title("Counter 0");
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, v: &Value, s: &mut Socket) -> Result<(), ViewError> {
        match ev {
            "inc" => {
                let by: i64 = v["by"]
                    .as_str()
                    .unwrap_or("1")
                    .parse()
                    .map_err(|_| "bad by")?;
                s.update_int("count", |n| n + by);
                let title = format!("Counter {}", s.int("count"));
                s.page_title(&title);
            }
            other => return Err(format!("unknown event {other}").into()),
        }
        Ok(())
    }
}

const COUNTER: &str = r#"<h1>Counter</h1><p id="count"><%= @count %></p>
<button id="inc" phx-click="inc" phx-value-by="2">+2</button>"#;

#[test]
fn a_counter_renders_first_then_connects_and_counts_clicks() {
    let Some(b) = Browser::start() else { return };
    let e = engine(&[("counter", COUNTER)]);
    let live = Live::builder(&e)
        .view("/counter", "counter", || Counter)
        .layout(recording_layout)
        .build()
        .unwrap();
    let s = BrowserServer::start(&live);

    // The first paint is plain HTML, before any script runs: the count is already there.
    let (status, _, body) = s.block_on(serve::get(s.addr, "/counter", &[]));
    assert_eq!(status, 200);
    assert!(body.contains("<p id=\"count\">0</p>"), "{body}");
    assert!(!body.contains("phx-connected"), "{body}");

    b.goto(&s.url("/counter"));
    b.wait_text("#count", "0");
    wait_connected(&b);
    assert_eq!(live.stats().joins, 1);
    for n in 1..=5 {
        b.click("#inc");
        b.wait_text("#count", &(2 * n).to_string());
    }
    b.wait_until("the title to follow", WAIT, |b| {
        b.execute("return document.title;", vec![]) == json!("Counter 10")
    });
    let clicks = sent(&b, "event");
    assert_eq!(clicks.len(), 5, "{clicks:#?}");
    // A click's value holds the phx-value-* and the element's own (empty) `value`.
    assert_eq!(
        clicks[0][4],
        json!({"type": "click", "event": "inc", "value": {"by": "2", "value": ""}})
    );
    let join = &sent(&b, "phx_join")[0][4];
    assert_eq!(join["url"], s.url("/counter"), "{join}");
    assert_eq!(join["params"]["_mounts"], 0, "{join}");
    assert_eq!(live.stats().events, 5);
    assert_clean_console(&b);
}

struct Form;

impl LiveView for Form {
    fn mount(&mut self, _: &Value, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("name", "");
        s.assign("error", "");
        s.assign("saved", "nothing saved");
        s.assign("key", "no key");
        s.assign("target", "no target");
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, v: &Value, s: &mut Socket) -> Result<(), ViewError> {
        match ev {
            "validate" | "save" => {
                let name = v["user"]["name"]
                    .as_str()
                    .ok_or("no user[name]")?
                    .to_owned();
                let short = name.chars().count() < 3;
                s.assign("error", if short { "name too short" } else { "" });
                if ev == "save" {
                    let saved = if short {
                        "not saved".into()
                    } else {
                        format!("saved {name}")
                    };
                    s.assign("saved", saved);
                }
                s.assign("name", name);
                if let Some(target) = v["_target"].as_array() {
                    let path: Vec<&str> = target.iter().filter_map(Value::as_str).collect();
                    s.assign("target", path.join("."));
                }
            }
            "key" => {
                let key = v["key"].as_str().ok_or("no key")?;
                let value = v["value"].as_str().ok_or("no value")?;
                s.assign("key", format!("{key}|{value}"));
            }
            other => return Err(format!("unknown event {other}").into()),
        }
        Ok(())
    }
}

const FORM: &str = r#"<form id="f" phx-change="validate" phx-submit="save">
<input id="name" type="text" name="user[name]" value="<%= @name %>">
<p id="error"><%= @error %></p><p id="target"><%= @target %></p><p id="echo"><%= @name %></p>
<button id="save" type="submit">Save</button>
</form>
<p id="saved"><%= @saved %></p>
<input id="search" type="text" name="q" phx-keyup="key">
<p id="key"><%= @key %></p>"#;

#[test]
fn a_form_validates_as_you_type_and_submits() {
    let Some(b) = Browser::start() else { return };
    let e = engine(&[("form", FORM)]);
    let live = Live::builder(&e)
        .view("/form", "form", || Form)
        .layout(recording_layout)
        .build()
        .unwrap();
    let s = BrowserServer::start(&live);
    b.goto(&s.url("/form"));
    wait_connected(&b);

    b.clear_and_type("#name", "Al");
    b.wait_text("#error", "name too short");
    // The field that changed reaches the view as Phoenix decodes it: `["user", "name"]`.
    b.wait_text("#target", "user.name");
    b.send_keys("#name", "ice");
    b.wait_text("#echo", "Alice");
    b.wait_text("#error", "");
    // A change: the form urlencoded in `value`, the field that changed in `meta`.
    let last = sent(&b, "event").pop().unwrap();
    assert_eq!(
        last[4],
        json!({"type": "form", "event": "validate", "value": "user%5Bname%5D=Alice",
               "meta": {"_target": "user[name]"}, "uploads": {}})
    );

    b.click("#save");
    b.wait_text("#saved", "saved Alice");
    b.clear_and_type("#name", "Bo");
    b.wait_text("#error", "name too short");
    b.click("#save");
    b.wait_text("#saved", "not saved");
    let submit = sent(&b, "event")
        .into_iter()
        .rfind(|m| m[4]["event"] == "save")
        .unwrap();
    assert_eq!(
        submit[4],
        json!({"type": "form", "event": "save", "value": "user%5Bname%5D=Bo", "meta": {}})
    );

    b.send_keys("#search", "xy");
    b.wait_text("#key", "y|xy");
    let key = sent(&b, "event")
        .into_iter()
        .rfind(|m| m[4]["event"] == "key")
        .unwrap();
    assert_eq!(
        key[4],
        json!({"type": "keyup", "event": "key", "value": {"key": "y", "value": "xy"}})
    );
    assert_clean_console(&b);
}

/// The rows every list view shows, and the mount they are broadcast on.
#[derive(Clone, Default)]
struct Store {
    rows: Arc<Mutex<Vec<String>>>,
    live: Arc<OnceLock<Live>>,
}

/// Broadcast on topic `rows` when a row changed.
struct RowsChanged;

const ROWS: usize = 300;

impl Store {
    fn new() -> Store {
        let rows = (0..ROWS).map(|i| format!("item number {i}")).collect();
        Store {
            rows: Arc::new(Mutex::new(rows)),
            live: Arc::default(),
        }
    }

    /// Sets row `i`'s label and tells every list view.
    fn set(&self, i: usize, label: &str) -> Result<usize, ViewError> {
        let mut rows = self.rows.lock().unwrap();
        *rows.get_mut(i).ok_or("no such row")? = label.to_owned();
        drop(rows);
        let live = self.live.get().ok_or("not built")?;
        Ok(live.broadcast("rows", Info::new(RowsChanged)))
    }

    fn assign(&self, s: &mut Socket) {
        let rows: Vec<Value> = (self.rows.lock().unwrap().iter().enumerate())
            .map(|(i, label)| json!({"id": i, "label": label}))
            .collect();
        s.assign("rows", TValue::from(Value::Array(rows)));
    }
}

struct List(Store);

impl LiveView for List {
    fn mount(&mut self, _: &Value, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        self.0.assign(s);
        s.subscribe("rows");
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, v: &Value, _: &mut Socket) -> Result<(), ViewError> {
        if ev != "set" {
            return Err(format!("unknown event {ev}").into());
        }
        let i = v["id"]
            .as_str()
            .and_then(|i| i.parse().ok())
            .ok_or("bad id")?;
        self.0.set(i, v["label"].as_str().ok_or("no label")?)?;
        Ok(())
    }
    fn handle_info(&mut self, info: Info, s: &mut Socket) -> Result<(), ViewError> {
        if info.downcast_ref::<RowsChanged>().is_some() {
            self.0.assign(s);
        }
        Ok(())
    }
}

const LIST: &str = r#"<ul id="rows"><%= for row <- @rows do %><li id="row-<%= row.id %>"><%= row.label %></li><% end %></ul>"#;

/// Every row's text, in order.
fn row_texts(b: &Browser) -> Vec<String> {
    let v = b.execute(
        "return Array.from(document.querySelectorAll('#rows li')).map(function(l){return l.textContent;});",
        vec![],
    );
    serde_json::from_value(v).unwrap()
}

#[test]
fn one_row_of_three_hundred_changed_elsewhere_is_one_small_diff() {
    let Some(b) = Browser::start() else { return };
    let e = engine(&[("list", LIST)]);
    let store = Store::new();
    let factory = store.clone();
    let live = Live::builder(&e)
        .view("/list", "list", move || List(factory.clone()))
        .layout(recording_layout)
        .build()
        .unwrap();
    store.live.set(live.clone()).unwrap();
    let s = BrowserServer::start(&live);
    b.goto(&s.url("/list"));
    wait_connected(&b);
    let mut expected: Vec<String> = (0..ROWS).map(|i| format!("item number {i}")).collect();
    assert_eq!(row_texts(&b), expected);
    let joined = live.stats();
    assert!(joined.rendered_bytes > 7_000, "{joined:?}");
    assert_eq!(live.subscribers("rows"), 1);

    // From the server: a broadcast, as an event store's append would send.
    store.rows.lock().unwrap()[150] = "changed by a broadcast".into();
    assert_eq!(live.broadcast("rows", Info::new(RowsChanged)), 1);
    b.wait_text("#row-150", "changed by a broadcast");
    expected[150] = "changed by a broadcast".into();
    assert_eq!(row_texts(&b), expected);
    let after = live.stats();
    assert_eq!(after.diffs, joined.diffs + 1, "{after:?}");
    let bytes = after.diff_bytes - joined.diff_bytes;
    assert!(bytes < 300, "one row's diff took {bytes} bytes");

    // From another client: its own socket joins the list and sends an event.
    let mut other = s.block_on(async {
        let (session, csrf) = serve::tokens(s.addr, "/list").await;
        let mut ws = serve::connect(s.addr, &csrf, None).await.unwrap();
        let reply = serve::join(&mut ws, s.addr, "/list", &session).await;
        assert_eq!(reply.payload["status"], "ok", "{reply:?}");
        let set = json!({"type": "click", "event": "set",
                         "value": {"id": "42", "label": "changed by another client"}});
        serve::push(&mut ws, "1", "2", "lv:phx-t", "event", set).await;
        ws
    });
    b.wait_text("#row-42", "changed by another client");
    expected[42] = "changed by another client".into();
    assert_eq!(row_texts(&b), expected);
    // The other client gets the same one-row diff, pushed.
    let pushed = s.block_on(async {
        loop {
            let m = serve::expect(&mut other).await;
            if m.event == "diff" {
                break m;
            }
        }
    });
    assert_eq!(
        pushed.payload,
        json!({"0": {"k": {"42": {"1": "changed by another client"}, "kc": 300}}})
    );
    let end = live.stats();
    assert!(end.largest_diff < 300, "{end:?}");
    assert_clean_console(&b);
}

struct Pages;

impl LiveView for Pages {
    fn mount(&mut self, _: &Value, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("patches", 0);
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        match ev {
            "jump" => s.push_patch("/pages?page=5"),
            other => return Err(format!("unknown event {other}").into()),
        }
        Ok(())
    }
    fn handle_params(&mut self, p: &Value, _: &str, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("page", p["page"].as_str().unwrap_or("1"));
        s.update_int("patches", |n| n + 1);
        Ok(())
    }
}

const PAGES: &str = r#"<p id="page">page <%= @page %></p><p id="params"><%= @patches %></p>
<a id="next" href="/pages?page=2" data-phx-link="patch" data-phx-link-state="push">next</a>
<button id="jump" phx-click="jump">jump</button>"#;

#[test]
fn patch_links_and_push_patch_change_the_url_without_a_reload() {
    let Some(b) = Browser::start() else { return };
    let e = engine(&[("pages", PAGES)]);
    let live = Live::builder(&e)
        .view("/pages", "pages", || Pages)
        .layout(recording_layout)
        .build()
        .unwrap();
    let s = BrowserServer::start(&live);
    b.goto(&s.url("/pages"));
    wait_connected(&b);
    b.wait_text("#page", "page 1");
    b.execute("window.__marker = 1;", vec![]);
    let marker = |b: &Browser| b.execute("return window.__marker;", vec![]);

    b.click("#next");
    b.wait_until("the patched URL", WAIT, |b| {
        b.current_url() == s.url("/pages?page=2")
    });
    b.wait_text("#page", "page 2");
    assert_eq!(marker(&b), json!(1), "the page reloaded");

    b.back();
    b.wait_until("the first URL", WAIT, |b| {
        b.current_url() == s.url("/pages")
    });
    b.wait_text("#page", "page 1");
    assert_eq!(marker(&b), json!(1), "the page reloaded");

    b.click("#jump");
    b.wait_until("the pushed URL", WAIT, |b| {
        b.current_url() == s.url("/pages?page=5")
    });
    b.wait_text("#page", "page 5");
    assert_eq!(marker(&b), json!(1), "the page reloaded");
    // handle_params ran at mount, for the link, for back, for push_patch: once each.
    b.wait_text("#params", "4");
    let patches = sent(&b, "live_patch");
    // The link and the back button; push_patch is the server's own, nothing comes back.
    let urls: Vec<&Value> = patches.iter().map(|m| &m[4]["url"]).collect();
    assert_eq!(
        urls,
        [&json!(s.url("/pages?page=2")), &json!(s.url("/pages"))]
    );
    assert_eq!(live.stats().page_renders, 1);
    assert_clean_console(&b);
}
