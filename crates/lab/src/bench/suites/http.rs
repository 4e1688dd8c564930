//! `http`: a child `galleon serve` (this same executable, the site, no event store) on
//! 127.0.0.1 at a port the kernel picks, driven by a small built-in load generator: a fixed
//! number of keep-alive connections on one tokio thread, each sending its next GET as soon as
//! the previous response has arrived whole, for a fixed time. The server is pinned to one CPU
//! and the load generator's thread to another (`pin.rs`; `--no-pin` or `PIN=0`: unpinned, as
//! with fewer than 2 CPUs), so each has a core of its own as with a client on another machine.
//! Three targets, their turns interleaved: the 4 KB page (`/blah?iters=10`), the 400 KB page
//! (`/blah?iters=1000`) and a static file. Two figures each: requests per second, and the
//! server's CPU time per response (utime + stime from `/proc/PID/stat` over the requests it
//! served). Then `/doom` streamed by a fresh server against a raw sender, the ratio guarded
//! (`doom.rs`, unpinned). Nothing else is needed: no wrk, no curl.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::child::Server;
use crate::bench::measure::{Collector, Ctx, rotation};
use crate::bench::pin::{self, Placement, ThreadPin};

/// How long one read of a response may wait.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response head accepted from the server.
const MAX_HEAD: usize = 16 * 1024;

/// A target: its name in the tables, its path, the least body length it must answer.
const TARGETS: [(&str, &str, usize); 3] = [
    ("GET /blah?iters=10 (4 KB)", "/blah?iters=10", 4_000),
    ("GET /blah?iters=1000 (400 KB)", "/blah?iters=1000", 400_000),
    ("GET /static/site.css", "/static/site.css", 1),
];

/// Where `needle` starts in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one response: checks the status is 200 and the body at least `min_len`, reads the
/// whole body (`content-length`); its length.
/// `body` is scratch space the body is read into and dropped.
async fn response(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    body: &mut [u8],
    min_len: usize,
) -> anyhow::Result<usize> {
    buf.clear();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            bail!("response head over {MAX_HEAD} bytes");
        }
        let n = tokio::time::timeout(READ_TIMEOUT, s.read(&mut chunk))
            .await
            .context("the server did not answer in time")??;
        if n == 0 {
            bail!("the server closed the connection");
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).context("response head not UTF-8")?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        bail!("answered {}", head.lines().next().unwrap_or(""));
    }
    let len: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .context("response without content-length")?;
    if len < min_len {
        bail!("answered {len} bytes, expected at least {min_len}");
    }
    let mut left = len
        .checked_sub(buf.len() - head_end)
        .context("more bytes than the response's length")?;
    while left > 0 {
        let want = left.min(body.len());
        let n = tokio::time::timeout(READ_TIMEOUT, s.read(&mut body[..want]))
            .await
            .context("the server stalled mid-body")??;
        if n == 0 {
            bail!("the server closed the connection mid-body");
        }
        left -= n;
    }
    Ok(len)
}

/// One connection: requests back to back until `deadline`; how many were answered.
async fn connection(
    addr: SocketAddr,
    request: std::sync::Arc<[u8]>,
    min_len: usize,
    deadline: tokio::time::Instant,
) -> anyhow::Result<u64> {
    let mut s = TcpStream::connect(addr).await.context("connecting")?;
    s.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(MAX_HEAD);
    let mut body = vec![0u8; 256 * 1024];
    let mut n = 0u64;
    while tokio::time::Instant::now() < deadline {
        s.write_all(&request).await.context("sending a request")?;
        response(&mut s, &mut buf, &mut body, min_len).await?;
        n += 1;
    }
    Ok(n)
}

/// Drives `path` on `addr` with `conns` keep-alive connections for `dur` (at least one):
/// (requests per second, requests).
pub(super) async fn load(
    addr: SocketAddr,
    path: &str,
    min_len: usize,
    conns: usize,
    dur: Duration,
) -> anyhow::Result<(f64, u64)> {
    let request: std::sync::Arc<[u8]> =
        format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nuser-agent: galleon-bench\r\n\r\n")
            .into_bytes()
            .into();
    let start = tokio::time::Instant::now();
    let deadline = start + dur;
    let tasks: Vec<_> = (0..conns.max(1))
        .map(|_| tokio::spawn(connection(addr, request.clone(), min_len, deadline)))
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.context("a load task panicked")??;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((total as f64 / secs, total))
}

/// Runs the suite.
pub(super) fn run(ctx: &Ctx, out: &mut Collector) -> anyhow::Result<()> {
    let rounds = ctx.rounds(7);
    let dur = ctx.pick(Duration::from_secs(5), Duration::from_millis(300));
    let conns = ctx.pick(16, 4);
    ctx.start(
        (rounds + 1) * TARGETS.len() + super::doom::steps(rounds),
        "starting galleon serve",
    );
    let placement = pin::plan(ctx.pin, &pin::allowed_cpus()?);
    if let Placement::Unpinned { why } = &placement {
        ctx.bar
            .suspend(|| eprintln!("galleon bench http: running unpinned: {why}"));
    }
    let method = placement.describe();
    let server = Server::start(&ctx.site, placement.server())?;
    if let Some(cpu) = placement.server() {
        let cpus = server.cpus()?;
        if cpus != [cpu] {
            bail!("the server was to run on CPU {cpu} only, but may run on {cpus:?}");
        }
    }
    // The load generator is this thread (a current-thread runtime): pinned until the pages
    // are done, so the /doom rows and later suites run as before.
    let client_pin = placement.client().map(ThreadPin::new).transpose()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for (name, _, _) in TARGETS {
        out.declare_measured(&format!("{name} req/s"), "req/s", false, &method);
        out.declare_measured(&format!("{name} server CPU"), "cpu us/req", true, &method);
    }
    // Round 0 warms up (connections, the pool's estimates, the page cache) and is not kept.
    for round in 0..=rounds {
        for i in rotation(round, TARGETS.len()) {
            let (name, path, min_len) = TARGETS[i];
            let cpu = server.cpu_secs()?;
            let d = if round == 0 { dur / 2 } else { dur };
            let (rps, n) = rt
                .block_on(load(server.addr, path, min_len, conns, d))
                .with_context(|| format!("{name} at {}", server.addr))?;
            let cpu = server.cpu_secs()? - cpu;
            if n == 0 {
                bail!("{name}: no response within {d:?}");
            }
            if round > 0 {
                out.push(&format!("{name} req/s"), "req/s", false, rps);
                out.push(
                    &format!("{name} server CPU"),
                    "cpu us/req",
                    true,
                    cpu * 1e6 / n as f64,
                );
            }
            ctx.step(name);
        }
    }
    drop(rt);
    drop(client_pin);
    drop(server);
    super::doom::run(ctx, &ctx.site, rounds, out)
}
