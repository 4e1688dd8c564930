//! `galleon serve` and `galleon trace` end to end, as a user runs them.

mod serve_support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use galleon_http::Client;
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
fn pages_index_static_files_and_404s() {
    let s = ServeProcess::start(&[]);
    let mut c = client(&s);
    let index = c.get("/", &[]).unwrap();
    assert_eq!(index.status, 200);
    for page in [
        "blah",
        "blah-split",
        "doom",
        "static-strings",
        "dynamic-strings",
    ] {
        assert!(
            index.text().contains(&format!("<a href=\"/{page}\">")),
            "{page} missing from the index"
        );
    }
    // Data from site/data/teams.json.
    let teams = c.get("/teams", &[]).unwrap();
    assert_eq!(teams.status, 200);
    assert!(teams.text().contains("<h1>CSL"), "{}", teams.text());
    // Query assigns override data, JSON-parsed where possible.
    let teams = c.get("/teams?year=1999", &[]).unwrap();
    assert!(
        teams.text().contains("<h1>CSL 1999</h1>"),
        "{}",
        teams.text()
    );
    // The last of repeated names wins.
    let teams = c.get("/teams?year=1&year=1999", &[]).unwrap();
    assert!(teams.text().contains("<h1>CSL 1999</h1>"));
    let css = c.get("/static/site.css", &[]).unwrap();
    assert_eq!(css.status, 200);
    assert_eq!(
        css.body,
        std::fs::read(site_dir().join("static/site.css")).unwrap()
    );
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    for bad in [
        "/static/../Cargo.toml",
        "/static/%2e%2e/Cargo.toml",
        "/static/..%2fpages/blah.html.eex",
        "/static/%2e%2e%2f%2e%2e%2fCargo.toml",
        "/static/",
        "/static//etc/passwd",
        "/nope",
    ] {
        assert_eq!(c.get(bad, &[]).unwrap().status, 404, "{bad}");
    }
    assert_eq!(c.request("POST", "/blah", &[], b"x").unwrap().status, 405);
    // A template error is a 500 with the located message, not a crash.
    let r = c.get("/blah?iters=%22x%22", &[]).unwrap();
    assert_eq!(r.status, 500, "{}", r.text());
    assert_eq!(c.get("/blah?iters=2", &[]).unwrap().status, 200);
}

#[test]
fn strings_pages_reuse_or_scatter_the_same_pool() {
    let s = ServeProcess::start(&[]);
    let mut c = client(&s);
    let a = c.get("/static-strings?count=500", &[]).unwrap().text();
    let b = c.get("/dynamic-strings?count=500", &[]).unwrap().text();
    let distinct = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("<p>"))
            .collect::<std::collections::HashSet<_>>()
            .len()
    };
    assert_eq!(a.lines().filter(|l| l.starts_with("<p>")).count(), 500);
    assert_eq!(b.lines().filter(|l| l.starts_with("<p>")).count(), 500);
    assert!(distinct(&a) <= 16, "static-strings uses a small set");
    assert!(distinct(&b) > 400, "dynamic-strings scatters over the pool");
    assert_eq!(a.len(), b.len(), "same amount of output");
    // Past the 4 MiB whole-render limit the page is streamed, with the strings picked once.
    let big = c.get("/static-strings?count=100000", &[]).unwrap();
    assert_eq!(big.header("transfer-encoding"), Some("chunked"));
    let big = big.text();
    assert_eq!(
        big.lines().filter(|l| l.starts_with("<p>")).count(),
        100_000
    );
    assert!(distinct(&big) <= 16, "static-strings uses a small set");
}

#[test]
fn trace_command_prints_the_writes_of_one_response() {
    let s = ServeProcess::start(&[]);
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
    // A server without the endpoint is reported as such.
    let s2 = ServeProcess::start(&["--trace-endpoint", "off"]);
    let out = galleon()
        .args(["trace", "/blah?iters=1", "--addr", &s2.addr.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trace-endpoint on"));
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
        let n = sock.read(&mut buf).unwrap();
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
