//! How the live page writes its figures: sizes, durations, bucket labels, plain text that the
//! templates then escape.

use galleon_offload::HistogramSummary;

use crate::snapshot::Bucket;

/// Bytes as `123 B`, `45.6 KiB` or `7.8 MiB`.
pub(crate) fn mib(bytes: u64) -> String {
    if bytes < 10 * 1024 {
        format!("{bytes} B")
    } else if bytes < 10 * 1024 * 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// Microseconds as `80 µs`, or `12.5 ms` from 10 ms.
pub(crate) fn us(v: u64) -> String {
    if v >= 10_000 {
        format!("{:.1} ms", v as f64 / 1000.0)
    } else {
        format!("{v} µs")
    }
}

/// A latency bound in seconds as a bar label: `≤50µs`, `≤2.5ms`, `≤10s`.
pub(crate) fn seconds_label(s: f64) -> String {
    if s < 0.001 {
        format!("≤{:.0}µs", s * 1e6)
    } else if s < 1.0 {
        format!("≤{}ms", s * 1e3)
    } else {
        format!("≤{s}s")
    }
}

/// A pool histogram's median and 99th percentile, `1.5 / 3.0 µs`, or `-` when empty.
pub(crate) fn pair(h: &HistogramSummary) -> String {
    if h.count == 0 {
        return "-".to_owned();
    }
    format!("{:.1} / {:.1} µs", h.p50 as f64 / 1e3, h.p99 as f64 / 1e3)
}

/// A figure's value: whole numbers without decimals, others with three.
pub(crate) fn figure_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

/// Buckets with their labels; the last (unbounded) one is "more".
pub(crate) fn labelled(buckets: &[Bucket], labels: &[String]) -> Vec<(String, u64)> {
    buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            (
                labels.get(i).cloned().unwrap_or_else(|| "more".to_owned()),
                b.count,
            )
        })
        .collect()
}

/// A pool hop histogram (ns, every value) in power-of-two microsecond buckets, 1 µs to 1 s,
/// the empty buckets at both ends left out so the bars have room.
pub(crate) fn hop_buckets(h: &HistogramSummary) -> Vec<(String, u64)> {
    let bounds: Vec<u64> = (0..21).map(|i| 1000u64 << i).collect();
    let mut counts = vec![0u64; bounds.len() + 1];
    for &(ns, n) in &h.recorded {
        let i = bounds.iter().position(|&b| ns <= b).unwrap_or(bounds.len());
        counts[i] += n;
    }
    let first = counts.iter().position(|&c| c > 0).unwrap_or(0);
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
    (first..=last)
        .map(|i| {
            let label = bounds
                .get(i)
                .map_or("more".to_owned(), |b| us(b / 1000).replace(' ', ""));
            (format!("≤{label}"), counts[i])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_as_people_write_them() {
        assert_eq!(mib(512), "512 B");
        assert_eq!(mib(20 * 1024), "20.0 KiB");
        assert_eq!(mib(30 * 1024 * 1024), "30.0 MiB");
        assert_eq!(us(80), "80 µs");
        assert_eq!(us(12_500), "12.5 ms");
        assert_eq!(seconds_label(0.000_05), "≤50µs");
        assert_eq!(seconds_label(0.0025), "≤2.5ms");
        assert_eq!(seconds_label(10.0), "≤10s");
        assert_eq!(figure_value(3.0), "3");
        assert_eq!(figure_value(0.25), "0.250");
    }

    #[test]
    fn hop_buckets_trim_the_empty_ends() {
        let h = HistogramSummary {
            count: 3,
            min: 1500,
            max: 3000,
            mean: 2000.0,
            p50: 1500,
            p90: 3000,
            p99: 3000,
            p999: 3000,
            recorded: vec![(1500, 2), (3000, 1)],
        };
        assert_eq!(
            hop_buckets(&h),
            vec![("≤2µs".to_owned(), 2), ("≤4µs".to_owned(), 1)]
        );
        assert_eq!(pair(&h), "1.5 / 3.0 µs");
    }
}
