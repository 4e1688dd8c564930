//! HTTP/1.1 connection upgrades (RFC 9110 section 7.8): a handler answers `101 Switching
//! Protocols` with [`Response::upgrade`], and once that head is written the connection's socket
//! and the bytes already read past the request go to its callback as an [`Upgraded`] (how a
//! WebSocket library takes over a connection).
//!
//! The connection side is `h1/conn/upgrade.rs`; here are the public types and the checks of the
//! request.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::h1::decode::{has_token, trim};
use crate::request::{Method, Request};
use crate::response::{Body, BodyKind, Response, StatusCode};

/// 101 Switching Protocols
const SWITCHING_PROTOCOLS: StatusCode = StatusCode(101);

/// What an upgrade response carries in place of a body: whether its request asked for an
/// upgrade (checked once, when the response is made), and what takes the connection over.
pub(crate) struct OnUpgrade {
    pub(crate) asked: bool,
    pub(crate) run: Box<dyn FnOnce(Upgraded) -> BoxFuture<'static, ()> + Send>,
}

/// A connection after `101 Switching Protocols`: the socket, the bytes the client sent after
/// the request that were already read, and the server's shutdown signal.
///
/// The upgraded connection runs on its connection's task and keeps its place under
/// [`Limits::max_connections`](crate::Limits::max_connections) until the callback given to
/// [`Response::upgrade`] returns. When the server shuts down, [`Upgraded::stopping`] completes;
/// an owner that has not returned by [`ServerConfig::shutdown_grace`](crate::ServerConfig)
/// later is aborted (its socket closed) with the other connections still running. The
/// server's timeouts no longer apply: the owner times its own reads and writes.
pub struct Upgraded {
    pub(crate) stream: TcpStream,
    pub(crate) read_ahead: Bytes,
    pub(crate) peer: SocketAddr,
    pub(crate) shutdown: watch::Receiver<bool>,
}

impl Upgraded {
    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Bytes the client sent after the upgrade request that the server had already read (the
    /// new protocol's first bytes, sent in the same packet): read these before the socket.
    pub fn read_ahead(&self) -> &Bytes {
        &self.read_ahead
    }

    /// Completes when the server starts shutting down (at once if it already has, or if it is
    /// gone): the moment to say goodbye in the new protocol and return.
    pub async fn stopping(&mut self) {
        let _ = self.shutdown.wait_for(|stopping| *stopping).await;
    }

    /// A future that completes when the server starts shutting down, as
    /// [`Upgraded::stopping`], but owning its signal: it outlives [`Upgraded::into_parts`].
    pub fn stop_signal(&self) -> impl Future<Output = ()> + Send + use<> {
        let mut shutdown = self.shutdown.clone();
        async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        }
    }

    /// The socket and the bytes already read from it ([`Upgraded::read_ahead`]).
    pub fn into_parts(self) -> (TcpStream, Bytes) {
        (self.stream, self.read_ahead)
    }
}

impl fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgraded")
            .field("peer", &self.peer)
            .field("read_ahead", &self.read_ahead.len())
            .field("stopping", &*self.shutdown.borrow())
            .finish_non_exhaustive()
    }
}

impl Request {
    /// Whether this request asks to switch to `protocol` (`websocket`): an HTTP/1.1 `GET` whose
    /// `connection` headers list `upgrade` and whose `upgrade` headers list `protocol`, compared
    /// case-insensitively by name (`websocket/13` matches `websocket`).
    ///
    /// # Examples
    /// ```
    /// use bytes::Bytes;
    /// use galleon_http::{Method, Request};
    ///
    /// let headers = [("connection", "keep-alive, Upgrade"), ("upgrade", "WebSocket")];
    /// let req = Request::new(Method::Get, "/ws", &headers, Bytes::new());
    /// assert!(req.wants_upgrade("websocket"));
    /// assert!(!req.wants_upgrade("h2c"));
    /// ```
    pub fn wants_upgrade(&self, protocol: &str) -> bool {
        self.asks_upgrade()
            && self.header_values("upgrade").any(|v| {
                v.split(|&b| b == b',').any(|offer| {
                    let name = trim(offer).split(|&b| b == b'/').next().unwrap_or(&[]);
                    trim(name).eq_ignore_ascii_case(protocol.as_bytes())
                })
            })
    }

    /// Whether this request asks for an upgrade to any protocol: an HTTP/1.1 `GET` with
    /// `connection: upgrade` and a non-empty `upgrade` header.
    pub(crate) fn asks_upgrade(&self) -> bool {
        *self.method() == Method::Get
            && self.minor_version() == 1
            && self
                .header_values("connection")
                .any(|v| has_token(v, "upgrade"))
            && self.header_values("upgrade").any(|v| !trim(v).is_empty())
    }
}

impl Response {
    /// `101 Switching Protocols` for `req`, after which the connection belongs to
    /// `on_upgrade`: once the head is written, it gets the socket as an [`Upgraded`] and runs
    /// on the connection's task until it returns, when the connection is closed. Add the
    /// new protocol's headers (`upgrade`, `connection`, `sec-websocket-accept`) with
    /// [`Response::with_header`]; the server adds only `date`.
    ///
    /// Check [`Request::wants_upgrade`] first. An upgrade response to a request that did not
    /// ask for one (no `connection: upgrade` and `upgrade`, or not an HTTP/1.1 `GET`: `HEAD`
    /// and HTTP/1.0 cannot upgrade) is a handler bug: the server answers 500 instead, logs it at
    /// error level, closes the connection and never calls `on_upgrade`.
    ///
    /// # Examples
    /// ```no_run
    /// use galleon_http::{Request, Response, Router, StatusCode};
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    ///
    /// // Echoes whatever the client sends after the upgrade, until it closes.
    /// let router = Router::new().get("/echo", |req: Request| async move {
    ///     if !req.wants_upgrade("echo") {
    ///         return Response::error(StatusCode(426), "upgrade to echo");
    ///     }
    ///     Response::upgrade(&req, |up| async move {
    ///         let (mut stream, early) = up.into_parts();
    ///         if stream.write_all(&early).await.is_err() {
    ///             return;
    ///         }
    ///         let mut buf = [0u8; 4096];
    ///         while let Ok(n @ 1..) = stream.read(&mut buf).await {
    ///             if stream.write_all(&buf[..n]).await.is_err() {
    ///                 return;
    ///             }
    ///         }
    ///     })
    ///     .with_header("upgrade", "echo")
    ///     .with_header("connection", "upgrade")
    /// });
    /// ```
    pub fn upgrade<C, F>(req: &Request, on_upgrade: C) -> Response
    where
        C: FnOnce(Upgraded) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let on = OnUpgrade {
            asked: req.asks_upgrade(),
            run: Box::new(move |up| on_upgrade(up).boxed()),
        };
        Response::new(
            SWITCHING_PROTOCOLS,
            Body {
                kind: BodyKind::Upgrade(on),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, headers: &[(&str, &str)]) -> Request {
        Request::new(method, "/ws", headers, Bytes::new())
    }

    #[test]
    fn an_upgrade_is_asked_by_both_headers_of_a_get() {
        let both = [("Connection", "Upgrade"), ("Upgrade", "websocket/13")];
        assert!(req(Method::Get, &both).wants_upgrade("WebSocket"));
        assert!(!req(Method::Get, &both).wants_upgrade("web"));
        assert!(!req(Method::Head, &both).wants_upgrade("websocket"));
        assert!(!req(Method::Post, &both).asks_upgrade());
        let no_connection = [("upgrade", "websocket")];
        assert!(!req(Method::Get, &no_connection).wants_upgrade("websocket"));
        let no_upgrade = [("connection", "upgrade")];
        assert!(!req(Method::Get, &no_upgrade).asks_upgrade());
    }

    #[test]
    fn every_header_line_counts() {
        let split = [
            ("connection", "keep-alive"),
            ("connection", "upgrade"),
            ("upgrade", "h2c"),
            ("upgrade", " foo/2 , websocket "),
        ];
        let r = req(Method::Get, &split);
        assert!(r.wants_upgrade("websocket"));
        assert!(r.wants_upgrade("foo"));
        assert!(r.wants_upgrade("h2c"));
        assert!(!r.wants_upgrade("bar"));
    }

    #[test]
    fn an_upgrade_response_records_whether_it_was_asked() {
        let asked = req(Method::Get, &[("connection", "upgrade"), ("upgrade", "x")]);
        let resp = Response::upgrade(&asked, |_| async {});
        assert_eq!(resp.status(), SWITCHING_PROTOCOLS);
        assert!(matches!(&resp.body().kind, BodyKind::Upgrade(on) if on.asked));
        let not = req(Method::Get, &[("upgrade", "x")]);
        let resp = Response::upgrade(&not, |_| async {});
        assert!(matches!(&resp.body().kind, BodyKind::Upgrade(on) if !on.asked));
    }
}
