//! `galleon bench graph`: every saved run in one self-contained HTML file, like Benchfella's
//! `bench.graph`: one chart per benchmark (x: the runs, oldest first; y: its median, a box for
//! the middle half of its rounds, what the noise figure measures, and a whisker from the lowest
//! to the highest round), drawn twice, on a linear axis from zero and on a log axis. Inline SVG
//! and CSS only: nothing is fetched, no script runs; each point's `<title>` names its run (date,
//! commit, machine) for the browser's tooltip.

use crate::html::escape;
use std::collections::BTreeMap;
use std::fmt::Write as _;

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

/// The whole report: a header with the runs, then per suite a chart pair per benchmark.
pub(crate) fn report(runs: &[Saved], generated: &str) -> String {
    let mut series: BTreeMap<(String, String, String), Series<'_>> = BTreeMap::new();
    for (i, s) in runs.iter().enumerate() {
        for b in &s.run.benchmarks {
            series
                .entry((b.suite.clone(), b.name.clone(), b.unit.clone()))
                .or_default()
                .push((i, b));
        }
    }
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>galleon bench: saved runs</title>\n<style>\n",
    );
    h.push_str(CSS);
    h.push_str("</style></head><body>\n<h1>galleon bench: saved runs</h1>\n");
    let _ = writeln!(
        h,
        "<p class=\"note\">{} runs, {} benchmarks; generated {}. Each chart: the median of each \
         run (dot), the middle half of its rounds (box: the noise figure), the lowest to the \
         highest round (whisker); left linear from zero, right logarithmic. Hover a dot for its \
         run.</p>",
        runs.len(),
        series.len(),
        escape(generated)
    );
    h.push_str(&runs_table(runs));
    let mut suite = "";
    for ((s, name, unit), points) in &series {
        if s != suite {
            if !suite.is_empty() {
                h.push_str("</section>\n");
            }
            let _ = writeln!(h, "<section><h2>{}</h2>", escape(s));
            suite = s;
        }
        let lower = points.first().is_some_and(|(_, b)| b.lower_is_better);
        let _ = writeln!(
            h,
            "<div class=\"bench\"><h3>{}/{} <span>({}, {} is better)</span></h3><div class=\"pair\">",
            escape(s),
            escape(name),
            escape(unit),
            if lower { "lower" } else { "higher" }
        );
        for scale in [Scale::Linear, Scale::Log] {
            h.push_str(&chart(runs, points, unit, scale));
        }
        h.push_str("</div></div>\n");
    }
    if !suite.is_empty() {
        h.push_str("</section>\n");
    }
    h.push_str("</body></html>\n");
    h
}

/// The table of runs atop the report.
fn runs_table(runs: &[Saved]) -> String {
    let mut t = String::from(
        "<table class=\"runs\"><tr><th>#</th><th>date (UTC)</th><th>commit</th>\
         <th>machine</th><th>load (start → end)</th><th>suites</th></tr>\n",
    );
    for (i, s) in runs.iter().enumerate() {
        let r = &s.run;
        let load = |l: &[f64]| l.first().map_or("?".to_owned(), |x| format!("{x:.2}"));
        let _ = writeln!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td><td>{}{}</td></tr>",
            i + 1,
            escape(&r.date),
            escape(&r.short_commit()),
            escape(&r.machine.summary()),
            load(&r.load_start),
            load(&r.load_end),
            escape(&r.suites.join(", ")),
            if r.quick { " (quick)" } else { "" }
        );
    }
    t.push_str("</table>\n");
    t
}

/// One chart of one benchmark over all runs.
fn chart(runs: &[Saved], points: &Series<'_>, unit: &str, scale: Scale) -> String {
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let lows = points
        .iter()
        .map(|(_, b)| b.rounds.iter().copied().fold(b.median, f64::min));
    let highs = points
        .iter()
        .map(|(_, b)| b.rounds.iter().copied().fold(b.median, f64::max));
    let max = highs.fold(f64::MIN, f64::max);
    let min_pos = lows.filter(|v| *v > 0.0).fold(f64::MAX, f64::min);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"chart\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\"><title>{} ({})</title>",
        escape(unit),
        if scale == Scale::Log {
            "log scale"
        } else {
            "linear scale"
        }
    );
    // The y mapping and its ticks.
    let (axis, ticks) = match scale {
        Scale::Linear => {
            let ticks = linear_ticks(max);
            let top = ticks.last().copied().unwrap_or(1.0);
            (YAxis::Linear { top, ph }, ticks)
        }
        Scale::Log => {
            if min_pos == f64::MAX {
                let _ = write!(
                    s,
                    "<text x=\"{}\" y=\"{}\" class=\"empty\">no positive values: no log scale</text></svg>",
                    WIDTH / 2.0,
                    HEIGHT / 2.0
                );
                return s;
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
    for t in &ticks {
        if let Some(y) = y_of(*t) {
            let _ = write!(
                s,
                "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
                 <text class=\"yl\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                tick_label(*t)
            );
        }
    }
    // Axes and their titles.
    let _ = write!(
        s,
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{:.1}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
         <text class=\"at\" transform=\"translate(14 {:.1}) rotate(-90)\">{}{}</text>\
         <text class=\"at\" x=\"{:.1}\" y=\"{:.1}\">run (oldest → newest)</text>",
        TOP + ph,
        LEFT + pw,
        TOP + ph,
        TOP + ph,
        TOP + ph / 2.0,
        escape(unit),
        if scale == Scale::Log { " (log)" } else { "" },
        LEFT + pw / 2.0,
        HEIGHT - 6.0
    );
    // X labels: at most MAX_X_LABELS runs, evenly picked, always the last.
    let every = n.div_ceil(MAX_X_LABELS).max(1);
    for (i, r) in runs.iter().enumerate() {
        if i % every == 0 || i == n - 1 {
            let date = r
                .run
                .date
                .get(5..16)
                .unwrap_or(&r.run.date)
                .replace('T', " ");
            let _ = write!(
                s,
                "<text class=\"xl\" x=\"{x:.1}\" y=\"{:.1}\">#{}</text>\
                 <text class=\"xl\" x=\"{x:.1}\" y=\"{:.1}\">{}</text>",
                TOP + ph + 13.0,
                i + 1,
                TOP + ph + 25.0,
                escape(&date),
                x = x_of(i),
            );
        }
    }
    // The series: a line through the medians, then whisker and dot per run.
    let line: Vec<String> = points
        .iter()
        .filter_map(|(i, b)| y_of(b.median).map(|y| format!("{:.1},{y:.1}", x_of(*i))))
        .collect();
    if line.len() > 1 {
        let _ = write!(
            s,
            "<polyline class=\"series\" points=\"{}\"/>",
            line.join(" ")
        );
    }
    for (i, b) in points {
        let Some(y) = y_of(b.median) else { continue };
        let x = x_of(*i);
        let lo = b.rounds.iter().copied().fold(b.median, f64::min);
        let hi = b.rounds.iter().copied().fold(b.median, f64::max);
        if let (Some(y0), Some(y1)) = (y_of(lo), y_of(hi)) {
            let _ = write!(
                s,
                "<line class=\"whisker\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y0:.1}\" y2=\"{y1:.1}\"/>"
            );
        }
        // The box: the spread the noise figure measures (the middle half of the rounds).
        let mut sorted = b.rounds.clone();
        sorted.sort_by(f64::total_cmp);
        if !sorted.is_empty() {
            let (q1, q3) = spread(&sorted);
            if let (Some(y0), Some(y1)) = (y_of(q1), y_of(q3)) {
                let _ = write!(
                    s,
                    "<rect class=\"box\" x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"{:.1}\"/>",
                    x - 4.0,
                    y1.min(y0),
                    (y0 - y1).abs().max(1.0)
                );
            }
        }
        let r = &runs[*i].run;
        let rounds: Vec<String> = b.rounds.iter().map(|v| fmt_value(*v)).collect();
        let _ = write!(
            s,
            "<circle class=\"dot\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\"><title>run #{} {} commit {}\n\
             {} {} (noise ±{:.1}%)\nrounds: {}\n{}</title></circle>",
            i + 1,
            escape(&r.date),
            escape(&r.short_commit()),
            fmt_value(b.median),
            escape(unit),
            b.noise * 100.0,
            escape(&rounds.join(", ")),
            escape(&r.machine.summary())
        );
    }
    s.push_str("</svg>");
    s
}

/// The report's style sheet, inline.
const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 6px}h2{font-size:17px;margin:18px 0 4px;border-bottom:1px solid #ccc}
h3{font-size:14px;margin:10px 0 2px}h3 span{font-weight:normal;color:#666}
.note{color:#555;margin:4px 0 10px}
table.runs{border-collapse:collapse;font-size:12px;margin-bottom:8px}
table.runs td,table.runs th{border:1px solid #ddd;padding:2px 6px;text-align:left}
.pair{display:flex;flex-wrap:wrap;gap:8px}
svg.chart{background:#fafafa;border:1px solid #e4e4e4}
.grid{stroke:#e2e2e2;stroke-width:1}.axis{stroke:#444;stroke-width:1}
.yl{font-size:11px;text-anchor:end;fill:#444}.xl{font-size:10px;text-anchor:middle;fill:#444}
.at{font-size:11px;text-anchor:middle;fill:#222}
.series{fill:none;stroke:#3b6fb6;stroke-width:1.5}
.whisker{stroke:#d2691e;stroke-width:1}.box{fill:#f4c9a8;stroke:#d2691e;stroke-width:1}.dot{fill:#3b6fb6;stroke:#fff;stroke-width:1}
.empty{font-size:12px;text-anchor:middle;fill:#888}
";

#[cfg(test)]
mod tests {
    use super::*;

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
