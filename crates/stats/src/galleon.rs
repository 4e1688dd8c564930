//! The galleon-http adapter: [`mount`] adds the diagnostics routes to a [`Router`], the stats
//! page live (galleon-live); [`Stats`] itself is the server's
//! [`Observer`](galleon_http::Observer).
//!
//! [`Stats`]: crate::Stats

use galleon_http::{Request, Response, Router, StatusCode, sync_handler};

use crate::diagnostics::{
    Answer, Diagnostics, HEALTH_PATH, JSON_PATH, METRICS_PATH, PAGE_PATH, Route,
};
use crate::live::{LIVE_PREFIX, LivePage};

/// Adds `GET /_galleon` (the live page), `/_galleon/stats.json`, `/metrics` and
/// `/_galleon/health` to `router`, and the live page's socket (`/_galleon/live/websocket`) and
/// scripts (`/_galleon/live/assets/*`), which the same guard protects as the page: a peer it
/// refuses gets neither the page, nor the scripts, nor a socket to join. A request without a
/// peer address (one built in-process and given to [`Router::handle`]) counts as loopback.
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
    let router = match LivePage::new(&d) {
        Ok(page) => mount_live(router, &d, page),
        Err(e) => {
            // The embedded template is tested; should it fail, the plain page still serves.
            tracing::error!(error = %e, "building the live stats page; serving the plain one");
            route(router, &d, PAGE_PATH, Route::Page)
        }
    };
    [
        (JSON_PATH, Route::Json),
        (METRICS_PATH, Route::Metrics),
        (HEALTH_PATH, Route::Health),
    ]
    .into_iter()
    .fold(router, |router, (path, r)| route(router, &d, path, r))
}

/// `GET path` answering `r`.
fn route(router: Router, d: &Diagnostics, path: &str, r: Route) -> Router {
    let d = d.clone();
    router.get(path, move |req: Request| {
        let answer = d.answer(r, req.peer(), req.header("authorization"));
        async move { response(answer) }
    })
}

/// What a live route answers once the guard let the request in.
type Serve = fn(&LivePage, &Request) -> Response;

/// The live page, its socket and its scripts, each behind `d`'s guard.
fn mount_live(router: Router, d: &Diagnostics, page: LivePage) -> Router {
    let guarded = |serve: Serve| {
        let (d, page) = (d.clone(), page.clone());
        sync_handler(
            move |req: Request| match d.refusal(req.peer(), req.header("authorization")) {
                Some(refusal) => response(refusal),
                None => serve(&page, &req),
            },
        )
    };
    router
        .get(PAGE_PATH, guarded(|p, req| p.live.page(req)))
        .get(
            &format!("{LIVE_PREFIX}/websocket"),
            guarded(|p, req| p.live.socket(req)),
        )
        .get(
            &format!("{LIVE_PREFIX}/assets/{{name}}"),
            guarded(|p, req| p.live.asset(req.param("name").unwrap_or(""))),
        )
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
