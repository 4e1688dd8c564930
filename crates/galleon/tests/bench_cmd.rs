//! `galleon bench` end to end, through the built binary: a quick run of one cheap suite saved
//! to a temporary directory, then `compare`, `graph` and `list` on it and on edited copies,
//! and the errors for bad input (each a one-line message and a non-zero exit, never a panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Runs `galleon ARGS` in `cwd`.
fn galleon(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_galleon"))
        .args(args)
        .current_dir(cwd)
        .env_remove("DATABASE_URL")
        .output()
        .expect("running galleon")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A failure: non-zero exit, one `error:` line naming `what`, no panic.
fn assert_clean_error(o: &Output, what: &[&str]) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected a failure; stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line in {err:?}"));
    for w in what {
        assert!(line.contains(w), "{w:?} not in {line:?}");
    }
}

/// The run files in `dir`.
fn runs_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A quick run of the offload suite saved in `dir`; its file.
fn quick_run(dir: &Path) -> PathBuf {
    let before = runs_in(dir);
    let d = dir.to_str().unwrap();
    let o = galleon(dir, &["bench", "--quick", "offload", "--dir", d]);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let after = runs_in(dir);
    let new: Vec<_> = after.iter().filter(|p| !before.contains(p)).collect();
    assert_eq!(new.len(), 1, "{after:?}");
    new[0].clone()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

#[test]
fn an_unknown_suite_is_refused_with_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = galleon(
        dir.path(),
        &["bench", "--quick", "offload", "nosuch", "--dir", d],
    );
    assert_clean_error(
        &o,
        &[
            "unknown suite `nosuch`",
            "iolist",
            "http",
            "eventstore",
            "rules",
        ],
    );
    // Nothing ran, nothing was saved.
    assert!(runs_in(dir.path()).is_empty());
}

#[test]
fn a_quick_run_saves_its_metadata_and_every_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = galleon(dir.path(), &["bench", "--quick", "offload", "--dir", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("== offload"), "{out}");
    assert!(out.contains("tokio spawn_blocking round trip p50"), "{out}");
    let files = runs_in(dir.path());
    assert_eq!(files.len(), 1);
    let run = read_json(&files[0]);
    assert_eq!(run["format"], 1);
    let date = run["date"].as_str().unwrap();
    assert!(
        date.len() == 20 && date.ends_with('Z') && date.as_bytes()[10] == b'T',
        "{date}"
    );
    assert!(!run["commit"].as_str().unwrap().is_empty());
    let m = &run["machine"];
    assert!(!m["cpu_model"].as_str().unwrap().is_empty());
    assert!(m["cores"].as_u64().unwrap() >= 1);
    assert!(!m["kernel"].as_str().unwrap().is_empty());
    if Path::new("/proc/loadavg").exists() {
        assert_eq!(run["load_start"].as_array().unwrap().len(), 3);
        assert_eq!(run["load_end"].as_array().unwrap().len(), 3);
    }
    assert_eq!(run["quick"], true);
    assert_eq!(run["suites"], serde_json::json!(["offload"]));
    let benches = run["benchmarks"].as_array().unwrap();
    assert_eq!(benches.len(), 4, "{benches:?}");
    for b in benches {
        assert_eq!(b["suite"], "offload");
        assert_eq!(b["unit"], "us");
        assert_eq!(b["lower_is_better"], true);
        let rounds = b["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 3);
        let median = b["median"].as_f64().unwrap();
        assert!(median > 0.0 && median < 1e6, "{b}");
        assert!(b["noise"].as_f64().unwrap() >= 0.0);
    }
}

/// Writes `runs/a.json` and `runs/b.json` from a quick run in `dir`: A with its first benchmark
/// made steady (every round at the median, noise 0; guarded if `guard`), B the same with that
/// benchmark 4x slower and a later date, the others unchanged. The benchmark's name.
fn steady_then_slower(dir: &Path, runs: &Path, guard: bool) -> String {
    let quick = quick_run(dir);
    let mut run = read_json(&quick);
    let name = run["benchmarks"][0]["name"].as_str().unwrap().to_owned();
    let m = run["benchmarks"][0]["median"].as_f64().unwrap();
    if guard {
        run["benchmarks"][0]["guard"] = true.into();
    }
    run["benchmarks"][0]["rounds"] = vec![m; 3].into();
    run["benchmarks"][0]["noise"] = 0.0.into();
    write_json(&runs.join("a.json"), &run);
    run["benchmarks"][0]["rounds"] = vec![m * 4.0; 3].into();
    run["benchmarks"][0]["median"] = (m * 4.0).into();
    run["date"] = "2099-01-01T00:00:00Z".into();
    write_json(&runs.join("b.json"), &run);
    name
}

#[test]
fn compare_prints_ratios_sorted_and_marks_noise() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let slow = steady_then_slower(dir.path(), &runs, false);
    // Default: the last two runs by date, so A is a.json and B b.json.
    let o = galleon(
        dir.path(),
        &["bench", "compare", "--dir", runs.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("B/A"), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("offload/")).collect();
    assert_eq!(rows.len(), 4, "{out}");
    // The regression is the last row (sorted best to worst), 4.00x worse, not marked as noise.
    let last = rows.last().unwrap();
    assert!(last.contains(&slow), "{out}");
    assert!(
        last.contains("4.000") && last.contains("4.00x worse"),
        "{out}"
    );
    assert!(!last.contains('~'), "{out}");
    // The unchanged ones: ratio 1, marked inside the noise.
    for r in &rows[..3] {
        assert!(
            r.contains("1.000") && r.contains("~ same, inside noise"),
            "{r}"
        );
    }
    assert!(!stderr(&o).contains("DIFFERENT MACHINES"));
    // Explicit files (bare names are looked up in --dir), the other way round: now it is the
    // improvement, and first.
    let o = galleon(
        dir.path(),
        &[
            "bench",
            "compare",
            "b.json",
            "a.json",
            "--dir",
            runs.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let first = out.lines().find(|l| l.starts_with("offload/")).unwrap();
    assert!(
        first.contains(&slow) && first.contains("0.250") && first.contains("4.00x better"),
        "{out}"
    );
}

#[test]
fn compare_fails_when_a_guarded_benchmark_regressed_beyond_its_noise() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let name = steady_then_slower(dir.path(), &runs, true);
    let compare = |x: &str, y: &str| {
        galleon(
            dir.path(),
            &["bench", "compare", x, y, "--dir", runs.to_str().unwrap()],
        )
    };
    let o = compare("a.json", "b.json");
    assert!(!o.status.success(), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains("REGRESSION (guarded)"), "{out}");
    assert!(
        out.contains("1 guarded benchmark got worse beyond the run-to-run noise"),
        "{out}"
    );
    let err = stderr(&o);
    assert!(
        err.contains("guarded benchmark regressed beyond the noise")
            && err.contains(&format!("offload/{name}")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // The other way round it is an improvement: no flag, success.
    let o = compare("b.json", "a.json");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("REGRESSION"), "{}", stdout(&o));
}

#[test]
fn compare_warns_loudly_about_runs_from_different_machines() {
    let dir = tempfile::tempdir().unwrap();
    let a = quick_run(dir.path());
    let mut run = read_json(&a);
    run["machine"]["cpu_model"] = "Some Other CPU 9000".into();
    let b = dir.path().join("other-machine.json");
    write_json(&b, &run);
    let o = galleon(
        dir.path(),
        &["bench", "compare", a.to_str().unwrap(), b.to_str().unwrap()],
    );
    assert!(
        o.status.success(),
        "a warning, not an error: {}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("DIFFERENT MACHINES"), "{}", stderr(&o));
    assert!(stderr(&o).contains("Some Other CPU 9000"));
    assert!(stdout(&o).contains("DIFFERENT MACHINES"));
}

#[test]
fn bad_run_files_are_named_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = quick_run(d);
    let g = good.to_str().unwrap();
    // Missing.
    let missing = d.join("missing.json");
    let o = galleon(d, &["bench", "compare", g, missing.to_str().unwrap()]);
    assert_clean_error(&o, &["missing.json", "no such run file"]);
    // Not JSON.
    let corrupt = d.join("corrupt.json");
    std::fs::write(&corrupt, "{\"format\": 1, \"date\": ").unwrap();
    let o = galleon(d, &["bench", "compare", g, corrupt.to_str().unwrap()]);
    assert_clean_error(&o, &["corrupt.json", "not valid JSON"]);
    // Another format.
    let mut run = read_json(&good);
    run["format"] = 2.into();
    let future = d.join("future.json");
    write_json(&future, &run);
    let o = galleon(d, &["bench", "compare", g, future.to_str().unwrap()]);
    assert_clean_error(&o, &["future.json", "unsupported format 2"]);
    // The right format with a field missing.
    let mut run = read_json(&good);
    run.as_object_mut().unwrap().remove("machine");
    let partial = d.join("partial.json");
    write_json(&partial, &run);
    let o = galleon(d, &["bench", "compare", g, partial.to_str().unwrap()]);
    assert_clean_error(&o, &["partial.json", "machine"]);
    // A corrupt file in the runs directory stops list and graph, named.
    let o = galleon(d, &["bench", "list", "--dir", d.to_str().unwrap()]);
    assert_clean_error(&o, &["corrupt.json"]);
    let o = galleon(d, &["bench", "graph", "--dir", d.to_str().unwrap()]);
    assert_clean_error(&o, &["corrupt.json"]);
}

#[test]
fn compare_needs_two_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = galleon(dir.path(), &["bench", "compare", "--dir", d]);
    assert_clean_error(&o, &["needs two runs", "has 0"]);
    quick_run(dir.path());
    let o = galleon(dir.path(), &["bench", "compare", "--dir", d]);
    assert_clean_error(&o, &["needs two runs", "has 1"]);
    let o = galleon(
        dir.path(),
        &["bench", "graph", "--dir", &format!("{d}/empty")],
    );
    assert_clean_error(&o, &["no saved runs"]);
}

#[test]
fn graph_writes_one_self_contained_html_with_a_chart_per_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = quick_run(d);
    let mut run = read_json(&a);
    run["date"] = "2099-01-01T00:00:00Z".into();
    run["commit"] = "feedfacecafe".into();
    write_json(&d.join("later.json"), &run);
    let out = d.join("report.html");
    let o = galleon(
        d,
        &[
            "bench",
            "graph",
            "--dir",
            d.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&out).unwrap();
    let names: Vec<String> = run["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_owned())
        .collect();
    // Two charts per benchmark (linear and log), each with its unit on the axis.
    assert_eq!(html.matches("<svg").count(), 2 * names.len());
    for n in &names {
        assert!(html.contains(n.as_str()), "{n}");
    }
    assert!(html.contains(">us</text>") && html.contains(">us (log)</text>"));
    // Hover titles name each run's date and commit.
    assert!(html.contains("<title>run #2 2099-01-01T00:00:00Z commit feedfacec"));
    // Nothing fetched.
    for bad in [
        "http://", "https://", "<script", "<link", "src=", "@import", "url(",
    ] {
        assert!(!html.contains(bad), "{bad} in the report");
    }
    assert_eq!(html.matches("<html").count(), 1);
    // `list` shows both runs.
    let o = galleon(d, &["bench", "list", "--dir", d.to_str().unwrap()]);
    let listed = stdout(&o);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(listed.contains("feedfacec") && listed.contains("[offload]"));
}
