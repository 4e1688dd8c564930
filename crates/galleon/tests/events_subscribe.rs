//! `$all` subscriptions of `galleon serve` as server-sent events, end to end over TCP against
//! the real binary on a temporary SQLite file: stored then live events in order, catching up,
//! keep-alive comments, a subscriber leaving, shutdown.

mod events_support;
mod serve_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use events_support::{Subscriber, WAIT, append, client, events, get, numbers, start};
use serde_json::{Value, json};
use serve_support::ServeProcess;

#[test]
fn a_subscriber_receives_stored_then_live_events_in_order() {
    let s = start(&[]);
    let addr = s.proc.addr;
    let mut c = client(addr);
    let (_, first) = append(&mut c, "cart-1", None, &events("Added", 2));

    let mut sub = Subscriber::open(addr, "/all/subscribe?from=0", &[]);
    assert_eq!(sub.status(), 200, "{}", sub.head);
    assert_eq!(sub.header("content-type"), Some("text/event-stream"));
    assert_eq!(sub.header("cache-control"), Some("no-cache"));
    assert_eq!(sub.header("transfer-encoding"), Some("chunked"));
    let hello = sub.next_frame().unwrap();
    assert_eq!(hello.comments, ["galleon $all from position 0"]);

    // The stored events first.
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(sub.next_event());
    }
    // Then live ones, appended from other connections while the subscriber waits.
    let mut appended = vec![first];
    for (i, stream) in ["cart-2", "cart-1", "cart-3"].iter().enumerate() {
        let mut other = client(addr);
        let (status, r) = append(&mut other, stream, None, &events(&format!("Live{i}"), 2));
        assert_eq!(status, 201, "{r}");
        appended.push(r);
        for _ in 0..2 {
            seen.push(sub.next_event());
        }
    }
    let ids: Vec<u64> = seen.iter().map(|f| f.id.unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids not increasing: {ids:?}"
    );
    let expected: Vec<u64> = appended
        .iter()
        .flat_map(|r| {
            [
                r["first_position"].as_u64().unwrap(),
                r["last_position"].as_u64().unwrap(),
            ]
        })
        .collect();
    assert_eq!(
        ids, expected,
        "every event once, at the positions the appends answered"
    );
    let types: Vec<&str> = seen.iter().map(|f| f.event.as_deref().unwrap()).collect();
    assert_eq!(
        types,
        [
            "Added", "Added", "Live0", "Live0", "Live1", "Live1", "Live2", "Live2"
        ]
    );
    // Each frame's data is the event as GET /all returns it.
    let data: Value = serde_json::from_str(&seen[4].data).unwrap();
    assert_eq!(data["stream_id"], "cart-1");
    assert_eq!(data["position"], ids[4]);
    assert_eq!(data["version"], 2);
    assert_eq!(data["data"], json!({"n": 0}));

    // A reconnecting EventSource resumes after its Last-Event-ID; `from` takes precedence.
    let mut again = Subscriber::open(
        addr,
        "/all/subscribe",
        &[("Last-Event-ID", &ids[5].to_string())],
    );
    again.next_frame().unwrap();
    assert_eq!(again.next_event().id, Some(ids[6]));
    let mut from = Subscriber::open(addr, &format!("/all/subscribe?from={}", ids[2]), &[]);
    from.next_frame().unwrap();
    assert_eq!(from.next_event().id, Some(ids[2]));

    // Bad positions are 400 before anything streams.
    let mut c = client(addr);
    let (status, _) = get(&mut c, "/all/subscribe?from=x");
    assert_eq!(status, 400);
    let r = c
        .get("/all/subscribe", &[("Last-Event-ID", "nope")])
        .unwrap();
    assert_eq!(r.status, 400);
}

#[test]
fn catching_up_delivers_every_stored_event_once_in_order() {
    let s = start(&[]);
    let mut c = client(s.proc.addr);
    for stream in ["bulk-1", "bulk-2", "bulk-3"] {
        let (status, r) = append(&mut c, stream, None, &events("Bulk", 150));
        assert_eq!(status, 201, "{r}");
    }
    let (_, all) = get(&mut c, "/all?limit=1000");
    let positions = numbers(&all, "position");
    assert_eq!(positions.len(), 450);
    // Many frames per chunk while catching up; the frames must still be whole and in order.
    let mut sub = Subscriber::open(s.proc.addr, "/all/subscribe", &[]);
    let ids: Vec<u64> = (0..450).map(|_| sub.next_event().id.unwrap()).collect();
    assert_eq!(ids, positions);
}

#[test]
fn an_idle_subscription_sends_keep_alive_comments() {
    let s = start(&["--events-keep-alive", "0.2"]);
    let mut sub = Subscriber::open(s.proc.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let started = Instant::now();
    for _ in 0..2 {
        let f = sub.next_frame().unwrap();
        assert_eq!(
            (f.id, &f.comments[..]),
            (None, &["keep-alive".to_owned()][..])
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // Events still arrive between keep-alives.
    let (status, r) = append(&mut client(s.proc.addr), "k", None, &events("Tick", 1));
    assert_eq!(status, 201);
    assert_eq!(sub.next_event().id, r["first_position"].as_u64());
}

/// Server-side TCP state (`/proc/net/tcp` `st`) of the connection from `client` to the server
/// listening at `server`, or `None` once the server has closed and released it.
fn server_side_tcp_state(server: SocketAddr, client: SocketAddr) -> Option<u8> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = |field: &str| u16::from_str_radix(field.rsplit(':').next().unwrap(), 16).unwrap();
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (port(f[1]) == server.port() && port(f[2]) == client.port())
            .then(|| u8::from_str_radix(f[3], 16).unwrap())
    })
}

/// `/proc/net/tcp` states.
const TCP_ESTABLISHED: u8 = 0x01;
const TCP_CLOSE_WAIT: u8 = 0x08;

#[test]
fn a_subscriber_leaving_ends_its_stream_and_the_server_carries_on() {
    // No --events: the support module's GALLEON_EVENTS names the store.
    let s = ServeProcess::start(&[]);
    let addr = s.addr;
    assert!(
        s.stderr().contains(&format!(
            "event store sqlite:{} (sqlite)",
            s.events_db.display()
        )),
        "{}",
        s.stderr()
    );
    let mut sub = Subscriber::open(addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let (status, _) = append(&mut client(addr), "s", None, &events("Before", 1));
    assert_eq!(status, 201);
    sub.next_event();
    assert!(s.events_db.exists());
    let local = sub.sock.local_addr().unwrap();
    assert_eq!(server_side_tcp_state(addr, local), Some(TCP_ESTABLISHED));

    drop(sub);
    // The server notices while the stream waits for its next event, drops the stream (and the
    // subscription) and closes its side: the connection must not linger in CLOSE_WAIT.
    let deadline = Instant::now() + WAIT;
    while let Some(TCP_ESTABLISHED | TCP_CLOSE_WAIT) = server_side_tcp_state(addr, local) {
        assert!(
            Instant::now() < deadline,
            "the server kept the subscriber's connection open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The server carries on: appends, reads and new subscribers work.
    let mut c = client(addr);
    let (status, r) = append(&mut c, "s", Some("0"), &events("After", 1));
    assert_eq!(status, 201, "{r}");
    let (status, all) = get(&mut c, "/all");
    assert_eq!((status, numbers(&all, "version")), (200, vec![0, 1]));
    let mut sub = Subscriber::open(
        addr,
        &format!("/all/subscribe?from={}", r["first_position"]),
        &[],
    );
    sub.next_frame().unwrap();
    assert_eq!(sub.next_event().event.as_deref(), Some("After"));
}

#[test]
fn shutdown_ends_open_subscriptions() {
    let mut s = start(&[]);
    let mut sub = Subscriber::open(s.proc.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let pid = s.proc.pid();
    let started = Instant::now();
    let status = s
        .proc
        .terminate(pid)
        .expect("server did not exit after SIGTERM");
    assert!(status.success(), "{status:?}: {}", s.proc.stderr());
    // The 30 s shutdown grace is for responses that finish; an endless stream ends at once.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(sub.next_frame().is_none(), "the stream did not end");
    assert!(sub.ended, "the stream ended without its last chunk");
}
