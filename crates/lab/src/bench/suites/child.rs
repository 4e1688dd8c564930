//! The child `galleon serve` the http suites measure: this same executable, the site, no event
//! store, on 127.0.0.1 at a port the kernel picks; its CPU time and peak memory from `/proc`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::bench::pin::{cpus_of, spawn_on};

/// How long the child may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The kernel's clock ticks per second in `/proc/PID/stat` (`USER_HZ`: 100 on Linux).
const USER_HZ: f64 = 100.0;

/// The child server; killed and reaped when dropped.
pub(super) struct Server {
    child: Child,
    pub(super) addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `galleon serve` on 127.0.0.1, port 0 (pinned to CPU `cpu`, with every thread it
    /// starts, when given), and reads the address it bound from the line it prints on stderr;
    /// the rest of its stderr is drained by a thread.
    pub(super) fn start(site: &Path, cpu: Option<usize>) -> anyhow::Result<Server> {
        let exe = std::env::current_exe().context("finding this executable")?;
        let mut child = spawn_on(
            Command::new(exe)
                .arg("serve")
                .arg("--site")
                .arg(site)
                .args(["--addr", "127.0.0.1:0", "--events", "off"])
                .env_remove("GALLEON_EVENTS")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
            cpu,
        )
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

    /// The child's peak resident memory so far (`VmHWM`), in MiB.
    pub(super) fn peak_rss_mib(&self) -> anyhow::Result<f64> {
        let path = format!("/proc/{}/status", self.child.id());
        let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmHWM in /proc/PID/status")?;
        Ok(kib / 1024.0)
    }

    /// The CPUs the child may run on.
    pub(super) fn cpus(&self) -> anyhow::Result<Vec<usize>> {
        cpus_of(self.child.id())
    }

    /// The child's CPU time so far (user + system), in seconds.
    pub(super) fn cpu_secs(&self) -> anyhow::Result<f64> {
        cpu_secs(self.child.id())
    }
}

/// User + system CPU seconds of process `pid`, from `/proc/PID/stat`.
pub(super) fn cpu_secs(pid: u32) -> anyhow::Result<f64> {
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
pub(super) fn serving_addr(line: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix("galleon: serving ")?;
    let at = rest.find(" at http://")? + " at http://".len();
    let addr = &rest[at..];
    addr[..addr.find('/')?].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_read_from_the_serving_line() {
        let line = "galleon: serving site at http://127.0.0.1:43123/ (write policy Default)";
        assert_eq!(serving_addr(line), Some("127.0.0.1:43123".parse().unwrap()));
        assert_eq!(serving_addr("galleon: watching"), None);
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
}
