//! galleon-live's costs per update and per connected view, measured as a real client sees them:
//! WebSocket frames read by tokio-tungstenite from a server in a child process (this binary
//! re-run with `LIVE_BENCH_SERVER=1`, on core 0; this client on core 1, through `taskset`).
//!
//! 1. **Bytes per update**: the frames a client receives for a counter click (the event's reply)
//!    and for one changed row of a 300-row `for` list (the event's reply and a broadcast's
//!    pushed diff), and the joins' whole renders: the diff's JSON (the server's `diff_bytes`
//!    counter, checked against the frame), the frame's text, and the frame on the wire (text plus
//!    the 2-4 byte WebSocket header). The topic is Phoenix-length (`lv:phx-` and 16 characters)
//!    and the refs are one digit, as in the LiveView 1.0.19 frames compared with.
//! 2. **Server CPU per update**: the child's CPU time (the sum of its threads'
//!    `/proc/PID/task/*/schedstat`; `/proc/PID/stat` utime + stime beside it) around a loop of
//!    N events, each sent after the previous reply arrived (counter click; list row flip), and
//!    around N broadcasts of a row flip to one list view, asked for 100 at a time over HTTP
//!    (`/bench/broadcast`), the client reading each pushed diff; the same requests to a topic
//!    nobody follows are the baseline subtracted. Workloads interleaved, median of rounds.
//! 3. **Memory per idle view**: a fresh child per N; its VmRSS before the sockets (after one
//!    page render) and after N sockets each joined one counter view and idled 3 s; KiB per view.
//! 4. **Fan-out**: on those N sockets (each view subscribed to `news`), one `Live::broadcast`
//!    at a time; each view's diff carries the broadcaster's clock (ns since the epoch, one clock
//!    for both processes, taken just before the broadcast), each client subtracts it from when
//!    it read the frame: p50/p99/max over every view of every round, and the median over rounds
//!    of the time until the last view.
//!
//! Run: `cargo bench -p galleon-live --bench live`. Knobs: `LIVE_BENCH_ROUNDS` (part 2, 7),
//! `LIVE_BENCH_EVENTS` (per round, 4000), `LIVE_BENCH_VIEWS` (parts 3-4, `100,1000,10000`),
//! `LIVE_BENCH_FANOUT_ROUNDS` (10), `LIVE_BENCH_PIN=0` (no pinning; two workers each side),
//! `LIVE_BENCH_PARTS` (`1234`). Only 127.0.0.1; every loop is bounded in count and time.

#[path = "live/client.rs"]
mod client;
#[path = "live/server.rs"]
mod server;

use std::time::{Duration, Instant};

use client::{Child, WAIT, Ws, connect, join, next_text, push, tokens, wire_bytes};
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::json;

/// Set in the environment of the child that serves.
pub(crate) const SERVER_ENV: &str = "LIVE_BENCH_SERVER";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if std::env::var_os(SERVER_ENV).is_some() {
        server::run();
        return;
    }
    let pin = env_or("LIVE_BENCH_PIN", 1u8) == 1;
    if pin {
        // Before any thread: those made later inherit core 1.
        let ok = std::process::Command::new("taskset")
            .args(["-p", "-c", "1", &std::process::id().to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "taskset could not pin the client to core 1 (LIVE_BENCH_PIN=0 to skip)"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(if pin { 1 } else { 2 })
        .enable_all()
        .build()
        .expect("a runtime");
    header(pin);
    let parts: String = env_or("LIVE_BENCH_PARTS", "1234".to_owned());
    rt.block_on(async {
        if parts.contains('1') {
            bytes(pin).await;
        }
        if parts.contains('2') {
            cpu(pin).await;
        }
        if parts.contains('3') || parts.contains('4') {
            views(pin).await;
        }
    });
}

fn header(pin: bool) {
    let sh = |cmd: &str| {
        std::process::Command::new("sh")
            .args(["-c", cmd])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    println!("galleon-live bench (crates/live/benches/live.rs)");
    println!("date:    {}", sh("date -u '+%Y-%m-%d %H:%M:%S UTC'"));
    // The crate's own checkout, wherever the binary is run from.
    let git = format!("git -C {}", env!("CARGO_MANIFEST_DIR"));
    let dirty = format!("{git} status --porcelain | head -c1 | sed 's/.\\+/(+ local changes)/'");
    println!(
        "commit:  {}",
        sh(&format!("{git} rev-parse --short HEAD; {dirty}")).replace('\n', " ")
    );
    println!(
        "machine: {}, {} cores, load {}",
        sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
        sh("getconf _NPROCESSORS_ONLN"),
        sh("cut -d' ' -f1-3 /proc/loadavg")
    );
    println!("command: cargo bench -p galleon-live --bench live");
    println!(
        "pinning: {}",
        if pin {
            "server child on core 0 (1 tokio worker), client on core 1 (1 worker)"
        } else {
            "none (2 workers each)"
        }
    );
}

/// The `response.diff` of a reply frame, or a push's payload, as compact JSON.
fn diff_of(frame: &str) -> String {
    let m = galleon_live::Message::decode(frame).expect("a channel message");
    let d = if m.event == "phx_reply" {
        m.payload["response"]["diff"].clone()
    } else {
        m.payload
    };
    d.to_string()
}

async fn diff_bytes(child: &Child) -> u64 {
    child.stats().await["diff_bytes"].as_u64().unwrap_or(0)
}

/// Part 1.
async fn bytes(pin: bool) {
    let child = Child::spawn(pin, false);
    let addr = child.addr;
    let mut rows: Vec<[String; 4]> = Vec::new();
    let mut frames: Vec<String> = Vec::new();
    let mut row = |what: &str, diff: u64, frame: &str, phoenix: &str| {
        rows.push([
            what.to_owned(),
            diff.to_string(),
            format!("{} ({})", frame.len(), wire_bytes(frame.len())),
            phoenix.to_owned(),
        ]);
        let shown = if frame.len() > 200 {
            let mut end = 200;
            while !frame.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}… ({} B in all)", &frame[..end], frame.len())
        } else {
            frame.to_owned()
        };
        frames.push(format!("{what}:\n    {shown}"));
    };

    let (session, csrf) = tokens(addr, "/counter").await;
    let mut ws = connect(addr, &csrf).await;
    let joined = join(&mut ws, addr, "/counter", &session).await;
    let rendered = child.stats().await["rendered_bytes"].as_u64().unwrap_or(0);
    row("counter: join (whole render)", rendered, &joined, "");
    let before = diff_bytes(&child).await;
    push(
        &mut ws,
        "4",
        "5",
        "event",
        json!({"type": "click", "event": "inc", "value": {}}),
    )
    .await;
    let click = next_text(&mut ws).await;
    let d = diff_bytes(&child).await - before;
    assert_eq!(
        d as usize,
        diff_of(&click).len(),
        "the counter's diff, server vs frame"
    );
    row("counter: click, the event's reply", d, &click, "93 B frame");

    let (session, csrf) = tokens(addr, "/list").await;
    let mut ws = connect(addr, &csrf).await;
    let r0 = child.stats().await["rendered_bytes"].as_u64().unwrap_or(0);
    let joined = join(&mut ws, addr, "/list", &session).await;
    let rendered = child.stats().await["rendered_bytes"].as_u64().unwrap_or(0) - r0;
    row("list of 300: join (whole render)", rendered, &joined, "");
    let before = diff_bytes(&child).await;
    let value = json!({"type": "click", "event": "bump", "value": {"i": "150"}});
    push(&mut ws, "4", "5", "event", value).await;
    let bump = next_text(&mut ws).await;
    let d = diff_bytes(&child).await - before;
    assert_eq!(
        d as usize,
        diff_of(&bump).len(),
        "the list's diff, server vs frame"
    );
    let phoenix = "5,591 B frame (published: every dynamic 7,274 B; temporary assigns 120 B; \
                   a LiveComponent per row 1,818 B)";
    row(
        "list of 300: one row changed, the event's reply",
        d,
        &bump,
        phoenix,
    );
    let before = diff_bytes(&child).await;
    let (_, handed) = child.broadcast("list", 1).await;
    assert_eq!(handed, 1);
    let pushed = next_text(&mut ws).await;
    let d = diff_bytes(&child).await - before;
    assert_eq!(
        d as usize,
        diff_of(&pushed).len(),
        "the pushed diff, server vs frame"
    );
    row(
        "list of 300: one row changed, a broadcast's push",
        d,
        &pushed,
        "",
    );

    println!("\n## 1. Bytes per update (WebSocket frames the client read)\n");
    println!("| update | diff JSON B | frame text B (on the wire) | LiveView 1.0.19 |");
    println!("|---|---|---|---|");
    for r in rows {
        println!("| {} |", r.join(" | "));
    }
    println!("\nThe frames as read:\n");
    for f in frames {
        println!("{f}");
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Part 2's workloads: click, row flip, broadcast, the broadcast baseline, the whole page.
const WORKLOADS: usize = 5;

/// `GET target` on the keep-alive connection `s`; the body (by `content-length`).
async fn get_keep_alive(s: &mut tokio::net::TcpStream, target: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let req = format!("GET {target} HTTP/1.1\r\nhost: bench\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::with_capacity(32 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the server closed the keep-alive connection");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a whole page has a content-length");
        while buf.len() < end + 4 + len {
            let n = s.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed mid-body");
            buf.extend_from_slice(&chunk[..n]);
        }
        return String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
    }
}

/// Part 2.
async fn cpu(pin: bool) {
    let child = Child::spawn(pin, false);
    let addr = child.addr;
    let rounds: usize = env_or("LIVE_BENCH_ROUNDS", 7);
    let events: usize = env_or::<usize>("LIVE_BENCH_EVENTS", 4000).max(100);
    let (session, csrf) = tokens(addr, "/counter").await;
    let mut counter = connect(addr, &csrf).await;
    join(&mut counter, addr, "/counter", &session).await;
    let (session, csrf) = tokens(addr, "/list").await;
    let mut list = connect(addr, &csrf).await;
    join(&mut list, addr, "/list", &session).await;
    let mut msg = 5u64;
    let mut page = tokio::net::TcpStream::connect(addr).await.unwrap();
    page.set_nodelay(true).unwrap();

    // One loop of `n` updates of workload `w`; (server CPU ns by schedstat, by ticks, wall).
    async fn run(
        w: usize,
        n: usize,
        child: &Child,
        (c, l, page): (&mut Ws, &mut Ws, &mut tokio::net::TcpStream),
        msg: &mut u64,
    ) -> (u64, u64, Duration) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let (s0, t0) = child.cpu_ns();
        let start = Instant::now();
        match w {
            4 => {
                for _ in 0..n {
                    let body = get_keep_alive(page, "/list").await;
                    assert!(body.contains("data-phx-session"), "a whole live page");
                    assert!(Instant::now() < deadline, "the loop outlasted its 120 s");
                }
            }
            0 | 1 => {
                for i in 0..n {
                    *msg += 1;
                    let (ws, event, value) = if w == 0 {
                        (&mut *c, "inc", json!({}))
                    } else {
                        (
                            &mut *l,
                            "bump",
                            json!({"i": (i % server::ROWS).to_string()}),
                        )
                    };
                    let payload = json!({"type": "click", "event": event, "value": value});
                    push(ws, "4", &msg.to_string(), "event", payload).await;
                    let reply = next_text(ws).await;
                    assert!(reply.contains(r#""diff""#), "{reply}");
                    assert!(Instant::now() < deadline, "the loop outlasted its 120 s");
                }
            }
            _ => {
                let topic = if w == 2 { "list" } else { "none" };
                for _ in 0..n / 100 {
                    let (_, handed) = child.broadcast(topic, 100).await;
                    if w == 2 {
                        assert_eq!(handed, 100, "each broadcast reached the list view");
                        for _ in 0..100 {
                            let f = next_text(l).await;
                            assert!(f.contains(r#","diff","#), "{f}");
                        }
                    }
                    assert!(Instant::now() < deadline, "the loop outlasted its 120 s");
                }
            }
        }
        let wall = start.elapsed();
        let (s1, t1) = child.cpu_ns();
        (s1 - s0, t1 - t0, wall)
    }

    // Warm-up, not kept.
    for w in 0..WORKLOADS {
        let conns = (&mut counter, &mut list, &mut page);
        run(w, 400, &child, conns, &mut msg).await;
    }
    let mut sched = vec![Vec::new(); WORKLOADS];
    let mut ticks = vec![Vec::new(); WORKLOADS];
    let mut wall = vec![Vec::new(); WORKLOADS];
    let mut net = Vec::new();
    for r in 0..rounds {
        let mut this = [0f64; WORKLOADS];
        for k in 0..WORKLOADS {
            let w = (k + r) % WORKLOADS;
            let conns = (&mut counter, &mut list, &mut page);
            let (s, t, d) = run(w, events, &child, conns, &mut msg).await;
            let n = (if w == 2 || w == 3 {
                events / 100 * 100
            } else {
                events
            }) as f64;
            this[w] = s as f64 / n / 1000.0;
            sched[w].push(this[w]);
            ticks[w].push(t as f64 / n / 1000.0);
            wall[w].push(d.as_secs_f64() * 1e6 / n);
        }
        net.push(this[2] - this[3]);
    }
    let names = [
        "counter click: event → reply",
        "list of 300, one row flipped: event → reply",
        "list of 300, one row flipped: broadcast → pushed diff (raw)",
        "baseline: the same broadcast requests, to no subscriber",
        "list of 300: the whole page rendered over HTTP (GET, keep-alive), for comparison",
    ];
    println!("\n## 2. Server CPU per update ({rounds} rounds of {events}, medians)\n");
    println!(
        "| update | server CPU µs (schedstat) | server CPU µs (utime+stime) | wall µs per update |"
    );
    println!("|---|---|---|---|");
    for w in 0..WORKLOADS {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} |",
            names[w],
            median(&mut sched[w]),
            median(&mut ticks[w]),
            median(&mut wall[w])
        );
    }
    println!(
        "| list of 300: broadcast → pushed diff, less the baseline (median of per-round differences) | {:.1} | | |",
        median(&mut net)
    );
}

/// A socket's reader: forwards (broadcaster's clock, now) for each pushed diff it reads.
fn read_pushes(mut ws: Ws, tx: tokio::sync::mpsc::UnboundedSender<(i64, i64)>) {
    tokio::spawn(async move {
        while let Some(Ok(frame)) = ws.next().await {
            let tokio_tungstenite::tungstenite::Message::Text(t) = frame else {
                continue;
            };
            let now = server::now_ns();
            let Ok(m) = galleon_live::Message::decode(t.as_str()) else {
                continue;
            };
            if m.event == "diff" {
                let sent = m.payload["0"].as_str().and_then(|s| s.parse().ok());
                if tx.send((sent.unwrap_or(0), now)).is_err() {
                    break;
                }
            }
        }
    });
}

type Heap = (std::collections::BTreeMap<i64, i64>, i64);

/// What the heap gained per view between `a` and `b` (N views): the sizes holding the most.
fn heap_table(n: usize, a: &Heap, b: &Heap) -> Vec<String> {
    let mut gained: Vec<(i64, f64)> =
        b.0.iter()
            .map(|(&size, &c)| {
                (
                    size,
                    (c - a.0.get(&size).copied().unwrap_or(0)) as f64 / n as f64,
                )
            })
            .filter(|&(size, per)| size < 32 * 1024 && per.abs() >= 0.05)
            .collect();
    let total: f64 =
        gained.iter().map(|&(s, per)| s as f64 * per).sum::<f64>() + (b.1 - a.1) as f64 / n as f64;
    let allocs: f64 = gained.iter().map(|&(_, per)| per).sum();
    gained.sort_by(|x, y| (y.0 as f64 * y.1).total_cmp(&(x.0 as f64 * x.1)));
    let mut out = vec![
        format!(
            "\nThe heap per view at N = {n} (live allocations counted by the child's allocator): \
             {total:.0} B in {allocs:.1} allocations; the sizes holding the most:\n"
        ),
        "| allocation size B | allocations per view | B per view |".to_owned(),
        "|---|---|---|".to_owned(),
    ];
    for (size, per) in gained.into_iter().take(12) {
        out.push(format!("| {size} | {per:.2} | {:.0} |", size as f64 * per));
    }
    out
}

/// Parts 3 and 4, at each N.
async fn views(pin: bool) {
    let levels: String = env_or("LIVE_BENCH_VIEWS", "100,1000,10000".to_owned());
    let fan_rounds: usize = env_or("LIVE_BENCH_FANOUT_ROUNDS", 10);
    let mut mem_rows = Vec::new();
    let mut fan_rows = Vec::new();
    let mut heap_rows = Vec::new();
    for n in levels
        .split(',')
        .filter_map(|n| n.trim().parse::<usize>().ok())
    {
        let child = Child::spawn(pin, true);
        let addr = child.addr;
        let (session, csrf) = tokens(addr, "/counter").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let heap0 = child.heap().await;
        let (rss0, anon0) = child.rss_kib();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let start = Instant::now();
        let mut joins = futures::stream::iter(0..n)
            .map(|_| {
                let (session, csrf) = (session.clone(), csrf.clone());
                async move {
                    let mut ws = connect(addr, &csrf).await;
                    join(&mut ws, addr, "/counter", &session).await;
                    ws
                }
            })
            .buffer_unordered(32);
        let mut joined = 0;
        while let Some(ws) = joins.next().await {
            read_pushes(ws, tx.clone());
            joined += 1;
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "joining took over 300 s"
            );
        }
        drop(joins);
        let join_s = start.elapsed().as_secs_f64();
        let open = child.stats().await["views_open"].as_u64().unwrap_or(0);
        assert_eq!((joined, open as usize), (n, n), "every view joined");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (rss1, anon1) = child.rss_kib();
        let heap1 = child.heap().await;
        heap_rows = heap_table(n, &heap0, &heap1);
        let per = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / n as f64;
        mem_rows.push(format!(
            "| {n} | {rss0} | {rss1} | {:.1} | {:.1} | {:.0} |",
            per(rss0, rss1),
            per(anon0, anon1),
            n as f64 / join_s
        ));

        let mut all = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("a histogram");
        let mut lasts = Vec::new();
        let mut cpu_ns = 0;
        for _ in 0..fan_rounds {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let (c0, _) = child.cpu_ns();
            let (t0, handed) = child.broadcast("news", 1).await;
            assert_eq!(handed, n, "the broadcast reached every view");
            let mut got = 0;
            let mut last = 0;
            let end = Instant::now() + WAIT;
            while got < n {
                let left = end.saturating_duration_since(Instant::now());
                let Ok(Some((sent, now))) = tokio::time::timeout(left, rx.recv()).await else {
                    panic!("{got} of {n} views' diffs within {WAIT:?}");
                };
                if sent < t0 {
                    continue; // An earlier round's straggler.
                }
                let us = u64::try_from((now - sent) / 1000).unwrap_or(0).max(1);
                let _ = all.record(us);
                last = last.max(now - t0);
                got += 1;
            }
            lasts.push(last as f64 / 1000.0);
            cpu_ns += child.cpu_ns().0 - c0;
        }
        fan_rows.push(format!(
            "| {n} | {} | {} | {} | {} | {:.0} | {:.1} |",
            fan_rounds,
            all.value_at_quantile(0.5),
            all.value_at_quantile(0.99),
            all.max(),
            median(&mut lasts),
            cpu_ns as f64 / 1000.0 / (n * fan_rounds) as f64
        ));
    }
    println!("\n## 3. Memory per idle joined view (a fresh server child per N)\n");
    println!(
        "| views | child VmRSS before KiB | after KiB | KiB per view (VmRSS) | KiB per view (RssAnon) | joins/s while connecting |"
    );
    println!("|---|---|---|---|---|---|");
    for r in mem_rows {
        println!("{r}");
    }
    for r in heap_rows {
        println!("{r}");
    }
    println!(
        "\n## 4. Fan-out: one broadcast to N subscribed views (broadcast → each client read its diff)\n"
    );
    println!(
        "| views | rounds | p50 µs | p99 µs | max µs | until the last view µs (median of rounds) | server CPU µs per view reached |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in fan_rows {
        println!("{r}");
    }
}
