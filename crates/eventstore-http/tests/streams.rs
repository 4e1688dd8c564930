//! The stream routes over HTTP, in-process on both front ends: appends, conflicts, bad input,
//! body and API limits, reads of streams, `$all` and categories, routing answers (405, HEAD, bad
//! escapes), opening a store; and once against PostgreSQL when `DATABASE_URL` is set.
//! Ported from `crates/galleon/tests/events.rs`.

#[macro_use]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;

use galleon_eventstore::OpenOptions;
use galleon_eventstore_http::ApiLimits;
use serde_json::{Value, json};
use support::{
    Front, Options, Subscriber, TestServer, WAIT, append, call, drop_schema, events, get, numbers,
    unique_schema,
};

on_both_fronts!(
    append_answers_positions_conflicts_and_bad_input,
    routing_answers_405_head_and_bad_paths,
    request_bodies_over_the_limit_get_413,
    api_bounds_are_limits,
    reads_streams_both_ways_and_all,
    categories_and_filters,
    postgres_smoke,
);

/// A raw request on a connection of its own, read to its end.
fn raw(s: &TestServer, request: &[u8]) -> String {
    let mut sock = TcpStream::connect(s.addr).unwrap();
    sock.write_all(request).unwrap();
    let mut answer = Vec::new();
    sock.set_read_timeout(Some(WAIT)).unwrap();
    sock.read_to_end(&mut answer).unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

fn append_answers_positions_conflicts_and_bad_input(front: Front) {
    let s = TestServer::start(front);
    let mut c = s.client();
    let batch = json!([
        {"id": "6f1c2b1e-7d1a-4c55-9a3e-0d2a6f0b9c01", "type": "OrderPlaced", "data": {"order": 1, "total": 30}},
        {"id": "6f1c2b1e-7d1a-4c55-9a3e-0d2a6f0b9c02", "type": "OrderPaid", "data": {"order": 1}, "metadata": {"by": "card"}}
    ]);
    let (status, first) = append(&mut c, "order-1", Some("no_stream"), &batch);
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["stream_id"], "order-1");
    assert_eq!(
        (&first["first_version"], &first["last_version"]),
        (&json!(0), &json!(1))
    );
    let (p0, p1) = (
        first["first_position"].as_u64().unwrap(),
        first["last_position"].as_u64().unwrap(),
    );
    assert!(p0 < p1, "{first}");

    // Regression (issue 13, class 11): a stream id whose escape does not decode was a text 404,
    // then a text 400; the API answers in JSON.
    for (method, target) in [
        ("GET", "/streams/a%zz"),
        ("POST", "/streams/a%ff"),
        ("GET", "/streams/%e2%28"),
    ] {
        let (status, v) = call(&mut c, method, target, &[], b"[]");
        assert_eq!(status, 400, "{method} {target}: {v}");
        assert!(v["error"].as_str().unwrap().contains("stream id"), "{v}");
    }

    // The same request again (a client retrying after a lost answer) stores nothing twice.
    let (status, retry) = append(&mut c, "order-1", Some("no_stream"), &batch);
    assert_eq!((status, &retry), (201, &first));

    // Another writer that expected version 0 loses: 409 with what it expected and what is there.
    let (status, conflict) = append(&mut c, "order-1", Some("0"), &events("Late", 1));
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["expected"], "0");
    assert_eq!(conflict["actual"], 1);
    assert!(
        conflict["error"]
            .as_str()
            .unwrap()
            .contains("wrong expected version"),
        "{conflict}"
    );
    let (status, conflict) = append(&mut c, "order-1", Some("no_stream"), &events("Late", 1));
    assert_eq!((status, &conflict["actual"]), (409, &json!(1)));
    // The right expectation wins.
    let (status, next) = append(&mut c, "order-1", Some("1"), &events("Shipped", 1));
    assert_eq!((status, &next["first_version"]), (201, &json!(2)), "{next}");
    let (status, _) = append(
        &mut c,
        "order-1",
        Some("stream_exists"),
        &events("Closed", 1),
    );
    assert_eq!(status, 201);

    // Malformed JSON: 400 with where it went wrong.
    let (status, bad) = call(
        &mut c,
        "POST",
        "/streams/order-1",
        &[],
        b"[{\"type\": \"X\", \"data\": {]",
    );
    assert_eq!(status, 400, "{bad}");
    let msg = bad["error"].as_str().unwrap();
    assert!(msg.contains("line 1 column 25"), "{msg}");
    // Well-formed JSON of the wrong shape, and an empty append.
    for body in [&b"{\"type\": \"X\"}"[..], b"[{\"data\": 1}]", b"[]"] {
        let (status, bad) = call(&mut c, "POST", "/streams/order-1", &[], body);
        assert_eq!(status, 400, "{}: {bad}", String::from_utf8_lossy(body));
    }

    // A bad ES-Expected-Version header is refused, not read as `any`.
    for header in ["banana", "-1", "1.5", ""] {
        let (status, bad) = call(
            &mut c,
            "POST",
            "/streams/order-1",
            &[("ES-Expected-Version", header)],
            events("X", 1).to_string().as_bytes(),
        );
        assert_eq!(status, 400, "{header:?}: {bad}");
        assert!(
            bad["error"]
                .as_str()
                .unwrap()
                .contains("ES-Expected-Version"),
            "{bad}"
        );
    }

    // A header value that is not UTF-8 is refused too (raw socket: the client sends text only).
    let answer = raw(
        &s,
        b"POST /streams/order-1 HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\
          ES-Expected-Version: \xff\r\ncontent-length: 2\r\n\r\n[]",
    );
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(
        answer.contains("ES-Expected-Version: the value is not UTF-8"),
        "{answer}"
    );

    // Nothing of the refused appends was stored.
    let (status, stored) = get(&mut c, "/streams/order-1");
    assert_eq!(status, 200);
    assert_eq!(numbers(&stored, "version"), [0, 1, 2, 3]);
}

fn routing_answers_405_head_and_bad_paths(front: Front) {
    let s = TestServer::start(front);
    let mut c = s.client();
    assert_eq!(append(&mut c, "order-1", None, &events("E", 1)).0, 201);

    // An unknown method on an event-store route is 405 with the allowed ones, in table order.
    for (method, target, allow) in [
        ("DELETE", "/streams/order-1", "POST, GET, HEAD"),
        ("POST", "/all", "GET, HEAD"),
        ("PATCH", "/subscriptions/x", "PUT, GET, DELETE, HEAD"),
        ("GET", "/streams/order-1/delete", "POST"),
        ("BREW", "/all/subscribe", "GET, HEAD"),
    ] {
        let r = c.request(method, target, &[], b"").unwrap();
        assert_eq!(r.status, 405, "{method} {target}");
        assert_eq!(r.header("allow"), Some(allow), "{method} {target}");
    }

    // HEAD is the GET route without its body.
    let r = c.request("HEAD", "/streams/order-1", &[], b"").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.body.is_empty());

    // An escaped `/` in a stream id or name is no route of this API: JSON 404.
    for target in [
        "/streams/a%2Fb",
        "/streams/a%2Fb/metadata",
        "/categories/a%2fb",
        "/subscriptions/a%2Fb",
    ] {
        let (status, v) = get(&mut c, target);
        assert_eq!(status, 404, "{target}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains("contains `/`"),
            "{target}: {v}"
        );
    }
    // Bad escapes in names are JSON 400s, as for stream ids.
    for (method, target) in [
        ("GET", "/categories/%zz"),
        ("PUT", "/subscriptions/%ff"),
        ("POST", "/subscriptions/%e2%28/ack"),
    ] {
        let (status, v) = call(&mut c, method, target, &[], b"");
        assert_eq!(status, 400, "{method} {target}: {v}");
        assert!(v["error"].as_str().unwrap().contains("name"), "{v}");
    }
    // A query escape that does not decode is a 400 too, not a parameter dropped.
    let (status, v) = get(&mut c, "/all?limit=%zz");
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("bad percent escape"),
        "{v}"
    );
}

fn request_bodies_over_the_limit_get_413(front: Front) {
    // One limit, the API's max_body_bytes: a body under it is read and parsed, one over it is
    // refused before it is parsed (sized or chunked).
    let s = TestServer::start_with(
        front,
        Options {
            limits: ApiLimits {
                max_body_bytes: 1000,
                ..ApiLimits::default()
            },
            ..Options::default()
        },
    );
    let mut c = s.client();
    let mut body = vec![b' '; 1000];
    body[0] = b'x';
    let (status, _) = call(&mut c, "POST", "/streams/big", &[], &body);
    assert_eq!(
        status, 400,
        "exactly at the limit the body is read and parsed (and is not JSON)"
    );
    let mut c = s.client();
    let (status, v) = call(&mut c, "POST", "/streams/big", &[], &[b' '; 1001]);
    assert_eq!(status, 413, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("limit of 1000 bytes"),
        "{v}"
    );
    // Chunked, so the size is known only once read past the limit.
    let mut chunked = b"POST /streams/big HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\
                        transfer-encoding: chunked\r\n\r\n"
        .to_vec();
    for _ in 0..3 {
        chunked.extend_from_slice(b"190\r\n");
        chunked.extend_from_slice(&[b' '; 0x190]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let answer = raw(&s, &chunked);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("limit of 1000 bytes"), "{answer}");
    let mut c = s.client();
    let (status, _) = append(&mut c, "big", None, &events("Small", 1));
    assert_eq!(status, 201);
}

/// `max_append_events` and `max_read_limit` bound the API; the default page of a read shrinks
/// to fit a smaller limit.
fn api_bounds_are_limits(front: Front) {
    let s = TestServer::start_with(
        front,
        Options {
            limits: ApiLimits {
                max_append_events: 3,
                max_read_limit: 5,
                ..ApiLimits::default()
            },
            ..Options::default()
        },
    );
    let mut c = s.client();
    let (status, v) = append(&mut c, "lim", None, &events("E", 4));
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("the limit is 3"),
        "{v}"
    );
    for _ in 0..3 {
        assert_eq!(append(&mut c, "lim", None, &events("E", 3)).0, 201);
    }
    let (status, v) = get(&mut c, "/streams/lim?limit=6");
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("1..=5"), "{v}");
    assert_eq!(
        numbers(&get(&mut c, "/streams/lim?limit=5").1, "version").len(),
        5
    );
    assert_eq!(numbers(&get(&mut c, "/streams/lim").1, "version").len(), 5);
    assert_eq!(get(&mut c, "/all?limit=6").0, 400);
    assert_eq!(numbers(&get(&mut c, "/all").1, "position").len(), 5);
    assert_eq!(get(&mut c, "/categories/lim?limit=6").0, 400);
}

fn reads_streams_both_ways_and_all(front: Front) {
    let s = TestServer::start(front);
    let mut c = s.client();
    let (status, a) = append(&mut c, "acct-a", None, &events("Deposited", 5));
    assert_eq!(status, 201, "{a}");
    let (status, b) = append(&mut c, "acct-b", Some("no_stream"), &events("Opened", 2));
    assert_eq!(status, 201, "{b}");

    let (status, page) = get(&mut c, "/streams/acct-a?from=1&limit=2");
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["stream_id"], "acct-a");
    assert_eq!(numbers(&page, "version"), [1, 2]);
    assert_eq!(page["next_from"], 3);
    let e = &page["events"][0];
    assert_eq!(e["type"], "Deposited");
    assert_eq!(e["data"], json!({"n": 1}));
    assert_eq!(e["metadata"], json!({"by": "test"}));
    assert_eq!(e["stream_id"], "acct-a");
    assert!(e["id"].as_str().unwrap().len() == 36, "{e}");
    assert!(
        e["recorded_at"].as_str().unwrap().ends_with('Z'),
        "RFC 3339 in UTC: {e}"
    );

    let (status, page) = get(&mut c, "/streams/acct-a?direction=backward&limit=3");
    assert_eq!(status, 200, "{page}");
    assert_eq!(numbers(&page, "version"), [4, 3, 2]);
    assert_eq!(page["next_from"], 1);
    let (_, page) = get(&mut c, "/streams/acct-a?direction=backward&from=1");
    assert_eq!(numbers(&page, "version"), [1, 0]);
    assert_eq!(page["next_from"], Value::Null);
    let (_, page) = get(&mut c, "/streams/acct-a");
    assert_eq!(numbers(&page, "version"), [0, 1, 2, 3, 4]);

    let (status, missing) = get(&mut c, "/streams/nobody");
    assert_eq!(status, 404, "{missing}");

    // $all: both streams, in position order, with the positions the appends answered.
    let (status, all) = get(&mut c, "/all");
    assert_eq!(status, 200, "{all}");
    let positions = numbers(&all, "position");
    assert_eq!(positions.len(), 7);
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert_eq!(positions[0], a["first_position"].as_u64().unwrap());
    assert_eq!(positions[4], a["last_position"].as_u64().unwrap());
    assert_eq!(positions[6], b["last_position"].as_u64().unwrap());
    let streams: Vec<&str> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["stream_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        streams,
        ["acct-a"; 5]
            .iter()
            .chain(&["acct-b"; 2])
            .copied()
            .collect::<Vec<_>>()
    );
    let (_, page) = get(&mut c, &format!("/all?from={}&limit=2", positions[3]));
    assert_eq!(numbers(&page, "position"), &positions[3..5]);
    assert_eq!(page["next_from"], positions[4] + 1);

    // Bad queries are 400 with the parameter named.
    for (bad, names) in [
        ("/all?limit=0", "limit"),
        ("/all?limit=1000000", "limit"),
        ("/all?from=x", "from"),
        ("/all?from=+1", "from"),
        ("/all?direction=backward", "direction"),
        ("/streams/acct-a?direction=sideways", "direction"),
        ("/streams/acct-a?nope=1", "nope"),
        ("/streams/acct-a?type=A", "type"),
    ] {
        let (status, v) = get(&mut c, bad);
        assert_eq!(status, 400, "{bad}: {v}");
        assert!(v["error"].as_str().unwrap().contains(names), "{bad}: {v}");
    }
}

/// `GET /categories/{c}` and the `category=`/`type=` filters of `GET /all`.
fn categories_and_filters(front: Front) {
    let s = TestServer::start(front);
    let mut c = s.client();
    for (stream, ty) in [
        ("acct-1", "Opened"),
        ("acct-2", "Opened"),
        ("account-1", "Opened"),
        ("acct-1", "Closed"),
        ("acct", "Opened"),
    ] {
        assert_eq!(append(&mut c, stream, None, &events(ty, 1)).0, 201);
    }
    let streams = |v: &Value| -> Vec<String> {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["stream_id"].as_str().unwrap().to_owned())
            .collect()
    };
    // `acct` and `acct-...`, not `account-1`.
    let (status, v) = get(&mut c, "/categories/acct");
    assert_eq!(status, 200, "{v}");
    assert_eq!(streams(&v), ["acct-1", "acct-2", "acct-1", "acct"]);
    assert!(v.get("stream_id").is_none(), "{v}");
    let (_, v) = get(&mut c, "/categories/acct?type=Closed");
    assert_eq!(streams(&v), ["acct-1"]);
    let (_, all_acct) = get(&mut c, "/all?category=acct&type=Opened&type=Closed");
    assert_eq!(streams(&all_acct), ["acct-1", "acct-2", "acct-1", "acct"]);
    let (_, opened) = get(&mut c, "/all?type=Opened&limit=2");
    assert_eq!(streams(&opened), ["acct-1", "acct-2"]);
    let next = opened["next_from"].as_u64().unwrap();
    let (_, rest) = get(&mut c, &format!("/all?type=Opened&from={next}"));
    assert_eq!(streams(&rest), ["account-1", "acct"]);
    // An empty page's next_from is where it started.
    let (_, none) = get(&mut c, "/categories/nobody?from=3");
    assert_eq!((streams(&none).len(), &none["next_from"]), (0, &json!(3)));
    for bad in [
        "/all?category=a&category=b",
        "/all?category=a-b",
        "/all?type=",
        "/categories/acct?category=x",
        "/categories/a-b",
    ] {
        assert_eq!(get(&mut c, bad).0, 400, "{bad}");
    }
}

fn postgres_smoke(front: Front) {
    if !cfg!(feature = "postgres") {
        eprintln!("\n*** SKIPPED: postgres_smoke: built without the `postgres` feature ***\n");
        return;
    }
    let Some(url) = support::database_url("postgres_smoke") else {
        return;
    };
    let schema = unique_schema(&format!("es_http_{front:?}").to_lowercase());
    let s = TestServer::start_with(
        front,
        Options {
            postgres: Some((url.clone(), schema.clone())),
            ..Options::default()
        },
    );
    assert_eq!(s.api.store().backend_name(), "postgres");
    let mut sub = Subscriber::open_ok(s.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let mut c = s.client();
    let (status, r) = append(&mut c, "pg-1", Some("no_stream"), &events("Pg", 3));
    assert_eq!(status, 201, "{r}");
    let (status, conflict) = append(&mut c, "pg-1", Some("no_stream"), &events("Pg", 1));
    assert_eq!((status, &conflict["actual"]), (409, &json!(2)));
    let (_, back) = get(&mut c, "/streams/pg-1?direction=backward");
    assert_eq!(numbers(&back, "version"), [2, 1, 0]);
    // The subscriber first: on PostgreSQL `$all` shows an event once every older transaction of
    // the cluster has ended (another test's may be open); once delivered, `GET /all` has it.
    let ids: Vec<u64> = (0..3).map(|_| sub.next_event().id.unwrap()).collect();
    let (_, all) = get(&mut c, "/all");
    assert_eq!(numbers(&all, "version"), [0, 1, 2]);
    assert_eq!(ids, numbers(&all, "position"));
    assert_eq!(ids[0], r["first_position"].as_u64().unwrap());
    drop(sub);
    drop(c);
    drop(s);
    drop_schema(&url, &schema);
}

/// The store-opening helper: errors name the URL with its password hidden and say what is
/// wrong; nothing is created by a refused open. (What `galleon serve` printed at a refused
/// start-up, minus its flags.)
#[test]
fn a_store_that_cannot_be_opened_says_why_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let under_file = format!("sqlite:{}/events.db", file.display());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut cases = vec![
        (
            "mysql://db/events",
            "opening the event store mysql://db/events",
        ),
        ("sqlite:", "the path after `sqlite:` is empty"),
        (under_file.as_str(), "opening the event store sqlite:"),
    ];
    if cfg!(feature = "postgres") {
        cases.extend([
            (
                "postgres://me:s3cr3t@db:notaport/events",
                "opening the event store postgres://me:***@db:notaport/events: invalid URL",
            ),
            (
                "postgres://me:s3cr3t@127.0.0.1:1/events",
                "opening the event store postgres://me:***@127.0.0.1:1/events",
            ),
        ]);
    }
    for (url, expect) in cases {
        let e = rt
            .block_on(galleon_eventstore_http::open(url, OpenOptions::default()))
            .unwrap_err();
        // The whole chain, as `anyhow` prints it with `{:#}`.
        let mut shown = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            shown.push_str(&format!(": {s}"));
            source = s.source();
        }
        assert!(shown.contains(expect), "{url}: {shown}");
        assert!(!shown.contains("s3cr3t"), "password shown: {shown}");
        assert!(!e.is_timeout());
    }
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() == 1,
        "nothing was created by the refused opens"
    );
}

/// A store that never answers is given up on after the timeout: a listener that takes the
/// connection and says nothing.
#[cfg(feature = "postgres")]
#[test]
fn opening_gives_up_after_the_timeout() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "postgres://me:s3cr3t@{}/events",
            silent.local_addr().unwrap()
        );
        let e = galleon_eventstore_http::open_within(
            &url,
            OpenOptions::default(),
            std::time::Duration::from_millis(200),
        )
        .await
        .unwrap_err();
        assert!(e.is_timeout(), "{e}");
        assert!(e.to_string().ends_with(": no answer within 0.2s"), "{e}");
        assert!(!e.to_string().contains("s3cr3t"), "{e}");
        drop(silent);
    });
}
