//! The axum adapter: the layer records route (`MatchedPath`), method, status, latency and the
//! body's bytes when known; the routes answer with `ConnectInfo` from loopback only (403
//! without it) unless opened; what axum does not measure is shown as not measured, not as
//! zeros; and a real `axum::serve` with connect info works end to end.
#![cfg(feature = "axum")]

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::routing::get;
use bytes::Bytes;
use common::{assert_well_nested, chart_totals, samples, scrape};
use galleon_stats::{
    Diagnostics, HEALTH_PATH, JSON_PATH, METRICS_PATH, PAGE_PATH, Source, Stats, StatsConfig,
    UNMATCHED,
};
use http_body::Frame;
use tower::ServiceExt;

/// A body whose size is not known up front.
struct Unsized(Option<Bytes>);

impl http_body::Body for Unsized {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }
}

fn stats() -> Arc<Stats> {
    Arc::new(Stats::new(StatsConfig::default()))
}

/// An app with its own routes, the diagnostics and the layer, as a user mounts them.
fn app(stats: &Arc<Stats>, diagnostics: Diagnostics) -> axum::Router {
    axum::Router::new()
        .route(
            "/users/{id}",
            get(|| async { "user" }).post(|| async { "made" }),
        )
        .route(
            "/stream",
            get(|| async { Body::new(Unsized(Some(Bytes::from_static(b"abc")))) }),
        )
        .merge(galleon_stats::axum::routes(diagnostics))
        .layer(galleon_stats::axum::layer(stats))
}

fn request(target: &str, peer: Option<&str>) -> http::Request<Body> {
    let mut req = http::Request::get(target).body(Body::empty()).unwrap();
    if let Some(p) = peer {
        let addr: SocketAddr = p.parse().unwrap();
        req.extensions_mut().insert(ConnectInfo(addr));
    }
    req
}

async fn send(app: &axum::Router, req: http::Request<Body>) -> (u16, http::HeaderMap, String) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

const LOCAL: Option<&str> = Some("127.0.0.1:5000");

#[tokio::test]
async fn the_layer_records_route_method_status_and_known_bytes() {
    let stats = stats();
    let app = app(&stats, Diagnostics::new(&stats));
    for target in ["/users/1", "/users/2", "/users/3"] {
        assert_eq!(send(&app, request(target, None)).await.0, 200);
    }
    let post = http::Request::post("/users/1").body(Body::empty()).unwrap();
    assert_eq!(send(&app, post).await.0, 200);
    assert_eq!(send(&app, request("/nowhere", None)).await.0, 404);
    assert_eq!(send(&app, request("/stream", None)).await.2, "abc");
    let snap = stats.snapshot();
    assert_eq!(snap.source, Source::Axum);
    assert_eq!(snap.requests, 6);
    let row = |route: &str, method: &str| {
        snap.routes
            .iter()
            .find(|r| r.route == route && r.method == method)
            .unwrap_or_else(|| panic!("no {method} {route}: {:?}", snap.routes))
    };
    let users = row("/users/{id}", "GET");
    assert_eq!((users.count, users.statuses["200"]), (3, 3));
    assert_eq!(users.bytes, 3 * 4, "\"user\", by its exact size");
    assert_eq!(users.latency.count, 3);
    assert_eq!(row("/users/{id}", "POST").count, 1);
    assert_eq!(row(UNMATCHED, "GET").statuses["404"], 1);
    assert_eq!(row("/stream", "GET").bytes, 0, "size unknown: not counted");
    // Not measured under axum: absent, not zero.
    assert!(snap.writes.is_none());
    assert!(snap.connections.is_none());
}

#[tokio::test]
async fn the_routes_answer_loopback_connect_info_only_unless_opened() {
    let stats = stats();
    let closed = app(&stats, Diagnostics::new(&stats));
    let open = app(&stats, Diagnostics::new(&stats).open(true));
    for path in [PAGE_PATH, JSON_PATH, METRICS_PATH] {
        for (app, peer, want) in [
            (&closed, LOCAL, 200),
            (&closed, Some("[::1]:9"), 200),
            (&closed, Some("192.0.2.7:9"), 403),
            (&closed, None, 403),
            (&open, Some("192.0.2.7:9"), 200),
            (&open, None, 200),
        ] {
            let (status, _, body) = send(app, request(path, peer)).await;
            assert_eq!(status, want, "{path} from {peer:?}: {body}");
        }
    }
    let (status, headers, body) = send(&closed, request(HEALTH_PATH, None)).await;
    assert_eq!(status, 200, "health answers everyone");
    assert_eq!(headers["cache-control"], "no-store");
    assert!(body.contains("\"status\":\"ok\""), "{body}");
}

#[tokio::test]
async fn with_a_token_every_peer_needs_it_under_axum_too() {
    let stats = stats();
    let token = "a-diagnostics-token-0123";
    let guard = galleon_http::Guard::default().with_token(token).unwrap();
    let app = app(&stats, Diagnostics::new(&stats).guard(guard));
    let (status, headers, _) = send(&app, request(JSON_PATH, LOCAL)).await;
    assert_eq!(status, 401, "loopback is not enough");
    assert_eq!(headers["www-authenticate"], "Bearer");
    let mut req = request(JSON_PATH, Some("192.0.2.7:9"));
    let bearer = format!("Bearer {token}");
    req.headers_mut()
        .insert("authorization", bearer.parse().unwrap());
    let (status, _, body) = send(&app, req).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn stats_json_and_metrics_leave_out_what_axum_does_not_measure() {
    let stats = stats();
    let app = app(&stats, Diagnostics::new(&stats));
    for _ in 0..2 {
        send(&app, request("/users/9", None)).await;
    }
    let (_, headers, json) = send(&app, request(JSON_PATH, LOCAL)).await;
    assert_eq!(headers["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let server = &v["server"];
    assert_eq!(server["source"], "axum");
    assert!(server.get("writes").is_none(), "{server}");
    assert!(server.get("calls_per_response").is_none(), "{server}");
    assert!(server["connections"].is_null(), "{server}");
    let users = server["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["route"] == "/users/{id}")
        .unwrap();
    assert_eq!(users["count"], 2);
    let (_, headers, text) = send(&app, request(METRICS_PATH, LOCAL)).await;
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let m = scrape(&text);
    // prometheus-parse 0.2 drops samples whose label values hold `}`: read that one as text.
    assert!(
        text.contains(
            "galleon_http_requests_total{route=\"/users/{id}\",method=\"GET\",status=\"200\"} 2\n"
        ),
        "{text}"
    );
    let requests = samples(&m, "galleon_http_requests_total");
    // stats.json itself was answered before this scrape.
    assert_eq!(
        requests.get(&format!("method=GET,route={JSON_PATH},status=200")),
        Some(&1.0),
        "{requests:?}"
    );
    for absent in [
        "galleon_write_syscalls_total",
        "galleon_write_calls_per_response",
        "galleon_connections_open",
        "galleon_http_responses_incomplete_total",
    ] {
        assert!(samples(&m, absent).is_empty(), "{absent} is not measured");
    }
}

#[tokio::test]
async fn the_live_page_says_what_is_not_measured() {
    let stats = stats();
    let app = app(&stats, Diagnostics::new(&stats));
    for _ in 0..3 {
        send(&app, request("/users/9", None)).await;
    }
    let (status, headers, page) = send(&app, request(PAGE_PATH, LOCAL)).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_well_nested(&page);
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"2\">"));
    assert!(page.contains("<tr><td>/users/{id}</td><td>GET</td><td>3</td><td>200: 3</td>"));
    assert!(page.contains("<h2>Latency, request to response head</h2>"));
    assert!(page.contains("Not measured: axum does not report the write calls"));
    assert!(page.contains("connections open<b>not measured"));
    assert!(page.contains("write calls per response<b>not measured</b>"));
    assert!(!page.contains("responses in 0 write calls"));
    assert_eq!(
        chart_totals(&page),
        vec![3],
        "one latency chart, no write charts"
    );
}

#[tokio::test]
async fn with_recording_off_the_routes_answer_404_and_nothing_is_counted() {
    let stats = Arc::new(Stats::new(StatsConfig {
        record: false,
        access_log: false,
    }));
    let app = app(&stats, Diagnostics::new(&stats));
    send(&app, request("/users/1", None)).await;
    for path in [PAGE_PATH, JSON_PATH, METRICS_PATH] {
        assert_eq!(send(&app, request(path, LOCAL)).await.0, 404, "{path}");
    }
    assert_eq!(send(&app, request(HEALTH_PATH, None)).await.0, 200);
    assert_eq!(stats.snapshot().requests, 0);
}

#[tokio::test]
async fn the_routes_merge_into_an_app_with_state() {
    let stats = stats();
    let app = axum::Router::new()
        .route(
            "/name",
            get(|State(s): State<Arc<str>>| async move { s.to_string() }),
        )
        .merge(galleon_stats::axum::routes(&stats))
        .layer(galleon_stats::axum::layer(&stats))
        .with_state(Arc::<str>::from("galleon"));
    assert_eq!(send(&app, request("/name", None)).await.2, "galleon");
    assert_eq!(send(&app, request(JSON_PATH, LOCAL)).await.0, 200);
    let snap = stats.snapshot();
    let name = snap.routes.iter().find(|r| r.route == "/name").unwrap();
    assert_eq!((name.count, name.bytes), (1, 7));
}

#[test]
fn served_with_connect_info_a_loopback_client_is_answered() {
    let stats = stats();
    let app = app(&stats, Diagnostics::new(&stats));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        })
        .await
    });
    let mut c = galleon_client::Client::connect(addr, common::TIMEOUT).unwrap();
    for _ in 0..4 {
        assert_eq!(c.get("/users/5", &[]).unwrap().status, 200);
    }
    let r = c.get(JSON_PATH, &[]).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["server"]["routes"][0]["route"], "/users/{id}");
    assert_eq!(v["server"]["routes"][0]["count"], 4);
    let page = c.get(PAGE_PATH, &[]).unwrap();
    assert_eq!(page.status, 200);
    drop(c);
    stop.send(()).unwrap();
    rt.block_on(server).unwrap().unwrap();
}
