//! `galleon bench graph`: every saved run in one self-contained HTML file, like Benchfella's
//! `bench.graph`: one chart per benchmark (x: the runs, oldest first; y: its median, a box for
//! the middle half of its rounds, what the noise figure measures, and a whisker from the lowest
//! to the highest round), drawn twice, on a linear axis from zero and on a log axis. Inline SVG
//! and CSS only: nothing is fetched, no script runs; each point's `<title>` names its run (date,
//! commit, machine) for the browser's tooltip.
//!
//! The page is `templates/report.html.eex` and each chart `templates/chart.html.eex`, compiled
//! with `#[derive(Template)]` and escaped by galleon's own escaping; this file computes the
//! axes and the pixel positions, formatted as the page shows them.

use std::collections::BTreeMap;

use galleon_template::Error;
use galleon_template::compiled::{IoList, Template};
use galleon_template_derive::Template;

use super::measure::{Benchmark, fmt_value, spread};
use super::runs::Saved;

/// One chart's size, in CSS pixels.
const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 250.0;
/// Plot area margins: room for the y labels, the x labels and the axis titles.
const LEFT: f64 = 78.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 52.0;
/// Most x labels drawn (the others are in the tooltips).
const MAX_X_LABELS: usize = 8;

/// The y axis of a chart.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    /// From zero to a little above the largest value.
    Linear,
    /// Logarithmic around the values (positive values only).
    Log,
}

/// Tick values for a linear axis from 0 to at least `max`: steps of 1, 2 or 5 times a power of
/// ten, about five of them; the last tick is the axis' top.
pub(crate) fn linear_ticks(max: f64) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let pow = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * pow)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * pow);
    let n = (max / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// The range and ticks of a log axis holding `[min, max]` (both > 0): from the 1-2-5 value
/// just below `min` to the one just above `max` (so both ends carry a label), at least a factor
/// of 2 around the values before that, with ticks at every 1-2-5 value inside.
pub(crate) fn log_axis(min: f64, max: f64) -> (f64, f64, Vec<f64>) {
    let (mut lo, mut hi) = (min / 1.1, max * 1.1);
    if hi / lo < 2.0 {
        let mid = (lo * hi).sqrt();
        (lo, hi) = (
            mid / std::f64::consts::SQRT_2,
            mid * std::f64::consts::SQRT_2,
        );
    }
    let (k0, k1) = (lo.log10().floor() as i32 - 1, hi.log10().ceil() as i32 + 1);
    let series: Vec<f64> = (k0..=k1)
        .flat_map(|k| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(k)))
        .collect();
    let lo = series
        .iter()
        .rev()
        .find(|v| **v <= lo)
        .copied()
        .unwrap_or(lo);
    let hi = series.iter().find(|v| **v >= hi).copied().unwrap_or(hi);
    let ticks = series
        .into_iter()
        .filter(|v| *v >= lo * 0.999 && *v <= hi * 1.001)
        .collect();
    (lo, hi, ticks)
}

/// A tick's label: the value with no trailing zeros (`0.5`, `250`, `12000`).
pub(crate) fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".to_owned();
    }
    if v.abs() >= 1e7 || v.abs() < 1e-4 {
        return format!("{v:e}");
    }
    let s = format!("{:.6}", v);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A chart's y mapping from a value to its pixel row.
#[derive(Debug, Clone, Copy)]
enum YAxis {
    /// From zero to `top`, over a plot `ph` pixels tall.
    Linear { top: f64, ph: f64 },
    /// From 10^`l0` to 10^`l1`.
    Log { l0: f64, l1: f64, ph: f64 },
}

impl YAxis {
    /// The pixel row of `v`; `None` where the axis cannot show it (zero or less on a log axis).
    fn y(self, v: f64) -> Option<f64> {
        match self {
            YAxis::Linear { top, ph } => Some(TOP + ph * (1.0 - v / top)),
            YAxis::Log { l0, l1, ph } => {
                (v > 0.0).then(|| TOP + ph * (1.0 - (v.log10() - l0) / (l1 - l0)))
            }
        }
    }
}

/// A benchmark's values over the runs: `(run index, its figures)`.
type Series<'a> = Vec<(usize, &'a Benchmark)>;

/// A pixel coordinate as the page writes it: one decimal.
fn px(v: f64) -> String {
    format!("{v:.1}")
}

/// The whole report: a header with the runs, then per suite a chart pair per benchmark.
pub(crate) fn report(runs: &[Saved], generated: &str) -> Result<Vec<u8>, Error> {
    let mut series: BTreeMap<(String, String, String), Series<'_>> = BTreeMap::new();
    for (i, s) in runs.iter().enumerate() {
        for b in &s.run.benchmarks {
            series
                .entry((b.suite.clone(), b.name.clone(), b.unit.clone()))
                .or_default()
                .push((i, b));
        }
    }
    let mut suites: Vec<SuiteView> = Vec::new();
    for ((suite, name, unit), points) in &series {
        let lower = points.first().is_some_and(|(_, b)| b.lower_is_better);
        let bench = BenchView {
            name: name.clone(),
            unit: unit.clone(),
            better: if lower { "lower" } else { "higher" },
            linear: chart(runs, points, unit, Scale::Linear)?,
            log: chart(runs, points, unit, Scale::Log)?,
        };
        match suites.last_mut() {
            Some(s) if s.name == *suite => s.benches.push(bench),
            _ => suites.push(SuiteView {
                name: suite.clone(),
                benches: vec![bench],
            }),
        }
    }
    let page = Report {
        run_count: runs.len(),
        bench_count: series.len(),
        generated: generated.to_owned(),
        runs: runs_table(runs),
        suites,
    };
    Ok(page.render()?.to_vec())
}

/// The page's assigns.
#[derive(Template)]
#[template(path = "templates/report.html.eex")]
struct Report {
    run_count: usize,
    bench_count: usize,
    generated: String,
    /// The table of runs atop the report.
    runs: Vec<RunRow>,
    suites: Vec<SuiteView>,
}

/// One saved run in the table atop the report.
struct RunRow {
    number: usize,
    date: String,
    commit: String,
    machine: String,
    load_start: String,
    load_end: String,
    suites: String,
    quick: bool,
}

/// A suite's section: its benchmarks in name order.
struct SuiteView {
    name: String,
    benches: Vec<BenchView>,
}

/// A benchmark's heading and its two charts.
struct BenchView {
    name: String,
    unit: String,
    better: &'static str,
    linear: IoList,
    log: IoList,
}

/// The rows of the table of runs.
fn runs_table(runs: &[Saved]) -> Vec<RunRow> {
    let load = |l: &[f64]| l.first().map_or("?".to_owned(), |x| format!("{x:.2}"));
    runs.iter()
        .enumerate()
        .map(|(i, s)| {
            let r = &s.run;
            RunRow {
                number: i + 1,
                date: r.date.clone(),
                commit: r.short_commit(),
                machine: r.machine.summary(),
                load_start: load(&r.load_start),
                load_end: load(&r.load_end),
                suites: r.suites.join(", "),
                quick: r.quick,
            }
        })
        .collect()
}

/// One chart's assigns: every coordinate already formatted.
#[derive(Template)]
#[template(path = "templates/chart.html.eex")]
struct Chart {
    width: String,
    height: String,
    unit: String,
    /// `linear scale` or `log scale`, in the chart's title.
    scale: &'static str,
    /// Where the note goes on a log chart with no positive values (then nothing else is drawn).
    empty: Option<At>,
    /// The plot area's left, right, top and bottom edges.
    left: String,
    right: String,
    top: String,
    bottom: String,
    grid: Vec<Tick>,
    /// `" (log)"` on a log chart, after the unit on the y axis.
    axis_suffix: &'static str,
    /// The y axis title's row, and the x axis title's column and row.
    middle_y: String,
    middle_x: String,
    runs_title_y: String,
    x_labels: Vec<XLabel>,
    /// The line through the medians (`x,y x,y ...`), when there are two or more.
    series: Option<String>,
    points: Vec<Dot>,
}

/// A point of the chart.
struct At {
    x: String,
    y: String,
}

/// A grid line and its label on the y axis.
struct Tick {
    y: String,
    label_x: String,
    label_y: String,
    label: String,
}

/// A run's number and date under the x axis.
struct XLabel {
    x: String,
    number_y: String,
    number: usize,
    date_y: String,
    date: String,
}

/// One run's median (a dot with its tooltip), whisker and box.
struct Dot {
    x: String,
    y: String,
    whisker: Option<Whisker>,
    quartiles: Option<QuartileBox>,
    /// The tooltip: the run's number, date, commit and machine, the median, noise and rounds.
    run: usize,
    date: String,
    commit: String,
    median: String,
    noise: String,
    rounds: String,
    machine: String,
}

/// The lowest to the highest round.
struct Whisker {
    y0: String,
    y1: String,
}

/// The middle half of the rounds (the spread the noise figure measures).
struct QuartileBox {
    x: String,
    y: String,
    height: String,
}

/// One chart of one benchmark over all runs.
fn chart(runs: &[Saved], points: &Series<'_>, unit: &str, scale: Scale) -> Result<IoList, Error> {
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let lows = points
        .iter()
        .map(|(_, b)| b.rounds.iter().copied().fold(b.median, f64::min));
    let highs = points
        .iter()
        .map(|(_, b)| b.rounds.iter().copied().fold(b.median, f64::max));
    let max = highs.fold(f64::MIN, f64::max);
    let min_pos = lows.filter(|v| *v > 0.0).fold(f64::MAX, f64::min);
    let mut c = Chart {
        width: format!("{WIDTH}"),
        height: format!("{HEIGHT}"),
        unit: unit.to_owned(),
        scale: if scale == Scale::Log {
            "log scale"
        } else {
            "linear scale"
        },
        empty: None,
        left: format!("{LEFT}"),
        right: px(LEFT + pw),
        top: format!("{TOP}"),
        bottom: px(TOP + ph),
        grid: Vec::new(),
        axis_suffix: if scale == Scale::Log { " (log)" } else { "" },
        middle_y: px(TOP + ph / 2.0),
        middle_x: px(LEFT + pw / 2.0),
        runs_title_y: px(HEIGHT - 6.0),
        x_labels: Vec::new(),
        series: None,
        points: Vec::new(),
    };
    // The y mapping and its ticks.
    let (axis, ticks) = match scale {
        Scale::Linear => {
            let ticks = linear_ticks(max);
            let top = ticks.last().copied().unwrap_or(1.0);
            (YAxis::Linear { top, ph }, ticks)
        }
        Scale::Log => {
            if min_pos == f64::MAX {
                c.empty = Some(At {
                    x: format!("{}", WIDTH / 2.0),
                    y: format!("{}", HEIGHT / 2.0),
                });
                return c.render();
            }
            let (lo, hi, ticks) = log_axis(min_pos, max.max(min_pos));
            (
                YAxis::Log {
                    l0: lo.log10(),
                    l1: hi.log10(),
                    ph,
                },
                ticks,
            )
        }
    };
    let y_of = |v: f64| axis.y(v);
    let n = runs.len().max(1);
    let x_of = |i: usize| {
        if n == 1 {
            LEFT + pw / 2.0
        } else {
            LEFT + pw * (0.09 + 0.82 * i as f64 / (n - 1) as f64)
        }
    };
    // Grid and y labels.
    c.grid = ticks
        .iter()
        .filter_map(|t| {
            y_of(*t).map(|y| Tick {
                y: px(y),
                label_x: px(LEFT - 6.0),
                label_y: px(y + 4.0),
                label: tick_label(*t),
            })
        })
        .collect();
    // X labels: at most MAX_X_LABELS runs, evenly picked, always the last.
    let every = n.div_ceil(MAX_X_LABELS).max(1);
    c.x_labels = runs
        .iter()
        .enumerate()
        .filter(|(i, _)| i % every == 0 || *i == n - 1)
        .map(|(i, r)| XLabel {
            x: px(x_of(i)),
            number_y: px(TOP + ph + 13.0),
            number: i + 1,
            date_y: px(TOP + ph + 25.0),
            date: r
                .run
                .date
                .get(5..16)
                .unwrap_or(&r.run.date)
                .replace('T', " "),
        })
        .collect();
    // The series: a line through the medians, then whisker, box and dot per run.
    let line: Vec<String> = points
        .iter()
        .filter_map(|(i, b)| y_of(b.median).map(|y| format!("{:.1},{y:.1}", x_of(*i))))
        .collect();
    if line.len() > 1 {
        c.series = Some(line.join(" "));
    }
    for (i, b) in points {
        let Some(y) = y_of(b.median) else { continue };
        let x = x_of(*i);
        let lo = b.rounds.iter().copied().fold(b.median, f64::min);
        let hi = b.rounds.iter().copied().fold(b.median, f64::max);
        let whisker = match (y_of(lo), y_of(hi)) {
            (Some(y0), Some(y1)) => Some(Whisker {
                y0: px(y0),
                y1: px(y1),
            }),
            _ => None,
        };
        // The box: the spread the noise figure measures (the middle half of the rounds).
        let mut sorted = b.rounds.clone();
        sorted.sort_by(f64::total_cmp);
        let quartiles = if sorted.is_empty() {
            None
        } else {
            let (q1, q3) = spread(&sorted);
            match (y_of(q1), y_of(q3)) {
                (Some(y0), Some(y1)) => Some(QuartileBox {
                    x: px(x - 4.0),
                    y: px(y1.min(y0)),
                    height: px((y0 - y1).abs().max(1.0)),
                }),
                _ => None,
            }
        };
        let r = &runs[*i].run;
        let rounds: Vec<String> = b.rounds.iter().map(|v| fmt_value(*v)).collect();
        c.points.push(Dot {
            x: px(x),
            y: px(y),
            whisker,
            quartiles,
            run: i + 1,
            date: r.date.clone(),
            commit: r.short_commit(),
            median: fmt_value(b.median),
            noise: format!("{:.1}", b.noise * 100.0),
            rounds: rounds.join(", "),
            machine: r.machine.summary(),
        });
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::runs::{Machine, Run};

    /// One saved run of benchmark `suite/name` in `unit`, its run labels from `label`.
    fn saved(suite: &str, name: &str, unit: &str, label: &str) -> Saved {
        Saved {
            path: "x.json".into(),
            run: Run {
                format: 1,
                date: format!("2026-11-26T08:00:00Z{label}"),
                commit: format!("abc{label}"),
                dirty: false,
                machine: Machine {
                    cpu_model: format!("cpu{label}"),
                    cores: 2,
                    kernel: format!("k{label}"),
                },
                load_start: vec![0.5],
                load_end: vec![],
                quick: true,
                seconds: 1.0,
                suites: vec![suite.into()],
                benchmarks: vec![Benchmark {
                    suite: suite.into(),
                    name: name.into(),
                    unit: unit.into(),
                    lower_is_better: true,
                    rounds: vec![1.0, 2.0, 3.0],
                    median: 2.0,
                    noise: 1.0,
                    guard: false,
                    method: None,
                }],
                skipped: vec![],
            },
        }
    }

    #[test]
    fn run_names_and_labels_come_out_escaped() {
        let runs = [saved("s<&\"'>", "<b>n&\"'</b>", "u<'\">", "<&\"'>")];
        let html = String::from_utf8(report(&runs, "now <&'\">").unwrap()).unwrap();
        let e = "&lt;&amp;&quot;&#39;&gt;";
        for want in [
            "generated now &lt;&amp;&#39;&quot;&gt;. ".to_owned(),
            format!("<h2>s{e}</h2>"),
            format!(
                "<h3>s{e}/&lt;b&gt;n&amp;&quot;&#39;&lt;/b&gt; \
                 <span>(u&lt;&#39;&quot;&gt;, lower is better)</span></h3>"
            ),
            "<title>u&lt;&#39;&quot;&gt; (linear scale)</title>".to_owned(),
            ">u&lt;&#39;&quot;&gt;</text>".to_owned(),
            ">u&lt;&#39;&quot;&gt; (log)</text>".to_owned(),
            format!("<td>2026-11-26T08:00:00Z{e}</td><td>abc{e}</td>"),
            format!("<td>cpu{e}, 2 cores, k{e}</td><td>0.50 → ?</td><td>s{e} (quick)</td>"),
            format!("<title>run #1 2026-11-26T08:00:00Z{e} commit abc{e}\n"),
            "2.000 u&lt;&#39;&quot;&gt; (noise ±100.0%)\nrounds: 1.000, 2.000, 3.000\n".to_owned(),
            format!("\ncpu{e}, 2 cores, k{e}</title></circle>"),
        ] {
            assert!(html.contains(&want), "{want} not in {html}");
        }
        for raw in ["<&\"'>", "<b>", "</b>", "u<'", "now <"] {
            assert!(!html.contains(raw), "{raw} in {html}");
        }
    }

    #[test]
    fn linear_ticks_are_round_and_cover_the_max() {
        assert_eq!(linear_ticks(9.3), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = linear_ticks(1234.0);
        assert_eq!(t.first(), Some(&0.0));
        assert!(*t.last().unwrap() >= 1234.0 && t.len() <= 7, "{t:?}");
        let t = linear_ticks(0.0);
        assert_eq!((t.len(), t[0], t[5]), (6, 0.0, 1.0));
    }

    #[test]
    fn log_axis_ends_on_labelled_values_around_the_data() {
        let (lo, hi, ticks) = log_axis(100.0, 110.0);
        assert!(hi / lo >= 3.99 && lo < 100.0 && hi > 110.0);
        assert!(
            ticks.len() >= 3 && ticks.iter().all(|t| *t >= lo && *t <= hi),
            "{ticks:?}"
        );
        let (_, _, ticks) = log_axis(0.5, 5000.0);
        assert!(ticks.contains(&1.0) && ticks.contains(&1000.0), "{ticks:?}");
    }
}
