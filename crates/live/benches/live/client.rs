//! The bench's client side: the server child (spawned pinned, its CPU and RSS read from
//! `/proc`), plain HTTP GETs, and the live socket as the JavaScript client speaks it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value as Json, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// The longest any one wait lasts.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// A Phoenix-length channel topic (`lv:` and a 20-character `phx-` id), so frames compare.
pub(crate) const TOPIC: &str = "lv:phx-F5gOdUiKx0zBiAJB";

pub(crate) type Ws = WebSocketStream<TcpStream>;

/// The server child: killed (by its pid) when dropped, if closing its stdin did not end it.
pub(crate) struct Child {
    proc: std::process::Child,
    pub(crate) pid: u32,
    pub(crate) addr: SocketAddr,
}

impl Child {
    /// Re-runs this binary as the server, on core 0 when `pin` (through `taskset`).
    /// With `heap`, the child counts its live allocations by size (`/bench/heap`).
    pub(crate) fn spawn(pin: bool, heap: bool) -> Child {
        let exe = std::env::current_exe().expect("the bench's own path");
        let mut cmd = if pin {
            let mut c = Command::new("taskset");
            c.arg("-c").arg("0").arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.env(crate::SERVER_ENV, "1")
            .env("LIVE_BENCH_WORKERS", if pin { "1" } else { "2" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if heap {
            cmd.env("LIVE_BENCH_HEAP", "1");
        }
        let mut proc = cmd.spawn().expect("the server child starts");
        let pid = proc.id();
        let out = proc.stdout.take().expect("its stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("the child's port line");
        let port: u16 = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the child said {line:?}, not its port"));
        Child {
            proc,
            pid,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// CPU time of all the child's threads so far, in ns (`/proc/PID/task/*/schedstat`), and
    /// as `/proc/PID/stat`'s utime + stime (1/100 s ticks, dead threads included) in ns.
    pub(crate) fn cpu_ns(&self) -> (u64, u64) {
        let mut sched = 0;
        if let Ok(dir) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) {
            for t in dir.flatten() {
                let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
                sched += s
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
        let f: Vec<u64> = after
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        // After the `)`: state is field 3, utime 14 and stime 15 (1-based over the whole line).
        let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        (sched, ticks * 10_000_000)
    }

    /// The child's VmRSS and RssAnon, in KiB.
    pub(crate) fn rss_kib(&self) -> (u64, u64) {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let field = |name: &str| {
            s.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("RssAnon:"))
    }

    /// `/bench/stats` of the child.
    pub(crate) async fn stats(&self) -> Json {
        serde_json::from_str(&get(self.addr, "/bench/stats").await).expect("stats JSON")
    }

    /// `/bench/heap`: live allocations, size → count, and the bytes of those of 32 KiB and more.
    pub(crate) async fn heap(&self) -> (std::collections::BTreeMap<i64, i64>, i64) {
        let j: Json = serde_json::from_str(&get(self.addr, "/bench/heap").await).expect("JSON");
        let sizes = j["sizes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p[0].as_i64()?, p[1].as_i64()?)))
            .collect();
        (sizes, j["big_bytes"].as_i64().unwrap_or(0))
    }

    /// `/bench/broadcast?topic=..&n=..`: (ns before the first broadcast, views handed to).
    pub(crate) async fn broadcast(&self, topic: &str, n: usize) -> (i64, usize) {
        let body = get(self.addr, &format!("/bench/broadcast?topic={topic}&n={n}")).await;
        let mut it = body
            .split_whitespace()
            .map(|x| x.parse::<i64>().unwrap_or(0));
        let t0 = it.next().unwrap_or(0);
        (t0, usize::try_from(it.next().unwrap_or(0)).unwrap_or(0))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        drop(self.proc.stdin.take());
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.proc.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

/// A plain HTTP/1.1 GET's body (`connection: close`).
pub(crate) async fn get(addr: SocketAddr, target: &str) -> String {
    let mut s = TcpStream::connect(addr)
        .await
        .expect("connect to the child");
    let req = format!("GET {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send the request");
    let mut buf = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut buf))
        .await
        .expect("a response within the wait")
        .expect("read the response");
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "GET {target}: {text}");
    text.split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned()
}

/// The value of attribute `attr` in `html`'s first element that has it.
fn attr<'h>(html: &'h str, attr: &str) -> &'h str {
    let key = format!("{attr}=\"");
    let start = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {attr} in the page"))
        + key.len();
    let len = html[start..].find('"').unwrap_or(0);
    &html[start..start + len]
}

/// A page's tokens: (session from `data-phx-session`, CSRF from the `csrf-token` meta).
pub(crate) async fn tokens(addr: SocketAddr, path: &str) -> (String, String) {
    let body = get(addr, path).await;
    let at = body.find("name=\"csrf-token\"").expect("a csrf-token meta");
    (
        attr(&body, "data-phx-session").to_owned(),
        attr(&body[at..], "content").to_owned(),
    )
}

/// Opens the live socket as the JS client does; small buffers, as 10,000 of them are held.
pub(crate) async fn connect(addr: SocketAddr, csrf: &str) -> Ws {
    let url = format!("ws://{addr}/live/websocket?_csrf_token={csrf}&vsn=2.0.0");
    let req = url.into_client_request().expect("a request");
    let tcp = TcpStream::connect(addr)
        .await
        .expect("connect to the child");
    let config = WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0);
    let (ws, _) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::client_async_with_config(req, tcp, Some(config)),
    )
    .await
    .expect("the handshake within the wait")
    .expect("the handshake");
    ws
}

/// Sends `[join_ref, ref, TOPIC, event, payload]`.
pub(crate) async fn push(ws: &mut Ws, join_ref: &str, msg_ref: &str, event: &str, payload: Json) {
    let m = galleon_live::Message {
        join_ref: Some(join_ref.into()),
        msg_ref: Some(msg_ref.into()),
        topic: TOPIC.into(),
        event: event.into(),
        payload,
    };
    ws.send(WsMessage::text(m.encode()))
        .await
        .expect("send a frame");
}

/// The next text frame's text; panics on a close or after the wait.
pub(crate) async fn next_text(ws: &mut Ws) -> String {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame within the wait");
        match frame {
            Some(Ok(WsMessage::Text(t))) => return t.as_str().to_owned(),
            Some(Ok(WsMessage::Close(c))) => panic!("the server closed the socket: {c:?}"),
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("the socket failed: {e}"),
            None => panic!("the socket ended"),
        }
    }
}

/// Joins `path`'s view (join_ref and ref "4", as the JS client's after its first messages);
/// returns the reply frame's text.
pub(crate) async fn join(ws: &mut Ws, addr: SocketAddr, path: &str, session: &str) -> String {
    let payload = json!({
        "url": format!("http://{addr}{path}"),
        "params": {"_csrf_token": "x", "_mounts": 0},
        "session": session,
        "static": "",
        "sticky": false,
    });
    push(ws, "4", "4", "phx_join", payload).await;
    let reply = next_text(ws).await;
    assert!(reply.contains(r#""status":"ok""#), "join refused: {reply}");
    reply
}

/// Bytes of a server-to-client WebSocket frame carrying `len` bytes of text (unmasked header).
pub(crate) fn wire_bytes(len: usize) -> usize {
    len + match len {
        0..=125 => 2,
        126..=65535 => 4,
        _ => 10,
    }
}
