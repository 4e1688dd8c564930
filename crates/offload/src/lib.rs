//! A CPU pool beside the tokio workers, and the rule for when to use it.
//!
//! A request worker that runs a 10 ms job (a big page render, an Argon2 hash) delays every
//! request queued behind it by 10 ms: seed 001 ("Erlang Dirty Scheduler Overhead") is the BEAM's
//! version of this, where a native call over ~1 ms blocks a scheduler and the fix is a separate
//! group of "dirty" threads. Moving a job costs a hop there and back (the seed measured 1-10 us
//! with DTrace; the BEAM's dirty-CPU round trip is ~2 us on this project's machines), so the seed's
//! rule: **offload when the hop is under ~10% of the job**, run inline otherwise. Its libsodium
//! secretbox of 4 KB runs inline, 8 KB goes to a dirty scheduler.
//!
//! This crate makes that rule data:
//!
//! - [`Pool`]: N threads (one per core, not pinned) and a bounded queue. A thread that finished
//!   a job spins briefly for the next (so back-to-back hops avoid a futex wake-up) and then
//!   parks (an idle pool uses no CPU). Results come back through a oneshot to the awaiting task,
//!   which, for a job estimated to take under `Config::await_spin` (10 us), keeps its tokio
//!   worker polling (yielding to its other tasks between polls) rather than letting it park, so
//!   the hop back costs no thread wake-up: the BEAM's schedulers busy-wait the same way.
//! - [`Kind`]: a named class of jobs with its [`Policy`]: [`Policy::Inline`],
//!   [`Policy::Offload`], or [`Policy::Adaptive`], which keeps per kind an estimate of the job's
//!   cost (by log2 of a size hint) and of the measured hop (without the time a job queued for a
//!   free thread, which it would also wait inline; its lower envelope, since on a busy machine
//!   most hops also wait for a core), runs inline while hop ÷
//!   cost is over
//!   `max_overhead` (10%), never inline over `latency_budget` (1 ms), and sends one decision in
//!   64 the other way to notice changes. [`Kind::switch_point`] is the size where it switches.
//!   Where the estimates prefer inline, jobs run untimed and unlocked but for one in 16 per
//!   thread, which is timed and decided again: a job of microseconds pays a counter, not two
//!   lock round trips and two clock reads. [`Pool::try_inline`] runs such a job without boxing
//!   a future.
//! - [`Priority`]: the pool threads' scheduling class. [`Priority::Idle`] (Linux's
//!   `SCHED_IDLE`) lets a request worker that wakes preempt a pool thread at once, so offloaded
//!   work takes only the CPU the workers leave; at the price its docs describe.
//! - Measurement as the seed did it: per kind, HDR histograms of the hop to the pool, the hop
//!   back and the run time ([`Kind::histograms`], [`Pool::snapshot`]), printed as DTrace
//!   `lquantize` text by [`LinearBuckets::render`].
//!
//! `cargo bench -p galleon-lab --features peers --bench hops` compares the round trip with
//! `tokio::task::spawn_blocking` and rayon + a tokio oneshot.

mod adaptive;
mod error;
mod kind;
mod lquantize;
mod policy;
mod pool;
mod priority;
mod queue;
mod stats;

/// The histogram crate whose `Histogram<u64>` this crate's histograms are (re-exported, so a
/// caller needs no matching dependency of its own).
pub use hdrhistogram;

pub use adaptive::BucketEstimate;
pub use error::OffloadError;
pub use kind::Kind;
pub use lquantize::{LinearBuckets, render_counts};
pub use policy::{DEFAULT_LATENCY_BUDGET, DEFAULT_MAX_OVERHEAD, ParsePolicyError, Policy};
pub use pool::{Config, Pool};
pub use priority::{ParsePriorityError, Priority, apply as set_thread_priority};
pub use stats::{HistogramSummary, KindHistograms, KindSnapshot, PoolSnapshot, new_histogram};
