//! Stream metadata and soft delete over HTTP against the real binary (SQLite), behind tokens:
//! `GET`/`PUT /streams/{id}/metadata` and `POST /streams/{id}/delete`, admin-only changes, a deleted
//! stream reading as 404 and continuing its versions on the next `no_stream` append.

mod serve_support;

use std::time::Duration;

use galleon_client::Client;
use serde_json::{Value, json};
use serve_support::ServeProcess;

const READ: &str = "read-token-0123456789";
const APPEND: &str = "append-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

fn call(c: &mut Client, method: &str, target: &str, token: &str, body: &[u8]) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("ES-Expected-Version", "no_stream"),
    ];
    let headers = if method == "POST" {
        &headers[..]
    } else {
        &headers[..1]
    };
    let r = c.request(method, target, headers, body).unwrap();
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{}",
        r.text()
    );
    (r.status, serde_json::from_slice(&r.body).unwrap())
}

#[test]
fn metadata_and_soft_delete_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}/events.db", dir.path().display());
    let s = ServeProcess::start(&[
        "--events",
        &url,
        "--events-read-token",
        READ,
        "--events-append-token",
        APPEND,
        "--events-admin-token",
        ADMIN,
    ]);
    let mut c = Client::connect(s.addr, Duration::from_secs(30)).unwrap();
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
    let versions: Vec<u64> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [1, 2]);
    let (st, v) = call(
        &mut c,
        "PUT",
        "/streams/doc-1/metadata",
        ADMIN,
        br#"{"max_count": "x"}"#,
    );
    assert_eq!(st, 400, "{v}");

    assert_eq!(
        call(&mut c, "POST", "/streams/doc-1/delete", READ, b"").0,
        403
    );
    let (st, v) = call(&mut c, "POST", "/streams/doc-1/delete", ADMIN, b"");
    assert_eq!((st, &v["truncate_before"]), (200, &json!(3)), "{v}");
    assert_eq!(call(&mut c, "GET", "/streams/doc-1", READ, b"").0, 404);
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
