//! [`Pool`]: the threads, the kinds, and `run`.
//!
//! `Pool::kind` names a class of jobs; `run`/`try_run` run a job inline or on a pool thread as the
//! kind's policy says (a panic is `OffloadError::Panicked` and the pool goes on); `try_inline` +
//! `offload` are the hot path that boxes no future unless the job leaves; `snapshot`, `shutdown`,
//! `join`. A job the adaptive policy may run inline (a resample, or any cost under the latency
//! budget) never queues behind a saturated pool. For a job estimated under `await_spin`
//! (10 µs) the awaiting task keeps its worker polling, so the hop back costs no thread wake-up.

use crate::adaptive::Route;
use crate::error::{OffloadError, panic_message};
use crate::kind::{Hops, Kind, SharedHop};
use crate::policy::Policy;
use crate::priority::{self, Priority};
use crate::queue::{Ready, Shared, Task};
use crate::stats::PoolSnapshot;
use std::collections::HashMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::{TryAcquireError, oneshot};

/// How a [`Pool`] is built. `Config::default()`: a thread per core, 1024 queued jobs, 20 us of
/// spinning on pool threads, 10 us on the awaiting side, [`Policy::adaptive`], threads of the
/// normal scheduling class at the process's nice value.
#[derive(Debug, Clone)]
pub struct Config {
    /// Pool threads (0: one per core, `std::thread::available_parallelism`). Never pinned.
    pub threads: usize,
    /// Jobs the queue holds at most; `run` waits for room beyond it, `try_run` fails.
    pub queue_capacity: usize,
    /// How long a pool thread that finished a job looks for the next before parking. Zero parks
    /// at once (every hop then pays a futex wake-up); keep it to tens of microseconds.
    pub spin: Duration,
    /// How long the awaiting task keeps its tokio worker polling for the result, when the job's
    /// estimated run time is at most this, instead of letting it park: the worker yields between
    /// polls, so its other tasks still run, but an idle worker stays awake (as the BEAM's
    /// schedulers busy-wait, `+sbwt`) and the hop back costs no thread wake-up. Zero: always
    /// park.
    pub await_spin: Duration,
    /// The policy new kinds get.
    pub policy: Policy,
    /// Threads are named `{thread_name}-{i}`.
    pub thread_name: String,
    /// The pool threads' nice value under [`Priority::Normal`] (Linux; best effort, 0 leaves
    /// it alone). Above 0, a request worker that has work gets more of the CPU than a pool
    /// thread, though it may still wait for a pool thread's time slice when it wakes.
    pub nice: i32,
    /// The pool threads' scheduling class: [`Priority::Idle`] (Linux's `SCHED_IDLE`) lets any
    /// normal thread preempt them at once, at the cost its docs describe. `Pool::new` fails if
    /// the class cannot be set.
    pub priority: Priority,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            threads: 0,
            queue_capacity: 1024,
            spin: Duration::from_micros(20),
            await_spin: Duration::from_micros(10),
            policy: Policy::default(),
            thread_name: "galleon-offload".to_owned(),
            nice: 0,
            priority: Priority::Normal,
        }
    }
}

/// Tells the threads to stop when the last `Pool` clone goes.
#[derive(Debug)]
struct Handle {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    kinds: Mutex<HashMap<String, Kind>>,
    hop: Arc<SharedHop>,
    thread_count: usize,
    policy: Policy,
    priority: Priority,
    await_spin: Duration,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.shutdown();
    }
}

/// A pool of CPU threads beside the tokio workers, with a bounded queue; jobs of each [`Kind`]
/// run inline or on it by the kind's [`Policy`], their hops and run times measured.
///
/// Cloning is cheap and shares the pool. Dropping the last clone is [`Pool::shutdown`] without
/// waiting for the threads.
///
/// # Examples
///
/// ```
/// use galleon_offload::{Config, OffloadError, Policy, Pool};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let pool = Pool::new(Config { threads: 2, ..Config::default() }).unwrap();
/// let sum = pool.kind("sum");
///
/// // Adaptive by default: the size hint lets it learn the cost per size.
/// let data = vec![1u64; 100_000];
/// let n = data.len() as u64;
/// let total = pool.run(&sum, Some(n), move || data.iter().sum::<u64>()).await;
/// assert_eq!(total, Ok(100_000));
///
/// // A panic is the caller's error; the pool goes on.
/// let boom = pool.run(&sum, None, || -> u64 { panic!("boom") }).await;
/// assert_eq!(boom, Err(OffloadError::Panicked("boom".into())));
///
/// sum.set_policy(Policy::Offload);
/// assert_eq!(pool.run(&sum, None, || 2 + 2).await, Ok(4));
/// let stats = pool.snapshot().kinds[0].clone();
/// assert_eq!((stats.name.as_str(), stats.inline + stats.offloaded), ("sum", 3));
/// pool.shutdown();
/// assert_eq!(pool.run(&sum, None, || 1).await, Err(OffloadError::ShutDown));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Pool {
    handle: Arc<Handle>,
}

/// Runs `job` on this thread as an inline job of `kind`: timed, and a panic is an error.
fn run_here<T>(kind: &Kind, size: Option<u64>, job: impl FnOnce() -> T) -> Result<T, OffloadError> {
    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(job));
    kind.finish_inline(size, start.elapsed(), result.is_err());
    result.map_err(|p| OffloadError::Panicked(panic_message(&*p)))
}

/// Runs `job` on this thread on the fast path ([`Kind::fast_inline`]): untimed; a panic is an
/// error.
fn run_fast<T>(kind: &Kind, job: impl FnOnce() -> T) -> Result<T, OffloadError> {
    catch_unwind(AssertUnwindSafe(job)).map_err(|p| {
        kind.count_panic();
        OffloadError::Panicked(panic_message(&*p))
    })
}

/// Where one job runs, as `Pool::decide` says.
enum Decision {
    ShutDown,
    /// Inline on the fast path: untimed.
    Fast,
    /// Inline, timed.
    Inline,
    /// On the pool; the job's estimated run time.
    Offload(Option<Duration>),
}

/// What a pool thread sends back.
enum Done<T> {
    Ran {
        result: Result<T, OffloadError>,
        /// When the thread that ran it was free to take it (see [`Ready`]).
        ready: Instant,
        start: Instant,
        end: Instant,
    },
    Cancelled,
}

impl Pool {
    /// Start the threads.
    pub fn new(config: Config) -> std::io::Result<Pool> {
        let threads = if config.threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            config.threads
        };
        let shared = Arc::new(Shared::new(config.queue_capacity, config.spin));
        let mut handles = Vec::with_capacity(threads);
        // Each thread reports whether it took its scheduling class before taking jobs.
        let (applied_tx, applied) = std::sync::mpsc::channel::<std::io::Result<()>>();
        for i in 0..threads {
            let worker = shared.clone();
            let (nice, prio) = (config.nice, config.priority);
            let applied_tx = applied_tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-{i}", config.thread_name))
                .spawn(move || {
                    let result = priority::apply(prio, nice);
                    let ok = result.is_ok();
                    let _ = applied_tx.send(result);
                    if ok {
                        worker.work();
                    }
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    shared.shutdown();
                    return Err(e);
                }
            }
        }
        drop(applied_tx);
        for _ in 0..threads {
            let failed = match applied.recv() {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e,
                Err(_) => std::io::Error::other("a pool thread exited before it started"),
            };
            shared.shutdown();
            for h in handles {
                let _ = h.join();
            }
            return Err(std::io::Error::new(
                failed.kind(),
                format!(
                    "offload pool threads at priority {}: {failed}",
                    config.priority
                ),
            ));
        }
        Ok(Pool {
            handle: Arc::new(Handle {
                shared,
                threads: Mutex::new(handles),
                kinds: Mutex::new(HashMap::new()),
                hop: Arc::new(SharedHop::default()),
                thread_count: threads,
                policy: config.policy,
                priority: config.priority,
                await_spin: config.await_spin,
            }),
        })
    }

    /// The kind of this name, registered with the pool's default policy on first use; the same
    /// name gives the same kind (its estimates and histograms shared).
    pub fn kind(&self, name: &str) -> Kind {
        let mut kinds = self
            .handle
            .kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let lane = kinds.len();
        kinds
            .entry(name.to_owned())
            .or_insert_with(|| Kind::new(name, self.handle.policy, self.handle.hop.clone(), lane))
            .clone()
    }

    /// Pool threads.
    pub fn threads(&self) -> usize {
        self.handle.thread_count
    }

    /// Run `job` where `kind`'s policy says: inline (on this thread, inside this future's first
    /// poll) or on a pool thread, waiting for room in the queue if it is full. `size_hint` (bytes,
    /// rows: any measure the cost grows with) lets the adaptive policy estimate the cost by size.
    ///
    /// Errors: the job panicked ([`OffloadError::Panicked`]) or the pool was shut down before it
    /// started ([`OffloadError::ShutDown`]). Dropping the future before it is done is safe: a
    /// queued job is then skipped, a running one finishes and its result is dropped.
    pub async fn run<T, F>(
        &self,
        kind: &Kind,
        size_hint: Option<u64>,
        job: F,
    ) -> Result<T, OffloadError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submit(kind, size_hint, job, true).await
    }

    /// Runs `job` on this thread, now, when `kind`'s policy routes a job of this size inline, and
    /// returns its result; `None`, without running it, when the policy routes it to the pool:
    /// then give an owned job to [`Pool::offload`]. For hot paths that should neither box a
    /// future nor move their inputs unless the job really leaves the thread.
    pub fn try_inline<T>(
        &self,
        kind: &Kind,
        size_hint: Option<u64>,
        job: impl FnOnce() -> T,
    ) -> Option<Result<T, OffloadError>> {
        match self.decide(kind, size_hint) {
            Decision::ShutDown => Some(Err(OffloadError::ShutDown)),
            Decision::Fast => Some(run_fast(kind, job)),
            Decision::Inline => Some(run_here(kind, size_hint, job)),
            Decision::Offload(_) => None,
        }
    }

    /// `job` on a pool thread whatever `kind`'s policy says (after [`Pool::try_inline`] said
    /// `None`, so the decision is not counted twice), waiting for room in the queue.
    pub async fn offload<T, F>(
        &self,
        kind: &Kind,
        size_hint: Option<u64>,
        job: F,
    ) -> Result<T, OffloadError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if self.handle.shared.is_shut_down() {
            return Err(OffloadError::ShutDown);
        }
        let cost = kind.estimated_cost(size_hint);
        self.enqueue(kind, size_hint, job, true, cost).await
    }

    /// [`Pool::run`], but a full queue is [`OffloadError::QueueFull`] at once instead of a wait.
    pub async fn try_run<T, F>(
        &self,
        kind: &Kind,
        size_hint: Option<u64>,
        job: F,
    ) -> Result<T, OffloadError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submit(kind, size_hint, job, false).await
    }

    async fn submit<T, F>(
        &self,
        kind: &Kind,
        size: Option<u64>,
        job: F,
        wait: bool,
    ) -> Result<T, OffloadError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        match self.decide(kind, size) {
            Decision::ShutDown => Err(OffloadError::ShutDown),
            Decision::Fast => run_fast(kind, job),
            Decision::Inline => run_here(kind, size, job),
            Decision::Offload(cost) => self.enqueue(kind, size, job, wait, cost).await,
        }
    }

    /// Where a job of `kind` and `size` runs: the one decision `run`, `try_run` and
    /// `try_inline` share.
    fn decide(&self, kind: &Kind, size: Option<u64>) -> Decision {
        if self.handle.shared.is_shut_down() {
            return Decision::ShutDown;
        }
        if kind.fast_inline(size) {
            return Decision::Fast;
        }
        let (route, cost, flexible) = kind.route(size);
        if route == Route::Inline || flexible && self.saturated() {
            Decision::Inline
        } else {
            Decision::Offload(cost)
        }
    }

    /// Puts `job` on the queue (waiting for room if `wait`) and awaits its result.
    async fn enqueue<T, F>(
        &self,
        kind: &Kind,
        size: Option<u64>,
        job: F,
        wait: bool,
        cost: Option<Duration>,
    ) -> Result<T, OffloadError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let shared = &self.handle.shared;
        let permit = match shared.slots.try_acquire() {
            Ok(p) => p,
            Err(TryAcquireError::Closed) => return Err(OffloadError::ShutDown),
            Err(TryAcquireError::NoPermits) if !wait => return Err(OffloadError::QueueFull),
            Err(TryAcquireError::NoPermits) => shared
                .slots
                .acquire()
                .await
                .map_err(|_| OffloadError::ShutDown)?,
        };
        // The slot is given back by the thread that takes the job.
        permit.forget();
        let (tx, rx) = oneshot::channel::<Done<T>>();
        let task: Task = Box::new(move |run: Option<&Ready<'_>>| {
            let Some(ready) = run else {
                let _ = tx.send(Done::Cancelled);
                return true;
            };
            if tx.is_closed() {
                return false;
            }
            let start = Instant::now();
            let result = catch_unwind(AssertUnwindSafe(job))
                .map_err(|p| OffloadError::Panicked(panic_message(&*p)));
            let end = Instant::now();
            (ready.before_reply)();
            let _ = tx.send(Done::Ran {
                result,
                ready: ready.since,
                start,
                end,
            });
            true
        });
        let submitted = Instant::now();
        let (lane, cap) = (kind.state.lane, kind.max_threads());
        if shared.push(task, lane, cap).is_err() {
            return Err(OffloadError::ShutDown);
        }
        // Keep this worker polling (politely: other tasks run between polls) for `await_spin`
        // when the job is expected to be done by then, instead of parking it and paying a thread
        // wake-up for the hop back.
        let await_spin = self.handle.await_spin;
        let spin_until = cost
            .filter(|&c| !await_spin.is_zero() && c <= await_spin)
            .map(|_| submitted + await_spin);
        let mut rx = rx;
        let done = std::future::poll_fn(|cx| {
            let polled = Pin::new(&mut rx).poll(cx);
            if polled.is_pending() && spin_until.is_some_and(|t| Instant::now() < t) {
                cx.waker().wake_by_ref();
            }
            polled
        })
        .await;
        match done {
            Ok(Done::Ran {
                result,
                ready,
                start,
                end,
            }) => {
                let resumed = Instant::now();
                kind.finish_offloaded(
                    size,
                    Hops {
                        to_pool: start.saturating_duration_since(submitted),
                        waited: ready.saturating_duration_since(submitted),
                        back: resumed.saturating_duration_since(end),
                    },
                    end.saturating_duration_since(start),
                    result.is_err(),
                );
                result
            }
            Ok(Done::Cancelled) | Err(_) => Err(OffloadError::ShutDown),
        }
    }

    /// Whether a job queued now would wait. A job the adaptive policy may run inline (a resample,
    /// or a cost under the latency budget that the hop pays for) is not worth a wait behind other
    /// kinds' long jobs: the hop estimate leaves waits out, so it then runs inline.
    fn saturated(&self) -> bool {
        self.handle.shared.is_saturated(self.handle.thread_count)
    }

    /// Stop taking jobs: from now on `run` and `try_run` return [`OffloadError::ShutDown`]. Jobs
    /// already running finish and deliver their results; jobs queued but not started are
    /// **cancelled**: their callers get `ShutDown` (they never run). Does not wait for the
    /// threads (see [`Pool::join`]). Idempotent.
    pub fn shutdown(&self) {
        self.handle.shared.shutdown();
    }

    /// [`Pool::shutdown`], then wait for the threads to exit (after the jobs they are running).
    /// Blocks: call it outside the async workers (or in `spawn_blocking`).
    pub fn join(&self) {
        self.shutdown();
        let threads = std::mem::take(
            &mut *self
                .handle
                .threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for t in threads {
            let _ = t.join();
        }
    }

    /// The pool's state and every kind's counters, histograms and estimates, as plain data.
    pub fn snapshot(&self) -> PoolSnapshot {
        let counts = self.handle.shared.counts();
        let mut kinds: Vec<Kind> = self
            .handle
            .kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        kinds.sort_by(|a, b| a.name().cmp(b.name()));
        PoolSnapshot {
            threads: self.handle.thread_count,
            queue_capacity: self.handle.shared.capacity,
            queued: counts.queued,
            busy: counts.busy,
            parked: counts.parked,
            abandoned: counts.abandoned,
            shut_down: counts.shut_down,
            policy: self.handle.policy.to_string(),
            priority: self.handle.priority.to_string(),
            hop_estimate_ns: self.handle.hop.get(),
            kinds: kinds.iter().map(Kind::snapshot).collect(),
        }
    }
}
