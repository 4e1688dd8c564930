//! A blocking client of the site's live pages, as the JavaScript client speaks to them: a
//! page's tokens, a socket joined to its view, events and the frames that come back.

use std::net::{SocketAddr, TcpStream};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

use super::{TIMEOUT, TestSite};

pub type Ws = WebSocket<TcpStream>;

/// A page's (session token, CSRF token).
pub fn tokens(site: &TestSite, path: &str) -> (String, String) {
    let page = site.client().get(path, &[]).unwrap();
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    let attr = |from: &str, name: &str| {
        let key = format!("{name}=\"");
        let at = from.find(&key).unwrap() + key.len();
        from[at..][..from[at..].find('"').unwrap()].to_owned()
    };
    let meta = &html[html.find("name=\"csrf-token\"").unwrap()..];
    (attr(&html, "data-phx-session"), attr(meta, "content"))
}

/// A socket joined to `path`'s view as topic `lv:v`; returns it and the join's rendered.
pub fn join(addr: SocketAddr, site: &TestSite, path: &str) -> (Ws, Value) {
    let (session, csrf) = tokens(site, path);
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let url = format!("ws://{addr}/live/websocket?_csrf_token={csrf}&vsn=2.0.0");
    let (mut ws, _) = tungstenite::client(url.as_str(), stream).unwrap();
    let join = json!(["1", "1", "lv:v", "phx_join",
        {"url": format!("http://{addr}{path}"), "session": session, "params": {}}]);
    ws.send(Message::text(join.to_string())).unwrap();
    let reply = next(&mut ws);
    assert_eq!(reply[4]["status"], "ok", "{reply}");
    let rendered = reply[4]["response"]["rendered"].clone();
    (ws, rendered)
}

pub fn next(ws: &mut Ws) -> Value {
    loop {
        match ws.read().expect("a frame before the read timeout") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => continue,
        }
    }
}

/// Sends event `event` with `value` (`kind` as the client names it) and returns the reply's
/// payload, skipping the pushed diffs that arrive before it.
pub fn event(ws: &mut Ws, r: &str, kind: &str, event: &str, value: Value) -> Value {
    let m = json!(["1", r, "lv:v", "event", {"type": kind, "event": event, "value": value}]);
    ws.send(Message::text(m.to_string())).unwrap();
    // Pushes of earlier broadcasts may come first.
    loop {
        let reply = next(ws);
        if reply[3] == "diff" && reply[1].is_null() {
            continue;
        }
        assert_eq!(reply[1], r, "{reply}");
        return reply[4].clone();
    }
}

/// The next pushed diff (event `diff`) on `ws`, as text.
pub fn pushed_diff(ws: &mut Ws) -> String {
    loop {
        let m = next(ws);
        if m[3] == "diff" {
            return m[4].to_string();
        }
    }
}
