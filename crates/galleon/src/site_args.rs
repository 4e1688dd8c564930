//! The example site's flags (the site itself is clap-free): the pool's, the rules' and
//! `/fortunes`'s flags `galleon serve` flattens, and the arguments of `gen-rules` and `rules-bench`,
//! each converted to the site's config.

use std::path::PathBuf;

use galleon_offload::{Policy, Priority};
use galleon_site::fortunes::{self, FortunesConfig, Source};
use galleon_site::offload::OffloadConfig;
use galleon_site::rules::{self, Mode, RulesConfig};

/// The pool's flags of `galleon serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct OffloadArgs {
    /// Where CPU work (page renders, stream chunks, /seal, /hash) runs: inline (on the request's
    /// worker), offload (always on the pool), or adaptive (by its measured cost: inline while
    /// the hop would be over 10% of the job, never inline over 1 ms; `adaptive:0.1:1000us`).
    #[arg(long, default_value = "adaptive", value_name = "POLICY")]
    offload: Policy,
    /// Pool threads (0: one per core). Never pinned.
    #[arg(long, default_value_t = 0, value_name = "N")]
    offload_threads: usize,
    /// The pool threads' scheduling class (Linux): normal (at --offload-nice) or idle
    /// (SCHED_IDLE: a request worker that wakes preempts them at once, but offloaded jobs get
    /// only the CPU no other thread wants, and crawl while anything else keeps the cores busy).
    #[arg(long, default_value_t = galleon_site::offload::DEFAULT_PRIORITY, value_name = "idle|normal")]
    offload_priority: Priority,
    /// The pool threads' nice value under --offload-priority normal (Linux): above 0, request
    /// workers get more of the CPU than pool threads. 0: as the server. Unused under idle.
    #[arg(long, default_value_t = galleon_site::offload::DEFAULT_NICE, value_name = "0-19")]
    offload_nice: i32,
    /// Jobs waiting for a pool thread at most; past it a request waits for room.
    #[arg(long, default_value_t = galleon_site::offload::DEFAULT_QUEUE, value_name = "N")]
    offload_queue: usize,
    /// Most bytes one /seal request seals.
    #[arg(long, default_value_t = galleon_site::work::DEFAULT_MAX_SEAL_BYTES, value_name = "BYTES")]
    max_seal_bytes: usize,
    /// Most Argon2id passes one /hash request runs.
    #[arg(long, default_value_t = galleon_site::work::DEFAULT_MAX_HASH_COST, value_name = "N")]
    max_hash_cost: u32,
    /// Most /seal requests, and most /hash requests, in flight at once; more are answered 503
    /// with retry-after (0: 64 per pool thread, at most a quarter of --offload-queue). Requests
    /// within it wait for their turn, as an idle connection each.
    #[arg(long, default_value_t = galleon_site::offload::DEFAULT_HEAVY_REQUESTS, value_name = "N")]
    max_heavy_requests: usize,
    /// Most pool threads the /seal jobs, and the /hash jobs, hold at once, so page renders and
    /// stream chunks always find one (0: one fewer than the pool's threads, at least one).
    #[arg(long, default_value_t = galleon_site::offload::DEFAULT_HEAVY_THREADS, value_name = "N")]
    heavy_threads: usize,
}

impl OffloadArgs {
    pub(crate) fn config(&self) -> OffloadConfig {
        OffloadConfig {
            policy: self.offload,
            threads: self.offload_threads,
            priority: self.offload_priority,
            nice: self.offload_nice,
            queue: self.offload_queue,
            max_seal_bytes: self.max_seal_bytes,
            max_hash_cost: self.max_hash_cost,
            heavy_requests: self.max_heavy_requests,
            heavy_threads: self.heavy_threads,
        }
    }
}

/// The `/fortunes` flags of `galleon serve` (TechEmpower's Fortunes test).
#[derive(Debug, clap::Args)]
pub(crate) struct FortunesArgs {
    /// The database of GET /fortunes: memory (embedded SQLite in memory, seeded with
    /// TechEmpower's 12 rows at start), sqlite:PATH (a file; the table created and seeded when
    /// missing or empty), postgres://USER:PASSWORD@HOST:PORT/DB (password and port optional;
    /// no TLS; one prepared statement per connection, the table created and seeded when missing
    /// or empty), or off.
    /// Rows are read on every request; a failing database answers 503 and is logged.
    #[arg(
        long,
        env = "GALLEON_FORTUNES_DB",
        hide_env_values = true,
        default_value = fortunes::DEFAULT_DB,
        value_name = "URL",
        value_parser = Source::parse
    )]
    fortunes_db: Source,
    /// The table /fortunes reads (a lowercase SQL name).
    #[arg(long, default_value = fortunes::DEFAULT_TABLE, value_name = "NAME")]
    fortunes_table: String,
    /// Database connections of /fortunes, taken in turn (PostgreSQL pipelines the queries of
    /// one connection). 0: two per core on SQLite, 1 on PostgreSQL.
    #[arg(long, default_value_t = 0, value_name = "N")]
    fortunes_connections: usize,
    /// PostgreSQL: queue each connection's requests and start the queries of all those ready
    /// together, written in one call (each request still runs its own query); off: each
    /// request sends its query at once.
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = crate::serve::parse_on_off, action = clap::ArgAction::Set)]
    fortunes_batch: bool,
}

impl FortunesArgs {
    pub(crate) fn config(&self) -> FortunesConfig {
        FortunesConfig {
            source: self.fortunes_db.clone(),
            table: self.fortunes_table.clone(),
            connections: self.fortunes_connections,
            batch: self.fortunes_batch,
        }
    }
}

/// `--rules-mode`: how a request reaches the rules (`galleon_site::rules::Mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RulesMode {
    /// A snapshot of the one shared version: no lock, no copy.
    Shared,
    /// A deep copy of the whole set per request (the Elixir Agent pattern).
    Copy,
    /// A deep copy per worker thread, refreshed when the version changes (the seed's pool).
    Pool,
}

/// The rules flags of `galleon serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct RulesArgs {
    /// The rule set served at /rules/match (generate one with `galleon gen-rules`). Default:
    /// SITE/data/rules.json when it exists (the routes are left out when it does not).
    #[arg(long = "rules", value_name = "FILE")]
    file: Option<PathBuf>,
    /// How requests reach the rules: shared (a snapshot), copy (a deep copy per request) or
    /// pool (a deep copy per worker thread).
    #[arg(long, value_enum, default_value_t = RulesMode::Shared)]
    rules_mode: RulesMode,
    /// Most rules one /rules/match response lists (`_limit=` may ask for fewer).
    #[arg(long, default_value_t = rules::DEFAULT_MAX_RESULTS, value_name = "N")]
    rules_max_results: usize,
    /// Largest rules file read, in bytes (a larger one is refused like a malformed one).
    #[arg(long, default_value_t = rules::DEFAULT_MAX_BYTES, value_name = "BYTES")]
    rules_max_bytes: u64,
    /// Most rules a rules file may hold.
    #[arg(long, default_value_t = rules::DEFAULT_MAX_RULES, value_name = "N")]
    rules_max_rules: usize,
    /// Milliseconds between checks of the rules file for a change; 0 checks never (reload with
    /// SIGHUP or POST /rules/reload).
    #[arg(long, default_value_t = rules::DEFAULT_POLL_MS, value_name = "MS")]
    rules_poll_ms: u64,
}

impl RulesArgs {
    pub(crate) fn config(&self) -> RulesConfig {
        RulesConfig {
            file: self.file.clone(),
            mode: match self.rules_mode {
                RulesMode::Shared => Mode::Shared,
                RulesMode::Copy => Mode::Copy,
                RulesMode::Pool => Mode::Pool,
            },
            max_results: self.rules_max_results,
            max_bytes: self.rules_max_bytes,
            max_rules: self.rules_max_rules,
            poll_ms: self.rules_poll_ms,
        }
    }
}

/// Arguments of `galleon gen-rules`.
#[derive(Debug, clap::Args)]
pub(crate) struct GenRulesArgs {
    /// Seed of the generator: another seed, other rules.
    #[arg(long, default_value_t = 3)]
    seed: u64,
    /// Number of rules.
    #[arg(long, default_value_t = 5000, value_name = "N")]
    count: usize,
    /// The `revision` label every rule carries (the version marker a response names); default
    /// `seed-SEED`.
    #[arg(long, value_name = "LABEL")]
    revision: Option<String>,
    /// Write here instead of stdout (through a temporary file renamed into place, so a server
    /// watching the file never reads half of it).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

impl GenRulesArgs {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        rules::generate::run(rules::generate::Args {
            seed: self.seed,
            count: self.count,
            revision: self.revision,
            output: self.output,
        })
    }
}

/// Arguments of `galleon rules-bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct RulesBenchArgs {
    /// The rules file.
    #[arg(
        long = "rules",
        default_value = "site/data/rules.json",
        value_name = "FILE"
    )]
    file: PathBuf,
    /// Rounds over the query mix (256 queries each) for the indexed match.
    #[arg(long, default_value_t = 400, value_name = "N")]
    rounds: u32,
}

impl RulesBenchArgs {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        rules::bench::run(rules::bench::Args {
            file: self.file,
            rounds: self.rounds,
        })
    }
}
