//! `galleon render`: one template to stdout or a file, streamed chunk by chunk in bounded memory
//! and written with gathered writes; optionally inside a layout, Phoenix style.

use std::fs::File;
use std::io::{self, IsTerminal};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use galleon_iolist::{IoWriter, WritePolicy};
use galleon_template::{Assigns, Engine, EngineBuilder, Value};
use indicatif::{ProgressBar, ProgressStyle};

/// Bytes rendered per chunk: 256 KiB, a few times the 64 KiB pipe buffer, so that each chunk
/// fills the pipe and the writer's `max_iov` batches, while the render's memory stays tiny.
const CHUNK_BYTES: usize = 256 * 1024;

/// Arguments of `galleon render`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The template file; partials it renders are looked up relative to its directory.
    template: PathBuf,
    /// A JSON file whose top-level object gives the assigns.
    #[arg(long, value_name = "FILE.json")]
    data: Option<PathBuf>,
    /// Set one assign (after --data). VALUE is JSON when it parses as JSON, else a string.
    #[arg(long = "assign", short = 'a', value_name = "KEY=VALUE", value_parser = galleon_site::assign::parse_pair)]
    assigns: Vec<(String, Value)>,
    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write policy: default, flatten or vectored.
    #[arg(long, default_value = "default", value_parser = clap::value_parser!(WritePolicy))]
    policy: WritePolicy,
    /// Bytes rendered per chunk (memory use is about this, whatever the output size).
    #[arg(long, default_value_t = CHUNK_BYTES, value_name = "BYTES")]
    chunk_bytes: usize,
    /// Render inside this layout, Phoenix style: it gets the page as `@inner_content` (already
    /// escaped) and the same assigns; its partials are relative to its own directory. The page
    /// is rendered whole (the engine cannot stream into a layout), the layout streamed.
    #[arg(long, value_name = "FILE")]
    layout: Option<PathBuf>,
    /// EEx's `trim: true`, as Phoenix compiles `.html.eex`: drops the indentation around tags
    /// and the whitespace before the first one; line breaks around a tag shrink to one each side.
    /// Applies to the layout and partials too.
    #[arg(long)]
    trim: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let builder = Engine::builder().trim(args.trim);
    let page = load(builder.clone(), &args.template)?;
    // Both compiled before anything renders: a bad layout fails at once. Two engines, not one:
    // each file's partials resolve in its own directory, and same-named files cannot collide.
    let layout = args
        .layout
        .as_deref()
        .map(|p| load(builder, p))
        .transpose()?;
    let mut assigns = match &args.data {
        Some(path) => load_data(path)?,
        None => Assigns::new(),
    };
    for (key, value) in args.assigns {
        assigns.insert(&key, value);
    }
    let stream = match layout {
        None => page.engine.stream(&page.name, assigns, args.chunk_bytes)?,
        // What `Engine::render_in_layout` does, across the two engines, with the layout streamed.
        Some(layout) => {
            let inner = page.engine.render(&page.name, &assigns)?;
            assigns.insert("inner_content", Value::safe(inner));
            layout
                .engine
                .stream(&layout.name, assigns, args.chunk_bytes)?
        }
    };

    let (mut out, out_is_terminal) = match &args.output {
        Some(path) => (
            File::create(path).with_context(|| format!("creating {}", path.display()))?,
            false,
        ),
        None => {
            // Our own handle on fd 1: unbuffered, so each chunk goes out as gathered writes
            // instead of through `Stdout`'s line buffer.
            let stdout = io::stdout();
            let fd = stdout.as_fd().try_clone_to_owned()?;
            (File::from(fd), stdout.is_terminal())
        }
    };
    let bar = (io::stderr().is_terminal() && !out_is_terminal).then(progress_bar);
    let mut writer = IoWriter::new(args.policy);
    for chunk in stream {
        let chunk = chunk?;
        writer.write_all(&mut out, &chunk)?;
        if let Some(bar) = &bar {
            bar.inc(chunk.len() as u64);
        }
    }
    if let Some(bar) = bar {
        bar.finish();
    }
    Ok(())
}

/// A compiled template file (with its partials) and its name in its engine.
struct Loaded {
    engine: Engine,
    name: String,
}

fn load(builder: EngineBuilder, path: &Path) -> anyhow::Result<Loaded> {
    // The engine's message already names the file (and an I/O error's cause, which anyhow's
    // chain would print a second time), so it is the whole error.
    let engine = builder.load_file(path).map_err(|e| anyhow!("{e}"))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| anyhow!("{}: not a file", path.display()))?;
    Ok(Loaded { engine, name })
}

fn load_data(path: &Path) -> anyhow::Result<Assigns> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", path.display()))?;
    Assigns::from_json(json).with_context(|| format!("{}", path.display()))
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {bytes} written, {binary_bytes_per_sec}, {elapsed}")
    {
        bar.set_style(style);
    }
    bar
}
