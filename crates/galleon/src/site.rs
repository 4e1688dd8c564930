//! The example site as a [`Router`]: every `pages/NAME.html.eex` at `/NAME`, static files at
//! `/static/...`, the index at `/`, and the seed experiments' extra assigns.
//!
//! Every page is first rendered whole with its output capped at [`FULL_BODY_MAX`] bytes: a page
//! that fits (all ordinary pages, `/blah?iters=1000`'s 410 KB) is sent with `content-length`. A
//! bigger one (`/doom`) is rendered again with [`Engine::stream`] and goes out chunked, one chunk
//! of `--chunk-bytes` at a time, so no query string can make the server hold more than
//! `FULL_BODY_MAX` bytes of any page. Pages are served bare (no layout), so `/blah?iters=N` is
//! byte-identical to `galleon render site/pages/blah.html.eex --assign iters=N`; the layout wraps
//! only the index.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use bytes::Bytes;
use galleon_http::{
    Body, IoList, Request, Response, Router, StatusCode, WritePolicy, sync_handler,
};
use galleon_iolist::escape_html_copy_into;
use galleon_template::{Assigns, Engine, ErrorKind, Limits as TemplateLimits, TemplateId, Value};

/// A page that ends within this many bytes is sent whole with `content-length`; a longer one is
/// streamed. 4 MiB: ten times the seed's largest page (410 KB), small enough that 1000
/// concurrent renders stay under 4 GiB.
pub(crate) const FULL_BODY_MAX: usize = 4 * 1024 * 1024;

/// Default chunk size of a streamed page: 256 KiB, the same as `galleon render`. Downloads of
/// `/doom` with 64 KiB, 256 KiB and 1 MiB chunks on the (shared, noisy) development machine
/// differed by less than the run-to-run noise; the smaller the chunk, the less memory each
/// streaming connection holds (at most three chunks).
pub(crate) const DEFAULT_STREAM_CHUNK: usize = 256 * 1024;

/// The template engine's copy threshold when serving (see `galleon_template::DEFAULT_COPY_BELOW`,
/// 256): 64 bytes, so blah-split's 205-byte halves stay referenced like blah's 410-byte blocks and
/// the write policy alone decides what gets copied, into the connection's reused buffer. With the
/// engine's 256, every `/blah-split` render copied 410 KB into a fresh, growing scratch buffer
/// and ran at 0.72x of `/blah` in a first `bench/http.sh` run (0.91x after this change; 1.04x
/// once renders stopped cloning a reference count per static piece, `bench/results/http.txt`);
/// the issue asks for the two within 5%.
/// Values under 64 bytes (numbers, names) are still copied at render time, where one copy is
/// cheaper than a segment.
pub(crate) const SERVE_COPY_BELOW: usize = 64;

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

/// Request header that picks the write policy for one response: `default`, `flatten` or
/// `vectored` (how `bench/http.sh` compares policies against one server).
pub(crate) const POLICY_HEADER: &str = "x-galleon-write-policy";

/// One compiled copy of the site's templates.
#[derive(Debug)]
struct Engines {
    /// For streamed pages.
    engine: Engine,
    /// The same templates, whole renders capped at [`FULL_BODY_MAX`] bytes.
    whole: Engine,
}

/// What every page handler shares.
#[derive(Debug)]
struct Site {
    /// The compiled templates.
    engines: Engines,
    pool: Vec<Value>,
    stream_chunk: usize,
    seq: AtomicU64,
}

/// One page: its name (`blah`), its template's (`pages/blah.html.eex`), its data file's
/// assigns and, for the seed's string pages, how many pool strings it picks from.
#[derive(Debug)]
struct Page {
    page: String,
    /// The page's template, looked up once (valid for both engines: they share the templates).
    template: TemplateId,
    data: Option<Assigns>,
    /// `Some(n)`: `@strings` is picked from the first `n` strings of the pool.
    strings: Option<usize>,
}

/// Builds the site's router from `dir` (`pages/`, `data/`, `static/`, `layout.html.eex`).
pub(crate) fn router(dir: &Path, stream_chunk: usize) -> anyhow::Result<Router> {
    let engine = Engine::load(dir)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .with_copy_below(SERVE_COPY_BELOW);
    let whole = engine.clone().with_limits(TemplateLimits {
        max_output: FULL_BODY_MAX,
        ..engine.limits()
    });
    let engines = Engines { engine, whole };
    let engine = &engines.engine;
    let mut data = HashMap::new();
    let mut pages = Vec::new();
    for name in engine.names() {
        let Some(page) = name
            .strip_prefix("pages/")
            .and_then(|n| n.strip_suffix(".html.eex"))
        else {
            continue;
        };
        if page.contains('/') {
            continue;
        }
        pages.push(page.to_owned());
        let json_path = dir.join("data").join(format!("{page}.json"));
        if json_path.exists() {
            let text = std::fs::read_to_string(&json_path)
                .with_context(|| format!("reading {}", json_path.display()))?;
            let json: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{}: invalid JSON", json_path.display()))?;
            let assigns = Assigns::from_json(json)
                .map_err(|e| anyhow::anyhow!("{}: {e}", json_path.display()))?;
            data.insert(page.to_owned(), assigns);
        }
    }
    let site = Arc::new(Site {
        engines,
        pool: string_pool(),
        stream_chunk: stream_chunk.max(1),
        seq: AtomicU64::new(0x2545_f491_4f6c_dd1d),
    });

    let mut router = Router::new();
    let index_site = site.clone();
    let index_pages = pages.clone();
    router = router.get("/", move |_req: Request| {
        let site = index_site.clone();
        let pages = index_pages.clone();
        async move { index(&site, &pages) }
    });
    for page in pages {
        let site = site.clone();
        let path = format!("/{page}");
        let page = Arc::new(Page {
            template: site
                .engines
                .engine
                .id(&format!("pages/{page}.html.eex"))
                .map_err(|e| anyhow::anyhow!("{e}"))?,
            data: data.remove(&page),
            strings: match page.as_str() {
                "static-strings" => Some(STATIC_SET),
                "dynamic-strings" => Some(STRING_POOL),
                _ => None,
            },
            page,
        });
        // The page is rendered during the call, on the connection's task: no future per
        // request, and no per-request clone of `site` and `page`, whose reference counts every
        // worker thread shares.
        router = router.get(
            &path,
            sync_handler(move |req: Request| render_page(&site, &page, &req)),
        );
    }
    let static_root = dir.join("static");
    router = router.get("/static/{*path}", move |req: Request| {
        let root = static_root.clone();
        async move {
            let rel = req.param("path").unwrap_or_default().to_owned();
            tokio::task::spawn_blocking(move || static_file(&root, &rel))
                .await
                .unwrap_or_else(|_| Response::error(StatusCode::INTERNAL_SERVER_ERROR, "failed"))
        }
    });
    Ok(router)
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

fn index(site: &Site, pages: &[String]) -> Response {
    let mut list = IoList::new();
    list.push_static(b"<h1>galleon</h1>\n<ul>\n");
    for p in pages {
        list.push_static(b"<li><a href=\"/");
        escape_html_copy_into(&mut list, p.as_bytes());
        list.push_static(b"\">");
        escape_html_copy_into(&mut list, p.as_bytes());
        list.push_static(b"</a></li>\n");
    }
    list.push_static(b"</ul>\n");
    let engine = &site.engines.engine;
    if engine.contains("layout.html.eex") {
        let mut a = Assigns::new();
        a.insert("inner_content", Value::safe(list));
        match engine.render("layout.html.eex", &a) {
            Ok(page) => Response::html(page),
            Err(e) => Response::error(StatusCode::INTERNAL_SERVER_ERROR, e),
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
    let from_query = req.query_value(name).map(|v| parse_assign(&v));
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

/// A query value as an assign: JSON where it parses (`10`, `true`, `[1,2]`, `"x"`), else the
/// string itself. Plain integers, the common case (`?iters=10`), skip the JSON parser; the
/// result is the same (tested).
fn parse_assign(v: &str) -> Value {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let plain_int = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.len() > 1 && digits.starts_with('0'))
        && v != "-0";
    if plain_int && let Ok(i) = v.parse::<i64>() {
        return Value::Int(i);
    }
    match serde_json::from_str::<serde_json::Value>(v) {
        Ok(json) => json.into(),
        Err(_) => Value::str(v),
    }
}

fn render_page(site: &Site, page: &Page, req: &Request) -> Response {
    let strings = OnceCell::new();
    let assign = |name: &str| assign(site, page, req, name, &strings);
    // Whole first, within FULL_BODY_MAX: the engine sizes the list from the last render, and
    // the response gets a content-length. A page past the limit is rendered again as a stream
    // (with the same assigns: the strings pages pick their strings once).
    let engines = &site.engines;
    let resp = match engines.whole.render_with(page.template, assign) {
        Ok(list) => Response::html(list),
        Err(e) if e.kind() == ErrorKind::Limit => {
            match engines
                .engine
                .stream_with(page.template, assign, site.stream_chunk)
            {
                Ok(stream) => Response::html(Body::iter(stream)),
                Err(e) => return Response::error(StatusCode::INTERNAL_SERVER_ERROR, e),
            }
        }
        Err(e) => return Response::error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    match req
        .header_str(POLICY_HEADER)
        .and_then(|p| WritePolicy::from_name(p.trim()))
    {
        Some(p) => resp.with_policy(p),
        None => resp,
    }
}

/// Content types by file extension; anything else is `application/octet-stream`.
fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// Resolves `rel` (already percent-decoded) under `root`, refusing anything that could leave it:
/// empty, `.` or `..` segments, backslashes, NULs, and symlinks pointing outside.
pub(crate) fn resolve_static(root: &Path, rel: &str) -> Option<PathBuf> {
    if rel.is_empty() || rel.contains('\0') || rel.contains('\\') {
        return None;
    }
    let mut path = root.to_path_buf();
    for seg in rel.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return None;
        }
        path.push(seg);
    }
    let root = root.canonicalize().ok()?;
    let real = path.canonicalize().ok()?;
    (real.starts_with(&root) && real.is_file()).then_some(real)
}

fn static_file(root: &Path, rel: &str) -> Response {
    let Some(path) = resolve_static(root, rel) else {
        return Response::not_found();
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(_) => return Response::not_found(),
    };
    let len = match file.metadata() {
        Ok(m) => m.len(),
        Err(_) => return Response::not_found(),
    };
    Response::new(StatusCode::OK, Body::file(file, len))
        .with_header("content-type", content_type(&path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old rule, which the integer fast path must agree with.
    fn via_json(v: &str) -> Value {
        serde_json::from_str::<serde_json::Value>(v).map_or_else(|_| Value::str(v), Value::from)
    }

    #[test]
    fn query_values_parse_as_json_or_stay_strings() {
        for v in [
            "0",
            "10",
            "-7",
            "-0",
            "007",
            "-01",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "99999999999999999999",
            "1.5",
            "1e3",
            " 10",
            "10 ",
            "+1",
            "-",
            "",
            "--1",
            "1-",
            "true",
            "null",
            "[1,2]",
            "\"x\"",
            "abc",
            "{\"a\":1}",
        ] {
            assert_eq!(parse_assign(v), via_json(v), "{v:?}");
        }
        assert_eq!(parse_assign("10"), Value::Int(10));
        assert_eq!(parse_assign("007"), Value::str("007"));
    }

    #[test]
    fn static_paths_cannot_escape_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("static");
        std::fs::create_dir_all(root.join("css")).unwrap();
        std::fs::write(root.join("css/site.css"), "body{}").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "no").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link.txt")).unwrap();
        assert!(resolve_static(&root, "css/site.css").is_some());
        for bad in [
            "../secret.txt",
            "css/../../secret.txt",
            "./css/site.css",
            "css//site.css",
            "/etc/passwd",
            "",
            "css",
            "link.txt",
            "css\\..\\..\\secret.txt",
            "css/site.css\0",
        ] {
            assert!(resolve_static(&root, bad).is_none(), "{bad:?} escaped");
        }
    }
}
