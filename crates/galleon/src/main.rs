//! The `galleon` command: `serve` the example site, `render` a template, `trace` a response's
//! writes, `hops` (a running server's CPU-pool histograms), `gen-rules` and `rules-bench` (the
//! rules example, `galleon_site::rules`) and `bench` (the lab's suites, `galleon_lab::bench`).
//! An error ending in a broken pipe (`galleon render ... | head`) exits 0.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `eprintln!` that ignores a failed write: a server's stderr may be a pipe nobody reads any
/// more, and a line of advice must not panic it (`eprintln!` panics on a broken pipe).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod events;
mod hops;
mod live_args;
mod render;
mod serve;
mod site_args;
mod trace;

/// galleon: templates compiled to I/O lists, served with one gathered write.
#[derive(Debug, Parser)]
#[command(name = "galleon", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the site (templates, static files, seed experiments, event store) over HTTP/1.1.
    Serve(Box<serve::Args>),
    /// Render one template to stdout or a file, streaming in bounded memory.
    Render(render::Args),
    /// Ask a running server for a path and print the write calls of that one response.
    Trace(trace::Args),
    /// Print the CPU pool's hop and run-time histograms of a running server, per job kind.
    Hops(hops::Args),
    /// Write a reproducible rule set (the rules example of `serve`: GET /rules/match).
    GenRules(site_args::GenRulesArgs),
    /// Time one rules match (indexed and by scan) and one deep copy of the set, in-process.
    RulesBench(site_args::RulesBenchArgs),
    /// Run the macro benchmark suites and save the run; compare, graph or list saved runs.
    Bench(galleon_lab::bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Render(args) => render::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Hops(args) => hops::run(args),
        Command::GenRules(args) => args.run(),
        Command::RulesBench(args) => args.run(),
        Command::Bench(args) => galleon_lab::bench::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // A closed pipe (`galleon render ... | head`) is not a failure.
            if err
                .chain()
                .filter_map(|e| e.downcast_ref::<std::io::Error>())
                .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            say!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
