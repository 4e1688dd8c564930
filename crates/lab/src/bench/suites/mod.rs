//! The suites `galleon bench` runs, by name. Each measures its contenders in interleaved rounds
//! (see [`super::measure::rotation`]) and needs nothing that cargo does not build: its peers
//! (a loopback sink, a load generator, a temporary SQLite file) are in-process or a child
//! `galleon serve`.

use anyhow::bail;

use super::measure::{Benchmark, Collector, Ctx, Skipped};

mod cache;
mod cache_http;
mod cache_model;
mod cache_tables;
mod child;
mod doom;
mod eventstore;
mod http;
mod iolist;
mod offload;
mod rules;
mod templates;

/// A suite: its name and what it measures.
#[derive(Debug)]
pub(crate) struct Suite {
    /// The name given on the command line.
    pub(crate) name: &'static str,
    /// One line on what it measures.
    pub(crate) about: &'static str,
    /// Runs it.
    run: fn(&Ctx, &mut Collector) -> anyhow::Result<()>,
    /// Part of a run without suite names (false: only when named, for a long suite).
    pub(crate) in_default: bool,
    /// Prints its own tables (the one-line-per-benchmark table is then left out).
    pub(crate) own_table: bool,
}

/// Every suite, in the order of a default run (cheap in-process ones first).
pub(crate) const SUITES: &[Suite] = &[
    Suite {
        name: "iolist",
        about: "sender CPU of gathered writes of a 400 KB and a 4 KB I/O list to loopback, per write policy",
        run: iolist::run,
        in_default: true,
        own_table: false,
    },
    Suite {
        name: "templates",
        about: "rendering the site's pages to I/O lists",
        run: templates::run,
        in_default: true,
        own_table: false,
    },
    Suite {
        name: "http",
        about: "req/s and server CPU per response of a child `galleon serve` on one CPU under a keep-alive load from another; /doom streamed against a raw sender",
        run: http::run,
        in_default: true,
        own_table: false,
    },
    Suite {
        name: "eventstore",
        about: "append, read and catch-up on SQLite (and PostgreSQL with DATABASE_URL)",
        run: eventstore::run,
        in_default: true,
        own_table: false,
    },
    Suite {
        name: "offload",
        about: "the hop round trip of galleon-offload vs tokio's spawn_blocking",
        run: offload::run,
        in_default: true,
        own_table: false,
    },
    Suite {
        name: "rules",
        about: "one rules match and one deep copy of the site's rule set",
        run: rules::run,
        in_default: true,
        own_table: false,
    },
    Suite {
        name: "cache",
        about: "where hardware caching matters for a page of strings: set size, string length, copy vs reference, reference counts (seed 002)",
        run: cache::run,
        in_default: false,
        own_table: true,
    },
];

/// `galleon bench --cache-probe SPEC`: the cache suite's child under callgrind.
pub(crate) fn cache_probe(spec: &str) -> anyhow::Result<()> {
    cache::probe(spec)
}

/// `galleon bench --raw-sender ADDR BLOCK_FILE`: the `/doom` floor as a server of its own.
pub(crate) fn raw_sender(addr: &str, block: &std::path::Path) -> anyhow::Result<()> {
    doom::serve_raw(addr, block)
}

/// The suite called `name`; an unknown name is an error listing the known ones.
pub(crate) fn find(name: &str) -> anyhow::Result<&'static Suite> {
    match SUITES.iter().find(|s| s.name == name) {
        Some(s) => Ok(s),
        None => {
            let known: Vec<&str> = SUITES.iter().map(|s| s.name).collect();
            bail!(
                "unknown suite `{name}` (known suites: {}; or compare, graph, list)",
                known.join(", ")
            )
        }
    }
}

/// Runs the suite called `name`.
pub(crate) fn run(name: &str, ctx: &Ctx) -> anyhow::Result<(Vec<Benchmark>, Vec<Skipped>)> {
    let suite = find(name)?;
    ctx.bar.set_message(suite.about);
    let mut out = Collector::new(suite.name);
    (suite.run)(ctx, &mut out)?;
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_suite_names_the_known_ones() {
        let err = find("iolists").unwrap_err().to_string();
        assert!(err.contains("`iolists`"), "{err}");
        for s in SUITES {
            assert!(err.contains(s.name), "{err}");
        }
        assert_eq!(find("http").unwrap().name, "http");
    }
}
