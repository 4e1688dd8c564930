//! [`Live`]: a set of live views mounted together, what an application builds once and serves:
//! the pages at their paths, the socket at `{prefix}/websocket`, the clients at
//! `{prefix}/assets/`, broadcasts to subscribed views, and the counters of it all.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use galleon_http::{Request, Response, Router, StatusCode, sync_handler};
use galleon_template::Engine;
use serde_json::Value as Json;

use crate::limits::Limits;
use crate::page::{Layout, default_layout};
use crate::shared::{Factory, Route, Shared};
use crate::token::Signer;
use crate::view::{Info, LiveView};

/// Why a [`LiveBuilder`] could not build.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A view's template is missing or was not compiled for live renders.
    #[error("the view at {path}: {source}")]
    Template {
        /// The view's path.
        path: String,
        /// What the engine said.
        source: galleon_template::Error,
    },
    /// A path or the prefix does not start with `/`, or ends with one, or two views share it.
    #[error("{0}")]
    Path(String),
    /// No signer was given and none could be generated.
    #[error("generating the token secret: {0}")]
    Secret(std::io::Error),
}

/// Builds a [`Live`]; see [`Live::builder`].
pub struct LiveBuilder {
    engine: Engine,
    prefix: String,
    views: Vec<(String, String, Factory)>,
    signer: Option<Signer>,
    limits: Limits,
    origins: Vec<String>,
    head: String,
    layout: Layout,
}

impl std::fmt::Debug for LiveBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveBuilder")
            .field("prefix", &self.prefix)
            .field("views", &self.views.len())
            .finish_non_exhaustive()
    }
}

impl LiveBuilder {
    /// Serves view `factory()` at `path`, rendered with the engine's template `template`.
    pub fn view<V, F>(mut self, path: &str, template: &str, factory: F) -> LiveBuilder
    where
        V: LiveView,
        F: Fn() -> V + Send + Sync + 'static,
    {
        let factory: Factory = Arc::new(move || Box::new(factory()) as Box<dyn LiveView>);
        self.views
            .push((path.to_owned(), template.to_owned(), factory));
        self
    }

    /// Where the socket and the scripts live: `{prefix}/websocket`, `{prefix}/assets/`.
    /// Default `/live`.
    pub fn prefix(mut self, prefix: &str) -> LiveBuilder {
        prefix.clone_into(&mut self.prefix);
        self
    }

    /// Signs the session and CSRF tokens with `signer`. Without one, a secret is generated at
    /// build: pages rendered before a restart then rejoin as stale and reload.
    pub fn signer(mut self, signer: Signer) -> LiveBuilder {
        self.signer = Some(signer);
        self
    }

    /// The bounds sockets are held to (default [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> LiveBuilder {
        self.limits = limits;
        self
    }

    /// Lets pages served from `origin` (`https://example.com`) open sockets, besides the
    /// request's own host.
    pub fn allow_origin(mut self, origin: &str) -> LiveBuilder {
        self.origins.push(origin.trim_end_matches('/').to_owned());
        self
    }

    /// HTML added to the default layout's `<head>` (a stylesheet link, say).
    pub fn head(mut self, html: &str) -> LiveBuilder {
        html.clone_into(&mut self.head);
        self
    }

    /// Lays pages out with `layout` instead of [`default_layout`].
    pub fn layout(
        mut self,
        layout: impl Fn(&crate::Page<'_>) -> String + Send + Sync + 'static,
    ) -> LiveBuilder {
        self.layout = Arc::new(layout);
        self
    }

    /// Checks the paths and templates and builds the mount.
    ///
    /// # Errors
    ///
    /// [`LiveError`]: a template missing or not live, a bad or repeated path, no secret.
    pub fn build(self) -> Result<Live, LiveError> {
        let good = |p: &str| p.starts_with('/') && (p == "/" || !p.ends_with('/'));
        if !good(&self.prefix) || self.prefix == "/" {
            return Err(LiveError::Path(format!(
                "the prefix {:?} must start with / and not end with one",
                self.prefix
            )));
        }
        let mut routes = HashMap::new();
        for (path, template, factory) in self.views {
            if !good(&path) || path.contains(['?', '#']) {
                return Err(LiveError::Path(format!(
                    "the view path {path:?} must start with / and not end with one"
                )));
            }
            let (socket, assets) = (
                format!("{}/websocket", self.prefix),
                format!("{}/assets", self.prefix),
            );
            if path == socket || path == assets || path.starts_with(&format!("{assets}/")) {
                return Err(LiveError::Path(format!(
                    "the view path {path:?} is taken by the socket ({socket}) or the scripts \
                     ({assets}/)"
                )));
            }
            let template = self
                .engine
                .live(&template)
                .map_err(|source| LiveError::Template {
                    path: path.clone(),
                    source,
                })?;
            let counters = Default::default();
            let route = Route {
                template,
                factory,
                counters,
            };
            if routes.insert(path.clone(), route).is_some() {
                return Err(LiveError::Path(format!("two views at {path:?}")));
            }
        }
        let signer = match self.signer {
            Some(s) => s,
            None => Signer::generate().map_err(LiveError::Secret)?,
        };
        let shared = Shared::new(
            self.prefix,
            routes,
            signer,
            self.limits,
            self.origins,
            self.head,
        );
        let app_js: Arc<str> = crate::page::app_js(&shared.prefix).into();
        Ok(Live {
            shared: Arc::new(shared),
            layout: self.layout,
            app_js,
        })
    }
}

/// Live views mounted together, cheap to clone (one `Arc`).
///
/// # Examples
///
/// ```
/// use galleon_live::{Live, LiveView, Socket, ViewError};
/// use galleon_template::Engine;
/// use serde_json::Value;
///
/// struct Counter;
/// impl LiveView for Counter {
///     fn mount(&mut self, _: &Value, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
///         s.assign("count", 0);
///         Ok(())
///     }
///     fn handle_event(&mut self, ev: &str, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
///         if ev == "inc" { s.update_int("count", |n| n + 1) }
///         Ok(())
///     }
/// }
///
/// let engine = Engine::builder().live(true)
///     .from_source("counter", r#"<button phx-click="inc"><%= @count %></button>"#)?;
/// let live = Live::builder(&engine).view("/counter", "counter", || Counter).build()?;
/// // Mounts GET /counter, /live/websocket and /live/assets/*.
/// let router = live.mount(galleon_http::Router::new());
/// assert_eq!(router.len(), 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Live {
    shared: Arc<Shared>,
    layout: Layout,
    app_js: Arc<str>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("prefix", &self.shared.prefix)
            .field("views", &self.shared.routes.len())
            .finish_non_exhaustive()
    }
}

impl Live {
    /// A builder for views whose templates come from `engine` (built with
    /// [`EngineBuilder::live`](galleon_template::EngineBuilder::live)).
    pub fn builder(engine: &Engine) -> LiveBuilder {
        LiveBuilder {
            engine: engine.clone(),
            prefix: "/live".to_owned(),
            views: Vec::new(),
            signer: None,
            limits: Limits::default(),
            origins: Vec::new(),
            head: String::new(),
            layout: Arc::new(default_layout),
        }
    }

    /// Adds the mount's routes to `router`: `GET` each view's path, the socket and the assets.
    pub fn mount(&self, router: Router) -> Router {
        let mut router = router;
        let mut paths: Vec<&String> = self.shared.routes.keys().collect();
        paths.sort();
        for path in paths {
            let live = self.clone();
            router = router.get(path, sync_handler(move |req: Request| live.page(&req)));
        }
        let live = self.clone();
        let prefix = &self.shared.prefix;
        router
            .get(
                &format!("{prefix}/websocket"),
                sync_handler({
                    let live = live.clone();
                    move |req: Request| live.socket(&req)
                }),
            )
            .get(
                &format!("{prefix}/assets/{{name}}"),
                sync_handler(move |req: Request| live.asset(req.param("name").unwrap_or(""))),
            )
    }

    /// The live page at `req`'s path, with an empty session (404 if no view is there).
    pub fn page(&self, req: &Request) -> Response {
        self.page_with_session(req, Json::Object(serde_json::Map::new()))
    }

    /// The live page at `req`'s path, its view mounted with `session` (signed into the page,
    /// so the view mounts with it again on join). Put the signed-in user here, say.
    pub fn page_with_session(&self, req: &Request, session: Json) -> Response {
        crate::page::render(&self.shared, &self.layout, req, session)
    }

    /// The live socket: upgrades `req` to a WebSocket, or answers why not.
    pub fn socket(&self, req: &Request) -> Response {
        crate::socket::accept(&self.shared, req)
    }

    /// The checks of [`Live::socket`] without the upgrade, for another HTTP stack: the
    /// [`SocketUpgrade`](crate::SocketUpgrade) to answer `101` with and run on the upgraded
    /// connection, or the refusal to send (426, 400, 403, 503) as it is.
    ///
    /// # Errors
    ///
    /// The refusal as a galleon-http response.
    pub fn check_socket(&self, req: &Request) -> Result<crate::SocketUpgrade, Response> {
        crate::socket::check(&self.shared, req)
    }

    /// One of the assets: `phoenix.min.js`, `phoenix_live_view.min.js`, `app.js`.
    pub fn asset(&self, name: &str) -> Response {
        let js = "text/javascript; charset=utf-8";
        if name == "app.js" {
            return Response::new(StatusCode::OK, self.app_js.to_string())
                .with_header("content-type", js)
                .with_header("cache-control", "no-cache");
        }
        match crate::assets::file(name) {
            Some((body, ty)) => Response::new(StatusCode::OK, galleon_iolist::IoList::from(body))
                .with_header("content-type", ty)
                .with_header("cache-control", "public, max-age=86400"),
            None => Response::not_found(),
        }
    }

    /// Sends `info` to every view subscribed to `topic` (with
    /// [`Socket::subscribe`](crate::Socket::subscribe)); returns how many it reached. It does
    /// not wait: each socket's inbox holds 256 messages, and a socket that falls further
    /// behind is closed so its client rejoins with a fresh render.
    pub fn broadcast(&self, topic: &str, info: Info) -> usize {
        self.shared
            .counters
            .broadcasts
            .fetch_add(1, Ordering::Relaxed);
        self.shared.pubsub.broadcast(topic, &info)
    }

    /// How many views are subscribed to `topic` now.
    pub fn subscribers(&self, topic: &str) -> usize {
        self.shared.pubsub.subscribers(topic)
    }

    /// Where the socket and the scripts live (`/live` unless the builder set another): the
    /// socket is `{prefix}/websocket`, the scripts `{prefix}/assets/{name}`.
    pub fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// The mount's paths, sorted.
    pub fn paths(&self) -> Vec<&str> {
        let mut p: Vec<&str> = self.shared.routes.keys().map(String::as_str).collect();
        p.sort_unstable();
        p
    }

    /// What the mount has done so far.
    pub fn stats(&self) -> LiveStats {
        let c = &self.shared.counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        LiveStats {
            sockets_open: c.sockets_open.load(Ordering::Relaxed),
            views_open: c.views_open.load(Ordering::Relaxed),
            sockets_refused: get(&c.sockets_refused),
            page_renders: get(&c.page_renders),
            joins: get(&c.joins),
            joins_refused: get(&c.joins_refused),
            events: get(&c.events),
            events_limited: get(&c.events_limited),
            crashes: get(&c.crashes),
            diffs: get(&c.diffs),
            diff_bytes: get(&c.diff_bytes),
            largest_diff: get(&c.largest_diff),
            rendered_bytes: get(&c.rendered_bytes),
            broadcasts: get(&c.broadcasts),
            views: self.view_stats(),
        }
    }

    /// Each page's figures, by path.
    fn view_stats(&self) -> Vec<ViewStats> {
        let mut views: Vec<ViewStats> = self
            .shared
            .routes
            .iter()
            .map(|(path, route)| {
                let c = &route.counters;
                let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                let joins = get(&c.joins);
                ViewStats {
                    path: path.clone(),
                    views_open: c.views_open.load(Ordering::Relaxed),
                    joins,
                    first_render_bytes: get(&c.rendered_bytes).checked_div(joins).unwrap_or(0),
                    diffs: get(&c.diffs),
                    diff_bytes: get(&c.diff_bytes),
                    diff_p50_bytes: c.diff_quantile(0.5),
                    diff_p99_bytes: c.diff_quantile(0.99),
                }
            })
            .collect();
        views.sort_by(|a, b| a.path.cmp(&b.path));
        views
    }
}

/// Counters of a [`Live`] mount since it was built.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LiveStats {
    /// Sockets open now.
    pub sockets_open: usize,
    /// Views joined now, over all sockets.
    pub views_open: usize,
    /// Sockets refused: foreign origin, bad CSRF token, the connection limit.
    pub sockets_refused: u64,
    /// Pages rendered over HTTP.
    pub page_renders: u64,
    /// Views joined.
    pub joins: u64,
    /// Joins refused: stale token, no view at the URL, too many views on a socket.
    pub joins_refused: u64,
    /// Client events handled.
    pub events: u64,
    /// Messages refused by the rate limit.
    pub events_limited: u64,
    /// Views that failed to mount or whose handler failed.
    pub crashes: u64,
    /// Diffs sent (event replies and pushes that changed something).
    pub diffs: u64,
    /// Bytes of those diffs (the JSON of `diff`, without the frame around it).
    pub diff_bytes: u64,
    /// The largest diff sent, in bytes.
    pub largest_diff: u64,
    /// Bytes of the whole renders sent on joins (statics included).
    pub rendered_bytes: u64,
    /// Broadcasts sent ([`Live::broadcast`] and `Socket::broadcast`).
    pub broadcasts: u64,
    /// Each page's figures, sorted by path.
    pub views: Vec<ViewStats>,
}

/// The figures of one live page (all its views, on every socket).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ViewStats {
    /// The page's path.
    pub path: String,
    /// Its views joined now.
    pub views_open: usize,
    /// Its views joined since the start.
    pub joins: u64,
    /// The mean size of its first render (the join's `rendered`, statics included), bytes.
    pub first_render_bytes: u64,
    /// Its diffs sent.
    pub diffs: u64,
    /// Bytes of those diffs.
    pub diff_bytes: u64,
    /// The median diff, bytes (within 1%; 0 before the first).
    pub diff_p50_bytes: u64,
    /// The 99th-percentile diff, bytes.
    pub diff_p99_bytes: u64,
}
