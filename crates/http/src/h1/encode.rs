//! Response heads and body framing on the wire: the status line, headers, `content-length` or
//! `transfer-encoding: chunked`, `date`, `connection`, and chunk framing. Pure functions over an
//! [`IoList`]: no I/O.

use std::borrow::Cow;

use galleon_iolist::IoList;

use crate::response::{CONTENT_TYPE, HTML, HeaderList, StatusCode};

/// What [`write_head`] sends for `200` with only [`Response::html`]'s header.
const HTML_OK_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n";

/// Whether `headers` is exactly the header [`Response::html`] sets (by address: the constants
/// themselves, so a match can only be those bytes).
fn is_html_only(headers: &HeaderList) -> bool {
    matches!(&headers[..], [(Cow::Borrowed(n), Cow::Borrowed(v))]
        if std::ptr::eq(*n, CONTENT_TYPE) && std::ptr::eq(*v, HTML))
}

/// How the body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `content-length: N`.
    Length(u64),
    /// `transfer-encoding: chunked`.
    Chunked,
    /// Neither: the body runs to the connection's close (HTTP/1.0 streams).
    Close,
    /// No body and no length header (1xx, 204, 304).
    None,
}

/// Appends the response head to `out`: status line, the handler's headers, framing, `date`,
/// `connection`, all copied in one pass into one scratch run ([`IoList::push_copy_with`]). One
/// run, not a static status line beside the rest: a lone small segment in front of a large
/// body is handed to `writev` where it lies, where two would first be copied together again.
pub(crate) fn write_head(
    out: &mut IoList,
    status: StatusCode,
    headers: &HeaderList,
    framing: Framing,
    keep_alive: KeepAlive,
) {
    out.push_copy_with(|b| {
        if status == StatusCode::OK && is_html_only(headers) {
            // The usual page: status line and header in one copy.
            b.push(HTML_OK_HEAD.as_bytes());
        } else {
            match static_line(status) {
                Some(line) => b.push(line.as_bytes()),
                None => {
                    let mut digits = itoa::Buffer::new();
                    b.push(b"HTTP/1.1 ");
                    b.push(digits.format(status.0).as_bytes());
                    b.push(b" Status\r\n");
                }
            }
            // Checked by `Response::with_header`, the only way in.
            for (n, v) in headers {
                b.push(n.as_bytes());
                b.push(b": ");
                b.push(v.as_bytes());
                b.push(b"\r\n");
            }
        }
        match framing {
            Framing::Length(n) => {
                let mut digits = itoa::Buffer::new();
                b.push(b"content-length: ");
                b.push(digits.format(n).as_bytes());
                b.push(b"\r\ndate: ");
            }
            Framing::Chunked => b.push(b"transfer-encoding: chunked\r\ndate: "),
            Framing::Close | Framing::None => b.push(b"date: "),
        }
        crate::date::with_date(|d| b.push(d));
        b.push(match keep_alive {
            KeepAlive::Close => b"\r\nconnection: close\r\n\r\n",
            KeepAlive::KeepAlive10 => b"\r\nconnection: keep-alive\r\n\r\n",
            KeepAlive::Default => b"\r\n\r\n",
        });
    });
}

/// What the `connection` header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeepAlive {
    /// HTTP/1.1 default: nothing to say.
    Default,
    /// HTTP/1.0 client that asked for keep-alive.
    KeepAlive10,
    /// This is the last response on the connection.
    Close,
}

/// The status line for this code, `HTTP/1.1 200 OK\r\n`, as a static string for the common
/// codes (so the head's first segment is never copied) or `None` for the others.
fn static_line(status: StatusCode) -> Option<&'static str> {
    Some(match status.0 {
        100 => "HTTP/1.1 100 Continue\r\n",
        101 => "HTTP/1.1 101 Switching Protocols\r\n",
        200 => "HTTP/1.1 200 OK\r\n",
        201 => "HTTP/1.1 201 Created\r\n",
        204 => "HTTP/1.1 204 No Content\r\n",
        206 => "HTTP/1.1 206 Partial Content\r\n",
        304 => "HTTP/1.1 304 Not Modified\r\n",
        400 => "HTTP/1.1 400 Bad Request\r\n",
        404 => "HTTP/1.1 404 Not Found\r\n",
        405 => "HTTP/1.1 405 Method Not Allowed\r\n",
        408 => "HTTP/1.1 408 Request Timeout\r\n",
        409 => "HTTP/1.1 409 Conflict\r\n",
        413 => "HTTP/1.1 413 Content Too Large\r\n",
        416 => "HTTP/1.1 416 Range Not Satisfiable\r\n",
        422 => "HTTP/1.1 422 Unprocessable Content\r\n",
        431 => "HTTP/1.1 431 Request Header Fields Too Large\r\n",
        500 => "HTTP/1.1 500 Internal Server Error\r\n",
        501 => "HTTP/1.1 501 Not Implemented\r\n",
        503 => "HTTP/1.1 503 Service Unavailable\r\n",
        _ => return None,
    })
}

/// Appends one chunk of a chunked body: its size in hex, CRLF, the chunk (attached, not copied),
/// CRLF.
pub(crate) fn push_chunk(out: &mut IoList, chunk: IoList) {
    let mut hex = [0u8; 16];
    out.push_copy(fmt_hex(chunk.len(), &mut hex));
    out.push_copy(b"\r\n");
    out.push_list(chunk);
    out.push_static(b"\r\n");
}

/// Appends the last chunk of a chunked body (no trailers).
pub(crate) fn push_last_chunk(out: &mut IoList) {
    out.push_static(b"0\r\n\r\n");
}

/// `n` in lowercase hex, written into the end of `buf`.
fn fmt_hex(mut n: usize, buf: &mut [u8; 16]) -> &[u8] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = DIGITS[n & 15];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::{Body, Response};

    #[test]
    fn head_has_length_date_and_status() {
        let mut out = IoList::new();
        let headers: HeaderList = smallvec::smallvec![("content-type".into(), "text/html".into())];
        write_head(
            &mut out,
            StatusCode::OK,
            &headers,
            Framing::Length(410333),
            KeepAlive::Default,
        );
        let s = String::from_utf8(out.to_vec()).unwrap();
        assert!(s.starts_with("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"));
        assert!(s.contains("content-length: 410333\r\n"));
        assert!(s.contains("\r\ndate: "));
        assert!(s.ends_with(" GMT\r\n\r\n"), "{s:?}");
        assert_eq!(out.segment_count(), 1, "the whole head is one scratch run");
    }

    #[test]
    fn the_html_fast_path_sends_what_the_general_path_sends() {
        let head = |resp: Response| {
            let parts = resp.into_parts();
            let mut out = IoList::new();
            write_head(
                &mut out,
                parts.status,
                &parts.headers,
                Framing::Length(7),
                KeepAlive::Default,
            );
            String::from_utf8(out.to_vec()).unwrap()
        };
        let fast = head(Response::html("x"));
        assert!(is_html_only(&Response::html("x").into_parts().headers));
        // The same header given by hand (owned strings) takes the general path.
        let general = head(
            Response::new(StatusCode::OK, "x")
                .with_header(String::from(CONTENT_TYPE), String::from(HTML)),
        );
        let strip_date = |s: &str| s[..s.find("date: ").unwrap()].to_owned();
        assert_eq!(strip_date(&fast), strip_date(&general));
        assert_eq!(
            strip_date(&fast),
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: 7\r\n"
        );
        // Another status or a second header is not the fast path.
        assert!(head(Response::html("x").with_header("x-a", "b")).contains("x-a: b\r\n"));
        let created = Response::new(StatusCode(201), "x");
        assert!(head(created).starts_with("HTTP/1.1 201 Created\r\n"));
    }

    #[test]
    fn header_injection_is_dropped() {
        let resp = Response::new(StatusCode(299), Body::empty())
            .with_header("x-bad", "a\r\nset-cookie: evil")
            .with_header("x-bad:", "colon")
            .with_header("", "empty name")
            .with_header("x-nul", "a\0b")
            .with_header("x-good", "ok");
        let parts = resp.into_parts();
        assert_eq!(parts.headers.len(), 1);
        let mut out = IoList::new();
        write_head(
            &mut out,
            parts.status,
            &parts.headers,
            Framing::None,
            KeepAlive::Close,
        );
        let s = String::from_utf8(out.to_vec()).unwrap();
        assert!(s.starts_with("HTTP/1.1 299 Status\r\n"));
        assert!(!s.contains("evil"));
        assert!(s.contains("x-good: ok\r\n"));
        assert!(s.ends_with("connection: close\r\n\r\n"));
    }

    #[test]
    fn chunk_framing() {
        let mut out = IoList::new();
        push_chunk(&mut out, IoList::from("hello, world"));
        push_last_chunk(&mut out);
        assert_eq!(out.to_vec(), b"c\r\nhello, world\r\n0\r\n\r\n");
        let mut b = [0u8; 16];
        assert_eq!(fmt_hex(0, &mut b), b"0");
        assert_eq!(fmt_hex(500, &mut b), b"1f4");
        assert_eq!(fmt_hex(usize::MAX, &mut b), b"ffffffffffffffff");
    }

    #[test]
    fn large_lengths_and_odd_statuses() {
        let mut out = IoList::new();
        write_head(
            &mut out,
            StatusCode(599),
            &HeaderList::new(),
            Framing::Length(u64::MAX),
            KeepAlive::KeepAlive10,
        );
        let s = String::from_utf8(out.to_vec()).unwrap();
        assert!(s.starts_with("HTTP/1.1 599 Status\r\n"), "{s:?}");
        assert!(
            s.contains("content-length: 18446744073709551615\r\n"),
            "{s:?}"
        );
        assert!(s.ends_with("connection: keep-alive\r\n\r\n"), "{s:?}");
    }
}
