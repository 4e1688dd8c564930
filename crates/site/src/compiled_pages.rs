//! The example site's pages compiled into the binary with `#[derive(Template)]`, served at
//! `/compiled/NAME` beside the runtime engine's `/NAME`: the same templates (the repository's
//! `site/pages`, as of the build), the same query parameters and data files, the same bytes.
//! A page that ends within `--full-body-max` bytes is sent whole; a longer one (`/compiled/doom`)
//! is streamed from where the whole attempt stopped, one `--chunk-bytes` chunk at a time, in
//! bounded memory, like the runtime pages.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use galleon_http::{Body, Request, Response, Router, sync_handler};
use galleon_template::compiled::{self, Rendered, Template};
use galleon_template::{Assigns, Error, ErrorKind, Value};
use galleon_template_derive::Template;

use crate::pages::{PagesConfig, render_failed};
use crate::whole::WholePages;

/// `/compiled/doom` without `?iters=`: the runtime page's default (30 GB).
const DOOM_DEFAULT_ITERS: i64 = 100_000_000;

// `copy_below = 64`: `crate::pages::SERVE_COPY_BELOW`, the runtime pages' threshold (checked by
// a test), so both reference and copy the same pieces.

/// `pages/blah.html.eex`: `@iters` as the query gives it (a non-integer fails as at runtime).
#[derive(Template)]
#[template(path = "../../site/pages/blah.html.eex", copy_below = 64)]
struct Blah {
    iters: Value,
}

/// `pages/blah-split.html.eex`.
#[derive(Template)]
#[template(path = "../../site/pages/blah-split.html.eex", copy_below = 64)]
struct BlahSplit {
    iters: Value,
}

/// `pages/doom.html.eex`.
#[derive(Template)]
#[template(path = "../../site/pages/doom.html.eex", copy_below = 64)]
struct Doom {
    iters: Value,
}

/// `pages/big-table.html.eex`: rows of cells, shared with the data file's table.
#[derive(Template)]
#[template(path = "../../site/pages/big-table.html.eex", copy_below = 64)]
struct BigTable {
    table: Arc<Vec<Vec<Value>>>,
}

/// One team of `pages/teams.html.eex`.
#[derive(Debug)]
struct Team {
    name: Value,
    score: Value,
}

/// `pages/teams.html.eex`.
#[derive(Template)]
#[template(path = "../../site/pages/teams.html.eex", copy_below = 64)]
struct Teams {
    year: Value,
    teams: Arc<Vec<Team>>,
}

/// The data files' assigns, converted once.
#[derive(Debug)]
struct Data {
    big_table: Option<(Assigns, Arc<Vec<Vec<Value>>>)>,
    teams: Option<(Assigns, Arc<Vec<Team>>)>,
    full_body_max: usize,
    stream_chunk: usize,
    whole: WholePages,
}

/// Adds `/compiled/blah`, `/compiled/blah-split`, `/compiled/doom`, `/compiled/big-table` and
/// `/compiled/teams` to `router`; the data files are read from `dir/data/` now. Whole pages
/// count against `whole` (shared with the runtime pages).
pub fn routes(
    router: Router,
    dir: &Path,
    options: &PagesConfig,
    whole: &WholePages,
) -> anyhow::Result<Router> {
    let read = |page: &str| -> anyhow::Result<Option<Assigns>> {
        let path = dir.join("data").join(format!("{page}.json"));
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let json = serde_json::from_str(&text)
            .with_context(|| format!("{}: invalid JSON", path.display()))?;
        Assigns::from_json(json)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    };
    let big_table = read("big-table")?.and_then(|a| {
        let table = table(a.get("table")?)?;
        Some((a, Arc::new(table)))
    });
    let teams = read("teams")?.and_then(|a| {
        let teams = teams(a.get("teams")?)?;
        Some((a, Arc::new(teams)))
    });
    let data = Arc::new(Data {
        big_table,
        teams,
        full_body_max: options.full_body_max,
        stream_chunk: options.stream_chunk.max(1),
        whole: whole.clone(),
    });
    let page = |f: fn(&Data, &Request) -> Result<Response, Error>| {
        let data = data.clone();
        sync_handler(move |req: Request| {
            f(&data, &req).unwrap_or_else(|e| render_failed(&e, Some(&req)))
        })
    };
    Ok(router
        .get("/compiled/blah", page(blah))
        .get("/compiled/blah-split", page(blah_split))
        .get("/compiled/doom", page(doom))
        .get("/compiled/big-table", page(big_table_page))
        .get("/compiled/teams", page(teams_page)))
}

/// A query value, read as the runtime pages read it (JSON where it parses); a query that does
/// not decode is the runtime page's error too, never a fallback to a default.
fn query(req: &Request, name: &str) -> Result<Option<Value>, Error> {
    crate::assign::from_query(req, name).map_err(|_| missing(name))
}

/// An assign that is neither in the query nor in a data file: the runtime page's error.
fn missing(name: &str) -> Error {
    compiled::error(ErrorKind::UnknownAssign, format!("unknown assign @{name}"))
}

/// Renders `t` whole within `--full-body-max` bytes, or streams it.
fn respond<T: Template + Send + 'static>(data: &Data, t: T) -> Result<Response, Error> {
    Ok(
        match t.render_or_stream(data.whole.whole_max(data.full_body_max), data.stream_chunk)? {
            Rendered::Whole(list) => data.whole.respond(list),
            Rendered::Streaming { first, rest } => {
                Response::html(Body::iter(std::iter::once(Ok(first)).chain(rest)))
            }
        },
    )
}

fn blah(data: &Data, req: &Request) -> Result<Response, Error> {
    let iters = query(req, "iters")?.ok_or_else(|| missing("iters"))?;
    respond(data, Blah { iters })
}

fn blah_split(data: &Data, req: &Request) -> Result<Response, Error> {
    let iters = query(req, "iters")?.ok_or_else(|| missing("iters"))?;
    respond(data, BlahSplit { iters })
}

fn doom(data: &Data, req: &Request) -> Result<Response, Error> {
    let iters = query(req, "iters")?.unwrap_or(Value::Int(DOOM_DEFAULT_ITERS));
    respond(data, Doom { iters })
}

fn big_table_page(data: &Data, req: &Request) -> Result<Response, Error> {
    let table = match (query(req, "table")?, &data.big_table) {
        (Some(v), _) => {
            Arc::new(table(&v).ok_or_else(|| mismatch("`@table` must be a list of lists"))?)
        }
        (None, Some((_, t))) => t.clone(),
        (None, None) => return Err(missing("table")),
    };
    respond(data, BigTable { table })
}

fn teams_page(data: &Data, req: &Request) -> Result<Response, Error> {
    let year = match (query(req, "year")?, &data.teams) {
        (Some(v), _) => v,
        (None, Some((a, _))) => a.get("year").cloned().ok_or_else(|| missing("year"))?,
        (None, None) => return Err(missing("year")),
    };
    let teams = match (query(req, "teams")?, &data.teams) {
        (Some(v), _) => Arc::new(
            teams(&v)
                .ok_or_else(|| mismatch("`@teams` must be a list of maps with name and score"))?,
        ),
        (None, Some((_, t))) => t.clone(),
        (None, None) => return Err(missing("teams")),
    };
    respond(data, Teams { year, teams })
}

/// A query value of the wrong shape for a typed field: a type mismatch, as the runtime page
/// reports rendering it.
fn mismatch(message: &str) -> Error {
    compiled::error(ErrorKind::TypeMismatch, message)
}

/// `@table` as rows of cells: a list of lists.
fn table(v: &Value) -> Option<Vec<Vec<Value>>> {
    let Value::List(rows) = v else { return None };
    rows.iter()
        .map(|r| match r {
            Value::List(cells) => Some(cells.to_vec()),
            _ => None,
        })
        .collect()
}

/// `@teams` as teams: a list of maps with `name` and `score`.
fn teams(v: &Value) -> Option<Vec<Team>> {
    let Value::List(items) = v else { return None };
    items
        .iter()
        .map(|t| match t {
            Value::Map(m) => Some(Team {
                name: m.get(b"name".as_slice())?.clone(),
                score: m.get(b"score".as_slice())?.clone(),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use galleon_http::Method;
    use galleon_offload::Pool;

    fn site_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site")
    }

    fn options(full_body_max: usize) -> PagesConfig {
        PagesConfig {
            stream_chunk: 4096,
            full_body_max,
            ..PagesConfig::default()
        }
    }

    fn get(target: &str) -> Request {
        Request::new(Method::Get, target, &[], Bytes::new())
    }

    #[test]
    fn the_copy_threshold_is_the_runtime_pages() {
        assert_eq!(
            <Blah as Template>::COPY_BELOW,
            crate::pages::SERVE_COPY_BELOW
        );
        assert_eq!(
            <BigTable as Template>::COPY_BELOW,
            crate::pages::SERVE_COPY_BELOW
        );
    }

    /// Each compiled route answers as its runtime route does: the same status, the same
    /// bytes, whole or streamed alike.
    #[tokio::test]
    async fn compiled_routes_answer_like_the_runtime_ones() {
        let dir = site_dir();
        for full_body_max in [crate::pages::DEFAULT_FULL_BODY_MAX, 1000] {
            let cpu = Pool::new(galleon_offload::Config {
                threads: 1,
                ..galleon_offload::Config::default()
            })
            .unwrap();
            let (runtime, _templates) =
                crate::pages::router(&dir, &options(full_body_max), &cpu).unwrap();
            let whole = WholePages::new(crate::whole::DEFAULT_MAX_WHOLE_PAGES);
            let compiled = routes(Router::new(), &dir, &options(full_body_max), &whole).unwrap();
            for target in [
                "/blah?iters=3",
                "/blah?iters=0",
                "/blah?iters=abc",
                "/blah",
                "/blah-split?iters=5",
                "/doom?iters=2",
                "/doom?iters=100",
                "/doom?iters=-1",
                "/doom?iters=x",
                "/big-table",
                "/big-table?table=[[1,%22%3Ca%3E%22],[]]",
                "/big-table?table=3",
                "/teams",
                "/teams?year=1999",
                "/teams?teams=[{%22name%22:%22A%26B%22,%22score%22:1}]",
                "/teams?teams=[{%22name%22:%22A%22}]",
            ] {
                let want = runtime.handle(get(target)).await;
                let got = compiled.handle(get(&format!("/compiled{target}"))).await;
                assert_eq!(got.status(), want.status(), "{target}");
                let (got, want) = (got.body(), want.body());
                assert_eq!(
                    got.as_full().map(|l| l.to_vec()),
                    want.as_full().map(|l| l.to_vec()),
                    "{target} (full_body_max {full_body_max})"
                );
                assert_eq!(
                    got.len(),
                    want.len(),
                    "{target}: both whole or both streamed"
                );
            }
        }
    }

    /// A page longer than `--full-body-max` streams; its chunks are the runtime page's bytes.
    #[test]
    fn doom_streams_the_runtime_bytes() {
        let engine = galleon_template::Engine::load(site_dir()).unwrap();
        let mut a = Assigns::new();
        a.insert("iters", 1000i64);
        let want = engine.render("pages/doom.html.eex", &a).unwrap().to_vec();
        let page = Doom {
            iters: Value::Int(1000),
        };
        match page.render_or_stream(10_000, 4096).unwrap() {
            Rendered::Streaming { first, rest } => {
                assert!(first.len() < 10_000 + 400);
                let mut got = first.to_vec();
                for chunk in rest {
                    let chunk = chunk.unwrap();
                    assert!(chunk.len() < 4096 + 400, "chunks stay bounded");
                    got.extend_from_slice(&chunk.to_vec());
                }
                assert_eq!(got, want);
            }
            Rendered::Whole(_) => panic!("300 KB is past the 10 KB bound"),
        }
    }
}
