//! The example site (`examples/site/app.rs`) served by axum on 127.0.0.1:0, checked against
//! galleon's own render of the same templates: bytes, `content-length`, chunking of long pages,
//! and template errors as a 500 that shows nothing of the template.

#[path = "../examples/site/app.rs"]
#[allow(dead_code)]
mod app;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use galleon_axum::{Engine, Templates, Value};
use galleon_client::{Client, ClientResponse};

fn site_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site")
}

/// Serves `router` on 127.0.0.1:0 on a runtime of its own (a thread), for the rest of the test
/// process, and returns its address.
fn serve(router: axum::Router) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap()
}

fn site() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| serve(app::router(&site_dir()).unwrap()))
}

fn get(addr: SocketAddr, target: &str) -> ClientResponse {
    Client::connect(addr, Duration::from_secs(60))
        .unwrap()
        .get(target, &[])
        .unwrap()
}

/// galleon's own render of `page` (what `galleon render site/pages/PAGE --assign ...` prints).
fn galleon_render(page: &str, assigns: &[(&str, Value)]) -> Vec<u8> {
    let engine = app::engine(&site_dir()).unwrap();
    let mut a = galleon_axum::Assigns::new();
    if page == "big-table" {
        let data = std::fs::read_to_string(site_dir().join("data/big-table.json")).unwrap();
        a = galleon_axum::Assigns::from_json(serde_json::from_str(&data).unwrap()).unwrap();
    }
    for (k, v) in assigns {
        a.insert(k, v.clone());
    }
    engine
        .render(&format!("pages/{page}.html.eex"), &a)
        .unwrap()
        .to_vec()
}

fn assert_whole(r: &ClientResponse, want: &[u8]) {
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        r.header("content-length"),
        Some(want.len().to_string().as_str()),
        "a whole page has its exact length"
    );
    assert_eq!(r.header("transfer-encoding"), None);
    assert!(r.body == want, "body differs from galleon's render");
}

#[test]
fn blah_4k_and_400k_are_galleons_bytes_with_content_length() {
    let addr = site();
    for iters in [1, 10, 1000] {
        let want = galleon_render("blah", &[("iters", Value::Int(iters))]);
        assert_eq!(want.len(), 410 * iters as usize);
        assert_whole(&get(addr, &format!("/blah?iters={iters}")), &want);
        assert_whole(&get(addr, &format!("/blah-split?iters={iters}")), &want);
    }
}

#[test]
fn big_table_and_whole_doom_are_galleons_bytes() {
    let addr = site();
    let want = galleon_render("big-table", &[]);
    assert!(want.len() > 40_000);
    assert_whole(&get(addr, "/big-table"), &want);
    let want = galleon_render("doom", &[("iters", Value::Int(1000))]);
    assert_eq!(want.len(), 301_000);
    assert_whole(&get(addr, "/doom?iters=1000"), &want);
}

#[test]
fn a_long_doom_is_streamed_chunked_and_complete() {
    let addr = site();
    // 15 MB: past the 4 MiB whole-page bound.
    let want = galleon_render("doom", &[("iters", Value::Int(50_000))]);
    let r = get(addr, "/doom?iters=50000");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.body.len(), want.len());
    assert!(
        r.body == want,
        "streamed body differs from galleon's render"
    );
}

#[test]
fn keep_alive_serves_many_pages_on_one_connection() {
    let addr = site();
    let want = galleon_render("blah", &[("iters", Value::Int(10))]);
    let mut c = Client::connect(addr, Duration::from_secs(30)).unwrap();
    for _ in 0..50 {
        assert_whole(&c.get("/blah?iters=10", &[]).unwrap(), &want);
    }
}

/// True when `body` quotes nothing of the template: no source, no name, no path, no address.
fn says_nothing(body: &str, source: &str) {
    assert_eq!(body, "internal server error\n");
    for secret in [source, ".eex", "/", "0x", "line"] {
        assert!(!body.contains(secret), "{secret:?} in {body:?}");
    }
}

#[test]
fn a_template_error_is_a_500_that_shows_no_source() {
    // The site's own page, failing on a query value.
    let r = get(site(), "/blah?iters=%22many%22");
    assert_eq!(r.status, 500);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    says_nothing(&r.text(), "for a <- 1..@iters");

    // A template whose error message quotes its source line.
    let source = "<p>secret-source <%= @price * 2 %></p>";
    let t = Templates::new(Engine::from_source("secret/page.html.eex", source).unwrap());
    let router = axum::Router::new()
        .route(
            "/",
            axum::routing::get(
                |axum::extract::State(t): axum::extract::State<Templates>| async move {
                    t.render_with("secret/page.html.eex", |_| Some(Value::str("ten")))
                },
            ),
        )
        .route(
            "/missing",
            axum::routing::get(
                |axum::extract::State(t): axum::extract::State<Templates>| async move {
                    t.render("no/such/template.html.eex", &galleon_axum::Assigns::new())
                },
            ),
        )
        .with_state(t.clone());
    let err = t
        .render_with("secret/page.html.eex", |_| Some(Value::str("ten")))
        .unwrap_err();
    assert!(
        err.to_string().contains("secret-source"),
        "the error itself quotes the source (for the log): {err}"
    );
    let addr = serve(router);
    let r = get(addr, "/");
    assert_eq!(r.status, 500);
    says_nothing(&r.text(), "secret-source");
    let r = get(addr, "/missing");
    assert_eq!(r.status, 500);
    says_nothing(&r.text(), "no/such");
}

#[test]
fn whole_pages_are_few_frames_and_blah_references_its_template_text() {
    let engine = app::engine(&site_dir()).unwrap();
    let templates = Templates::new(engine.clone());
    let iters = |k: &str| (k == "iters").then_some(Value::Int(1000));
    let page = templates.render_with("pages/blah.html.eex", iters).unwrap();
    assert_eq!(page.body().len(), Some(410_000));
    // 12 references to the 32 KiB block of repeated body and one to the rest: with hyper's
    // head, 14 buffers, one flush (hyper queues at most 16).
    assert_eq!(page.body().frame_count(), Some(13));
    let list = engine.render_with("pages/blah.html.eex", iters).unwrap();
    let owners = galleon_iolist::Owners::new(
        engine
            .names()
            .filter_map(|n| engine.static_text(n).cloned()),
    );
    let frames = galleon_iolist::to_frames(&list, galleon_iolist::WritePolicy::default(), &owners);
    assert_eq!(frames.copied(), 0, "nothing of the page is copied");
    let text = engine.static_text("pages/blah.html.eex").unwrap();
    let inside = text.as_ptr() as usize..text.as_ptr() as usize + text.len();
    for f in frames.frames() {
        assert!(inside.contains(&(f.as_ptr() as usize)));
        assert!(f.as_ptr() as usize + f.len() <= inside.end);
    }
    assert_eq!(frames.frames().concat(), list.to_vec());

    let table = templates
        .render(
            "pages/big-table.html.eex",
            &galleon_axum::Assigns::from_json(
                serde_json::from_str(
                    &std::fs::read_to_string(site_dir().join("data/big-table.json")).unwrap(),
                )
                .unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
    let n = table.body().frame_count().unwrap();
    assert!(n <= 15, "big-table: {n} frames, more than one hyper flush");
}

#[test]
fn compiled_pages_are_the_runtime_pages_bytes() {
    let addr = site();
    for iters in [1, 10, 1000] {
        let want = galleon_render("blah", &[("iters", Value::Int(iters))]);
        assert_whole(&get(addr, &format!("/compiled/blah?iters={iters}")), &want);
    }
    assert_whole(
        &get(addr, "/compiled/big-table"),
        &galleon_render("big-table", &[]),
    );
    let want = galleon_render("doom", &[("iters", Value::Int(1000))]);
    assert_whole(&get(addr, "/compiled/doom?iters=1000"), &want);
}

#[test]
fn a_long_compiled_doom_is_streamed_chunked_and_complete() {
    let want = galleon_render("doom", &[("iters", Value::Int(50_000))]);
    let r = get(site(), "/compiled/doom?iters=50000");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("content-length"), None);
    assert!(
        r.body == want,
        "streamed body differs from galleon's render"
    );
}

#[test]
fn a_compiled_render_error_is_a_500_that_shows_no_source() {
    for target in ["/compiled/blah?iters=%22many%22", "/compiled/blah"] {
        let r = get(site(), target);
        assert_eq!(r.status, 500, "{target}");
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        says_nothing(&r.text(), "for a <- 1..@iters");
    }
}

#[test]
fn a_compiled_blah_references_its_static_text() {
    let page = galleon_axum::compiled::page(app::Blah {
        iters: Value::Int(1000),
    })
    .unwrap();
    assert_eq!(page.body().len(), Some(410_000));
    let n = page.body().frame_count().unwrap();
    assert!(
        n <= 15,
        "compiled Blah: {n} frames, more than one hyper flush"
    );
}
