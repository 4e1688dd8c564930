//! The event store in `galleon serve`, end to end over HTTP: appends, conflicts, bad input,
//! reads, and `$all` subscriptions as server-sent events, against the real binary on a temporary
//! SQLite file (and, when `DATABASE_URL` is set, once against PostgreSQL).

mod serve_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use galleon_client::Client;
use serde_json::{Value, json};
use serve_support::{ServeProcess, galleon, site_dir};

/// How long a test waits for an expected frame or state before failing.
const WAIT: Duration = Duration::from_secs(15);

/// A server on a fresh SQLite file in its own temporary directory.
struct Server {
    proc: ServeProcess,
    _dir: tempfile::TempDir,
}

fn start(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}/events.db", dir.path().display());
    let mut args = vec!["--events", url.as_str()];
    args.extend_from_slice(extra);
    Server {
        proc: ServeProcess::start(&args),
        _dir: dir,
    }
}

fn client(addr: SocketAddr) -> Client {
    Client::connect(addr, Duration::from_secs(30)).unwrap()
}

/// Sends a request and parses the JSON answer; checks the content type.
fn call(
    c: &mut Client,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Value) {
    let r = c.request(method, target, headers, body).unwrap();
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{method} {target}: {}",
        r.text()
    );
    let v = serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    (r.status, v)
}

fn append(c: &mut Client, stream: &str, expected: Option<&str>, events: &Value) -> (u16, Value) {
    let headers: Vec<(&str, &str)> = expected
        .map(|v| ("ES-Expected-Version", v))
        .into_iter()
        .collect();
    call(
        c,
        "POST",
        &format!("/streams/{stream}"),
        &headers,
        events.to_string().as_bytes(),
    )
}

fn get(c: &mut Client, target: &str) -> (u16, Value) {
    call(c, "GET", target, &[], b"")
}

fn numbers(v: &Value, key: &str) -> Vec<u64> {
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[key].as_u64().unwrap())
        .collect()
}

/// One server-sent-events frame.
#[derive(Debug, Default)]
struct Frame {
    id: Option<u64>,
    event: Option<String>,
    data: String,
    comments: Vec<String>,
}

/// A raw TCP subscriber to `GET /all/subscribe`, decoding the chunked body as it arrives.
struct Subscriber {
    sock: TcpStream,
    head: String,
    raw: Vec<u8>,
    text: String,
    ended: bool,
}

impl Subscriber {
    fn open(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Subscriber {
        let mut sock = TcpStream::connect(addr).unwrap();
        let mut req =
            format!("GET {target} HTTP/1.1\r\nhost: test\r\naccept: text/event-stream\r\n");
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str("\r\n");
        sock.write_all(req.as_bytes()).unwrap();
        let mut s = Subscriber {
            sock,
            head: String::new(),
            raw: Vec::new(),
            text: String::new(),
            ended: false,
        };
        let deadline = Instant::now() + WAIT;
        let end = loop {
            if let Some(i) = s.raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            assert!(s.read_some(deadline), "no response head: {:?}", s.raw);
        };
        s.head = String::from_utf8(s.raw[..end].to_vec()).unwrap();
        s.raw.drain(..end + 4);
        s
    }

    fn status(&self) -> u16 {
        self.head.split(' ').nth(1).unwrap().parse().unwrap()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// Reads once into `raw`; false at end of file.
    fn read_some(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "timed out; received so far: {:?}",
            self.text
        );
        self.sock.set_read_timeout(Some(left)).unwrap();
        let mut buf = [0u8; 16 * 1024];
        match self.sock.read(&mut buf) {
            Ok(0) => false,
            Ok(n) => {
                self.raw.extend_from_slice(&buf[..n]);
                true
            }
            Err(e) => panic!("reading the stream: {e}; received so far: {:?}", self.text),
        }
    }

    /// Moves every complete chunk of `raw` into `text`.
    fn decode_chunks(&mut self) {
        while !self.ended {
            let Some(line_end) = self.raw.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let size_line = std::str::from_utf8(&self.raw[..line_end]).unwrap();
            let size = usize::from_str_radix(size_line.trim(), 16).unwrap();
            let total = line_end + 2 + size + 2;
            if self.raw.len() < total {
                return;
            }
            let data = &self.raw[line_end + 2..line_end + 2 + size];
            self.text.push_str(std::str::from_utf8(data).unwrap());
            assert_eq!(&self.raw[total - 2..total], b"\r\n", "chunk framing");
            self.raw.drain(..total);
            if size == 0 {
                self.ended = true;
            }
        }
    }

    /// The next frame, or `None` once the stream has ended (the last chunk or a closed socket).
    fn next_frame(&mut self) -> Option<Frame> {
        let deadline = Instant::now() + WAIT;
        loop {
            self.decode_chunks();
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let mut f = Frame::default();
                for line in block.lines() {
                    if let Some(c) = line.strip_prefix(':') {
                        f.comments.push(c.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        f.id = Some(v.parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        f.event = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        f.data.push_str(v);
                    } else {
                        assert!(line.is_empty(), "unexpected SSE line {line:?}");
                    }
                }
                return Some(f);
            }
            if self.ended || !self.read_some(deadline) {
                return None;
            }
        }
    }

    /// The next frame that carries an event, skipping comments.
    fn next_event(&mut self) -> Frame {
        loop {
            let f = self.next_frame().expect("the stream ended");
            if f.id.is_some() {
                return f;
            }
        }
    }
}

/// `n` events of type `ty`, data `{"n": i}`.
fn events(ty: &str, n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"type": ty, "data": {"n": i}, "metadata": {"by": "test"}}))
            .collect(),
    )
}

#[test]
fn append_answers_positions_conflicts_and_bad_input() {
    let s = start(&[]);
    let mut c = client(s.proc.addr);
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
    let mut raw = TcpStream::connect(s.proc.addr).unwrap();
    raw.write_all(
        b"POST /streams/order-1 HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\
          ES-Expected-Version: \xff\r\ncontent-length: 2\r\n\r\n[]",
    )
    .unwrap();
    let mut answer = Vec::new();
    raw.set_read_timeout(Some(WAIT)).unwrap();
    raw.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(
        answer.contains("ES-Expected-Version: the value is not UTF-8"),
        "{answer}"
    );

    // Nothing of the refused appends was stored.
    let (status, stored) = get(&mut c, "/streams/order-1");
    assert_eq!(status, 200);
    assert_eq!(numbers(&stored, "version"), [0, 1, 2, 3]);

    // An unknown method on an event-store route is 405 with the allowed ones.
    let r = c.request("DELETE", "/streams/order-1", &[], b"").unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST, GET, HEAD"));
    let r = c.request("POST", "/all", &[], b"[]").unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
}

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
fn reads_streams_both_ways_and_all() {
    let s = start(&[]);
    let mut c = client(s.proc.addr);
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
    for bad in [
        "/all?limit=0",
        "/all?limit=1000000",
        "/all?from=x",
        "/all?direction=backward",
        "/streams/acct-a?direction=sideways",
        "/streams/acct-a?nope=1",
    ] {
        let (status, v) = get(&mut c, bad);
        assert_eq!(status, 400, "{bad}: {v}");
    }
}

#[test]
fn a_subscriber_receives_stored_then_live_events_in_order() {
    let s = start(&[]);
    let addr = s.proc.addr;
    let mut c = client(addr);
    let (_, first) = append(&mut c, "cart-1", None, &events("Added", 2));

    let mut sub = Subscriber::open(addr, "/all/subscribe?from=0", &[]);
    assert_eq!(sub.status(), 200, "{}", sub.head);
    assert_eq!(sub.header("content-type"), Some("text/event-stream"));
    assert_eq!(sub.header("cache-control"), Some("no-cache"));
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

    // A reconnecting EventSource resumes after its Last-Event-ID; `from` takes precedence.
    let mut again = Subscriber::open(
        addr,
        "/all/subscribe",
        &[("Last-Event-ID", &ids[5].to_string())],
    );
    again.next_frame().unwrap();
    assert_eq!(again.next_event().id, Some(ids[6]));
    let mut from = Subscriber::open(addr, &format!("/all/subscribe?from={}", ids[2]), &[]);
    from.next_frame().unwrap();
    assert_eq!(from.next_event().id, Some(ids[2]));

    // Bad positions are 400 before anything streams.
    let mut c = client(addr);
    let (status, _) = get(&mut c, "/all/subscribe?from=x");
    assert_eq!(status, 400);
    let r = c
        .get("/all/subscribe", &[("Last-Event-ID", "nope")])
        .unwrap();
    assert_eq!(r.status, 400);
}

#[test]
fn catching_up_delivers_every_stored_event_once_in_order() {
    let s = start(&[]);
    let mut c = client(s.proc.addr);
    for stream in ["bulk-1", "bulk-2", "bulk-3"] {
        let (status, r) = append(&mut c, stream, None, &events("Bulk", 150));
        assert_eq!(status, 201, "{r}");
    }
    let (_, all) = get(&mut c, "/all?limit=1000");
    let positions = numbers(&all, "position");
    assert_eq!(positions.len(), 450);
    // Many frames per chunk while catching up; the frames must still be whole and in order.
    let mut sub = Subscriber::open(s.proc.addr, "/all/subscribe", &[]);
    let ids: Vec<u64> = (0..450).map(|_| sub.next_event().id.unwrap()).collect();
    assert_eq!(ids, positions);
}

#[test]
fn an_idle_subscription_sends_keep_alive_comments() {
    let s = start(&["--events-keep-alive", "0.2"]);
    let mut sub = Subscriber::open(s.proc.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let started = Instant::now();
    for _ in 0..2 {
        let f = sub.next_frame().unwrap();
        assert_eq!(
            (f.id, &f.comments[..]),
            (None, &["keep-alive".to_owned()][..])
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // Events still arrive between keep-alives.
    let (status, r) = append(&mut client(s.proc.addr), "k", None, &events("Tick", 1));
    assert_eq!(status, 201);
    assert_eq!(sub.next_event().id, r["first_position"].as_u64());
}

/// Server-side TCP state (`/proc/net/tcp` `st`) of the connection from `client` to the server
/// listening at `server`, or `None` once the server has closed and released it.
fn server_side_tcp_state(server: SocketAddr, client: SocketAddr) -> Option<u8> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = |field: &str| u16::from_str_radix(field.rsplit(':').next().unwrap(), 16).unwrap();
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (port(f[1]) == server.port() && port(f[2]) == client.port())
            .then(|| u8::from_str_radix(f[3], 16).unwrap())
    })
}

/// `/proc/net/tcp` states.
const TCP_ESTABLISHED: u8 = 0x01;
const TCP_CLOSE_WAIT: u8 = 0x08;

#[test]
fn a_subscriber_leaving_ends_its_stream_and_the_server_carries_on() {
    // No --events: the support module's GALLEON_EVENTS names the store.
    let s = ServeProcess::start(&[]);
    let addr = s.addr;
    assert!(
        s.stderr().contains(&format!(
            "event store sqlite:{} (sqlite)",
            s.events_db.display()
        )),
        "{}",
        s.stderr()
    );
    let mut sub = Subscriber::open(addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let (status, _) = append(&mut client(addr), "s", None, &events("Before", 1));
    assert_eq!(status, 201);
    sub.next_event();
    assert!(s.events_db.exists());
    let local = sub.sock.local_addr().unwrap();
    assert_eq!(server_side_tcp_state(addr, local), Some(TCP_ESTABLISHED));

    drop(sub);
    // The server notices while the stream waits for its next event, drops the stream (and the
    // subscription) and closes its side: the connection must not linger in CLOSE_WAIT.
    let deadline = Instant::now() + WAIT;
    while let Some(TCP_ESTABLISHED | TCP_CLOSE_WAIT) = server_side_tcp_state(addr, local) {
        assert!(
            Instant::now() < deadline,
            "the server kept the subscriber's connection open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The server carries on: appends, reads and new subscribers work.
    let mut c = client(addr);
    let (status, r) = append(&mut c, "s", Some("0"), &events("After", 1));
    assert_eq!(status, 201, "{r}");
    let (status, all) = get(&mut c, "/all");
    assert_eq!((status, numbers(&all, "version")), (200, vec![0, 1]));
    let mut sub = Subscriber::open(
        addr,
        &format!("/all/subscribe?from={}", r["first_position"]),
        &[],
    );
    sub.next_frame().unwrap();
    assert_eq!(sub.next_event().event.as_deref(), Some("After"));
}

#[test]
fn shutdown_ends_open_subscriptions() {
    let mut s = start(&[]);
    let mut sub = Subscriber::open(s.proc.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let pid = s.proc.pid();
    let started = Instant::now();
    let status = s
        .proc
        .terminate(pid)
        .expect("server did not exit after SIGTERM");
    assert!(status.success(), "{status:?}: {}", s.proc.stderr());
    // The 30 s shutdown grace is for responses that finish; an endless stream ends at once.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(sub.next_frame().is_none(), "the stream did not end");
    assert!(sub.ended, "the stream ended without its last chunk");
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
