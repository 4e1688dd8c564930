//! `Router`: method + path pattern → [`Handler`], with 404 and 405 answered for it.
//!
//! Dispatch (`Router::handle`): 404, 405 with `allow`, `HEAD` by the `GET` route, 400 for a path of
//! a route's shape whose escapes do not decode (in the route's format with `on_bad_escape`), a
//! panicking handler as 500. A handler returns `Reply::Ready` (`sync_handler`: no future boxed) or
//! `Reply::Later`. `Router::handle_routed` also says which route answered, for statistics by route.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures::FutureExt as _;

use crate::request::{Method, Request, percent_decode};
use crate::response::{Response, StatusCode};

/// A boxed response future, what an `async` [`Handler`] returns in [`Reply::Later`].
pub type ResponseFuture = Pin<Box<dyn Future<Output = Response> + Send + 'static>>;

/// Anything that turns a request into a response.
///
/// Implemented for every `Fn(Request) -> impl Future<Output = Response>` that is `Send + Sync +
/// 'static`, so an `async` closure or function is a handler, and for [`SyncHandler`] (made with
/// [`sync_handler`]), whose response is computed during the call. Blocking or CPU-heavy work
/// belongs in `tokio::task::spawn_blocking` inside the handler, not on the connection's task. A
/// handler that panics produces a 500 and the connection closes; the server keeps running.
pub trait Handler: Send + Sync + 'static {
    /// Handles one request.
    fn call(&self, req: Request) -> Reply;
}

/// What [`Handler::call`] returns: the response itself, or a future of it.
// The response is held inline on purpose: boxing it is the allocation `Ready` exists to avoid.
#[allow(clippy::large_enum_variant)]
pub enum Reply {
    /// Computed during the call: nothing to box or poll.
    Ready(Response),
    /// Still to come.
    Later(ResponseFuture),
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Ready(r) => f.debug_tuple("Ready").field(r).finish(),
            Reply::Later(_) => f.write_str("Later(..)"),
        }
    }
}

impl<F, Fut> Handler for F
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    fn call(&self, req: Request) -> Reply {
        Reply::Later(Box::pin(self(req)))
    }
}

/// A handler that computes its response synchronously, on the connection's task: no future is
/// boxed and polled per request (an allocation and a ~200-byte move that showed in profiles of
/// 4 KB pages). For work of microseconds, such as rendering a compiled template; anything that
/// waits or blocks belongs in an `async` handler.
pub struct SyncHandler<F>(F);

impl<F> fmt::Debug for SyncHandler<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SyncHandler")
    }
}

/// Makes `f` a [`SyncHandler`].
pub fn sync_handler<F>(f: F) -> SyncHandler<F>
where
    F: Fn(Request) -> Response + Send + Sync + 'static,
{
    SyncHandler(f)
}

impl<F> Handler for SyncHandler<F>
where
    F: Fn(Request) -> Response + Send + Sync + 'static,
{
    fn call(&self, req: Request) -> Reply {
        Reply::Ready((self.0)(req))
    }
}

/// One piece of a route pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Must equal this segment.
    Literal(String),
    /// Any one non-empty segment, percent-decoded into a parameter.
    Param(String),
    /// The rest of the path (possibly empty), percent-decoded, `/`s included.
    Rest(String),
}

/// A path pattern: `/streams/{stream}`, `/static/{*path}`, `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    pieces: Vec<Piece>,
    /// The whole pattern when it has no parameters: such a pattern matches exactly the paths
    /// equal to it (segments are compared raw), checked with one string comparison instead of
    /// splitting the path per route.
    exact: Option<String>,
}

impl Pattern {
    fn parse(p: &str) -> Pattern {
        assert!(
            p.starts_with('/'),
            "route pattern {p:?} must start with '/'"
        );
        let mut pieces = Vec::new();
        let segs: Vec<&str> = p[1..].split('/').collect();
        for (i, s) in segs.iter().enumerate() {
            if let Some(name) = s.strip_prefix("{*").and_then(|s| s.strip_suffix('}')) {
                assert!(
                    i + 1 == segs.len(),
                    "{{*{name}}} must end the pattern {p:?}"
                );
                pieces.push(Piece::Rest(name.to_owned()));
            } else if let Some(name) = s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                pieces.push(Piece::Param(name.to_owned()));
            } else {
                pieces.push(Piece::Literal((*s).to_owned()));
            }
        }
        let exact = pieces
            .iter()
            .all(|p| matches!(p, Piece::Literal(_)))
            .then(|| p.to_owned());
        Pattern { pieces, exact }
    }

    /// Matches a raw (percent-encoded) path; returns the decoded parameters.
    fn matches(&self, path: &str) -> Option<Vec<(String, String)>> {
        self.walk(path, |s| percent_decode(s, false).map(|c| c.into_owned()))
    }

    /// Whether the path has this pattern's shape, whatever its escapes decode to (or fail to).
    fn shape_matches(&self, path: &str) -> bool {
        self.walk(path, |_| Some(String::new())).is_some()
    }

    /// Matches `path` segment by segment, reading each parameter with `decode`.
    fn walk(
        &self,
        path: &str,
        decode: impl Fn(&str) -> Option<String>,
    ) -> Option<Vec<(String, String)>> {
        if let Some(exact) = &self.exact {
            return (path == exact).then(Vec::new);
        }
        let rest = path.strip_prefix('/')?;
        let mut params = Vec::new();
        let mut segs = rest.split('/');
        let mut consumed = 0usize;
        for piece in &self.pieces {
            match piece {
                Piece::Rest(name) => {
                    let tail = rest.get(consumed..).unwrap_or("");
                    params.push((name.clone(), decode(tail)?));
                    return Some(params);
                }
                Piece::Literal(lit) => {
                    let s = segs.next()?;
                    if s != lit {
                        return None;
                    }
                    consumed += s.len() + 1;
                }
                Piece::Param(name) => {
                    let s = segs.next()?;
                    if s.is_empty() {
                        return None;
                    }
                    params.push((name.clone(), decode(s)?));
                    consumed += s.len() + 1;
                }
            }
        }
        segs.next().is_none().then_some(params)
    }
}

/// The order of [`Router`]'s index of exact paths: by length, then bytes, so that most steps
/// of a search compare two lengths instead of calling `memcmp`.
fn by_length(a: &str, b: &str) -> std::cmp::Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// How a route answers a path of its shape whose escapes do not decode (see
/// [`Router::on_bad_escape`]).
type BadEscapeAnswer = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

struct Route {
    method: Method,
    pattern: Pattern,
    /// The pattern as written, the route's label for statistics.
    source: Box<str>,
    handler: Arc<dyn Handler>,
    bad_escape: Option<BadEscapeAnswer>,
}

/// Routes requests to handlers by method and path pattern.
///
/// Patterns are `/`-separated segments: a literal, `{name}` (one non-empty segment) or, last,
/// `{*name}` (the rest of the path). Parameters are percent-decoded and read with
/// [`Request::param`]. Routes are tried in the order they were added. A path that matches some
/// route but not for this method gets 405 with an `allow` header; `HEAD` falls back to the `GET`
/// route (the server drops the body); no match at all goes to the fallback, 404 by default.
///
/// ```
/// use galleon_http::{Method, Request, Response, Router};
///
/// let router = Router::new()
///     .get("/hello", |_req: Request| async { Response::html("hi") })
///     .route(Method::Post, "/streams/{stream}", |req: Request| async move {
///         let name = req.param("stream").unwrap_or_default().to_owned();
///         Response::html(format!("appended {} bytes to {name}", req.body().len()))
///     });
/// assert_eq!(router.len(), 2);
/// ```
#[derive(Default)]
pub struct Router {
    routes: Vec<Route>,
    fallback: Option<Arc<dyn Handler>>,
    /// Every path some route names exactly (`/blah`), sorted ([`by_length`]), with the indices of all the
    /// routes that match it, exact or patterned, in order: a request for such a path finds its
    /// candidates by one binary search instead of trying every route before its own.
    exact: Vec<(Box<str>, Vec<usize>)>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut l = f.debug_list();
        for r in &self.routes {
            l.entry(&format_args!("{} {:?}", r.method, r.pattern.pieces));
        }
        l.finish()
    }
}

/// What the router decided for a request. The handler is borrowed from the router: cloning its
/// `Arc` would be an atomic increment and decrement per request on a count that every worker
/// thread shares.
enum Dispatch<'r> {
    /// The handler, its parameters and the route's index (`None`: the fallback).
    Handler(&'r dyn Handler, Vec<(String, String)>, Option<usize>),
    MethodNotAllowed(Vec<Method>),
    BadEscape(Option<&'r BadEscapeAnswer>),
    NotFound,
}

impl Router {
    /// A router with no routes; everything is 404.
    pub fn new() -> Router {
        Router::default()
    }

    /// Adds a route for `method` and `pattern`. Panics on a pattern that does not start with `/`
    /// or has `{*rest}` anywhere but last: routes are written by programmers, not requests.
    pub fn route(mut self, method: Method, pattern: &str, handler: impl Handler) -> Router {
        let source = pattern;
        let pattern = Pattern::parse(source);
        let index = self.routes.len();
        match &pattern.exact {
            Some(path) => match self.exact.binary_search_by(|(p, _)| by_length(p, path)) {
                Ok(at) => self.exact[at].1.push(index),
                Err(at) => {
                    // The routes before it that match this path too, in order.
                    let mut matching: Vec<usize> = (0..index)
                        .filter(|&i| self.routes[i].pattern.matches(path).is_some())
                        .collect();
                    matching.push(index);
                    self.exact.insert(at, (path.as_str().into(), matching));
                }
            },
            None => {
                for (path, matching) in &mut self.exact {
                    if pattern.matches(path).is_some() {
                        matching.push(index);
                    }
                }
            }
        }
        self.routes.push(Route {
            method,
            pattern,
            source: source.into(),
            handler: Arc::new(handler),
            bad_escape: None,
        });
        self
    }

    /// How the route added last answers a path of its shape whose percent-escapes do not decode
    /// (`/streams/a%zz`), instead of the plain-text 400: an API whose answers are JSON says so
    /// in JSON. Panics when no route was added yet.
    pub fn on_bad_escape(
        mut self,
        answer: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> Router {
        let route = self
            .routes
            .last_mut()
            .expect("on_bad_escape follows the route it is for");
        route.bad_escape = Some(Arc::new(answer));
        self
    }

    /// Adds a `GET` route (which also answers `HEAD`).
    pub fn get(self, pattern: &str, handler: impl Handler) -> Router {
        self.route(Method::Get, pattern, handler)
    }

    /// Adds a `POST` route.
    pub fn post(self, pattern: &str, handler: impl Handler) -> Router {
        self.route(Method::Post, pattern, handler)
    }

    /// Handles every request no route matches (instead of the plain 404).
    pub fn fallback(mut self, handler: impl Handler) -> Router {
        self.fallback = Some(Arc::new(handler));
        self
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// True when there are no routes.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Routes a request and runs its handler: what the server does with every request, and how
    /// tests and embedders call a router directly. A handler that panics becomes a 500 (logged);
    /// a path no route matches is the fallback's, or 404; a path that other methods match, 405.
    ///
    /// # Examples
    /// ```
    /// use bytes::Bytes;
    /// use galleon_http::{Method, Request, Response, Router};
    ///
    /// let router = Router::new().get("/hello", |_req: Request| async { Response::html("hi") });
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let resp = rt.block_on(router.handle(Request::new(Method::Get, "/hello", &[], Bytes::new())));
    /// assert_eq!(resp.status().0, 200);
    /// let resp = rt.block_on(router.handle(Request::new(Method::Post, "/hello", &[], Bytes::new())));
    /// assert_eq!(resp.status().0, 405);
    /// ```
    pub async fn handle(&self, req: Request) -> Response {
        self.handle_routed(req).await.0
    }

    /// [`handle`](Self::handle), also saying which route answered: its index for
    /// [`pattern`](Self::pattern), `None` when none did (the fallback, 404, 405, a bad escape).
    pub async fn handle_routed(&self, mut req: Request) -> (Response, Option<usize>) {
        if req.path() == "*" {
            // The asterisk form asks about the server as a whole, and only with OPTIONS.
            let resp = match req.method() {
                Method::Options => Response::new(StatusCode::OK, "")
                    .with_header("allow", "GET, HEAD, POST, OPTIONS"),
                _ => Response::error(StatusCode::BAD_REQUEST, "`*` is a target for OPTIONS only"),
            };
            return (resp, None);
        }
        let (resp, route) = match self.dispatch(req.method(), req.path()) {
            Dispatch::Handler(h, params, route) => {
                req.set_params(params);
                let r = match std::panic::catch_unwind(AssertUnwindSafe(|| h.call(req))) {
                    Ok(Reply::Ready(resp)) => Ok(resp),
                    Ok(Reply::Later(f)) => AssertUnwindSafe(f).catch_unwind().await,
                    Err(p) => Err(p),
                };
                let resp = r.unwrap_or_else(|_| {
                    tracing::error!("handler panicked");
                    Response::error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
                });
                (resp, route)
            }
            Dispatch::MethodNotAllowed(allowed) => (method_not_allowed(&allowed), None),
            Dispatch::BadEscape(Some(answer)) => (answer(&req), None),
            Dispatch::BadEscape(None) => (
                Response::error(
                    StatusCode::BAD_REQUEST,
                    "malformed percent-escape in the path",
                ),
                None,
            ),
            Dispatch::NotFound => (Response::not_found(), None),
        };
        (resp, route)
    }

    /// The pattern of route `index` as it was added (`/streams/{id}`), `None` past the last.
    pub fn pattern(&self, index: usize) -> Option<&str> {
        self.routes.get(index).map(|r| &*r.source)
    }

    fn dispatch(&self, method: &Method, path: &str) -> Dispatch<'_> {
        let mut allowed = Vec::new();
        let mut head_fallback = None;
        let indexed = self
            .exact
            .binary_search_by(|(p, _)| by_length(p, path))
            .map(|at| &self.exact[at].1[..]);
        // The routes that may match, in order: those the index names, else all.
        let count = indexed.map_or(self.routes.len(), <[usize]>::len);
        for k in 0..count {
            let i = indexed.map_or(k, |listed| listed[k]);
            let r = &self.routes[i];
            let Some(params) = r.pattern.matches(path) else {
                continue;
            };
            if r.method == *method {
                return Dispatch::Handler(&*r.handler, params, Some(i));
            }
            if *method == Method::Head && r.method == Method::Get && head_fallback.is_none() {
                head_fallback = Some((&*r.handler, params, i));
            }
            if !allowed.contains(&r.method) {
                allowed.push(r.method.clone());
            }
        }
        if let Some((h, p, i)) = head_fallback {
            return Dispatch::Handler(h, p, Some(i));
        }
        if !allowed.is_empty() {
            if allowed.contains(&Method::Get) && !allowed.contains(&Method::Head) {
                allowed.push(Method::Head);
            }
            return Dispatch::MethodNotAllowed(allowed);
        }
        // A path that would match a route but for an escape that does not decode (`%zz`, or
        // one that is not UTF-8) is the client's mistake, not an unknown page.
        // The answer is that of the first route of this shape for the method, else of any.
        let shaped: Vec<&Route> = self
            .routes
            .iter()
            .filter(|r| r.pattern.shape_matches(path))
            .collect();
        if !shaped.is_empty() {
            let route = shaped
                .iter()
                .find(|r| r.method == *method)
                .unwrap_or(&shaped[0]);
            return Dispatch::BadEscape(route.bad_escape.as_ref());
        }
        match &self.fallback {
            Some(h) => Dispatch::Handler(&**h, Vec::new(), None),
            None => Dispatch::NotFound,
        }
    }
}

/// The 405 response for a path that exists under other methods.
fn method_not_allowed(allowed: &[Method]) -> Response {
    let allow = allowed
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    Response::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        .with_header("allow", allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, path: &str) -> Option<Vec<(String, String)>> {
        Pattern::parse(p).matches(path)
    }

    #[test]
    fn patterns() {
        assert_eq!(m("/", "/"), Some(vec![]));
        assert_eq!(m("/", "/x"), None);
        assert_eq!(m("/blah", "/blah"), Some(vec![]));
        assert_eq!(m("/blah", "/blah/"), None);
        assert_eq!(m("/blah", "/blahx"), None);
        assert_eq!(
            m("/streams/{s}", "/streams/a%20b"),
            Some(vec![("s".into(), "a b".into())])
        );
        assert_eq!(m("/streams/{s}", "/streams/"), None);
        assert_eq!(m("/streams/{s}", "/streams/a/b"), None);
        assert_eq!(
            m("/static/{*p}", "/static/css/site.css"),
            Some(vec![("p".into(), "css/site.css".into())])
        );
        assert_eq!(
            m("/static/{*p}", "/static/"),
            Some(vec![("p".into(), "".into())])
        );
        assert_eq!(m("/static/{*p}", "/stat"), None);
        assert_eq!(m("/static/{*p}", "/static/%zz"), None, "bad escape");
        assert_eq!(m("/x", "x"), None, "no leading slash");
    }

    #[test]
    fn literal_patterns_match_as_the_segment_walk_does() {
        let patterns = ["/", "/blah", "/all/subscribe", "/a/", "/a//b"];
        let paths = [
            "/",
            "",
            "/blah",
            "/blah/",
            "/Blah",
            "/blah%20",
            "/all",
            "/all/subscribe",
            "/all/subscribe/",
            "/a",
            "/a/",
            "/a//b",
            "/a/b",
            "x",
            "//",
        ];
        for p in patterns {
            let fast = Pattern::parse(p);
            assert!(fast.exact.is_some(), "{p} has no parameters");
            let walk = Pattern {
                exact: None,
                ..fast.clone()
            };
            for path in paths {
                assert_eq!(fast.matches(path), walk.matches(path), "{p} vs {path:?}");
            }
        }
        assert!(Pattern::parse("/streams/{s}").exact.is_none());
        assert!(Pattern::parse("/static/{*p}").exact.is_none());
    }

    /// A route's own answer to a path of its shape that does not decode; other routes keep the
    /// plain 400.
    #[test]
    fn bad_escapes_get_the_route_s_answer() {
        let r = Router::new()
            .get("/s/{id}", |_r: Request| async { Response::html("s") })
            .on_bad_escape(|_req: &Request| Response::new(StatusCode(422), "mine"))
            .get("/t/{id}", |_r: Request| async { Response::html("t") });
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let get = |path: &str| {
            let resp =
                rt.block_on(r.handle(Request::new(Method::Get, path, &[], bytes::Bytes::new())));
            let status = resp.status().0;
            (status, resp)
        };
        assert_eq!(get("/s/a%zz").0, 422);
        assert_eq!(get("/s/%ff").0, 422);
        assert_eq!(get("/t/a%zz").0, 400);
        assert_eq!(get("/s/a%20b").0, 200);
    }

    /// The index of exact paths answers as trying every route in order would: the first route
    /// that matches, exact or patterned, added before or after the exact one.
    #[test]
    fn exact_paths_find_the_first_matching_route_in_order() {
        let h = |_r: Request| async { Response::html("") };
        let r = Router::new()
            .get("/{page}", h)
            .get("/blah", h)
            .post("/form", h)
            .get("/{*any}", h)
            .get("/form", h);
        let route = |m: Method, p: &str| match r.dispatch(&m, p) {
            Dispatch::Handler(_, _, i) => Ok(i),
            Dispatch::MethodNotAllowed(a) => Err(a),
            _ => panic!("no answer for {m} {p}"),
        };
        assert_eq!(
            route(Method::Get, "/blah"),
            Ok(Some(0)),
            "the pattern before it"
        );
        assert_eq!(route(Method::Post, "/form"), Ok(Some(2)));
        assert_eq!(route(Method::Get, "/form"), Ok(Some(0)));
        assert_eq!(
            route(Method::Get, "/x/y"),
            Ok(Some(3)),
            "not indexed: every route tried"
        );
        assert_eq!(
            route(Method::Delete, "/form"),
            Err(vec![Method::Get, Method::Post, Method::Head])
        );
        // The same routes tried one by one agree on every path.
        let plain = |m: &Method, p: &str| {
            r.routes
                .iter()
                .position(|x| x.pattern.matches(p).is_some() && x.method == *m)
        };
        for p in ["/blah", "/form", "/x/y", "/", "/blah/"] {
            for m in [Method::Get, Method::Post] {
                if let Dispatch::Handler(_, _, i) = r.dispatch(&m, p) {
                    assert_eq!(i, plain(&m, p), "{m} {p}");
                }
            }
        }
    }

    #[test]
    fn dispatch_405_and_head() {
        let r = Router::new()
            .get("/a", |_r: Request| async { Response::html("a") })
            .post("/b", |_r: Request| async { Response::html("b") });
        assert!(matches!(
            r.dispatch(&Method::Get, "/a"),
            Dispatch::Handler(..)
        ));
        assert!(matches!(
            r.dispatch(&Method::Head, "/a"),
            Dispatch::Handler(..)
        ));
        match r.dispatch(&Method::Get, "/b") {
            Dispatch::MethodNotAllowed(a) => assert_eq!(a, vec![Method::Post]),
            _ => panic!("expected 405"),
        }
        match r.dispatch(&Method::Delete, "/a") {
            Dispatch::MethodNotAllowed(a) => assert_eq!(a, vec![Method::Get, Method::Head]),
            _ => panic!("expected 405"),
        }
        assert!(matches!(r.dispatch(&Method::Get, "/c"), Dispatch::NotFound));
        // Regression (issue 13, class 11): a bad escape in a parameter was a 404.
        let r = Router::new().get("/streams/{s}", |_r: Request| async { Response::html("s") });
        assert!(matches!(
            r.dispatch(&Method::Get, "/streams/a%zz"),
            Dispatch::BadEscape(None)
        ));
        assert!(matches!(
            r.dispatch(&Method::Get, "/streams/%ff"),
            Dispatch::BadEscape(None)
        ));
        assert!(matches!(
            r.dispatch(&Method::Get, "/other/a%zz"),
            Dispatch::NotFound
        ));
    }
}
