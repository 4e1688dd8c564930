//! [`Diagnostics`]: what the diagnostics routes read (the statistics, optionally a CPU pool and
//! extra figures) and who they answer, and their answers, which both adapters send: the
//! stats page (live in galleon-http, see `live.rs`), `stats.json`, `/metrics` and health. All but health answer loopback peers only unless
//! opened, or only requests with a bearer token when one is set ([`Diagnostics::guard`]); with
//! recording off they answer 404.

use std::net::SocketAddr;
use std::sync::Arc;

use galleon_http::Guard;

use galleon_offload::{Pool, PoolSnapshot};
use galleon_template::compiled::IoList;

use crate::figures::Figure;
use crate::page::{self, Extras};
use crate::prom::{self, METRICS_CONTENT_TYPE, Scrape};
use crate::record::Stats;

/// The live page.
pub const PAGE_PATH: &str = "/_galleon";
/// The statistics as JSON.
pub const JSON_PATH: &str = "/_galleon/stats.json";
/// Prometheus's scrape target.
pub const METRICS_PATH: &str = "/metrics";
/// The load balancers' check: always open, also with recording off.
pub const HEALTH_PATH: &str = "/_galleon/health";

/// `stats.json`'s own keys, which a figure set's key may not take.
const RESERVED_KEYS: [&str; 2] = ["server", "offload"];

type FigureSource = Arc<dyn Fn() -> Vec<Figure> + Send + Sync>;

/// One set of extra figures: its `stats.json` key, its heading on the page, its source.
#[derive(Clone)]
struct FigureSet {
    key: &'static str,
    title: &'static str,
    source: FigureSource,
}

/// What the diagnostics routes read and whom they answer: the statistics, and optionally the
/// CPU pool, sets of extra figures, and peers beyond loopback. `&Arc<Stats>` converts into the
/// defaults (no pool, no figures, loopback only).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use galleon_stats::{Diagnostics, Figure, Stats, StatsConfig};
///
/// let stats = Arc::new(Stats::new(StatsConfig::default()));
/// let pool = galleon_offload::Pool::new(galleon_offload::Config::default())?;
/// let diagnostics = Diagnostics::new(&stats)
///     .pool(pool)
///     .figures("events", "Event store", || {
///         vec![Figure::gauge("galleon_events_subscribers", "subscriptions open", 0.0)]
///     })
///     .open(false);
/// assert!(diagnostics.json()["events"].is_object());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Diagnostics {
    stats: Arc<Stats>,
    pool: Option<Pool>,
    figures: Vec<FigureSet>,
    guard: Guard,
}

impl std::fmt::Debug for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.figures.iter().map(|s| s.key).collect();
        f.debug_struct("Diagnostics")
            .field("stats", &self.stats)
            .field("pool", &self.pool.is_some())
            .field("figures", &keys)
            .field("guard", &self.guard)
            .finish()
    }
}

impl From<&Arc<Stats>> for Diagnostics {
    fn from(stats: &Arc<Stats>) -> Diagnostics {
        Diagnostics::new(stats)
    }
}

/// Which diagnostics route is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Page,
    Json,
    Metrics,
    Health,
}

/// A diagnostics answer, before an adapter turns it into its framework's response.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    /// Send `www-authenticate: Bearer` (a 401 of the guard).
    pub(crate) challenge: bool,
    /// Send `cache-control: no-store`.
    pub(crate) no_store: bool,
    pub(crate) body: IoList,
}

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const HTML: &str = "text/html; charset=utf-8";

impl Answer {
    fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            status,
            content_type,
            challenge: false,
            no_store: false,
            body: IoList::from_scratch(body.into()),
        }
    }

    /// A plain-text error: the status, then `message` on its own line (galleon-http's format).
    fn error(status: u16, message: &str) -> Answer {
        Answer::new(status, TEXT, format!("{status} {message}\n"))
    }
}

impl Diagnostics {
    /// The routes of `stats`: no pool, no extra figures, loopback peers only.
    pub fn new(stats: &Arc<Stats>) -> Diagnostics {
        Diagnostics {
            stats: stats.clone(),
            pool: None,
            figures: Vec::new(),
            guard: Guard::default(),
        }
    }

    /// Also shows `pool`'s state and per-kind hops (`offload` in `stats.json`,
    /// `galleon_offload_*` in `/metrics`, the page's "CPU pool").
    pub fn pool(mut self, pool: Pool) -> Diagnostics {
        self.pool = Some(pool);
        self
    }

    /// Also shows the figures `source` returns, read at each request: under `key` in
    /// `stats.json` (an object of name to value), as a table headed `title` on the page, and
    /// as gauges and counters in `/metrics`.
    ///
    /// # Panics
    /// If `key` is `server` or `offload`, `stats.json`'s own keys.
    pub fn figures(
        mut self,
        key: &'static str,
        title: &'static str,
        source: impl Fn() -> Vec<Figure> + Send + Sync + 'static,
    ) -> Diagnostics {
        assert!(
            !RESERVED_KEYS.contains(&key),
            "figure key `{key}` is one of stats.json's own keys"
        );
        self.figures.push(FigureSet {
            key,
            title,
            source: Arc::new(source),
        });
        self
    }

    /// Answers any peer, not only loopback ones (`false` by default: the routes show routes,
    /// traffic and timings). Health always answers everyone.
    pub fn open(mut self, open: bool) -> Diagnostics {
        self.guard = self.guard.open(open);
        self
    }

    /// Who may read the routes (health aside): loopback peers, any peer, or requests with a
    /// bearer token ([`Guard`]; behind a same-host proxy every client is loopback, so only a
    /// token protects them there). Replaces [`Diagnostics::open`]'s setting.
    pub fn guard(mut self, guard: Guard) -> Diagnostics {
        self.guard = guard;
        self
    }

    /// The statistics shown.
    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    fn read_figures(&self) -> Vec<(&'static str, &'static str, Vec<Figure>)> {
        self.figures
            .iter()
            .map(|s| (s.key, s.title, (s.source)()))
            .collect()
    }

    /// `stats.json`: `{"server": Snapshot, "offload": PoolSnapshot or null, KEY: {name:
    /// value, ...} for each figure set}`.
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::Map::new();
        v.insert(
            "server".to_owned(),
            serde_json::json!(self.stats.snapshot()),
        );
        v.insert(
            "offload".to_owned(),
            serde_json::json!(self.pool.as_ref().map(Pool::snapshot)),
        );
        for (key, _, figures) in self.read_figures() {
            let values = figures
                .iter()
                .map(|f| (f.key(), serde_json::json!(f.value)))
                .collect::<serde_json::Map<_, _>>();
            v.insert(key.to_owned(), serde_json::Value::Object(values));
        }
        serde_json::Value::Object(v)
    }

    /// `/metrics`: Prometheus's text format (content type [`METRICS_CONTENT_TYPE`]).
    pub fn metrics(&self) -> Result<String, std::fmt::Error> {
        prom::render(Scrape {
            stats: self.stats.snapshot(),
            pool: self.pool.as_ref().map(Pool::snapshot),
            figures: self
                .read_figures()
                .into_iter()
                .flat_map(|(_, _, f)| f)
                .collect(),
        })
    }

    /// The plain stats page (`text/html`, reloading itself every
    /// [`REFRESH_SECS`](crate::REFRESH_SECS) s): what the axum routes serve at `/_galleon`;
    /// galleon-http's [`mount`](crate::mount) serves the same content as a live page.
    pub fn page(&self) -> Result<IoList, galleon_template::Error> {
        self.with_page_inputs(page::render)
    }

    /// The page's assigns now, read afresh (the live view's, at mount and each tick).
    pub(crate) fn page_assigns(&self) -> serde_json::Map<String, serde_json::Value> {
        self.with_page_inputs(page::assigns)
    }

    /// `f` of a fresh snapshot, the pool's state and the figures.
    fn with_page_inputs<T>(&self, f: impl FnOnce(&crate::Snapshot, Extras<'_>) -> T) -> T {
        let pool: Option<PoolSnapshot> = self.pool.as_ref().map(Pool::snapshot);
        let sets: Vec<(&str, Vec<Figure>)> = self
            .read_figures()
            .into_iter()
            .map(|(_, title, f)| (title, f))
            .collect();
        f(
            &self.stats.snapshot(),
            Extras {
                pool: pool.as_ref(),
                figures: &sets,
            },
        )
    }

    /// The answer to `route` for a peer that is loopback (or trusted as such) or not.
    pub(crate) fn answer(
        &self,
        route: Route,
        peer: Option<SocketAddr>,
        authorization: Option<&[u8]>,
    ) -> Answer {
        if route != Route::Health
            && let Some(refusal) = self.refusal(peer, authorization)
        {
            return refusal;
        }
        match route {
            Route::Health => {
                let uptime = self.stats.uptime().as_secs_f64().floor();
                let body = serde_json::json!({ "status": "ok", "uptime_s": uptime });
                let mut a = Answer::new(200, JSON, body.to_string());
                a.no_store = true;
                a
            }
            Route::Page => match self.page() {
                Ok(body) => Answer {
                    status: 200,
                    content_type: HTML,
                    challenge: false,
                    no_store: true,
                    body,
                },
                Err(e) => {
                    tracing::error!(error = %e, "rendering the stats page");
                    Answer::error(500, "internal error")
                }
            },
            Route::Json => Answer::new(200, JSON, self.json().to_string()),
            Route::Metrics => match self.metrics() {
                Ok(text) => Answer::new(200, METRICS_CONTENT_TYPE, text),
                Err(_) => Answer::error(500, "internal error"),
            },
        }
    }

    /// Refuses what the guard refuses (a peer that is not loopback unless the routes are open; a
    /// request without the token when one is set), and everything when
    /// recording is off.
    pub(crate) fn refusal(
        &self,
        peer: Option<SocketAddr>,
        authorization: Option<&[u8]>,
    ) -> Option<Answer> {
        if let Err((status, message)) = self.guard.allows(peer, authorization) {
            let mut a = Answer::error(status, message);
            a.challenge = status == 401;
            return Some(a);
        }
        if !self.stats.recording() {
            return Some(Answer::error(
                404,
                "statistics are off (StatsConfig::record)",
            ));
        }
        None
    }
}
