//! The example site as a [`Router`]: every `pages/NAME.html.eex` at `/NAME`, static files at
//! `/static/...`, the index at `/`, and the seed experiments' extra assigns.
//!
//! Pages are those of the current templates' version, found anew by every reload: the pages of
//! the start each have a route (looked up by name in the current version, so a removed one is a
//! 404), and the router's fallback serves the pages added since (a page file dropped in while
//! serving is at `/NAME` once a reload compiled it). Page routes and the fallback come after
//! every other route, which wins over a page of the same name.
//!
//! Every page is rendered with [`galleon_template::Engine::render_or_stream`]: a page that ends within
//! `--full-body-max` bytes ([`DEFAULT_FULL_BODY_MAX`]; all ordinary pages, `/blah?iters=1000`'s
//! 410 KB) is sent whole with `content-length`; a longer one (`/doom`) goes out chunked, starting
//! with what was already rendered and continuing from there, one chunk of `--chunk-bytes` at a
//! time, so no query string can make the server hold more than about that bound of any page.
//! Pages are served bare (no layout), so `/blah?iters=N` is
//! byte-identical to `galleon render site/pages/blah.html.eex --assign iters=N`; the layout wraps
//! only the index. The templates are [`Templates`]: reloaded while serving (`--watch`, SIGHUP,
//! `POST /templates/reload`), each request rendered by one version.
//!
//! A page's render error is a one-line 400 when the request's query caused it (a query that does
//! not decode, a value the page reads and the request lacks, a value that does not fit) and a 500
//! otherwise (`render_failed`), never with template source: the located error goes to the log.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::Context;
use bytes::Bytes;
use galleon_http::{
    Body, Guard, Handler, IoList, Method, Reply, Request, Response, Router, StatusCode,
};
use galleon_iolist::escape_html_copy_into;
use galleon_offload::{Kind, Pool};
use galleon_template::{Assigns, ErrorKind, Limits, Rendered, Value};

use crate::templates::{CopyBelow, Templates, is_page_name};
use crate::whole::WholePages;

/// A page that ends within this many bytes is sent whole with `content-length`; a longer one is
/// streamed: `--full-body-max`'s default, the one value `galleon-axum` uses too (4 MiB; defined,
/// and its choice explained, in `galleon-template`).
pub use galleon_template::DEFAULT_FULL_BODY_MAX;

/// How the site renders: the bounds `galleon serve` takes as flags (`--chunk-bytes`,
/// `--full-body-max`, `--value-copy-below`, `--max-template-steps`, `--max-template-memory`,
/// `--max-partial-depth`, `--max-whole-pages`, `--watch`); `Default` is the flags' defaults.
#[derive(Debug, Clone)]
pub struct PagesConfig {
    /// Bytes rendered per chunk of a streamed page (1 to 64 MiB).
    pub stream_chunk: usize,
    /// Pages that end within this many bytes are sent whole; longer ones are streamed.
    pub full_body_max: usize,
    /// Bytes of whole pages all connections together may hold unwritten (slow readers' pages);
    /// past it pages are streamed ([`crate::whole`]).
    pub max_whole_pages: usize,
    /// Values' strings shorter than this are copied at render time, longer ones referenced.
    pub value_copy_below: usize,
    /// The template engine's step, memory and nesting limits.
    pub limits: Limits,
    /// Recompile changed templates (polled), and show a compile error on the pages.
    pub watch: bool,
}

impl Default for PagesConfig {
    fn default() -> PagesConfig {
        PagesConfig {
            stream_chunk: DEFAULT_STREAM_CHUNK,
            full_body_max: DEFAULT_FULL_BODY_MAX,
            max_whole_pages: crate::whole::DEFAULT_MAX_WHOLE_PAGES,
            value_copy_below: galleon_template::DEFAULT_VALUE_COPY_BELOW,
            limits: Limits::default(),
            watch: false,
        }
    }
}

/// Largest `--chunk-bytes`: 64 MiB. Each streaming connection holds up to three chunks.
const MAX_CHUNK_BYTES: usize = 64 * 1024 * 1024;

/// Largest `--full-body-max`: a page is held whole in memory up to this bound, once per
/// connection rendering it.
const MAX_FULL_BODY_MAX: usize = 1024 * 1024 * 1024;

impl PagesConfig {
    /// Refuses an out-of-range bound, naming `galleon serve`'s flag.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=MAX_CHUNK_BYTES).contains(&self.stream_chunk),
            "--chunk-bytes {}: expected 1 to {MAX_CHUNK_BYTES} bytes",
            self.stream_chunk
        );
        anyhow::ensure!(
            (1..=MAX_FULL_BODY_MAX).contains(&self.full_body_max),
            "--full-body-max {}: expected 1 to {MAX_FULL_BODY_MAX} bytes",
            self.full_body_max
        );
        anyhow::ensure!(
            self.limits.max_steps >= 1,
            "--max-template-steps 0: a render needs at least one step"
        );
        anyhow::ensure!(
            self.limits.max_memory >= 1,
            "--max-template-memory 0: a render needs some memory for its values"
        );
        anyhow::ensure!(
            (1..=galleon_template::DEFAULT_MAX_DEPTH).contains(&self.limits.max_depth),
            "--max-partial-depth {}: expected 1 to {} (each level is a frame on the rendering thread's stack)",
            self.limits.max_depth,
            galleon_template::DEFAULT_MAX_DEPTH
        );
        Ok(())
    }
}

/// Default chunk size of a streamed page: 256 KiB, the same as `galleon render`. Downloads of
/// `/doom` with 64 KiB, 256 KiB and 1 MiB chunks on the (shared, noisy) development machine
/// differed by less than the run-to-run noise; the smaller the chunk, the less memory each
/// streaming connection holds (at most three chunks).
pub const DEFAULT_STREAM_CHUNK: usize = 256 * 1024;

/// The template engine's copy threshold when serving (see `galleon_template::DEFAULT_COPY_BELOW`,
/// 256): 64 bytes, so blah-split's 205-byte halves stay referenced like blah's 410-byte blocks and
/// the write policy alone decides what gets copied, into the connection's reused buffer; with
/// 256, every `/blah-split` render copied its 410 KB into a fresh scratch buffer and was much
/// slower than `/blah` (`bench/results/http.txt`);
/// the issue asks for the two within 5%.
/// Values (assigns) have their own threshold, `--value-copy-below` (4 KiB by default).
pub const SERVE_COPY_BELOW: usize = 64;

/// `/doom` without `?iters=`: the seed's full Template of Doom, 100,000,000 iterations (30 GB).
const DOOM_DEFAULT_ITERS: i64 = 100_000_000;

/// Pre-generated strings for `/static-strings` and `/dynamic-strings`: 20,000 of them, 1.3 MB in
/// all, more than a core's L2 cache, so a random pick is usually a cache miss.
const STRING_POOL: usize = 20_000;

/// Length of each pre-generated string: 65 bytes, like the seed's `GZKHIIYQPVYQKYPTVCDGJIES...`
/// strings, just over the BEAM's 64-byte limit for shared (reference-counted) binaries.
const STRING_LEN: usize = 65;

/// `/static-strings` picks among the first 16 strings only: 1 KiB that stays in cache.
const STATIC_SET: usize = 16;

/// Strings per response without `?count=`.
const DEFAULT_STRING_COUNT: usize = 100;

/// Most strings per response (`?count=` is clamped to this).
const MAX_STRING_COUNT: usize = 100_000;

/// What every page handler shares.
#[derive(Debug)]
struct Site {
    /// The compiled templates, reloadable.
    templates: Templates,
    pool: Vec<Value>,
    stream_chunk: usize,
    full_body_max: usize,
    /// The whole pages held by all connections, against `--max-whole-pages`.
    whole: WholePages,
    seq: AtomicU64,
    /// The CPU pool renders may move to.
    cpu: Pool,
    /// The site directory (the data files of pages added while serving).
    dir: PathBuf,
    /// Pages added since the start, made on their first request (a data file read, an offload
    /// kind): one per page name that has been a page, which only files on disk make.
    later: RwLock<HashMap<Box<str>, Arc<Page>>>,
    /// The live pages' paths, listed on the index.
    live_links: Vec<String>,
}

/// One page: its name (`blah`; its template `pages/blah.html.eex` is looked up by this name in
/// each version), its data file's assigns and, for the seed's string pages, how many pool
/// strings it picks from.
#[derive(Debug)]
struct Page {
    page: String,
    data: Option<Assigns>,
    /// `Some(n)`: `@strings` is picked from the first `n` strings of the pool.
    strings: Option<usize>,
    /// Its renders' offload kind (`render:/NAME`): their cost is learned per page.
    kind: Kind,
}

/// Builds the site's router from `dir` (`pages/`, `data/`, `static/`, `layout.html.eex`), and
/// the templates it renders with (for the reload triggers); renders run inline or on `cpu`.
pub fn router(
    dir: &Path,
    options: &PagesConfig,
    cpu: &Pool,
) -> anyhow::Result<(Router, Templates)> {
    let whole = WholePages::new(options.max_whole_pages);
    mount(
        Router::new(),
        dir,
        options,
        cpu,
        &Guard::default(),
        &whole,
        &[],
    )
}

/// [`router`]'s routes added to `router`, after its own: mount the site's other routes first, so
/// that they win over a page of the same name. Sets the router's fallback (pages added later).
/// Whole pages count against `whole` (shared with the compiled pages).
pub fn mount(
    router: Router,
    dir: &Path,
    options: &PagesConfig,
    cpu: &Pool,
    control: &Guard,
    whole: &WholePages,
    live_links: &[String],
) -> anyhow::Result<(Router, Templates)> {
    let copy = CopyBelow {
        text: SERVE_COPY_BELOW,
        values: options.value_copy_below,
    };
    let templates = Templates::load(dir, copy, options.limits, options.watch)?;
    let pages = templates.pages();
    let mut data = HashMap::new();
    for page in &pages {
        if let Some(assigns) = read_data(dir, page)? {
            data.insert(page.to_owned(), assigns);
        }
    }
    let site = Arc::new(Site {
        templates: templates.clone(),
        pool: string_pool(),
        stream_chunk: options.stream_chunk.max(1),
        full_body_max: options.full_body_max,
        whole: whole.clone(),
        seq: AtomicU64::new(0x2545_f491_4f6c_dd1d),
        cpu: cpu.clone(),
        dir: dir.to_owned(),
        later: RwLock::new(HashMap::new()),
        live_links: live_links.to_vec(),
    });

    let mut router = router;
    let index_site = site.clone();
    router = router.get("/", move |_req: Request| {
        let site = index_site.clone();
        async move { index(&site) }
    });
    let static_root = dir.join("static");
    router = router.get("/static/{*path}", move |req: Request| {
        let root = static_root.clone();
        async move {
            let rel = req.param("path").unwrap_or_default().to_owned();
            let ask = crate::static_files::Ask::of(&req);
            tokio::task::spawn_blocking(move || crate::static_files::serve(&root, &rel, &ask))
                .await
                .unwrap_or_else(|_| Response::error(StatusCode::INTERNAL_SERVER_ERROR, "failed"))
        }
    });
    let (reload, control) = (templates.clone(), control.closed());
    router = router.post("/templates/reload", move |req: Request| {
        let templates = reload.clone();
        let refused = control.check(&req);
        async move {
            match refused {
                Some(refusal) => refusal,
                None => reload_now(templates).await,
            }
        }
    });
    // The pages of the start: a route each (their own statistics), after every other route.
    for page in pages {
        let data = data.remove(&page);
        let path = format!("/{page}");
        let page = Arc::new(new_page(cpu, page, data));
        router = router.get(
            &path,
            PageHandler {
                site: site.clone(),
                page,
            },
        );
    }
    router = router.fallback(LaterPages { site });
    Ok((router, templates))
}

/// The assigns of `data/PAGE.json`, `None` when there is no such file.
fn read_data(dir: &Path, page: &str) -> anyhow::Result<Option<Assigns>> {
    let json_path = dir.join("data").join(format!("{page}.json"));
    if !json_path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&json_path)
        .with_context(|| format!("reading {}", json_path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: invalid JSON", json_path.display()))?;
    let assigns =
        Assigns::from_json(json).map_err(|e| anyhow::anyhow!("{}: {e}", json_path.display()))?;
    Ok(Some(assigns))
}

/// Page `page` with its data file's `data`; its renders are offload kind `render:/NAME`.
fn new_page(cpu: &Pool, page: String, data: Option<Assigns>) -> Page {
    Page {
        data,
        strings: match page.as_str() {
            "static-strings" => Some(STATIC_SET),
            "dynamic-strings" => Some(STRING_POOL),
            _ => None,
        },
        kind: cpu.kind(&format!("render:/{page}")),
        page,
    }
}

impl Site {
    /// The page added since the start named `name` (a page of the current version), made on its
    /// first request: its data file is read then, once (a bad one is logged and the page renders
    /// without it).
    fn later_page(&self, name: &str) -> Arc<Page> {
        if let Some(page) = self
            .later
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
        {
            return page.clone();
        }
        let mut later = self.later.write().unwrap_or_else(PoisonError::into_inner);
        later
            .entry(name.into())
            .or_insert_with(|| {
                let data = read_data(&self.dir, name).unwrap_or_else(|e| {
                    tracing::error!(page = name, error = %format!("{e:#}"), "page data not loaded");
                    None
                });
                Arc::new(new_page(&self.cpu, name.to_owned(), data))
            })
            .clone()
    }
}

/// `POST /templates/reload` (loopback peers only, or requests with the control token): compiles
/// the templates (on the blocking pool, once for all the posts that share the run); 200 with the
/// new version, or 422 with the located error while the old one serves.
async fn reload_now(templates: Templates) -> Response {
    // Shared with the concurrent posts: at most one compile runs and one more is pending.
    let done = templates.reload_shared().await;
    let (status, body) = match done {
        Ok(Ok(version)) => (StatusCode::OK, serde_json::json!({ "version": version })),
        Ok(Err(error)) => (StatusCode(422), serde_json::json!({ "error": error })),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({ "error": "the reload failed" }),
        ),
    };
    Response::new(status, body.to_string()).with_header("content-type", "application/json")
}

/// The pool of pre-generated strings (deterministic, uppercase letters).
fn string_pool() -> Vec<Value> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    (0..STRING_POOL)
        .map(|_| {
            let s: Vec<u8> = (0..STRING_LEN)
                .map(|_| b'A' + (rng.next() % 26) as u8)
                .collect();
            // Safe HTML (letters only) held as a shared segment: rendered by reference.
            Value::safe(IoList::from(Bytes::from(s)))
        })
        .collect()
}

/// xorshift64*, for picking strings: same cost per pick on both experiment pages.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `/`: the current version's pages, in the layout when there is one.
fn index(site: &Site) -> Response {
    let compiled = site.templates.snapshot();
    let mut list = IoList::new();
    list.push_static(b"<h1>galleon</h1>\n<ul>\n");
    for p in compiled.page_names() {
        list.push_static(b"<li><a href=\"/");
        escape_html_copy_into(&mut list, p.as_bytes());
        list.push_static(b"\">");
        escape_html_copy_into(&mut list, p.as_bytes());
        list.push_static(b"</a></li>\n");
    }
    list.push_static(b"</ul>\n");
    if !site.live_links.is_empty() {
        list.push_static(b"<h2>Live pages</h2>\n<ul>\n");
        for p in &site.live_links {
            list.push_static(b"<li><a href=\"");
            escape_html_copy_into(&mut list, p.as_bytes());
            list.push_static(b"\">");
            escape_html_copy_into(&mut list, p.as_bytes());
            list.push_static(b"</a></li>\n");
        }
        list.push_static(b"</ul>\n");
    }
    let engine = &compiled.engine;
    if engine.contains("layout.html.eex") {
        let mut a = Assigns::new();
        a.insert("inner_content", Value::safe(list));
        match engine.render("layout.html.eex", &a) {
            Ok(page) => Response::html(page),
            Err(e) => render_failed(&e, None),
        }
    } else {
        Response::html(list)
    }
}

/// The value of `@name` for one request of `page`, the way the page's assigns are layered: its
/// data file, overridden by the query string (values JSON-parsed where they parse, strings
/// otherwise: the same rule as `galleon render --assign`; the last pair of a name wins), then the
/// extras of the seed experiments. The engine asks only for the names the template uses, so a
/// request builds no map of assigns and parses no query value the page does not read.
fn assign(
    site: &Site,
    page: &Page,
    req: &Request,
    name: &str,
    strings: &OnceCell<Value>,
) -> Option<Value> {
    if page.strings.is_some() && name == "strings" {
        return Some(
            strings
                .get_or_init(|| pick_strings(site, page, req))
                .clone(),
        );
    }
    // A query that does not decode gives no value, not a fallback: `render_failed` answers 400.
    let from_query = crate::assign::from_query(req, name).ok()?;
    from_query
        .or_else(|| page.data.as_ref()?.get(name).cloned())
        .or_else(|| (page.page == "doom" && name == "iters").then_some(DOOM_DEFAULT_ITERS.into()))
}

/// `@strings` of `/static-strings` and `/dynamic-strings`: `@count` picks from the pool (the
/// first [`STATIC_SET`] strings, or all of them).
fn pick_strings(site: &Site, page: &Page, req: &Request) -> Value {
    let count = match assign(site, page, req, "count", &OnceCell::new()) {
        Some(Value::Int(n)) => n.clamp(0, MAX_STRING_COUNT as i64) as usize,
        _ => DEFAULT_STRING_COUNT,
    };
    let modulus = page.strings.unwrap_or(site.pool.len()).max(1);
    let mut rng = XorShift(site.seq.fetch_add(0x9e37_79b9, Ordering::Relaxed) | 1);
    Value::list((0..count).map(|_| site.pool[(rng.next() % modulus as u64) as usize].clone()))
}

/// The route of a page of the start: renders inline, during the call on the connection's task
/// (no future, no per-request clone of `site` and `page`, whose reference counts every worker
/// shares), when the `--offload` policy says so for this page at this size; else on the CPU
/// pool. Its template is looked up by name in the version that renders ([`Compiled::page`]).
///
/// [`Compiled::page`]: crate::templates::Compiled::page
struct PageHandler {
    site: Arc<Site>,
    page: Arc<Page>,
}

impl Handler for PageHandler {
    fn call(&self, req: Request) -> Reply {
        serve(&self.site, &self.page, req)
    }
}

/// The router's fallback: a path no route matched is a page added since the start when it is
/// one plain segment ([`is_page_name`]) naming a page of the current version (`GET` or `HEAD`;
/// 405 otherwise), else 404. One lookup of the name in the current version (a binary search, no
/// allocation) and one in the pages made so far.
struct LaterPages {
    site: Arc<Site>,
}

impl Handler for LaterPages {
    fn call(&self, req: Request) -> Reply {
        let site = &self.site;
        let name = req.path().strip_prefix('/').unwrap_or_default();
        if !is_page_name(name) || !site.templates.with_current(|c| c.page(name).is_some()) {
            return Reply::Ready(Response::not_found());
        }
        if !matches!(req.method(), Method::Get | Method::Head) {
            return Reply::Ready(
                Response::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
                    .with_header("allow", "GET, HEAD"),
            );
        }
        let page = site.later_page(name);
        serve(site, &page, req)
    }
}

/// Renders `page` for `req` inline, during the call, when the `--offload` policy says so for
/// this page at this size; else on the CPU pool.
fn serve(site: &Arc<Site>, page: &Arc<Page>, req: Request) -> Reply {
    let size = size_hint(&req);
    match site
        .cpu
        .try_inline(&page.kind, size, || render_page(site, page, &req))
    {
        Some(Ok(resp)) => Reply::Ready(resp),
        Some(Err(e)) => Reply::Ready(crate::offload::failed(&page.kind, e)),
        None => {
            let (site, page) = (site.clone(), page.clone());
            Reply::Later(Box::pin(async move {
                let (cpu, kind) = (site.cpu.clone(), page.kind.clone());
                cpu.offload(&kind, size, move || render_page(&site, &page, &req))
                    .await
                    .unwrap_or_else(|e| crate::offload::failed(&kind, e))
            }))
        }
    }
}

/// How big a render of this request will be, for the adaptive policy's estimate by size: the
/// largest integer among the query's values (the site's pages loop `@iters` or `@count` times),
/// 1 without one. A guess that fits these pages; an application knows its own measure.
fn size_hint(req: &Request) -> Option<u64> {
    let largest = galleon_http::split_query(req.query())
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .max();
    Some(largest.unwrap_or(1))
}

fn render_page(site: &Site, page: &Page, req: &Request) -> Response {
    site.templates.with_current(|compiled| {
        if let Some(error) = &compiled.broken {
            return broken_page(error, req);
        }
        // Gone from this version (its file removed, then a reload): like any unknown path.
        let Some(id) = compiled.page(&page.page) else {
            return Response::not_found();
        };
        let strings = OnceCell::new();
        let assign = |name: &str| assign(site, page, req, name, &strings);
        let whole_max = site.whole.whole_max(site.full_body_max);
        match compiled
            .engine
            .render_or_stream(id, assign, whole_max, site.stream_chunk)
        {
            Ok(Rendered::Whole(list)) => site.whole.respond(list),
            Ok(Rendered::Streaming { first, rest }) => {
                Response::html(Body::iter(std::iter::once(Ok(first)).chain(rest)))
            }
            Err(e) => render_failed(&e, Some(req)),
        }
    })
}

/// A page while the newest templates do not compile (`--watch` only): the located error, like
/// Phoenix's debug page, for loopback peers (the developer at the machine); a plain 500 for
/// anyone else, since the error quotes template source.
fn broken_page(error: &str, req: &Request) -> Response {
    if !req.peer().is_none_or(|p| p.ip().is_loopback()) {
        return Response::error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
    }
    let mut page = IoList::new();
    page.push_static(b"<!doctype html>\n<title>template error</title>\n<h1>Template error</h1>\n<p>The last good templates are kept; this page shows until the file is fixed (galleon serve --watch).</p>\n<pre>");
    escape_html_copy_into(&mut page, error.as_bytes());
    page.push_static(b"</pre>\n");
    Response::new(StatusCode::INTERNAL_SERVER_ERROR, page)
        .with_header("content-type", "text/html; charset=utf-8")
}

/// The answer to a page whose render failed. A page's assigns come from the query string (over
/// its data file), so a failure the request's query explains is the client's: 400 when the query
/// does not decode (its pairs are skipped, so the page saw those values missing), when the page
/// reads an assign neither gives (`/blah` without `?iters=`), or when a query value does not fit
/// (a number where a list was due, a loop too long). Anything else is the site's: 500. Either way
/// the body is one short line; the full error, with the template's name, line and source, goes
/// to the log only.
pub fn render_failed(e: &galleon_template::Error, req: Option<&Request>) -> Response {
    let target = req.map_or("/", |r| r.target());
    let query = req.map_or("", |r| r.query());
    let on_values = matches!(
        e.kind(),
        ErrorKind::UnknownAssign
            | ErrorKind::TypeMismatch
            | ErrorKind::UnknownKey
            | ErrorKind::Arithmetic
            | ErrorKind::Limit
            | ErrorKind::Data
    );
    let why = if !on_values || req.is_none() {
        None
    } else if !query.is_empty() && !crate::assign::query_decodes(query) {
        tracing::info!(target, error = %e, "page refused: its query string does not decode");
        Some("the query string is malformed")
    } else if e.kind() == ErrorKind::UnknownAssign {
        // Also what a template naming an assign nobody gives looks like; logged, like every
        // client refusal, at info, so clients cannot fill the default (warn) log.
        tracing::info!(target, error = %e, "page refused: the request lacks a value the page reads");
        Some("this page needs a query value the request does not give")
    } else if !query.is_empty() {
        tracing::info!(target, error = %e, "page refused: its query values do not fit");
        Some("the query's values do not fit this page")
    } else {
        None
    };
    match why {
        Some(why) => Response::error(StatusCode::BAD_REQUEST, why),
        None => {
            tracing::error!(target, error = %e, "page render failed");
            Response::error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use galleon_http::Method;

    #[tokio::test]
    async fn template_reload_is_refused_to_other_peers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pages")).unwrap();
        std::fs::write(dir.path().join("pages/p.html.eex"), "v1").unwrap();
        let cpu = Pool::new(galleon_offload::Config {
            threads: 1,
            ..galleon_offload::Config::default()
        })
        .unwrap();
        let (router, templates) = router(dir.path(), &PagesConfig::default(), &cpu).unwrap();
        std::fs::write(dir.path().join("pages/p.html.eex"), "v2").unwrap();
        let post = |peer: &str| {
            Request::new(Method::Post, "/templates/reload", &[], Bytes::new())
                .with_peer(peer.parse().unwrap())
        };
        let r = router.handle(post("192.0.2.7:5000")).await;
        assert_eq!(r.status().0, 403);
        assert_eq!(templates.snapshot().version(), 1, "nothing reloaded");
        let r = router.handle(post("[::1]:5000")).await;
        assert_eq!(r.status().0, 200);
        assert_eq!(templates.snapshot().version(), 2);
    }
}
