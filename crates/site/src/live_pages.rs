//! The site's live pages (galleon-live): `/live/counter`, `/live/signup` (a form checked as
//! you type) and `/live/orders` (300 orders every visitor shares: advancing one updates every
//! open copy of the page, filtered with patch links). With an event store the orders are its
//! `order-N` streams: a click appends `OrderAdvanced`, and every page, on every node of the
//! store, follows the appends. Templates are the site's `live/*.html.eex`; the socket is
//! `/live/websocket`, the clients `/live/assets/`.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use galleon_eventstore::{EventData, EventFilter, ExpectedVersion, RecordedEvent, Store};
use galleon_http::Router;
use galleon_live::{Info, Limits, Live, LiveView, Signer, Socket, ViewError};
use galleon_template::{Engine, Value};
use serde_json::Value as Json;

/// How the live pages are served.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Serve them (`galleon serve --live off` turns them off).
    pub enabled: bool,
    /// The bounds sockets are held to.
    pub limits: Limits,
    /// The token secret (at least 32 bytes); `None`: generated at start, so pages open before
    /// a restart reload once when they reconnect.
    pub secret: Option<Vec<u8>>,
}

impl Default for LiveConfig {
    fn default() -> LiveConfig {
        LiveConfig {
            enabled: true,
            limits: Limits::default(),
            secret: None,
        }
    }
}

/// Orders on the page, and the statuses an order advances through.
pub const ORDERS: usize = 300;
const STATUSES: [&str; 4] = ["pending", "packed", "shipped", "delivered"];
const CUSTOMERS: [&str; 8] = [
    "Ada", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia",
];

/// The broadcast topic of order changes.
const TOPIC: &str = "orders";

/// The event store's category of the orders (streams `order-1` ... `order-300`), and the type
/// of their one event.
pub const ORDER_CATEGORY: &str = "order";
/// An order moved to `data.status`; `data.id` is its number.
pub const ORDER_ADVANCED: &str = "OrderAdvanced";

/// Mounts the live pages on `router` when enabled and the site has a `live/` directory: their
/// routes and the mount (for its statistics), or the router as it was.
///
/// # Errors
///
/// A template of `dir/live` that does not compile, or a bad secret.
pub fn mount(
    router: Router,
    dir: &Path,
    config: &LiveConfig,
    store: Option<&Store>,
) -> anyhow::Result<(Router, Option<Live>)> {
    let live_dir = dir.join("live");
    // A site without live pages (no `live/` directory) serves none.
    if !config.enabled || !live_dir.is_dir() {
        return Ok((router, None));
    }
    let engine = Engine::builder()
        .live(true)
        .trim(true)
        .load(&live_dir)
        .with_context(|| format!("compiling the live pages in {}", live_dir.display()))?;
    let orders = Orders::new();
    let (shared, store_for_views) = (orders.clone(), store.cloned());
    let mut builder = Live::builder(&engine)
        .limits(config.limits.clone())
        // No favicon request (a 404 in every browser console).
        .head("<link rel=\"stylesheet\" href=\"/static/site.css\"><link rel=\"icon\" href=\"data:,\">")
        .view("/live/counter", "counter.html.eex", || Counter)
        .view("/live/signup", "signup.html.eex", || Signup)
        .view("/live/orders", "orders.html.eex", move || OrderList {
            orders: shared.clone(),
            store: store_for_views.clone(),
            filter: None,
        });
    if let Some(secret) = &config.secret {
        let signer = Signer::new(secret).map_err(|e| anyhow::anyhow!("--live-secret: {e}"))?;
        builder = builder.signer(signer);
    }
    let browser = store.map(crate::live_events::EventBrowser::new);
    if let Some(b) = &browser {
        builder = builder.view(crate::live_events::PATH, "events.html.eex", b.view());
    }
    let live = builder.build()?;
    if let Some(b) = &browser {
        b.start(&live);
    }
    if let Some(store) = store {
        // The read model: every `order-*` append, from the first, applied then told to the
        // pages. Started inside the runtime `galleon serve` opens the site in.
        let appends = store.subscribe(0, EventFilter::category(ORDER_CATEGORY)?);
        galleon_live::follow_events(&live, appends, TOPIC, move |e| {
            orders.apply(e).then(|| Info::new(()))
        });
    }
    Ok((live.mount(router), Some(live)))
}

/// The live pages' figures for the stats page, `stats.json` and `/metrics`, read from
/// [`Live::stats`] (atomics) at each request: a source for
/// [`galleon_stats::Diagnostics::figures`].
pub fn figures(live: Live) -> impl Fn() -> Vec<galleon_stats::Figure> + Send + Sync + 'static {
    use galleon_stats::Figure;
    // Labels are `&'static str`: the paths are fixed when the mount is built, so each is
    // leaked once here, not per read.
    let paths: Vec<&'static str> = live
        .paths()
        .into_iter()
        .map(|p| &*Box::leak(p.to_owned().into_boxed_str()))
        .collect();
    // Diffs per second over the time between two reads of the figures.
    let last = Mutex::new(None::<(std::time::Instant, Vec<u64>, Vec<f64>)>);
    move || {
        let s = live.stats();
        let now = std::time::Instant::now();
        let diffs: Vec<u64> = s.views.iter().map(|v| v.diffs).collect();
        let rates = {
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            let rates = match &*last {
                Some((at, before, rates)) if now.duration_since(*at).as_secs_f64() < 0.5 => {
                    rates.clone()
                }
                Some((at, before, _)) => {
                    let secs = now.duration_since(*at).as_secs_f64();
                    let d = diffs
                        .iter()
                        .zip(before)
                        .map(|(n, b)| n.saturating_sub(*b) as f64);
                    d.map(|d| d / secs).collect()
                }
                None => vec![0.0; diffs.len()],
            };
            if last
                .as_ref()
                .is_none_or(|(at, _, _)| now.duration_since(*at).as_secs_f64() >= 0.5)
            {
                *last = Some((now, diffs.clone(), rates.clone()));
            }
            rates
        };
        let mut figures = vec![
            Figure::gauge(
                "galleon_live_sockets",
                "live sockets open",
                s.sockets_open as f64,
            ),
            Figure::counter("galleon_live_joins", "views joined", s.joins as f64),
            Figure::counter(
                "galleon_live_refused",
                "sockets and joins refused (origin, CSRF, stale token, limits)",
                (s.sockets_refused + s.joins_refused) as f64,
            ),
            Figure::counter(
                "galleon_live_events",
                "client events handled",
                s.events as f64,
            ),
            Figure::counter(
                "galleon_live_rate_limited",
                "messages refused by the rate limit",
                s.events_limited as f64,
            ),
            Figure::counter(
                "galleon_live_crashes",
                "views that failed",
                s.crashes as f64,
            ),
            Figure::counter(
                "galleon_live_diff_bytes",
                "bytes of diffs sent",
                s.diff_bytes as f64,
            ),
            Figure::gauge(
                "galleon_live_diff_largest_bytes",
                "largest diff, bytes",
                s.largest_diff as f64,
            ),
        ];
        // By page: one figure of each name per path, consecutive (one Prometheus metric).
        let per_view: [PerView; 5] = [
            ("galleon_live_views", "views connected", false, |v| {
                v.views_open as f64
            }),
            (
                "galleon_live_first_render_bytes",
                "first render, bytes",
                false,
                |v| v.first_render_bytes as f64,
            ),
            ("galleon_live_diffs", "diffs sent", true, |v| v.diffs as f64),
            (
                "galleon_live_diff_p50_bytes",
                "diff p50, bytes",
                false,
                |v| v.diff_p50_bytes as f64,
            ),
            (
                "galleon_live_diff_p99_bytes",
                "diff p99, bytes",
                false,
                |v| v.diff_p99_bytes as f64,
            ),
        ];
        for (name, help, counter, value) in per_view {
            for (v, path) in s.views.iter().zip(&paths) {
                let f = if counter {
                    Figure::counter(name, help, value(v))
                } else {
                    Figure::gauge(name, help, value(v))
                };
                figures.push(f.with_label("view", path));
            }
        }
        for (rate, path) in rates.iter().zip(&paths) {
            let f = Figure::gauge("galleon_live_diffs_per_second", "diffs per second", *rate);
            figures.push(f.with_label("view", path));
        }
        figures
    }
}

/// One per-page figure: name, help, whether a counter, and how it is read.
type PerView = (
    &'static str,
    &'static str,
    bool,
    fn(&galleon_live::ViewStats) -> f64,
);

/// `/live/counter`: `add` with `phx-value-by`, `reset`.
struct Counter;

impl LiveView for Counter {
    fn mount(&mut self, _: &Json, _: &Json, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("count", 0);
        s.page_title("Counter · galleon");
        Ok(())
    }

    fn handle_event(&mut self, event: &str, value: &Json, s: &mut Socket) -> Result<(), ViewError> {
        match event {
            "add" => {
                let by = value["by"].as_str().and_then(|b| b.parse::<i64>().ok());
                let by = by.filter(|b| b.abs() <= 1_000).ok_or("add needs by")?;
                s.update_int("count", |n| n.saturating_add(by));
            }
            "reset" => {
                s.assign("count", 0);
            }
            _ => return Err(format!("no event {event:?} on the counter").into()),
        }
        Ok(())
    }
}

/// `/live/signup`: `validate` on every change, `save` on submit.
struct Signup;

/// The form's fields from a `user[...]` payload, with their errors.
fn check(user: &Json) -> (String, String, &'static str, &'static str) {
    let field = |k: &str| user[k].as_str().unwrap_or("").trim().to_owned();
    let (name, email) = (field("name"), field("email"));
    let name_error = match name.chars().count() {
        0 => "",
        1 => "at least 2 characters",
        81.. => "at most 80 characters",
        _ => "",
    };
    let email_error = if email.is_empty() || email.contains('@') && !email.ends_with('@') {
        ""
    } else {
        "an email address has an @ and something after it"
    };
    (name, email, name_error, email_error)
}

impl LiveView for Signup {
    fn mount(&mut self, _: &Json, _: &Json, s: &mut Socket) -> Result<(), ViewError> {
        for k in ["name", "email", "name_error", "email_error", "result"] {
            s.assign(k, "");
        }
        s.page_title("Sign up · galleon");
        Ok(())
    }

    fn handle_event(&mut self, event: &str, value: &Json, s: &mut Socket) -> Result<(), ViewError> {
        let (name, email, name_error, email_error) = check(&value["user"]);
        match event {
            "validate" => {
                s.assign("name", name)
                    .assign("email", email)
                    .assign("name_error", name_error)
                    .assign("email_error", email_error)
                    .assign("result", "");
            }
            "save" => {
                let missing = name.is_empty() || email.is_empty();
                let result = if missing || !name_error.is_empty() || !email_error.is_empty() {
                    "Please fix the form first.".to_owned()
                } else {
                    format!("Welcome, {name}! We will write to {email}.")
                };
                s.assign(
                    "name_error",
                    if name.is_empty() {
                        "required"
                    } else {
                        name_error
                    },
                )
                .assign(
                    "email_error",
                    if email.is_empty() {
                        "required"
                    } else {
                        email_error
                    },
                )
                .assign("result", result);
            }
            _ => return Err(format!("no event {event:?} on the form").into()),
        }
        Ok(())
    }
}

/// The orders every visitor shares: one value per row, so a change builds one new row and
/// the list shares the other 299.
#[derive(Clone)]
struct Orders(Arc<Mutex<Vec<Value>>>);

impl Orders {
    fn new() -> Orders {
        let rows = (1..=ORDERS).map(|id| row(id, 0)).collect();
        Orders(Arc::new(Mutex::new(rows)))
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Value>> {
        // Each change replaces one row whole: a panic elsewhere leaves the list valid.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The status after order `id`'s current one; `None` when there is no such order.
    fn next_status(&self, id: usize) -> Option<&'static str> {
        let rows = self.lock();
        let r = rows.get(id.checked_sub(1)?)?;
        let now = STATUSES
            .iter()
            .position(|x| Some(*x) == status_of(r))
            .unwrap_or(0);
        Some(STATUSES[(now + 1) % STATUSES.len()])
    }

    /// Sets order `id`'s status; false when there is no such order or status.
    fn set(&self, id: usize, status: &str) -> bool {
        let Some(s) = STATUSES.iter().position(|x| *x == status) else {
            return false;
        };
        let mut rows = self.lock();
        let Some(r) = id.checked_sub(1).and_then(|i| rows.get_mut(i)) else {
            return false;
        };
        *r = row(id, s);
        true
    }

    /// Applies an `OrderAdvanced` event; false for any other event, or one that names no order
    /// or status (the store's API takes any JSON: such events are skipped).
    fn apply(&self, e: &RecordedEvent) -> bool {
        if e.event_type != ORDER_ADVANCED {
            return false;
        }
        let Ok(data) = serde_json::from_str::<Json>(e.data.get()) else {
            return false;
        };
        let id = data["id"].as_u64().and_then(|i| usize::try_from(i).ok());
        match (id, data["status"].as_str()) {
            (Some(id), Some(status)) => self.set(id, status),
            _ => false,
        }
    }

    /// The rows with status `filter` (all with none).
    fn rows(&self, filter: Option<&str>) -> Value {
        let rows = self.lock();
        Value::list(
            rows.iter()
                .filter(|r| filter.is_none_or(|f| status_of(r) == Some(f)))
                .cloned(),
        )
    }
}

fn status_of(r: &Value) -> Option<&str> {
    let Value::Map(m) = r else { return None };
    m.iter()
        .find(|(k, _)| k.as_str() == "status")
        .and_then(|(_, v)| match v {
            Value::Str(s) => Some(s.as_str()),
            _ => None,
        })
}

fn row(id: usize, status: usize) -> Value {
    Value::map([
        ("id", Value::from(id as i64)),
        ("customer", Value::from(CUSTOMERS[id % CUSTOMERS.len()])),
        ("status", Value::from(STATUSES[status])),
    ])
}

/// `/live/orders`: `advance` with `phx-value-id`; `?status=` filters (patch links).
struct OrderList {
    orders: Orders,
    /// Where changes go: appended here when set (the page updates when the append comes back
    /// through the subscription), else applied in memory and broadcast.
    store: Option<Store>,
    filter: Option<&'static str>,
}

impl OrderList {
    fn show(&self, s: &mut Socket) {
        s.assign("orders", self.orders.rows(self.filter));
    }
}

impl LiveView for OrderList {
    fn mount(&mut self, _: &Json, _: &Json, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("total", ORDERS as i64);
        s.assign("statuses", Value::list(STATUSES.map(Value::from)));
        s.subscribe(TOPIC);
        s.page_title("Orders · galleon");
        Ok(())
    }

    fn handle_params(&mut self, params: &Json, _: &str, s: &mut Socket) -> Result<(), ViewError> {
        let asked = params["status"].as_str();
        self.filter = asked.and_then(|a| STATUSES.into_iter().find(|x| *x == a));
        s.assign("filter", self.filter.unwrap_or("all"));
        self.show(s);
        Ok(())
    }

    fn handle_event(&mut self, event: &str, value: &Json, s: &mut Socket) -> Result<(), ViewError> {
        if event != "advance" {
            return Err(format!("no event {event:?} on the orders").into());
        }
        let id: Option<usize> = value["id"].as_str().and_then(|i| i.parse().ok());
        let Some((id, next)) = id.and_then(|id| Some((id, self.orders.next_status(id)?))) else {
            return Err("advance needs the id of an order".into());
        };
        match &self.store {
            Some(store) => {
                let (store, stream) = (store.clone(), format!("{ORDER_CATEGORY}-{id}"));
                let event = EventData::json(
                    ORDER_ADVANCED,
                    &serde_json::json!({"id": id, "status": next}),
                )
                .map_err(|e| ViewError(e.to_string()))?;
                // The event's own task: the append's round trip does not hold the socket.
                tokio::spawn(async move {
                    if let Err(e) = store
                        .append(&stream, ExpectedVersion::Any, vec![event])
                        .await
                    {
                        tracing::warn!(stream, error = %e, "live orders: the append failed");
                    }
                });
            }
            None => {
                self.orders.set(id, next);
                // This page at once, in the event's reply; every other copy by the broadcast.
                self.show(s);
                s.broadcast(TOPIC, Info::new(()));
            }
        }
        Ok(())
    }

    fn handle_info(&mut self, _: Info, s: &mut Socket) -> Result<(), ViewError> {
        self.show(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_says_what_is_wrong() {
        let user = |n: &str, e: &str| serde_json::json!({"name": n, "email": e});
        assert_eq!(check(&user("A", "")).2, "at least 2 characters");
        assert!(!check(&user("Ada", "ada@")).3.is_empty());
        assert_eq!(check(&user("Ada", "ada@example.com")).2, "");
        assert_eq!(check(&user("Ada", "ada@example.com")).3, "");
        assert_eq!(check(&user(&"x".repeat(81), "")).2, "at most 80 characters");
        assert_eq!(check(&serde_json::json!("not a map")).0, "");
    }

    fn count(o: &Orders, status: &str) -> usize {
        match o.rows(Some(status)) {
            Value::List(rows) => rows.len(),
            _ => panic!("a list"),
        }
    }

    #[test]
    fn orders_advance_through_the_statuses_and_wrap() {
        let o = Orders::new();
        assert_eq!(o.next_status(7), Some("packed"));
        assert_eq!((o.next_status(0), o.next_status(ORDERS + 1)), (None, None));
        assert!(o.set(7, "packed"));
        assert!(!o.set(7, "lost") && !o.set(0, "packed") && !o.set(ORDERS + 1, "packed"));
        assert_eq!(count(&o, "packed"), 1);
        assert!(o.set(7, "delivered"));
        assert_eq!(o.next_status(7), Some("pending"));
    }

    #[test]
    fn only_well_formed_order_events_change_the_list() {
        let o = Orders::new();
        let event = |ty: &str, data: &str| RecordedEvent {
            id: uuid::Uuid::nil(),
            stream_id: "order-3".into(),
            version: 0,
            position: 1,
            event_type: ty.into(),
            data: galleon_eventstore::Json::from_string(data.into()).unwrap(),
            metadata: galleon_eventstore::Json::empty_object(),
            recorded_at: galleon_eventstore::Timestamp::default(),
        };
        assert!(o.apply(&event(ORDER_ADVANCED, r#"{"id":3,"status":"shipped"}"#)));
        assert_eq!(count(&o, "shipped"), 1);
        for (ty, data) in [
            ("Other", r#"{"id":3,"status":"packed"}"#),
            (ORDER_ADVANCED, r#"{"id":"3","status":"packed"}"#),
            (ORDER_ADVANCED, r#"{"id":301,"status":"packed"}"#),
            (ORDER_ADVANCED, r#"{"id":3,"status":"eaten"}"#),
            (ORDER_ADVANCED, r#"[1,2]"#),
        ] {
            assert!(!o.apply(&event(ty, data)), "{ty} {data}");
        }
        assert_eq!(count(&o, "packed"), 0);
    }
}
