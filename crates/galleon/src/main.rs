//! The `galleon` command: `serve` the example site, `render` a template, `trace` a response's writes.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod assign;
mod events;
mod render;
mod serve;
mod site;
mod static_files;
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
    Serve(serve::Args),
    /// Render one template to stdout or a file, streaming in bounded memory.
    Render(render::Args),
    /// Ask a running server for a path and print the write calls of that one response.
    Trace(trace::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Render(args) => render::run(args),
        Command::Trace(args) => trace::run(args),
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
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
