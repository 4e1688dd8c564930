//! `galleon serve`'s event-store token flags (issue 19): each flag's token reaches its role (the
//! API's rules are galleon-eventstore-http's tests), bad tokens and an open API off loopback
//! stop start-up. Issue 35: a partial token setup closes the roles without a token, the
//! start-up line names each role's state, and an opened role (`--events-open-read`,
//! `--events-open-append`) off loopback needs `--events-open`.

mod serve_support;

use std::time::Duration;

use galleon_client::Client;
use serve_support::{ServeProcess, galleon};

const READ: &str = "read-token-0123456789";
const APPEND: &str = "append-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

/// Status and JSON body of one request carrying `token` (if any).
fn call(
    c: &mut Client,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: &[u8],
) -> (u16, String) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let r = c.request(method, target, &headers, body).unwrap();
    if r.status >= 400 {
        assert_eq!(
            r.header("content-type"),
            Some("application/json"),
            "{}",
            r.text()
        );
    }
    (r.status, r.text())
}

/// `galleon serve ARGS...`'s standard error, asserting it refused to start (exit 1).
fn refused(args: &[&str]) -> String {
    let out = galleon().arg("serve").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_token_flags_reach_the_api() {
    let s = ServeProcess::start(&[
        "--events-read-token",
        READ,
        "--events-append-token",
        APPEND,
        "--events-admin-token",
        ADMIN,
    ]);
    assert!(
        s.stderr().contains("behind bearer tokens"),
        "{}",
        s.stderr()
    );
    let mut c = Client::connect(s.addr, Duration::from_secs(15)).unwrap();
    let batch = br#"[{"type":"A","data":{}}]"#;
    for (token, want) in [
        (None, 401),
        (Some(READ), 403),
        (Some("x".repeat(20).as_str()), 401),
    ] {
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

    // Each flag's token is the role's (every route's role: galleon-eventstore-http's tests).
    assert_eq!(call(&mut c, "GET", "/all", None, b"").0, 401);
    assert_eq!(call(&mut c, "GET", "/all", Some(READ), b"").0, 200);
    let sub = br#"{"category":"s"}"#;
    assert_eq!(
        call(&mut c, "PUT", "/subscriptions/mail", Some(READ), sub).0,
        403
    );
    assert_eq!(
        call(&mut c, "PUT", "/subscriptions/mail", Some(ADMIN), sub).0,
        200
    );
    // The site itself needs no token.
    assert_eq!(c.get("/blah?iters=1", &[]).unwrap().status, 200);
}

#[test]
fn an_open_api_is_refused_off_loopback_and_tokens_are_checked() {
    // Refused before anything binds: no traffic.
    let err = refused(&["--addr", "0.0.0.0:0", "--events", "sqlite::memory:"]);
    assert!(
        err.contains("is not loopback and the event-store API has no token"),
        "{err}"
    );
    let err = refused(&["--events-read-token", "short"]);
    assert!(
        err.contains("--events-read-token: expected at least 16"),
        "{err}"
    );
    assert!(!err.contains("short"), "the token is not echoed: {err}");
    // On loopback an open API starts, and says so.
    let s = ServeProcess::start(&[]);
    assert!(
        s.stderr().contains("API OPEN: no tokens set"),
        "{}",
        s.stderr()
    );
}

#[test]
fn a_partial_token_setup_closes_the_other_roles_and_says_so() {
    let s = ServeProcess::start(&["--events-admin-token", ADMIN]);
    assert!(
        s.stderr().contains(
            "API behind bearer tokens: read admin token only, append admin token only, admin token"
        ),
        "{}",
        s.stderr()
    );
    let mut c = Client::connect(s.addr, Duration::from_secs(15)).unwrap();
    let batch = br#"[{"type":"A","data":{}}]"#;
    assert_eq!(call(&mut c, "POST", "/streams/s-1", None, batch).0, 401);
    assert_eq!(call(&mut c, "GET", "/all", None, b"").0, 401);
    let ack = br#"{"position":1}"#;
    assert_eq!(
        call(&mut c, "POST", "/subscriptions/mail/ack", None, ack).0,
        401
    );
    assert_eq!(
        call(&mut c, "POST", "/streams/s-1", Some(ADMIN), batch).0,
        201
    );
    assert_eq!(call(&mut c, "GET", "/all", Some(ADMIN), b"").0, 200);
}

#[test]
fn an_opened_role_stays_open_and_needs_the_open_flag_off_loopback() {
    let s = ServeProcess::start(&["--events-append-token", APPEND, "--events-open-read"]);
    assert!(
        s.stderr()
            .contains("API PARTLY OPEN: read open, append token, admin nobody (no token)"),
        "{}",
        s.stderr()
    );
    let mut c = Client::connect(s.addr, Duration::from_secs(15)).unwrap();
    let batch = br#"[{"type":"A","data":{}}]"#;
    assert_eq!(call(&mut c, "POST", "/streams/s-1", None, batch).0, 401);
    assert_eq!(
        call(&mut c, "POST", "/streams/s-1", Some(APPEND), batch).0,
        201
    );
    assert_eq!(call(&mut c, "GET", "/all", None, b"").0, 200);

    // Off loopback an opened role is refused without --events-open, before anything binds.
    let err = refused(&[
        "--addr",
        "0.0.0.0:0",
        "--events",
        "sqlite::memory:",
        "--events-admin-token",
        ADMIN,
        "--events-open-append",
    ]);
    assert!(
        err.contains(
            "--addr 0.0.0.0:0 is not loopback and --events-open-append leaves the event-store \
             API partly open (read admin token only, append open, admin token)"
        ),
        "{err}"
    );
    assert!(err.contains("Pass --events-open if that is meant"), "{err}");
    assert!(!err.contains(ADMIN), "the token is not echoed: {err}");
    // An opened role takes no token.
    let err = refused(&[
        "--events",
        "sqlite::memory:",
        "--events-read-token",
        READ,
        "--events-open-read",
    ]);
    assert!(
        err.contains("--events-open-read and --events-read-token: an opened role takes no token"),
        "{err}"
    );
    assert!(!err.contains(READ), "the token is not echoed: {err}");
}
