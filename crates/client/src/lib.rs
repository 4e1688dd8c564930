//! # galleon-client
//!
//! A minimal blocking HTTP/1.1 client over one keep-alive connection: what `galleon trace` and the
//! tests use to talk to a server. Not a general-purpose client (no TLS, no redirects), and not part
//! of the server library: only the binary and the tests depend on it.

#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Most bytes of a response head the client accepts.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Most header lines in a response head.
const MAX_RESPONSE_HEADERS: usize = 100;

/// `reader.read(buf)`, retried while it fails with `Interrupted`.
///
/// On Linux a blocking read of a socket with a read timeout fails with `EINTR` when the process
/// is stopped and continued (a debugger, a cgroup freezer on a CI machine), with no signal handler
/// installed (signal(7)); `Read::read` passes that up, `read_exact` alone retries.
///
/// # Examples
///
/// ```
/// let mut input: &[u8] = b"abc";
/// let mut buf = [0u8; 8];
/// assert_eq!(galleon_client::read_some(&mut input, &mut buf).unwrap(), 3);
/// ```
pub fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// A response as the client read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientResponse {
    /// Status code.
    pub status: u16,
    /// Headers in order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl ClientResponse {
    /// The first header with this (lowercase) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One client connection.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    host: String,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to `addr`, with `timeout` on every read and write.
    pub fn connect(addr: impl ToSocketAddrs + ToString, timeout: Duration) -> io::Result<Client> {
        let host = addr.to_string();
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            host,
            buf: Vec::new(),
        })
    }

    /// Sends a request with `host` and `content-length` added, and reads the response.
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<ClientResponse> {
        self.send(method, target, headers, body)?;
        self.read_response(method == "HEAD")
    }

    /// Like [`Client::request`], but the response body goes to `sink` as it arrives instead of
    /// into [`ClientResponse::body`] (which stays empty): for bodies too big to hold.
    pub fn request_to(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        sink: &mut dyn Write,
    ) -> io::Result<ClientResponse> {
        self.send(method, target, headers, b"")?;
        self.read_response_to(method == "HEAD", sink)
    }

    fn send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<()> {
        let mut req = format!("{method} {target} HTTP/1.1\r\nhost: {}\r\n", self.host);
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        if !body.is_empty() || method == "POST" || method == "PUT" {
            req.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.stream.write_all(&bytes)
    }

    /// `GET target` with extra headers.
    pub fn get(&mut self, target: &str, headers: &[(&str, &str)]) -> io::Result<ClientResponse> {
        self.request("GET", target, headers, b"")
    }

    /// Reads one response (for a `HEAD` request when `head_only`: no body is read).
    pub fn read_response(&mut self, head_only: bool) -> io::Result<ClientResponse> {
        let mut body = Vec::new();
        let mut resp = self.read_response_to(head_only, &mut body)?;
        resp.body = body;
        Ok(resp)
    }

    /// Reads one response, its body into `sink`.
    pub fn read_response_to(
        &mut self,
        head_only: bool,
        sink: &mut dyn Write,
    ) -> io::Result<ClientResponse> {
        let (status, headers) = loop {
            let mut hs = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
            let mut r = httparse::Response::new(&mut hs);
            match r.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = r.code.unwrap_or(0);
                    let headers = r
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_ascii_lowercase(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect::<Vec<_>>();
                    self.buf.drain(..n);
                    if status == 100 {
                        continue;
                    }
                    break (status, headers);
                }
                Ok(httparse::Status::Partial) => {
                    if self.buf.len() > MAX_RESPONSE_HEAD {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "head too large"));
                    }
                    self.read_more()?;
                }
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
        };
        let resp = ClientResponse {
            status,
            headers,
            body: Vec::new(),
        };
        if head_only || status < 200 || status == 204 || status == 304 {
            return Ok(resp);
        }
        if resp
            .header("transfer-encoding")
            .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
        {
            self.read_chunked(sink)?;
        } else if let Some(n) = resp.header("content-length") {
            let n: usize = n
                .trim()
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))?;
            self.copy_exact(n, sink)?;
        } else {
            loop {
                sink.write_all(&self.buf)?;
                self.buf.clear();
                match self.read_more() {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(resp)
    }

    /// Moves exactly `n` body bytes to `sink`, from the buffer first, then from the socket.
    fn copy_exact(&mut self, n: usize, sink: &mut dyn Write) -> io::Result<()> {
        let mut left = n;
        loop {
            let take = left.min(self.buf.len());
            sink.write_all(&self.buf[..take])?;
            self.buf.drain(..take);
            left -= take;
            if left == 0 {
                return Ok(());
            }
            self.read_more()?;
        }
    }

    fn read_chunked(&mut self, sink: &mut dyn Write) -> io::Result<()> {
        loop {
            let line = self.line()?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                while !self.line()?.is_empty() {}
                return Ok(());
            }
            self.copy_exact(size, sink)?;
            while self.buf.len() < 2 {
                self.read_more()?;
            }
            if &self.buf[..2] != b"\r\n" {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "chunk without CRLF",
                ));
            }
            self.buf.drain(..2);
        }
    }

    fn line(&mut self) -> io::Result<String> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Ok(l);
            }
            self.read_more()?;
        }
    }

    fn read_more(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 64 * 1024];
        let n = read_some(&mut self.stream, &mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}
