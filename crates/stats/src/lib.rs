//! # galleon-stats
//!
//! A web server's own statistics, mountable in one line: requests by route, method and status,
//! latency histograms, the write calls of every response (iovecs, bytes referenced vs copied),
//! connections, resident memory, a CPU pool's hops (`galleon_offload::Pool`) and any extra
//! figures (an event store's); served as
//!
//! - `GET /_galleon`: the stats page (HTML and inline SVG). In galleon-http it is a
//!   galleon-live page: rendered as HTML first, then kept current over a socket
//!   (`/_galleon/live/websocket`, scripts at `/_galleon/live/assets/`), the changed figures
//!   sent every [`REFRESH_SECS`] s; in axum a plain page reloading itself as often;
//! - `GET /_galleon/stats.json`: the same as JSON (`server` is a [`Snapshot`]);
//! - `GET /metrics`: Prometheus's text format;
//! - `GET /_galleon/health`: `{"status":"ok","uptime_s":...}` for load balancers;
//!
//! plus an access log through `tracing` (target [`ACCESS_TARGET`]). The first three (and the
//! live page's socket and scripts) answer loopback peers only unless [`Diagnostics::open`];
//! health answers everyone. With [`StatsConfig::record`] off only the access log is kept and
//! those answer 404.
//!
//! ## In galleon-http
//! [`Stats`] is the server's [`Observer`](galleon_http::Observer), and [`mount`] adds the
//! routes:
//!
//! ```no_run
//! use std::sync::Arc;
//! use galleon_http::{Router, Server, ServerConfig};
//! use galleon_stats::{Stats, StatsConfig};
//!
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! let stats = Arc::new(Stats::new(StatsConfig::default()));
//! let router = galleon_stats::mount(Router::new(), &stats);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:4000").await?;
//! Server::new(router, ServerConfig::default())
//!     .with_observer(stats)
//!     .serve(listener, galleon_http::shutdown_signal())
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! ## In axum (feature `axum`)
//! A tower layer records, an `axum::Router` serves; the app must be served with the peer's
//! address (`into_make_service_with_connect_info::<SocketAddr>()`), without which the routes
//! refuse (403) unless opened. See the `axum` module for what axum does not measure.
//!
//! ```no_run
//! # #[cfg(feature = "axum")]
//! # async fn serve(app: axum::Router) -> std::io::Result<()> {
//! # use std::{net::SocketAddr, sync::Arc};
//! # let stats = Arc::new(galleon_stats::Stats::new(Default::default()));
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! let app = app.merge(galleon_stats::axum::routes(&stats)).layer(galleon_stats::axum::layer(&stats));
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! ```
//!
//! ## Options
//! [`Diagnostics`] adds a CPU pool, sets of extra [`Figure`]s (read from a closure at each
//! request, so this crate depends on nothing it reads) and opens the routes to every peer; both
//! mounts take it where they take `&stats`:
//!
//! ```
//! use std::sync::Arc;
//! use galleon_stats::{Diagnostics, Figure, Stats, StatsConfig};
//!
//! let stats = Arc::new(Stats::new(StatsConfig::default()));
//! let router = galleon_stats::mount(
//!     galleon_http::Router::new(),
//!     Diagnostics::new(&stats)
//!         .figures("events", "Event store", || vec![Figure::counter("galleon_events_appends", "appends stored", 3.0)])
//!         .open(true),
//! );
//! # let _ = router;
//! ```

mod access;
#[cfg(feature = "axum")]
pub mod axum;
mod diagnostics;
mod figures;
mod format;
mod galleon;
mod live;
mod page;
mod prom;
mod record;
mod snapshot;

pub use access::ACCESS_TARGET;
pub use diagnostics::{Diagnostics, HEALTH_PATH, JSON_PATH, METRICS_PATH, PAGE_PATH};
pub use figures::{Figure, FigureKind};
pub use galleon::mount;
pub use page::REFRESH_SECS;
pub use prom::METRICS_CONTENT_TYPE;
pub use record::{Stats, StatsConfig, UNMATCHED};
pub use snapshot::{
    Bucket, CALLS_BOUNDS, Connections, IOVECS_BOUNDS, LATENCY_BOUNDS_S, Latency, RouteSnapshot,
    Snapshot, Source, WriteTotals, Writes,
};
