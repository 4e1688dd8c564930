//! What a job's caller gets instead of its result.
//!
//! `OffloadError`: `Panicked`, `QueueFull` (`try_run`), `ShutDown`.

/// Why [`Pool::run`](crate::Pool::run) returned no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffloadError {
    /// The job panicked; the message is the panic's payload when it was a string. The pool thread
    /// that ran it caught the panic and goes on taking jobs.
    #[error("offloaded job panicked: {0}")]
    Panicked(String),
    /// The queue was full (only from [`Pool::try_run`](crate::Pool::try_run); `run` waits).
    #[error("offload queue is full")]
    QueueFull,
    /// The pool was shut down before the job started: it will never run.
    #[error("offload pool is shut down")]
    ShutDown,
}

/// The message of a caught panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic payload is not a string".to_owned()
    }
}
