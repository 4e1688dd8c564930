//! The axum adapter (feature `axum`): [`layer`] records every request into a [`Stats`], and
//! [`routes`] serves the live page, `stats.json`, `/metrics` and health, one line each:
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use std::sync::Arc;
//! use axum::routing::get;
//! use galleon_stats::{Stats, StatsConfig};
//!
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! let stats = Arc::new(Stats::new(StatsConfig::default()));
//! let app = axum::Router::new().route("/", get(|| async { "hello" }));
//! let app = app.merge(galleon_stats::axum::routes(&stats)).layer(galleon_stats::axum::layer(&stats));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // With the peer's address: without it the diagnostics routes refuse (403) unless opened.
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! ```
//!
//! The routes answer loopback peers only, told by `axum::extract::ConnectInfo<SocketAddr>`: serve
//! the app with `into_make_service_with_connect_info::<SocketAddr>()`. Without `ConnectInfo` the
//! peer is unknown and the routes (but health) answer 403, unless
//! [`Diagnostics::open`](crate::Diagnostics::open).
//!
//! What axum does not report is shown as not measured: write calls, iovecs, bytes referenced
//! or copied, and connections. Latency runs to the response head (the layer sees no body
//! written), and bytes are the body's when its size is known up front (`content-length`),
//! else 0. Route labels are the `MatchedPath` of the route, so the layer must be added with
//! `Router::layer` (or `route_layer`), inside the router; requests no route matched are counted
//! as [`UNMATCHED`](crate::UNMATCHED).

mod layer;
mod routes;

use std::sync::Arc;

pub use layer::{ResponseFuture, StatsLayer, StatsService};

use crate::diagnostics::Diagnostics;
use crate::record::Stats;

/// A layer recording every request into `stats` (add it with `Router::layer`).
pub fn layer(stats: &Arc<Stats>) -> StatsLayer {
    StatsLayer::new(stats)
}

/// The diagnostics routes (`/_galleon`, `/_galleon/stats.json`, `/metrics`,
/// `/_galleon/health`) to merge into an app of any state `S`; `&stats` for the defaults, or a
/// [`Diagnostics`] with a pool, figures, or open to all peers.
pub fn routes<S>(diagnostics: impl Into<Diagnostics>) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes::router(diagnostics.into())
}
