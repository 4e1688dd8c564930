//! Per-kind measurements: HDR histograms of the two hops and the run time, and the plain-data
//! snapshots a stats page serializes.

use crate::adaptive::BucketEstimate;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Largest value a histogram keeps apart (ns): an hour. Larger values are counted as this.
const MAX_NS: u64 = 3_600_000_000_000;
/// Significant figures: 1% resolution, ~30 KiB per histogram.
const SIGFIG: u8 = 2;

/// A new empty histogram of nanoseconds as the pool keeps them.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("constant bounds are valid")
}

/// One kind's histograms, in nanoseconds.
#[derive(Debug, Clone)]
pub struct KindHistograms {
    /// The hop to the pool: from submitting the job to its start on a pool thread.
    pub to_pool: Histogram<u64>,
    /// The part of the hop to the pool a job spent queued while every pool thread was busy with
    /// other jobs (0 when a thread was free). The adaptive model's hop leaves it out.
    pub waited: Histogram<u64>,
    /// The hop back: from the job's end on the pool thread to the awaiting future resuming.
    pub back: Histogram<u64>,
    /// The job's run time, inline or on the pool.
    pub run: Histogram<u64>,
}

impl Default for KindHistograms {
    fn default() -> Self {
        KindHistograms {
            to_pool: new_histogram(),
            waited: new_histogram(),
            back: new_histogram(),
            run: new_histogram(),
        }
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl KindHistograms {
    pub(crate) fn record_run(&mut self, run: Duration) {
        self.run.saturating_record(ns(run));
    }

    pub(crate) fn record_hops(&mut self, to_pool: Duration, waited: Duration, back: Duration) {
        self.to_pool.saturating_record(ns(to_pool));
        self.waited.saturating_record(ns(waited));
        self.back.saturating_record(ns(back));
    }

    pub(crate) fn reset(&mut self) {
        self.to_pool.reset();
        self.waited.reset();
        self.back.reset();
        self.run.reset();
    }
}

/// A histogram as plain data: its count, a few percentiles, and every recorded value with its
/// count (enough to print it again with [`render_counts`](crate::render_counts)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistogramSummary {
    /// Samples recorded.
    pub count: u64,
    /// Smallest sample, ns (0 if none).
    pub min: u64,
    /// Largest sample, ns (0 if none).
    pub max: u64,
    /// Mean, ns.
    pub mean: f64,
    /// Median, ns.
    pub p50: u64,
    /// 90th percentile, ns.
    pub p90: u64,
    /// 99th percentile, ns.
    pub p99: u64,
    /// 99.9th percentile, ns.
    pub p999: u64,
    /// `(value, count)` for each distinct recorded value (values at 1% resolution), ascending.
    pub recorded: Vec<(u64, u64)>,
}

impl HistogramSummary {
    /// The summary of a histogram.
    pub fn of(h: &Histogram<u64>) -> HistogramSummary {
        let empty = h.is_empty();
        HistogramSummary {
            count: h.len(),
            min: if empty { 0 } else { h.min() },
            max: if empty { 0 } else { h.max() },
            mean: h.mean(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            recorded: h
                .iter_recorded()
                .map(|v| {
                    (
                        h.lowest_equivalent(v.value_iterated_to()),
                        v.count_at_value(),
                    )
                })
                .collect(),
        }
    }
}

/// One kind's counters, histograms and estimates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindSnapshot {
    /// The name the kind was registered with.
    pub name: String,
    /// Its policy, in the form [`Policy`](crate::Policy)'s `FromStr` reads.
    pub policy: String,
    /// Jobs run on the caller's thread.
    pub inline: u64,
    /// Jobs run on a pool thread (and their result delivered).
    pub offloaded: u64,
    /// Jobs that panicked (either way).
    pub panicked: u64,
    /// The hop to the pool, ns.
    pub to_pool: HistogramSummary,
    /// The part of the hop to the pool spent waiting for a free pool thread, ns.
    pub waited: HistogramSummary,
    /// The hop back, ns.
    pub back: HistogramSummary,
    /// Run time, ns.
    pub run: HistogramSummary,
    /// The hop round trip the adaptive policy assumes for this kind's jobs without a size hint
    /// (its buckets' own are in `estimates`), ns.
    pub hop_estimate_ns: f64,
    /// The size hint from which this kind's jobs go to the pool under its adaptive policy
    /// (see [`Kind::switch_point`](crate::Kind::switch_point)).
    pub switch_point: Option<u64>,
    /// The cost estimates by size bucket.
    pub estimates: Vec<BucketEstimate>,
}

/// The pool's state and every kind's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolSnapshot {
    /// Pool threads.
    pub threads: usize,
    /// Jobs the queue holds at most.
    pub queue_capacity: usize,
    /// Jobs queued, not started.
    pub queued: usize,
    /// Pool threads running a job.
    pub busy: usize,
    /// Pool threads parked (idle, using no CPU).
    pub parked: usize,
    /// Queued jobs skipped because their caller had dropped its future.
    pub abandoned: u64,
    /// Whether [`Pool::shutdown`](crate::Pool::shutdown) was called.
    pub shut_down: bool,
    /// The pool's default policy.
    pub policy: String,
    /// The pool threads' scheduling class ([`Priority`](crate::Priority): `normal`, `idle`).
    pub priority: String,
    /// The pool-wide hop round-trip estimate, ns (`None` before the first offloaded job).
    pub hop_estimate_ns: Option<f64>,
    /// Each registered kind, by name.
    pub kinds: Vec<KindSnapshot>,
}
