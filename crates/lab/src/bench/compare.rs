//! `galleon bench compare [A B]`: run B against run A, benchmark by benchmark, like
//! Benchfella's `bench.cmp`: the ratio B/A, which way is better, sorted from the biggest
//! improvement to the biggest regression, with the rows whose difference is inside either run's
//! noise marked, and a loud warning when the runs were measured on different machines.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::measure::{Benchmark, fmt_value, spread};
use super::runs::Saved;

/// One benchmark present in both runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// `suite/name`.
    pub(crate) key: String,
    /// Its unit.
    pub(crate) unit: String,
    /// True when smaller is better.
    pub(crate) lower_is_better: bool,
    /// A's median.
    pub(crate) a: f64,
    /// B's median.
    pub(crate) b: f64,
    /// B / A.
    pub(crate) ratio: f64,
    /// How much better B is than A, oriented: above 1 better, below 1 worse (A/B for times,
    /// B/A for rates).
    pub(crate) gain: f64,
    /// The larger of the two runs' noise figures for it.
    pub(crate) noise: f64,
    /// The difference is no larger than that noise: not a change one can claim. For a guarded
    /// benchmark: the middle halves of the two runs' rounds overlap.
    pub(crate) in_noise: bool,
    /// Guarded in either run ([`Benchmark::guard`]): a regression here is flagged.
    pub(crate) guard: bool,
    /// How A and B measured it, when that differs ([`Benchmark::method`]; a run from before
    /// it was recorded says "not recorded"): the ratio then compares the methods too.
    pub(crate) methods: Option<(String, String)>,
}

impl Row {
    /// A guarded benchmark that got worse by more than its noise.
    pub(crate) fn is_flagged(&self) -> bool {
        self.guard && self.gain < 1.0 && !self.in_noise
    }
}

/// The comparison of two runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Comparison {
    /// Benchmarks in both runs, from the biggest improvement to the biggest regression.
    pub(crate) rows: Vec<Row>,
    /// Keys (`suite/name [unit]`) only in A.
    pub(crate) only_a: Vec<String>,
    /// Keys only in B.
    pub(crate) only_b: Vec<String>,
    /// How the machines differ, when they do.
    pub(crate) machines: Option<String>,
}

/// B/A, with 0/0 as 1 and x/0 as infinity.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        if b == 0.0 { 1.0 } else { f64::INFINITY }
    } else {
        b / a
    }
}

/// One row from the two runs' figures for a benchmark.
pub(crate) fn row(a: &Benchmark, b: &Benchmark) -> Row {
    let r = ratio(a.median, b.median);
    let gain = if a.lower_is_better {
        ratio(b.median, a.median)
    } else {
        r
    };
    let noise = a.noise.max(b.noise);
    let guard = a.guard || b.guard;
    // A guarded figure is judged by its rounds, not by the two medians against the larger
    // spread: a change is real when the middle halves of the two runs' rounds do not overlap.
    let in_noise = if guard && !a.rounds.is_empty() && !b.rounds.is_empty() {
        let (alo, ahi) = spread(&sorted(&a.rounds));
        let (blo, bhi) = spread(&sorted(&b.rounds));
        alo <= bhi && blo <= ahi
    } else {
        (r - 1.0).abs() <= noise
    };
    Row {
        key: a.key(),
        unit: a.unit.clone(),
        lower_is_better: a.lower_is_better,
        a: a.median,
        b: b.median,
        ratio: r,
        gain,
        noise,
        in_noise,
        guard,
        methods: (a.method != b.method).then(|| {
            let say = |m: &Option<String>| m.clone().unwrap_or_else(|| "not recorded".to_owned());
            (say(&a.method), say(&b.method))
        }),
    }
}

/// `v` sorted, non-finite values left out.
fn sorted(v: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        v.push(0.0);
    }
    v
}

/// The guarded benchmarks that got worse beyond their noise, worst first.
pub(crate) fn flagged(c: &Comparison) -> Vec<&Row> {
    let mut v: Vec<&Row> = c.rows.iter().filter(|r| r.is_flagged()).collect();
    v.sort_by(|x, y| x.gain.total_cmp(&y.gain));
    v
}

/// Compares `b` with `a`. A benchmark is the same in both when suite, name and unit match.
pub(crate) fn compare(a: &Saved, b: &Saved) -> Comparison {
    let index = |s: &Saved| -> BTreeMap<String, Benchmark> {
        s.run
            .benchmarks
            .iter()
            .map(|x| (format!("{} [{}]", x.key(), x.unit), x.clone()))
            .collect()
    };
    let (ia, ib) = (index(a), index(b));
    let mut rows: Vec<Row> = ia
        .iter()
        .filter_map(|(k, x)| ib.get(k).map(|y| row(x, y)))
        .collect();
    rows.sort_by(|x, y| y.gain.total_cmp(&x.gain).then_with(|| x.key.cmp(&y.key)));
    Comparison {
        rows,
        only_a: ia
            .keys()
            .filter(|k| !ib.contains_key(*k))
            .cloned()
            .collect(),
        only_b: ib
            .keys()
            .filter(|k| !ia.contains_key(*k))
            .cloned()
            .collect(),
        machines: a.run.machine.differs(&b.run.machine),
    }
}

/// The verdict column: `1.23x better`, `1.23x worse`, `~ same`.
fn verdict(r: &Row) -> String {
    let how = if r.gain == 1.0 {
        "same".to_owned()
    } else if r.gain > 1.0 {
        format!("{:.2}x better", r.gain)
    } else {
        format!("{:.2}x worse", 1.0 / r.gain)
    };
    let how = if r.methods.is_some() {
        format!("{how} (measured differently *)")
    } else {
        how
    };
    if r.in_noise {
        format!("~ {how}, inside noise (spread {:.0}%)", r.noise * 100.0)
    } else if r.is_flagged() {
        format!("{how}  <-- REGRESSION (guarded)")
    } else {
        how
    }
}

/// The warning printed (to stderr and atop the table) when the machines differ.
pub(crate) fn machine_warning(diff: &str) -> String {
    format!(
        "WARNING: these runs come from DIFFERENT MACHINES ({diff}): the ratios compare the \
         machines as much as the code"
    )
}

/// The comparison as text: a header naming both runs, the table, then the one-sided lists.
pub(crate) fn render(a: &Saved, b: &Saved, c: &Comparison) -> String {
    let mut s = String::new();
    for (tag, x) in [("A", a), ("B", b)] {
        let load = |l: &[f64]| l.first().map_or("?".to_owned(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "{tag}: {} {}{} ({}; load {} -> {}; {})",
            x.run.date,
            x.run.short_commit(),
            if x.run.quick { " quick" } else { "" },
            x.run.machine.summary(),
            load(&x.run.load_start),
            load(&x.run.load_end),
            x.path.display()
        );
    }
    if let Some(diff) = &c.machines {
        let _ = writeln!(s, "\n!!! {} !!!", machine_warning(diff));
    }
    let _ = writeln!(s);
    let kw = c.rows.iter().map(|r| r.key.len()).max().unwrap_or(9).max(9);
    let uw = c
        .rows
        .iter()
        .map(|r| r.unit.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        s,
        "{:<kw$}  {:<uw$}  {:>10}  {:>10}  {:>6}  change (B vs A)",
        "benchmark", "unit", "A", "B", "B/A"
    );
    for r in &c.rows {
        let _ = writeln!(
            s,
            "{:<kw$}  {:<uw$}  {:>10}  {:>10}  {:>6.3}  {}",
            r.key,
            r.unit,
            fmt_value(r.a),
            fmt_value(r.b),
            r.ratio,
            verdict(r)
        );
    }
    if c.rows.is_empty() {
        let _ = writeln!(s, "(no benchmark is in both runs)");
    }
    let inside = c.rows.iter().filter(|r| r.in_noise).count();
    let _ = writeln!(
        s,
        "\n{} benchmarks in both runs; {inside} marked ~: the change is inside the run-to-run \
         noise (the larger relative spread of their rounds in A or B).",
        c.rows.len()
    );
    let differ: Vec<&Row> = c.rows.iter().filter(|r| r.methods.is_some()).collect();
    if !differ.is_empty() {
        let _ = writeln!(s, "\n* measured differently in A and B:");
        for r in differ {
            if let Some((ma, mb)) = &r.methods {
                let _ = writeln!(s, "  {}: A {ma}; B {mb}", r.key);
            }
        }
    }
    let bad = flagged(c);
    if !bad.is_empty() {
        let _ = writeln!(
            s,
            "\n!!! {} guarded benchmark{} got worse beyond the run-to-run noise !!!",
            bad.len(),
            if bad.len() == 1 { "" } else { "s" }
        );
        for r in bad {
            let _ = writeln!(
                s,
                "  {}: {} -> {} {} ({:.2}x worse; noise {:.0}%)",
                r.key,
                fmt_value(r.a),
                fmt_value(r.b),
                r.unit,
                1.0 / r.gain,
                r.noise * 100.0
            );
        }
    }
    for (tag, list) in [("only in A", &c.only_a), ("only in B", &c.only_b)] {
        if !list.is_empty() {
            let _ = writeln!(s, "\n{tag}:");
            for k in list {
                let _ = writeln!(s, "  {k}");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::measure::{median, noise};
    use crate::bench::runs::{Machine, Run};

    fn bench(name: &str, lower: bool, rounds: &[f64]) -> Benchmark {
        Benchmark {
            suite: "s".into(),
            name: name.into(),
            unit: if lower { "us".into() } else { "req/s".into() },
            lower_is_better: lower,
            rounds: rounds.to_vec(),
            median: median(rounds),
            noise: noise(rounds),
            guard: false,
            method: None,
        }
    }

    fn saved(cpu: &str, benches: Vec<Benchmark>) -> Saved {
        Saved {
            path: "x.json".into(),
            run: Run {
                format: 1,
                date: "2026-11-26T08:00:00Z".into(),
                commit: "abc".into(),
                dirty: false,
                machine: Machine {
                    cpu_model: cpu.into(),
                    cores: 2,
                    kernel: "k".into(),
                },
                load_start: vec![],
                load_end: vec![],
                quick: false,
                seconds: 1.0,
                suites: vec!["s".into()],
                benchmarks: benches,
                skipped: vec![],
            },
        }
    }

    #[test]
    fn ratio_is_b_over_a_and_gain_is_oriented() {
        // A time that halved: B/A = 0.5, twice as good.
        let r = row(
            &bench("t", true, &[10.0, 10.0, 10.0]),
            &bench("t", true, &[5.0, 5.0, 5.0]),
        );
        assert_eq!((r.ratio, r.gain), (0.5, 2.0));
        // A rate that halved: B/A = 0.5, twice as bad.
        let r = row(
            &bench("r", false, &[10.0, 10.0, 10.0]),
            &bench("r", false, &[5.0, 5.0, 5.0]),
        );
        assert_eq!((r.ratio, r.gain), (0.5, 0.5));
        assert_eq!(ratio(0.0, 0.0), 1.0);
        assert!(ratio(0.0, 1.0).is_infinite());
    }

    #[test]
    fn a_change_inside_either_runs_spread_is_marked_as_noise() {
        // A spreads 20% (9..11); B is 5% slower: inside.
        let r = row(
            &bench("t", true, &[9.0, 10.0, 11.0]),
            &bench("t", true, &[10.5, 10.5, 10.5]),
        );
        assert!(r.in_noise);
        // Both tight (1%); 30% slower: outside.
        let r = row(
            &bench("t", true, &[9.95, 10.0, 10.05]),
            &bench("t", true, &[13.0, 13.0, 13.0]),
        );
        assert!(!r.in_noise);
        // Only B is noisy (40%); 10% better: inside.
        let r = row(
            &bench("t", true, &[10.0, 10.0, 10.0]),
            &bench("t", true, &[7.0, 9.0, 11.0]),
        );
        assert!(r.in_noise);
        assert!(verdict(&r).contains("inside noise"));
    }

    #[test]
    fn rows_go_from_best_to_worst_and_one_sided_ones_are_listed() {
        let a = saved(
            "cpu",
            vec![
                bench("slower", true, &[10.0]),
                bench("faster", true, &[10.0]),
                bench("more-req", false, &[100.0]),
                bench("gone", true, &[1.0]),
            ],
        );
        let b = saved(
            "cpu",
            vec![
                bench("slower", true, &[20.0]),
                bench("faster", true, &[8.0]),
                bench("more-req", false, &[300.0]),
                bench("new", true, &[1.0]),
            ],
        );
        let c = compare(&a, &b);
        let keys: Vec<&str> = c.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["s/more-req", "s/faster", "s/slower"]);
        assert_eq!(c.only_a, ["s/gone [us]"]);
        assert_eq!(c.only_b, ["s/new [us]"]);
        assert_eq!(c.machines, None);
        let text = render(&a, &b, &c);
        assert!(text.contains("3.00x better"), "{text}");
        assert!(text.contains("2.00x worse"), "{text}");
        assert!(text.contains("only in A:\n  s/gone [us]"), "{text}");
    }

    #[test]
    fn different_machines_are_named_loudly() {
        let a = saved("AMD EPYC", vec![bench("t", true, &[1.0])]);
        let b = saved("Intel Xeon", vec![bench("t", true, &[1.0])]);
        let c = compare(&a, &b);
        assert!(c.machines.as_deref().unwrap().contains("Intel Xeon"));
        assert!(render(&a, &b, &c).contains("DIFFERENT MACHINES"));
    }

    #[test]
    fn same_name_with_another_unit_is_another_benchmark() {
        let a = saved("c", vec![bench("t", true, &[1.0])]);
        let b = saved("c", vec![bench("t", false, &[1.0])]);
        let c = compare(&a, &b);
        assert!(c.rows.is_empty());
        assert_eq!((c.only_a.len(), c.only_b.len()), (1, 1));
    }

    #[test]
    fn a_row_measured_another_way_in_each_run_is_marked_and_explained() {
        let pinned = |rounds: &[f64]| Benchmark {
            method: Some("server on CPU 0, load generator on CPU 1".into()),
            ..bench("page req/s", false, rounds)
        };
        let old = saved("c", vec![bench("page req/s", false, &[10.0, 10.0, 10.0])]);
        let new = saved("c", vec![pinned(&[12.0, 12.0, 12.0])]);
        let c = compare(&old, &new);
        assert_eq!(
            c.rows[0].methods,
            Some((
                "not recorded".to_owned(),
                "server on CPU 0, load generator on CPU 1".to_owned()
            ))
        );
        let text = render(&old, &new, &c);
        assert!(
            text.contains("1.20x better (measured differently *)"),
            "{text}"
        );
        assert!(
            text.contains("s/page req/s: A not recorded; B server on CPU 0"),
            "{text}"
        );
        // The same method on both sides: nothing said.
        let c = compare(&new, &new);
        assert_eq!(c.rows[0].methods, None);
        assert!(!render(&new, &new, &c).contains("measured differently"));
    }

    #[test]
    fn a_guarded_benchmark_that_drops_beyond_its_noise_is_flagged() {
        let guarded = |rounds: &[f64]| Benchmark {
            guard: true,
            ..bench("doom vs raw", false, rounds)
        };
        // 0.93 of the floor, then 0.52: flagged, and named in the text.
        let a = saved("c", vec![guarded(&[0.92, 0.93, 0.94])]);
        let b = saved("c", vec![guarded(&[0.51, 0.52, 0.53])]);
        let c = compare(&a, &b);
        let bad = flagged(&c);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].key, "s/doom vs raw");
        let text = render(&a, &b, &c);
        assert!(text.contains("REGRESSION (guarded)"), "{text}");
        assert!(text.contains("1 guarded benchmark got worse"), "{text}");
        // A drop inside the noise, a rise, and an unguarded drop are not flagged.
        let noisy = saved("c", vec![guarded(&[0.70, 0.90, 1.10])]);
        assert!(flagged(&compare(&a, &noisy)).is_empty());
        // Rounds of two real runs on a shared machine (the fixed build, then the regressed
        // one): each spreads 24-35% around its median, more than the 30% drop, but their middle
        // halves are apart.
        let fixed = saved(
            "c",
            vec![guarded(&[0.653, 0.661, 0.859, 0.865, 0.791, 0.707, 0.531])],
        );
        let regressed = saved(
            "c",
            vec![guarded(&[0.715, 0.376, 0.495, 0.567, 0.618, 0.456, 0.378])],
        );
        assert_eq!(flagged(&compare(&fixed, &regressed)).len(), 1);
        // The same rounds unguarded: inside the noise by the medians' rule.
        let plain_of = |s: &Saved| {
            let mut s = s.clone();
            s.run.benchmarks[0].guard = false;
            s
        };
        let c = compare(&plain_of(&fixed), &plain_of(&regressed));
        assert!(c.rows[0].in_noise);
        assert!(flagged(&compare(&b, &a)).is_empty());
        let plain = |rounds: &[f64]| bench("doom vs raw", false, rounds);
        let c = compare(
            &saved("c", vec![plain(&[0.92, 0.93, 0.94])]),
            &saved("c", vec![plain(&[0.51, 0.52, 0.53])]),
        );
        assert!(flagged(&c).is_empty());
        assert!(!render(&a, &a, &compare(&a, &a)).contains("REGRESSION"));
    }
}
