//! `galleon serve` and `galleon trace` end to end, as a user runs them: what needs the process
//! (the `render` and `trace` commands, stderr, CPU time and memory of the server, signals, flag
//! errors, the open-file limit). The site's pages are tested in-process in
//! `crates/site/tests/pages.rs`.

mod serve_support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use galleon_client::Client;
use serve_support::{ServeProcess, cpu_ticks, galleon, site_dir, status_kib};

fn client(s: &ServeProcess) -> Client {
    Client::connect(s.addr, Duration::from_secs(30)).unwrap()
}

#[test]
fn blah_is_byte_identical_to_galleon_render() {
    let s = ServeProcess::start(&[]);
    let mut c = client(&s);
    let rendered = galleon()
        .args(["render"])
        .arg(site_dir().join("pages/blah.html.eex"))
        .args(["--assign", "iters=1000"])
        .output()
        .unwrap();
    assert!(rendered.status.success());
    for policy in ["default", "flatten", "vectored"] {
        let r = c
            .get("/blah?iters=1000", &[("x-galleon-write-policy", policy)])
            .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("410000"));
        assert!(r.body == rendered.stdout, "policy {policy}: bodies differ");
    }
    // blah-split renders the same bytes.
    let split = c.get("/blah-split?iters=1000", &[]).unwrap();
    assert!(split.body == rendered.stdout);
}

#[test]
fn trace_command_prints_the_writes_of_one_response() {
    let s = ServeProcess::start(&["--trace-endpoint", "on"]);
    let addr = s.addr.to_string();
    let out = galleon()
        .args([
            "trace",
            "/blah?iters=10",
            "--addr",
            &addr,
            "--write-policy",
            "vectored",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("# GET /blah?iters=10 -> 200"));
    let call = lines.next().unwrap();
    // The head, and the ten 410-byte blocks as one reference to the loop's repeated body:
    // 2 iovecs, nothing copied.
    assert!(call.starts_with("writev fd="), "{text}");
    assert!(call.contains(" iovcnt=2 bytes="), "{text}");
    assert_eq!(text.matches(" len=4100 ").count(), 1, "{text}");
    assert!(text.contains("\nsummary: syscalls=1 iovecs=2 "), "{text}");
    assert!(text.contains(" copied=0 "), "{text}");
    assert!(
        text.ends_with("response: status=200 body_bytes=4100\n"),
        "{text}"
    );
    // A server without the endpoint (the default, even on loopback: regression, issue 13
    // class 3) is reported as such.
    let s2 = ServeProcess::start(&[]);
    let out = galleon()
        .args(["trace", "/blah?iters=1", "--addr", &s2.addr.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trace-endpoint on"));
}

/// `--value-copy-below`: the pool's 65-byte strings are copied into the render's buffer by
/// default (a few iovecs for the page), referenced one by one under `--value-copy-below 0`; the
/// bytes are the same.
#[test]
fn value_copy_threshold_is_a_flag() {
    let iovecs = |extra: &[&str]| {
        let mut args = vec!["--trace-endpoint", "on"];
        args.extend_from_slice(extra);
        let s = ServeProcess::start(&args);
        let out = galleon()
            .args([
                "trace",
                "/static-strings?count=40",
                "--addr",
                &s.addr.to_string(),
                "--write-policy",
                "vectored",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let n = text
            .split(" iovecs=")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse::<usize>().ok());
        n.unwrap_or_else(|| panic!("no iovec count in {text}"))
    };
    let copied = iovecs(&[]);
    let referenced = iovecs(&["--value-copy-below", "0"]);
    assert!(copied <= 4, "{copied} iovecs with the strings copied");
    assert!(
        referenced >= 40,
        "{referenced} iovecs with the strings referenced"
    );
}

/// `--max-whole-pages` reaches the pages: at 0 a page of 64 KiB or more is streamed even with
/// no slow reader holding anything, while by default it is sent whole.
#[test]
fn the_whole_pages_budget_is_a_flag() {
    let framing = |extra: &[&str]| {
        let s = ServeProcess::start(extra);
        let r = client(&s).get("/blah?iters=1000", &[]).unwrap();
        assert_eq!(r.status, 200);
        (
            r.header("content-length").is_some(),
            r.header("transfer-encoding").map(str::to_owned),
            r.body.len(),
        )
    };
    let (whole, _, len) = framing(&[]);
    assert!(
        whole && len > 64 * 1024,
        "sent whole by default ({len} bytes)"
    );
    let (whole, chunked, streamed_len) = framing(&["--max-whole-pages", "0"]);
    assert!(!whole);
    assert_eq!(chunked.as_deref(), Some("chunked"));
    assert_eq!(streamed_len, len, "the same page");
}

#[test]
fn trace_writes_logs_every_call() {
    let s = ServeProcess::start(&["--trace-writes", "--write-policy", "vectored"]);
    let mut c = client(&s);
    c.get("/blah?iters=3", &[]).unwrap();
    let start = Instant::now();
    while !s.stderr().contains("iovcnt=2") && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = s.stderr();
    let line = log.lines().find(|l| l.starts_with("writev fd=")).unwrap();
    // The head, and one 1,230-byte reference for the three blocks.
    assert!(line.contains(" iovcnt=2 bytes="), "{log}");
    assert_eq!(log.matches(" len=1230 addr=0x").count(), 1, "{log}");
}

#[test]
fn a_client_leaving_mid_doom_stops_the_render() {
    let s = ServeProcess::start(&[]);
    let mut sock = std::net::TcpStream::connect(s.addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The full Template of Doom: 30 GB if nobody stops it.
    sock.write_all(b"GET /doom HTTP/1.1\r\nhost: t\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0usize;
    while got < 20 << 20 {
        let n = galleon_client::read_some(&mut sock, &mut buf).unwrap();
        assert!(n > 0);
        got += n;
    }
    drop(sock);
    // Give the server a moment to notice, then it must be idle: a render still running would
    // burn a whole core.
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_ticks(s.pid());
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(s.pid()) - before;
    // Clock ticks are 1/100 s: a spinning render would use about 100 in that second.
    assert!(used < 20, "server used {used} ticks after the client left");
    // And it still serves.
    assert_eq!(client(&s).get("/blah?iters=1", &[]).unwrap().status, 200);
}

#[test]
fn doom_streams_in_bounded_memory() {
    let s = ServeProcess::start(&[]);
    let mut c = client(&s);
    let base = status_kib(s.pid(), "VmRSS");
    // 1,000,000 iterations of 301 bytes (a newline and 15 lines of 20): 301 MB, chunked.
    struct Count(u64, u64);
    impl Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            self.1 += b.iter().filter(|&&c| c == b'\n').count() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0, 0);
    let r = c
        .request_to("GET", "/doom?iters=1000000", &[], &mut count)
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(count.0, 301_000_000);
    assert_eq!(count.1, 16_000_000);
    let peak = status_kib(s.pid(), "VmHWM");
    assert!(
        peak < base + 32 * 1024,
        "RSS grew from {base} KiB to a peak of {peak} KiB"
    );
}

#[test]
fn sigterm_shuts_down_gracefully() {
    let mut s = ServeProcess::start(&[]);
    let addr = s.addr;
    let mut c = client(&s);
    assert_eq!(c.get("/blah?iters=1", &[]).unwrap().status, 200);
    let pid = s.pid();
    let status = s.terminate(pid).expect("server did not exit after SIGTERM");
    assert!(status.success(), "{status:?}: {}", s.stderr());
    assert!(s.stderr().contains("shutting down"));
    assert!(std::net::TcpStream::connect(addr).is_err());
}

/// One worker is a current-thread runtime (the start-up line says so), and serves as many do: a
/// page, a compiled page, a streamed page, pipelined requests; SIGTERM still stops it cleanly.
/// `--runtime multi-thread` keeps the multi-thread runtime.
#[test]
fn one_worker_runs_a_current_thread_runtime() {
    let mut s = ServeProcess::start(&["--threads", "1"]);
    let pid = s.pid();
    assert!(
        s.stderr().contains("(1 worker, current-thread runtime, "),
        "{}",
        s.stderr()
    );
    let mut c = client(&s);
    assert_eq!(c.get("/blah?iters=10", &[]).unwrap().body.len(), 4100);
    assert_eq!(
        c.get("/compiled/blah?iters=10", &[]).unwrap().body.len(),
        4100
    );
    let doom = c.get("/doom?iters=20000", &[]).unwrap();
    assert_eq!(doom.status, 200);
    assert!(doom.body.len() > 1_000_000, "{}", doom.body.len());
    let mut raw = std::net::TcpStream::connect(s.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    raw.write_all(b"GET /blah?iters=1 HTTP/1.1\r\nhost: t\r\n\r\nGET /blah?iters=2 HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).unwrap();
    assert_eq!(answer.matches("HTTP/1.1 200 OK").count(), 2, "{answer}");
    let status = s.terminate(pid).expect("server did not exit after SIGTERM");
    assert!(status.success(), "{status:?}: {}", s.stderr());

    let s = ServeProcess::start(&["--threads", "1", "--runtime", "multi-thread"]);
    assert!(
        s.stderr().contains("(1 worker, multi-thread runtime, "),
        "{}",
        s.stderr()
    );
    assert_eq!(client(&s).get("/blah?iters=10", &[]).unwrap().status, 200);
}

/// Regression: a line written after the reader of stderr went away (a supervisor that stops
/// reading, a test that reads to the "serving" line and closes its pipe) panicked on the broken
/// pipe, so SIGTERM ended the server with a panic instead of a clean stop. What galleon prints
/// is advice; a stderr nobody reads must not stop it.
#[test]
fn a_closed_stderr_does_not_stop_the_server() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = galleon()
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--events",
            "off",
            "--site",
        ])
        .arg(site_dir())
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr: std::net::SocketAddr = loop {
        let line = lines
            .next()
            .expect("stderr ended before the serving line")
            .unwrap();
        if let Some(rest) = line.split("at http://").nth(1) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    };
    drop(lines);
    let mut c = Client::connect(addr, Duration::from_secs(30)).unwrap();
    assert_eq!(c.get("/blah?iters=1", &[]).unwrap().status, 200);
    drop(c);
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("galleon serve did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

/// Regression: `--header-timeout 1e19` was accepted, and then every connection task panicked
/// on the deadline arithmetic. Out-of-range durations and sizes are refused at start, with the
/// flag named, before anything listens.
#[test]
fn out_of_range_durations_and_sizes_are_refused_at_start() {
    for (args, expect) in [
        (
            ["--header-timeout", "1e19"],
            "--header-timeout must be more than 0 seconds",
        ),
        (
            ["--idle-timeout", "0"],
            "--idle-timeout must be more than 0 seconds",
        ),
        (
            ["--idle-timeout=-3", "--trace-endpoint=off"],
            "--idle-timeout must be more than 0 seconds",
        ),
        (
            ["--header-timeout", "NaN"],
            "--header-timeout must be more than 0 seconds",
        ),
        (
            ["--events-keep-alive", "1e300"],
            "--events-keep-alive must be more than 0 seconds",
        ),
        (["--chunk-bytes", "0"], "--chunk-bytes 0: expected 1 to"),
        (["--full-body-max", "0"], "--full-body-max 0: expected 1 to"),
        (["--max-template-steps", "0"], "--max-template-steps 0"),
        (
            ["--max-partial-depth", "65"],
            "--max-partial-depth 65: expected 1 to 64",
        ),
        (
            ["--max-append-events", "0"],
            "--max-append-events 0: expected 1 to 10000",
        ),
        (
            ["--max-read-limit", "10001"],
            "--max-read-limit 10001: expected 1 to 10000",
        ),
        (
            ["--events-subscriber-buffer", "0"],
            "--events-subscriber-buffer 0: expected 1 to 65536",
        ),
        (
            ["--events-tail-batch", "499"],
            "--events-tail-batch 499: expected 500 to 10000 events",
        ),
        (
            ["--events-max-subscriptions", "0"],
            "--events-max-subscriptions 0: expected at least 1",
        ),
        (
            ["--sqlite-reader-threads", "0"],
            "--sqlite-reader-threads 0: expected 1 to 256",
        ),
        (
            ["--offload", "sometimes"],
            "invalid value 'sometimes' for '--offload",
        ),
        (["--offload-queue", "0"], "--offload-queue 0: expected 1 to"),
        (
            ["--offload-nice", "20"],
            "--offload-nice 20: expected 0 to 19",
        ),
        (
            ["--offload-threads", "5000"],
            "--offload-threads 5000: expected 0",
        ),
        (
            ["--max-seal-bytes", "0"],
            "--max-seal-bytes 0: expected 1 to",
        ),
        (
            ["--max-hash-cost", "1001"],
            "--max-hash-cost 1001: expected 1 to 1000",
        ),
        (["--max-connections", "0"], "--max-connections 0"),
        (["--max-head-bytes", "10"], "--max-head-bytes 10: expected"),
        (["--max-headers", "0"], "--max-headers 0: expected"),
        (
            ["--stream-unsent", "100000000"],
            "--stream-unsent 100000000: expected 0",
        ),
        (
            ["--stream-unsent-max", "100000000"],
            "--stream-unsent-max 100000000: expected 0",
        ),
        (
            ["--pipeline-batch", "20000000"],
            "--pipeline-batch 20000000: expected 0",
        ),
        (
            ["--bulk-writers", "5000"],
            "--bulk-writers 5000: expected 0",
        ),
        (
            ["--bulk-priority", "low"],
            "invalid value 'low' for '--bulk-priority",
        ),
        (
            ["--write-timeout", "0"],
            "--write-timeout must be more than 0 seconds",
        ),
        (
            ["--body-timeout", "1e19"],
            "--body-timeout must be more than 0 seconds",
        ),
        (
            ["--shutdown-grace", "inf"],
            "--shutdown-grace must be more than 0 seconds",
        ),
    ] {
        let mut child = galleon()
            .arg("serve")
            .arg("--site")
            .arg(site_dir())
            .args(["--addr", "127.0.0.1:0", "--events", "off"])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if start.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?} was accepted: the server started");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(!status.success(), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Regression (issue 13, class 13): the default of 4,096 connections is above the usual
/// open-file limit of 1,024; when descriptors ran out, new clients hung with no answer and the
/// log got a warning every 100 ms. The server now fits its connection cap under the limit (and
/// says so), so clients past it get 503 at once, and it serves again once they leave.
#[test]
fn connections_fit_under_the_open_file_limit() {
    let s =
        ServeProcess::start_wrapped(&["prlimit", "--nofile=128:128", "--"], &["--events", "off"]);
    assert!(
        s.stderr()
            .contains("lowered to 64 to fit the open-file limit of 128"),
        "{}",
        s.stderr()
    );
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..100 {
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET /blah?iters=1 HTTP/1.1\r\nhost: t\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 64];
        let n = galleon_client::read_some(&mut c, &mut buf)
            .expect("every client gets an answer, none hangs");
        let head = String::from_utf8_lossy(&buf[..n]).into_owned();
        if head.starts_with("HTTP/1.1 503") {
            refused += 1;
        } else {
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            open.push(c);
        }
    }
    assert!(refused >= 30, "{refused} refused");
    assert!(open.len() >= 50, "{} served", open.len());
    drop(open);
    std::thread::sleep(Duration::from_millis(300));
    let mut c = client(&s);
    assert_eq!(c.get("/blah?iters=1", &[]).unwrap().status, 200);
}
