//! A galleon-live mount served by axum (`galleon_axum::live`, feature `live`) on 127.0.0.1:0:
//! the page and its tokens, the socket joined with tokio-tungstenite and an event's diff, the
//! socket's refusals (no CSRF token, not a WebSocket request, no upgradable connection), the
//! scripts, the shutdown variant, and the paths axum cannot route.

use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use galleon_axum::live::{live_routes, live_routes_with_shutdown};
use galleon_live::{Live, LiveView, Message, Socket, ViewError};
use galleon_template::Engine;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};
use tower::ServiceExt as _;

/// How long any one wait lasts before the test fails.
const WAIT: Duration = Duration::from_secs(20);

struct Counter;

impl LiveView for Counter {
    fn mount(&mut self, _: &Value, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("count", 0);
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        if ev == "inc" {
            s.update_int("count", |n| n + 1);
        }
        Ok(())
    }
}

fn engine() -> Engine {
    Engine::builder()
        .live(true)
        .from_source(
            "counter",
            r#"<button phx-click="inc"><%= @count %></button>"#,
        )
        .unwrap()
}

fn live(prefix: &str) -> Live {
    Live::builder(&engine())
        .view("/counter", "counter", || Counter)
        .prefix(prefix)
        .build()
        .unwrap()
}

/// Serves `app` with `axum::serve` on 127.0.0.1:0, on the test's runtime.
async fn serve(app: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A plain HTTP/1.1 GET: status, head (lowercase names, as hyper sends them), body.
async fn get(addr: SocketAddr, target: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut buf))
        .await
        .expect("the response within the wait")
        .unwrap();
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a whole head");
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head[9..12].parse().unwrap();
    (status, head, buf[end + 4..].to_vec())
}

/// The value of attribute `attr` in `html`'s first element that has it.
fn attr(html: &str, attr: &str) -> String {
    let key = format!("{attr}=\"");
    let start = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {attr} in {html}"))
        + key.len();
    html[start..][..html[start..].find('"').unwrap()].to_owned()
}

/// The page at `path`: its session token and its CSRF token.
async fn tokens(addr: SocketAddr, path: &str) -> (String, String) {
    let (status, head, body) = get(addr, path).await;
    let body = String::from_utf8(body).unwrap();
    assert_eq!(status, 200, "{head}\n{body}");
    let at = body.find("name=\"csrf-token\"").expect("a csrf-token meta");
    (
        attr(&body, "data-phx-session"),
        attr(&body[at..], "content"),
    )
}

type Ws = WebSocketStream<TcpStream>;

/// Opens the socket as the JavaScript client does; `csrf: None` leaves the token out.
async fn connect(addr: SocketAddr, prefix: &str, csrf: Option<&str>) -> Result<Ws, WsError> {
    let query = match csrf {
        Some(t) => format!("?_csrf_token={t}&vsn=2.0.0"),
        None => "?vsn=2.0.0".to_owned(),
    };
    let req = format!("ws://{addr}{prefix}/websocket{query}")
        .into_client_request()
        .unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::client_async(req, tcp))
        .await
        .expect("the handshake within the wait")?;
    Ok(ws)
}

async fn push(ws: &mut Ws, msg_ref: &str, event: &str, payload: Value) {
    let m = Message {
        join_ref: Some("1".into()),
        msg_ref: Some(msg_ref.into()),
        topic: "lv:phx-t".into(),
        event: event.into(),
        payload,
    };
    ws.send(WsMessage::text(m.encode())).await.unwrap();
}

/// The next frame: a channel message, or the close code (`Err`; 0 when there was none).
async fn next(ws: &mut Ws) -> Result<Message, u16> {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame within the wait");
        match frame {
            Some(Ok(WsMessage::Text(t))) => return Ok(Message::decode(&t).unwrap()),
            Some(Ok(WsMessage::Close(c))) => return Err(c.map_or(0, |c| c.code.into())),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Err(0),
        }
    }
}

/// Opens the socket with `path`'s tokens and joins its view; returns the socket.
async fn joined(addr: SocketAddr, prefix: &str, path: &str) -> Ws {
    let (session, csrf) = tokens(addr, path).await;
    let mut ws = connect(addr, prefix, Some(&csrf)).await.unwrap();
    let payload = json!({
        "url": format!("http://{addr}{path}"),
        "params": {"_csrf_token": csrf, "_mounts": 0},
        "session": session,
        "static": "",
        "sticky": false,
    });
    push(&mut ws, "1", "phx_join", payload).await;
    let reply = next(&mut ws).await.expect("the join's reply");
    assert_eq!(reply.event, "phx_reply");
    assert_eq!(reply.payload["status"], "ok", "{reply:?}");
    assert_eq!(
        reply.payload["response"]["rendered"],
        json!({"0": "0", "s": ["<button phx-click=\"inc\">", "</button>"]})
    );
    ws
}

/// Waits (up to the wait) for `cond`.
async fn eventually(mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "condition not met");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_page_is_served_then_joined_then_diffed() {
    let live = live("/live");
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "home" }))
        .merge(live_routes(live.clone()).unwrap());
    let addr = serve(app).await;

    let (status, head, body) = get(addr, "/counter").await;
    let body = String::from_utf8(body).unwrap();
    assert_eq!(status, 200, "{head}");
    assert!(
        head.contains("content-type: text/html; charset=utf-8"),
        "{head}"
    );
    assert!(head.contains("cache-control: private, no-store"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}", body.len())),
        "{head}"
    );
    assert!(body.contains("data-phx-session=\""), "{body}");
    assert!(
        body.contains("<button phx-click=\"inc\">0</button>"),
        "{body}"
    );
    assert!(
        body.contains("/live/assets/phoenix_live_view.min.js"),
        "{body}"
    );
    // The application's own route is still there.
    assert_eq!(get(addr, "/").await.2, b"home");

    let mut ws = joined(addr, "/live", "/counter").await;
    assert_eq!(live.stats().sockets_open, 1);
    push(
        &mut ws,
        "2",
        "event",
        json!({"type": "click", "event": "inc", "value": {}}),
    )
    .await;
    let m = next(&mut ws).await.expect("the event's reply");
    assert_eq!(m.msg_ref.as_deref(), Some("2"));
    assert_eq!(
        m.payload,
        json!({"status": "ok", "response": {"diff": {"0": "1"}}})
    );
    assert_eq!(live.stats().events, 1);

    ws.close(None).await.unwrap();
    let l = live.clone();
    eventually(move || l.stats().sockets_open == 0).await;
}

#[tokio::test]
async fn the_socket_refuses_a_missing_csrf_token_and_a_plain_get() {
    let live = live("/live");
    let addr = serve(live_routes(live.clone()).unwrap()).await;

    match connect(addr, "/live", None).await {
        Err(WsError::Http(resp)) => assert_eq!(resp.status(), 403),
        other => panic!("expected a 403, got {other:?}"),
    }
    assert_eq!(live.stats().sockets_refused, 1);

    let (status, head, body) = get(addr, "/live/websocket").await;
    assert_eq!(status, 426, "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");
    assert!(
        String::from_utf8_lossy(&body).contains("open it as a WebSocket"),
        "{body:?}"
    );
    assert_eq!(live.stats().sockets_open, 0);
}

#[tokio::test]
async fn the_scripts_are_served_under_the_prefix() {
    let live = live("/lv");
    assert_eq!(live.prefix(), "/lv");
    let addr = serve(live_routes(live).unwrap()).await;

    let (status, head, body) = get(addr, "/lv/assets/phoenix.min.js").await;
    assert_eq!(status, 200, "{head}");
    assert_eq!(body, galleon_live::assets::PHOENIX_JS);
    assert!(
        head.contains("content-type: text/javascript; charset=utf-8"),
        "{head}"
    );
    assert!(
        head.contains(&format!("content-length: {}", body.len())),
        "{head}"
    );
    let (status, _, body) = get(addr, "/lv/assets/phoenix_live_view.min.js").await;
    assert_eq!(status, 200);
    assert_eq!(body, galleon_live::assets::LIVE_VIEW_JS);
    let (status, head, body) = get(addr, "/lv/assets/app.js").await;
    assert_eq!(status, 200, "{head}");
    assert!(String::from_utf8_lossy(&body).contains("\"/lv\""));
    assert_eq!(get(addr, "/lv/assets/nope.js").await.0, 404);
    // The page names the scripts and the socket under the same prefix.
    let (_, _, page) = get(addr, "/counter").await;
    assert!(String::from_utf8_lossy(&page).contains("/lv/assets/app.js"));
    let _ws = joined(addr, "/lv", "/counter").await;
}

#[tokio::test]
async fn the_shutdown_future_closes_the_sockets_with_1001() {
    let live = live("/live");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = live_routes_with_shutdown(live.clone(), async move {
        let _ = stopped.await;
    })
    .unwrap();
    let addr = serve(app).await;
    let mut ws = joined(addr, "/live", "/counter").await;
    let mut other = joined(addr, "/live", "/counter").await;
    assert_eq!(live.stats().sockets_open, 2);
    stop.send(()).unwrap();
    assert_eq!(next(&mut ws).await.unwrap_err(), 1001);
    assert_eq!(next(&mut other).await.unwrap_err(), 1001);
    let l = live.clone();
    eventually(move || l.stats().sockets_open == 0).await;
}

#[tokio::test]
async fn a_request_without_an_upgradable_connection_is_a_500_and_frees_its_place() {
    let live = live("/live");
    let app: axum::Router = live_routes(live.clone()).unwrap();
    // `oneshot` runs the router without hyper: no `OnUpgrade` on the request.
    let req = http::Request::get("/live/websocket?_csrf_token=x&vsn=2.0.0")
        .header("host", "example.com")
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = app.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 500);
    assert_eq!(live.stats().sockets_open, 0);
}

#[tokio::test]
async fn a_view_at_a_path_that_is_not_the_routers_is_a_404() {
    let app: axum::Router = live_routes(live("/live")).unwrap();
    let req = http::Request::get("/other")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(app.oneshot(req).await.unwrap().status(), 404);
}

fn routes_of(path: &str, prefix: &str) -> Result<axum::Router, galleon_axum::LiveRoutesError> {
    let live = Live::builder(&engine())
        .view(path, "counter", || Counter)
        .prefix(prefix)
        .build()
        .unwrap();
    live_routes(live)
}

#[tokio::test]
async fn paths_axum_cannot_route_are_an_error_and_braces_are_literal() {
    let e = routes_of("/:id", "/live").unwrap_err();
    assert_eq!(e.path(), "/:id");
    assert!(e.to_string().contains("`:` or `*`"), "{e}");
    assert_eq!(routes_of("/c", "/*x").unwrap_err().path(), "/*x");

    // A brace is a character of the path, not a capture.
    let app = routes_of("/a{b}", "/live").unwrap();
    for (target, status) in [("/a{b}", 200), ("/ab", 404), ("/ax", 404)] {
        let req = http::Request::get(target)
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(app.clone().oneshot(req).await.unwrap().status(), status);
    }
}
