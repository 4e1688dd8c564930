//! `galleon bench cache` through the built binary, without its long measurements: the suite is
//! known but not part of a default run, its callgrind child (`--cache-probe`) runs a small spec
//! natively and refuses bad ones cleanly, and the BEAM peer's seed pages (when `erl` is here)
//! send exactly the bytes of galleon's `/static-strings` and `/dynamic-strings`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn galleon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_galleon"))
        .args(args)
        .output()
        .expect("running galleon")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Kills and reaps a child when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_cache_suite_is_known_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let o = galleon(&[
        "bench",
        "--quick",
        "nosuch",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cache"), "{}", stderr(&o));
}

#[test]
fn the_probe_runs_a_small_spec_and_refuses_bad_ones_cleanly() {
    let o = galleon(&[
        "bench",
        "--cache-probe",
        "sets=4096,65536;warm=1;n=2;touch=65536",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (spec, what) in [
        ("sets=0;warm=1;n=1;touch=0", "set of 0 bytes"),
        ("sets=4096;warm=1;n=0;touch=0", "n 1 to"),
        ("sets=4096;warm=1;n=1", "no touch"),
        ("sets=2147483648;warm=1;n=1;touch=0", "1 to 1073741824"),
        ("nonsense", "not key=value"),
    ] {
        let o = galleon(&["bench", "--cache-probe", spec]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{spec} accepted");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.lines()
                .any(|l| l.starts_with("error:") && l.contains(what)),
            "{spec}: {what:?} not in {err}"
        );
    }
}

/// Reads one response to `GET path` on a keep-alive connection: its body.
fn get(s: &mut TcpStream, path: &str) -> Vec<u8> {
    write!(s, "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").unwrap();
    let mut r = BufReader::new(s);
    let mut len = None;
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{path}: {status}");
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; len.expect("content-length")];
    r.read_exact(&mut body).unwrap();
    body
}

/// Waits until something accepts on `addr`.
fn connect(addr: SocketAddr) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(e) if Instant::now() > deadline => panic!("{addr}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[test]
fn the_beam_peer_sends_galleons_exact_bytes_for_the_seed_pages() {
    let has = |tool: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !has("erl") || !has("erlc") {
        eprintln!("skipped: no erl/erlc (Debian: apt-get install erlang-nox)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let beams = tempfile::tempdir().unwrap();
    let st = Command::new("erlc")
        .arg("-o")
        .arg(beams.path())
        .arg(root.join("bench/peers/beam_peer.erl"))
        .status()
        .unwrap();
    assert!(st.success());
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let _beam = Reaped(
        Command::new("erl")
            .args(["-noshell", "-pa"])
            .arg(beams.path())
            .args(["-eval", &format!("beam_peer:start({port})")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut serve = Command::new(env!("CARGO_BIN_EXE_galleon"))
        .arg("serve")
        .arg("--site")
        .arg(root.join("site"))
        .args(["--addr", "127.0.0.1:0", "--events", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = serve.stderr.take().unwrap();
    let _serve = Reaped(serve);
    let mut addr = None;
    for line in BufReader::new(log).lines().map_while(Result::ok) {
        if let Some(rest) = line.split(" at http://").nth(1) {
            addr = rest.split('/').next().and_then(|a| a.parse().ok());
            break;
        }
    }
    let mut g = connect(addr.expect("galleon's address"));
    let mut b = connect(SocketAddr::from(([127, 0, 0, 1], port)));
    for count in [0, 1, 500] {
        let static_page = get(&mut g, &format!("/static-strings?count={count}"));
        let dynamic_page = get(&mut g, &format!("/dynamic-strings?count={count}"));
        assert_eq!(static_page.len(), dynamic_page.len());
        for page in ["static", "dynamic", "fixed"] {
            let body = get(&mut b, &format!("/{page}?count={count}"));
            assert_eq!(body.len(), static_page.len(), "/{page}?count={count}");
            // The same template around the strings.
            assert_eq!(body[..80], static_page[..80], "/{page}");
            assert_eq!(
                body[body.len() - 80..],
                static_page[static_page.len() - 80..]
            );
        }
    }
    assert_eq!(
        get(&mut b, "/static").len(),
        get(&mut g, "/static-strings").len()
    );
}
