//! `GET /fortunes`: TechEmpower's Fortunes test (test type 4). Every row of the `fortune` table
//! (`id`, `message`), read from the database on every request (the rules forbid caching them),
//! plus one fortune added at request time, sorted by message, rendered with
//! `#[derive(Template)]` (every message HTML-escaped), sent with `server`, `date`,
//! `content-type: text/html; charset=utf-8` and `content-length`.
//!
//! The database is embedded SQLite by default (in memory, seeded with TechEmpower's 12 rows at
//! start; `sqlite.rs`; the query runs inline on the request worker under the adaptive policy:
//! through the pool it cost 29.8 instead of 13.1 µs of server CPU per response) or PostgreSQL
//! (`postgres.rs`: one prepared statement per pooled connection, the queries of the requests
//! ready together batched into one write). The table is created and seeded when it
//! is missing or empty. A database that fails answers 503 with a fixed message; what failed is
//! logged, never sent.
//!
//! Escaping: galleon's escaper writes `&amp; &lt; &gt; &quot; &#39;`. TechEmpower's verifier
//! (`fortune_html_parser.py`) parses the page with character references left as they are and
//! normalizes before comparing: `&#39;` `&#039;` `&#x27;` become `&apos;`, `&#34;` `&#x22;`
//! become `&quot;`, `&#60;`/`&#62;` become `&lt;`/`&gt;`, named entities (`&quot;`, `&lt;`,
//! `&gt;`, `&amp;`, `&apos;`) are kept, and bare `'` `"` `>` in text are escaped by it; so
//! galleon's forms pass. The byte-exact page for the canonical table is
//! `tests/fixtures/fortunes.html`.

mod postgres;
mod sqlite;

use std::sync::Arc;

use galleon_http::{Handler, Reply, Request, Response, Router, StatusCode};
use galleon_offload::Pool;
use galleon_template::compiled::Template as _;
use galleon_template_derive::Template;

pub use postgres::Postgres;
pub use sqlite::Sqlite;

/// The route.
pub const PATH: &str = "/fortunes";

/// `--fortunes-db` by default: embedded SQLite in memory, seeded at start.
pub const DEFAULT_DB: &str = "memory";

/// The `--fortunes-db` value that mounts no `/fortunes`.
pub const DB_OFF: &str = "off";

/// Default `--fortunes-table`: TechEmpower's table.
pub const DEFAULT_TABLE: &str = "fortune";

/// The `server` header of the page (TechEmpower requires one).
pub const SERVER: &str = "galleon";

/// The fortune every response adds before sorting.
pub const ADDED: &str = "Additional fortune added at request time.";

/// TechEmpower's `fortune` table: what a missing or empty table is seeded with.
pub const CANONICAL: [(i32, &str); 12] = [
    (1, "fortune: No such file or directory"),
    (
        2,
        "A computer scientist is someone who fixes things that aren't broken.",
    ),
    (3, "After enough decimal places, nobody gives a damn."),
    (
        4,
        "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1",
    ),
    (
        5,
        "A computer program does what you tell it to do, not what you want it to do.",
    ),
    (
        6,
        "Emacs is a nice operating system, but I prefer UNIX. \u{2014} Tom Christaensen",
    ),
    (7, "Any program that runs right is obsolete."),
    (
        8,
        "A list is only as strong as its weakest link. \u{2014} Donald Knuth",
    ),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (
        11,
        "<script>alert(\"This should not be displayed in a browser alert box.\");</script>",
    ),
    (12, "フレームワークのベンチマーク"),
];

/// Where the fortunes are read from (`--fortunes-db`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// No `/fortunes` route.
    Off,
    /// Embedded SQLite in memory, private to this server, seeded at start.
    Memory,
    /// An SQLite file, created and seeded when the table is missing or empty.
    SqliteFile(std::path::PathBuf),
    /// A PostgreSQL URL (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`, no TLS).
    Postgres(String),
}

impl Source {
    /// Reads a `--fortunes-db` value: `memory`, `sqlite:PATH`, `postgres://...` or `off`.
    pub fn parse(s: &str) -> Result<Source, String> {
        let s = s.trim();
        if s == DB_OFF {
            Ok(Source::Off)
        } else if s == DEFAULT_DB {
            Ok(Source::Memory)
        } else if let Some(path) = s.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err("sqlite: needs a path (sqlite:PATH)".to_owned());
            }
            Ok(Source::SqliteFile(path.into()))
        } else if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Ok(Source::Postgres(s.to_owned()))
        } else {
            Err(format!(
                "{s:?} is not a fortunes database: give {DEFAULT_DB}, sqlite:PATH, postgres://... or {DB_OFF}"
            ))
        }
    }
}

/// How `/fortunes` reads its rows (`galleon serve`'s `--fortunes-*`); `Default` is the flags'
/// defaults.
#[derive(Debug, Clone)]
pub struct FortunesConfig {
    /// The database.
    pub source: Source,
    /// The table (a lowercase SQL identifier), so tests sharing a database do not collide.
    pub table: String,
    /// Connections kept open (0: on SQLite two per core, so a query running on every request
    /// worker and pool thread at once finds one free; on PostgreSQL [`DEFAULT_PG_CONNECTIONS`]).
    /// Requests are spread over them in turn.
    pub connections: usize,
    /// PostgreSQL: start the queries of the requests that are ready together, one write for
    /// them all (`postgres.rs`; `--fortunes-batch`).
    pub batch: bool,
}

/// Default PostgreSQL connections (`bench/results/fortunes.txt`: with the server on one core
/// and 50 clients, one batched connection cost 1.27-1.31x less server CPU per response than
/// the axum peer; two halved the batches and the gap with them, 1.02x).
pub const DEFAULT_PG_CONNECTIONS: usize = 1;

impl Default for FortunesConfig {
    fn default() -> FortunesConfig {
        FortunesConfig {
            source: Source::Memory,
            table: DEFAULT_TABLE.to_owned(),
            connections: 0,
            batch: true,
        }
    }
}

impl FortunesConfig {
    /// Checks the table name: a lowercase SQL identifier of at most 63 bytes.
    pub fn validate(&self) -> anyhow::Result<()> {
        let t = self.table.as_bytes();
        let ok = !t.is_empty()
            && t.len() <= 63
            && (t[0].is_ascii_lowercase() || t[0] == b'_')
            && t.iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_');
        anyhow::ensure!(
            ok,
            "--fortunes-table {:?}: give a lowercase SQL name (a-z, 0-9, _; at most 63 bytes)",
            self.table
        );
        anyhow::ensure!(
            self.connections <= 1024,
            "--fortunes-connections {} is over 1024",
            self.connections
        );
        Ok(())
    }
}

/// One row of the page.
#[derive(Debug)]
pub struct Fortune<'a> {
    /// `fortune.id`.
    pub id: i32,
    /// `fortune.message`, as stored (escaped by the template).
    pub message: &'a str,
}

/// The page, as TechEmpower's verifier expects it (no whitespace between tags). `copy_below`
/// covers the whole page (about 1.2 KB), so it is one buffer: one iovec beside the head.
#[derive(Template)]
#[template(
    source = "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr><%= for f <- @fortunes do %><tr><td><%= f.id %></td><td><%= f.message %></td></tr><% end %></table></body></html>",
    name = "fortunes.html.eex",
    copy_below = 4096,
    native
)]
struct Page<'a> {
    fortunes: Vec<Fortune<'a>>,
}

/// Adds the fortune of the request, sorts by message and renders the page.
pub fn render(
    mut fortunes: Vec<Fortune<'_>>,
) -> Result<galleon_iolist::IoList, galleon_template::Error> {
    fortunes.push(Fortune {
        id: 0,
        message: ADDED,
    });
    fortunes.sort_unstable_by(|a, b| a.message.cmp(b.message));
    Page { fortunes }.render()
}

/// The response of a page, or of a failure (logged here; the client only learns it failed).
fn respond(page: Result<galleon_iolist::IoList, String>) -> Response {
    match page {
        Ok(list) => Response::html(list).with_header("server", SERVER),
        Err(e) => {
            tracing::error!(target: "galleon::fortunes", "/fortunes: {e}");
            Response::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the fortunes database is unavailable",
            )
            .with_header("server", SERVER)
        }
    }
}

/// What [`mount`] opened: the PostgreSQL pool, when that is the source, so the caller can
/// connect it before serving ([`Postgres::connect_all`]).
#[derive(Debug, Clone, Default)]
pub struct Mounted {
    /// The PostgreSQL connections, opened on first use or by `connect_all`.
    pub postgres: Option<Postgres>,
}

/// Adds `GET /fortunes` on the database `config` names. SQLite is opened (and seeded) now;
/// PostgreSQL connects on first use, or when the caller calls `connect_all`.
pub fn mount(
    router: Router,
    config: &FortunesConfig,
    cpu: &Pool,
) -> anyhow::Result<(Router, Mounted)> {
    config.validate()?;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    match &config.source {
        Source::Off => Ok((router, Mounted::default())),
        Source::Memory | Source::SqliteFile(_) => {
            let n = if config.connections == 0 {
                cores * 2
            } else {
                config.connections
            };
            let db = Sqlite::open(&config.source, &config.table, n)?;
            let handler = SqliteHandler {
                db: Arc::new(db),
                cpu: cpu.clone(),
                kind: cpu.kind("fortunes:sqlite"),
            };
            Ok((router.get(PATH, handler), Mounted::default()))
        }
        Source::Postgres(url) => {
            let n = if config.connections == 0 {
                DEFAULT_PG_CONNECTIONS
            } else {
                config.connections
            };
            let pg = Postgres::new(url, &config.table, n, config.batch)?;
            let db = pg.clone();
            let router = router.get(PATH, move |_req: Request| {
                let db = db.clone();
                async move { respond(db.page().await) }
            });
            Ok((router, Mounted { postgres: Some(pg) }))
        }
    }
}

/// `/fortunes` on SQLite: the query runs where the pool's policy for kind `fortunes:sqlite`
/// puts it: inline on the request worker (no future boxed) or on a pool thread.
struct SqliteHandler {
    db: Arc<Sqlite>,
    cpu: Pool,
    kind: galleon_offload::Kind,
}

impl Handler for SqliteHandler {
    fn call(&self, _req: Request) -> Reply {
        if let Some(done) = self.cpu.try_inline(&self.kind, None, || self.db.page()) {
            return Reply::Ready(respond(done.map_err(|e| e.to_string()).and_then(|p| p)));
        }
        let (cpu, kind, db) = (self.cpu.clone(), self.kind.clone(), self.db.clone());
        Reply::Later(Box::pin(async move {
            let done = cpu.offload(&kind, None, move || db.page()).await;
            respond(done.map_err(|e| e.to_string()).and_then(|p| p))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixture: the page for the canonical table, byte for byte.
    pub(crate) const EXPECTED: &str = include_str!("../../tests/fixtures/fortunes.html");

    #[test]
    fn the_canonical_table_renders_the_expected_page() {
        let rows = CANONICAL
            .iter()
            .map(|&(id, message)| Fortune { id, message })
            .collect();
        let page = render(rows).unwrap().to_vec();
        assert_eq!(String::from_utf8(page).unwrap(), EXPECTED);
    }

    #[test]
    fn messages_are_escaped_and_sorted_bytewise() {
        let rows = vec![
            Fortune {
                id: 5,
                message: "b & 'c'",
            },
            Fortune {
                id: 6,
                message: "B \"x\" <y>",
            },
        ];
        let page = String::from_utf8(render(rows).unwrap().to_vec()).unwrap();
        let b_upper = page
            .find("<td>6</td><td>B &quot;x&quot; &lt;y&gt;</td>")
            .unwrap();
        let added = page.find("<td>0</td><td>Additional").unwrap();
        let b_lower = page.find("<td>5</td><td>b &amp; &#39;c&#39;</td>").unwrap();
        assert!(added < b_upper && b_upper < b_lower, "{page}");
    }

    #[test]
    fn sources_parse_and_bad_ones_say_what_is_accepted() {
        assert_eq!(Source::parse("memory"), Ok(Source::Memory));
        assert_eq!(Source::parse("off"), Ok(Source::Off));
        assert_eq!(
            Source::parse("sqlite:/tmp/f.db"),
            Ok(Source::SqliteFile("/tmp/f.db".into()))
        );
        assert!(matches!(
            Source::parse("postgres://u@h/db"),
            Ok(Source::Postgres(_))
        ));
        assert!(Source::parse("sqlite:").is_err());
        let e = Source::parse("mysql://x").unwrap_err();
        assert!(e.contains("postgres://"), "{e}");
    }

    #[test]
    fn table_names_are_checked() {
        for bad in ["", "Fortune", "f; drop table x", "1f", &"f".repeat(64)] {
            let c = FortunesConfig {
                table: bad.to_owned(),
                ..FortunesConfig::default()
            };
            assert!(c.validate().is_err(), "{bad:?}");
        }
        assert!(FortunesConfig::default().validate().is_ok());
    }
}
