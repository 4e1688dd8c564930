//! Histograms printed as seed 001 printed them: DTrace's `lquantize` linear buckets.
//!
//! ```text
//!   value  ------------- Distribution ------------- count
//!    1000 |                                         0
//!    1250 |@@@@@@                                   2978
//!    1500 |@@@@@@@@@@@                              5684
//! ```
//!
//! As DTrace prints them: a row per bucket of `step` from `base` up to `limit`, plus `< base` and
//! `>= limit` rows; only the rows from one before the first non-empty bucket to one after the
//! last; a bar of 40 `@` for all samples, each row's bar its share rounded to the nearest `@`.

use hdrhistogram::Histogram;

const BAR: usize = 40;

/// Linear buckets: `[base, base + step)`, ... up to `limit`, as DTrace's `lquantize(x, base,
/// limit, step)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearBuckets {
    /// The lowest bucket's lower bound; smaller values are counted in a `< base` row.
    pub base: u64,
    /// Values from here up are counted in a `>= limit` row.
    pub limit: u64,
    /// The width of a bucket (non-zero).
    pub step: u64,
}

impl LinearBuckets {
    /// Buckets that show the bulk of a histogram in about 20 rows: from its 0.5th to its 99.5th
    /// percentile, the step a round number (1, 2, 2.5 or 5 times a power of ten).
    pub fn fit(hist: &Histogram<u64>) -> LinearBuckets {
        Self::fit_between(hist, 0.005, 0.995)
    }

    /// Buckets that show a histogram from its `lo` to its `hi` quantile in about 20 rows (the
    /// rest in the `<` and `>=` rows): for a distribution with a long tail, a view of its bulk.
    pub fn fit_between(hist: &Histogram<u64>, lo: f64, hi: f64) -> LinearBuckets {
        if hist.is_empty() {
            return LinearBuckets {
                base: 0,
                limit: 1000,
                step: 50,
            };
        }
        // The lowest equivalent: the value a bucket row counts a sample by (what `render`
        // passes), so a histogram of one value lands in a bucket, not below the first.
        let lo = hist.lowest_equivalent(hist.value_at_quantile(lo));
        let hi = hist.value_at_quantile(hi).max(lo + 1);
        let step = round_step((hi - lo) / 20);
        let base = lo / step * step;
        let limit = (hi / step + 1) * step;
        LinearBuckets { base, limit, step }
    }

    /// The text of `hist` in these buckets: the header line and the rows, each ending in `\n`.
    pub fn render(&self, hist: &Histogram<u64>) -> String {
        render_counts(
            hist.iter_recorded().map(|v| {
                (
                    hist.lowest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                )
            }),
            *self,
        )
    }
}

/// The next round step (1, 2, 2.5, 5 × 10^k) at or above `x` (at least 1).
fn round_step(x: u64) -> u64 {
    let mut p = 1u64;
    loop {
        for m in [10, 20, 25, 50] {
            let s = p.saturating_mul(m) / 10;
            if s >= x.max(1) {
                return s;
            }
        }
        if p > u64::MAX / 100 {
            return u64::MAX;
        }
        p *= 10;
    }
}

/// Render `(value, count)` samples (any order) in `buckets`; the form [`LinearBuckets::render`]
/// gives for a histogram, usable on a [`HistogramSummary`](crate::HistogramSummary)'s
/// `recorded` pairs.
pub fn render_counts(
    samples: impl IntoIterator<Item = (u64, u64)>,
    buckets: LinearBuckets,
) -> String {
    let LinearBuckets { base, limit, step } = buckets;
    let step = step.max(1);
    let levels = (limit.saturating_sub(base) / step) as usize;
    // bins[0]: < base; bins[1..=levels]: linear; bins[levels + 1]: >= base + levels * step.
    let top = base + levels as u64 * step;
    let mut bins = vec![0u64; levels + 2];
    for (value, count) in samples {
        let i = if value < base {
            0
        } else if value >= top {
            levels + 1
        } else {
            1 + ((value - base) / step) as usize
        };
        bins[i] += count;
    }
    let total: u64 = bins.iter().sum();
    let label = |i: usize| -> String {
        if i == 0 {
            format!("< {base}")
        } else if i == levels + 1 {
            format!(">= {top}")
        } else {
            (base + (i as u64 - 1) * step).to_string()
        }
    };
    let (first, last) = match (
        bins.iter().position(|&c| c > 0),
        bins.iter().rposition(|&c| c > 0),
    ) {
        (Some(f), Some(l)) => (f.saturating_sub(1), (l + 1).min(levels + 1)),
        _ => (0, 0),
    };
    let width = (first..=last)
        .map(|i| label(i).len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = format!(
        "{:>width$} {:>41} count\n",
        "value", "------------- Distribution -------------"
    );
    for (i, &count) in bins.iter().enumerate().take(last + 1).skip(first) {
        let depth = if total == 0 {
            0
        } else {
            ((count as f64 * BAR as f64 / total as f64) + 0.5) as usize
        };
        out.push_str(&format!(
            "{:>width$} |{}{} {count}\n",
            label(i),
            "@".repeat(depth),
            " ".repeat(BAR - depth),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines, each ending in a newline.
    fn lines(lines: &[&str]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    fn hist(samples: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for &(v, n) in samples {
            h.record_n(v, n).unwrap();
        }
        h
    }

    #[test]
    fn seed_001_first_histogram_exactly() {
        // The seed's first "Scheduling overhead" histogram, its counts recorded at each bucket's
        // middle, printed in lquantize(x, 0, 10000, 250).
        let h = hist(&[
            (1300, 2978),
            (1600, 5684),
            (1800, 10171),
            (2100, 1139),
            (2300, 11),
            (2600, 2),
        ]);
        let text = LinearBuckets {
            base: 0,
            limit: 10_000,
            step: 250,
        }
        .render(&h);
        let expected = lines(&[
            "  value  ------------- Distribution ------------- count",
            "   1000 |                                         0",
            "   1250 |@@@@@@                                   2978",
            "   1500 |@@@@@@@@@@@                              5684",
            "   1750 |@@@@@@@@@@@@@@@@@@@@                     10171",
            "   2000 |@@                                       1139",
            "   2250 |                                         11",
            "   2500 |                                         2",
            "   2750 |                                         0",
        ]);
        assert_eq!(text, expected);
    }

    #[test]
    fn overflow_and_underflow_rows() {
        let h = hist(&[(7100, 54), (7500, 11214), (12_000, 2326), (5, 1)]);
        let text = render_counts(
            h.iter_recorded().map(|v| {
                (
                    h.lowest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                )
            }),
            LinearBuckets {
                base: 7000,
                limit: 8000,
                step: 250,
            },
        );
        let expected = lines(&[
            "  value  ------------- Distribution ------------- count",
            " < 7000 |                                         1",
            "   7000 |                                         54",
            "   7250 |                                         0",
            "   7500 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@        11214",
            "   7750 |                                         0",
            ">= 8000 |@@@@@@@                                  2326",
        ]);
        assert_eq!(text, expected);
    }

    #[test]
    fn empty_histogram_is_one_zero_row() {
        let text = LinearBuckets {
            base: 0,
            limit: 100,
            step: 10,
        }
        .render(&hist(&[]));
        assert_eq!(
            text,
            lines(&[
                "  value  ------------- Distribution ------------- count",
                "    < 0 |                                         0",
            ])
        );
    }

    #[test]
    fn fit_picks_round_steps() {
        assert_eq!(round_step(0), 1);
        assert_eq!(round_step(3), 5);
        assert_eq!(round_step(21), 25);
        assert_eq!(round_step(240), 250);
        assert_eq!(round_step(251), 500);
        let b = LinearBuckets::fit(&hist(&[(1000, 10), (2000, 10), (3000, 1)]));
        assert_eq!(b.step, 100);
        assert!(b.base <= 1000 && b.limit > 3000);
    }
}
