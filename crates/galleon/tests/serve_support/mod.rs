//! Runs `galleon serve` as a child process on a free loopback port, for the `serve*` tests.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for the server to print its address.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The repository's example site.
pub fn site_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../site")
}

pub fn galleon() -> Command {
    Command::new(env!("CARGO_BIN_EXE_galleon"))
}

/// A `galleon serve` child, killed on drop.
pub struct ServeProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr_path: PathBuf,
    /// The event store's SQLite file unless the test passes its own `--events`: a file in the
    /// child's temporary directory (given as `GALLEON_EVENTS`), so no test writes `./data/`.
    pub events_db: PathBuf,
    _dir: tempfile::TempDir,
}

impl ServeProcess {
    /// Starts `galleon serve --addr 127.0.0.1:0 EXTRA...` (optionally under a wrapper command
    /// such as strace) and waits for its "serving" line.
    pub fn start_wrapped(wrapper: &[&str], extra: &[&str]) -> ServeProcess {
        ServeProcess::start_site(wrapper, &site_dir(), extra)
    }

    /// [`ServeProcess::start_wrapped`] serving the site in `site`.
    pub fn start_site(wrapper: &[&str], site: &std::path::Path, extra: &[&str]) -> ServeProcess {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("stderr.txt");
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--site".into(),
            site.to_string_lossy().into_owned(),
            "--addr".into(),
            "127.0.0.1:0".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut cmd = if let Some((first, rest)) = wrapper.split_first() {
            let mut c = Command::new(first);
            c.args(rest).arg(env!("CARGO_BIN_EXE_galleon")).args(&args);
            c
        } else {
            let mut c = galleon();
            c.args(&args);
            c
        };
        let events_db = dir.path().join("events.db");
        let child = cmd
            .env("GALLEON_EVENTS", format!("sqlite:{}", events_db.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let start = Instant::now();
        let addr = loop {
            let text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            // stderr is unbuffered and the line may be written in several calls: parse it only
            // once it is whole (a partial "127.0" does not parse).
            if let Some(line) = text.lines().find(|l| l.contains("at http://"))
                && text.contains(&format!("{line}\n"))
            {
                let rest = line.split("at http://").nth(1).unwrap();
                let a = rest.split('/').next().unwrap();
                break a
                    .parse()
                    .unwrap_or_else(|e| panic!("bad address in {line:?}: {e}"));
            }
            assert!(
                start.elapsed() < STARTUP_TIMEOUT,
                "galleon serve did not start: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        ServeProcess {
            child,
            addr,
            stderr_path,
            events_db,
            _dir: dir,
        }
    }

    pub fn start(extra: &[&str]) -> ServeProcess {
        ServeProcess::start_wrapped(&[], extra)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends SIGTERM to `pid` and waits (bounded) for the child to exit; returns its status.
    pub fn terminate(&mut self, pid: u32) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `(utime + stime)` clock ticks of a process, from /proc.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// A `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}
