//! `raw-sender ADDR BLOCK_FILE`: the floor for `/doom` in `bench/http.sh`. For each request
//! `GET /anything?iters=N` it writes a `content-length` head and then BLOCK_FILE's bytes N times,
//! from one pre-flattened buffer of whole blocks (about 1 MiB) with plain blocking `write`s: no
//! rendering, no chunk framing, no async runtime. One thread per connection.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};

/// Size of the pre-flattened buffer: about 1 MiB of whole blocks, so each `write` hands the
/// kernel a large contiguous buffer.
const BUFFER_BYTES: usize = 1 << 20;

fn serve(stream: TcpStream, block: &[u8]) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let per_buf = (BUFFER_BYTES / block.len()).max(1);
    let buf = block.repeat(per_buf);
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
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
        let total = iters * block.len() as u64;
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {total}\r\n\r\n"
        )?;
        let mut left = iters;
        while left >= per_buf as u64 {
            out.write_all(&buf)?;
            left -= per_buf as u64;
        }
        out.write_all(&buf[..left as usize * block.len()])?;
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().expect("usage: raw-sender ADDR BLOCK_FILE");
    let block = std::fs::read(args.next().expect("BLOCK_FILE"))?;
    assert!(!block.is_empty(), "empty block");
    let block: &'static [u8] = Box::leak(block.into_boxed_slice());
    let listener = TcpListener::bind(&addr)?;
    eprintln!("raw-sender: {} byte blocks at http://{addr}/", block.len());
    for stream in listener.incoming() {
        let stream = stream?;
        std::thread::spawn(move || {
            let _ = serve(stream, block);
        });
    }
    Ok(())
}
