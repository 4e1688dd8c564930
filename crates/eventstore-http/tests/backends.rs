//! The API core (`EventsApi::handle`, no server) on both backends: SQLite (a temporary file) and
//! PostgreSQL (`DATABASE_URL`, one fresh schema per test, dropped afterwards; skipped loudly
//! without it). Ported from galleon-eventstore's checks of its `api` module
//! (`tests/conformance/http_api.rs`, `check_http_functions` of `tests/persistent.rs`,
//! `check_stream_metadata_http` of `tests/stream_meta.rs`).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use galleon_eventstore::{Direction, OpenOptions, Store};
use galleon_eventstore_http::{ApiReply, ApiRequest, ApiResponse, EventsApi};
use serde_json::{Value, json};

/// Longest wait for an event to show.
const WAIT: Duration = Duration::from_secs(30);

macro_rules! on_both_backends {
    ($($check:ident),* $(,)?) => {
        on_both_backends!(galleon_eventstore::OpenOptions::default(); $($check),*);
    };
    ($options:expr; $($check:ident),* $(,)?) => {
        $(
            mod $check {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::run_sqlite($options, super::$check).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::run_postgres($options, stringify!($check), super::$check).await
                }
            }
        )*
    };
}

on_both_backends!(
    appends_and_reads,
    appends_refused,
    persistent_subscriptions,
    subscriptions_in_pages,
    consumer_groups,
    stream_metadata,
    recorded_at_as_the_store_has_it,
);

on_both_backends!(galleon_eventstore::OpenOptions {
        max_subscriptions: Some(2),
        ..galleon_eventstore::OpenOptions::default()
    };
    subscriptions_past_the_limit_are_refused,
);

async fn run_sqlite<F, Fut>(options: OpenOptions, check: F)
where
    F: FnOnce(EventsApi) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}/events.db", dir.path().display());
    let store = Store::open_with(&url, options).await.unwrap();
    check(EventsApi::new(store)).await;
}

async fn run_postgres<F, Fut>(options: OpenOptions, name: &str, check: F)
where
    F: FnOnce(EventsApi) -> Fut,
    Fut: Future<Output = ()>,
{
    if !cfg!(feature = "postgres") {
        eprintln!(
            "\n*** SKIPPED: {name} on PostgreSQL: built without the `postgres` feature ***\n"
        );
        return;
    }
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: {name} on PostgreSQL: DATABASE_URL is not set ***\n");
        return;
    };
    let schema = format!("es_http_core_{}", uuid::Uuid::new_v4().simple());
    let options = OpenOptions {
        pg_schema: Some(schema.clone()),
        ..options
    };
    let store = Store::open_with(&url, options).await.unwrap();
    let outcome = AssertUnwindSafe(check(EventsApi::new(store)))
        .catch_unwind()
        .await;
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(conn);
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// One request through the API's core; `target` may hold a query.
async fn handle(
    api: &EventsApi,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> ApiReply {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut req = ApiRequest::new(method, path, query, body.as_bytes());
    for (name, value) in headers {
        req = req.with_header(name, value.as_bytes());
    }
    api.handle(req).await
}

/// A request/response route's answer.
async fn call(api: &EventsApi, method: &str, target: &str, body: &str) -> ApiResponse {
    call_with(api, method, target, &[], body).await
}

async fn call_with(
    api: &EventsApi,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> ApiResponse {
    match handle(api, method, target, headers, body).await {
        ApiReply::Response(r) => r,
        ApiReply::Events(_) => panic!("{method} {target} streams"),
    }
}

/// `POST /subscriptions/{name}/ack` with `body`.
async fn ack(api: &EventsApi, name: &str, body: &str) -> ApiResponse {
    call(api, "POST", &format!("/subscriptions/{name}/ack"), body).await
}

fn json_of(r: &ApiResponse) -> Value {
    assert_eq!(r.content_type, "application/json");
    serde_json::from_slice(&r.body).unwrap()
}

/// The opening comment of an event stream: where it starts.
async fn opening(api: &EventsApi, target: &str, headers: &[(&str, &str)]) -> String {
    let ApiReply::Events(mut events) = handle(api, "GET", target, headers, "").await else {
        panic!("GET {target} does not stream");
    };
    let chunk = events.next().await.expect("an opening comment");
    String::from_utf8(chunk.concat()).unwrap()
}

/// Waits until `n` events are readable in `$all` (on PostgreSQL an event shows once every older
/// transaction of the cluster has ended): a subscription delivers them as they do.
async fn wait_for_all(store: &Store, n: usize) {
    let got = tokio::time::timeout(WAIT, store.subscribe_all(0).take(n).count())
        .await
        .expect("$all did not show the events");
    assert_eq!(got, n);
}

async fn appends_and_reads(api: EventsApi) {
    let s = &api;
    let good = r#"[{"type":"Placed","data":{"n":1}},
                   {"id":"6f1c0a52-9f64-4a8e-9a55-4f0f8a0c7e11","type":"Paid","data":[1,2],"metadata":{"by":"me"}}]"#;
    let no_stream = [("ES-Expected-Version", "no_stream")];
    let r = call_with(s, "POST", "/streams/http-a", &no_stream, good).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let j = json_of(&r);
    assert_eq!(
        (j["first_version"].as_u64(), j["last_version"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(
        j["last_position"].as_u64().unwrap() - j["first_position"].as_u64().unwrap(),
        1
    );
    // The first event had no id, so a retry is a new append that conflicts on the header.
    let r = call_with(s, "POST", "/streams/http-a", &no_stream, good).await;
    assert_eq!(r.status, 409);
    let j = json_of(&r);
    assert_eq!(
        (&j["expected"], &j["actual"]),
        (&json!("no_stream"), &json!(1))
    );
    assert!(
        j["error"]
            .as_str()
            .unwrap()
            .contains("wrong expected version")
    );
    let r = call_with(
        s,
        "POST",
        "/streams/http-a",
        &[("ES-Expected-Version", "5")],
        r#"[{"type":"X","data":null}]"#,
    )
    .await;
    assert_eq!(
        (r.status, json_of(&r)["expected"].as_str()),
        (409, Some("5"))
    );
    // Malformed JSON: located message.
    let r = call(
        s,
        "POST",
        "/streams/http-a",
        "[{\"type\":\"A\",\n \"data\": }]",
    )
    .await;
    assert_eq!(r.status, 400);
    let msg = json_of(&r)["error"].as_str().unwrap().to_owned();
    assert!(msg.contains("line 2 column"), "{msg}");
    // Wrong types, missing fields, unknown fields, not an array, empty, bad id.
    for (body, needle) in [
        (r#"[{"type":5,"data":{}}]"#, "invalid type"),
        (r#"[{"type":"A"}]"#, "missing field `data`"),
        (
            r#"[{"type":"A","data":{},"colour":"red"}]"#,
            "unknown field `colour`",
        ),
        (r#"{"type":"A","data":{}}"#, "expected a sequence"),
        (r#"[]"#, "at least one event"),
        (
            r#"[{"id":"not-a-uuid","type":"A","data":{}}]"#,
            "line 1 column",
        ),
        (r#"[{"type":"","data":{}}]"#, "type must be"),
        ("", "EOF while parsing"),
    ] {
        let r = call(s, "POST", "/streams/http-b", body).await;
        assert_eq!(r.status, 400, "{body}");
        let msg = json_of(&r)["error"].as_str().unwrap().to_owned();
        assert!(msg.contains(needle), "{body}: {msg}");
    }
    let r = call_with(
        s,
        "POST",
        "/streams/http-b",
        &[("ES-Expected-Version", "banana")],
        r#"[{"type":"A","data":{}}]"#,
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        json_of(&r)["error"]
            .as_str()
            .unwrap()
            .contains("ES-Expected-Version")
    );
    // A reserved stream name.
    let r = call(s, "POST", "/streams/$all", r#"[{"type":"A","data":{}}]"#).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        call(s, "GET", "/streams/http-b", "").await.status,
        404,
        "nothing stored by rejected requests"
    );
    // Reads.
    let r = call(s, "GET", "/streams/http-a", "").await;
    assert_eq!(r.status, 200);
    let j = json_of(&r);
    assert_eq!(j["events"].as_array().unwrap().len(), 2);
    assert_eq!(j["events"][1]["id"], "6f1c0a52-9f64-4a8e-9a55-4f0f8a0c7e11");
    assert_eq!(j["events"][1]["data"], json!([1, 2]));
    assert_eq!(j["events"][1]["metadata"], json!({"by": "me"}));
    assert_eq!(j["events"][0]["metadata"], json!({}));
    assert_eq!(j["next_from"], 2);
    let r = call(s, "GET", "/streams/http-a?direction=backward&limit=1", "").await;
    let j = json_of(&r);
    assert_eq!(
        (j["events"][0]["version"].as_u64(), j["next_from"].as_u64()),
        (Some(1), Some(0))
    );
    let r = call(s, "GET", "/streams/http-missing", "").await;
    assert_eq!(r.status, 404);
    assert!(
        json_of(&r)["error"]
            .as_str()
            .unwrap()
            .contains("http-missing")
    );
    for q in [
        "limit=0",
        "limit=abc",
        "limit=100000",
        "direction=sideways",
        "from=-1",
        "colour=red",
    ] {
        let r = call(s, "GET", &format!("/streams/http-a?{q}"), "").await;
        assert_eq!(r.status, 400, "{q}");
        assert!(!json_of(&r)["error"].as_str().unwrap().is_empty());
    }
    wait_for_all(s.store(), 2).await;
    let j = json_of(&call(s, "GET", "/all?limit=1", "").await);
    assert_eq!(j["events"].as_array().unwrap().len(), 1);
    let next = j["next_from"].as_u64().unwrap();
    let r = call(s, "GET", &format!("/all?from={next}"), "").await;
    assert_eq!(json_of(&r)["events"][0]["version"], 1);
    assert_eq!(
        call(s, "GET", "/all?direction=forward", "").await.status,
        400
    );
    let j = json_of(&call(s, "GET", "/categories/http?type=Paid", "").await);
    assert_eq!(j["events"].as_array().unwrap().len(), 1, "{j}");
    // An SSE frame for a stored event.
    let ev = &s
        .store()
        .read_stream("http-a", 1, 1, Direction::Forward)
        .await
        .unwrap()[0];
    let frame = String::from_utf8(galleon_eventstore_http::sse_frame(ev).to_vec()).unwrap();
    assert!(
        frame.starts_with(&format!("id: {}\nevent: Paid\ndata: {{", ev.position)),
        "{frame}"
    );
    // And the stream of `$all` from it.
    let from = format!("/all/subscribe?from={}", ev.position);
    assert_eq!(
        opening(s, &from, &[]).await,
        format!(": galleon $all from position {}\n\n", ev.position)
    );
}

/// `GET /subscriptions` pages (issue 35): 25 subscriptions at `limit=10` are 10, 10 and 5, every
/// name once, in order, `next_after` leading from one page to the next and `null` on the last;
/// a bad `limit=` or an unknown parameter is a 400.
async fn subscriptions_in_pages(api: EventsApi) {
    let s = &api;
    let mut names: Vec<String> = (0..25).map(|i| format!("s-{i:02}")).collect();
    for n in &names {
        let r = call(s, "PUT", &format!("/subscriptions/{n}"), "").await;
        assert_eq!(r.status, 200, "{:?}", json_of(&r));
    }
    names.sort();
    let mut target = "/subscriptions?limit=10".to_owned();
    let (mut got, mut sizes) = (Vec::new(), Vec::new());
    loop {
        let r = call(s, "GET", &target, "").await;
        assert_eq!(r.status, 200, "{target}: {:?}", json_of(&r));
        let v = json_of(&r);
        let page = v["subscriptions"].as_array().unwrap();
        sizes.push(page.len());
        got.extend(page.iter().map(|i| i["name"].as_str().unwrap().to_owned()));
        match &v["next_after"] {
            Value::Null => break,
            Value::String(next) => {
                assert_eq!(next, got.last().unwrap());
                target = format!("/subscriptions?limit=10&after={next}");
            }
            other => panic!("next_after {other}"),
        }
    }
    assert_eq!(sizes, [10, 10, 5]);
    assert_eq!(got, names);
    // Without a limit: the default page (100 here), all 25 and no next page.
    let v = json_of(&call(s, "GET", "/subscriptions", "").await);
    assert_eq!(v["subscriptions"].as_array().unwrap().len(), 25);
    assert_eq!(v["next_after"], Value::Null);
    // Exactly a page left: no empty page after it.
    let v = json_of(&call(s, "GET", "/subscriptions?after=s-14&limit=10", "").await);
    assert_eq!(v["subscriptions"].as_array().unwrap().len(), 10);
    assert_eq!(v["next_after"], Value::Null);
    for (query, needle) in [
        ("limit=0", "out of range"),
        ("limit=1001", "out of range"),
        (
            "limit=99999999999999999999999",
            "not a non-negative integer",
        ),
        ("limit=ten", "not a non-negative integer"),
        ("limit=5&limit=6", "twice"),
        ("after=a&after=b", "twice"),
        ("bogus=1", "unknown query parameter"),
    ] {
        let r = call(s, "GET", &format!("/subscriptions?{query}"), "").await;
        let v = json_of(&r);
        assert_eq!(r.status, 400, "{query}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains(needle),
            "{query}: {v}"
        );
    }
}

/// With `max_subscriptions` 2 (issue 35): a third subscription or group is 409 naming the limit
/// and how to raise it, and is not created; the two still answer, deliver and take acks.
async fn subscriptions_past_the_limit_are_refused(api: EventsApi) {
    let s = &api;
    assert_eq!(call(s, "PUT", "/subscriptions/a", "").await.status, 200);
    let group = r#"{"partitions":2}"#;
    assert_eq!(call(s, "PUT", "/subscriptions/g", group).await.status, 200);
    for (name, body) in [("c", ""), ("h", group)] {
        let r = call(s, "PUT", &format!("/subscriptions/{name}"), body).await;
        let v = json_of(&r);
        assert_eq!(r.status, 409, "{v}");
        let msg = v["error"].as_str().unwrap();
        assert!(
            msg.contains("limit of 2") && msg.contains("--events-max-subscriptions"),
            "{v}"
        );
        let r = call(s, "GET", &format!("/subscriptions/{name}"), "").await;
        assert_eq!(r.status, 404);
    }
    assert_eq!(call(s, "PUT", "/subscriptions/a", "").await.status, 200);
    let r = call(s, "POST", "/streams/x-1", r#"[{"type":"A","data":{}}]"#).await;
    let position = json_of(&r)["first_position"].as_u64().unwrap();
    let r = ack(s, "a", &format!(r#"{{"position":{position}}}"#)).await;
    assert_eq!(r.status, 200, "{:?}", json_of(&r));
    assert_eq!(json_of(&r)["checkpoint"], json!(position + 1));
    let list = json_of(&call(s, "GET", "/subscriptions", "").await);
    assert_eq!(list["subscriptions"].as_array().unwrap().len(), 2);
}

async fn persistent_subscriptions(api: EventsApi) {
    let s = &api;
    let r = call(
        s,
        "PUT",
        "/subscriptions/h",
        r#"{"category":"acct","types":["A","B"]}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", json_of(&r));
    let v = json_of(&r);
    assert_eq!(
        (&v["name"], &v["category"], &v["types"], &v["checkpoint"]),
        (&json!("h"), &json!("acct"), &json!(["A", "B"]), &json!(0))
    );
    assert_eq!(call(s, "PUT", "/subscriptions/e", "").await.status, 200);
    assert_eq!(
        call(s, "PUT", "/subscriptions/end", r#"{"from":"end"}"#)
            .await
            .status,
        200
    );
    for (body, needle) in [
        (r#"{"from":"start"}"#, "neither a position"),
        (r#"{"from":-1}"#, "invalid request body"),
        (r#"{"category":"a-b"}"#, "category"),
        (r#"{"types":[""]}"#, "type"),
        (r#"{"colour":"red"}"#, "unknown field"),
        ("[", "invalid request body"),
        (r#"{"partitions":0}"#, "partitions"),
    ] {
        let r = call(s, "PUT", "/subscriptions/bad", body).await;
        let v = json_of(&r);
        assert_eq!(r.status, 400, "{body}: {v}");
        assert!(v["error"].as_str().unwrap().contains(needle), "{body}: {v}");
    }
    let r = call(s, "PUT", "/subscriptions/h", r#"{"category":"other"}"#).await;
    assert_eq!(r.status, 409);
    // A name that decodes to one with `/` is no route; `$` names are the store's to refuse.
    assert_eq!(
        call(s, "PUT", "/subscriptions/no%2Fslash", "").await.status,
        404
    );
    assert_eq!(call(s, "PUT", "/subscriptions/$bad", "").await.status, 400);
    // Ten events of h, one of another category; acks name what h delivers (issue 35).
    let ten = (0..10)
        .map(|_| r#"{"type":"A","data":{}}"#)
        .collect::<Vec<_>>();
    let r = call(
        s,
        "POST",
        "/streams/acct-1",
        &format!("[{}]", ten.join(",")),
    )
    .await;
    let last = json_of(&r)["first_position"].as_u64().unwrap() + 9;
    let r = call(s, "POST", "/streams/other-1", r#"[{"type":"A","data":{}}]"#).await;
    let other = json_of(&r)["first_position"].as_u64().unwrap();
    wait_for_all(s.store(), 11).await;
    for (position, needle) in [
        (u64::MAX, "past the head"),
        (other + 1_000_000, "past the head"),
        (
            other,
            r#"not in the subscription's filter (category "acct", types ["A", "B"])"#,
        ),
    ] {
        let r = ack(s, "h", &format!(r#"{{"position":{position}}}"#)).await;
        let v = json_of(&r);
        assert_eq!(r.status, 400, "{position}: {v}");
        let error = v["error"].as_str().unwrap();
        assert!(
            error.starts_with(&format!("invalid ack of position {position}: ")),
            "{v}"
        );
        assert!(error.contains(needle), "{v}");
        assert!(
            error.ends_with(
                "expected the position (SSE id:) of an event the subscription delivered"
            ),
            "{v}"
        );
        let r = call(s, "GET", "/subscriptions/h", "").await;
        assert_eq!(
            json_of(&r)["checkpoint"],
            0,
            "a refused ack moved the checkpoint"
        );
    }
    let checkpoint = last + 1;
    for _ in 0..2 {
        let r = ack(s, "h", &format!(r#"{{"position":{last}}}"#)).await;
        assert_eq!(
            (r.status, &json_of(&r)["checkpoint"]),
            (200, &json!(checkpoint))
        );
    }
    let r = ack(s, "h", &format!(r#"{{"position":{last},"member":"m"}}"#)).await;
    assert_eq!(
        r.status,
        400,
        "a member acks only a group's events: {}",
        json_of(&r)
    );
    for body in ["{}", r#"{"position":"9"}"#, "9"] {
        assert_eq!(
            call(s, "POST", "/subscriptions/h/ack", body).await.status,
            400
        );
    }
    assert_eq!(
        call(s, "POST", "/subscriptions/nope/ack", r#"{"position":1}"#)
            .await
            .status,
        404
    );
    let r = call(s, "GET", "/subscriptions/h", "").await;
    assert_eq!(json_of(&r)["checkpoint"], checkpoint);
    assert_eq!(call(s, "GET", "/subscriptions/nope", "").await.status, 404);
    let list = json_of(&call(s, "GET", "/subscriptions", "").await);
    assert_eq!(list["subscriptions"].as_array().unwrap().len(), 3);
    // Consuming starts at the checkpoint, or after a further Last-Event-ID.
    let events = "/subscriptions/h/events";
    let starts = |at: u64| format!(": galleon subscription h from position {at}\n\n");
    assert_eq!(opening(s, events, &[]).await, starts(checkpoint));
    assert_eq!(
        opening(s, events, &[("Last-Event-ID", "3")]).await,
        starts(checkpoint)
    );
    let further = (checkpoint + 20).to_string();
    assert_eq!(
        opening(s, events, &[("Last-Event-ID", &further)]).await,
        starts(checkpoint + 21)
    );
    let r = call_with(s, "GET", events, &[("Last-Event-ID", "x")], "").await;
    assert_eq!(r.status, 400);
    assert_eq!(
        call(s, "GET", "/subscriptions/nope/events", "")
            .await
            .status,
        404
    );
    // A consumer group is consumed as a member.
    let r = call(s, "PUT", "/subscriptions/g", r#"{"partitions":2}"#).await;
    assert_eq!(json_of(&r)["group"]["partitions"], 2);
    assert_eq!(
        call(s, "GET", "/subscriptions/g/events", "").await.status,
        400
    );
    assert_eq!(
        opening(s, "/subscriptions/g/events?member=m1", &[]).await,
        ": galleon subscription g, consumer group member m1\n\n"
    );
    let r = call(s, "DELETE", "/subscriptions/h", "").await;
    assert_eq!((r.status, &json_of(&r)["deleted"]), (200, &json!("h")));
    assert_eq!(call(s, "DELETE", "/subscriptions/h", "").await.status, 404);
}

async fn stream_metadata(api: EventsApi) {
    let s = &api;
    let body = r#"[{"type":"T","data":{}},{"type":"T","data":{}},{"type":"T","data":{}}]"#;
    assert_eq!(call(s, "POST", "/streams/h-1", body).await.status, 201);
    let r = call(
        s,
        "PUT",
        "/streams/h-1/metadata",
        r#"{"max_count":2,"max_age_ms":60000}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", json_of(&r));
    let v = json_of(&call(s, "GET", "/streams/h-1/metadata", "").await);
    assert_eq!(
        v,
        json!({"stream_id": "h-1", "max_count": 2, "max_age_ms": 60000, "truncate_before": null, "deleted": false})
    );
    let r = call(s, "GET", "/streams/h-1", "").await;
    let got: Vec<u64> = json_of(&r)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [1, 2]);
    for body in [
        r#"{"max_count":0}"#,
        r#"{"max_count":-1}"#,
        r#"{"colour":1}"#,
        "[",
        r#"{"deleted":true}"#,
    ] {
        let r = call(s, "PUT", "/streams/h-1/metadata", body).await;
        assert_eq!(r.status, 400, "{}", json_of(&r));
    }
    assert_eq!(
        call(s, "PUT", "/streams/$bad/metadata", "{}").await.status,
        400
    );
    let r = call(s, "POST", "/streams/h-1/delete", "").await;
    assert_eq!(
        (r.status, &json_of(&r)["truncate_before"]),
        (200, &json!(3)),
        "{}",
        json_of(&r)
    );
    assert_eq!(call(s, "GET", "/streams/h-1", "").await.status, 404);
    assert_eq!(call(s, "POST", "/streams/h-1/delete", "").await.status, 404);
    assert_eq!(
        call(s, "POST", "/streams/nope/delete", "").await.status,
        404
    );
    let r = call_with(
        s,
        "POST",
        "/streams/h-1",
        &[("ES-Expected-Version", "no_stream")],
        r#"[{"type":"T","data":{}}]"#,
    )
    .await;
    assert_eq!((r.status, &json_of(&r)["first_version"]), (201, &json!(3)));
}

/// From galleon-eventstore's conformance checks of appends: a body nested past the store's JSON
/// depth limit is a 400 that says so; a replay of a batch (same ids) under an expectation the
/// stream does not meet is the 409 it would have been, not an idempotent success.
async fn appends_refused(api: EventsApi) {
    let s = &api;
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let deep = format!(r#"[{{"type":"D","data":{}}}]"#, nest(1000));
    let r = call(s, "POST", "/streams/deep-http", &deep).await;
    assert_eq!(r.status, 400);
    let msg = json_of(&r)["error"].as_str().unwrap().to_owned();
    assert!(msg.contains("nested"), "{msg}");
    let batch: Vec<String> = (0..3)
        .map(|i| {
            format!(
                r#"{{"id":"{}","type":"I","data":{i}}}"#,
                uuid::Uuid::new_v4()
            )
        })
        .collect();
    let batch = format!("[{}]", batch.join(","));
    let no_stream = [("ES-Expected-Version", "no_stream")];
    let first = call_with(s, "POST", "/streams/idem-a", &no_stream, &batch).await;
    assert_eq!(first.status, 201, "{:?}", first.body);
    // The same batch under the same expectation: the original's positions.
    let again = call_with(s, "POST", "/streams/idem-a", &no_stream, &batch).await;
    assert_eq!(
        (again.status, json_of(&again)["first_position"].as_u64()),
        (201, json_of(&first)["first_position"].as_u64())
    );
    let r = call_with(
        s,
        "POST",
        "/streams/idem-a",
        &[("ES-Expected-Version", "5")],
        &batch,
    )
    .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
}

/// From galleon-eventstore's group checks: a consumer group created with partitions, shown with
/// its assignments, acknowledged per partition, consumed as a member; bad members are refused.
async fn consumer_groups(api: EventsApi) {
    let s = &api;
    assert_eq!(call(s, "PUT", "/subscriptions/plain", "").await.status, 200);
    let r = call(
        s,
        "PUT",
        "/subscriptions/hg",
        r#"{"partitions":4,"member_timeout_ms":500}"#,
    )
    .await;
    let v = json_of(&r);
    assert_eq!(r.status, 200, "{v}");
    assert_eq!(v["group"]["partitions"], 4);
    assert_eq!(v["group"]["member_timeout_ms"], 500);
    for body in [
        r#"{"partitions":0}"#,
        r#"{"partitions":4,"member_timeout_ms":5}"#,
        r#"{"member_timeout_ms":500}"#,
    ] {
        let r = call(s, "PUT", "/subscriptions/hb", body).await;
        assert_eq!(r.status, 400, "{body}: {}", json_of(&r));
    }
    let v = json_of(&call(s, "GET", "/subscriptions/hg", "").await);
    assert_eq!(
        v["group"]["assignments"].as_array().unwrap().len(),
        4,
        "{v}"
    );
    let r = call(s, "POST", "/streams/acct-1", r#"[{"type":"T","data":{}}]"#).await;
    assert_eq!(r.status, 201);
    let position = json_of(&r)["first_position"].as_u64().unwrap();
    wait_for_all(s.store(), 1).await;
    let r = ack(s, "hg", &format!(r#"{{"position":{position}}}"#)).await;
    let v = json_of(&r);
    assert_eq!(r.status, 200, "{v}");
    assert_eq!(
        v["partition"],
        galleon_eventstore::partition_of("acct-1", 4)
    );
    // With a member, only the holder of the event's partition acknowledges it.
    let r = ack(
        s,
        "hg",
        &format!(r#"{{"position":{position},"member":"m9"}}"#),
    )
    .await;
    let v = json_of(&r);
    assert_eq!(r.status, 400, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("held by no member, not \"m9\""),
        "{v}"
    );
    let opened = opening(s, "/subscriptions/hg/events?member=m1", &[]).await;
    assert!(opened.starts_with(':'), "{opened}");
    for (target, status) in [
        ("/subscriptions/hg/events?member=a%20b", 400),
        ("/subscriptions/plain/events?member=m1", 400),
        ("/subscriptions/nope/events?member=m1", 404),
        ("/subscriptions/hg/events", 400),
    ] {
        assert_eq!(call(s, "GET", target, "").await.status, status, "{target}");
    }
}

/// From galleon-eventstore's consumer checks: `recorded_at` in the API's JSON is the store's
/// timestamp as it prints it (RFC 3339, UTC, microseconds).
async fn recorded_at_as_the_store_has_it(api: EventsApi) {
    let s = &api;
    let r = call(
        s,
        "POST",
        "/streams/time-1",
        r#"[{"type":"T","data":{}},{"type":"T","data":{}}]"#,
    )
    .await;
    assert_eq!(r.status, 201);
    wait_for_all(api.store(), 2).await;
    let read = api
        .store()
        .read_stream("time-1", 0, 10, Direction::Forward)
        .await
        .unwrap();
    let v = json_of(&call(s, "GET", "/all?category=time", "").await);
    for (i, e) in read.iter().enumerate() {
        assert_eq!(
            v["events"][i]["recorded_at"].as_str().unwrap(),
            e.recorded_at.to_string()
        );
    }
}
