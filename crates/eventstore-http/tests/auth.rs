//! Bearer tokens on the API (issue 19), in-process on both front ends: each route's role, 401
//! (with `www-authenticate`) and 403 in JSON, a role opened explicitly, `admin` closed once any
//! token is set, and every role without a token closed then too (issue 35). Ported from
//! `crates/galleon/tests/events_auth.rs`.

#[macro_use]
mod support;

use galleon_client::Client;
use galleon_eventstore_http::{Access, OpenRoles};
use support::{Front, Options, Subscriber, TestServer, bearer};

const READ: &str = "read-token-0123456789";
const APPEND: &str = "append-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

on_both_fronts!(
    each_route_needs_its_role,
    a_role_without_a_token_is_open,
    an_admin_token_alone_closes_every_role,
);

/// Status and body of one request carrying `token` (if any); errors must be JSON.
fn call(
    c: &mut Client,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: &[u8],
) -> (u16, String) {
    let auth = token.map(bearer);
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let r = c.request(method, target, &headers, body).unwrap();
    if r.status >= 400 {
        assert_eq!(
            r.header("content-type"),
            Some("application/json"),
            "{}",
            r.text()
        );
        if r.status == 401 {
            assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        }
    }
    (r.status, r.text())
}

fn all_tokens() -> Options {
    Options {
        access: Access {
            read: Some(READ.into()),
            append: Some(APPEND.into()),
            admin: Some(ADMIN.into()),
            ..Access::default()
        },
        ..Options::default()
    }
}

fn each_route_needs_its_role(front: Front) {
    let s = TestServer::start_with(front, all_tokens());
    let mut c = s.client();
    let batch = br#"[{"type":"A","data":{}}]"#;
    let wrong = "x".repeat(20);
    for (token, want) in [(None, 401), (Some(READ), 403), (Some(wrong.as_str()), 401)] {
        let (status, body) = call(&mut c, "POST", "/streams/s-1", token, batch);
        assert_eq!(status, want, "{token:?}: {body}");
    }
    assert_eq!(
        call(&mut c, "POST", "/streams/s-1", Some(APPEND), batch).0,
        201
    );
    assert_eq!(
        call(&mut c, "POST", "/streams/s-1", Some(ADMIN), batch).0,
        201
    );

    for target in [
        "/streams/s-1",
        "/streams/s-1/metadata",
        "/all",
        "/categories/s",
        "/subscriptions",
    ] {
        assert_eq!(call(&mut c, "GET", target, None, b"").0, 401, "{target}");
        assert_eq!(
            call(&mut c, "GET", target, Some(APPEND), b"").0,
            403,
            "{target}"
        );
        assert_eq!(
            call(&mut c, "GET", target, Some(READ), b"").0,
            200,
            "{target}"
        );
        assert_eq!(
            call(&mut c, "GET", target, Some(ADMIN), b"").0,
            200,
            "{target}"
        );
    }
    // Event streams: refused before anything streams; the read token opens them.
    for (token, want) in [(None, 401), (Some(APPEND), 403), (Some(READ), 200)] {
        let auth = token.map(bearer);
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("authorization", a.as_str())).collect();
        let sub = Subscriber::open(s.addr, "/all/subscribe", &headers);
        assert_eq!(sub.status(), want, "{token:?}: {}", sub.head);
    }

    let sub = br#"{"category":"s"}"#;
    assert_eq!(
        call(&mut c, "PUT", "/subscriptions/mail", Some(READ), sub).0,
        403
    );
    assert_eq!(
        call(&mut c, "PUT", "/subscriptions/mail", Some(ADMIN), sub).0,
        200
    );
    let consumer = Subscriber::open(
        s.addr,
        "/subscriptions/mail/events",
        &[("authorization", &bearer(READ))],
    );
    assert_eq!(consumer.status(), 200, "{}", consumer.head);
    // Consumers acknowledge with the read token; only admin deletes.
    let ack = br#"{"position":1}"#;
    assert_eq!(
        call(&mut c, "POST", "/subscriptions/mail/ack", None, ack).0,
        401
    );
    assert_eq!(
        call(&mut c, "POST", "/subscriptions/mail/ack", Some(READ), ack).0,
        200
    );
    assert_eq!(
        call(&mut c, "DELETE", "/subscriptions/mail", Some(READ), b"").0,
        403
    );
    assert_eq!(
        call(&mut c, "DELETE", "/subscriptions/mail", Some(ADMIN), b"").0,
        200
    );
    // The 403 says what the token may not do.
    let (_, body) = call(&mut c, "PUT", "/streams/s-1/metadata", Some(APPEND), b"{}");
    assert!(
        body.contains("may not manage subscriptions or streams"),
        "{body}"
    );
}

/// Issue 35 changed this: a role without a token used to be open once another role had one;
/// now it is refused unless opened explicitly, as reading is here.
fn a_role_without_a_token_is_open(front: Front) {
    let s = TestServer::start_with(
        front,
        Options {
            access: Access {
                append: Some(APPEND.into()),
                open: OpenRoles {
                    read: true,
                    append: false,
                },
                ..Access::default()
            },
            ..Options::default()
        },
    );
    let mut c = s.client();
    let batch = br#"[{"type":"A","data":{}}]"#;
    assert_eq!(call(&mut c, "POST", "/streams/s-1", None, batch).0, 401);
    assert_eq!(
        call(&mut c, "POST", "/streams/s-1", Some(APPEND), batch).0,
        201
    );
    // Reading is opened: no token needed, for reads and event streams.
    assert_eq!(call(&mut c, "GET", "/streams/s-1", None, b"").0, 200);
    assert_eq!(call(&mut c, "GET", "/all", None, b"").0, 200);
    let sub = Subscriber::open(s.addr, "/all/subscribe", &[]);
    assert_eq!(sub.status(), 200, "{}", sub.head);
    // Management never is, once the API is protected at all.
    assert_eq!(call(&mut c, "PUT", "/subscriptions/x", None, b"").0, 401);
    assert_eq!(
        call(&mut c, "PUT", "/subscriptions/x", Some(APPEND), b"").0,
        403
    );
}

/// Issue 35: with only the admin token set, nothing is left open to a client without one.
fn an_admin_token_alone_closes_every_role(front: Front) {
    let s = TestServer::start_with(
        front,
        Options {
            access: Access {
                admin: Some(ADMIN.into()),
                ..Access::default()
            },
            ..Options::default()
        },
    );
    let mut c = s.client();
    let batch = br#"[{"type":"A","data":{}}]"#;
    assert_eq!(call(&mut c, "POST", "/streams/s-1", None, batch).0, 401);
    for target in ["/streams/s-1", "/all", "/categories/s", "/subscriptions"] {
        assert_eq!(call(&mut c, "GET", target, None, b"").0, 401, "{target}");
    }
    let sub = Subscriber::open(s.addr, "/all/subscribe", &[]);
    assert_eq!(sub.status(), 401, "{}", sub.head);
    // The admin token does everything; a consumer without a token may neither read nor ack.
    assert_eq!(
        call(&mut c, "POST", "/streams/s-1", Some(ADMIN), batch).0,
        201
    );
    let group = br#"{"category":"s"}"#;
    assert_eq!(
        call(&mut c, "PUT", "/subscriptions/mail", Some(ADMIN), group).0,
        200
    );
    let consumer = Subscriber::open(s.addr, "/subscriptions/mail/events", &[]);
    assert_eq!(consumer.status(), 401, "{}", consumer.head);
    let ack = br#"{"position":1}"#;
    assert_eq!(
        call(&mut c, "POST", "/subscriptions/mail/ack", None, ack).0,
        401
    );
    assert_eq!(
        call(&mut c, "POST", "/subscriptions/mail/ack", Some(ADMIN), ack).0,
        200
    );
    assert_eq!(call(&mut c, "GET", "/all", Some(ADMIN), b"").0, 200);
}
