//! Giving freed memory back to the system after many connections close.
//!
//! glibc's allocator keeps what connections freed in its per-thread arenas: a thousand slow
//! readers leave their buffers' worth of RSS behind for good (`bench/slow_readers.py`, issue 13
//! class 6). `malloc_trim(0)` returns every free page of every arena to the system; it is run on
//! the blocking pool once a burst of at least [`TRIM_AFTER_CLOSED`] closed connections is over
//! (or every [`TRIM_ANYWAY_AFTER`] closes under steady churn), checked every [`TRIM_INTERVAL`].

#![allow(unsafe_code)]

use std::time::Duration;

/// Connections that must have closed since the last trim before another one is worth its cost
/// (a walk over the arenas, a few milliseconds when there is much to return).
pub(crate) const TRIM_AFTER_CLOSED: u64 = 64;

/// Closed connections after which a trim runs even while connections keep closing.
pub(crate) const TRIM_ANYWAY_AFTER: u64 = 4096;

/// Whether to trim now, given the connections closed since the last trim and during the last
/// interval: after a burst, once it is over (a trim in the middle of one finds the pages of the
/// connections still open); under steady churn, now and then.
pub(crate) fn should_trim(closed_since_trim: u64, closed_this_tick: u64) -> bool {
    (closed_since_trim >= TRIM_AFTER_CLOSED && closed_this_tick == 0)
        || closed_since_trim >= TRIM_ANYWAY_AFTER
}

/// How often the server checks whether to trim.
pub(crate) const TRIM_INTERVAL: Duration = Duration::from_secs(2);

/// Returns free heap pages to the system where the allocator supports it (glibc); elsewhere
/// does nothing.
pub(crate) fn release_free_memory() {
    galleon_iolist::release_buffer_pool();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes a byte count and only walks glibc's own arenas under their
    // locks; it has no pointer arguments and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_after_a_burst_of_closes_is_over() {
        assert!(!should_trim(10, 0), "too few closed to be worth it");
        assert!(!should_trim(500, 30), "the burst is still going on");
        assert!(should_trim(500, 0), "the burst is over");
        assert!(should_trim(TRIM_ANYWAY_AFTER, 100), "steady churn");
    }

    /// Freed memory goes back: after a burst of allocations is freed, a trim brings RSS down.
    #[test]
    fn trimming_returns_freed_heap_pages() {
        fn rss_kib() -> u64 {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap()
        }
        // On a thread of its own, so its arena is not the main one (as on tokio's workers).
        std::thread::spawn(|| {
            // 64 MiB in 16 KiB blocks: below the mmap threshold, so they come from the arena.
            let mut blocks: Vec<Vec<u8>> = (0..4096).map(|_| vec![1u8; 16 * 1024]).collect();
            // Keep every 64th so the arena cannot simply shrink from the top.
            let keep: Vec<Vec<u8>> = blocks.iter().step_by(64).cloned().collect();
            blocks.clear();
            let before = rss_kib();
            release_free_memory();
            let after = rss_kib();
            drop(keep);
            if cfg!(all(target_os = "linux", target_env = "gnu")) {
                assert!(
                    after + 32 * 1024 < before,
                    "RSS {before} KiB before the trim, {after} KiB after"
                );
            }
        })
        .join()
        .unwrap();
    }
}
