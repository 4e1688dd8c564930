//! [`Priority`]: where the pool's threads stand against the request workers in the OS scheduler.
//!
//! The point of the pool is that a light request never waits behind a heavy job. Offloading
//! moves the job off the request's worker thread, but on a machine whose cores the pool can fill
//! the worker still has to get a core back from a pool thread when it wakes. Under Linux's fair
//! scheduler (EEVDF), a woken thread at nice 0 may wait for the running thread's slice (about
//! 3 ms on two cores) even when that thread is at nice 19; a thread of the `SCHED_IDLE` class is
//! preempted as soon as any thread of the normal class wakes on its core. That is what
//! [`Priority::Idle`] buys, and what it costs: see its docs.

use std::fmt;
use std::str::FromStr;

/// The pool threads' scheduling class ([`Config::priority`](crate::Config::priority)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// The normal class (`SCHED_OTHER`), at [`Config::nice`](crate::Config::nice): a pool
    /// thread shares the cores with the request workers by weight, so a woken worker may wait
    /// for a pool thread's time slice.
    #[default]
    Normal,
    /// Linux's `SCHED_IDLE` class: any normal thread that wakes on a core (a request worker,
    /// or any other process's thread) preempts the pool thread running there at once, so light
    /// requests keep their latency however busy the pool is. An unprivileged thread may enter
    /// this class but not leave it, so it is set once, when a pool thread starts.
    ///
    /// The cost: while normal threads keep every core busy, the pool gets only a sliver of CPU
    /// (a weight of 3 against 1024 for a normal thread at nice 0), so offloaded jobs slow down
    /// by two orders of magnitude until the load stops, and a pool thread preempted while it
    /// holds a lock (the queue's, the allocator's) keeps a normal thread that wants it waiting
    /// as long. They still complete: the class is not starved to zero. Use it where the
    /// offloaded work is the first thing that should yield, and not for work that holds locks
    /// the request path needs (a database connection, say).
    Idle,
}

impl fmt::Display for Priority {
    /// The form [`FromStr`] reads back: `normal`, `idle`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Priority::Normal => "normal",
            Priority::Idle => "idle",
        })
    }
}

/// Why a priority string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad priority {0:?}: expected normal or idle")]
pub struct ParsePriorityError(String);

impl FromStr for Priority {
    type Err = ParsePriorityError;

    /// `normal` or `idle` (any case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "normal" => Ok(Priority::Normal),
            "idle" => Ok(Priority::Idle),
            _ => Err(ParsePriorityError(s.to_owned())),
        }
    }
}

/// Puts the calling thread in `priority`'s class: `Normal` sets its nice value (best effort:
/// lowering a thread's priority is always allowed, raising it needs privileges and is then left
/// as is; 0 leaves it alone), `Idle` switches it to `SCHED_IDLE` (an error if the kernel refuses,
/// and on systems other than Linux).
pub fn apply(priority: Priority, nice: i32) -> std::io::Result<()> {
    match priority {
        Priority::Normal => {
            #[cfg(target_os = "linux")]
            if nice != 0 {
                let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), nice);
            }
            #[cfg(not(target_os = "linux"))]
            let _ = nice;
            Ok(())
        }
        Priority::Idle => set_sched_idle(),
    }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn set_sched_idle() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` reads the `sched_param` behind the pointer during the call
    // only, and `param` is a live, initialized local for all of it; pid 0 is the calling thread
    // (Linux applies scheduling policies per thread), so no other thread or process is touched.
    // `SCHED_IDLE` requires priority 0, which is what `param` holds. The call has no other
    // memory effects. Tested by `tests/priority.rs` (the class read back from /proc).
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn set_sched_idle() -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "the idle offload priority (SCHED_IDLE) exists on Linux only",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_the_cli_forms() {
        assert_eq!("idle".parse::<Priority>(), Ok(Priority::Idle));
        assert_eq!(" Normal ".parse::<Priority>(), Ok(Priority::Normal));
        assert!("nice".parse::<Priority>().is_err());
        assert!("".parse::<Priority>().is_err());
        for p in [Priority::Normal, Priority::Idle] {
            assert_eq!(p.to_string().parse::<Priority>(), Ok(p));
        }
        assert_eq!(Priority::default(), Priority::Normal);
    }
}
