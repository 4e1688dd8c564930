//! The event store in `galleon serve`: what its flags do (body and API bounds, `--events off`, a
//! store that cannot be opened, PostgreSQL with `--events-schema`), against the real binary.
//! The API's own behaviour is galleon-eventstore-http's tests; subscriptions here:
//! `events_subscribe.rs`.

mod events_support;
mod serve_support;

use std::io::Write;

use events_support::{Subscriber, append, call, client, events, get, numbers, start};
use serde_json::json;
use serve_support::{ServeProcess, galleon, site_dir};

#[test]
fn request_bodies_over_the_limit_get_413() {
    // One limit, the server's --max-body: a body under it is read and parsed, one over it is
    // refused before it is read.
    let small = start(&["--max-body", "1000"]);
    let mut c = client(small.proc.addr);
    let mut body = vec![b' '; 1000];
    body[0] = b'x';
    let (status, _) = call(&mut c, "POST", "/streams/big", &[], &body);
    assert_eq!(
        status, 400,
        "exactly at the limit the body is read and parsed (and is not JSON)"
    );
    let mut c = client(small.proc.addr);
    let r = c
        .request("POST", "/streams/big", &[], &[b' '; 1001])
        .unwrap();
    assert_eq!(r.status, 413);
    let mut c = client(small.proc.addr);
    let (status, _) = append(&mut c, "big", None, &events("Small", 1));
    assert_eq!(status, 201);
}

/// `--max-append-events` and `--max-read-limit` bound the API; the default page of a read
/// shrinks to fit a smaller limit.
#[test]
fn api_bounds_are_flags() {
    let s = start(&["--max-append-events", "3", "--max-read-limit", "5"]);
    let mut c = client(s.proc.addr);
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
}

#[test]
fn an_event_store_that_cannot_be_opened_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let under_file = format!("sqlite:{}/events.db", file.display());
    for (args, expect) in [
        (
            vec!["--events", "mysql://db/events"],
            "opening the event store mysql://db/events",
        ),
        (
            vec!["--events", "sqlite:"],
            "the path after `sqlite:` is empty",
        ),
        (
            vec!["--events", ""],
            "--events (or GALLEON_EVENTS) is empty",
        ),
        (
            vec!["--events", "postgres://me:s3cr3t@db:notaport/events"],
            "opening the event store postgres://me:***@db:notaport/events: invalid URL",
        ),
        (
            vec!["--events", "postgres://me:s3cr3t@127.0.0.1:1/events"],
            "opening the event store postgres://me:***@127.0.0.1:1/events",
        ),
        (
            vec!["--events", &under_file],
            "opening the event store sqlite:",
        ),
        (
            vec!["--events", "sqlite:x.db", "--events-schema", "s"],
            "--events-schema applies to PostgreSQL only",
        ),
        (
            vec!["--events-keep-alive", "0"],
            "--events-keep-alive must be more than 0 seconds",
        ),
    ] {
        let out = galleon()
            .arg("serve")
            .arg("--site")
            .arg(site_dir())
            .args(["--addr", "127.0.0.1:0"])
            .args(&args)
            .env_remove("GALLEON_EVENTS")
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(!stderr.contains("s3cr3t"), "password shown: {stderr}");
        assert!(!stderr.contains("serving"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert!(
        !dir.path().join("x.db").exists() && !dir.path().join("data").exists(),
        "nothing was created by the refused starts"
    );
}

#[test]
fn events_off_serves_the_site_without_a_store() {
    let s = ServeProcess::start(&["--events", "off"]);
    let mut c = client(s.addr);
    assert_eq!(c.get("/all", &[]).unwrap().status, 404);
    assert_eq!(c.get("/", &[]).unwrap().status, 200);
    assert!(!s.stderr().contains("event store"), "{}", s.stderr());
    assert!(!s.events_db.exists());
}

#[test]
fn postgres_smoke() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        // Straight to the process's stderr, past the test harness's capture: a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED: postgres_smoke (galleon serve on PostgreSQL): DATABASE_URL is not set ***\n"
        );
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("galleon_serve_test_{}_{nanos}", std::process::id());
    let s = ServeProcess::start(&["--events", &url, "--events-schema", &schema]);
    assert!(s.stderr().contains("(postgres)"), "{}", s.stderr());
    let addr = s.addr;
    let mut sub = Subscriber::open(addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let mut c = client(addr);
    let (status, r) = append(&mut c, "pg-1", Some("no_stream"), &events("Pg", 3));
    assert_eq!(status, 201, "{r}");
    let (status, conflict) = append(&mut c, "pg-1", Some("no_stream"), &events("Pg", 1));
    assert_eq!((status, &conflict["actual"]), (409, &json!(2)));
    let (_, back) = get(&mut c, "/streams/pg-1?direction=backward");
    assert_eq!(numbers(&back, "version"), [2, 1, 0]);
    let (_, all) = get(&mut c, "/all");
    assert_eq!(numbers(&all, "version"), [0, 1, 2]);
    let ids: Vec<u64> = (0..3).map(|_| sub.next_event().id.unwrap()).collect();
    assert_eq!(ids, numbers(&all, "position"));
    assert_eq!(ids[0], r["first_position"].as_u64().unwrap());
    drop(sub);
    drop(c);
    drop(s);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
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
    });
}
