//! The galleon-http adapter, through a real server in-process: `/metrics` parses as Prometheus
//! text and counts the traffic sent, `stats.json` has the routes, writes, connections, pool and
//! figures, the live page shows them, health answers, the routes (the live page's socket and
//! scripts too) refuse peers that are not loopback unless opened, and recording off turns them
//! off but health.

mod common;

use bytes::Bytes;
use common::{TestServer, assert_well_nested, chart_totals, get_ok, samples, scrape};
use galleon_http::{Method, Request, Router};
use galleon_stats::{
    Diagnostics, Figure, HEALTH_PATH, JSON_PATH, METRICS_PATH, PAGE_PATH, Stats, StatsConfig,
};
use std::sync::Arc;

#[test]
fn metrics_parse_as_prometheus_text_and_count_the_traffic() {
    let pool = common::pool();
    let s = TestServer::with_pool(&pool);
    let mut c = s.client();
    for _ in 0..20 {
        get_ok(&mut c, "/blah?iters=2");
    }
    for _ in 0..3 {
        assert_eq!(c.get("/no/such/page", &[]).unwrap().status, 404);
    }
    let r = c.get("/metrics", &[]).unwrap();
    assert_eq!(r.status, 200);
    let ct = r.header("content-type").unwrap_or_default().to_owned();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let scrape = scrape(&r.text());
    let requests = samples(&scrape, "galleon_http_requests_total");
    assert_eq!(
        requests.get("method=GET,route=/blah,status=200"),
        Some(&20.0),
        "{requests:?}"
    );
    assert_eq!(
        requests.get("method=GET,route=(unmatched),status=404"),
        Some(&3.0),
        "{requests:?}"
    );
    // The latency histogram of /blah holds the 20 requests (its +Inf bucket).
    let latency = samples(&scrape, "galleon_http_request_duration_seconds");
    assert_eq!(latency.get("method=GET,route=/blah"), Some(&20.0));
    let bytes = samples(&scrape, "galleon_http_response_bytes_total");
    assert!(bytes["method=GET,route=/blah"] > 20.0 * common::BLAH.len() as f64);
    let syscalls = samples(&scrape, "galleon_write_syscalls_total");
    assert!(syscalls[""] >= 23.0, "{syscalls:?}");
    let written = samples(&scrape, "galleon_write_bytes_total");
    assert!(written["how=referenced"] + written["how=copied"] > 0.0);
    let calls = samples(&scrape, "galleon_write_calls_per_response");
    assert!(calls[""] >= 23.0, "{calls:?}");
    assert_eq!(
        samples(&scrape, "galleon_connections_open")[""],
        1.0,
        "this client's connection"
    );
    assert_eq!(
        samples(&scrape, "galleon_connections_accepted_total")[""],
        1.0
    );
    assert!(samples(&scrape, "process_resident_memory_bytes")[""] > 1e6);
    // The pool's renders are counted by kind.
    let jobs = samples(&scrape, "galleon_offload_jobs_total");
    let blah: f64 = jobs
        .iter()
        .filter(|(k, _)| k.contains("kind=render:/blah"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(blah, 20.0, "{jobs:?}");
}

#[test]
fn stats_json_shows_routes_writes_connections_the_pool_and_figures() {
    let pool = common::pool();
    let p = pool.clone();
    let s = TestServer::start(StatsConfig::default(), &pool, move |d| {
        d.pool(p).figures("events", "Event store", || {
            vec![
                Figure::counter("galleon_events_appends", "appends stored", 7.0),
                Figure::gauge("galleon_events_all_lag_seconds", "$all lag", 0.25),
                // One metric told apart by a label: one description, two samples.
                Figure::gauge("galleon_live_views", "views", 1.0).with_label("view", "/a"),
                Figure::gauge("galleon_live_views", "views", 2.0).with_label("view", "/b"),
            ]
        })
    });
    let mut c = s.client();
    for _ in 0..5 {
        get_ok(&mut c, "/blah?iters=1");
    }
    get_ok(&mut c, "/users/42");
    let v: serde_json::Value = serde_json::from_slice(&get_ok(&mut c, JSON_PATH)).unwrap();
    let server = &v["server"];
    assert_eq!(server["source"], "galleon-http");
    let row = |route: &str| {
        server["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["route"] == route)
            .unwrap_or_else(|| panic!("no {route} row: {v}"))
            .clone()
    };
    let blah = row("/blah");
    assert_eq!(blah["count"], 5);
    assert_eq!(blah["statuses"]["200"], 5);
    assert_eq!(blah["latency"]["count"], 5);
    let buckets: u64 = blah["latency"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(buckets, 5);
    assert_eq!(row("/users/{id}")["count"], 1, "by pattern, not by path");
    assert_eq!(server["requests"], 6);
    assert!(server["writes"]["syscalls"].as_u64().unwrap() >= 6);
    assert_eq!(server["writes"]["responses"], 6);
    assert_eq!(server["connections"]["open"], 1);
    assert!(server["calls_per_response"].is_array());
    assert!(
        v["offload"]["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["name"] == "render:/blah")
    );
    assert_eq!(v["events"]["galleon_events_appends"], 7.0);
    assert_eq!(v["events"]["galleon_events_all_lag_seconds"], 0.25);
    // The figures are in /metrics too, a counter as NAME_total.
    let m = scrape(&String::from_utf8(get_ok(&mut c, METRICS_PATH)).unwrap());
    assert_eq!(samples(&m, "galleon_events_appends_total")[""], 7.0);
    assert_eq!(samples(&m, "galleon_events_all_lag_seconds")[""], 0.25);
    let views = samples(&m, "galleon_live_views");
    assert_eq!(views.len(), 2, "{views:?}");
    assert_eq!(v["events"]["galleon_live_views{view=\"/b\"}"], 2.0);
    let metrics = String::from_utf8(get_ok(&mut c, METRICS_PATH)).unwrap();
    assert_eq!(
        metrics.matches("# TYPE galleon_live_views gauge").count(),
        1
    );
    assert!(
        metrics.contains("galleon_live_views{view=\"/a\"} 1"),
        "{metrics}"
    );
    let health = String::from_utf8(get_ok(&mut c, HEALTH_PATH)).unwrap();
    assert!(health.contains("\"status\":\"ok\""), "{health}");
}

#[test]
fn the_live_page_shows_the_traffic_and_is_ready_to_go_live() {
    let pool = common::pool();
    let p = pool.clone();
    let s = TestServer::start(StatsConfig::default(), &pool, move |d| {
        d.pool(p).figures("events", "Event store", || {
            vec![Figure::gauge(
                "galleon_events_subscribers",
                "subscriptions <open>",
                3.0,
            )]
        })
    });
    let mut c = s.client();
    for _ in 0..4 {
        get_ok(&mut c, "/blah");
    }
    assert_eq!(c.get("/missing", &[]).unwrap().status, 404);
    let r = c.get(PAGE_PATH, &[]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("cache-control"), Some("private, no-store"));
    let page = r.text();
    assert_well_nested(&page);
    assert!(page.starts_with("<!doctype html>"));
    // Without JavaScript it reloads itself; with it, the client joins the live view.
    assert!(page.contains("<noscript><meta http-equiv=\"refresh\" content=\"2\"></noscript>"));
    assert!(
        page.contains("<meta name=\"csrf-token\" content=\""),
        "{page}"
    );
    assert!(
        page.contains(" data-phx-main data-phx-session=\""),
        "{page}"
    );
    for script in ["phoenix.min.js", "phoenix_live_view.min.js", "app.js"] {
        let src = format!("<script defer src=\"/_galleon/live/assets/{script}\"></script>");
        assert!(page.contains(&src), "{src}");
        let js = c
            .get(&format!("/_galleon/live/assets/{script}"), &[])
            .unwrap();
        assert_eq!(js.status, 200, "{script}");
    }
    assert!(page.contains("<title>galleon: live stats</title>"));
    assert!(page.contains("<tr><td>/blah</td><td>GET</td><td>4</td><td>200: 4</td>"));
    assert!(page.contains("<td>(unmatched)</td><td>GET</td><td>1</td><td>404: 1</td>"));
    assert!(page.contains("connections open<b>1 <small>of 1 accepted, 0 refused</small>"));
    assert!(page.contains("requests<b id=\"requests\">5</b>"));
    assert!(page.contains("<h2>Latency, head to last byte</h2>"));
    assert!(page.contains("5 responses in "), "{page}");
    assert!(page.contains("<h2>CPU pool</h2><p>2 threads,"));
    assert!(page.contains("<tr><td>render:/blah</td>"));
    // Extra figures are escaped by the template, like every label.
    assert!(page.contains("<tr><th>subscriptions &lt;open&gt;</th><td>3</td></tr>"));
    // Charts: two latency (two rows), calls and iovecs; each holds the samples it counts.
    let totals = chart_totals(&page);
    assert_eq!(&totals[..4], &[4, 1, 5, 5], "{totals:?}");
}

/// The live page's socket and one of its scripts: guarded as the page is.
const LIVE_PATHS: [&str; 2] = [
    "/_galleon/live/websocket",
    "/_galleon/live/assets/phoenix_live_view.min.js",
];

/// A WebSocket upgrade of the live socket, as a browser on this page sends it.
fn upgrade(peer: &str, authorization: Option<&str>) -> Request {
    let mut headers = vec![
        ("host", "127.0.0.1:4000"),
        ("upgrade", "websocket"),
        ("connection", "Upgrade"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("origin", "http://127.0.0.1:4000"),
    ];
    if let Some(a) = authorization {
        headers.push(("authorization", a));
    }
    Request::new(
        Method::Get,
        "/_galleon/live/websocket?_csrf_token=x&vsn=2.0.0",
        &headers,
        Bytes::new(),
    )
    .with_peer(peer.parse().unwrap())
}

fn get(target: &str, peer: &str) -> Request {
    Request::new(Method::Get, target, &[], Bytes::new()).with_peer(peer.parse().unwrap())
}

fn stats(record: bool) -> Arc<Stats> {
    Arc::new(Stats::new(StatsConfig {
        record,
        access_log: false,
    }))
}

#[tokio::test]
async fn the_routes_answer_loopback_only_unless_opened_and_health_answers_all() {
    let st = stats(true);
    let closed = galleon_stats::mount(Router::new(), &st);
    let open = galleon_stats::mount(Router::new(), Diagnostics::new(&st).open(true));
    for path in [PAGE_PATH, JSON_PATH, METRICS_PATH] {
        for (router, peer, want) in [
            (&closed, "127.0.0.1:9", 200),
            (&closed, "[::1]:9", 200),
            (&closed, "192.0.2.7:9", 403),
            (&open, "192.0.2.7:9", 200),
        ] {
            let status = router.handle(get(path, peer)).await.status().0;
            assert_eq!(status, want, "{path} from {peer}");
        }
    }
    // The live page's socket and scripts: refused to whom the page is refused. A refused
    // socket is not upgraded, so nothing can be joined on it.
    for path in LIVE_PATHS {
        let status = closed.handle(get(path, "192.0.2.7:9")).await.status().0;
        assert_eq!(status, 403, "{path}");
    }
    let refused = closed.handle(upgrade("192.0.2.7:9", None)).await;
    assert_eq!(refused.status().0, 403);
    let script = closed.handle(get(LIVE_PATHS[1], "127.0.0.1:9")).await;
    assert_eq!(script.status().0, 200);
    // From loopback the upgrade reaches galleon-live and is accepted (its joins then check
    // the CSRF and session tokens).
    let accepted = closed.handle(upgrade("127.0.0.1:9", None)).await.status().0;
    assert_eq!(accepted, 101, "a loopback upgrade passes the guard");
    let opened = open.handle(get(LIVE_PATHS[1], "192.0.2.7:9")).await;
    assert_eq!(opened.status().0, 200);
    let health = closed.handle(get(HEALTH_PATH, "192.0.2.7:9")).await;
    assert_eq!(health.status().0, 200);
    // A request built in-process (no peer) is the embedder's own.
    let own = Request::new(Method::Get, JSON_PATH, &[], Bytes::new());
    assert_eq!(closed.handle(own).await.status().0, 200);
}

#[tokio::test]
async fn with_a_token_every_peer_needs_it_loopback_included() {
    let st = stats(true);
    let token = "a-diagnostics-token-0123";
    let guard = galleon_http::Guard::default().with_token(token).unwrap();
    let guarded = galleon_stats::mount(Router::new(), Diagnostics::new(&st).guard(guard));
    let bearer = format!("Bearer {token}");
    for path in [PAGE_PATH, JSON_PATH, METRICS_PATH] {
        // Behind a reverse proxy on this host every client is loopback: that is not enough.
        let bare = guarded.handle(get(path, "127.0.0.1:9")).await;
        assert_eq!(bare.status().0, 401, "{path}");
        let challenge = bare.headers().find(|(n, _)| *n == "www-authenticate");
        assert_eq!(challenge, Some(("www-authenticate", "Bearer")));
        let wrong = [("authorization", "Bearer not-the-token-at-all")];
        let req = Request::new(Method::Get, path, &wrong, Bytes::new());
        assert_eq!(
            guarded
                .handle(req.with_peer("127.0.0.1:9".parse().unwrap()))
                .await
                .status()
                .0,
            401
        );
        let right = [("authorization", bearer.as_str())];
        let req = Request::new(Method::Get, path, &right, Bytes::new());
        assert_eq!(
            guarded
                .handle(req.with_peer("192.0.2.7:9".parse().unwrap()))
                .await
                .status()
                .0,
            200
        );
    }
    for path in LIVE_PATHS {
        let bare = guarded.handle(get(path, "127.0.0.1:9")).await;
        assert_eq!(bare.status().0, 401, "{path}");
    }
    let refused = guarded.handle(upgrade("127.0.0.1:9", None)).await;
    assert_eq!(refused.status().0, 401, "no socket without the token");
    let accepted = guarded.handle(upgrade("192.0.2.7:9", Some(&bearer))).await;
    assert_eq!(accepted.status().0, 101, "with the token, from anywhere");
    let script = Request::new(
        Method::Get,
        LIVE_PATHS[1],
        &[("authorization", bearer.as_str())],
        Bytes::new(),
    );
    let script = guarded
        .handle(script.with_peer("192.0.2.7:9".parse().unwrap()))
        .await;
    assert_eq!(script.status().0, 200);
    let health = guarded.handle(get(HEALTH_PATH, "192.0.2.7:9")).await;
    assert_eq!(health.status().0, 200, "health stays open");
}

#[tokio::test]
async fn without_a_pool_or_figures_those_parts_are_left_out() {
    let st = stats(true);
    let d = Diagnostics::new(&st);
    let v = d.json();
    assert!(v["offload"].is_null(), "{v}");
    assert!(v.get("events").is_none(), "{v}");
    let m = d.metrics().unwrap();
    assert!(!m.contains("galleon_offload"), "{m}");
    let page = String::from_utf8(d.page().unwrap().to_vec()).unwrap();
    assert_well_nested(&page);
    assert!(!page.contains("CPU pool") && !page.contains("Event store"));
    // Before any request: no division by zero, no chart of nothing.
    assert!(page.contains("write calls per response<b>-</b>"), "{page}");
}

#[test]
fn with_recording_off_the_routes_say_so_and_health_still_answers() {
    let pool = common::pool();
    let config = StatsConfig {
        record: false,
        access_log: false,
    };
    let s = TestServer::start(config, &pool, |d| d);
    let mut c = s.client();
    get_ok(&mut c, "/blah");
    for path in [
        PAGE_PATH,
        JSON_PATH,
        METRICS_PATH,
        LIVE_PATHS[0],
        LIVE_PATHS[1],
    ] {
        let r = c.get(path, &[]).unwrap();
        assert_eq!(r.status, 404, "{path}");
        assert!(r.text().contains("statistics are off"), "{}", r.text());
    }
    get_ok(&mut c, HEALTH_PATH);
    assert_eq!(s.stats.snapshot().requests, 0, "nothing recorded");
}

#[test]
fn connections_are_counted_open_and_closed() {
    let pool = common::pool();
    let s = TestServer::with_pool(&pool);
    let stats = s.stats.clone();
    for _ in 0..3 {
        let mut c = s.client();
        get_ok(&mut c, "/users/1");
    }
    let summary = s.stop();
    assert_eq!(summary.connections, 3);
    let c = stats.snapshot().connections.unwrap();
    assert_eq!((c.open, c.total, c.refused), (0, 3, 0));
    assert_eq!(stats.snapshot().requests, 3);
}
