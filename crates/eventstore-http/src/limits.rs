//! The API's per-request bounds ([`ApiLimits`]) and its defaults.

use std::time::Duration;

/// Most events one `POST /streams/{id}` may carry by default. A guess, one tenth of the store's
/// own [`galleon_eventstore::MAX_APPEND_EVENTS`], so one HTTP request holds a stream's lock only
/// briefly.
pub const MAX_HTTP_APPEND_EVENTS: usize = 1_000;

/// Events returned by a read when the request has no `limit`: the seed benchmark's page size.
pub const DEFAULT_READ_LIMIT: usize = 100;

/// Largest `limit` a read request may ask for by default; larger values get a 400. A guess
/// bounding one response to ~1 MB of typical events.
pub const MAX_HTTP_READ_LIMIT: usize = 1_000;

/// Largest request body by default: galleon-http's own default request body limit
/// ([`galleon_http::DEFAULT_MAX_BODY_BYTES`], 8 MiB), so both mounts refuse the same bodies.
pub const DEFAULT_MAX_BODY_BYTES: u64 = galleon_http::DEFAULT_MAX_BODY_BYTES;

/// Default silence after which an event stream sends a keep-alive comment: 15 s. Proxies cut
/// idle responses after 60 s (nginx `proxy_read_timeout`, AWS ALB's idle timeout) or 100 s
/// (Cloudflare); 15 s stays well under all of them, at 15 bytes per quarter minute.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Per-request bounds of the HTTP API (`galleon serve --max-append-events`, `--max-read-limit`,
/// `--max-body`).
///
/// # Examples
/// ```
/// use galleon_eventstore_http::ApiLimits;
///
/// let limits = ApiLimits {
///     max_append_events: 100,
///     ..ApiLimits::default()
/// };
/// assert_eq!(limits.max_read_limit, galleon_eventstore_http::MAX_HTTP_READ_LIMIT);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiLimits {
    /// Most events one `POST /streams/{id}` may carry; at most
    /// [`galleon_eventstore::MAX_APPEND_EVENTS`] (the store refuses more anyway).
    pub max_append_events: usize,
    /// Largest `limit` a read may ask for; at most [`galleon_eventstore::MAX_READ_EVENTS`]. A
    /// read without `limit` returns [`DEFAULT_READ_LIMIT`] events, or this many if fewer.
    pub max_read_limit: usize,
    /// Largest request body in bytes: a longer one is answered 413 before it is parsed (on the
    /// axum mount before it is read past this many bytes). On the galleon-http mount the
    /// server's own [`galleon_http::Limits::max_body_bytes`] applies first; give both the same
    /// value.
    pub max_body_bytes: u64,
}

impl Default for ApiLimits {
    fn default() -> ApiLimits {
        ApiLimits {
            max_append_events: MAX_HTTP_APPEND_EVENTS,
            max_read_limit: MAX_HTTP_READ_LIMIT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}
