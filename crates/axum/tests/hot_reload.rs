//! Hot reload from a directory (`TemplatesBuilder::watch`) and the development error page: an
//! edit is served; a broken edit keeps the last good templates serving, shown as the located
//! error to loopback peers only when the page is on; a fix is served; dropping the templates
//! stops the polling thread.
//!
//! No fixed sleeps: every wait is a bounded loop (up to 10 s, checking every 20 ms), so the tests
//! pass on a loaded machine (they were run beside two busy loops).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::middleware;
use axum::routing::get;
use galleon_axum::{Assigns, Page, RenderError, Templates, Value};
use tower::ServiceExt as _;

/// The poll interval: short, so that the waits are short.
const POLL: Duration = Duration::from_millis(10);

/// One watching test at a time, so that the watch threads counted are the test's own (held
/// across awaits, by tests on runtimes of their own: tokio's lock).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The `error` events logged in this process, as `message dir=...` lines (a global subscriber:
/// the reloads log from the watch thread).
fn errors() -> &'static Mutex<Vec<String>> {
    static ERRORS: OnceLock<&'static Mutex<Vec<String>>> = OnceLock::new();
    ERRORS.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt as _;
        let errors: &'static Mutex<Vec<String>> = Box::leak(Box::default());
        let subscriber = tracing_subscriber::registry().with(Errors(errors));
        tracing::subscriber::set_global_default(subscriber).unwrap();
        errors
    })
}

struct Errors(&'static Mutex<Vec<String>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Errors {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Line(String);
        impl tracing::field::Visit for Line {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={value:?}", field.name()));
            }
        }
        if *event.metadata().level() == tracing::Level::ERROR {
            let mut line = Line(String::new());
            event.record(&mut line);
            self.0.lock().unwrap().push(line.0);
        }
    }
}

/// How many times the reload of `dir` was refused in the log.
fn refusals(dir: &Path) -> usize {
    let dir = format!("dir={}", dir.display());
    errors()
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("templates not reloaded") && l.contains(&dir))
        .count()
}

/// Waits until `cond` holds: at most 10 s, checking every 20 ms.
async fn wait_for(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !cond().await {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Watch threads alive in this process (thread names are cut to 15 bytes in `comm`).
fn watchers() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| "galleon-axum-watch".starts_with(c.trim_end()))
        })
        .count()
}

/// Replaces `dir/name` at once (written beside it, then renamed), as editors save.
fn save(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(".saving");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

fn site(page: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    save(
        dir.path(),
        "layout.html.eex",
        "<main><%= @inner_content %></main>",
    );
    save(dir.path(), "page.html.eex", page);
    save(dir.path(), "sum.html.eex", "<%= @a + 1 %>");
    dir
}

async fn home(State(t): State<Templates>) -> Result<Page, RenderError> {
    t.render_in_layout("page.html.eex", "layout.html.eex", &Assigns::new())
}

/// A render that fails at request time (a string plus one).
async fn sum(State(t): State<Templates>) -> Result<Page, RenderError> {
    t.render_with("sum.html.eex", |_| Some(Value::str("ten")))
}

fn router(templates: Templates) -> Router {
    Router::new()
        .route("/", get(home))
        .route("/sum", get(sum))
        .layer(middleware::from_fn(galleon_axum::dev_error_page))
        .with_state(templates)
}

/// `GET target` from `peer` (`None`: no `ConnectInfo`, as under plain `axum::serve`).
async fn get_from(router: &Router, target: &str, peer: Option<&str>) -> (u16, String) {
    let mut req = http::Request::get(target)
        .body(axum::body::Body::empty())
        .unwrap();
    if let Some(peer) = peer {
        let addr: SocketAddr = peer.parse().unwrap();
        req.extensions_mut().insert(ConnectInfo(addr));
    }
    let r = router.clone().oneshot(req).await.unwrap();
    let status = r.status().as_u16();
    let body = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

const LOOPBACK: Option<&str> = Some("127.0.0.1:50000");
const LOOPBACK_V6: Option<&str> = Some("[::1]:50000");
const REMOTE: Option<&str> = Some("192.0.2.7:50000");

fn ok(body: &str) -> (u16, String) {
    (200, body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_are_served_a_broken_one_keeps_the_last_good_set_and_shows_loopback_its_error() {
    let _serial = SERIAL.lock().await;
    let dir = site("<p>v1</p>");
    let t = Templates::builder()
        .dev_errors(true)
        .watch(dir.path(), POLL)
        .unwrap();
    assert!(t.is_watching());
    wait_for("the watch thread", async || watchers() == 1).await;
    let app = router(t.clone());
    assert_eq!(
        get_from(&app, "/", LOOPBACK).await,
        ok("<main><p>v1</p></main>")
    );

    // An edit: served once the poll sees it.
    save(dir.path(), "page.html.eex", "<p>v2</p>");
    wait_for("v2", async || {
        get_from(&app, "/", LOOPBACK).await == ok("<main><p>v2</p></main>")
    })
    .await;

    // A broken edit: the last good set keeps serving; loopback sees the located error.
    save(dir.path(), "page.html.eex", "<p>\n<%= if @x & 'y' %>\n</p>");
    wait_for("the compile error", async || t.reload_error().is_some()).await;
    let error = t.reload_error().unwrap();
    assert!(error.starts_with("page.html.eex:2:"), "{error}");
    for peer in [LOOPBACK, LOOPBACK_V6, Some("[::ffff:127.0.0.1]:1")] {
        let (status, body) = get_from(&app, "/", peer).await;
        assert_eq!(status, 500, "{peer:?}");
        assert!(body.contains("<h1>Template error</h1>"), "{body}");
        // The caret message, HTML-escaped: name:line:col, the source line, the caret.
        assert!(body.contains("page.html.eex:2:"), "{body}");
        assert!(
            body.contains("2 | &lt;%= if @x &amp; &#39;y&#39; %&gt;"),
            "{body}"
        );
        assert!(body.contains("  | ") && body.contains('^'), "{body}");
        // No file system path, no address.
        let path = dir.path().display().to_string();
        assert!(!body.contains(&path), "{path} in {body}");
        assert!(!body.contains("0x"), "{body}");
        assert!(!body.contains("<%="), "unescaped source in {body}");
    }
    // Other peers, and peers of unknown address, get the last good page.
    assert_eq!(
        get_from(&app, "/", REMOTE).await,
        ok("<main><p>v2</p></main>")
    );
    assert_eq!(
        get_from(&app, "/", None).await,
        ok("<main><p>v2</p></main>")
    );
    // A render error of the last good set shows the compile error to loopback too (it is the
    // thing to fix), and nothing to anyone else.
    let (status, body) = get_from(&app, "/sum", LOOPBACK).await;
    assert_eq!(status, 500);
    assert!(body.contains("page.html.eex:2:"), "{body}");
    assert_eq!(
        get_from(&app, "/sum", REMOTE).await,
        (500, "internal server error\n".to_owned())
    );

    // Fixed: the new set serves everyone, the error page is gone.
    save(dir.path(), "page.html.eex", "<p>v3</p>");
    wait_for("v3", async || {
        get_from(&app, "/", LOOPBACK).await == ok("<main><p>v3</p></main>")
    })
    .await;
    assert_eq!(t.reload_error(), None);
    assert_eq!(
        get_from(&app, "/", REMOTE).await,
        ok("<main><p>v3</p></main>")
    );
    // A render error at request time is what it always was: a 500 that shows no source, to
    // loopback peers as well.
    assert_eq!(
        get_from(&app, "/sum", LOOPBACK).await,
        (500, "internal server error\n".to_owned())
    );

    // Dropping the templates (here and in the router) stops the polling thread.
    drop(app);
    assert_eq!(watchers(), 1, "a clone still holds the templates");
    drop(t);
    // Joined by the drop; its `/proc` entry may outlive the join by a moment.
    wait_for("the watch thread to end", async || watchers() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_development_page_loopback_gets_the_last_good_page() {
    let _serial = SERIAL.lock().await;
    let dir = site("<p>v1</p>");
    errors();
    let t = Templates::builder().watch(dir.path(), POLL).unwrap();
    let app = router(t.clone());
    save(dir.path(), "page.html.eex", "<p><%= @x + %></p>");
    wait_for("the compile error", async || t.reload_error().is_some()).await;
    assert_eq!(refusals(dir.path()), 1);
    for peer in [LOOPBACK, REMOTE, None] {
        assert_eq!(
            get_from(&app, "/", peer).await,
            ok("<main><p>v1</p></main>"),
            "{peer:?}"
        );
    }
    // A second broken version is compiled (and logged) once, then left until it changes.
    save(dir.path(), "page.html.eex", "<p><%= @y + %></p>");
    wait_for("the second error", async || {
        t.reload_error().is_some_and(|e| e.contains("@y"))
    })
    .await;
    // Time for more polls of the same files (not needed for the test to pass on a slow
    // machine: it only gives a repeated log the chance to show).
    tokio::time::sleep(POLL * 20).await;
    assert_eq!(refusals(dir.path()), 2, "logged once per change");
    save(dir.path(), "page.html.eex", "<p>v2</p>");
    wait_for("v2", async || {
        get_from(&app, "/", LOOPBACK).await == ok("<main><p>v2</p></main>")
    })
    .await;
    drop((app, t));
    wait_for("the watch thread to end", async || watchers() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_server_shows_the_error_to_its_loopback_peer_only_with_connect_info() {
    let _serial = SERIAL.lock().await;
    let dir = site("<p>v1</p>");
    let t = Templates::builder()
        .dev_errors(true)
        .watch(dir.path(), POLL)
        .unwrap();
    save(dir.path(), "page.html.eex", "<p><%= 1 + %></p>");
    wait_for("the compile error", async || t.reload_error().is_some()).await;

    let serve = |connect_info: bool| {
        let app = router(t.clone());
        async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let shutdown = async move {
                let _ = stopped.await;
            };
            let server = if connect_info {
                let app = app.into_make_service_with_connect_info::<SocketAddr>();
                tokio::spawn(async move {
                    axum::serve(listener, app)
                        .with_graceful_shutdown(shutdown)
                        .await
                })
            } else {
                tokio::spawn(async move {
                    axum::serve(listener, app)
                        .with_graceful_shutdown(shutdown)
                        .await
                })
            };
            let r = tokio::task::spawn_blocking(move || {
                galleon_client::Client::connect(addr, Duration::from_secs(10))
                    .unwrap()
                    .get("/", &[])
                    .unwrap()
            })
            .await
            .unwrap();
            stop.send(()).unwrap();
            server.await.unwrap().unwrap();
            (r.status, r.text())
        }
    };
    let (status, body) = serve(true).await;
    assert_eq!(status, 500);
    assert!(body.contains("page.html.eex:1:"), "{body}");
    // Without ConnectInfo the peer is not known to be loopback: the last good page.
    assert_eq!(serve(false).await, ok("<main><p>v1</p></main>"));
    drop(t);
    wait_for("the watch thread to end", async || watchers() == 0).await;
}
