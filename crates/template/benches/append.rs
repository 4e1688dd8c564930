//! `cargo bench -p galleon-template --bench append`: repeated append in `Enum.reduce`.
//!
//! Renders `Enum.reduce(@words, "", fn w, acc -> acc <> w end)` and the list variant
//! `Enum.reduce(@words, [], fn w, acc -> acc ++ [w] end) |> length` over N words (default
//! 100,000; `GALLEON_BENCH_WORDS=N`), under the default limits and with the step and memory
//! limits lifted (to time the work itself rather than how soon a limit stops it). Each row is
//! the median of `GALLEON_BENCH_REPS` renders (default 5), with how the render ended.
//!
//! Both are amortised linear: the accumulator's buffer grows in place while the parameter
//! holds the only reference. The `++` rows also run over
//! `GALLEON_BENCH_LIST_WORDS` words (default 10,000), where no limit stops them.

use std::time::{Duration, Instant};

use galleon_template::{Assigns, Engine, Limits, Value};

/// Reads a count from the environment, or `default`.
fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Median time of `reps` renders of `src`, and the first render's outcome (its output's
/// length, or the error).
fn time(src: &str, assigns: &Assigns, limits: Limits, reps: usize) -> (Duration, String) {
    let engine = Engine::from_source("t.eex", src)
        .expect("compiles")
        .with_limits(limits);
    let mut times = Vec::with_capacity(reps);
    let mut outcome = String::new();
    for i in 0..reps {
        let start = Instant::now();
        let r = engine.render("t.eex", assigns);
        times.push(start.elapsed());
        if i == 0 {
            outcome = match r {
                Ok(page) => format!("ok, {} bytes", page.len()),
                Err(e) => format!("error: {}", e.message()),
            };
        }
    }
    times.sort();
    (times[reps / 2], outcome)
}

fn main() {
    let n = env("GALLEON_BENCH_WORDS", 100_000);
    let reps = env("GALLEON_BENCH_REPS", 5).max(1);
    let list_n = env("GALLEON_BENCH_LIST_WORDS", 10_000);
    let words = |n: usize| {
        let mut assigns = Assigns::new();
        assigns.insert(
            "words",
            Value::list((0..n).map(|i| Value::str(&format!("w{i} ")))),
        );
        assigns
    };
    let unlimited = Limits {
        max_steps: u64::MAX,
        max_memory: usize::MAX,
        max_output: usize::MAX,
        ..Limits::default()
    };
    let cases = [
        (
            "<>",
            r#"<%= Enum.reduce(@words, "", fn w, acc -> acc <> w end) |> String.length() %>"#,
        ),
        (
            "++",
            "<%= Enum.reduce(@words, [], fn w, acc -> acc ++ [w] end) |> length() %>",
        ),
    ];
    println!("median of {reps} renders");
    for (name, src) in cases {
        let mut rows = vec![(n, "default limits", Limits::default())];
        if name == "<>" {
            rows.push((n, "no limits", unlimited));
        } else {
            rows.push((list_n, "default limits", Limits::default()));
            rows.push((list_n, "no limits", unlimited));
        }
        for (n, label, limits) in rows {
            let (t, outcome) = time(src, &words(n), limits, reps);
            println!(
                "{name:>3} {n:>7} words  {label:<15} {:>10.2} ms  {outcome}",
                t.as_secs_f64() * 1e3
            );
        }
    }
}
