//! Saved runs: the versioned JSON format (`"format": 1`), the machine's description taken at
//! the start of a run, and reading, checking and listing the files of `bench/runs/`. Every
//! error names the file and what is wrong with it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::measure::{Benchmark, Skipped};

/// The format this build writes and reads. A change to the meaning of a field is a new number.
pub(crate) const FORMAT: u64 = 1;

/// The machine a run was measured on: what must match for two runs to be comparable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Machine {
    /// `model name` of `/proc/cpuinfo` ("unknown" elsewhere).
    pub(crate) cpu_model: String,
    /// Cores available to the process (`std::thread::available_parallelism`).
    pub(crate) cores: usize,
    /// `/proc/sys/kernel/osrelease`.
    pub(crate) kernel: String,
}

impl Machine {
    /// This machine.
    pub(crate) fn here() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.trim() == "model name")
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned());
        Machine {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel,
        }
    }

    /// How `other` differs from `self` in what makes runs comparable (CPU model, cores); `None`
    /// when it does not.
    pub(crate) fn differs(&self, other: &Machine) -> Option<String> {
        let mut diffs = Vec::new();
        if self.cpu_model != other.cpu_model {
            diffs.push(format!(
                "CPU model {:?} vs {:?}",
                self.cpu_model, other.cpu_model
            ));
        }
        if self.cores != other.cores {
            diffs.push(format!("{} cores vs {}", self.cores, other.cores));
        }
        (!diffs.is_empty()).then(|| diffs.join(", "))
    }

    /// One line for tables: `AMD EPYC, 2 cores, 6.1.0`.
    pub(crate) fn summary(&self) -> String {
        format!("{}, {} cores, {}", self.cpu_model, self.cores, self.kernel)
    }
}

/// One saved run of `galleon bench`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Run {
    /// Always [`FORMAT`] in files this build writes.
    pub(crate) format: u64,
    /// Start of the run, UTC, `2026-11-26T08:30:00Z`.
    pub(crate) date: String,
    /// `git rev-parse HEAD` of the checkout, or "unknown".
    pub(crate) commit: String,
    /// True when the checkout had uncommitted changes (`git status --porcelain`).
    #[serde(default)]
    pub(crate) dirty: bool,
    /// The machine.
    pub(crate) machine: Machine,
    /// `/proc/loadavg`'s 1, 5 and 15 minute averages when the run started (empty if unknown).
    pub(crate) load_start: Vec<f64>,
    /// The same when it ended.
    pub(crate) load_end: Vec<f64>,
    /// True for a `--quick` run (few, short rounds).
    pub(crate) quick: bool,
    /// Seconds the run took.
    pub(crate) seconds: f64,
    /// The suites run, in order.
    pub(crate) suites: Vec<String>,
    /// Every benchmark measured.
    pub(crate) benchmarks: Vec<Benchmark>,
    /// Benchmarks that could not run here, and why.
    #[serde(default)]
    pub(crate) skipped: Vec<Skipped>,
}

impl Run {
    /// The commit shortened to 10 characters, `+` appended when the tree was dirty.
    pub(crate) fn short_commit(&self) -> String {
        let c: String = self.commit.chars().take(10).collect();
        if self.dirty { format!("{c}+") } else { c }
    }
}

/// A run read from a file.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    /// Where it was read from.
    pub(crate) path: PathBuf,
    /// The run.
    pub(crate) run: Run,
}

/// `/proc/loadavg`'s three averages; empty when unreadable.
pub(crate) fn loadavg() -> Vec<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| {
            s.split_whitespace()
                .take(3)
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The commit checked out in `root` and whether the tree has changes; "unknown" without git.
pub(crate) fn git_commit(root: &Path) -> (String, bool) {
    let out = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match out(&["rev-parse", "HEAD"]) {
        Some(commit) if !commit.is_empty() => {
            let dirty = out(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            (commit, dirty)
        }
        _ => ("unknown".to_owned(), false),
    }
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC; the proleptic Gregorian calendar).
pub(crate) fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Now, as [`utc_date`] formats it.
pub(crate) fn now_utc() -> String {
    utc_date(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// Writes `run` to `dir` (created when missing) as `DATE-COMMIT.json`; the file's path.
pub(crate) fn save(dir: &Path, run: &Run) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let stamp: String = run
        .date
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let commit: String = run.commit.chars().take(10).collect();
    let mut path = dir.join(format!("{stamp}-{commit}.json"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{stamp}-{commit}-{n}.json"));
        n += 1;
    }
    let text = serde_json::to_string_pretty(run)?;
    std::fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Reads and checks one run file: valid JSON, `"format": 1`, every field there, finite values.
pub(crate) fn load(path: &Path) -> anyhow::Result<Saved> {
    let name = path.display();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{name}: no such run file")
        }
        Err(e) => bail!("{name}: cannot read: {e}"),
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{name}: not valid JSON: {e}"))?;
    let Some(obj) = value.as_object() else {
        bail!("{name}: not a galleon bench run (expected a JSON object)");
    };
    match obj.get("format").map(|f| (f, f.as_u64())) {
        None => bail!("{name}: not a galleon bench run (no \"format\" field)"),
        Some((_, Some(FORMAT))) => {}
        Some((f, _)) => {
            bail!("{name}: unsupported format {f} (this galleon reads format {FORMAT})")
        }
    }
    let run: Run = serde_json::from_value(value)
        .map_err(|e| anyhow::anyhow!("{name}: not a valid format-{FORMAT} run: {e}"))?;
    for b in &run.benchmarks {
        if b.rounds.is_empty() {
            bail!("{name}: benchmark {} has no rounds", b.key());
        }
        if !b.median.is_finite() || !b.noise.is_finite() || b.rounds.iter().any(|r| !r.is_finite())
        {
            bail!(
                "{name}: benchmark {} has a value that is not a number",
                b.key()
            );
        }
    }
    Ok(Saved {
        path: path.to_owned(),
        run,
    })
}

/// Every run in `dir` (its `*.json` files), oldest first (by date, then file name). A file
/// that is not a valid run is an error naming it.
pub(crate) fn load_all(dir: &Path) -> anyhow::Result<Vec<Saved>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => bail!("{}: cannot list: {e}", dir.display()),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    paths.sort();
    let mut runs = paths
        .iter()
        .map(|p| load(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    runs.sort_by(|a, b| (&a.run.date, &a.path).cmp(&(&b.run.date, &b.path)));
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_civil() {
        assert_eq!(utc_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_date(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_date(1_795_680_513), "2026-11-26T08:08:33Z");
    }

    #[test]
    fn a_run_saved_before_methods_were_recorded_still_loads_and_a_new_one_keeps_its_method() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.json");
        std::fs::write(
            &old,
            r#"{"format": 1, "date": "2026-11-26T09:06:46Z", "commit": "93c7814a27",
                "machine": {"cpu_model": "c", "cores": 2, "kernel": "k"},
                "load_start": [], "load_end": [], "quick": false, "seconds": 1.0,
                "suites": ["http"],
                "benchmarks": [{"suite": "http", "name": "page req/s", "unit": "req/s",
                    "lower_is_better": false, "rounds": [1.0], "median": 1.0, "noise": 0.0}]}"#,
        )
        .unwrap();
        let mut run = load(&old).unwrap().run;
        assert_eq!(run.benchmarks[0].method, None);
        run.benchmarks[0].method = Some("server on CPU 0, load generator on CPU 1".into());
        let saved = load(&save(dir.path(), &run).unwrap()).unwrap().run;
        assert_eq!(saved, run);
    }

    #[test]
    fn machines_differ_by_cpu_or_cores_not_kernel() {
        let a = Machine {
            cpu_model: "A".into(),
            cores: 2,
            kernel: "6.1".into(),
        };
        let mut b = a.clone();
        b.kernel = "6.2".into();
        assert_eq!(a.differs(&b), None);
        b.cores = 4;
        assert_eq!(a.differs(&b).as_deref(), Some("2 cores vs 4"));
        b.cpu_model = "B".into();
        assert!(a.differs(&b).unwrap().starts_with("CPU model"));
    }
}
