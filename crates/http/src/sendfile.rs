//! File bodies with `sendfile(2)`: the kernel copies page cache to socket, the server touches no
//! byte. Falls back to read + write where `sendfile` is refused (`EINVAL`/`ENOSYS`, e.g. a file
//! system without page-cache splicing).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;

use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// Most bytes asked of one `sendfile` call: Linux caps a call at `0x7ffff000` bytes anyway; 1 GiB
/// keeps a single call's kernel time bounded while still sending any ordinary file in one go.
const SENDFILE_MAX_CHUNK: usize = 1 << 30;

/// Buffer for the read + write fallback: 64 KiB, tokio's own default copy buffer size is 8 KiB;
/// this is one socket-buffer's worth on loopback.
const FALLBACK_BUF: usize = 64 * 1024;

/// One `sendfile` call: copies up to `count` bytes of `file` from `*offset` to `sock`, advancing
/// `*offset`. Returns the bytes sent (0 at end of file).
fn sendfile_once(sock: i32, file: i32, offset: &mut i64, count: usize) -> io::Result<usize> {
    let mut off: libc::off_t = *offset;
    // SAFETY: `sock` and `file` are file descriptors owned by live objects our caller holds for
    // the whole call (a `TcpStream` and a `File`); `&mut off` is a valid, aligned `off_t` that
    // outlives the call; the kernel reads `count` bytes from the file, never our memory.
    let n = unsafe { libc::sendfile(sock, file, &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off;
    Ok(n as usize)
}

/// Sends `len` bytes of `file` from its start offset `start` to `sock`, waiting for the socket to
/// be writable between calls. `on_call` sees each call's offered count and result (for tracing).
/// Returns the number of `sendfile` calls made.
pub(crate) async fn send_file(
    sock: &mut TcpStream,
    file: &std::fs::File,
    start: u64,
    len: u64,
    mut on_call: impl FnMut(usize, &io::Result<usize>),
) -> io::Result<u64> {
    let sock_fd = sock.as_raw_fd();
    let file_fd = file.as_raw_fd();
    let mut offset = i64::try_from(start).map_err(io::Error::other)?;
    let end = offset
        .checked_add(i64::try_from(len).map_err(io::Error::other)?)
        .ok_or_else(|| io::Error::other("file range overflows"))?;
    let mut calls = 0u64;
    while offset < end {
        let want = ((end - offset) as u64).min(SENDFILE_MAX_CHUNK as u64) as usize;
        sock.writable().await?;
        let r = sock.try_io(Interest::WRITABLE, || {
            sendfile_once(sock_fd, file_fd, &mut offset, want)
        });
        if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            continue;
        }
        calls += 1;
        on_call(want, &r);
        match r {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while being sent",
                ));
            }
            Ok(_) => {}
            Err(e)
                if calls == 1 && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) =>
            {
                return fallback(sock, file, start, len).await.map(|()| calls);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(calls)
}

/// Plain read + write, for files `sendfile` refuses.
async fn fallback(
    sock: &mut TcpStream,
    file: &std::fs::File,
    start: u64,
    len: u64,
) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    // A duplicated descriptor shares the file offset; nothing else reads through it meanwhile.
    let mut std_f = file.try_clone()?;
    std_f.seek(SeekFrom::Start(start))?;
    let mut f = tokio::fs::File::from_std(std_f);
    let mut left = len;
    let mut buf = vec![0u8; FALLBACK_BUF];
    while left > 0 {
        let want = (left as usize).min(buf.len());
        let n = f.read(&mut buf[..want]).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            ));
        }
        sock.write_all(&buf[..n]).await?;
        left -= n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn sends_a_file_range_exactly() {
        let mut tmp = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        tmp.write_all(&data).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = tokio::spawn(async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).await.unwrap();
            got
        });
        let (mut s, _) = listener.accept().await.unwrap();
        let mut offered = 0;
        let calls = send_file(&mut s, &tmp, 1000, 250_000, |w, r| {
            offered += w;
            assert!(r.is_ok());
        })
        .await
        .unwrap();
        assert!(calls >= 1);
        assert!(offered >= 250_000);
        drop(s);
        let got = reader.await.unwrap();
        assert_eq!(got, &data[1000..251_000]);
    }

    #[tokio::test]
    async fn a_short_file_is_an_error_not_a_hang() {
        let mut tmp = tempfile::tempfile().unwrap();
        tmp.write_all(b"tiny").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _c = TcpStream::connect(addr).await.unwrap();
        let (mut s, _) = listener.accept().await.unwrap();
        let e = send_file(&mut s, &tmp, 0, 100, |_, _| {})
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
