//! The write trace against the kernel's own account: `galleon serve` runs under
//! `strace -f -e trace=writev,write,sendmsg,sendfile`, `galleon trace` fetches a response's trace,
//! and every call the trace reports must appear in strace's log, on the same descriptor, with the
//! same iovec count and result, in the same order.
//!
//! Needs `strace` (Debian package `strace`) and ptrace permission; without them the test says so
//! loudly and passes without checking.

mod serve_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serve_support::{ServeProcess, galleon};

/// One system call as strace logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    name: String,
    fd: i32,
    /// iovec count (writev), or 1.
    iovcnt: usize,
    result: i64,
}

/// Parses `writev(11, [...], 5) = 1373` and `sendfile(11, 12, [0] => [218], 218) = 218`.
fn parse_strace_line(line: &str) -> Option<Call> {
    let (name, args) = line.split_once('(')?;
    let name = name.trim();
    if !matches!(name, "writev" | "write" | "sendmsg" | "sendfile") {
        return None;
    }
    let fd = args.split(',').next()?.trim().parse().ok()?;
    let close = args.rfind(") = ")?;
    let result = args[close + 4..].split_whitespace().next()?.parse().ok()?;
    let iovcnt = if name == "writev" {
        args[..close].rsplit(", ").next()?.trim().parse().ok()?
    } else {
        1
    };
    Some(Call {
        name: name.to_owned(),
        fd,
        iovcnt,
        result,
    })
}

/// Parses the calls of a `galleon trace` report (`writev fd=11 iovcnt=5 bytes=1373`).
fn parse_trace(text: &str) -> Vec<Call> {
    text.lines()
        .filter(|l| l.starts_with("writev ") || l.starts_with("sendfile "))
        .map(|l| {
            let field = |k: &str| l.split_whitespace().find_map(|w| w.strip_prefix(k));
            Call {
                name: l.split(' ').next().unwrap().to_owned(),
                fd: field("fd=").unwrap().parse().unwrap(),
                iovcnt: field("iovcnt=").unwrap().parse().unwrap(),
                // A failed call has no `bytes=`; strace shows it as -1.
                result: field("bytes=").map_or(-1, |b| b.parse().unwrap()),
            }
        })
        .collect()
}

/// Every call in every per-thread strace file (`-ff -o PREFIX` writes `PREFIX.TID`), in order
/// per thread; the calls of one response come from one task, which may move between threads, so
/// the check below looks for them as a subsequence of the merged, time-stamped log.
fn strace_calls(dir: &Path) -> Vec<(f64, Call)> {
    let mut calls = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if !path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("st.")
        {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            // "-ttt": "1700000000.123456 writev(...) = n"
            let Some((ts, rest)) = line.split_once(' ') else {
                continue;
            };
            let (Ok(ts), Some(call)) = (ts.parse::<f64>(), parse_strace_line(rest)) else {
                continue;
            };
            calls.push((ts, call));
        }
    }
    calls.sort_by(|a, b| a.0.total_cmp(&b.0));
    calls
}

fn strace_works() -> bool {
    Command::new("strace")
        .args(["-qq", "-e", "trace=none", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn trace(addr: &str, path: &str, policy: &str) -> String {
    let out = galleon()
        .args(["trace", path, "--addr", addr, "--write-policy", policy])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_kernel_sees_the_calls_the_trace_reports() {
    if !strace_works() {
        eprintln!();
        eprintln!(
            "!!! SKIPPED: strace is missing or cannot trace here (apt-get install strace). !!!"
        );
        eprintln!(
            "!!! The write trace was NOT checked against the kernel.                       !!!"
        );
        eprintln!();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("st");
    let prefix = prefix.to_str().unwrap();
    let mut s = ServeProcess::start_wrapped(
        &[
            "strace",
            "-f",
            "-ff",
            "-qq",
            "-ttt",
            "-e",
            "trace=writev,write,sendmsg,sendfile",
            "-o",
            prefix,
        ],
        &["--trace-endpoint", "on"],
    );
    let addr = s.addr.to_string();
    let mut reports = Vec::new();
    for (path, policy) in [
        ("/blah?iters=1000", "vectored"),
        ("/blah?iters=1000", "default"),
        ("/blah?iters=1000", "flatten"),
        ("/blah-split?iters=100", "vectored"),
        ("/static/site.css", "default"),
        ("/doom?iters=3000", "vectored"),
    ] {
        let text = trace(&addr, path, policy);
        let calls = parse_trace(&text);
        assert!(!calls.is_empty(), "{path}: empty trace: {text}");
        let total: i64 = calls.iter().map(|c| c.result).sum();
        let summary = text.lines().find(|l| l.starts_with("summary:")).unwrap();
        assert!(
            summary.contains(&format!(" bytes={total} ")),
            "{path}: calls add up to {total}: {summary}"
        );
        reports.push((path, policy, calls));
    }
    // Stop the server (strace exits with it) so every log is complete.
    let server_pid = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_prefix("st.")?.parse::<u32>().ok()
        })
        .min()
        .expect("strace wrote no per-thread logs");
    let status = s.terminate(server_pid);
    assert!(status.is_some(), "server under strace did not stop");
    let start = Instant::now();
    let mut kernel = strace_calls(dir.path());
    while kernel.is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        kernel = strace_calls(dir.path());
    }
    // Each response's calls must appear in the kernel's log, in order, on the same fd, with the
    // same iovec counts and results; responses were requested one after another.
    let mut at = 0;
    for (path, policy, calls) in &reports {
        for want in calls {
            let found = kernel[at..].iter().position(|(_, got)| got == want);
            match found {
                Some(i) => at += i + 1,
                None => panic!(
                    "{path} ({policy}): the trace reports {want:?} but strace has no such call \
                     after index {at}; strace saw: {:?}",
                    kernel
                        .iter()
                        .skip(at)
                        .take(20)
                        .map(|(_, c)| c)
                        .collect::<Vec<_>>()
                ),
            }
        }
    }
    let checked: usize = reports.iter().map(|r| r.2.len()).sum();
    assert!(checked >= reports.len());
    eprintln!(
        "checked {checked} traced calls against {} calls strace logged",
        kernel.len()
    );
    // The vectored /blah response starts with one writev of 14 iovecs: the head, and the 1000
    // blocks as 13 references to the loop's repeated body (79 blocks, 32 KiB, each).
    let (_, _, vectored) = &reports[0];
    assert_eq!(vectored[0].name, "writev");
    assert_eq!(vectored[0].iovcnt, 14, "{vectored:?}");
    let (_, _, flat) = &reports[2];
    assert!(flat.iter().all(|c| c.iovcnt == 1), "{flat:?}");
    let (_, _, file) = &reports[4];
    assert!(file.iter().any(|c| c.name == "sendfile"), "{file:?}");
}

#[test]
fn strace_lines_parse() {
    assert_eq!(
        parse_strace_line(
            r#"writev(11, [{iov_base="HTTP/1.1 200 OK\r\n", iov_len=17}, {iov_base="x", iov_len=1}], 2) = 18"#
        ),
        Some(Call {
            name: "writev".into(),
            fd: 11,
            iovcnt: 2,
            result: 18
        })
    );
    assert_eq!(
        parse_strace_line("sendfile(11, 12, [0] => [218], 218) = 218"),
        Some(Call {
            name: "sendfile".into(),
            fd: 11,
            iovcnt: 1,
            result: 218
        })
    );
    assert_eq!(parse_strace_line("read(3, \"\", 10) = 0"), None);
    assert_eq!(
        parse_trace(
            "writev fd=11 iovcnt=5 bytes=1373\n  [0] len=1 addr=0x1 \"x\"\nsendfile fd=11 iovcnt=1 bytes=218\n"
        ),
        vec![
            Call {
                name: "writev".into(),
                fd: 11,
                iovcnt: 5,
                result: 1373
            },
            Call {
                name: "sendfile".into(),
                fd: 11,
                iovcnt: 1,
                result: 218
            },
        ]
    );
}
