//! The cost model behind [`Policy::Adaptive`](crate::Policy::Adaptive): per kind, a moving
//! estimate of a job's run time by log2 of its size hint, and of the hop round trip (without
//! queueing; its lower envelope, see `Estimate::observe_envelope`); the
//! inline-or-offload decision, with a fixed fraction of decisions taking the other path so a
//! change in either is noticed (except for jobs too short for any hop to pay).
//!
//! Pure data, no clock: every measurement is given to it, which is how the tests drive it.

use serde::Serialize;
use std::time::Duration;

/// Buckets 0..=64 by `bits(size)` (0 for size 0, k for `2^(k-1) <= size < 2^k`), then one for
/// jobs without a size hint.
const SIZED_BUCKETS: usize = 65;
const UNSIZED: usize = SIZED_BUCKETS;
/// All buckets, sized and unsized.
pub(crate) const BUCKETS: usize = SIZED_BUCKETS + 1;
/// Weight of a new sample in an estimate (exponential moving average).
const ALPHA: f64 = 1.0 / 8.0;
/// One decision in this many per bucket takes the other path (when the budget allows).
pub(crate) const RESAMPLE_EVERY: u64 = 64;
/// A hop sample counts as at most this many times the estimate (see `Estimate::observe_envelope`).
pub(crate) const HOP_RISE_CAP: f64 = 2.0;
/// Weight of a hop sample below the estimate: a fall is followed within a few samples.
pub(crate) const HOP_FALL: f64 = 1.0 / 4.0;
/// Weight of a hop sample above the estimate: a rise is followed over a few hundred samples.
pub(crate) const HOP_RISE: f64 = 1.0 / 64.0;
/// The hop assumed before one is measured: the BEAM's dirty-CPU round trip on this machine class.
pub(crate) const DEFAULT_HOP_NS: f64 = 2_000.0;
/// No move to another thread and back costs less: two cache-line transfers each way (the pool's
/// best p50 round trip measured 0.57 µs). A job whose `max_overhead` share of its cost is under
/// this can never be worth offloading, so it is not resampled: a 4 KB page's render (~1.5 µs)
/// sent to the pool one time in 64 woke a parked thread for nothing (~1% of that page's req/s).
pub(crate) const MIN_HOP_NS: f64 = 250.0;

/// The hop estimate `v` after sample `x`: the lower-envelope rule of `Estimate::observe_envelope`,
/// shared with the pool-wide estimate.
pub(crate) fn envelope(v: f64, x: f64) -> f64 {
    let x = x.min(v * HOP_RISE_CAP);
    v + (x - v) * if x < v { HOP_FALL } else { HOP_RISE }
}

/// Where one job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Inline,
    Offload,
}

#[derive(Debug, Clone, Copy, Default)]
struct Estimate {
    ns: f64,
    samples: u64,
}

impl Estimate {
    /// A moving average that jumps at once to a sample over `jump_over`: one inline job over the
    /// latency budget is enough to stop running that size inline.
    fn observe(&mut self, x: f64, jump_over: f64) {
        if self.samples == 0 || (x > jump_over && x > self.ns) {
            self.ns = x;
        } else {
            self.ns += (x - self.ns) * ALPHA;
        }
        self.samples += 1;
    }

    /// The hop's lower envelope: a moving average that follows a sample below it quickly
    /// ([`HOP_FALL`]) and one above it slowly ([`HOP_RISE`], a sample over [`HOP_RISE_CAP`]
    /// times the estimate counting as that). A hop sample above the price of the move is a
    /// thread waiting for a core, or for a worker busy with other jobs: on a saturated machine
    /// every resampled hop is such a wait, and an average of them priced a 64 KiB seal's move at
    /// half the job, kept it inline, and lost 10-20% of its throughput to the pool. A lasting
    /// rise still gets through: in the offload regime every job is a sample.
    fn observe_envelope(&mut self, x: f64) {
        self.ns = if self.samples == 0 {
            x
        } else {
            envelope(self.ns, x)
        };
        self.samples += 1;
    }

    fn get(&self) -> Option<f64> {
        (self.samples > 0).then_some(self.ns)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    cost: Estimate,
    /// The hop measured for jobs of this size: it depends on the job (the awaiting side spins
    /// for short ones, and a short job's thread is still spinning for the next).
    hop: Estimate,
    decisions: u64,
}

/// One kind's estimates and decisions.
#[derive(Debug, Clone)]
pub(crate) struct CostModel {
    buckets: [Bucket; SIZED_BUCKETS + 1],
    hop: Estimate,
}

/// The smallest size in a bucket.
fn bucket_floor(b: usize) -> u64 {
    if b == 0 { 0 } else { 1u64 << (b - 1) }
}

pub(crate) fn bucket_of(size: Option<u64>) -> usize {
    match size {
        None => UNSIZED,
        Some(s) => (u64::BITS - s.leading_zeros()) as usize,
    }
}

/// One size bucket's estimate, for a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketEstimate {
    /// The smallest size hint in the bucket (bytes, or whatever unit the caller's hints are in);
    /// `None` for jobs without a hint.
    pub size_from: Option<u64>,
    /// Estimated run time, in ns.
    pub cost_ns: f64,
    /// Estimated hop round trip for jobs of this size, ns (0 before one was measured).
    pub hop_ns: f64,
    /// Run times measured in the bucket.
    pub samples: u64,
    /// Decisions taken in the bucket.
    pub decisions: u64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            buckets: [Bucket::default(); SIZED_BUCKETS + 1],
            hop: Estimate::default(),
        }
    }
}

impl CostModel {
    /// A job's measured run time.
    pub(crate) fn observe_cost(&mut self, size: Option<u64>, run: Duration, budget: Duration) {
        let b = bucket_of(size);
        self.buckets[b]
            .cost
            .observe(run.as_nanos() as f64, budget.as_nanos() as f64);
    }

    /// An offloaded job's measured hop round trip: to the pool plus back (into the lower envelope).
    pub(crate) fn observe_hop(&mut self, size: Option<u64>, hop: Duration) {
        let x = hop.as_nanos() as f64;
        self.hop.observe_envelope(x);
        self.buckets[bucket_of(size)].hop.observe_envelope(x);
    }

    /// The estimated hop round trip for jobs of this size: their bucket's, else this kind's, else
    /// the pool's, else the BEAM's ~2 us.
    pub(crate) fn hop_ns(&self, size: Option<u64>, pool_hop_ns: Option<f64>) -> f64 {
        self.buckets[bucket_of(size)]
            .hop
            .get()
            .or(self.hop.get())
            .or(pool_hop_ns)
            .unwrap_or(DEFAULT_HOP_NS)
    }

    /// The estimated run time of a job of this size: its bucket's, else scaled linearly from the
    /// nearest bucket that has one (by size), else the unsized estimate; `None` before any.
    pub(crate) fn cost_ns(&self, size: Option<u64>) -> Option<f64> {
        let b = bucket_of(size);
        if let Some(c) = self.buckets[b].cost.get() {
            return Some(c);
        }
        if b != UNSIZED {
            let nearest = (1..SIZED_BUCKETS)
                .flat_map(|d| [b.checked_sub(d), Some(b + d)])
                .flatten()
                .filter(|&n| n < SIZED_BUCKETS)
                .find(|&n| self.buckets[n].cost.samples > 0);
            if let Some(n) = nearest {
                let c = self.buckets[n].cost.ns;
                // Scale by the ratio of the buckets' floors (a factor of 2 per bucket).
                let (from, to) = (bucket_floor(n).max(1) as f64, bucket_floor(b).max(1) as f64);
                return Some(c * to / from);
            }
        }
        self.buckets[UNSIZED].cost.get()
    }

    /// The route the estimates prefer, before resampling; `true` if it is forced (unknown cost or
    /// over the budget: never inline).
    pub(crate) fn preferred(
        &self,
        size: Option<u64>,
        max_overhead: f64,
        budget: Duration,
        pool_hop_ns: Option<f64>,
    ) -> (Route, bool) {
        match self.cost_ns(size) {
            None => (Route::Offload, true),
            Some(c) if c > budget.as_nanos() as f64 => (Route::Offload, true),
            Some(c) if self.hop_ns(size, pool_hop_ns) > max_overhead * c => (Route::Inline, false),
            Some(_) => (Route::Offload, false),
        }
    }

    /// Decide where the next job of this size runs, counting the decision: one in
    /// [`RESAMPLE_EVERY`] takes the other path unless the preferred one is forced, or is inline
    /// for a job too short for any hop to pay ([`MIN_HOP_NS`]).
    #[cfg(test)]
    pub(crate) fn decide(
        &mut self,
        size: Option<u64>,
        max_overhead: f64,
        budget: Duration,
        pool_hop_ns: Option<f64>,
    ) -> Route {
        self.decide_preferring(size, max_overhead, budget, pool_hop_ns)
            .0
    }

    /// [`CostModel::decide`], the route the estimates prefer (which a resample overrides), and
    /// whether that route is forced (unknown cost or over the budget: never inline).
    pub(crate) fn decide_preferring(
        &mut self,
        size: Option<u64>,
        max_overhead: f64,
        budget: Duration,
        pool_hop_ns: Option<f64>,
    ) -> (Route, Route, bool) {
        let (route, forced) = self.preferred(size, max_overhead, budget, pool_hop_ns);
        let bucket = &mut self.buckets[bucket_of(size)];
        bucket.decisions += 1;
        let decided = if forced || !bucket.decisions.is_multiple_of(RESAMPLE_EVERY) {
            route
        } else if route == Route::Inline {
            // `preferred` said inline, so the cost is known.
            let cost = self.cost_ns(size).unwrap_or(f64::INFINITY);
            if max_overhead * cost < MIN_HOP_NS {
                Route::Inline
            } else {
                Route::Offload
            }
        } else {
            Route::Inline
        };
        (decided, route, forced)
    }

    /// The smallest size from which every larger size is offloaded by the current estimates
    /// (the switch point), `None` if no sized job was measured yet. `Some(0)`: everything is
    /// offloaded; `Some(u64::MAX)`: nothing measured is.
    pub(crate) fn switch_point(
        &self,
        max_overhead: f64,
        budget: Duration,
        pool_hop_ns: Option<f64>,
    ) -> Option<u64> {
        let last = (0..SIZED_BUCKETS)
            .rev()
            .find(|&b| self.buckets[b].cost.samples > 0)?;
        let mut switch = u64::MAX;
        for b in (0..=last).rev() {
            let size = Some(bucket_floor(b));
            match self.preferred(size, max_overhead, budget, pool_hop_ns).0 {
                Route::Offload => switch = bucket_floor(b),
                Route::Inline => break,
            }
        }
        Some(switch)
    }

    /// The buckets with measurements.
    pub(crate) fn estimates(&self) -> Vec<BucketEstimate> {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, b)| b.cost.samples > 0 || b.decisions > 0)
            .map(|(i, b)| BucketEstimate {
                size_from: (i != UNSIZED).then(|| bucket_floor(i)),
                cost_ns: b.cost.ns,
                hop_ns: b.hop.ns,
                samples: b.cost.samples,
                decisions: b.decisions,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Duration = Duration::from_millis(1);
    const US: Duration = Duration::from_micros(1);

    fn decide(m: &mut CostModel, size: Option<u64>) -> Route {
        m.decide(size, 0.1, BUDGET, None)
    }

    /// Counts of (inline, offload) over `n` decisions.
    fn routes(m: &mut CostModel, size: Option<u64>, n: u64) -> (u64, u64) {
        let inline = (0..n).filter(|_| decide(m, size) == Route::Inline).count() as u64;
        (inline, n - inline)
    }

    #[test]
    fn unknown_cost_is_offloaded_to_measure_it() {
        let mut m = CostModel::default();
        assert_eq!(routes(&mut m, Some(100), 200), (0, 200));
        assert_eq!(routes(&mut m, None, 200), (0, 200));
    }

    #[test]
    fn switches_when_a_kinds_cost_changes() {
        let mut m = CostModel::default();
        for _ in 0..20 {
            m.observe_hop(None, 2 * US);
        }
        // 5 us jobs: a 2 us hop is 40% of them, run inline (bar the resamples).
        for _ in 0..50 {
            m.observe_cost(None, 5 * US, BUDGET);
        }
        assert_eq!(routes(&mut m, None, 128), (126, 2));
        // The same kind now costs 100 us: the hop is 2%, offload.
        for _ in 0..50 {
            m.observe_cost(None, 100 * US, BUDGET);
        }
        assert_eq!(routes(&mut m, None, 128), (2, 126));
        // And cheap again: back inline.
        for _ in 0..50 {
            m.observe_cost(None, 3 * US, BUDGET);
        }
        assert_eq!(routes(&mut m, None, 128), (126, 2));
        // The hop got slower (a loaded pool): 10 us jobs stay inline at a 5 us hop...
        for _ in 0..50 {
            m.observe_cost(None, 10 * US, BUDGET);
            m.observe_hop(None, 5 * US);
        }
        assert_eq!(decide(&mut m, None), Route::Inline);
        // ...and move when the hop is cheap enough again.
        for _ in 0..100 {
            m.observe_hop(None, 500 * Duration::from_nanos(1));
        }
        assert_eq!(routes(&mut m, None, 64).1, 63);
    }

    #[test]
    fn never_inline_over_the_latency_budget() {
        let mut m = CostModel::default();
        // A huge hop would say inline, but the job is 2 ms: always offloaded, never resampled.
        for _ in 0..10 {
            m.observe_hop(None, Duration::from_millis(50));
            m.observe_cost(None, Duration::from_millis(2), BUDGET);
        }
        assert_eq!(routes(&mut m, None, 1000), (0, 1000));
        // One inline sample over the budget is enough to stop inlining.
        let mut m = CostModel::default();
        for _ in 0..50 {
            m.observe_cost(None, 3 * US, BUDGET);
        }
        assert_eq!(decide(&mut m, None), Route::Inline);
        m.observe_cost(None, Duration::from_millis(30), BUDGET);
        assert_eq!(routes(&mut m, None, 100), (0, 100));
    }

    #[test]
    fn by_size_with_a_switch_point() {
        let mut m = CostModel::default();
        for _ in 0..10 {
            m.observe_hop(None, 2 * US);
        }
        // Seed 001's secretbox: ~4 ns per byte.
        for size in [64u64, 1024, 4096, 8192, 65536, 1 << 20] {
            for _ in 0..10 {
                m.observe_cost(Some(size), Duration::from_nanos(4 * size), BUDGET);
            }
        }
        assert_eq!(decide(&mut m, Some(1024)), Route::Inline);
        assert_eq!(decide(&mut m, Some(4096)), Route::Inline);
        assert_eq!(decide(&mut m, Some(8192)), Route::Offload);
        assert_eq!(decide(&mut m, Some(1 << 20)), Route::Offload);
        // 2 us / 10% = 20 us = 5,000 bytes: bucket [8192, 16384) is the first offloaded.
        assert_eq!(m.switch_point(0.1, BUDGET, None), Some(8192));
        // An unmeasured size is scaled from its neighbour: 32 KiB is ~128 us, offloaded.
        assert_eq!(m.cost_ns(Some(32768)), Some(4.0 * 65536.0 / 2.0));
        assert_eq!(decide(&mut m, Some(40000)), Route::Offload);
        assert_eq!(decide(&mut m, Some(100)), Route::Inline);
        // A looser bound moves the switch down.
        assert_eq!(m.switch_point(0.5, BUDGET, None), Some(1024));
    }

    #[test]
    fn one_slow_hop_barely_moves_the_estimate_and_a_lasting_rise_gets_through() {
        let mut m = CostModel::default();
        for _ in 0..20 {
            m.observe_hop(None, 2 * US);
        }
        // A thread descheduled for 28 ms on a busy machine: the estimate rises by HOP_RISE at most.
        m.observe_hop(None, Duration::from_millis(28));
        let after = m.hop_ns(None, None);
        assert!(after <= 2_000.0 * (1.0 + HOP_RISE) + 1.0, "{after}");
        // A 25 us job stays offloaded: a 2.03 us hop is 8% of it.
        for _ in 0..10 {
            m.observe_cost(None, 25 * US, BUDGET);
        }
        assert_eq!(decide(&mut m, None), Route::Offload);
        // Hops that really became 10x slower are followed within a few hundred samples (in the
        // offload regime every job is one).
        for _ in 0..300 {
            m.observe_hop(None, 20 * US);
        }
        let risen = m.hop_ns(None, None);
        assert!(risen > 18_000.0, "{risen}");
        assert_eq!(decide(&mut m, None), Route::Inline);
    }

    /// On a saturated machine most resampled hops wait for a core or for a worker busy with an
    /// inline job; the estimate is the price of the move, which the rare unhindered hop shows.
    /// Averaging them priced a 160 us job's hop at ~70 us and kept it inline, where the
    /// measured throughput was 10-20% below the pool's (bench/offload.sh, 64 KiB seals).
    #[test]
    fn the_hop_is_its_lower_envelope_not_the_waits() {
        let mut m = CostModel::default();
        let size = Some(65_536);
        for _ in 0..20 {
            m.observe_cost(size, 160 * US, BUDGET);
        }
        for i in 0..400 {
            let hop = if i % 8 == 0 { 4 * US } else { 80 * US };
            m.observe_hop(size, hop);
        }
        let hop = m.hop_ns(size, None);
        assert!(hop < 10_000.0, "{hop}");
        assert_eq!(decide(&mut m, size), Route::Offload);
        // A job of 13 us stays inline at that hop: the move would be over 10% of it.
        let small = Some(8192);
        for _ in 0..20 {
            m.observe_cost(small, 13 * US, BUDGET);
        }
        assert_eq!(decide(&mut m, small), Route::Inline);
    }

    /// A 4 KB page's render: ~1.5 us, so even a hop of [`MIN_HOP_NS`] is over 10% of it. It is
    /// not sent to the pool to measure the hop again; a 5 us job still is, one time in 64.
    #[test]
    fn a_job_too_short_for_any_hop_is_not_resampled() {
        let mut m = CostModel::default();
        for _ in 0..20 {
            m.observe_hop(None, 2 * US);
        }
        let (short, long) = (Some(10), Some(100_000));
        for _ in 0..20 {
            m.observe_cost(short, Duration::from_nanos(1_500), BUDGET);
            m.observe_cost(long, 5 * US, BUDGET);
        }
        assert_eq!(routes(&mut m, short, 640), (640, 0));
        assert_eq!(routes(&mut m, long, 640), (630, 10));
        // If the short job grows, the resamples come back.
        for _ in 0..50 {
            m.observe_cost(short, 4 * US, BUDGET);
        }
        assert_eq!(routes(&mut m, short, 640).1, 10);
    }

    #[test]
    fn switch_point_edges() {
        let mut m = CostModel::default();
        assert_eq!(m.switch_point(0.1, BUDGET, None), None);
        m.observe_cost(Some(10), Duration::from_secs(1), BUDGET);
        assert_eq!(m.switch_point(0.1, BUDGET, None), Some(0));
        let mut m = CostModel::default();
        m.observe_cost(Some(10), Duration::from_nanos(10), BUDGET);
        assert_eq!(m.switch_point(0.1, BUDGET, None), Some(u64::MAX));
    }
}
