//! [`Kind`]: a named class of jobs, with its policy, cost model, counters and histograms.
//!
//! `Kind::switch_point` is the size where the cost model switches; where the estimates prefer
//! inline (`fast_inline`), jobs run untimed and unlocked but for one in 16 (`SAMPLE_EVERY`) per
//! thread.

use crate::adaptive::{BUCKETS, CostModel, Route, bucket_of, envelope};
use crate::policy::Policy;
use crate::stats::{HistogramSummary, KindHistograms, KindSnapshot};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The pool-wide hop round-trip estimate (a moving average in ns, as `f64` bits; 0 = none yet),
/// the fallback for kinds that have not measured their own.
#[derive(Debug, Default)]
pub(crate) struct SharedHop(AtomicU64);

impl SharedHop {
    pub(crate) fn get(&self) -> Option<f64> {
        let bits = self.0.load(Ordering::Relaxed);
        (bits != 0).then(|| f64::from_bits(bits))
    }

    /// Racy by design: a lost update among concurrent ones only loses a sample. The lower
    /// envelope, as a kind's ([`envelope`]): a wait for a core or a busy worker is not the price
    /// of the move.
    pub(crate) fn observe(&self, hop: Duration) {
        let x = hop.as_nanos() as f64;
        let next = match self.get() {
            None => x,
            Some(v) => envelope(v, x),
        };
        self.0.store(next.to_bits().max(1), Ordering::Relaxed);
    }
}

/// One offloaded job's hops, as measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hops {
    /// From its submission to its start on a pool thread.
    pub(crate) to_pool: Duration,
    /// The part of `to_pool` it spent queued while every pool thread was busy with other jobs.
    pub(crate) waited: Duration,
    /// From its end to the awaiting future resuming.
    pub(crate) back: Duration,
}

impl Hops {
    /// The round trip the cost model compares with a job's cost: both hops without the wait
    /// for a free thread. That wait is queueing, not the price of the move: a job run inline
    /// would wait its turn for the worker too, and counting it made a busy pool look too
    /// expensive to use (every hop the length of the jobs queued ahead).
    pub(crate) fn round_trip(&self) -> Duration {
        self.to_pool.saturating_sub(self.waited) + self.back
    }
}

/// On a bucket whose estimates prefer inline, one job in this many (per thread) takes the full
/// path: timed, its cost given to the model, the decision made again. The others run untimed
/// and unlocked, a counter their only cost: a job of a few microseconds (a 4 KB page) would
/// otherwise pay two lock round trips and two clock reads, ~10% of its request.
pub(crate) const SAMPLE_EVERY: u32 = 16;

thread_local! {
    /// This thread's count of fast-path candidates, for [`SAMPLE_EVERY`].
    static TICK: Cell<u32> = const { Cell::new(0) };
}

#[derive(Debug)]
struct Inner {
    policy: Policy,
    model: CostModel,
    hist: KindHistograms,
}

#[derive(Debug)]
pub(crate) struct KindState {
    name: String,
    inner: Mutex<Inner>,
    inline: AtomicU64,
    offloaded: AtomicU64,
    panicked: AtomicU64,
    /// Per size bucket: the last full decision preferred inline (so the fast path may run it).
    fast: [AtomicBool; BUCKETS],
    /// Its lane in the pool's queue (the order it was registered in).
    pub(crate) lane: usize,
    /// Most pool threads its jobs hold at once (0: no cap).
    max_threads: AtomicUsize,
}

/// A named class of jobs (`"seal"`, `"render"`), registered once with
/// [`Pool::kind`](crate::Pool::kind) and passed to every [`Pool::run`](crate::Pool::run) of such a
/// job. It carries the kind's policy, its cost estimates and its histograms; clones share them.
#[derive(Debug, Clone)]
pub struct Kind {
    pub(crate) state: Arc<KindState>,
    pub(crate) hop: Arc<SharedHop>,
}

impl Kind {
    pub(crate) fn new(name: &str, policy: Policy, hop: Arc<SharedHop>, lane: usize) -> Kind {
        Kind {
            state: Arc::new(KindState {
                name: name.to_owned(),
                inner: Mutex::new(Inner {
                    policy,
                    model: CostModel::default(),
                    hist: KindHistograms::default(),
                }),
                inline: AtomicU64::new(0),
                offloaded: AtomicU64::new(0),
                panicked: AtomicU64::new(0),
                fast: std::array::from_fn(|_| AtomicBool::new(false)),
                lane,
                max_threads: AtomicUsize::new(0),
            }),
            hop,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.state
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The name it was registered with.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Its policy (the pool's default unless set).
    pub fn policy(&self) -> Policy {
        self.lock().policy
    }

    /// Let at most `n` pool threads run this kind's jobs at once (0: no cap, the default); its
    /// other jobs wait while other kinds' jobs take the free threads. For a heavy kind a client
    /// can flood (a password hash): with `n` below the pool's threads, other kinds always find a
    /// thread within one of their own jobs. Applies to jobs queued from now on.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use galleon_offload::{Config, Policy, Pool};
    /// let pool = Pool::new(Config { threads: 2, policy: Policy::Offload, ..Config::default() })?;
    /// let hash = pool.kind("hash");
    /// hash.set_max_threads(1); // one thread stays free for everything else
    /// assert_eq!(hash.max_threads(), 1);
    /// assert_eq!(pool.run(&hash, None, || 6 * 7).await, Ok(42));
    /// # std::io::Result::Ok(())
    /// # }).unwrap();
    /// ```
    pub fn set_max_threads(&self, n: usize) {
        self.state.max_threads.store(n, Ordering::Relaxed);
    }

    /// The cap [`Kind::set_max_threads`] set (0: none).
    pub fn max_threads(&self) -> usize {
        self.state.max_threads.load(Ordering::Relaxed)
    }

    /// Change its policy; the estimates are kept.
    pub fn set_policy(&self, policy: Policy) {
        let mut inner = self.lock();
        inner.policy = policy;
        for f in &self.state.fast {
            f.store(false, Ordering::Relaxed);
        }
    }

    /// Whether a job of this size runs inline on the fast path (untimed, counted); `false`: take
    /// [`Kind::route`]. Only buckets whose last full decision preferred inline qualify, and one
    /// call in [`SAMPLE_EVERY`] per thread says `false` to sample the cost again.
    pub(crate) fn fast_inline(&self, size: Option<u64>) -> bool {
        if !self.state.fast[bucket_of(size)].load(Ordering::Relaxed) {
            return false;
        }
        let sample = TICK.with(|t| {
            let n = t.get().wrapping_add(1);
            t.set(n);
            n % SAMPLE_EVERY == 0
        });
        if sample {
            return false;
        }
        self.state.inline.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// A job of the fast path panicked.
    pub(crate) fn count_panic(&self) {
        self.state.panicked.fetch_add(1, Ordering::Relaxed);
    }

    /// Where the next job of this size goes (counted as a decision by the adaptive model), its
    /// estimated run time (`None` while unknown), and whether the job may run inline as well: the
    /// adaptive policy picked the pool for a job within the latency budget (a resample, or a cost
    /// the hop pays for), so a saturated pool, whose wait the hop estimate leaves out, is reason
    /// enough to run it here instead.
    pub(crate) fn route(&self, size: Option<u64>) -> (Route, Option<Duration>, bool) {
        let pool_hop = self.hop.get();
        let mut inner = self.lock();
        let fast = &self.state.fast[bucket_of(size)];
        let (route, flexible) = match inner.policy {
            Policy::Inline => {
                fast.store(true, Ordering::Relaxed);
                return (Route::Inline, None, false);
            }
            Policy::Offload => (Route::Offload, false),
            Policy::Adaptive {
                max_overhead,
                latency_budget,
            } => {
                let (route, preferred, forced) =
                    inner
                        .model
                        .decide_preferring(size, max_overhead, latency_budget, pool_hop);
                fast.store(preferred == Route::Inline, Ordering::Relaxed);
                (route, !forced)
            }
        };
        let cost = inner
            .model
            .cost_ns(size)
            .map(|c| Duration::from_nanos(c as u64));
        (route, cost, flexible)
    }

    fn budget(policy: Policy) -> Duration {
        match policy {
            Policy::Adaptive { latency_budget, .. } => latency_budget,
            _ => crate::policy::DEFAULT_LATENCY_BUDGET,
        }
    }

    /// A job ran inline for `run`.
    pub(crate) fn finish_inline(&self, size: Option<u64>, run: Duration, panicked: bool) {
        self.state.inline.fetch_add(1, Ordering::Relaxed);
        if panicked {
            self.state.panicked.fetch_add(1, Ordering::Relaxed);
        }
        let mut inner = self.lock();
        let budget = Self::budget(inner.policy);
        inner.model.observe_cost(size, run, budget);
        inner.hist.record_run(run);
        self.refresh_fast(&inner, size);
    }

    /// After new data: whether jobs of this size may take the fast path, by what the estimates
    /// now prefer.
    fn refresh_fast(&self, inner: &Inner, size: Option<u64>) {
        let inline = match inner.policy {
            Policy::Inline => true,
            Policy::Offload => false,
            Policy::Adaptive {
                max_overhead,
                latency_budget,
            } => {
                let pool_hop = self.hop.get();
                inner
                    .model
                    .preferred(size, max_overhead, latency_budget, pool_hop)
                    .0
                    == Route::Inline
            }
        };
        self.state.fast[bucket_of(size)].store(inline, Ordering::Relaxed);
    }

    /// A job ran on the pool; its result reached the caller.
    pub(crate) fn finish_offloaded(
        &self,
        size: Option<u64>,
        hops: Hops,
        run: Duration,
        panicked: bool,
    ) {
        self.state.offloaded.fetch_add(1, Ordering::Relaxed);
        if panicked {
            self.state.panicked.fetch_add(1, Ordering::Relaxed);
        }
        let hop = hops.round_trip();
        self.hop.observe(hop);
        let mut inner = self.lock();
        let budget = Self::budget(inner.policy);
        inner.model.observe_cost(size, run, budget);
        inner.model.observe_hop(size, hop);
        inner.hist.record_run(run);
        inner.hist.record_hops(hops.to_pool, hops.waited, hops.back);
        self.refresh_fast(&inner, size);
    }

    /// Feed the adaptive model a measurement as if a job had run (for callers that time work
    /// themselves, and for tests): its run time and, if it went to the pool, its hop round trip
    /// (without any time it queued for a free thread).
    pub fn observe(&self, size_hint: Option<u64>, run: Duration, hop: Option<Duration>) {
        let mut inner = self.lock();
        let budget = Self::budget(inner.policy);
        inner.model.observe_cost(size_hint, run, budget);
        if let Some(hop) = hop {
            inner.model.observe_hop(size_hint, hop);
        }
        self.refresh_fast(&inner, size_hint);
    }

    /// The size hint from which this kind's jobs go to the pool under its adaptive bounds: every
    /// size bucket from there up (by powers of two) is estimated to cost more than hop ÷
    /// `max_overhead`, or more than the latency budget. `None` before any sized job was measured
    /// or when the policy is not adaptive; `Some(0)`: all are offloaded; `Some(u64::MAX)`: none.
    pub fn switch_point(&self) -> Option<u64> {
        let pool_hop = self.hop.get();
        let inner = self.lock();
        match inner.policy {
            Policy::Adaptive {
                max_overhead,
                latency_budget,
            } => inner
                .model
                .switch_point(max_overhead, latency_budget, pool_hop),
            _ => None,
        }
    }

    /// The estimated run time of a job of this size (`None` before one was measured).
    pub fn estimated_cost(&self, size_hint: Option<u64>) -> Option<Duration> {
        let ns = self.lock().model.cost_ns(size_hint)?;
        Some(Duration::from_nanos(ns as u64))
    }

    /// The hop round trip the adaptive policy assumes for this kind's jobs of this size.
    pub fn estimated_hop(&self, size_hint: Option<u64>) -> Duration {
        let pool_hop = self.hop.get();
        Duration::from_nanos(self.lock().model.hop_ns(size_hint, pool_hop) as u64)
    }

    /// Copies of its histograms (ns), e.g. to print with
    /// [`LinearBuckets::render`](crate::LinearBuckets::render).
    pub fn histograms(&self) -> KindHistograms {
        self.lock().hist.clone()
    }

    /// Empty its histograms (counters and estimates are kept).
    pub fn reset_histograms(&self) {
        self.lock().hist.reset();
    }

    /// Its counters, histograms and estimates as plain data.
    pub fn snapshot(&self) -> KindSnapshot {
        let switch_point = self.switch_point();
        let pool_hop = self.hop.get();
        let inner = self.lock();
        KindSnapshot {
            name: self.state.name.clone(),
            policy: inner.policy.to_string(),
            inline: self.state.inline.load(Ordering::Relaxed),
            offloaded: self.state.offloaded.load(Ordering::Relaxed),
            panicked: self.state.panicked.load(Ordering::Relaxed),
            to_pool: HistogramSummary::of(&inner.hist.to_pool),
            waited: HistogramSummary::of(&inner.hist.waited),
            back: HistogramSummary::of(&inner.hist.back),
            run: HistogramSummary::of(&inner.hist.run),
            hop_estimate_ns: inner.model.hop_ns(None, pool_hop),
            switch_point,
            estimates: inner.model.estimates(),
        }
    }
}
