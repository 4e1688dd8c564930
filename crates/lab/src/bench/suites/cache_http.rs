//! The `cache` suite's HTTP rows: the seed's experiment as it was run, a small set of strings
//! (`/static`) against a large one (`/dynamic`), on a child `galleon serve` and on the BEAM peer
//! (`bench/peers/beam_peer.erl`, compiled with `erlc` into a temporary directory), driven in
//! interleaved turns by a keep-alive load generator on one tokio thread (as the `http` suite's),
//! 127.0.0.1 only. Each row: requests per second and the server's CPU per request.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

// The load generator and the serving-line parser are the http suite's.
pub(super) use super::child::{cpu_secs, serving_addr};
pub(super) use super::http::load;

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Which server a target is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// A child `galleon serve` of this executable.
    Galleon,
    /// The same with `--value-copy-below 64`, the default before issue 20 (the pool's 65-byte
    /// strings referenced, one reference count each): the change's before and after.
    GalleonRefValues,
    /// The Erlang VM running `beam_peer`.
    Beam,
}

/// A row: server, name in the tables, path, least body length.
pub(crate) const TARGETS: [(Peer, &str, &str, usize); 7] = [
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
        Peer::GalleonRefValues,
        "galleon-refvalues /static-strings?count=500",
        "/static-strings?count=500",
        36_000,
    ),
    (
        Peer::GalleonRefValues,
        "galleon-refvalues /dynamic-strings?count=500",
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
    /// `galleon serve` of this executable on 127.0.0.1, port 0, with `extra` flags; the address
    /// is read from the line it prints on stderr.
    pub(crate) fn galleon(site: &Path, extra: &[&str]) -> anyhow::Result<Server> {
        let exe = std::env::current_exe().context("finding this executable")?;
        let mut child = Command::new(exe)
            .arg("serve")
            .arg("--site")
            .arg(site)
            .args(["--addr", "127.0.0.1:0", "--events", "off"])
            .args(extra)
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

#[cfg(test)]
mod tests {
    use super::*;

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
