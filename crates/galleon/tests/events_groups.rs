//! Consumer groups over HTTP against the real binary (SQLite): `PUT /subscriptions/{name}` with
//! `partitions`, two members consuming `GET /subscriptions/{name}/events?member=` as server-sent
//! events, each stream on one member in order, acks per partition; a member whose connection
//! closes hands its streams to the other, nothing lost; bad member parameters are 400/404.

mod serve_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use galleon_client::Client;
use serde_json::{Value, json};
use serve_support::ServeProcess;

const WAIT: Duration = Duration::from_secs(30);

/// One consumer-group member: a raw SSE connection, its chunked body decoded as it arrives.
struct Member {
    sock: TcpStream,
    raw: Vec<u8>,
    text: String,
}

impl Member {
    fn open(addr: SocketAddr, target: &str) -> Member {
        let mut sock = TcpStream::connect(addr).unwrap();
        let req =
            format!("GET {target} HTTP/1.1\r\nhost: test\r\naccept: text/event-stream\r\n\r\n");
        sock.write_all(req.as_bytes()).unwrap();
        let mut m = Member {
            sock,
            raw: Vec::new(),
            text: String::new(),
        };
        let deadline = Instant::now() + WAIT;
        let end = loop {
            if let Some(i) = m.raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            assert!(Instant::now() < deadline, "no response head");
            m.read_for(Duration::from_millis(50));
        };
        let head = String::from_utf8(m.raw[..end].to_vec()).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        m.raw.drain(..end + 4);
        m
    }

    /// Reads what arrives within `wait`.
    fn read_for(&mut self, wait: Duration) {
        self.sock.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 16 * 1024];
        match galleon_client::read_some(&mut self.sock, &mut buf) {
            Ok(n) => self.raw.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("reading a member's stream: {e}"),
        }
    }

    /// The events (data objects) complete so far.
    fn take_events(&mut self) -> Vec<Value> {
        while let Some(line_end) = self.raw.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(
                std::str::from_utf8(&self.raw[..line_end]).unwrap().trim(),
                16,
            )
            .unwrap();
            let total = line_end + 2 + size + 2;
            if self.raw.len() < total {
                break;
            }
            self.text.push_str(
                std::str::from_utf8(&self.raw[line_end + 2..line_end + 2 + size]).unwrap(),
            );
            self.raw.drain(..total);
        }
        let mut out = Vec::new();
        while let Some(end) = self.text.find("\n\n") {
            let block: String = self.text.drain(..end + 2).collect();
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect();
            if !data.is_empty() {
                out.push(serde_json::from_str(&data).unwrap());
            }
        }
        out
    }
}

fn call(c: &mut Client, method: &str, target: &str, body: &Value) -> (u16, Value) {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let r = c.request(method, target, &[], &body).unwrap();
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{}",
        r.text()
    );
    (r.status, serde_json::from_slice(&r.body).unwrap())
}

/// Waits until the group's partitions are all held, by exactly the `members` named.
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
        std::thread::sleep(Duration::from_millis(50));
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

/// Reads both members until `n` events arrived in all, acking each one as it is handled.
fn receive(
    c: &mut Client,
    members: &mut [(&str, &mut Member)],
    n: usize,
    got: &mut Vec<(String, Value)>,
) {
    let deadline = Instant::now() + WAIT;
    let mut count = 0;
    while count < n {
        assert!(Instant::now() < deadline, "{count} of {n} events arrived");
        for (name, m) in members.iter_mut() {
            m.read_for(Duration::from_millis(20));
            for e in m.take_events() {
                let (status, v) = call(
                    c,
                    "POST",
                    "/subscriptions/work/ack",
                    &json!({"position": e["position"]}),
                );
                assert_eq!(status, 200, "{v}");
                assert!(v["partition"].is_u64(), "{v}");
                got.push((name.to_string(), e));
                count += 1;
            }
        }
    }
}

#[test]
fn a_group_splits_streams_over_http_and_survives_a_closed_member() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}/events.db", dir.path().display());
    let s = ServeProcess::start(&["--events", &url]);
    let mut c = Client::connect(s.addr, Duration::from_secs(30)).unwrap();
    let (status, v) = call(
        &mut c,
        "PUT",
        "/subscriptions/work",
        &json!({"category": "job", "partitions": 4, "member_timeout_ms": 3000}),
    );
    assert_eq!((status, &v["group"]["partitions"]), (200, &json!(4)), "{v}");

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

    let mut a = Member::open(s.addr, "/subscriptions/work/events?member=a");
    let mut b = Member::open(s.addr, "/subscriptions/work/events?member=b");
    wait_owners(&mut c, &["a", "b"]);
    let n = append_round(&mut c, 0);
    let mut got = Vec::new();
    receive(&mut c, &mut [("a", &mut a), ("b", &mut b)], n, &mut got);
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
    let mut later = Vec::new();
    receive(&mut c, &mut [("a", &mut a)], n, &mut later);
    for stream in b_streams {
        let versions: Vec<u64> = later
            .iter()
            .filter(|(_, e)| e["stream_id"] == stream.as_str())
            .map(|(_, e)| e["version"].as_u64().unwrap())
            .collect();
        assert_eq!(versions, [3, 4, 5], "{stream} continued on a, in order");
    }
}
