//! [`Coalesced`]: one reload operation shared by every caller that asks for it at once, for
//! `POST /rules/reload` and `POST /templates/reload`.
//!
//! Without it each request ran its own reload, one after another: 300 concurrent posts of a
//! 56 MB rules file were 300 parses in a row (two minutes, a gigabyte resident), still running
//! after the clients left. Here at most one reload runs and at most one more is pending, however
//! many callers there are:
//!
//! - a caller that finds none running starts one, and gets its result;
//! - a caller that finds one running asks for the next one (the pending one), which starts when
//!   the running one ends, and gets that one's result, shared with every caller that arrived
//!   while the same one was running. The running one may have read the files before the caller's
//!   change, so its result is never given to a caller that arrived after it started.
//!
//! Callers wait as futures, not threads; the reload itself runs on tokio's blocking pool. A
//! caller that goes away (its connection closed, its future dropped) leaves nothing behind but
//! the one pending reload, which still runs once (it was asked for) even if nobody waits.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

/// The reload did not come to an answer: it panicked, or the runtime dropped it unrun (at
/// shutdown). Its callers answer 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost;

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the reload failed")
    }
}

/// One reload operation (a blocking function, run on tokio's blocking pool) whose concurrent
/// callers share runs (module docs). Clones share the operation and its runs.
pub struct Coalesced<R> {
    inner: Arc<Inner<R>>,
}

impl<R> Clone for Coalesced<R> {
    fn clone(&self) -> Self {
        Coalesced {
            inner: self.inner.clone(),
        }
    }
}

impl<R> fmt::Debug for Coalesced<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coalesced")
            .field("runs", &self.runs())
            .field("waiting", &self.waiting())
            .finish_non_exhaustive()
    }
}

/// Where one run's outcome goes: every caller of that run holds a receiver. Dropped unsent (the
/// run dropped unrun), its callers get [`Lost`].
type Outcome<R> = watch::Sender<Option<Result<R, Lost>>>;

struct Inner<R> {
    op: Box<dyn Fn() -> R + Send + Sync>,
    state: Mutex<State<R>>,
    /// Callers waiting now (for a running or a pending run).
    waiting: AtomicUsize,
}

struct State<R> {
    /// Runs started so far.
    started: u64,
    running: bool,
    /// The run asked for while one was running: it starts when that one ends, and its outcome
    /// goes to every caller who asked for it.
    pending: Option<Outcome<R>>,
}

impl<R: Clone + Send + Sync + 'static> Coalesced<R> {
    /// The reload `op` (blocking: it reads and parses files), not run yet.
    pub fn new(op: impl Fn() -> R + Send + Sync + 'static) -> Coalesced<R> {
        Coalesced {
            inner: Arc::new(Inner {
                op: Box::new(op),
                state: Mutex::new(State {
                    started: 0,
                    running: false,
                    pending: None,
                }),
                waiting: AtomicUsize::new(0),
            }),
        }
    }

    /// The outcome of a run that started after this call: the one this call starts, or the
    /// pending one. Call it inside a tokio runtime (the run goes to its blocking pool).
    pub async fn run(&self) -> Result<R, Lost> {
        let _waiting = Waiting::enter(&self.inner.waiting);
        let mut outcome = {
            let mut state = self.inner.lock();
            if state.running {
                state
                    .pending
                    .get_or_insert_with(|| watch::Sender::new(None))
                    .subscribe()
            } else {
                state.running = true;
                state.started += 1;
                let first = watch::Sender::new(None);
                let outcome = first.subscribe();
                spawn_runner(self.inner.clone(), first);
                outcome
            }
        };
        match outcome.wait_for(Option::is_some).await {
            Ok(done) => done.clone().unwrap_or(Err(Lost)),
            Err(_) => Err(Lost),
        }
    }
}

impl<R> Coalesced<R> {
    /// Runs started so far (each one call of the operation).
    pub fn runs(&self) -> u64 {
        self.inner.lock().started
    }

    /// Callers waiting for a run now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Ordering::SeqCst)
    }
}

impl<R> Inner<R> {
    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // The state is updated in whole steps under the lock; nothing panics while it is held.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs the operation on the blocking pool, for `first`'s callers, then again for each pending
/// run's. Started with `state.running` set.
fn spawn_runner<R: Clone + Send + Sync + 'static>(inner: Arc<Inner<R>>, first: Outcome<R>) {
    let mut runner = Runner {
        inner,
        ended: false,
    };
    tokio::task::spawn_blocking(move || {
        let mut outcome = first;
        loop {
            let done =
                std::panic::catch_unwind(AssertUnwindSafe(|| (runner.inner.op)())).map_err(|_| {
                    tracing::error!("a reload panicked");
                    Lost
                });
            outcome.send_replace(Some(done));
            // A caller that came after the send asked for a run that has not read the files yet.
            let mut state = runner.inner.lock();
            match state.pending.take() {
                Some(next) => {
                    state.started += 1;
                    outcome = next;
                }
                None => {
                    state.running = false;
                    drop(state);
                    runner.end();
                    return;
                }
            }
        }
    });
}

/// The runner's task: when it is dropped without ending (the runtime shutting down before it
/// ran), the next caller starts afresh; its callers get [`Lost`] (their senders are dropped).
struct Runner<R> {
    inner: Arc<Inner<R>>,
    ended: bool,
}

impl<R> Runner<R> {
    /// The last run ended and was published: nothing for the drop to do.
    fn end(&mut self) {
        self.ended = true;
    }
}

impl<R> Drop for Runner<R> {
    fn drop(&mut self) {
        if !self.ended {
            let mut state = self.inner.lock();
            state.running = false;
            state.pending = None;
        }
    }
}

/// Counts a caller as waiting until it returns or is dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn enter(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Fifty callers while one run is held: two runs, all fifty answered, the late ones by the
    /// second run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_during_a_run_share_the_next_one() {
        let (release, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let c = Coalesced::new(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            gate.lock().unwrap().recv().unwrap();
            n
        });
        let first = tokio::spawn({
            let c = c.clone();
            async move { c.run().await }
        });
        poll(|| calls.load(Ordering::SeqCst) == 1).await;
        let rest: Vec<_> = (0..49)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move { c.run().await })
            })
            .collect();
        poll(|| c.waiting() == 50).await;
        release.send(()).unwrap();
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), Ok(1));
        for r in rest {
            assert_eq!(r.await.unwrap(), Ok(2));
        }
        assert_eq!((c.runs(), calls.load(Ordering::SeqCst)), (2, 2));
        // Idle again: a new caller starts a third run.
        release.send(()).unwrap();
        assert_eq!(c.run().await, Ok(3));
    }

    #[tokio::test]
    async fn a_panicking_run_is_lost_and_the_next_one_runs() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let c = Coalesced::new(move || {
            if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("first");
            }
            7
        });
        assert_eq!(c.run().await, Err(Lost));
        assert_eq!(c.run().await, Ok(7));
    }

    /// Waits, 20 s at most, until `cond` holds.
    async fn poll(mut cond: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !cond() {
            assert!(std::time::Instant::now() < deadline, "timed out");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}
