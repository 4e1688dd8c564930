//! The diagnostics routes of `galleon serve`: `GET /_galleon` (the live page),
//! `GET /_galleon/stats.json`, `GET /metrics` (Prometheus) and `GET /_galleon/health` (for load
//! balancers). All but health answer loopback peers only unless `--diagnostics-open`.

use std::sync::Arc;

use galleon_http::{Request, Response, Router, StatusCode};
use galleon_offload::Pool;
use prometheus_client::metrics::MetricType;

use super::record::Stats;
use super::{page, prom};

/// One figure of the event store: name (a Prometheus metric name), help, type and value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Figure {
    /// Metric name, `galleon_events_...`.
    pub(crate) name: &'static str,
    /// One line of help.
    pub(crate) help: &'static str,
    /// Counter or gauge.
    pub(crate) counter: bool,
    /// Its value now.
    pub(crate) value: f64,
}

/// Reads the event store's figures at the moment of a request.
pub(crate) type EventsSource = Arc<dyn Fn() -> Vec<Figure> + Send + Sync>;

/// What the diagnostics routes read.
#[derive(Clone)]
pub(crate) struct Diagnostics {
    /// The server's statistics.
    pub(crate) stats: Arc<Stats>,
    /// The CPU pool.
    pub(crate) pool: Pool,
    /// The event store's figures, when a store is served.
    pub(crate) events: Option<EventsSource>,
    /// Answer any peer, not only loopback (`--diagnostics-open`).
    pub(crate) open: bool,
}

impl std::fmt::Debug for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Diagnostics")
            .field("open", &self.open)
            .field("events", &self.events.is_some())
            .finish_non_exhaustive()
    }
}

/// The live page.
pub(crate) const PAGE_PATH: &str = "/_galleon";
/// The statistics as JSON.
pub(crate) const JSON_PATH: &str = "/_galleon/stats.json";
/// Prometheus's scrape target.
pub(crate) const METRICS_PATH: &str = "/metrics";
/// The load balancers' check.
pub(crate) const HEALTH_PATH: &str = "/_galleon/health";

impl Diagnostics {
    /// Refuses a peer that is not loopback unless the routes are open; refuses everything when
    /// statistics are off.
    fn refuse(&self, req: &Request) -> Option<Response> {
        if !self.open && !req.peer().is_none_or(|p| p.ip().is_loopback()) {
            return Some(Response::error(
                StatusCode(403),
                "diagnostics answer loopback peers only (see --diagnostics-open)",
            ));
        }
        if !self.stats.recording() {
            return Some(Response::error(
                StatusCode::NOT_FOUND,
                "statistics are off (--stats off)",
            ));
        }
        None
    }

    fn figures(&self) -> Option<Vec<Figure>> {
        self.events.as_ref().map(|f| f())
    }
}

/// Adds the diagnostics routes to `router`.
pub(crate) fn mount(router: Router, d: Diagnostics) -> Router {
    let (d1, d2, d3, d4) = (d.clone(), d.clone(), d.clone(), d);
    router
        .get(PAGE_PATH, move |req: Request| {
            let d = d1.clone();
            async move {
                if let Some(r) = d.refuse(&req) {
                    return r;
                }
                let rows: Option<Vec<(String, String)>> = d.figures().map(|fs| {
                    fs.iter()
                        .map(|f| (f.help.to_owned(), format_value(f.value)))
                        .collect()
                });
                let html = page::render(&d.stats.snapshot(), &d.pool.snapshot(), rows.as_deref());
                Response::html(html).with_header("cache-control", "no-store")
            }
        })
        .get(JSON_PATH, move |req: Request| {
            let d = d2.clone();
            async move {
                if let Some(r) = d.refuse(&req) {
                    return r;
                }
                let events = d.figures().map(|fs| {
                    fs.iter()
                        .map(|f| (f.name.to_owned(), serde_json::json!(f.value)))
                        .collect::<serde_json::Map<_, _>>()
                });
                json(&serde_json::json!({
                    "server": d.stats.snapshot(),
                    "offload": d.pool.snapshot(),
                    "events": events,
                }))
            }
        })
        .get(METRICS_PATH, move |req: Request| {
            let d = d3.clone();
            async move {
                if let Some(r) = d.refuse(&req) {
                    return r;
                }
                let events = d.figures().map(|fs| {
                    fs.iter()
                        .map(|f| {
                            let kind = if f.counter {
                                MetricType::Counter
                            } else {
                                MetricType::Gauge
                            };
                            (f.name, f.help, kind, f.value)
                        })
                        .collect()
                });
                let scrape = prom::Scrape {
                    stats: d.stats.snapshot(),
                    pool: d.pool.snapshot(),
                    events,
                };
                match prom::render(scrape) {
                    Ok(text) => Response::new(StatusCode::OK, text)
                        .with_header("content-type", prom::CONTENT_TYPE),
                    Err(_) => Response::error(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
                }
            }
        })
        .get(HEALTH_PATH, move |_req: Request| {
            let uptime = d4.stats.uptime_s();
            async move {
                json(&serde_json::json!({ "status": "ok", "uptime_s": uptime.floor() }))
                    .with_header("cache-control", "no-store")
            }
        })
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

fn json(value: &serde_json::Value) -> Response {
    Response::new(StatusCode::OK, value.to_string()).with_header("content-type", "application/json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use galleon_http::Method;

    fn diagnostics(open: bool, record: bool) -> Diagnostics {
        Diagnostics {
            stats: Arc::new(Stats::new(record, false)),
            pool: Pool::new(galleon_offload::Config::default()).unwrap(),
            events: None,
            open,
        }
    }

    fn get(target: &str, peer: &str) -> Request {
        Request::new(Method::Get, target, &[], Bytes::new()).with_peer(peer.parse().unwrap())
    }

    #[tokio::test]
    async fn diagnostics_answer_loopback_only_unless_opened_and_health_answers_all() {
        let closed = mount(Router::new(), diagnostics(false, true));
        let open = mount(Router::new(), diagnostics(true, true));
        for path in [PAGE_PATH, JSON_PATH, METRICS_PATH] {
            assert_eq!(
                closed.handle(get(path, "127.0.0.1:9")).await.status().0,
                200,
                "{path}"
            );
            assert_eq!(
                closed.handle(get(path, "[::1]:9")).await.status().0,
                200,
                "{path}"
            );
            assert_eq!(
                closed.handle(get(path, "192.0.2.7:9")).await.status().0,
                403,
                "{path}"
            );
            assert_eq!(
                open.handle(get(path, "192.0.2.7:9")).await.status().0,
                200,
                "{path}"
            );
        }
        assert_eq!(
            closed
                .handle(get(HEALTH_PATH, "192.0.2.7:9"))
                .await
                .status()
                .0,
            200
        );
    }

    #[tokio::test]
    async fn with_statistics_off_the_pages_say_so() {
        let off = mount(Router::new(), diagnostics(false, false));
        assert_eq!(
            off.handle(get(JSON_PATH, "127.0.0.1:9")).await.status().0,
            404
        );
        assert_eq!(
            off.handle(get(HEALTH_PATH, "127.0.0.1:9")).await.status().0,
            200
        );
    }
}
