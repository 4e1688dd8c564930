//! The example app: the page in its layout and hot reload through `Router::handle`; the event
//! store behind its tokens, an event stream, and the statistics through a real server on
//! 127.0.0.1.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use galleon_client::Client;
use galleon_eventstore::Store;
use galleon_eventstore_http::Access;
use galleon_example_http::App;
use galleon_http::{Method, Request, Server, ServerConfig};

const READ: &str = "read-token-0123456789";
const APPEND: &str = "append-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";
/// Longest wait for a change to show.
const WAIT: Duration = Duration::from_secs(10);

/// The app on a copy of its templates (in `templates`) and a fresh SQLite file in `data`.
async fn app(templates: &Path, data: &Path) -> App {
    for name in ["layout.html.eex", "index.html.eex"] {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("templates")
            .join(name);
        std::fs::copy(from, templates.join(name)).unwrap();
    }
    let store = Store::open(&format!("sqlite:{}/e.db", data.display()))
        .await
        .unwrap();
    let access = Access {
        read: Some(READ.into()),
        append: Some(APPEND.into()),
        admin: Some(ADMIN.into()),
        ..Access::default()
    };
    galleon_example_http::app(templates, Duration::from_millis(20), store, access).unwrap()
}

async fn home(app: &App) -> (u16, String) {
    let resp = app
        .router
        .handle(Request::new(Method::Get, "/", &[], Default::default()))
        .await;
    let status = resp.status().0;
    let body = resp.body().as_full().expect("a whole page").to_vec();
    (status, String::from_utf8(body).unwrap())
}

async fn wait_for_home(app: &App, want: &str) -> String {
    let started = Instant::now();
    loop {
        let (_, body) = home(app).await;
        if body.contains(want) || started.elapsed() > WAIT {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_renders_in_its_layout_and_reloads_keeping_the_last_good_set() {
    let (templates, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let app = app(templates.path(), data.path()).await;
    let (status, body) = home(&app).await;
    assert_eq!(status, 200);
    assert!(
        body.contains("<title>galleon on galleon-http</title>"),
        "{body}"
    );
    assert!(body.contains("<li>stats</li>"), "{body}");
    let index = templates.path().join("index.html.eex");
    std::fs::write(&index, "<p>edited</p>").unwrap();
    let body = wait_for_home(&app, "<p>edited</p>").await;
    assert!(body.contains("<p>edited</p>"), "{body}");
    // Broken: the last good set keeps serving.
    std::fs::write(&index, "<p><%= @title + %></p>").unwrap();
    // Time for the watch to see the change and refuse it (a pass does not depend on it).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, body) = home(&app).await;
    assert_eq!(
        (status, body.contains("<p>edited</p>")),
        (200, true),
        "{body}"
    );
    std::fs::write(&index, "<p>fixed</p>").unwrap();
    let body = wait_for_home(&app, "<p>fixed</p>").await;
    assert!(body.contains("<p>fixed</p>"), "{body}");
}

/// The app served on 127.0.0.1:0 by a runtime on its own thread, until the returned sender drops.
fn serve(app: App) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let server = Server::new(app.router, ServerConfig::default()).with_observer(app.stats);
            server
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    (rx.recv().unwrap(), stop)
}

#[test]
fn the_event_store_its_stream_and_the_statistics_through_a_server() {
    let (templates, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let app = rt.block_on(app(templates.path(), data.path()));
    let (addr, _stop) = serve(app);
    let mut c = Client::connect(addr, WAIT).unwrap();
    let batch = br#"[{"type":"Placed","data":{"n":1}}]"#;
    let bearer = |t: &str| format!("Bearer {t}");
    let post = |c: &mut Client, token: Option<&str>| {
        let auth = token.map(bearer);
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("authorization", a.as_str())).collect();
        c.request("POST", "/streams/order-1", &headers, batch)
            .unwrap()
            .status
    };
    assert_eq!(post(&mut c, None), 401);
    assert_eq!(post(&mut c, Some(READ)), 403);
    assert_eq!(post(&mut c, Some(APPEND)), 201);

    // An event stream: the stored event, then a live one.
    let mut sub = std::net::TcpStream::connect(addr).unwrap();
    sub.set_read_timeout(Some(WAIT)).unwrap();
    let head =
        format!("GET /all/subscribe HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {READ}\r\n\r\n");
    std::io::Write::write_all(&mut sub, head.as_bytes()).unwrap();
    let admin = bearer(ADMIN);
    let live = br#"[{"type":"Shipped","data":{}}]"#;
    let r = c
        .request(
            "POST",
            "/streams/order-1",
            &[("authorization", admin.as_str())],
            live,
        )
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let (mut got, started) = (Vec::new(), Instant::now());
    while !String::from_utf8_lossy(&got).contains("event: Shipped") {
        assert!(
            started.elapsed() < WAIT,
            "{}",
            String::from_utf8_lossy(&got)
        );
        let mut buf = [0; 4096];
        let n = galleon_client::read_some(&mut sub, &mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.contains("text/event-stream") && text.contains("event: Placed"),
        "{text}"
    );

    for _ in 0..3 {
        assert_eq!(c.get("/", &[]).unwrap().status, 200);
    }
    let metrics = c.get("/metrics", &[]).unwrap().text();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("galleon_http_requests_total{") && l.contains(r#"route="/""#))
        .unwrap_or_else(|| panic!("no counter for /: {metrics}"));
    assert!(line.ends_with(" 3"), "{line}");
    let page = c.get("/_galleon", &[]).unwrap();
    assert_eq!(page.status, 200);
}
