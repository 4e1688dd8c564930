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
/// connections still open); under steady churn, now and then. A burst is over when the last
/// interval closed under a quarter of what closed since the trim, not only when it closed none:
/// light traffic beside (a health check every 100 ms) kept 90 MiB of 80 slow readers' pages in
/// the arenas after they left (issue 35, cause 8).
pub(crate) fn should_trim(closed_since_trim: u64, closed_this_tick: u64) -> bool {
    (closed_since_trim >= TRIM_AFTER_CLOSED
        && closed_this_tick.saturating_mul(4) < closed_since_trim)
        || closed_since_trim >= TRIM_ANYWAY_AFTER
}

/// How often the server checks whether to trim.
pub(crate) const TRIM_INTERVAL: Duration = Duration::from_secs(2);

/// glibc's own default for both thresholds below, which `mallopt` pins.
const FIXED_THRESHOLD: i32 = 128 * 1024;

/// Keeps glibc from holding freed memory in arenas' tops (glibc only; elsewhere does nothing).
///
/// By default glibc raises its mmap threshold to the largest mmapped block freed so far, and its
/// trim threshold to twice that; `malloc_trim` never shrinks the top of a thread's arena, only a
/// `free` past the trim threshold does. After 80 slow readers of a 3.9 MB page left, each worker
/// arena kept ~4 MiB that way (RSS 1.55x idle, `bench/results/slow_readers.txt`). Setting the
/// thresholds turns that growth off: blocks of 128 KiB or more are mapped and unmapped on their
/// own, and an arena's top is given back once it passes 128 KiB. Process-wide, idempotent.
pub(crate) fn pin_allocator_thresholds() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` takes two integers and changes glibc's parameters under its own lock;
    // no pointer is involved and it may be called from any thread at any time.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, FIXED_THRESHOLD);
        libc::mallopt(libc::M_MMAP_THRESHOLD, FIXED_THRESHOLD);
    }
}

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

    /// The tests that measure the process's RSS take turns, so one's allocations do not show up
    /// in the other's figures.
    static RSS_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn trims_after_a_burst_of_closes_is_over() {
        assert!(!should_trim(10, 0), "too few closed to be worth it");
        assert!(!should_trim(500, 200), "the burst is still going on");
        assert!(should_trim(500, 0), "the burst is over");
        // Regression (issue 35, cause 8): a few connections closing beside, as a health check's
        // do, kept a burst's pages from ever being trimmed.
        assert!(
            should_trim(80, 2),
            "the burst is over, light traffic goes on"
        );
        assert!(
            should_trim(500, 30),
            "the burst is over, light traffic goes on"
        );
        assert!(should_trim(TRIM_ANYWAY_AFTER, 100), "steady churn");
    }

    /// Regression (issue 13, class 6): once a large block had been freed, glibc kept megabytes
    /// of a thread's freed memory in its arena's top, which `malloc_trim` does not return. With
    /// the thresholds pinned, freeing returns it without any trim.
    #[test]
    fn a_freed_arena_top_goes_back_after_large_blocks_were_freed() {
        let _turn = RSS_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        pin_allocator_thresholds();
        // A 30 MiB block freed: without pinned thresholds, glibc would now keep up to 60 MiB of
        // any arena's top.
        drop(std::hint::black_box(vec![1u8; 30 << 20]));
        std::thread::spawn(|| {
            // 24 MiB in 1 KiB blocks from this thread's arena, touched, then freed in order, so
            // they merge into the arena's top.
            let blocks: Vec<Vec<u8>> = (0..24 * 1024).map(|_| vec![1u8; 1024]).collect();
            // Read without allocating: a small buffer freed after the blocks would sit between
            // them and the top (in the thread's cache) and keep them from merging into it.
            let before = rss_kib();
            drop(blocks);
            let after = rss_kib();
            if cfg!(all(target_os = "linux", target_env = "gnu")) {
                assert!(
                    after + 16 * 1024 < before,
                    "RSS {before} KiB before the free, {after} KiB after"
                );
            }
        })
        .join()
        .unwrap();
    }

    /// VmRSS in KiB, read into a stack buffer: an allocation here could land between freed
    /// blocks and an arena's top and keep them apart.
    fn rss_kib() -> u64 {
        use std::io::Read;
        let mut buf = [0u8; 8192];
        let mut f = std::fs::File::open("/proc/self/status").unwrap();
        let mut n = 0;
        while let Ok(k @ 1..) = f.read(&mut buf[n..]) {
            n += k;
        }
        std::str::from_utf8(&buf[..n])
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Freed memory goes back: after a burst of allocations is freed, a trim brings RSS down.
    #[test]
    fn trimming_returns_freed_heap_pages() {
        let _turn = RSS_TESTS.lock().unwrap_or_else(|p| p.into_inner());
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
