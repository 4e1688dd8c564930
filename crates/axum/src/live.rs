//! Live pages in axum (feature `live`): a [`galleon_live::Live`] mount served by axum routes.
//! Each view's page, the scripts and the socket answer as they do on galleon-http; the socket
//! runs on hyper's upgraded connection, so `axum::serve` (which serves upgrades) is all it needs.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request};
use axum::response::Response;
use axum::routing::get;
use bytes::Bytes;
use futures::FutureExt as _;
use futures::future::Shared;
use galleon_iolist::{Owners, to_frames};
use galleon_live::Live;
use http::{HeaderName, HeaderValue, StatusCode, Version, header};
use hyper_util::rt::TokioIo;

use crate::body::PageBody;

/// What every socket of a mount waits on to say goodbye: one shutdown future, shared.
type Stop = Shared<Pin<Box<dyn Future<Output = ()> + Send>>>;

/// The routes of `live` as an axum [`Router`]: `GET` each view's path (its page, rendered with
/// an empty session), `GET {prefix}/websocket` (the live socket) and `GET {prefix}/assets/{name}`
/// (the JavaScript clients), `prefix` being [`Live::prefix`] (`/live` by default).
///
/// [`merge`](Router::merge) it into the application's router; do not
/// [`nest`](Router::nest) it, since the pages name the socket and the scripts by their absolute
/// paths. The sockets run until their clients leave: axum's graceful shutdown does not wait
/// for (or end) upgraded connections, so to close them on shutdown (close code 1001) use
/// [`live_routes_with_shutdown`].
///
/// A page is rendered on the request's task, like any handler's work (a mount and one render
/// of its template). Only the method, target and headers of a request are passed on; bodies
/// are not read (every route is a `GET`).
///
/// # Errors
///
/// [`LiveRoutesError`] when a view path or the prefix has a segment that starts with `:` or
/// `*`, which axum 0.8 refuses to route literally (its router would panic).
///
/// # Examples
///
/// A counter, served by axum beside an ordinary route:
///
/// ```no_run
/// use axum::{Router, routing::get};
/// use galleon_live::{Live, LiveView, Socket, ViewError};
/// use galleon_template::Engine;
/// use serde_json::Value;
///
/// struct Counter;
///
/// impl LiveView for Counter {
///     fn mount(&mut self, _params: &Value, _session: &Value, s: &mut Socket) -> Result<(), ViewError> {
///         s.assign("count", 0);
///         Ok(())
///     }
///     fn handle_event(&mut self, event: &str, _value: &Value, s: &mut Socket) -> Result<(), ViewError> {
///         if event == "inc" {
///             s.update_int("count", |n| n + 1);
///         }
///         Ok(())
///     }
/// }
///
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let engine = Engine::builder().live(true).from_source(
///         "counter.html.eex",
///         r#"<button phx-click="inc">Clicked <%= @count %> times</button>"#,
///     )?;
///     let live = Live::builder(&engine)
///         .view("/counter", "counter.html.eex", || Counter)
///         .build()?;
///     // GET /counter, /live/websocket and /live/assets/{name}, beside the application's routes.
///     let app = Router::new()
///         .route("/", get(|| async { "see /counter" }))
///         .merge(galleon_axum::live::live_routes(live)?);
///     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
///     axum::serve(listener, app).await?;
///     Ok(())
/// }
/// ```
pub fn live_routes<S>(live: Live) -> Result<Router<S>, LiveRoutesError>
where
    S: Clone + Send + Sync + 'static,
{
    routes(live, std::future::pending::<()>().boxed().shared())
}

/// [`live_routes`], with sockets that close (code 1001, "the server is shutting down") once
/// `shutdown` completes: pass the same signal as to axum's graceful shutdown, which does not
/// wait for upgraded connections by itself.
///
/// # Errors
///
/// As [`live_routes`]'s.
///
/// # Examples
///
/// ```no_run
/// # async fn run(live: galleon_live::Live) -> Result<(), Box<dyn std::error::Error>> {
/// let (tx, rx) = tokio::sync::watch::channel(false);
/// let signal = move || {
///     let mut rx = rx.clone();
///     async move {
///         let _ = rx.wait_for(|stop| *stop).await;
///     }
/// };
/// let app: axum::Router = galleon_axum::live::live_routes_with_shutdown(live, signal())?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// tokio::spawn(async move {
///     let _ = tokio::signal::ctrl_c().await;
///     let _ = tx.send(true);
/// });
/// axum::serve(listener, app).with_graceful_shutdown(signal()).await?;
/// # Ok(()) }
/// ```
pub fn live_routes_with_shutdown<S>(
    live: Live,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Router<S>, LiveRoutesError>
where
    S: Clone + Send + Sync + 'static,
{
    let shutdown: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(shutdown);
    routes(live, shutdown.shared())
}

fn routes<S>(live: Live, stop: Stop) -> Result<Router<S>, LiveRoutesError>
where
    S: Clone + Send + Sync + 'static,
{
    let mut router = Router::new();
    for path in live.paths() {
        let route = route_path(path)?;
        let live = live.clone();
        router = router.route(
            &route,
            get(move |req: Request| {
                let live = live.clone();
                async move { live_response(live.page(&live_request(&req))) }
            }),
        );
    }
    let prefix = route_path(live.prefix())?;
    let assets = live.clone();
    Ok(router
        .route(
            &format!("{prefix}/websocket"),
            get(move |req: Request| {
                let (live, stop) = (live.clone(), stop.clone());
                async move { socket(&live, stop, req) }
            }),
        )
        .route(
            &format!("{prefix}/assets/{{name}}"),
            get(move |Path(name): Path<String>| {
                let live = assets.clone();
                async move { live_response(live.asset(&name)) }
            }),
        ))
}

/// `path` as an axum route matching it literally: braces escaped (`{{`, `}}`); a segment
/// starting with `:` or `*` cannot be.
fn route_path(path: &str) -> Result<String, LiveRoutesError> {
    if path
        .split('/')
        .any(|seg| seg.starts_with(':') || seg.starts_with('*'))
    {
        return Err(LiveRoutesError {
            path: path.to_owned(),
        });
    }
    Ok(path.replace('{', "{{").replace('}', "}}"))
}

/// The live socket: galleon-live's checks, then `101` and the socket loop on the upgraded
/// connection, spawned on tokio; or the refusal as it is.
fn socket(live: &Live, stop: Stop, mut req: Request) -> Response {
    if req.version() != Version::HTTP_11 {
        // galleon-live's checks assume HTTP/1.1, and hyper upgrades only HTTP/1.1 here.
        return live_response(
            galleon_http::Response::error(
                galleon_http::StatusCode(426),
                "the live socket is opened over HTTP/1.1",
            )
            .with_header("upgrade", "websocket"),
        );
    }
    let up = match live.check_socket(&live_request(&req)) {
        Ok(up) => up,
        Err(refusal) => return live_response(refusal),
    };
    if req
        .extensions()
        .get::<hyper::upgrade::OnUpgrade>()
        .is_none()
    {
        tracing::error!(
            "live socket: the request cannot be upgraded (serve the router with axum::serve, \
             or hyper with upgrades on)"
        );
        return live_response(galleon_http::Response::error(
            galleon_http::StatusCode::INTERNAL_SERVER_ERROR,
            "this server cannot upgrade connections",
        ));
    }
    let Ok(accept) = HeaderValue::from_str(up.accept_key()) else {
        // A base64 digest: always a valid header value.
        return status_only(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match upgrade.await {
            // hyper's `Upgraded` replays what it read past the request itself: nothing is
            // read ahead here.
            Ok(conn) => up.run(TokioIo::new(conn), Vec::new(), stop).await,
            Err(e) => tracing::debug!(error = %e, "live socket: the upgrade did not happen"),
        }
    });
    let mut resp = status_only(StatusCode::SWITCHING_PROTOCOLS);
    let headers = resp.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    resp
}

fn status_only(status: StatusCode) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = status;
    resp
}

/// An axum (`http`) request as galleon-http's, for [`Live`]'s handlers (`page_with_session`
/// in a handler of one's own, say): its method, target (path and query) and headers; the body
/// is left out. Header values that are not UTF-8 are dropped; with no `host` header (HTTP/2),
/// the URI's authority stands in for it.
///
/// # Examples
///
/// ```
/// let req = http::Request::get("/counter?page=2").header("host", "example.com").body(()).unwrap();
/// let req = galleon_axum::live::live_request(&req);
/// assert_eq!((req.path(), req.query()), ("/counter", "page=2"));
/// assert_eq!(req.header_str("host"), Some("example.com"));
/// ```
pub fn live_request<B>(req: &http::Request<B>) -> galleon_http::Request {
    let method = galleon_http::Method::from_token(req.method().as_str());
    let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let mut headers: Vec<(&str, &str)> = req
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str(), std::str::from_utf8(v.as_bytes()).ok()?)))
        .collect();
    if !req.headers().contains_key(header::HOST)
        && let Some(authority) = req.uri().authority()
    {
        headers.push(("host", authority.as_str()));
    }
    galleon_http::Request::new(method, target, &headers, Bytes::new())
}

/// A galleon-http response as an axum response: its status, its headers, and its body as a
/// [`PageBody`] of owned frames (static and shared bytes referenced, not copied; sent with
/// `content-length`). Every response of [`Live`] has a whole body; another kind (a stream, a
/// file, an upgrade) becomes a `500`, logged.
///
/// # Examples
///
/// ```
/// let resp = galleon_http::Response::html("<p>hi</p>").with_header("cache-control", "no-store");
/// let resp = galleon_axum::live::live_response(resp);
/// assert_eq!(resp.status(), 200);
/// assert_eq!(resp.headers()["content-type"], "text/html; charset=utf-8");
/// assert_eq!(resp.headers()["cache-control"], "no-store");
/// ```
pub fn live_response(resp: galleon_http::Response) -> Response {
    let Some(list) = resp.body().as_full() else {
        tracing::error!(
            body = ?resp.body(),
            "a galleon-http response whose body is not whole cannot be converted"
        );
        return status_only(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let Ok(status) = StatusCode::from_u16(resp.status().0) else {
        tracing::error!(
            status = resp.status().0,
            "a galleon-http response with a bad status"
        );
        return status_only(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let frames = to_frames(list, resp.policy().unwrap_or_default(), &Owners::default());
    let mut out = Response::new(Body::new(PageBody::whole(frames)));
    *out.status_mut() = status;
    for (name, value) in resp.headers() {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(n), Ok(v)) => {
                out.headers_mut().append(n, v);
            }
            _ => tracing::warn!(name, "dropping a header axum cannot send"),
        }
    }
    out
}

/// A path of a [`Live`] mount that axum 0.8 cannot route as it is: one of its segments starts
/// with `:` or `*` (axum's router refuses those, from its 0.7 syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRoutesError {
    path: String,
}

impl LiveRoutesError {
    /// The path.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl fmt::Display for LiveRoutesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the live path {:?} has a segment starting with `:` or `*`, which axum 0.8 does not \
             route literally: choose another path or prefix",
            self.path
        )
    }
}

impl std::error::Error for LiveRoutesError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_paths_escape_braces_and_refuse_colon_and_star_segments() {
        assert_eq!(route_path("/counter").unwrap(), "/counter");
        assert_eq!(route_path("/a{b}/c").unwrap(), "/a{{b}}/c");
        assert_eq!(route_path("/a:b").unwrap(), "/a:b");
        for bad in ["/:id", "/x/*rest"] {
            let e = route_path(bad).unwrap_err();
            assert_eq!(e.path(), bad);
            assert!(e.to_string().contains("axum 0.8"), "{e}");
        }
    }

    #[test]
    fn a_body_that_is_not_whole_is_a_500() {
        let body = galleon_http::Body::iter(std::iter::once(Ok::<_, std::io::Error>(
            galleon_iolist::IoList::from_scratch(b"x".to_vec()),
        )));
        let resp = live_response(galleon_http::Response::new(
            galleon_http::StatusCode::OK,
            body,
        ));
        assert_eq!(resp.status(), 500);
    }
}
