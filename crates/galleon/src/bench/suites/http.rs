//! `http`: a child `galleon serve` (this same executable, the site, no event store) on
//! 127.0.0.1 at a port the kernel picks, driven by a small built-in load generator: a fixed
//! number of keep-alive connections on one tokio thread, each sending its next GET as soon as
//! the previous response has arrived whole, for a fixed time. Three targets, their turns
//! interleaved: the 4 KB page (`/blah?iters=10`), the 400 KB page (`/blah?iters=1000`) and a
//! static file. Two figures each: requests per second, and the server's CPU time per request
//! (from `/proc/PID/stat`; steadier than req/s when the machine is shared). Nothing else is
//! needed: no wrk, no curl.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::bench::measure::{Collector, Ctx, rotation};

/// How long the child may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one read of a response may wait.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The kernel's clock ticks per second in `/proc/PID/stat` (`USER_HZ`: 100 on Linux).
const USER_HZ: f64 = 100.0;
/// Largest response head accepted from the server.
const MAX_HEAD: usize = 16 * 1024;

/// A target: its name in the tables, its path, the least body length it must answer.
const TARGETS: [(&str, &str, usize); 3] = [
    ("GET /blah?iters=10 (4 KB)", "/blah?iters=10", 4_000),
    ("GET /blah?iters=1000 (400 KB)", "/blah?iters=1000", 400_000),
    ("GET /static/site.css", "/static/site.css", 1),
];

/// The child server; killed and reaped when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `galleon serve` on 127.0.0.1, port 0, and reads the address it bound from the
    /// line it prints on stderr; the rest of its stderr is drained by a thread.
    fn start(site: &Path) -> anyhow::Result<Server> {
        let exe = std::env::current_exe().context("finding this executable")?;
        let mut child = Command::new(exe)
            .arg("serve")
            .arg("--site")
            .arg(site)
            .args(["--addr", "127.0.0.1:0", "--events", "off"])
            .env_remove("GALLEON_EVENTS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting `galleon serve`")?;
        let stderr = child.stderr.take().context("the child's stderr")?;
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::Builder::new()
            .name("bench-serve-log".into())
            .spawn(move || {
                let mut lines = BufReader::new(stderr).lines();
                for line in lines.by_ref().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })?;
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = serving_addr(&line) {
                        server.addr = addr;
                        return Ok(server);
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let status = server.child.try_wait().ok().flatten();
                    bail!(
                        "`galleon serve` did not start ({}): {}",
                        status.map_or("no address printed in time".to_owned(), |s| s.to_string()),
                        seen.join(" | ")
                    );
                }
            }
        }
    }

    /// The child's CPU time so far (user + system), in seconds.
    fn cpu_secs(&self) -> anyhow::Result<f64> {
        let path = format!("/proc/{}/stat", self.child.id());
        let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let after = stat
            .rfind(')')
            .and_then(|i| stat.get(i + 2..))
            .context("parsing /proc/PID/stat")?;
        let f: Vec<&str> = after.split_whitespace().collect();
        let tick = |i: usize| -> anyhow::Result<f64> {
            f.get(i)
                .context("short /proc/PID/stat")?
                .parse::<f64>()
                .context("parsing /proc/PID/stat")
        };
        Ok((tick(11)? + tick(12)?) / USER_HZ)
    }
}

/// The address in `galleon: serving DIR at http://127.0.0.1:PORT/ (...)`.
pub(super) fn serving_addr(line: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix("galleon: serving ")?;
    let at = rest.find(" at http://")? + " at http://".len();
    let addr = &rest[at..];
    addr[..addr.find('/')?].parse().ok()
}

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
    ctx.start((rounds + 1) * TARGETS.len(), "starting galleon serve");
    let server = Server::start(&ctx.site)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for (name, _, _) in TARGETS {
        out.declare(&format!("{name} req/s"), "req/s", false);
        out.declare(&format!("{name} server CPU"), "cpu us/req", true);
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
    drop(server);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_read_from_the_serving_line() {
        let line = "galleon: serving site at http://127.0.0.1:43123/ (write policy Default)";
        assert_eq!(serving_addr(line), Some("127.0.0.1:43123".parse().unwrap()));
        assert_eq!(serving_addr("galleon: watching"), None);
    }
}
