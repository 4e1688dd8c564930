//! Stream metadata and soft delete over HTTP, in-process on both front ends, behind tokens:
//! `GET`/`PUT /streams/{id}/metadata` and `POST /streams/{id}/delete`, admin-only changes, a
//! deleted stream reading as 404 and continuing its versions on the next `no_stream` append.
//! Ported from `crates/galleon/tests/events_stream_meta.rs`.

#[macro_use]
mod support;

use galleon_client::Client;
use galleon_eventstore_http::Access;
use serde_json::{Value, json};
use support::{Front, Options, TestServer, bearer, numbers};

const READ: &str = "read-token-0123456789";
const APPEND: &str = "append-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

on_both_fronts!(metadata_and_soft_delete_over_http);

fn call(c: &mut Client, method: &str, target: &str, token: &str, body: &[u8]) -> (u16, Value) {
    let auth = bearer(token);
    let headers = [
        ("authorization", auth.as_str()),
        ("ES-Expected-Version", "no_stream"),
    ];
    let headers = if method == "POST" {
        &headers[..]
    } else {
        &headers[..1]
    };
    support::call(c, method, target, headers, body)
}

fn metadata_and_soft_delete_over_http(front: Front) {
    let s = TestServer::start_with(
        front,
        Options {
            access: Access {
                read: Some(READ.into()),
                append: Some(APPEND.into()),
                admin: Some(ADMIN.into()),
                ..Access::default()
            },
            ..Options::default()
        },
    );
    let mut c = s.client();
    let three =
        json!([{"type": "T", "data": {}}, {"type": "T", "data": {}}, {"type": "T", "data": {}}]);
    let (st, v) = call(
        &mut c,
        "POST",
        "/streams/doc-1",
        APPEND,
        three.to_string().as_bytes(),
    );
    assert_eq!(st, 201, "{v}");

    // A stream without metadata has none.
    let (st, v) = call(&mut c, "GET", "/streams/doc-1/metadata", READ, b"");
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v,
        json!({"stream_id": "doc-1", "max_count": null, "max_age_ms": null,
               "truncate_before": null, "deleted": false})
    );

    let meta = br#"{"max_count": 2}"#;
    assert_eq!(
        call(&mut c, "PUT", "/streams/doc-1/metadata", READ, meta).0,
        403
    );
    let (st, v) = call(&mut c, "PUT", "/streams/doc-1/metadata", ADMIN, meta);
    assert_eq!((st, &v["max_count"]), (200, &json!(2)), "{v}");
    let (st, v) = call(&mut c, "GET", "/streams/doc-1/metadata", READ, b"");
    assert_eq!((st, &v["deleted"]), (200, &json!(false)), "{v}");
    let (_, v) = call(&mut c, "GET", "/streams/doc-1", READ, b"");
    assert_eq!(numbers(&v, "version"), [1, 2]);
    // `$all` keeps every event.
    let (_, v) = call(&mut c, "GET", "/all", READ, b"");
    assert_eq!(numbers(&v, "version"), [0, 1, 2]);
    for bad in [
        &br#"{"max_count": "x"}"#[..],
        br#"{"max_count": 0}"#,
        br#"{"colour": 1}"#,
        b"not json",
    ] {
        let (st, v) = call(&mut c, "PUT", "/streams/doc-1/metadata", ADMIN, bad);
        assert_eq!(st, 400, "{}: {v}", String::from_utf8_lossy(bad));
    }

    assert_eq!(
        call(&mut c, "POST", "/streams/doc-1/delete", READ, b"").0,
        403
    );
    let (st, v) = call(&mut c, "POST", "/streams/doc-1/delete", ADMIN, b"");
    assert_eq!((st, &v["truncate_before"]), (200, &json!(3)), "{v}");
    assert_eq!(call(&mut c, "GET", "/streams/doc-1", READ, b"").0, 404);
    let (_, v) = call(&mut c, "GET", "/streams/doc-1/metadata", READ, b"");
    assert_eq!(v["deleted"], json!(true), "{v}");
    assert_eq!(
        call(&mut c, "POST", "/streams/doc-1/delete", ADMIN, b"").0,
        404
    );
    assert_eq!(
        call(&mut c, "POST", "/streams/never/delete", ADMIN, b"").0,
        404
    );
    let one = json!([{"type": "T", "data": {}}]);
    let (st, v) = call(
        &mut c,
        "POST",
        "/streams/doc-1",
        APPEND,
        one.to_string().as_bytes(),
    );
    assert_eq!((st, &v["first_version"]), (201, &json!(3)), "{v}");
    let (st, v) = call(&mut c, "GET", "/streams/doc-1", READ, b"");
    assert_eq!((st, v["events"].as_array().unwrap().len()), (200, 1), "{v}");
}
