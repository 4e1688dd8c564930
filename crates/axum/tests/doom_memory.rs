//! A long Doom through axum in bounded memory: 301 MB streamed from the example site while this
//! process's peak RSS (`VmHWM`: server and client together, in a test binary of its own so no
//! other test's allocations count) grows by less than 32 MB. Flattening the page instead would
//! take 301 MB.

#[path = "../examples/site/app.rs"]
#[allow(dead_code)]
mod app;

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use galleon_client::Client;

/// Peak resident set size of this process, in bytes (Linux: `VmHWM` in `/proc/self/status`).
fn vm_hwm() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// Checks every byte against the page's repeated 301-byte block, keeping nothing.
struct Check {
    block: Vec<u8>,
    seen: u64,
}

impl Write for Check {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for (i, b) in buf.iter().enumerate() {
            let at = ((self.seen + i as u64) % self.block.len() as u64) as usize;
            if *b != self.block[at] {
                return Err(io::Error::other(format!(
                    "byte {} differs",
                    self.seen + i as u64
                )));
            }
        }
        self.seen += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_301_mb_doom_streams_in_bounded_memory() {
    const ITERS: u64 = 1_000_000;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site");
    let router = app::router(&dir).unwrap();
    let block = app::engine(&dir)
        .unwrap()
        .render_with("pages/doom.html.eex", |k| {
            (k == "iters").then_some(galleon_axum::Value::Int(1))
        })
        .unwrap()
        .to_vec();
    assert_eq!(block.len(), 301);

    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut client = Client::connect(addr, Duration::from_secs(120)).unwrap();
    // Warm up: the runtime, the blocking pool's threads, the connection, one streamed page.
    let mut warm = Check {
        block: block.clone(),
        seen: 0,
    };
    client
        .request_to("GET", "/doom?iters=20000", &[], &mut warm)
        .unwrap();
    assert_eq!(warm.seen, 20_000 * 301);

    let before = vm_hwm();
    let mut check = Check { block, seen: 0 };
    let r = client
        .request_to("GET", &format!("/doom?iters={ITERS}"), &[], &mut check)
        .unwrap();
    let growth = vm_hwm().saturating_sub(before);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(check.seen, ITERS * 301);
    eprintln!(
        "301 MB doom: peak RSS {:.1} MiB before, grew {:.1} MiB",
        before as f64 / 1048576.0,
        growth as f64 / 1048576.0
    );
    assert!(
        growth < 32 << 20,
        "peak RSS grew {growth} bytes streaming a 301 MB page"
    );
}
