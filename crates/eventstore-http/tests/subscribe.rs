//! `$all` subscriptions as server-sent events, in-process on both front ends over raw TCP:
//! stored then live events in order, resuming after `Last-Event-ID`, filters, catching up,
//! keep-alive comments, a subscriber leaving, `EventsApi::shutdown`, and the server's shutdown.
//! Ported from `crates/galleon/tests/events_subscribe.rs`.

#[macro_use]
mod support;

use std::io::Read;
use std::net::Shutdown;
use std::time::Duration;

use serde_json::{Value, json};
use support::{
    Front, Options, Subscriber, TestServer, WAIT, append, client, events, get, numbers,
    wait_open_streams,
};

on_both_fronts!(
    a_subscriber_receives_stored_then_live_events_in_order,
    filtered_subscriptions_keep_their_events,
    catching_up_delivers_every_stored_event_once_in_order,
    an_idle_subscription_sends_keep_alive_comments,
    a_subscriber_leaving_ends_its_stream_and_the_server_carries_on,
    api_shutdown_ends_event_streams_and_nothing_else,
    server_shutdown_ends_open_subscriptions,
);

fn a_subscriber_receives_stored_then_live_events_in_order(front: Front) {
    let s = TestServer::start(front);
    let addr = s.addr;
    let mut c = client(addr);
    let (_, first) = append(&mut c, "cart-1", None, &events("Added", 2));

    let mut sub = Subscriber::open_ok(addr, "/all/subscribe?from=0", &[]);
    assert_eq!(sub.header("content-type"), Some("text/event-stream"));
    assert_eq!(sub.header("cache-control"), Some("no-cache"));
    assert_eq!(sub.header("x-accel-buffering"), Some("no"));
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
    let (_, all) = get(&mut c, "/all");
    assert_eq!(data, all["events"][4]);

    // A reconnecting EventSource resumes after its Last-Event-ID; `from` takes precedence.
    let mut again = Subscriber::open_ok(
        addr,
        "/all/subscribe",
        &[("Last-Event-ID", &ids[5].to_string())],
    );
    let hello = again.next_frame().unwrap();
    assert_eq!(
        hello.comments,
        [format!("galleon $all from position {}", ids[5] + 1)]
    );
    assert_eq!(again.next_event().id, Some(ids[6]));
    let mut from = Subscriber::open_ok(
        addr,
        &format!("/all/subscribe?from={}", ids[2]),
        &[("Last-Event-ID", &ids[5].to_string())],
    );
    from.next_frame().unwrap();
    assert_eq!(from.next_event().id, Some(ids[2]));

    // Bad positions are 400 before anything streams.
    let mut c = client(addr);
    let (status, _) = get(&mut c, "/all/subscribe?from=x");
    assert_eq!(status, 400);
    for bad in ["nope", "-1", &u64::MAX.to_string()] {
        let r = c.get("/all/subscribe", &[("Last-Event-ID", bad)]).unwrap();
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
}

fn filtered_subscriptions_keep_their_events(front: Front) {
    let s = TestServer::start(front);
    let mut c = client(s.addr);
    let mut sub = Subscriber::open_ok(s.addr, "/all/subscribe?category=acct&type=Opened", &[]);
    sub.next_frame().unwrap();
    for (stream, ty) in [
        ("acct-1", "Closed"),
        ("other-1", "Opened"),
        ("acct-2", "Opened"),
        ("acct", "Opened"),
    ] {
        assert_eq!(append(&mut c, stream, None, &events(ty, 1)).0, 201);
    }
    let streams: Vec<String> = (0..2)
        .map(|_| {
            let data: Value = serde_json::from_str(&sub.next_event().data).unwrap();
            data["stream_id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(streams, ["acct-2", "acct"]);
    for bad in ["category=a-b", "type=", "category=a&category=b", "nope=1"] {
        let (status, v) = get(&mut c, &format!("/all/subscribe?{bad}"));
        assert_eq!(status, 400, "{bad}: {v}");
    }
}

fn catching_up_delivers_every_stored_event_once_in_order(front: Front) {
    let s = TestServer::start(front);
    let mut c = client(s.addr);
    for stream in ["bulk-1", "bulk-2", "bulk-3"] {
        let (status, r) = append(&mut c, stream, None, &events("Bulk", 150));
        assert_eq!(status, 201, "{r}");
    }
    let (_, all) = get(&mut c, "/all?limit=1000");
    let positions = numbers(&all, "position");
    assert_eq!(positions.len(), 450);
    // Many frames per chunk while catching up; the frames must still be whole and in order.
    let mut sub = Subscriber::open_ok(s.addr, "/all/subscribe", &[]);
    let ids: Vec<u64> = (0..450).map(|_| sub.next_event().id.unwrap()).collect();
    assert_eq!(ids, positions);
}

fn an_idle_subscription_sends_keep_alive_comments(front: Front) {
    let s = TestServer::start_with(
        front,
        Options {
            keep_alive: Some(Duration::from_millis(200)),
            ..Options::default()
        },
    );
    let mut sub = Subscriber::open_ok(s.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    for _ in 0..2 {
        let f = sub.next_frame().unwrap();
        assert_eq!(
            (f.id, &f.comments[..]),
            (None, &["keep-alive".to_owned()][..])
        );
    }
    // Events still arrive between keep-alives.
    let (status, r) = append(&mut client(s.addr), "k", None, &events("Tick", 1));
    assert_eq!(status, 201);
    assert_eq!(sub.next_event().id, r["first_position"].as_u64());
}

fn a_subscriber_leaving_ends_its_stream_and_the_server_carries_on(front: Front) {
    let s = TestServer::start(front);
    let addr = s.addr;
    let mut sub = Subscriber::open_ok(addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let (status, _) = append(&mut client(addr), "s", None, &events("Before", 1));
    assert_eq!(status, 201);
    sub.next_event();
    assert_eq!(s.api.open_streams(), 1);
    assert_eq!(s.api.store().stats().subscribers, 1);

    // The client leaves (its FIN is what the server sees of a closed socket too): the server
    // notices while the stream waits for its next event, drops the stream and the subscription,
    // and closes its side of the connection.
    sub.sock.shutdown(Shutdown::Write).unwrap();
    wait_open_streams(&s.api, 0);
    assert_eq!(s.api.store().stats().subscribers, 0);
    sub.sock.set_read_timeout(Some(WAIT)).unwrap();
    let mut rest = Vec::new();
    match sub.sock.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server kept the subscriber's connection open: {e}"),
    }

    // The server carries on: appends, reads and new subscribers work.
    let mut c = client(addr);
    let (status, r) = append(&mut c, "s", Some("0"), &events("After", 1));
    assert_eq!(status, 201, "{r}");
    let (status, all) = get(&mut c, "/all");
    assert_eq!((status, numbers(&all, "version")), (200, vec![0, 1]));
    let mut sub = Subscriber::open_ok(
        addr,
        &format!("/all/subscribe?from={}", r["first_position"]),
        &[],
    );
    sub.next_frame().unwrap();
    assert_eq!(sub.next_event().event.as_deref(), Some("After"));
}

/// `EventsApi::shutdown`: what an axum server's graceful shutdown needs. Open streams end with
/// their last chunk, later ones at once; the other routes keep working.
fn api_shutdown_ends_event_streams_and_nothing_else(front: Front) {
    let s = TestServer::start(front);
    let mut subs: Vec<Subscriber> = (0..2)
        .map(|_| {
            let mut sub = Subscriber::open_ok(s.addr, "/all/subscribe", &[]);
            sub.next_frame().unwrap();
            sub
        })
        .collect();
    s.api.shutdown();
    for sub in &mut subs {
        assert!(sub.next_frame().is_none(), "the stream did not end");
        assert!(sub.ended, "the stream ended without its last chunk");
    }
    wait_open_streams(&s.api, 0);
    let mut late = Subscriber::open_ok(s.addr, "/all/subscribe", &[]);
    assert!(late.next_frame().is_none());
    assert!(late.ended);
    let mut c = client(s.addr);
    assert_eq!(append(&mut c, "after", None, &events("E", 1)).0, 201);
    assert_eq!(get(&mut c, "/streams/after").0, 200);
}

fn server_shutdown_ends_open_subscriptions(front: Front) {
    let mut s = TestServer::start(front);
    let mut sub = Subscriber::open_ok(s.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    // The stream never ends by itself: the server's shutdown must end it, and then return.
    s.stop();
    assert!(sub.next_frame().is_none(), "the stream did not end");
    assert!(sub.ended, "the stream ended without its last chunk");
}
