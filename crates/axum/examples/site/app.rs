//! The example site's pages through axum: `/blah?iters=N`, `/blah-split?iters=N`,
//! `/doom?iters=N` (100,000,000 iterations, 30 GB, without `iters`) and `/big-table`, rendered
//! from galleon's `site/` exactly as `galleon serve` renders them (same engine options, same
//! assigns), so the bodies are byte-identical; and `/compiled/blah`, `/compiled/doom`,
//! `/compiled/big-table`: the same templates compiled into the binary (`#[derive(Template)]`),
//! the same bytes. Shared by `examples/site/main.rs` and the tests.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::routing::get;
use galleon_axum::{Assigns, Compiled, Engine, Page, RenderError, TemplateId, Templates, Value};
use galleon_template_derive::Template;

/// `/doom` without `?iters=`: the seed's full Template of Doom (30 GB), as in `galleon serve`.
pub(crate) const DOOM_DEFAULT_ITERS: i64 = 100_000_000;

/// The template engine's copy threshold, as `galleon serve` sets it (`SERVE_COPY_BELOW`): values
/// under 64 bytes are copied at render time, longer pieces referenced.
pub(crate) const COPY_BELOW: usize = 64;

/// What the handlers share: the engine, each page's template id, the big table's data. Held
/// as `State<Arc<Site>>`: axum clones the state for every request, so one count, not one per
/// field (as the askama and minijinja peers hold theirs).
#[derive(Debug)]
pub(crate) struct Site {
    templates: Templates,
    blah: TemplateId,
    blah_split: TemplateId,
    doom: TemplateId,
    big_table: TemplateId,
    big_table_data: Assigns,
    /// The big table's rows for the compiled page (shared by every render: one count).
    big_table_rows: Arc<Vec<Vec<i64>>>,
}

/// The engine for `dir` (galleon's `site/`), configured as `galleon serve` configures it.
pub(crate) fn engine(dir: &Path) -> Result<Engine, Box<dyn std::error::Error + Send + Sync>> {
    Ok(Engine::load(dir)?.with_copy_below(COPY_BELOW))
}

/// The router of the site in `dir`.
pub(crate) fn router(dir: &Path) -> Result<Router, Box<dyn std::error::Error + Send + Sync>> {
    let templates = Templates::new(engine(dir)?);
    let engine = templates.engine();
    let data = std::fs::read_to_string(dir.join("data/big-table.json"))?;
    let json: serde_json::Value = serde_json::from_str(&data)?;
    let site = Arc::new(Site {
        big_table_rows: Arc::new(serde_json::from_value(json["table"].clone())?),
        blah: engine.id("pages/blah.html.eex")?,
        blah_split: engine.id("pages/blah-split.html.eex")?,
        doom: engine.id("pages/doom.html.eex")?,
        big_table: engine.id("pages/big-table.html.eex")?,
        big_table_data: Assigns::from_json(json)?,
        templates,
    });
    Ok(Router::new()
        .route("/blah", get(blah))
        .route("/blah-split", get(blah_split))
        .route("/doom", get(doom))
        .route("/big-table", get(big_table))
        .route("/compiled/blah", get(compiled_blah))
        .route("/compiled/doom", get(compiled_doom))
        .route("/compiled/big-table", get(compiled_big_table))
        .with_state(site))
}

type Params = Query<HashMap<String, String>>;

/// The handlers' state.
type Shared = State<Arc<Site>>;

async fn blah(State(site): Shared, Query(q): Params) -> Result<Page, RenderError> {
    site.templates
        .render_with(site.blah, |name| query(&q, name))
}

async fn blah_split(State(site): Shared, Query(q): Params) -> Result<Page, RenderError> {
    site.templates
        .render_with(site.blah_split, |name| query(&q, name))
}

/// Whole up to 4 MiB (`/doom?iters=1000`: 301 KB, with `content-length`), streamed past it.
async fn doom(State(site): Shared, Query(q): Params) -> Result<Page, RenderError> {
    site.templates.render_with(site.doom, |name| {
        query(&q, name).or_else(|| (name == "iters").then_some(Value::Int(DOOM_DEFAULT_ITERS)))
    })
}

async fn big_table(State(site): Shared, Query(q): Params) -> Result<Page, RenderError> {
    site.templates.render_with(site.big_table, |name| {
        query(&q, name).or_else(|| site.big_table_data.get(name).cloned())
    })
}

// `copy_below = 64`: the runtime pages' threshold ([`COPY_BELOW`]), so that both reference and
// copy the same pieces.

/// `pages/blah.html.eex` compiled; `@iters` as the query gives it (missing or not an integer: a
/// render error, as at runtime).
#[derive(Template)]
#[template(path = "../../site/pages/blah.html.eex", copy_below = 64)]
pub(crate) struct Blah {
    pub(crate) iters: Value,
}

/// `pages/doom.html.eex` compiled.
#[derive(Template)]
#[template(path = "../../site/pages/doom.html.eex", copy_below = 64)]
pub(crate) struct Doom {
    pub(crate) iters: Value,
}

/// `pages/big-table.html.eex` compiled, over the data file's rows.
#[derive(Template)]
#[template(path = "../../site/pages/big-table.html.eex", copy_below = 64)]
pub(crate) struct BigTable {
    table: Arc<Vec<Vec<i64>>>,
}

async fn compiled_blah(Query(q): Params) -> Compiled<Blah> {
    Compiled(Blah {
        iters: query(&q, "iters").unwrap_or_default(),
    })
}

async fn compiled_doom(Query(q): Params) -> Compiled<Doom> {
    Compiled(Doom {
        iters: query(&q, "iters").unwrap_or(Value::Int(DOOM_DEFAULT_ITERS)),
    })
}

async fn compiled_big_table(State(site): Shared) -> Compiled<BigTable> {
    Compiled(BigTable {
        table: site.big_table_rows.clone(),
    })
}

/// A query value as `galleon serve` reads it: a plain integer, else JSON, else a string.
fn query(q: &HashMap<String, String>, name: &str) -> Option<Value> {
    let v = q.get(name)?;
    let digits = v.strip_prefix('-').unwrap_or(v);
    let plain_int = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.len() > 1 && digits.starts_with('0'))
        && v != "-0";
    if plain_int && let Ok(i) = v.parse::<i64>() {
        return Some(Value::Int(i));
    }
    Some(match serde_json::from_str::<serde_json::Value>(v) {
        Ok(json) => json.into(),
        Err(_) => Value::str(v),
    })
}
