//! The event store's HTTP tests' shared pieces: a `galleon serve` on a fresh SQLite file, JSON
//! calls, and a raw server-sent-events subscriber that decodes the chunked body as it arrives.
#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use galleon_client::Client;
use serde_json::{Value, json};

use crate::serve_support::ServeProcess;

/// How long a test waits for an expected frame or state before failing.
pub const WAIT: Duration = Duration::from_secs(15);

/// A server on a fresh SQLite file in its own temporary directory.
pub struct Server {
    pub proc: ServeProcess,
    pub _dir: tempfile::TempDir,
}

pub fn start(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}/events.db", dir.path().display());
    let mut args = vec!["--events", url.as_str()];
    args.extend_from_slice(extra);
    Server {
        proc: ServeProcess::start(&args),
        _dir: dir,
    }
}

pub fn client(addr: SocketAddr) -> Client {
    Client::connect(addr, Duration::from_secs(30)).unwrap()
}

/// Sends a request and parses the JSON answer; checks the content type.
pub fn call(
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

pub fn append(
    c: &mut Client,
    stream: &str,
    expected: Option<&str>,
    events: &Value,
) -> (u16, Value) {
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

pub fn get(c: &mut Client, target: &str) -> (u16, Value) {
    call(c, "GET", target, &[], b"")
}

pub fn numbers(v: &Value, key: &str) -> Vec<u64> {
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[key].as_u64().unwrap())
        .collect()
}

/// One server-sent-events frame.
#[derive(Debug, Default)]
pub struct Frame {
    pub id: Option<u64>,
    pub event: Option<String>,
    pub data: String,
    pub comments: Vec<String>,
}

/// A raw TCP subscriber to `GET /all/subscribe`, decoding the chunked body as it arrives.
pub struct Subscriber {
    pub sock: TcpStream,
    pub head: String,
    pub raw: Vec<u8>,
    pub text: String,
    pub ended: bool,
}

impl Subscriber {
    pub fn open(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Subscriber {
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

    pub fn status(&self) -> u16 {
        self.head.split(' ').nth(1).unwrap().parse().unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// Reads once into `raw`; false at end of file.
    pub fn read_some(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "timed out; received so far: {:?}",
            self.text
        );
        self.sock.set_read_timeout(Some(left)).unwrap();
        let mut buf = [0u8; 16 * 1024];
        match galleon_client::read_some(&mut self.sock, &mut buf) {
            Ok(0) => false,
            Ok(n) => {
                self.raw.extend_from_slice(&buf[..n]);
                true
            }
            Err(e) => panic!("reading the stream: {e}; received so far: {:?}", self.text),
        }
    }

    /// Moves every complete chunk of `raw` into `text`.
    pub fn decode_chunks(&mut self) {
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
    pub fn next_frame(&mut self) -> Option<Frame> {
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
    pub fn next_event(&mut self) -> Frame {
        loop {
            let f = self.next_frame().expect("the stream ended");
            if f.id.is_some() {
                return f;
            }
        }
    }
}

/// `n` events of type `ty`, data `{"n": i}`.
pub fn events(ty: &str, n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"type": ty, "data": {"n": i}, "metadata": {"by": "test"}}))
            .collect(),
    )
}
