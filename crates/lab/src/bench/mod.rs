//! `galleon bench`: the macro benchmarks in one command, their runs saved, compared and drawn.
//!
//! - `galleon bench [SUITE...]` runs suites (all by default; see `suites::SUITES`), each
//!   benchmark in interleaved rounds (median and noise), a progress bar per suite on stderr and
//!   its table on stdout, and saves the run as JSON in `bench/runs/` (`runs.rs`).
//! - `galleon bench compare [A B]` compares two runs (default: the last two) (`compare.rs`); it
//!   exits with an error when a guarded benchmark (a ratio to a floor measured in the same run,
//!   such as `/doom` against a raw sender) got worse beyond its noise.
//! - `galleon bench graph [-o FILE]` draws every saved run into one HTML file (`graph.rs`).
//! - `galleon bench list` lists the saved runs.
//!
//! Micro-benchmarks stay in criterion (`cargo bench`); these are the end-to-end figures one
//! wants to follow from commit to commit on one machine.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

mod compare;
mod graph;
mod measure;
mod pin;
mod runs;
mod suites;

use measure::{Benchmark, Ctx, Skipped, fmt_value};
use runs::{Run, Saved};

/// Arguments of `galleon bench`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    /// `compare`, `graph` or `list`; without one, run suites.
    #[command(subcommand)]
    action: Option<Action>,
    /// Running suites.
    #[command(flatten)]
    run: RunArgs,
}

/// What `galleon bench` can do besides running suites.
#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Compare two saved runs (default: the last two): B/A per benchmark, sorted by change; an
    /// error when a guarded benchmark (`/doom` vs a raw sender) got worse beyond its noise.
    Compare(CompareArgs),
    /// Draw every saved run into one self-contained HTML file (a chart per benchmark).
    Graph(GraphArgs),
    /// List the saved runs: date, commit, machine, suites.
    List(DirArgs),
}

/// Where the runs are.
#[derive(Debug, clap::Args)]
struct DirArgs {
    /// Directory of saved runs (default: bench/runs in the repository, else ./bench/runs).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Arguments of `galleon bench [SUITE...]`.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Suites to run, in this order (default: all but cache): iolist, templates, http,
    /// eventstore, offload, rules, cache.
    #[arg(value_name = "SUITE")]
    suites: Vec<String>,
    /// Few, short rounds: a smoke run (seconds per suite); its numbers are rough.
    #[arg(long)]
    quick: bool,
    /// Rounds per benchmark, overriding each suite's own number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    rounds: Option<u16>,
    /// The site directory (pages, data, static files) for templates, http and rules.
    #[arg(long, value_name = "DIR")]
    site: Option<PathBuf>,
    /// Do not save the run.
    #[arg(long)]
    no_save: bool,
    /// The http suite unpinned (also `PIN=0` in the environment): by default its server runs
    /// on one CPU and its load generator on another.
    #[arg(long)]
    no_pin: bool,
    /// Where runs are saved.
    #[command(flatten)]
    dir: DirArgs,
    /// Internal: the cache suite's child under callgrind.
    #[arg(long, hide = true, value_name = "SPEC")]
    cache_probe: Option<String>,
    /// Internal: the http suite's raw sender as a server of its own, for bench/http.sh (serves
    /// `GET ...?iters=N` with BLOCK_FILE's bytes N times until killed).
    #[arg(long, hide = true, num_args = 2, value_names = ["ADDR", "BLOCK_FILE"])]
    raw_sender: Option<Vec<String>>,
}

/// Arguments of `galleon bench compare`.
#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// Two run files, A then B (a bare file name is looked up in the runs directory); none:
    /// the two most recent runs.
    #[arg(value_name = "RUN", num_args = 0..=2)]
    files: Vec<PathBuf>,
    /// Where runs are saved.
    #[command(flatten)]
    dir: DirArgs,
}

/// Arguments of `galleon bench graph`.
#[derive(Debug, clap::Args)]
struct GraphArgs {
    /// The HTML file to write (default: report.html in the runs directory).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Where runs are saved.
    #[command(flatten)]
    dir: DirArgs,
}

/// Runs `galleon bench`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let root = repo_root();
    match args.action {
        None => run_suites(args.run, root.as_deref()),
        Some(Action::Compare(a)) => compare_cmd(a, root.as_deref()),
        Some(Action::Graph(a)) => graph_cmd(a, root.as_deref()),
        Some(Action::List(a)) => list_cmd(&runs_dir(&a, root.as_deref())),
    }
}

/// The repository holding the current directory: the nearest ancestor with a `.git` or a
/// workspace `Cargo.toml`.
fn repo_root() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .find(|d| {
            d.join(".git").exists()
                || std::fs::read_to_string(d.join("Cargo.toml"))
                    .is_ok_and(|t| t.contains("[workspace]"))
        })
        .map(Path::to_path_buf)
}

/// `--dir`, else `bench/runs` in the repository, else `./bench/runs`.
fn runs_dir(a: &DirArgs, root: Option<&Path>) -> PathBuf {
    a.dir.clone().unwrap_or_else(|| {
        root.unwrap_or_else(|| Path::new("."))
            .join("bench")
            .join("runs")
    })
}

/// `galleon bench [SUITE...]`: checks the names, runs each suite, prints its table, saves.
fn run_suites(args: RunArgs, root: Option<&Path>) -> anyhow::Result<()> {
    if let Some(spec) = &args.cache_probe {
        return suites::cache_probe(spec);
    }
    if let Some([addr, file]) = args.raw_sender.as_deref() {
        return suites::raw_sender(addr, Path::new(file));
    }
    let mut names: Vec<&'static str> = if args.suites.is_empty() {
        suites::SUITES
            .iter()
            .filter(|s| s.in_default)
            .map(|s| s.name)
            .collect()
    } else {
        args.suites
            .iter()
            .map(|n| suites::find(n).map(|s| s.name))
            .collect::<anyhow::Result<_>>()?
    };
    // A suite named twice runs once (its benchmarks would collide in the run).
    let mut seen = Vec::new();
    names.retain(|n| {
        let first = !seen.contains(n);
        seen.push(*n);
        first
    });
    let site = args.site.clone().unwrap_or_else(|| {
        root.map(|r| r.join("site"))
            .filter(|p| p.is_dir())
            .unwrap_or_else(|| PathBuf::from("site"))
    });
    let dir = runs_dir(&args.dir, root);
    let (commit, dirty) = runs::git_commit(root.unwrap_or_else(|| Path::new(".")));
    let date = runs::now_utc();
    let load_start = runs::loadavg();
    let machine = runs::Machine::here();
    let started = Instant::now();
    let pin = !args.no_pin && std::env::var("PIN").map_or(true, |v| v != "0");
    println!(
        "galleon bench: {} on {}{}",
        names.join(", "),
        machine.summary(),
        if args.quick { " (quick)" } else { "" }
    );
    let mut benchmarks = Vec::new();
    let mut skipped = Vec::new();
    for name in &names {
        let bar = progress_bar(name);
        let ctx = Ctx {
            quick: args.quick,
            rounds: args.rounds.map(usize::from),
            site: site.clone(),
            bar,
            pin,
        };
        let t = Instant::now();
        let result = suites::run(name, &ctx);
        ctx.bar.finish_and_clear();
        let (b, s) = result.with_context(|| format!("suite {name}"))?;
        let secs = t.elapsed().as_secs_f64();
        if suites::find(name).is_ok_and(|s| s.own_table) {
            println!(
                "\n== {name} ({secs:.0} s): {} benchmarks saved, {} skipped; tables above ==",
                b.len(),
                s.len()
            );
        } else {
            print!("{}", table(name, &b, &s, secs));
        }
        benchmarks.extend(b);
        skipped.extend(s);
    }
    let run = Run {
        format: runs::FORMAT,
        date,
        commit,
        dirty,
        machine,
        load_start,
        load_end: runs::loadavg(),
        quick: args.quick,
        seconds: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        suites: names.iter().map(|s| (*s).to_owned()).collect(),
        benchmarks,
        skipped,
    };
    if args.no_save {
        println!("not saved (--no-save); took {:.0} s", run.seconds);
    } else {
        let path = runs::save(&dir, &run)?;
        println!("saved {} (took {:.0} s)", path.display(), run.seconds);
    }
    Ok(())
}

/// A suite's progress bar on stderr; drawn only on a terminal.
fn progress_bar(suite: &str) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(1), target);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>10} [{bar:30.cyan/blue}] {pos}/{len} {elapsed:>4} {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_prefix(suite.to_owned());
    bar
}

/// One suite's results as a text table.
fn table(suite: &str, benches: &[Benchmark], skipped: &[Skipped], secs: f64) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "\n== {suite} ({secs:.0} s) ==");
    let nw = benches
        .iter()
        .map(|b| b.name.len())
        .chain(skipped.iter().map(|b| b.name.len()))
        .max()
        .unwrap_or(9)
        .max(9);
    let uw = benches
        .iter()
        .map(|b| b.unit.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        s,
        "{:<nw$}  {:>10}  {:<uw$}  {:>7}  {:>6}  better",
        "benchmark", "median", "unit", "noise", "rounds"
    );
    // How rows were measured, where recorded (the pinned cores), as numbered notes.
    let mut methods: Vec<&str> = Vec::new();
    for b in benches {
        let note = match b.method.as_deref() {
            Some(m) => {
                let i = methods.iter().position(|x| *x == m).unwrap_or_else(|| {
                    methods.push(m);
                    methods.len() - 1
                });
                format!("  [{}]", i + 1)
            }
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "{:<nw$}  {:>10}  {:<uw$}  {:>6.1}%  {:>6}  {}{note}",
            b.name,
            fmt_value(b.median),
            b.unit,
            b.noise * 100.0,
            b.rounds.len(),
            if b.lower_is_better { "lower" } else { "higher" }
        );
    }
    for k in skipped {
        let _ = writeln!(s, "{:<nw$}  skipped: {}", k.name, k.reason);
    }
    for (i, m) in methods.iter().enumerate() {
        let _ = writeln!(s, "[{}] {m}", i + 1);
    }
    s
}

/// Finds a run named on the command line: the path itself, else that name in the runs dir.
fn find_run(name: &Path, dir: &Path) -> anyhow::Result<Saved> {
    if !name.exists() && name.components().count() == 1 && dir.join(name).exists() {
        return runs::load(&dir.join(name));
    }
    runs::load(name)
}

/// `galleon bench compare [A B]`.
fn compare_cmd(a: CompareArgs, root: Option<&Path>) -> anyhow::Result<()> {
    let dir = runs_dir(&a.dir, root);
    let (ra, rb) = match a.files.as_slice() {
        [x, y] => (find_run(x, &dir)?, find_run(y, &dir)?),
        [] => {
            let mut all = runs::load_all(&dir)?;
            if all.len() < 2 {
                bail!(
                    "compare needs two runs; {} has {} (run `galleon bench` first, or name two files)",
                    dir.display(),
                    all.len()
                );
            }
            let b = all.pop().context("no runs")?;
            let a = all.pop().context("no runs")?;
            (a, b)
        }
        _ => bail!("compare takes two run files (A B), or none for the last two runs"),
    };
    let c = compare::compare(&ra, &rb);
    if let Some(diff) = &c.machines {
        eprintln!("{}", compare::machine_warning(diff));
    }
    print!("{}", compare::render(&ra, &rb, &c));
    let bad = compare::flagged(&c);
    if !bad.is_empty() {
        let keys: Vec<&str> = bad.iter().map(|r| r.key.as_str()).collect();
        bail!(
            "guarded benchmark{} regressed beyond the noise: {}",
            if keys.len() == 1 { "" } else { "s" },
            keys.join(", ")
        );
    }
    Ok(())
}

/// `galleon bench graph [-o FILE]`.
fn graph_cmd(a: GraphArgs, root: Option<&Path>) -> anyhow::Result<()> {
    let dir = runs_dir(&a.dir, root);
    let all = runs::load_all(&dir)?;
    if all.is_empty() {
        bail!(
            "no saved runs in {} (run `galleon bench` first)",
            dir.display()
        );
    }
    let out = a.output.unwrap_or_else(|| dir.join("report.html"));
    let html = graph::report(&all, &runs::now_utc()).context("rendering the report")?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&out, html).with_context(|| format!("writing {}", out.display()))?;
    let charts: usize = {
        let mut keys: Vec<String> = all
            .iter()
            .flat_map(|s| {
                s.run
                    .benchmarks
                    .iter()
                    .map(|b| format!("{} {}", b.key(), b.unit))
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys.len()
    };
    println!(
        "wrote {} ({} runs, {charts} benchmarks)",
        out.display(),
        all.len()
    );
    if all.len() < 2 {
        eprintln!("note: only one saved run; each chart has one point");
    }
    Ok(())
}

/// `galleon bench list`.
fn list_cmd(dir: &Path) -> anyhow::Result<()> {
    let all = runs::load_all(dir)?;
    if all.is_empty() {
        println!("no saved runs in {}", dir.display());
        return Ok(());
    }
    for s in &all {
        let r = &s.run;
        println!(
            "{}  {:<11} {}{}  {} benchmarks  [{}]  {}",
            r.date,
            r.short_commit(),
            r.machine.summary(),
            if r.quick { "  quick" } else { "" },
            r.benchmarks.len(),
            r.suites.join(","),
            s.path.file_name().map_or_else(
                || s.path.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            )
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_notes_how_rows_were_measured_once_per_method() {
        let b = |name: &str, method: Option<&str>| Benchmark {
            suite: "http".into(),
            name: name.into(),
            unit: "req/s".into(),
            lower_is_better: false,
            rounds: vec![1.0],
            median: 1.0,
            noise: 0.0,
            guard: false,
            method: method.map(str::to_owned),
        };
        let pinned = Some("server on CPU 0, load generator on CPU 1");
        let text = table(
            "http",
            &[b("page", pinned), b("css", pinned), b("doom", None)],
            &[],
            1.0,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[3].starts_with("page") && lines[3].ends_with("  [1]"),
            "{text}"
        );
        assert!(lines[4].ends_with("  [1]"), "{text}");
        assert!(lines[5].ends_with("higher"), "{text}");
        assert_eq!(lines[6], "[1] server on CPU 0, load generator on CPU 1");
        assert_eq!(lines.len(), 7, "{text}");
    }
}
