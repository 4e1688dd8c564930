//! The `cache` suite's HTTP rows: the seed's experiment as it was run, a small set of strings
//! (`/static`) against a large one (`/dynamic`), on a child `galleon serve` and on the BEAM peer
//! (`bench/peers/beam_peer.erl`, compiled with `erlc` into a temporary directory), driven in
//! interleaved turns by a keep-alive load generator on one tokio thread (as the `http` suite's),
//! 127.0.0.1 only. Each row: requests per second and the server's CPU per request.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one read of a response may wait.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock ticks per second in `/proc/PID/stat`.
const USER_HZ: f64 = 100.0;
/// Largest response head accepted.
const MAX_HEAD: usize = 16 * 1024;

/// Which server a target is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// A child `galleon serve` of this executable.
    Galleon,
    /// The Erlang VM running `beam_peer`.
    Beam,
}

/// A row: server, name in the tables, path, least body length.
pub(crate) const TARGETS: [(Peer, &str, &str, usize); 5] = [
    (
        Peer::Galleon,
        "galleon /static-strings?count=500",
        "/static-strings?count=500",
        36_000,
    ),
    (
        Peer::Galleon,
        "galleon /dynamic-strings?count=500",
        "/dynamic-strings?count=500",
        36_000,
    ),
    (
        Peer::Beam,
        "beam /static?count=500",
        "/static?count=500",
        36_000,
    ),
    (
        Peer::Beam,
        "beam /dynamic?count=500",
        "/dynamic?count=500",
        36_000,
    ),
    (
        Peer::Beam,
        "beam /fixed?count=500",
        "/fixed?count=500",
        36_000,
    ),
];

/// A child server, killed and reaped when dropped.
#[derive(Debug)]
pub(crate) struct Server {
    child: Child,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `galleon serve` of this executable on 127.0.0.1, port 0; the address is read from the
    /// line it prints on stderr.
    pub(crate) fn galleon(site: &Path) -> anyhow::Result<Server> {
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
        let rx = lines(&mut child)?;
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            _dir: None,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => match serving_addr(&line) {
                    Some(addr) => {
                        server.addr = addr;
                        return Ok(server);
                    }
                    None => seen.push(line),
                },
                Err(_) => bail!("`galleon serve` did not start: {}", seen.join(" | ")),
            }
        }
    }

    /// The BEAM peer: `beam_peer.erl` (in the repository holding `site`) compiled with `erlc`,
    /// run by `erl` on a free loopback port, without the schedulers' busy-waiting (which would
    /// count as CPU per request). An error says what is missing.
    pub(crate) fn beam(site: &Path) -> anyhow::Result<Server> {
        let src = peer_source(site)?;
        let dir = tempfile::tempdir().context("a directory for beam_peer.beam")?;
        let out = Command::new("erlc")
            .arg("-o")
            .arg(dir.path())
            .arg(&src)
            .output()
            .context("running erlc (Debian: apt-get install erlang-nox)")?;
        if !out.status.success() {
            bail!(
                "erlc {} failed: {}",
                src.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let port = free_port()?;
        let mut child = Command::new("erl")
            .args(["-noshell", "+sbwt", "none", "+sbwtdcpu", "none"])
            .args(["+sbwtdio", "none", "-pa"])
            .arg(dir.path())
            .args(["-eval", &format!("beam_peer:start({port})")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting erl (Debian: apt-get install erlang-nox)")?;
        let rx = lines(&mut child)?;
        let server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            _dir: Some(dir),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if line.starts_with("beam_peer: serving") => return Ok(server),
                Ok(line) => seen.push(line),
                Err(_) => bail!("the BEAM peer did not start: {}", seen.join(" | ")),
            }
        }
    }

    /// The server's CPU time so far (user + system), in seconds.
    pub(crate) fn cpu_secs(&self) -> anyhow::Result<f64> {
        cpu_secs(self.child.id())
    }
}

/// The child's stderr lines, read by a thread into a channel.
fn lines(child: &mut Child) -> anyhow::Result<mpsc::Receiver<String>> {
    let stderr = child.stderr.take().context("the child's stderr")?;
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::Builder::new()
        .name("bench-cache-log".into())
        .spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        })?;
    Ok(rx)
}

/// `bench/peers/beam_peer.erl` of the repository whose `site` directory this is.
fn peer_source(site: &Path) -> anyhow::Result<PathBuf> {
    let root = site.canonicalize().unwrap_or_else(|_| site.to_path_buf());
    let src = root
        .parent()
        .unwrap_or(Path::new("."))
        .join("bench/peers/beam_peer.erl");
    if !src.is_file() {
        bail!("{} not found", src.display());
    }
    Ok(src)
}

/// A loopback port nobody listens on right now (the kernel's pick, released).
fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// User + system CPU seconds of process `pid`, from `/proc/PID/stat`.
pub(crate) fn cpu_secs(pid: u32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
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

/// The address in `galleon: serving DIR at http://127.0.0.1:PORT/ (...)`.
pub(crate) fn serving_addr(line: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix("galleon: serving ")?;
    let at = rest.find(" at http://")? + " at http://".len();
    let addr = &rest[at..];
    addr[..addr.find('/')?].parse().ok()
}

/// Reads one response: status 200, `content-length` at least `min_len`, the whole body.
async fn response(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    body: &mut [u8],
    min_len: usize,
) -> anyhow::Result<usize> {
    buf.clear();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
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
    if head.split(' ').nth(1) != Some("200") {
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
    request: Arc<[u8]>,
    min_len: usize,
    deadline: tokio::time::Instant,
) -> anyhow::Result<u64> {
    let mut s = TcpStream::connect(addr).await.context("connecting")?;
    s.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(MAX_HEAD);
    let mut body = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    while tokio::time::Instant::now() < deadline {
        s.write_all(&request).await.context("sending a request")?;
        response(&mut s, &mut buf, &mut body, min_len).await?;
        n += 1;
    }
    Ok(n)
}

/// Drives `path` on `addr` with `conns` keep-alive connections for `dur`: (req/s, requests).
pub(crate) async fn load(
    addr: SocketAddr,
    path: &str,
    min_len: usize,
    conns: usize,
    dur: Duration,
) -> anyhow::Result<(f64, u64)> {
    let request: Arc<[u8]> =
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
    Ok((total as f64 / start.elapsed().as_secs_f64(), total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_galleon_address_is_read_from_its_serving_line() {
        let line = "galleon: serving site at http://127.0.0.1:43123/ (write policy Default)";
        assert_eq!(serving_addr(line), Some("127.0.0.1:43123".parse().unwrap()));
        assert_eq!(
            serving_addr("beam_peer: serving at http://127.0.0.1:1/"),
            None
        );
    }

    #[test]
    fn this_process_has_a_cpu_time_and_a_missing_one_is_an_error() {
        assert!(cpu_secs(std::process::id()).unwrap() >= 0.0);
        assert!(cpu_secs(u32::MAX).is_err());
    }

    #[test]
    fn the_peer_source_is_found_next_to_the_site() {
        let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site");
        assert!(
            peer_source(&site)
                .unwrap()
                .ends_with("bench/peers/beam_peer.erl")
        );
        let dir = tempfile::tempdir().unwrap();
        let err = peer_source(&dir.path().join("site"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("beam_peer.erl not found"), "{err}");
    }
}
