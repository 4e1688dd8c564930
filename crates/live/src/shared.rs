//! What every page render and every socket of one live mount reads: its views by path, the
//! signer of its tokens, its limits, its broadcast topics and its counters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use std::time::{SystemTime, UNIX_EPOCH};

use galleon_template::LiveTemplate;

use crate::limits::Limits;
use crate::pubsub::PubSub;
use crate::token::Signer;
use crate::view::LiveView;

/// Makes a fresh view for each page render and each join.
pub(crate) type Factory = Arc<dyn Fn() -> Box<dyn LiveView> + Send + Sync>;

/// One live page: the template it renders, the factory of its views, and its counters.
pub(crate) struct Route {
    pub(crate) template: LiveTemplate,
    pub(crate) factory: Factory,
    pub(crate) counters: Arc<ViewCounters>,
}

/// Largest diff size the per-view histograms tell apart; bigger ones count as this.
const MAX_TRACKED_BYTES: u64 = 64 * 1024 * 1024;

/// What the views of one page have done: joins, bytes of their first renders, and the sizes
/// of their diffs (a histogram, for the percentiles).
pub(crate) struct ViewCounters {
    pub(crate) views_open: AtomicUsize,
    pub(crate) joins: AtomicU64,
    pub(crate) rendered_bytes: AtomicU64,
    pub(crate) diffs: AtomicU64,
    pub(crate) diff_bytes: AtomicU64,
    pub(crate) sizes: Mutex<Histogram<u64>>,
}

impl Default for ViewCounters {
    fn default() -> ViewCounters {
        ViewCounters {
            views_open: AtomicUsize::new(0),
            joins: AtomicU64::new(0),
            rendered_bytes: AtomicU64::new(0),
            diffs: AtomicU64::new(0),
            diff_bytes: AtomicU64::new(0),
            // Two significant digits: sizes within 1%, a few KiB of buckets.
            sizes: Mutex::new(
                Histogram::new_with_bounds(1, MAX_TRACKED_BYTES, 2)
                    .expect("constant bounds are valid"),
            ),
        }
    }
}

impl ViewCounters {
    /// Counts one diff of `bytes`.
    pub(crate) fn diff(&self, bytes: usize) {
        let bytes = bytes as u64;
        self.diffs.fetch_add(1, Ordering::Relaxed);
        self.diff_bytes.fetch_add(bytes, Ordering::Relaxed);
        let mut h = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        h.saturating_record(bytes.clamp(1, MAX_TRACKED_BYTES));
    }

    /// The diff size at quantile `q` (0 with no diffs).
    pub(crate) fn diff_quantile(&self, q: f64) -> u64 {
        let h = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(q)
        }
    }
}

/// The salt of session tokens (`data-phx-session`).
pub(crate) const SESSION_SALT: &str = "galleon-live session";
/// The salt of CSRF tokens (the page's `csrf-token` meta, sent back as `_csrf_token`).
pub(crate) const CSRF_SALT: &str = "galleon-live csrf";

/// The state of one live mount, shared by its pages and sockets.
pub(crate) struct Shared {
    /// Where the mount lives, such as `/live` (the socket is `{prefix}/websocket`).
    pub(crate) prefix: String,
    pub(crate) routes: HashMap<String, Route>,
    pub(crate) signer: Signer,
    pub(crate) limits: Limits,
    /// Origins allowed besides the request's own host (`scheme://host[:port]`).
    pub(crate) origins: Vec<String>,
    /// Extra HTML for the default layout's `<head>` (stylesheets).
    pub(crate) head: String,
    pub(crate) pubsub: PubSub,
    pub(crate) counters: Counters,
    /// For view ids: unique within this process.
    next_id: AtomicU64,
    /// Start of this process's ids, so two runs do not hand out the same ones.
    id_base: u64,
}

impl Shared {
    pub(crate) fn new(
        prefix: String,
        routes: HashMap<String, Route>,
        signer: Signer,
        limits: Limits,
        origins: Vec<String>,
        head: String,
    ) -> Shared {
        let id_base = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Shared {
            prefix,
            routes,
            signer,
            limits,
            origins,
            head,
            pubsub: PubSub::default(),
            counters: Counters::default(),
            next_id: AtomicU64::new(0),
            id_base,
        }
    }

    /// A fresh element id for a page's view, `phx-` and 16 hex digits.
    pub(crate) fn view_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("phx-{:016x}", self.id_base.wrapping_add(n))
    }
}

/// Seconds since the Unix epoch, for token stamps.
pub(crate) fn now_unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What a live mount has done, counted as it happens.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) sockets_open: AtomicUsize,
    pub(crate) views_open: AtomicUsize,
    pub(crate) sockets_refused: AtomicU64,
    pub(crate) page_renders: AtomicU64,
    pub(crate) joins: AtomicU64,
    pub(crate) joins_refused: AtomicU64,
    pub(crate) events: AtomicU64,
    pub(crate) events_limited: AtomicU64,
    pub(crate) crashes: AtomicU64,
    pub(crate) diffs: AtomicU64,
    pub(crate) diff_bytes: AtomicU64,
    pub(crate) largest_diff: AtomicU64,
    pub(crate) rendered_bytes: AtomicU64,
    pub(crate) broadcasts: AtomicU64,
}

impl Counters {
    /// Counts one diff of `bytes` sent.
    pub(crate) fn diff(&self, bytes: usize) {
        let bytes = bytes as u64;
        self.diffs.fetch_add(1, Ordering::Relaxed);
        self.diff_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.largest_diff.fetch_max(bytes, Ordering::Relaxed);
    }
}
