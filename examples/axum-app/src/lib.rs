//! An axum app built from galleon's libraries: templates with a layout and hot reload (and the
//! development error page), the event store's HTTP API behind bearer tokens, and the statistics
//! pages (`/_galleon`, `/metrics`). `main.rs` serves it; `tests/app.rs` drives it in-process.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Router, middleware};
use galleon_axum::{Assigns, LoadError, Page, RenderError, Templates};
use galleon_eventstore::Store;
use galleon_eventstore_http::{Access, EventsApi};
use galleon_stats::{Diagnostics, Stats, StatsConfig};

/// The app's router, and its event-store API: call [`EventsApi::shutdown`] in the server's
/// graceful-shutdown future (event streams do not end by themselves).
pub fn app(
    templates: &Path,
    poll: Duration,
    store: Store,
    access: Access,
) -> Result<(Router, EventsApi), LoadError> {
    let templates = Templates::builder()
        .trim(true)
        .dev_errors(true)
        .watch(templates, poll)?;
    let api = EventsApi::new(store).with_access(access);
    let stats = Arc::new(Stats::new(StatsConfig::default()));
    let router = Router::new()
        .route("/", get(home))
        .with_state(templates)
        .layer(middleware::from_fn(galleon_axum::dev_error_page))
        .merge(api.axum_router())
        .merge(galleon_stats::axum::routes(Diagnostics::new(&stats)))
        .layer(galleon_stats::axum::layer(&stats));
    Ok((router, api))
}

/// `GET /`: `index.html.eex` inside `layout.html.eex`.
async fn home(State(templates): State<Templates>) -> Result<Page, RenderError> {
    let mut assigns = Assigns::new();
    assigns.insert("title", "galleon on axum");
    assigns.insert("items", vec!["templates", "events", "stats"]);
    templates.render_in_layout("index.html.eex", "layout.html.eex", &assigns)
}
