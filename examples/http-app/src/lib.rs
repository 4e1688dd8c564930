//! A galleon-http app built from galleon's libraries: templates with a layout, recompiled when a
//! file changes (the last good set serves while the newest does not compile), the event store's
//! HTTP API behind bearer tokens, and the statistics pages (`/_galleon`, `/metrics`).
//! `main.rs` serves it; `tests/app.rs` drives it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use galleon_eventstore::Store;
use galleon_eventstore_http::{Access, EventsApi};
use galleon_http::{Request, Response, Router, StatusCode};
use galleon_state::{Shared, Watch};
use galleon_stats::{Diagnostics, Stats, StatsConfig};
use galleon_template::{Assigns, Engine};

/// The app: its router, the statistics to give the server as its observer, and the watch that
/// recompiles the templates (polling stops when the app is dropped).
#[derive(Debug)]
pub struct App {
    /// Every route: `/`, the event store's, the statistics'.
    pub router: Router,
    /// Give it to `Server::with_observer`: it records what the server answers.
    pub stats: Arc<Stats>,
    _watch: Watch,
}

/// Builds the app on the templates in `dir` (checked every `poll`), the event `store` and its
/// tokens.
pub fn app(
    dir: &Path,
    poll: Duration,
    store: Store,
    access: Access,
) -> Result<App, Box<dyn std::error::Error>> {
    let compile = |dir: &Path| Engine::builder().trim(true).load(dir);
    let templates = Shared::new(compile(dir)?);
    let (cell, dir, mut seen) = (
        templates.clone(),
        dir.to_owned(),
        galleon_state::fingerprint(dir, "eex"),
    );
    let watch = Watch::every("templates", poll, move || {
        let now = galleon_state::fingerprint(&dir, "eex");
        if now != seen {
            seen = now;
            match compile(&dir) {
                Ok(engine) => drop(cell.store(engine)),
                Err(e) => eprintln!("templates not reloaded (the last good ones serve): {e}"),
            }
        }
    })?;
    let stats = Arc::new(Stats::new(StatsConfig::default()));
    let site = Router::new().get("/", move |_req: Request| {
        let templates = templates.clone();
        async move { home(templates.snapshot().value()) }
    });
    let router = EventsApi::new(store).with_access(access).mount(site);
    let router = galleon_stats::mount(router, Diagnostics::new(&stats));
    Ok(App {
        router,
        stats,
        _watch: watch,
    })
}

/// `GET /`: `index.html.eex` inside `layout.html.eex`; a render error is a plain 500 (the
/// error, which names the template, goes to stderr, not to the client).
fn home(templates: &Engine) -> Response {
    let mut assigns = Assigns::new();
    assigns.insert("title", "galleon on galleon-http");
    assigns.insert("items", vec!["templates", "events", "stats"]);
    match templates.render_in_layout("index.html.eex", "layout.html.eex", &assigns) {
        Ok(page) => Response::html(page),
        Err(e) => {
            eprintln!("GET /: {e}");
            Response::new(StatusCode(500), "internal server error\n")
        }
    }
}
