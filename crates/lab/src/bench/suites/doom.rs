//! The http suite's `/doom` rows: the Template of Doom streamed by a fresh child `galleon serve`
//! against a raw sender in this process (the same 301-byte block, pre-flattened about 1 MiB at a
//! time, blocking `write`s: the floor any server streaming it has to beat), downloads in
//! interleaved turns by one blocking reader, 127.0.0.1 only. The ratio of the two in each round
//! is a guarded benchmark: `galleon bench compare` flags a drop beyond its noise, which a
//! machine's speed does not move, since both sides run on it in the same minute.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::child::Server;
use crate::bench::measure::{Collector, Ctx, rotation};

/// How long one read of a download may wait.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The raw sender's buffer: whole blocks, about 1 MiB, so each `write` is one large copy.
const RAW_BUFFER: usize = 1 << 20;
/// The reader's buffer (what curl reads with is smaller; this one is never the bottleneck).
const READ_BUFFER: usize = 1 << 20;
/// Largest response head accepted.
const MAX_HEAD: usize = 16 * 1024;

/// The floor: answers `GET ...?iters=N` with a `content-length` head and the block N times,
/// one thread per connection, until dropped.
struct RawSender {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl RawSender {
    /// Listens on `addr` (`127.0.0.1:0`: a port the kernel picks) and sends `block`.
    fn start(addr: &str, block: Vec<u8>) -> anyhow::Result<RawSender> {
        if block.is_empty() {
            bail!("the raw sender needs a block of at least one byte");
        }
        let listener =
            TcpListener::bind(addr).with_context(|| format!("binding the raw sender to {addr}"))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let per_buffer = (RAW_BUFFER / block.len()).max(1);
        let buffer: Arc<[u8]> = block.repeat(per_buffer).into();
        let block_len = block.len();
        let stopping = stop.clone();
        let acceptor = std::thread::Builder::new()
            .name("bench-raw-sender".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let buffer = buffer.clone();
                    let _ = std::thread::Builder::new()
                        .name("bench-raw-conn".into())
                        .spawn(move || {
                            let _ = raw_serve(conn, &buffer, block_len);
                        });
                }
            })?;
        Ok(RawSender {
            addr,
            stop,
            acceptor: Some(acceptor),
        })
    }
}

/// `galleon bench --raw-sender ADDR BLOCK_FILE` (for `bench/http.sh`): the raw sender on `addr`
/// until the process is killed.
pub(super) fn serve_raw(addr: &str, block_file: &Path) -> anyhow::Result<()> {
    let block = std::fs::read(block_file)
        .with_context(|| format!("reading the block {}", block_file.display()))?;
    let mut raw = RawSender::start(addr, block)?;
    eprintln!("galleon bench: raw sender at http://{}/", raw.addr);
    if let Some(t) = raw.acceptor.take() {
        let _ = t.join();
    }
    Ok(())
}

impl Drop for RawSender {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

/// One raw-sender connection: requests until the client closes.
fn raw_serve(conn: TcpStream, buffer: &[u8], block_len: usize) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let iters: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|t| t.split("iters=").nth(1))
            .and_then(|v| v.split('&').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h == "\r\n" {
                break;
            }
        }
        let per_buffer = (buffer.len() / block_len) as u64;
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\r\n",
            iters * block_len as u64
        )?;
        let mut left = iters;
        while left >= per_buffer {
            out.write_all(buffer)?;
            left -= per_buffer;
        }
        out.write_all(&buffer[..left as usize * block_len])?;
    }
}

/// A response read whole: its status, its body's bytes (chunk framing not counted).
struct Download {
    status: u16,
    body_bytes: u64,
}

/// Sends `GET path` with `connection: close` and reads the answer to its end: `content-length`
/// bytes, or a chunked body to the server's close, checked to end with the last chunk. `keep`
/// keeps the body (for a small one), else it is read and dropped.
fn download(addr: SocketAddr, path: &str, keep: Option<&mut Vec<u8>>) -> anyhow::Result<Download> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nuser-agent: galleon-bench\r\nconnection: close\r\n\r\n"
    )?;
    let mut buf = vec![0u8; READ_BUFFER];
    let mut head = Vec::new();
    let head_end = loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > MAX_HEAD {
            bail!("response head over {MAX_HEAD} bytes");
        }
        let n = s.read(&mut buf).context("reading the response head")?;
        if n == 0 {
            bail!("the server closed before a whole head");
        }
        head.extend_from_slice(&buf[..n]);
    };
    let text = std::str::from_utf8(&head[..head_end]).context("response head not UTF-8")?;
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status in the response")?;
    let header = |name: &str| {
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_owned())
    };
    let already = &head[head_end..];
    let mut keep = keep;
    if let Some(k) = keep.as_deref_mut() {
        k.extend_from_slice(already);
    }
    if let Some(len) = header("content-length") {
        let len: u64 = len.parse().context("a bad content-length")?;
        let mut left = len
            .checked_sub(already.len() as u64)
            .context("more bytes than the response's length")?;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let n = s.read(&mut buf[..want]).context("reading the body")?;
            if n == 0 {
                bail!("the server closed {left} bytes before the body's end");
            }
            if let Some(k) = keep.as_deref_mut() {
                k.extend_from_slice(&buf[..n]);
            }
            left -= n as u64;
        }
        return Ok(Download {
            status,
            body_bytes: len,
        });
    }
    if !header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        bail!("a body with neither content-length nor chunked framing");
    }
    // Chunked to the close: count what came, and keep the last bytes to check the ending.
    let mut total = already.len() as u64;
    let mut tail: Vec<u8> = already.to_vec();
    loop {
        let n = s.read(&mut buf).context("reading the streamed body")?;
        if n == 0 {
            break;
        }
        total += n as u64;
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 64 {
            tail.drain(..tail.len() - 64);
        }
    }
    if !tail.ends_with(b"\r\n0\r\n\r\n") {
        bail!("the streamed body was cut before its last chunk ({total} bytes came)");
    }
    let _ = s.shutdown(Shutdown::Both);
    Ok(Download {
        status,
        body_bytes: total,
    })
}

/// Downloads `path` from `addr`, checking the status and the body's size; MB/s (MiB).
fn timed(addr: SocketAddr, path: &str, least: u64) -> anyhow::Result<f64> {
    let t = Instant::now();
    let d = download(addr, path, None)?;
    let secs = t.elapsed().as_secs_f64();
    if d.status != 200 {
        bail!("{path} answered {}", d.status);
    }
    if d.body_bytes < least {
        bail!("{path} sent {} bytes, expected {least}", d.body_bytes);
    }
    Ok(least as f64 / secs.max(1e-9) / (1024.0 * 1024.0))
}

/// The names of the rows for a download of `iters` iterations.
struct Names {
    galleon: String,
    cpu: String,
    raw: String,
    ratio: String,
    rss: String,
}

fn names(iters: u64, bytes: u64) -> Names {
    let what = format!("GET /doom?iters={iters} ({})", human(bytes));
    Names {
        galleon: format!("{what} throughput"),
        cpu: format!("{what} server CPU"),
        raw: format!("{what} raw sender throughput"),
        ratio: format!("{what} vs raw sender"),
        rss: format!("{what} server peak RSS"),
    }
}

/// `3.0 GB`, `90 MB`.
fn human(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.1} GB", bytes as f64 / 1e9)
    } else {
        format!("{} MB", bytes / 1_000_000)
    }
}

/// The number of measurements [`run`] makes in `rounds` rounds, for the progress bar.
pub(super) fn steps(rounds: usize) -> usize {
    2 * (rounds + 1) + 1
}

/// Runs the `/doom` rows: a fresh child server, the raw sender, `rounds` interleaved rounds
/// (after one warm-up round that is not kept), then the child's peak RSS.
pub(super) fn run(
    ctx: &Ctx,
    site: &Path,
    rounds: usize,
    out: &mut Collector,
) -> anyhow::Result<()> {
    let iters: u64 = ctx.pick(10_000_000, 300_000);
    let server = Server::start(site, None)?;
    let mut block = Vec::new();
    let one = download(server.addr, "/doom?iters=1", Some(&mut block))?;
    if one.status != 200 || block.is_empty() {
        bail!(
            "/doom?iters=1 answered {} with {} bytes",
            one.status,
            block.len()
        );
    }
    let bytes = iters * block.len() as u64;
    let raw = RawSender::start("127.0.0.1:0", block)?;
    ctx.step("/doom: servers started");
    let n = names(iters, bytes);
    out.declare(&n.galleon, "MiB/s", false);
    out.declare(&n.raw, "MiB/s", false);
    out.declare_guarded(&n.ratio, "x raw sender", false);
    out.declare(&n.cpu, "cpu ns/KiB", true);
    out.declare(&n.rss, "MiB", true);
    let path = format!("/doom?iters={iters}");
    for round in 0..=rounds {
        // The warm-up round downloads a tenth.
        let (path, least) = if round == 0 {
            (format!("/doom?iters={}", iters / 10), bytes / 10)
        } else {
            (path.clone(), bytes)
        };
        let mut speeds = [0.0f64; 2];
        let mut cpu = 0.0;
        for i in rotation(round, 2) {
            if i == 0 {
                let before = server.cpu_secs()?;
                speeds[0] = timed(server.addr, &path, least).context("galleon's /doom")?;
                cpu = server.cpu_secs()? - before;
                ctx.step("/doom: galleon");
            } else {
                speeds[1] = timed(raw.addr, &path, least).context("the raw sender")?;
                ctx.step("/doom: raw sender");
            }
        }
        if round > 0 {
            out.push(&n.galleon, "MiB/s", false, speeds[0]);
            out.push(&n.raw, "MiB/s", false, speeds[1]);
            out.push(&n.ratio, "x raw sender", false, speeds[0] / speeds[1]);
            out.push(
                &n.cpu,
                "cpu ns/KiB",
                true,
                cpu * 1e9 / (least as f64 / 1024.0),
            );
        }
    }
    out.push(&n.rss, "MiB", true, server.peak_rss_mib()?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_sender_answers_n_blocks_with_their_length() {
        let raw = RawSender::start("127.0.0.1:0", b"<p>doom</p>\n".to_vec()).unwrap();
        let mut body = Vec::new();
        let d = download(raw.addr, "/doom?iters=100000", Some(&mut body)).unwrap();
        assert_eq!((d.status, d.body_bytes), (200, 1_200_000));
        assert_eq!(body, b"<p>doom</p>\n".repeat(100_000));
        // Keep-alive: a second request on another connection, after the first.
        let d = download(raw.addr, "/x?iters=3", None).unwrap();
        assert_eq!(d.body_bytes, 36);
    }

    #[test]
    fn a_chunked_body_cut_before_its_last_chunk_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for (i, conn) in listener.incoming().take(2).enumerate() {
                let mut conn = conn.unwrap();
                // The whole request is read first: a close with unread bytes would be a reset.
                let mut req = Vec::new();
                let mut byte = [0u8; 1];
                while !req.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
                    req.push(byte[0]);
                }
                let end = if i == 0 { "0\r\n\r\n" } else { "" };
                let r = format!(
                    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n{end}"
                );
                conn.write_all(r.as_bytes()).unwrap();
            }
        });
        let d = download(addr, "/", None).unwrap();
        assert_eq!(d.status, 200);
        let e = download(addr, "/", None).err().unwrap().to_string();
        assert!(e.contains("cut before its last chunk"), "{e}");
        server.join().unwrap();
    }
}
