//! The access log: one `tracing` event per request at target `galleon::access` when it is on
//! (also with recording off), none when it is off; through galleon-http and the axum layer.
//! The events go to this binary's global subscriber, written into a buffer; the tests take
//! turns (one lock) so each reads only its own lines.

mod common;

use std::io::Write;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use common::{TestServer, get_ok};
use galleon_stats::{ACCESS_TARGET, HEALTH_PATH, JSON_PATH, METRICS_PATH, StatsConfig};

/// What the subscriber wrote.
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The subscriber installed once, the turn taken, the buffer emptied.
fn turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        tracing_subscriber::fmt()
            .with_writer(|| Capture)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .init();
    });
    let guard = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    LOG.lock().unwrap_or_else(PoisonError::into_inner).clear();
    guard
}

/// The access-log lines written so far.
fn access_lines() -> Vec<String> {
    let log = LOG.lock().unwrap_or_else(PoisonError::into_inner);
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| l.contains(ACCESS_TARGET))
        .map(str::to_owned)
        .collect()
}

fn has_field(line: &str, name: &str, value: &str) -> bool {
    line.contains(&format!("{name}={value}")) || line.contains(&format!("{name}=\"{value}\""))
}

#[test]
fn the_access_log_writes_one_line_per_request_and_stats_can_be_off() {
    let _turn = turn();
    let pool = common::pool();
    let config = StatsConfig {
        record: false,
        access_log: true,
    };
    let s = TestServer::start(config, &pool, |d| d);
    let mut c = s.client();
    get_ok(&mut c, "/blah?iters=1");
    assert_eq!(c.get("/missing", &[]).unwrap().status, 404);
    // Statistics off: the routes say so; health still answers.
    assert_eq!(c.get(JSON_PATH, &[]).unwrap().status, 404);
    assert_eq!(c.get(METRICS_PATH, &[]).unwrap().status, 404);
    get_ok(&mut c, HEALTH_PATH);
    drop(c);
    // Stopped: every exchange has been reported.
    s.stop();
    let lines = access_lines();
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert!(has_field(&lines[0], "method", "GET"), "{}", lines[0]);
    assert!(
        has_field(&lines[0], "path", "/blah?iters=1"),
        "{}",
        lines[0]
    );
    assert!(has_field(&lines[0], "status", "200"), "{}", lines[0]);
    for field in [
        "bytes=",
        "us=",
        "writes=",
        "peer=127.0.0.1:",
        "completed=true",
    ] {
        assert!(lines[0].contains(field), "{field}: {}", lines[0]);
    }
    assert!(has_field(&lines[1], "status", "404"), "{}", lines[1]);
    assert!(has_field(&lines[4], "path", HEALTH_PATH), "{}", lines[4]);
}

#[test]
fn without_the_access_log_nothing_is_logged_per_request() {
    let _turn = turn();
    assert!(!StatsConfig::default().access_log, "off by default");
    let pool = common::pool();
    let s = TestServer::with_pool(&pool);
    let mut c = s.client();
    get_ok(&mut c, "/blah?iters=1");
    get_ok(&mut c, HEALTH_PATH);
    drop(c);
    let stats = s.stats.clone();
    s.stop();
    assert_eq!(stats.snapshot().requests, 2, "the requests were answered");
    assert_eq!(access_lines(), Vec::<String>::new());
}

#[cfg(feature = "axum")]
#[test]
fn the_axum_layer_writes_the_access_log_too() {
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    let _turn = turn();
    let stats = std::sync::Arc::new(galleon_stats::Stats::new(StatsConfig {
        record: true,
        access_log: true,
    }));
    let app = axum::Router::new()
        .route("/users/{id}", get(|| async { "user" }))
        .layer(galleon_stats::axum::layer(&stats));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for target in ["/users/7?x=1", "/nowhere"] {
        let req = http::Request::get(target).body(Body::empty()).unwrap();
        rt.block_on(app.clone().oneshot(req)).unwrap();
    }
    let lines = access_lines();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(has_field(&lines[0], "path", "/users/7?x=1"), "{}", lines[0]);
    assert!(has_field(&lines[0], "status", "200") && lines[0].contains("bytes=4"));
    assert!(!lines[0].contains("writes="), "no write calls under axum");
    assert!(has_field(&lines[1], "status", "404"), "{}", lines[1]);
}
