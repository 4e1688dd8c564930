//! What the server tells an [`Observer`] about each request it answered and each connection it
//! opened: the raw facts (route, status, time, the write calls) for a stats page, metrics or an
//! access log, recorded by the embedder. The server keeps nothing itself.

use std::net::SocketAddr;
use std::time::Duration;

use galleon_iolist::WriteStats;

/// One request and its response, as the connection saw them, reported once the response was
/// written (or its writing failed).
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// The request method (`"-"` for a request refused before its head parsed).
    pub method: &'a str,
    /// Path and `?query` as sent; empty for a request refused before its head parsed, and
    /// when the observer does not want targets ([`Observer::wants_target`]).
    pub target: &'a str,
    /// The pattern of the route that answered (`/streams/{id}`), `None` when no route did
    /// (404, 405, a malformed request): a label with a bounded number of values, unlike
    /// `target`.
    pub route: Option<&'a str>,
    /// The index of that route in its router (dense from 0, fixed for the router's life): a
    /// key an observer can index a table by instead of hashing the pattern.
    pub route_index: Option<usize>,
    /// The response's status code.
    pub status: u16,
    /// From the request head's arrival to the response's last byte handed to the socket.
    pub elapsed: Duration,
    /// The response's write calls: head and body, iovecs, bytes referenced and copied.
    pub writes: WriteStats,
    /// False when the response could not be written whole (the client left, a write timed out).
    pub completed: bool,
    /// The client's address.
    pub peer: SocketAddr,
}

/// Receives the server's reports. Called on the connection's task, after its response: keep it
/// short (a few atomic or locked counters); anything slow delays that connection's next request.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use galleon_http::{Exchange, Observer, Router, Server, ServerConfig};
///
/// #[derive(Debug, Default)]
/// struct Count(AtomicU64);
/// impl Observer for Count {
///     fn exchange(&self, e: &Exchange<'_>) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
/// let server = Server::new(Router::new(), ServerConfig::default())
///     .with_observer(Arc::new(Count::default()));
/// # let _ = server;
/// ```
pub trait Observer: Send + Sync + std::fmt::Debug + 'static {
    /// A request was answered.
    fn exchange(&self, exchange: &Exchange<'_>);
    /// Whether [`Exchange::target`] is wanted (an access log does; counters keyed by route do
    /// not, and are spared keeping each request's target alive until its response is written).
    fn wants_target(&self) -> bool {
        true
    }
    /// A connection was accepted (`true`) or ended (`false`).
    fn connection(&self, _opened: bool) {}
    /// A connection over the connection limit was refused with 503.
    fn refused(&self) {}
}
