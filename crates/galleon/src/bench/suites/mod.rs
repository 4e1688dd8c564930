//! The suites `galleon bench` runs, by name. Each measures its contenders in interleaved rounds
//! (see [`super::measure::rotation`]) and needs nothing that cargo does not build: its peers
//! (a loopback sink, a load generator, a temporary SQLite file) are in-process or a child
//! `galleon serve`.

use anyhow::bail;

use super::measure::{Benchmark, Collector, Ctx, Skipped};

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
}

/// Every suite, in the order of a default run (cheap in-process ones first).
pub(crate) const SUITES: &[Suite] = &[
    Suite {
        name: "iolist",
        about: "sender CPU of gathered writes of a 400 KB and a 4 KB I/O list to loopback, per write policy",
        run: iolist::run,
    },
    Suite {
        name: "templates",
        about: "rendering the site's pages to I/O lists",
        run: templates::run,
    },
    Suite {
        name: "http",
        about: "req/s and server CPU per request of a child `galleon serve` under a keep-alive load",
        run: http::run,
    },
    Suite {
        name: "eventstore",
        about: "append, read and catch-up on SQLite (and PostgreSQL with DATABASE_URL)",
        run: eventstore::run,
    },
    Suite {
        name: "offload",
        about: "the hop round trip of galleon-offload vs tokio's spawn_blocking",
        run: offload::run,
    },
    Suite {
        name: "rules",
        about: "one rules match and one deep copy of the site's rule set",
        run: rules::run,
    },
];

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
