//! The example app in-process: the page in its layout, hot reload (and the error page while a
//! template is broken), the event store behind its tokens, an event stream over a real socket,
//! and the statistics routes.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use galleon_eventstore::Store;
use galleon_eventstore_http::{Access, EventsApi};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tower::ServiceExt as _;

const READ: &str = "read-token-0123456789";
const APPEND: &str = "append-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";
/// Longest wait for a change to show.
const WAIT: Duration = Duration::from_secs(10);

struct App {
    router: Router,
    api: EventsApi,
    templates: tempfile::TempDir,
    _data: tempfile::TempDir,
}

/// The app on a copy of its templates and a fresh SQLite file, a token per role.
async fn start() -> App {
    let templates = tempfile::tempdir().unwrap();
    for name in ["layout.html.eex", "index.html.eex"] {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("templates")
            .join(name);
        std::fs::copy(from, templates.path().join(name)).unwrap();
    }
    let data = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("sqlite:{}/e.db", data.path().display()))
        .await
        .unwrap();
    let access = Access {
        read: Some(READ.into()),
        append: Some(APPEND.into()),
        admin: Some(ADMIN.into()),
        ..Access::default()
    };
    let (router, api) =
        galleon_example_axum::app(templates.path(), Duration::from_millis(20), store, access)
            .unwrap();
    App {
        router,
        api,
        templates,
        _data: data,
    }
}

/// Status and body of one request from `peer`.
async fn call(
    app: &App,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: &str,
) -> (StatusCode, String) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let mut req = req.body(Body::from(body.to_owned())).unwrap();
    let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    let resp = app.router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// Polls `GET /` until its body satisfies `want`, at most [`WAIT`].
async fn wait_for_home(app: &App, want: impl Fn(StatusCode, &str) -> bool) -> (StatusCode, String) {
    let started = Instant::now();
    loop {
        let (status, body) = call(app, "GET", "/", None, "").await;
        if want(status, &body) || started.elapsed() > WAIT {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_renders_in_its_layout() {
    let app = start().await;
    let (status, body) = call(&app, "GET", "/", None, "").await;
    assert_eq!(status, 200);
    assert!(body.starts_with("<!doctype html>"), "{body}");
    assert!(body.contains("<title>galleon on axum</title>"), "{body}");
    assert!(body.contains("<h1>galleon on axum</h1>"), "{body}");
    assert!(body.contains("<li>events</li>"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_reload_and_a_broken_one_shows_its_error_to_loopback_peers() {
    let app = start().await;
    let index = app.templates.path().join("index.html.eex");
    std::fs::write(&index, "<p>edited <%= @title %></p>").unwrap();
    let (_, body) = wait_for_home(&app, |_, b| b.contains("<p>edited galleon on axum</p>")).await;
    assert!(body.contains("<p>edited galleon on axum</p>"), "{body}");
    std::fs::write(&index, "<p><%= @title + %></p>").unwrap();
    let (status, body) = wait_for_home(&app, |s, _| s == 500).await;
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("index.html.eex:1:"),
        "the located error: {body}"
    );
    std::fs::write(&index, "<p>fixed</p>").unwrap();
    let (status, body) = wait_for_home(&app, |_, b| b.contains("<p>fixed</p>")).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_store_is_behind_its_tokens() {
    let app = start().await;
    let batch = r#"[{"type":"Placed","data":{"n":1}}]"#;
    assert_eq!(
        call(&app, "POST", "/streams/order-1", None, batch).await.0,
        401
    );
    assert_eq!(
        call(&app, "POST", "/streams/order-1", Some(READ), batch)
            .await
            .0,
        403
    );
    let (status, body) = call(&app, "POST", "/streams/order-1", Some(ADMIN), batch).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(call(&app, "GET", "/all", None, "").await.0, 401);
    let (status, body) = call(&app, "GET", "/streams/order-1", Some(READ), "").await;
    assert_eq!(status, 200);
    assert!(body.contains(r#""type":"Placed""#), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statistics_count_the_pages() {
    let app = start().await;
    for _ in 0..3 {
        assert_eq!(call(&app, "GET", "/", None, "").await.0, 200);
    }
    let (status, metrics) = call(&app, "GET", "/metrics", None, "").await;
    assert_eq!(status, 200);
    let line = metrics
        .lines()
        .find(|l| l.starts_with("galleon_http_requests_total{") && l.contains(r#"route="/""#))
        .unwrap_or_else(|| panic!("no counter for /: {metrics}"));
    assert!(line.ends_with(" 3"), "{line}");
    let (status, page) = call(&app, "GET", "/_galleon", None, "").await;
    assert_eq!(status, 200);
    assert!(page.contains("<html"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_delivers_appended_events_and_ends_at_shutdown() {
    let app = start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let api = app.api.clone();
    let server = tokio::spawn(
        axum::serve(
            listener,
            app.router
                .clone()
                .into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
            api.shutdown();
        })
        .into_future(),
    );
    let mut sub = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head =
        format!("GET /all/subscribe HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {READ}\r\n\r\n");
    sub.write_all(head.as_bytes()).await.unwrap();
    let batch = r#"[{"type":"Shipped","data":{}}]"#;
    assert_eq!(
        call(&app, "POST", "/streams/order-2", Some(ADMIN), batch)
            .await
            .0,
        201
    );
    let mut got = Vec::new();
    let started = Instant::now();
    while !String::from_utf8_lossy(&got).contains("event: Shipped") {
        assert!(
            started.elapsed() < WAIT,
            "no event: {}",
            String::from_utf8_lossy(&got)
        );
        let mut buf = [0; 4096];
        let n = tokio::time::timeout(WAIT, sub.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).contains("text/event-stream"));
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, server)
        .await
        .expect("shutdown waited for the stream")
        .unwrap()
        .unwrap();
}
