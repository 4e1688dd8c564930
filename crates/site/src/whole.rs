//! The bytes of whole-rendered pages that all connections hold at once, against
//! `--max-whole-pages`: a page rendered whole stays in memory until its last byte is written,
//! so a slow reader (or one that pipelines requests and reads nothing) pins a whole page each.
//! Past the budget pages are streamed instead, in `--chunk-bytes` chunks rendered as the
//! client takes them, so what a slow reader pins is a few chunks (issue 35, cause 8: 80
//! non-reading clients of a 3.6 MB page held 4.6 MiB each, 370 MiB in all).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use galleon_http::{IoList, Response};

/// Default `--max-whole-pages`: 64 MiB, sixteen pages at the default `--full-body-max`
/// (4 MiB) waiting for slow readers at once. A fast reader's page is held for the
/// milliseconds its write takes, so the budget is only reached by readers that do not keep up.
pub const DEFAULT_MAX_WHOLE_PAGES: usize = 64 * 1024 * 1024;

/// Pages smaller than this are not counted (and always render whole): the kernel's socket
/// buffers take them at once, and counting every small page would put two atomic operations on
/// one shared cache line into every request.
pub const UNCOUNTED_BELOW: usize = 64 * 1024;

/// The shared count of whole pages' bytes held, and its bound. Clones share the count.
#[derive(Debug, Clone)]
pub struct WholePages {
    max: usize,
    held: Arc<AtomicUsize>,
}

impl WholePages {
    /// A budget of `max` bytes of whole pages held at once.
    pub fn new(max: usize) -> WholePages {
        WholePages {
            max,
            held: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The bytes of whole pages held now (written out or dropped ones are not).
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The largest page to render whole now: `full_body_max`, or what is left of the budget
    /// when that is less (never under [`UNCOUNTED_BELOW`]). Renders that run at once may each
    /// see the same room, so the count can pass the budget by what they render together.
    pub fn whole_max(&self, full_body_max: usize) -> usize {
        let room = self.max.saturating_sub(self.held());
        full_body_max.min(room.max(UNCOUNTED_BELOW))
    }

    /// A 200 HTML response of a page rendered whole, counted until it has been written.
    pub fn respond(&self, page: IoList) -> Response {
        let len = page.len();
        let resp = Response::html(page);
        if len < UNCOUNTED_BELOW {
            return resp;
        }
        self.held.fetch_add(len, Ordering::Relaxed);
        resp.hold_until_sent(Share {
            held: self.held.clone(),
            len,
        })
    }
}

/// One page's bytes in the count, taken out when the server drops the response.
struct Share {
    held: Arc<AtomicUsize>,
    len: usize,
}

impl Drop for Share {
    fn drop(&mut self) {
        self.held.fetch_sub(self.len, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(len: usize) -> IoList {
        IoList::from_scratch(vec![b'x'; len])
    }

    #[test]
    fn a_page_counts_until_its_response_is_dropped() {
        let whole = WholePages::new(1 << 20);
        let a = whole.respond(page(300_000));
        let b = whole.respond(page(200_000));
        assert_eq!(whole.held(), 500_000);
        assert_eq!(whole.whole_max(4 << 20), (1 << 20) - 500_000);
        drop(a);
        assert_eq!(whole.held(), 200_000);
        drop(b);
        assert_eq!(whole.held(), 0);
        assert_eq!(whole.whole_max(4 << 20), 1 << 20);
    }

    #[test]
    fn small_pages_are_not_counted_and_always_fit() {
        let whole = WholePages::new(100_000);
        let big = whole.respond(page(100_000));
        let small = whole.respond(page(UNCOUNTED_BELOW - 1));
        assert_eq!(whole.held(), 100_000);
        // The budget is spent: pages past the uncounted size stream, smaller ones do not.
        assert_eq!(whole.whole_max(4 << 20), UNCOUNTED_BELOW);
        assert_eq!(whole.whole_max(1000), 1000, "--full-body-max still bounds");
        drop((big, small));
        assert_eq!(whole.held(), 0);
    }
}
