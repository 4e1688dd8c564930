//! The rules example of seed 003 (issue 15): 5,000 rules of 27 fields that every request reads,
//! replaced while serving.
//!
//! - `GET /rules/match?field=value&...`: the matching rules as JSON (`set.rs` has the matching
//!   and coercion rules), `_limit=N` for at most N of them (default and most:
//!   `--rules-max-results`); an unknown field or a value not of its field's type is 400 with a
//!   JSON error. The header `x-galleon-rules-version` names the version that answered.
//! - `GET /rules`: the version, revision, rule count and fields, and the reloads run and waiting.
//! - `POST /rules/reload`: reloads now, for loopback peers only (403 otherwise): 200 with the new
//!   version, or 422 with the located error while the old version goes on serving. Concurrent
//!   posts share reloads ([`crate::coalesce`]): at most one runs and one more is pending.
//! - The file is also reloaded when it changes (polled every `--rules-poll-ms`) and on SIGHUP.
//!
//! `--rules-mode` picks how a request reaches the rules, for the comparison the seed made:
//! `shared` takes a snapshot of the one published version (a pointer, no lock, no copy); `copy`
//! deep-copies the whole set for every request and matches on the copy (what the Elixir Agent
//! did); `pool` keeps a deep copy per worker thread, copied again when the version changes (the
//! seed's fix, a pool of workers each holding the rules). All three answer with the same bytes.

use std::borrow::Cow;
use std::cell::RefCell;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use galleon_http::{
    Guard, Request, Response, Router, StatusCode, percent_decode, split_query, sync_handler,
};
use galleon_state::{Reloader, Shared, Watch};

pub mod bench;
pub mod generate;
mod set;

use crate::coalesce::Coalesced;
use set::{RuleSet, SetLimits};

/// Header naming the version (1, 2, ... per reload) that produced a response.
pub const VERSION_HEADER: &str = "x-galleon-rules-version";

/// Default `--rules-max-results`: rules listed in one response at most.
pub const DEFAULT_MAX_RESULTS: usize = 1000;

/// Largest `--rules-max-results`: every rule of the largest set.
const MAX_MAX_RESULTS: usize = 10_000_000;

/// Default `--rules-max-bytes`: 64 MiB, sixteen times the seed's 4 MB of rules.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Largest `--rules-max-bytes`: 1 GiB (rule offsets are 32-bit; a file is held twice while it
/// is parsed).
const MAX_MAX_BYTES: u64 = 1024 * 1024 * 1024;

/// Default `--rules-max-rules`.
pub const DEFAULT_MAX_RULES: usize = generate::MAX_COUNT;

/// Default `--rules-poll-ms`: how often the file is checked for a change.
pub const DEFAULT_POLL_MS: u64 = 500;

/// How a request reaches the rules (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// A snapshot of the one shared version: no lock, no copy.
    #[default]
    Shared,
    /// A deep copy of the whole set per request (the Elixir Agent pattern).
    Copy,
    /// A deep copy per worker thread, refreshed when the version changes (the seed's pool).
    Pool,
}

/// The rules example's settings (`galleon serve`'s `--rules*`); `Default` is the flags' defaults.
#[derive(Debug, Clone)]
pub struct RulesConfig {
    /// The rule set; `None`: `SITE/data/rules.json` when it exists (no rules routes otherwise).
    pub file: Option<PathBuf>,
    /// How requests reach the rules.
    pub mode: Mode,
    /// Most rules one /rules/match response lists.
    pub max_results: usize,
    /// Largest rules file read, in bytes.
    pub max_bytes: u64,
    /// Most rules a rules file may hold.
    pub max_rules: usize,
    /// Milliseconds between checks of the file for a change; 0 checks never.
    pub poll_ms: u64,
}

impl Default for RulesConfig {
    fn default() -> RulesConfig {
        RulesConfig {
            file: None,
            mode: Mode::Shared,
            max_results: DEFAULT_MAX_RESULTS,
            max_bytes: DEFAULT_MAX_BYTES,
            max_rules: DEFAULT_MAX_RULES,
            poll_ms: DEFAULT_POLL_MS,
        }
    }
}

/// What keeps the rules' reloading alive: drop it to stop the file polling.
#[derive(Debug)]
pub struct Running {
    _watch: Option<Watch>,
}

/// Loads the rules and mounts their routes on `router`, with reloading on change, on SIGHUP when
/// `on_sighup` (then it must run inside a tokio runtime) and on `POST /rules/reload`. A rules
/// file named in `args.file` must load; the default one may be missing (then no rules routes).
pub fn mount(
    router: Router,
    site: &Path,
    args: &RulesConfig,
    on_sighup: bool,
    control: &Guard,
) -> anyhow::Result<(Router, Running)> {
    let control = control.closed();
    let none = Running { _watch: None };
    let path = match &args.file {
        Some(p) => p.clone(),
        None => {
            let p = site.join("data").join("rules.json");
            if !p.exists() {
                return Ok((router, none));
            }
            p
        }
    };
    anyhow::ensure!(
        (1..=MAX_MAX_RESULTS).contains(&args.max_results),
        "--rules-max-results {}: expected 1 to {MAX_MAX_RESULTS}",
        args.max_results
    );
    anyhow::ensure!(
        (1..=MAX_MAX_BYTES).contains(&args.max_bytes),
        "--rules-max-bytes {}: expected 1 to {MAX_MAX_BYTES}",
        args.max_bytes
    );
    anyhow::ensure!(
        (1..=MAX_MAX_RESULTS).contains(&args.max_rules),
        "--rules-max-rules {}: expected 1 to {MAX_MAX_RESULTS}",
        args.max_rules
    );
    anyhow::ensure!(
        args.poll_ms == 0 || (10..=3_600_000).contains(&args.poll_ms),
        "--rules-poll-ms {}: expected 0 (off) or 10 to 3600000",
        args.poll_ms
    );
    let limits = SetLimits {
        max_rules: args.max_rules,
    };
    let reloader = Reloader::load_limited(&path, args.max_bytes, move |p, b| {
        RuleSet::parse(p, b, limits).map_err(Into::into)
    })
    .with_context(|| format!("loading the rules in {}", path.display()))?;
    let watch = match args.poll_ms {
        0 => None,
        ms => Some(reloader.watch(Duration::from_millis(ms))?),
    };
    if on_sighup {
        let on_hup = reloader.clone();
        galleon_state::on_sighup(move || {
            let _ = on_hup.reload();
        })
        .context("installing the SIGHUP handler")?;
    }
    {
        let set = reloader.shared().snapshot();
        // Ignoring a failed write: a stderr nobody reads must not stop the site.
        let _ = writeln!(
            std::io::stderr(),
            "galleon: rules {} ({} rules, revision {}, mode {:?})",
            path.display(),
            set.len(),
            set.revision(),
            args.mode
        );
    }

    let reloads = coalesced_reload(&reloader);
    let shared = reloader.shared().clone();
    let (mode, max) = (args.mode, args.max_results);
    let router = router
        .get(
            "/rules/match",
            sync_handler(move |req: Request| match mode {
                Mode::Shared => {
                    let snap = shared.snapshot();
                    answer(&snap, snap.version(), &req, max)
                }
                Mode::Copy => {
                    let (copy, version) = {
                        let snap = shared.snapshot();
                        (snap.deep_clone(), snap.version())
                    };
                    answer(&copy, version, &req, max)
                }
                Mode::Pool => {
                    with_pool_copy(&shared, |set, version| answer(set, version, &req, max))
                }
            }),
        )
        .get("/rules", {
            let (shared, reloads) = (reloader.shared().clone(), reloads.clone());
            sync_handler(move |_req: Request| info(&shared, &reloads))
        })
        .post("/rules/reload", move |req: Request| {
            let reloads = reloads.clone();
            let refused = control.check(&req);
            async move {
                match refused {
                    Some(refusal) => refusal,
                    None => reload(&reloads).await,
                }
            }
        });
    Ok((router, Running { _watch: watch }))
}

/// One worker thread's copy of the rules (`--rules-mode pool`): which cell and version it is a
/// copy of.
struct PoolCopy {
    cell: usize,
    version: u64,
    set: RuleSet,
}

thread_local! {
    static POOL: RefCell<Option<PoolCopy>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's copy of the rules, copying the current version first when the copy
/// is missing or stale. The check is one atomic load; `f` runs with no lock.
fn with_pool_copy<R>(shared: &Shared<RuleSet>, f: impl FnOnce(&RuleSet, u64) -> R) -> R {
    POOL.with_borrow_mut(|slot| {
        let fresh = slot
            .as_ref()
            .is_some_and(|c| c.cell == shared.id() && c.version == shared.version());
        if !fresh {
            // Drop the old copy before making the new one: one copy per thread at most.
            *slot = None;
        }
        let copy = slot.get_or_insert_with(|| {
            let snap = shared.snapshot();
            PoolCopy {
                cell: shared.id(),
                version: snap.version(),
                set: snap.deep_clone(),
            }
        });
        f(&copy.set, copy.version)
    })
}

fn json(status: StatusCode, body: impl Into<galleon_http::Body>) -> Response {
    Response::new(status, body).with_header("content-type", "application/json")
}

fn json_error(status: StatusCode, message: &str) -> Response {
    json(
        status,
        format!("{}\n", serde_json::json!({ "error": message })),
    )
}

/// The answer to `GET /rules/match` from `set`.
fn answer(set: &RuleSet, version: u64, req: &Request, max: usize) -> Response {
    let mut limit = max;
    let mut pairs: Vec<(Cow<'_, str>, Cow<'_, str>)> = Vec::new();
    for (name, value) in split_query(req.query()) {
        let (Some(name), Some(value)) = (percent_decode(name, true), percent_decode(value, true))
        else {
            return json_error(
                StatusCode::BAD_REQUEST,
                "query: malformed percent-escape or not UTF-8",
            );
        };
        if name == "_limit" {
            match value.parse::<usize>() {
                Ok(n) if n <= max => limit = n,
                _ => {
                    return json_error(
                        StatusCode::BAD_REQUEST,
                        &format!("_limit `{value}`: expected 0 to {max}"),
                    );
                }
            }
        } else if name.starts_with('_') {
            return json_error(
                StatusCode::BAD_REQUEST,
                &format!("unknown option `{name}` (options: _limit)"),
            );
        } else {
            pairs.push((name, value));
        }
    }
    match set.query(pairs.iter().map(|(n, v)| (&**n, &**v))) {
        Ok(q) => json(StatusCode::OK, set.to_json(&set.matches(&q), limit))
            .with_header(VERSION_HEADER, version.to_string()),
        Err(e) => json_error(StatusCode::BAD_REQUEST, &e.to_string()),
    }
}

/// What a `POST /rules/reload` answers: the version and revision serving after its reload, or
/// the located error.
type ReloadOutcome = Result<(u64, String), String>;

/// `POST /rules/reload`'s reload, shared by concurrent posts: reads and parses the file now, then
/// says what serves (this reload's version, or a later one's: number and label together).
fn coalesced_reload(reloader: &Reloader<RuleSet>) -> Coalesced<ReloadOutcome> {
    let reloader = reloader.clone();
    Coalesced::new(move || {
        reloader
            .reload()
            .map(|_| {
                let now = reloader.shared().load_full();
                (now.version(), now.revision().to_owned())
            })
            .map_err(|e| e.to_string())
    })
}

/// `GET /rules`: what is serving, and how many reloads ran and wait.
fn info(shared: &Shared<RuleSet>, reloads: &Coalesced<ReloadOutcome>) -> Response {
    let set = shared.snapshot();
    let fields: Vec<_> = set
        .fields()
        .iter()
        .map(|f| serde_json::json!({ "name": &*f.name, "type": f.ty.name() }))
        .collect();
    let body = serde_json::json!({
        "version": set.version(),
        "revision": set.revision(),
        "rules": set.len(),
        "fields": fields,
        "reloads": { "runs": reloads.runs(), "waiting": reloads.waiting() },
    });
    json(StatusCode::OK, format!("{body}\n")).with_header(VERSION_HEADER, set.version().to_string())
}

/// `POST /rules/reload` (loopback peers only, or requests with the control token): the file is
/// read and parsed on the blocking pool, once for all the posts that share the run.
async fn reload(reloads: &Coalesced<ReloadOutcome>) -> Response {
    let done = reloads.run().await;
    match done {
        Ok(Ok((version, revision))) => json(
            StatusCode::OK,
            format!(
                "{}\n",
                serde_json::json!({ "version": version, "revision": revision })
            ),
        )
        .with_header(VERSION_HEADER, version.to_string()),
        // The operator's own error, on the operator's own machine: located, in full.
        Ok(Err(e)) => json_error(StatusCode::UNPROCESSABLE, &e),
        Err(_) => json_error(StatusCode::INTERNAL_SERVER_ERROR, "reload failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reload_is_refused_to_other_peers_and_without_the_token_when_one_is_set() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.json");
        let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site/data/rules.json");
        std::fs::copy(site, &path).unwrap();
        let config = RulesConfig {
            file: Some(path),
            poll_ms: 0,
            ..RulesConfig::default()
        };
        let post = |peer: &str, auth: &[(&str, &str)]| {
            Request::new(
                galleon_http::Method::Post,
                "/rules/reload",
                auth,
                Default::default(),
            )
            .with_peer(peer.parse().unwrap())
        };
        async fn version(router: &Router) -> Option<String> {
            let get = Request::new(galleon_http::Method::Get, "/rules", &[], Default::default());
            let info = router.handle(get).await;
            let v = info.headers().find(|(n, _)| *n == VERSION_HEADER)?;
            Some(v.1.to_owned())
        }
        // Loopback only, even when the diagnostics are opened to every peer.
        let open = Guard::default().open(true);
        let (router, _running) = mount(Router::new(), dir.path(), &config, false, &open).unwrap();
        let r = router.handle(post("192.0.2.7:5000", &[])).await;
        assert_eq!(r.status().0, 403);
        assert_eq!(
            version(&router).await.as_deref(),
            Some("1"),
            "nothing reloaded"
        );
        let r = router.handle(post("127.0.0.1:5000", &[])).await;
        assert_eq!(r.status().0, 200);
        assert_eq!(version(&router).await.as_deref(), Some("2"));
        // With a token: loopback is not enough (behind a local proxy every client is loopback).
        let token = "a-control-token-of-some-length";
        let guarded = Guard::default().with_token(token).unwrap();
        let (router, _running) =
            mount(Router::new(), dir.path(), &config, false, &guarded).unwrap();
        let r = router.handle(post("127.0.0.1:5000", &[])).await;
        assert_eq!(r.status().0, 401);
        assert_eq!(
            version(&router).await.as_deref(),
            Some("1"),
            "nothing reloaded"
        );
        let bearer = format!("Bearer {token}");
        let r = router
            .handle(post("192.0.2.7:5000", &[("authorization", &bearer)]))
            .await;
        assert_eq!(r.status().0, 200);
        assert_eq!(version(&router).await.as_deref(), Some("2"));
    }
}
