//! The access log: one `tracing` event per request, at target [`ACCESS_TARGET`], level info.

use std::net::SocketAddr;
use std::time::Duration;

use galleon_http::Exchange;

/// `tracing` target of the access log: one event per request when
/// [`StatsConfig::access_log`](crate::StatsConfig::access_log) is on (enable it in the
/// subscriber, e.g. `RUST_LOG=galleon::access=info`).
pub const ACCESS_TARGET: &str = "galleon::access";

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// One galleon-http exchange: with its bytes and write calls.
pub(crate) fn exchange(e: &Exchange<'_>) {
    tracing::info!(
        target: ACCESS_TARGET,
        method = e.method,
        path = e.target,
        status = e.status,
        bytes = e.writes.bytes,
        us = micros(e.elapsed),
        writes = e.writes.syscalls,
        peer = %e.peer,
        completed = e.completed,
    );
}

/// One request answered through the axum layer: bytes when the body's size was known, no write
/// calls; the peer when the app is served with `ConnectInfo`.
#[cfg_attr(not(feature = "axum"), allow(dead_code))]
pub(crate) fn request(
    method: &str,
    path: &str,
    status: u16,
    bytes: Option<u64>,
    elapsed: Duration,
    peer: Option<SocketAddr>,
) {
    tracing::info!(
        target: ACCESS_TARGET,
        method,
        path,
        status,
        bytes,
        us = micros(elapsed),
        peer = peer.map(tracing::field::display),
    );
}
