//! The bounded queue and the pool threads.
//!
//! Handoff: a submitter pushes under one mutex and wakes a parked thread only when no spinning
//! thread will take the job. A thread that finished a job spins on the queue's length for a
//! bounded time (`spin`, tens of microseconds: first `spin_loop`, then `yield_now`), so a steady
//! stream of jobs never pays a futex wake-up, then parks on a condvar: an idle pool uses no CPU.
//!
//! Bounded memory: a semaphore of `capacity` slots, taken before a push and given back when a
//! thread takes the job.
//!
//! Fairness: each kind waits in its own lane, and a free thread takes the head of the next lane in
//! turn, so a flood of one kind's jobs delays another kind's job by at most one job per kind
//! waiting, not by the whole flood. A lane may have a cap (`Kind::set_max_threads`): at most that
//! many threads run its jobs at once, so a heavy kind cannot hold every thread while a light
//! kind's job arrives.

use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// What a pool thread gives the job it runs.
pub(crate) struct Ready<'a> {
    /// When this thread became free to take a job: the end of its previous one, or its start. A
    /// job submitted before then waited in the queue for a thread; from the later of the two
    /// instants to the job's start is the hop itself (a wake-up, a cache line moving).
    pub(crate) since: Instant,
    /// To call once the job is done, just before its result is sent.
    pub(crate) before_reply: &'a dyn Fn(),
}

/// A queued job, type-erased: called with `Some(ready)` to run it (it calls
/// `ready.before_reply` once the job is done, just before it sends the result; it returns
/// whether it ran, `false` if its caller was gone), with `None` to cancel it (shutdown).
pub(crate) type Task = Box<dyn FnOnce(Option<&Ready<'_>>) -> bool + Send>;

/// One kind's queued jobs.
#[derive(Default)]
struct Lane {
    tasks: VecDeque<Task>,
    /// Its jobs running now; counted only while the lane has a cap.
    running: usize,
    /// Most of its jobs that run at once (0: no cap), as of its last push.
    cap: usize,
}

impl Lane {
    fn full(&self) -> bool {
        self.cap != 0 && self.running >= self.cap
    }
}

#[derive(Default)]
struct State {
    /// Indexed by the kind's lane number.
    lanes: Vec<Lane>,
    /// The lanes with queued jobs, in turn order; each at most once.
    turn: VecDeque<usize>,
    /// Jobs in all lanes.
    len: usize,
    /// Threads waiting on the condvar.
    parked: usize,
    shutdown: bool,
}

impl State {
    /// The head of the first lane in turn that is under its cap; that lane goes to the back of
    /// the turn. The job's lane and whether it counts against a cap come with it.
    fn pop(&mut self) -> Option<(Task, Option<usize>)> {
        for _ in 0..self.turn.len() {
            let id = self.turn.pop_front()?;
            let lane = &mut self.lanes[id];
            if lane.full() {
                self.turn.push_back(id);
                continue;
            }
            let Some(task) = lane.tasks.pop_front() else {
                continue;
            };
            let capped = (lane.cap != 0).then(|| {
                lane.running += 1;
                id
            });
            if !lane.tasks.is_empty() {
                self.turn.push_back(id);
            }
            self.len -= 1;
            return Some((task, capped));
        }
        None
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    /// `state.len`, readable without the lock by spinning threads.
    queued: AtomicUsize,
    /// Threads spinning for work (decremented under the lock).
    spinning: AtomicUsize,
    busy: AtomicUsize,
    abandoned: AtomicU64,
    shut: AtomicBool,
    pub(crate) slots: Semaphore,
    pub(crate) capacity: usize,
    spin: Duration,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("queued", &self.queued)
            .field("busy", &self.busy)
            .field("capacity", &self.capacity)
            .field("spin", &self.spin)
            .finish_non_exhaustive()
    }
}

/// Counts for a snapshot.
pub(crate) struct QueueCounts {
    pub(crate) queued: usize,
    pub(crate) busy: usize,
    pub(crate) parked: usize,
    pub(crate) abandoned: u64,
    pub(crate) shut_down: bool,
}

impl Shared {
    pub(crate) fn new(capacity: usize, spin: Duration) -> Shared {
        let capacity = capacity.clamp(1, Semaphore::MAX_PERMITS);
        Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            queued: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            abandoned: AtomicU64::new(0),
            shut: AtomicBool::new(false),
            slots: Semaphore::new(capacity),
            capacity,
            spin,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut.load(Ordering::Acquire)
    }

    /// Queue a task whose slot was taken in lane `lane` (its kind's), which runs at most `cap`
    /// jobs at once (0: no cap); gives it back if the pool is shut down.
    pub(crate) fn push(&self, task: Task, lane: usize, cap: usize) -> Result<(), Task> {
        let mut state = self.lock();
        if state.shutdown {
            return Err(task);
        }
        if state.lanes.len() <= lane {
            state.lanes.resize_with(lane + 1, Lane::default);
        }
        let l = &mut state.lanes[lane];
        if l.cap != 0 && cap == 0 {
            // Uncapped from now on: running jobs are no longer counted.
            l.running = 0;
        }
        l.cap = cap;
        let first = l.tasks.is_empty();
        l.tasks.push_back(task);
        if first {
            state.turn.push_back(lane);
        }
        state.len += 1;
        self.queued.fetch_add(1, Ordering::SeqCst);
        let wake = state.parked > 0 && state.len > self.spinning.load(Ordering::SeqCst);
        drop(state);
        if wake {
            self.cv.notify_one();
        }
        Ok(())
    }

    /// Stop taking jobs; the queued ones are cancelled (their callers get `ShutDown`), the
    /// running ones finish, the threads exit when they are done.
    pub(crate) fn shutdown(&self) {
        let drained: Vec<Task> = {
            let mut state = self.lock();
            if state.shutdown {
                return;
            }
            state.shutdown = true;
            self.shut.store(true, Ordering::Release);
            self.queued.store(0, Ordering::SeqCst);
            state.len = 0;
            state.turn.clear();
            let lanes = state.lanes.iter_mut();
            lanes.flat_map(|l| l.tasks.drain(..)).collect()
        };
        self.slots.close();
        self.cv.notify_all();
        for task in drained {
            let _ = catch_unwind(AssertUnwindSafe(|| task(None)));
        }
    }

    /// Whether a job queued now would wait: every thread busy, or jobs already waiting.
    pub(crate) fn is_saturated(&self, threads: usize) -> bool {
        self.queued.load(Ordering::Relaxed) > 0 || self.busy.load(Ordering::Relaxed) >= threads
    }

    pub(crate) fn counts(&self) -> QueueCounts {
        let state = self.lock();
        QueueCounts {
            queued: state.len,
            busy: self.busy.load(Ordering::Relaxed),
            parked: state.parked,
            abandoned: self.abandoned.load(Ordering::Relaxed),
            shut_down: state.shutdown,
        }
    }

    /// Spin until a job is queued, the pool shuts down, or `spin` has passed.
    fn spin_for_work(&self) {
        if self.spin.is_zero() {
            return;
        }
        let start = Instant::now();
        let pure = self.spin / 4;
        let mut i = 0u32;
        loop {
            for _ in 0..8 {
                if self.queued.load(Ordering::Acquire) > 0 || self.shut.load(Ordering::Relaxed) {
                    return;
                }
                std::hint::spin_loop();
            }
            i = i.wrapping_add(1);
            if i.is_multiple_of(4) {
                let spent = start.elapsed();
                if spent >= self.spin {
                    return;
                }
                if spent >= pure {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// A pool thread's life: take a job, run it, spin a little for the next, park.
    pub(crate) fn work(&self) {
        let mut free_since = Instant::now();
        let mut state = self.lock();
        loop {
            if let Some((task, capped)) = state.pop() {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                let more =
                    state.len > 0 && state.parked > 0 && self.spinning.load(Ordering::SeqCst) == 0;
                drop(state);
                if more {
                    self.cv.notify_one();
                }
                self.slots.add_permits(1);
                self.busy.fetch_add(1, Ordering::Relaxed);
                // Count this thread as spinning before the result goes out: the caller may submit
                // its next job at once, and should find this thread, not wake a parked one.
                let counted = Cell::new(false);
                let before_reply = || {
                    if !counted.replace(true) {
                        self.spinning.fetch_add(1, Ordering::SeqCst);
                    }
                };
                // The task catches the job's panic; this catches anything else (a result's drop).
                let ready = Ready {
                    since: free_since,
                    before_reply: &before_reply,
                };
                let ran = catch_unwind(AssertUnwindSafe(|| task(Some(&ready)))).unwrap_or(true);
                before_reply();
                free_since = Instant::now();
                if let Some(id) = capped {
                    // The lane may be under its cap again: this thread looks at it next.
                    let mut state = self.lock();
                    let lane = &mut state.lanes[id];
                    lane.running = lane.running.saturating_sub(1);
                }
                self.busy.fetch_sub(1, Ordering::Relaxed);
                if !ran {
                    self.abandoned.fetch_add(1, Ordering::Relaxed);
                }
                self.spin_for_work();
                state = self.lock();
                self.spinning.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            if state.shutdown {
                return;
            }
            state.parked += 1;
            state = self.cv.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.parked -= 1;
        }
    }
}
