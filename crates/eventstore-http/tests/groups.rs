//! Persistent subscriptions and consumer groups over HTTP, in-process on both front ends: create,
//! list, inspect, consume as server-sent events, acknowledge, resume; a group of two members,
//! each stream on one member in order, acks per partition; a member whose connection closes
//! hands its streams to the other, nothing lost; bad member parameters are 400/404.
//! The group test is ported from `crates/galleon/tests/events_groups.rs`.

#[macro_use]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use galleon_client::Client;
use serde_json::{Value, json};
use support::{Front, Subscriber, TestServer, WAIT, append, events};

on_both_fronts!(
    persistent_subscriptions_resume_from_their_checkpoint,
    a_group_splits_streams_over_http_and_survives_a_closed_member,
);

fn call(c: &mut Client, method: &str, target: &str, body: &Value) -> (u16, Value) {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    support::call(c, method, target, &[], &body)
}

fn persistent_subscriptions_resume_from_their_checkpoint(front: Front) {
    let s = TestServer::start(front);
    let mut c = s.client();
    for (stream, ty) in [("mail-1", "Sent"), ("other-1", "Sent"), ("mail-2", "Sent")] {
        assert_eq!(append(&mut c, stream, None, &events(ty, 1)).0, 201);
    }
    // An empty body: everything from position 0.
    let (status, v) = call(&mut c, "PUT", "/subscriptions/all", &Value::Null);
    assert_eq!((status, &v["checkpoint"]), (200, &json!(0)), "{v}");
    let (status, v) = call(
        &mut c,
        "PUT",
        "/subscriptions/mail",
        &json!({"category": "mail", "types": ["Sent"]}),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["name"], &v["category"]),
        (&json!("mail"), &json!("mail"))
    );
    assert!(v.get("group").is_none(), "{v}");
    // The same again is the same subscription; other settings are a conflict.
    assert_eq!(
        call(
            &mut c,
            "PUT",
            "/subscriptions/mail",
            &json!({"category": "mail", "types": ["Sent"]})
        )
        .0,
        200
    );
    let (status, v) = call(
        &mut c,
        "PUT",
        "/subscriptions/mail",
        &json!({"category": "x"}),
    );
    assert_eq!(status, 409, "{v}");
    for bad in [
        json!({"from": "start"}),
        json!({"colour": 1}),
        json!({"member_timeout_ms": 1000}),
        json!({"category": "a-b"}),
    ] {
        let (status, v) = call(&mut c, "PUT", "/subscriptions/bad", &bad);
        assert_eq!(status, 400, "{bad}: {v}");
    }
    let (_, list) = call(&mut c, "GET", "/subscriptions", &Value::Null);
    let names: Vec<&str> = list["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["all", "mail"]);

    let mut consumer = Subscriber::open_ok(s.addr, "/subscriptions/mail/events", &[]);
    let hello = consumer.next_frame().unwrap();
    assert_eq!(
        hello.comments,
        ["galleon subscription mail from position 0"]
    );
    let first = consumer.next_event();
    let second = consumer.next_event();
    let stream = |f: &support::Frame| -> String {
        let v: Value = serde_json::from_str(&f.data).unwrap();
        v["stream_id"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        (stream(&first), stream(&second)),
        ("mail-1".into(), "mail-2".into())
    );
    drop(consumer);

    // Acknowledged up to the first: a new consumer starts after it.
    let (status, v) = call(
        &mut c,
        "POST",
        "/subscriptions/mail/ack",
        &json!({"position": first.id}),
    );
    assert_eq!(
        (status, &v["checkpoint"]),
        (200, &json!(first.id.unwrap() + 1)),
        "{v}"
    );
    assert!(v.get("partition").is_none(), "{v}");
    let (_, v) = call(&mut c, "GET", "/subscriptions/mail", &Value::Null);
    assert_eq!(v["checkpoint"], json!(first.id.unwrap() + 1), "{v}");
    let mut consumer = Subscriber::open_ok(s.addr, "/subscriptions/mail/events", &[]);
    consumer.next_frame().unwrap();
    assert_eq!(consumer.next_event().id, second.id);
    // A reconnecting EventSource that saw further resumes after its Last-Event-ID.
    let (_, r) = append(&mut c, "mail-3", None, &events("Sent", 1));
    let mut resumed = Subscriber::open_ok(
        s.addr,
        "/subscriptions/mail/events",
        &[("Last-Event-ID", &second.id.unwrap().to_string())],
    );
    resumed.next_frame().unwrap();
    assert_eq!(resumed.next_event().id, r["first_position"].as_u64());

    for (method, target, body, want) in [
        ("GET", "/subscriptions/nope", Value::Null, 404),
        ("GET", "/subscriptions/nope/events", Value::Null, 404),
        (
            "POST",
            "/subscriptions/nope/ack",
            json!({"position": 1}),
            404,
        ),
        ("POST", "/subscriptions/mail/ack", json!({"pos": 1}), 400),
        ("DELETE", "/subscriptions/nope", Value::Null, 404),
        (
            "GET",
            "/subscriptions/mail/events?member=a",
            Value::Null,
            400,
        ),
    ] {
        let (status, v) = call(&mut c, method, target, &body);
        assert_eq!(status, want, "{method} {target}: {v}");
    }
    let r = c
        .get("/subscriptions/mail/events", &[("Last-Event-ID", "x")])
        .unwrap();
    assert_eq!(r.status, 400);
    let (status, v) = call(&mut c, "DELETE", "/subscriptions/mail", &Value::Null);
    assert_eq!((status, &v["deleted"]), (200, &json!("mail")), "{v}");
    assert_eq!(
        call(&mut c, "GET", "/subscriptions/mail", &Value::Null).0,
        404
    );
}

/// Waits until the group's partitions are all held, by exactly the `members` named: polls the
/// group's state (a rebalance is the store's own work), bounded by [`WAIT`].
fn wait_owners(c: &mut Client, members: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, v) = call(c, "GET", "/subscriptions/work", &Value::Null);
        assert_eq!(status, 200, "{v}");
        let owners: BTreeSet<String> = v["group"]["assignments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["owner"].as_str().unwrap_or("-").to_owned())
            .collect();
        let want: BTreeSet<String> = members.iter().map(|m| m.to_string()).collect();
        if owners == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "owners {owners:?}, want {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn append_round(c: &mut Client, round: u64) -> usize {
    for i in 0..3 {
        for s in 0..8 {
            let body = json!([{"type": "Job", "data": {"round": round, "i": i}}]);
            let (status, v) = call(c, "POST", &format!("/streams/job-{s}"), &body);
            assert_eq!(status, 201, "{v}");
        }
    }
    24
}

/// Takes `n` events from the members' forwarded streams, acking each one as it is handled.
fn receive(
    c: &mut Client,
    from: &mpsc::Receiver<(&'static str, Value)>,
    n: usize,
) -> Vec<(String, Value)> {
    let mut got = Vec::new();
    while got.len() < n {
        let (member, e) = from
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{} of {n} events arrived", got.len()));
        let (status, v) = call(
            c,
            "POST",
            "/subscriptions/work/ack",
            &json!({"position": e["position"]}),
        );
        assert_eq!(status, 200, "{v}");
        assert!(v["partition"].is_u64(), "{v}");
        got.push((member.to_owned(), e));
    }
    got
}

fn a_group_splits_streams_over_http_and_survives_a_closed_member(front: Front) {
    let s = TestServer::start(front);
    let mut c = s.client();
    let (status, v) = call(
        &mut c,
        "PUT",
        "/subscriptions/work",
        &json!({"category": "job", "partitions": 4, "member_timeout_ms": 3000}),
    );
    assert_eq!((status, &v["group"]["partitions"]), (200, &json!(4)), "{v}");
    assert_eq!(v["group"]["member_timeout_ms"], 3000, "{v}");

    // Bad member parameters and a plain consumer of a group.
    for (target, want) in [
        ("/subscriptions/work/events?member=a%20b", 400),
        ("/subscriptions/work/events?member=a&member=b", 400),
        ("/subscriptions/work/events?colour=red", 400),
        ("/subscriptions/work/events", 400),
        ("/subscriptions/nope/events?member=a", 404),
    ] {
        let (status, v) = call(&mut c, "GET", target, &Value::Null);
        assert_eq!(status, want, "{target}: {v}");
    }

    let (tx, events) = mpsc::channel();
    let a = Subscriber::open_ok(s.addr, "/subscriptions/work/events?member=a", &[])
        .forward("a", tx.clone());
    let b =
        Subscriber::open_ok(s.addr, "/subscriptions/work/events?member=b", &[]).forward("b", tx);
    wait_owners(&mut c, &["a", "b"]);
    let (_, v) = call(&mut c, "GET", "/subscriptions/work", &Value::Null);
    let members: BTreeSet<&str> = v["group"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["member"].as_str().unwrap())
        .collect();
    assert_eq!(members, BTreeSet::from(["a", "b"]), "{v}");

    let n = append_round(&mut c, 0);
    let got = receive(&mut c, &events, n);
    let mut runs: BTreeMap<String, (String, Vec<u64>)> = BTreeMap::new();
    for (member, e) in &got {
        let stream = e["stream_id"].as_str().unwrap().to_owned();
        let run = runs
            .entry(stream.clone())
            .or_insert_with(|| (member.clone(), Vec::new()));
        assert_eq!(&run.0, member, "{stream} went to two members");
        run.1.push(e["version"].as_u64().unwrap());
    }
    assert_eq!(runs.len(), 8);
    for (stream, (_, versions)) in &runs {
        assert_eq!(versions, &[0, 1, 2], "{stream} in order");
    }
    let b_streams: BTreeSet<&String> = runs
        .iter()
        .filter(|(_, (m, _))| m == "b")
        .map(|(s, _)| s)
        .collect();
    assert!(!b_streams.is_empty(), "b had streams: {runs:?}");

    // b's connection closes: a takes its partitions, and gets every later event of its streams.
    drop(b);
    wait_owners(&mut c, &["a"]);
    let n = append_round(&mut c, 1);
    let later = receive(&mut c, &events, n);
    assert!(later.iter().all(|(m, _)| m == "a"), "{later:?}");
    for stream in b_streams {
        let versions: Vec<u64> = later
            .iter()
            .filter(|(_, e)| e["stream_id"] == stream.as_str())
            .map(|(_, e)| e["version"].as_u64().unwrap())
            .collect();
        assert_eq!(versions, [3, 4, 5], "{stream} continued on a, in order");
    }
    drop(a);
}
