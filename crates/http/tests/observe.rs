//! The observer hook: every answered request is reported once, with the route that answered,
//! its status, the write calls and bytes of its response; connections are reported opened and
//! ended; a refused malformed request is reported too.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Probes, TestServer, read_to_close, test_router, wait_for};
use galleon_http::{Exchange, Observer, Router, ServerConfig};

/// An exchange as owned data.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    route: Option<String>,
    index: Option<usize>,
    status: u16,
    bytes: u64,
    syscalls: u64,
    completed: bool,
}

#[derive(Debug, Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    opened: Mutex<u64>,
    closed: Mutex<u64>,
}

impl Observer for Recorder {
    fn exchange(&self, e: &Exchange<'_>) {
        self.seen.lock().unwrap().push(Seen {
            method: e.method.to_owned(),
            target: e.target.to_owned(),
            route: e.route.map(str::to_owned),
            index: e.route_index,
            status: e.status,
            bytes: e.writes.bytes,
            syscalls: e.writes.syscalls,
            completed: e.completed,
        });
    }

    fn connection(&self, opened: bool) {
        *if opened { &self.opened } else { &self.closed }
            .lock()
            .unwrap() += 1;
    }
}

fn router() -> Router {
    test_router(Arc::new(Probes::default()), None).get(
        "/users/{id}",
        |r: galleon_http::Request| async move {
            galleon_http::Response::html(format!("user {}", r.param("id").unwrap_or("")))
        },
    )
}

#[test]
fn every_request_is_reported_with_its_route_status_and_writes() {
    let rec = Arc::new(Recorder::default());
    let s = TestServer::start_observed(router(), ServerConfig::default(), rec.clone());
    let mut raw = Vec::new();
    for req in [
        "GET /hello HTTP/1.1\r\nhost: t\r\n\r\n",
        "GET /users/42?x=1 HTTP/1.1\r\nhost: t\r\n\r\n",
        "HEAD /users/7 HTTP/1.1\r\nhost: t\r\n\r\n",
        "GET /nowhere HTTP/1.1\r\nhost: t\r\n\r\n",
        "DELETE /hello HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
    ] {
        raw.extend_from_slice(req.as_bytes());
    }
    let mut c = s.connect();
    c.write_all(&raw).unwrap();
    let answer = read_to_close(&mut c);
    drop(c);
    // A malformed request on its own connection: refused with 400, still reported.
    let bad = s.raw(b"GET / HTTP/1.1\r\nbad header line\r\n\r\n");
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    assert!(
        wait_for(Duration::from_secs(5), || *rec.closed.lock().unwrap() == 2),
        "both connections reported ended"
    );
    let seen = rec.seen.lock().unwrap().clone();
    let summary: Vec<(&str, Option<&str>, u16)> = seen
        .iter()
        .map(|e| (e.method.as_str(), e.route.as_deref(), e.status))
        .collect();
    assert_eq!(
        summary,
        [
            ("GET", Some("/hello"), 200),
            ("GET", Some("/users/{id}"), 200),
            ("HEAD", Some("/users/{id}"), 200),
            ("GET", None, 404),
            ("DELETE", None, 405),
            ("-", None, 400),
        ]
    );
    assert_eq!(seen[1].target, "/users/42?x=1");
    // One route, one index (HEAD answered by the GET route); another route, another.
    assert!(seen[1].index.is_some() && seen[1].index == seen[2].index);
    assert!(seen[0].index.is_some() && seen[0].index != seen[1].index);
    assert_eq!(seen[3].index, None);
    // The reported bytes are exactly what the client received, in at least one write each.
    let reported: u64 = seen[..5].iter().map(|e| e.bytes).sum();
    assert_eq!(reported, answer.len() as u64);
    assert_eq!(seen[5].bytes, bad.len() as u64);
    // The five arrived together: their answers went out together, the calls booked to the last.
    assert!(seen.iter().all(|e| e.completed), "{seen:?}");
    assert!(seen[..5].iter().map(|e| e.syscalls).sum::<u64>() >= 1);
    assert!(seen[5].syscalls >= 1);
    assert_eq!(*rec.opened.lock().unwrap(), 2);
}
