//! The bulk writers: a second tokio runtime whose threads write streamed bodies and large files
//! ([`ServerConfig::bulk_writers`](crate::ServerConfig::bulk_writers)).
//!
//! Why a second runtime: a tokio worker runs its ready tasks in turn, and each write of a
//! download is a kernel copy of up to the socket's free space. When a thousand downloads start
//! at once, a small request queued on the same worker waited behind all their copies (50-500 ms
//! for `/static/robots.txt` in `bench/slow_readers.py`). On their own threads the downloads
//! compete with the request workers as threads, which the kernel schedules fairly, so a request
//! worker woken by a new request runs at once.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use galleon_offload::Priority;

use tokio::runtime::{Handle, Runtime};

/// The bulk writers' runtime, shut down without waiting when dropped (also from async code,
/// where dropping a runtime would panic): the connections it still writes are closed.
#[derive(Debug)]
pub(crate) struct BulkWriters {
    rt: Option<Runtime>,
}

impl BulkWriters {
    /// Starts `threads` bulk writer threads (named `galleon-bulk`) in `priority`'s scheduling
    /// class; a class the system refuses is logged once and the threads run as they are.
    pub(crate) fn start(threads: usize, priority: Priority) -> io::Result<BulkWriters> {
        let warned = Arc::new(AtomicBool::new(false));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("galleon-bulk")
            .on_thread_start(move || {
                if let Err(e) = galleon_offload::set_thread_priority(priority, 0)
                    && !warned.swap(true, Ordering::Relaxed)
                {
                    tracing::warn!(%priority, error = %e, "bulk writers keep the normal priority");
                }
            })
            .enable_all()
            .build()?;
        Ok(BulkWriters { rt: Some(rt) })
    }

    /// Where responses are handed to be written.
    pub(crate) fn handle(&self) -> Option<Handle> {
        self.rt.as_ref().map(|rt| rt.handle().clone())
    }
}

impl Drop for BulkWriters {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}
