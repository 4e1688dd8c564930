//! What every suite shares: the run's settings ([`Ctx`]), the order contenders take turns in
//! ([`rotation`]), and the summary of a benchmark's rounds ([`median`], [`noise`]), collected
//! into [`Benchmark`]s by a [`Collector`]. Depends on nothing else of `bench`, so suites,
//! the run format and the comparison can all use it without a cycle.

use std::path::PathBuf;
use std::time::Duration;

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

/// The settings a suite runs under.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// `--quick`: few, short rounds (tests and smoke runs); the numbers are then rough.
    pub(crate) quick: bool,
    /// `--rounds`: overrides every suite's number of rounds.
    pub(crate) rounds: Option<usize>,
    /// The site directory (`pages/`, `data/`, `static/`), for the templates, http and rules suites.
    pub(crate) site: PathBuf,
    /// This suite's progress bar (stderr; hidden when stderr is not a terminal).
    pub(crate) bar: ProgressBar,
    /// Pin the http suite's server and load generator to a CPU each (false: `--no-pin` or
    /// `PIN=0`).
    pub(crate) pin: bool,
}

impl Ctx {
    /// Rounds for a suite whose full run takes `full` rounds: `--rounds` if given, 3 under
    /// `--quick`, else `full`.
    pub(crate) fn rounds(&self, full: usize) -> usize {
        match (self.rounds, self.quick) {
            (Some(n), _) => n.max(1),
            (None, true) => 3,
            (None, false) => full.max(1),
        }
    }

    /// `full` normally, `quick` under `--quick`: sizes and durations of one measurement.
    pub(crate) fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick { quick } else { full }
    }

    /// Sets the bar's length (the suite's measurements) and its message.
    pub(crate) fn start(&self, steps: usize, what: &str) {
        self.bar.set_length(steps as u64);
        self.bar.set_position(0);
        self.bar.set_message(what.to_owned());
    }

    /// One measurement done.
    pub(crate) fn step(&self, what: &str) {
        self.bar.set_message(what.to_owned());
        self.bar.inc(1);
    }
}

/// The order in which `n` contenders take their turn in round `round`: rotated by one each
/// round (A B C, B C A, C A B, ...), so no contender always runs first, right after a pause,
/// or right after the heaviest one.
pub(crate) fn rotation(round: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| (i + round) % n.max(1))
}

/// The median of `values` (the mean of the two middle ones for an even count); NaN when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The `q` quantile (0..=1) of sorted `v`, interpolating between neighbours; NaN when empty.
pub(crate) fn quantile(v: &[f64], q: f64) -> f64 {
    match v.len() {
        0 => f64::NAN,
        n => {
            let x = (n - 1) as f64 * q;
            let (i, f) = (x.floor() as usize, x - x.floor());
            v[i] + (v[(i + 1).min(n - 1)] - v[i]) * f
        }
    }
}

/// The run-to-run noise of a benchmark: the spread of its rounds relative to their median.
/// From 5 rounds on, the interquartile range (the middle half of the rounds: a burst of other
/// work on a shared machine spoils a round or two, not the figure); below 5, the whole range.
/// 0 for one round, and for a zero median.
pub(crate) fn noise(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let m = median(&v);
    if v.is_empty() || m == 0.0 || !m.is_finite() {
        return 0.0;
    }
    let (lo, hi) = spread(&v);
    ((hi - lo) / m).abs()
}

/// The bounds of the spread [`noise`] measures, of sorted `v` (non-empty): the quartiles from 5
/// values on, else the lowest and the highest.
pub(crate) fn spread(v: &[f64]) -> (f64, f64) {
    if v.len() >= 5 {
        (quantile(v, 0.25), quantile(v, 0.75))
    } else {
        (v[0], v[v.len() - 1])
    }
}

/// One benchmark of a run: its rounds and their summary, as saved in the run's JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Benchmark {
    /// The suite it belongs to (`iolist`, `http`, ...).
    pub(crate) suite: String,
    /// Its name within the suite; with the suite, what identifies it across runs.
    pub(crate) name: String,
    /// The unit of `rounds` and `median` (`us`, `req/s`, `ns/KiB`, ...).
    pub(crate) unit: String,
    /// True when a smaller value is better (times), false for rates.
    pub(crate) lower_is_better: bool,
    /// Each round's value, in the order measured.
    pub(crate) rounds: Vec<f64>,
    /// The median of the rounds: the benchmark's value.
    pub(crate) median: f64,
    /// The rounds' relative spread ([`noise`]): 0.05 is 5%.
    pub(crate) noise: f64,
    /// Guarded: `galleon bench compare` flags a change for the worse beyond the noise (the
    /// middle halves of the two runs' rounds apart) and exits with an error. For figures the machine's speed does not move, such as a ratio to a floor
    /// measured in the same rounds (`/doom` against a raw sender).
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) guard: bool,
    /// How it was measured where that changes its value (the http suite: `server on CPU 0,
    /// load generator on CPU 1`, or `unpinned (...)`); absent in runs before it was recorded.
    /// `galleon bench compare` marks a row whose two runs differ in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) method: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Benchmark {
    /// The key that identifies a benchmark across runs: `suite/name`.
    pub(crate) fn key(&self) -> String {
        format!("{}/{}", self.suite, self.name)
    }
}

/// A benchmark that could not run here (no `DATABASE_URL`, ...), listed in the run so a reader
/// sees it was not forgotten.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Skipped {
    /// The suite.
    pub(crate) suite: String,
    /// The benchmark's name.
    pub(crate) name: String,
    /// Why it did not run.
    pub(crate) reason: String,
}

/// Gathers one suite's values, benchmark by benchmark, in the order they were first seen.
#[derive(Debug)]
pub(crate) struct Collector {
    suite: String,
    benches: Vec<Gathered>,
    skipped: Vec<Skipped>,
}

/// One benchmark's values while a suite runs.
#[derive(Debug)]
struct Gathered {
    name: String,
    unit: String,
    lower_is_better: bool,
    guard: bool,
    method: Option<String>,
    rounds: Vec<f64>,
}

impl Collector {
    /// An empty collector for `suite`.
    pub(crate) fn new(suite: &str) -> Collector {
        Collector {
            suite: suite.to_owned(),
            benches: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// Names benchmark `name` before its first value, so the table lists benchmarks in the
    /// order declared, not in the rotated order of the first round.
    pub(crate) fn declare(&mut self, name: &str, unit: &str, lower_is_better: bool) {
        self.entry(name, unit, lower_is_better);
    }

    /// [`Collector::declare`] for a guarded benchmark ([`Benchmark::guard`]).
    pub(crate) fn declare_guarded(&mut self, name: &str, unit: &str, lower_is_better: bool) {
        self.entry(name, unit, lower_is_better).guard = true;
    }

    /// [`Collector::declare`] with how it is measured ([`Benchmark::method`]).
    pub(crate) fn declare_measured(
        &mut self,
        name: &str,
        unit: &str,
        lower_is_better: bool,
        method: &str,
    ) {
        self.entry(name, unit, lower_is_better).method = Some(method.to_owned());
    }

    /// One round's value of benchmark `name`.
    pub(crate) fn push(&mut self, name: &str, unit: &str, lower_is_better: bool, value: f64) {
        self.entry(name, unit, lower_is_better).rounds.push(value);
    }

    /// Benchmark `name`, added (with no values) when first seen.
    fn entry(&mut self, name: &str, unit: &str, lower_is_better: bool) -> &mut Gathered {
        let i = match self.benches.iter().position(|b| b.name == name) {
            Some(i) => i,
            None => {
                self.benches.push(Gathered {
                    name: name.to_owned(),
                    unit: unit.to_owned(),
                    lower_is_better,
                    guard: false,
                    method: None,
                    rounds: Vec::new(),
                });
                self.benches.len() - 1
            }
        };
        &mut self.benches[i]
    }

    /// Records that `name` did not run, and why.
    pub(crate) fn skip(&mut self, name: &str, reason: &str) {
        self.skipped.push(Skipped {
            suite: self.suite.clone(),
            name: name.to_owned(),
            reason: reason.to_owned(),
        });
    }

    /// The suite's benchmarks (median and noise computed) and skipped rows.
    pub(crate) fn finish(self) -> (Vec<Benchmark>, Vec<Skipped>) {
        let suite = self.suite;
        let benches = self
            .benches
            .into_iter()
            .filter(|b| !b.rounds.is_empty())
            .map(|b| Benchmark {
                suite: suite.clone(),
                name: b.name,
                unit: b.unit,
                lower_is_better: b.lower_is_better,
                median: median(&b.rounds),
                noise: noise(&b.rounds),
                rounds: b.rounds,
                guard: b.guard,
                method: b.method,
            })
            .collect();
        (benches, self.skipped)
    }
}

/// A value with about four significant digits, for tables (`0.0123`, `12.35`, `1235`, `123457`).
pub(crate) fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else if a == 0.0 {
        "0".to_owned()
    } else {
        let digits = (-a.log10().floor()) as usize + 3;
        format!("{v:.digits$}")
    }
}

/// Microseconds in `d`, as a float.
pub(crate) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn noise_is_the_relative_range_below_five_rounds_then_the_interquartile_range() {
        // Three rounds: the whole spread, (11 - 9) / 10.
        assert!((noise(&[9.0, 10.0, 11.0]) - 0.2).abs() < 1e-12);
        // Five rounds: quartiles 9 and 11, so the outliers 1 and 100 do not count.
        assert!((noise(&[1.0, 9.0, 10.0, 11.0, 100.0]) - 0.2).abs() < 1e-12);
        // Nine rounds, two stray ones: still the middle half, (11 - 9) / 10.
        let v = [50.0, 8.0, 9.0, 10.0, 10.0, 10.0, 11.0, 12.0, 0.5];
        assert!((noise(&v) - 0.2).abs() < 1e-12, "{}", noise(&v));
        assert_eq!(noise(&[5.0]), 0.0);
        assert_eq!(noise(&[0.0, 0.0, 0.0]), 0.0);
    }

    #[test]
    fn rotation_gives_each_contender_each_place() {
        let orders: Vec<Vec<usize>> = (0..3).map(|r| rotation(r, 3).collect()).collect();
        assert_eq!(orders, vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1]]);
    }

    #[test]
    fn collector_groups_rounds_by_name_in_first_seen_order() {
        let mut c = Collector::new("s");
        c.declare("never", "us", true);
        c.push("b", "us", true, 2.0);
        c.declare_measured("a", "req/s", false, "pinned");
        c.push("a", "req/s", false, 10.0);
        c.push("b", "us", true, 4.0);
        c.push("b", "us", true, 3.0);
        c.skip("pg", "no DATABASE_URL");
        let (benches, skipped) = c.finish();
        assert_eq!(benches.len(), 2);
        assert_eq!(benches[0].key(), "s/b");
        assert_eq!(benches[0].rounds, vec![2.0, 4.0, 3.0]);
        assert_eq!(benches[0].median, 3.0);
        assert!(!benches[1].lower_is_better);
        assert_eq!(benches[0].method, None);
        assert_eq!(benches[1].method.as_deref(), Some("pinned"));
        assert_eq!(skipped[0].reason, "no DATABASE_URL");
    }

    #[test]
    fn values_keep_about_four_digits() {
        assert_eq!(fmt_value(123456.7), "123457");
        assert_eq!(fmt_value(12.3456), "12.35");
        assert_eq!(fmt_value(0.012345), "0.01235");
        assert_eq!(fmt_value(0.0), "0");
    }
}
