//! A bounded request fuzz pass: arbitrary bytes and mutated requests at the socket, in random
//! pieces; afterwards the server must still answer, and every response it sent must be well
//! formed. Deterministic (fixed seed) so a failure reproduces.

mod common;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Probes, TestServer, test_router};
use galleon_client::Client;
use galleon_http::ServerConfig;

/// Connections opened by the fuzz pass: enough to hit every parser state many times, few enough
/// to finish in a couple of seconds on a loaded 2-core machine.
const CASES: usize = 600;

/// Wall-clock bound on the whole pass.
const TIME_LIMIT: Duration = Duration::from_secs(60);

/// xorshift64*: a tiny deterministic generator, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SEEDS: &[&[u8]] = &[
    b"GET /hello HTTP/1.1\r\nhost: t\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\n\r\nhello",
    b"POST /echo HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HEAD /big?n=3 HTTP/1.1\r\nhost: t\r\n\r\n",
    b"GET /stream?n=2 HTTP/1.0\r\n\r\n",
    b"GET /%zz/../?a=%ff&&=&b HTTP/1.1\r\nhost: t\r\nexpect: 100-continue\r\n\r\n",
];

const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b" ",
    b":",
    b"\0",
    b"\xff",
    b"content-length: 99999999999\r\n",
    b"transfer-encoding: chunked\r\n",
    b"ffffffffffffffff\r\n",
    b"0\r\n\r\n",
    b"HTTP/1.1",
    b"connection: close\r\n",
    b"%",
    b"?",
    b"GET ",
    b"/",
    b"\t",
];

fn mutate(rng: &mut Rng) -> Vec<u8> {
    match rng.below(4) {
        0 => {
            let n = rng.below(300);
            (0..n).map(|_| rng.next() as u8).collect()
        }
        _ => {
            let mut v = SEEDS[rng.below(SEEDS.len())].to_vec();
            for _ in 0..1 + rng.below(6) {
                let at = rng.below(v.len() + 1);
                match rng.below(4) {
                    0 => {
                        v.insert(at.min(v.len()), rng.next() as u8);
                    }
                    1 if at < v.len() => {
                        v.remove(at);
                    }
                    2 => {
                        let t = TOKENS[rng.below(TOKENS.len())];
                        v.splice(at..at, t.iter().copied());
                    }
                    _ => {
                        // Duplicate a slice (pipelining, repeated headers).
                        let a = rng.below(v.len() + 1);
                        let b = (a + rng.below(64)).min(v.len());
                        let piece = v[a..b].to_vec();
                        v.splice(at..at, piece);
                    }
                }
            }
            v
        }
    }
}

#[test]
fn arbitrary_bytes_never_kill_the_server() {
    let mut config = ServerConfig::default();
    config.limits.header_read_timeout = Duration::from_millis(200);
    config.limits.idle_timeout = Duration::from_millis(200);
    config.limits.max_body_bytes = 64 * 1024;
    let s = TestServer::start(test_router(Arc::new(Probes::default()), None), config);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = Instant::now();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for case in 0..CASES {
        if start.elapsed() > TIME_LIMIT {
            panic!("fuzz pass exceeded {TIME_LIMIT:?} at case {case}");
        }
        let input = mutate(&mut rng);
        let mut c = s.connect();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Send in 1-3 pieces to exercise partial parses.
        let mut rest = &input[..];
        let pieces = 1 + rng.below(3);
        for p in 0..pieces {
            let n = if p + 1 == pieces {
                rest.len()
            } else {
                rng.below(rest.len() + 1)
            };
            if c.write_all(&rest[..n]).is_err() {
                break;
            }
            rest = &rest[n..];
        }
        let _ = c.shutdown(std::net::Shutdown::Write);
        let out = common::read_to_close(&mut c);
        if !out.is_empty() {
            assert!(
                out.starts_with("HTTP/1.1 "),
                "case {case}: reply does not start with a status line: {out:?} for {input:?}"
            );
            *statuses.entry(common::status_of(&out)).or_default() += 1;
        }
    }
    eprintln!("fuzz: {CASES} cases, statuses {statuses:?}");
    // The pass must have reached both the handlers and the error paths.
    assert!(statuses.contains_key(&200), "{statuses:?}");
    assert!(statuses.contains_key(&400), "{statuses:?}");
    s.assert_alive();
    let mut c = Client::connect(s.addr, Duration::from_secs(5)).unwrap();
    assert_eq!(
        c.request("POST", "/echo", &[], b"still here").unwrap().body,
        b"still here"
    );
}
