//! The galleon-http adapter: [`mount`] adds the diagnostics routes to a [`Router`]; [`Stats`]
//! itself is the server's [`Observer`](galleon_http::Observer).
//!
//! [`Stats`]: crate::Stats

use galleon_http::{Request, Response, Router, StatusCode};

use crate::diagnostics::{
    Answer, Diagnostics, HEALTH_PATH, JSON_PATH, METRICS_PATH, PAGE_PATH, Route,
};

/// Adds `GET /_galleon` (the live page), `/_galleon/stats.json`, `/metrics` and
/// `/_galleon/health` to `router`. A request without a peer address (one built in-process and
/// given to [`Router::handle`]) counts as loopback.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use galleon_http::{Router, Server, ServerConfig};
/// use galleon_stats::{Diagnostics, Stats, StatsConfig};
///
/// # #[tokio::main] async fn main() -> std::io::Result<()> {
/// let stats = Arc::new(Stats::new(StatsConfig::default()));
/// let router = galleon_stats::mount(Router::new(), &stats);
/// // Or with options: galleon_stats::mount(router, Diagnostics::new(&stats).open(true)).
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:4000").await?;
/// Server::new(router, ServerConfig::default())
///     .with_observer(stats)
///     .serve(listener, galleon_http::shutdown_signal())
///     .await?;
/// # Ok(()) }
/// ```
pub fn mount(router: Router, diagnostics: impl Into<Diagnostics>) -> Router {
    let d = diagnostics.into();
    [
        (PAGE_PATH, Route::Page),
        (JSON_PATH, Route::Json),
        (METRICS_PATH, Route::Metrics),
        (HEALTH_PATH, Route::Health),
    ]
    .into_iter()
    .fold(router, |router, (path, route)| {
        let d = d.clone();
        router.get(path, move |req: Request| {
            let answer = d.answer(route, req.peer(), req.header("authorization"));
            async move { response(answer) }
        })
    })
}

fn response(a: Answer) -> Response {
    let mut r =
        Response::new(StatusCode(a.status), a.body).with_header("content-type", a.content_type);
    if a.challenge {
        r = r.with_header("www-authenticate", "Bearer");
    }
    if a.no_store {
        r.with_header("cache-control", "no-store")
    } else {
        r
    }
}
