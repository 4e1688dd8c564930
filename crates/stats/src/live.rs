//! `/_galleon` as a galleon-live page (dogfood): rendered first as plain HTML (it works without
//! JavaScript, reloading itself from a `<noscript>` meta refresh), then joined by the LiveView
//! client over `/_galleon/live/websocket`. A [`Ticker`] thread broadcasts a tick every
//! [`REFRESH_SECS`] seconds while at least one view is connected; each view re-reads the
//! snapshot then, and only the assigns that changed are diffed and sent.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use galleon_live::{Info, Live, LiveView, Socket, ViewError};
use serde_json::Value as Json;

use crate::diagnostics::{Diagnostics, PAGE_PATH};
use crate::page::{self, REFRESH_SECS, TEMPLATE, TITLE};

/// Where the live page's socket (`{prefix}/websocket`) and scripts (`{prefix}/assets/`) live.
pub(crate) const LIVE_PREFIX: &str = "/_galleon/live";

/// The topic the ticks are broadcast on.
const TOPIC: &str = "galleon-stats:tick";

/// The message a tick broadcasts: "read the statistics again".
struct Tick;

/// The live mount of the stats page and the ticker that keeps its views current.
#[derive(Clone)]
pub(crate) struct LivePage {
    pub(crate) live: Live,
    /// Held by the routes so the ticker lives as long as they do (views hold it too).
    _ticker: Arc<Ticker>,
}

impl LivePage {
    /// The live page of `d`.
    pub(crate) fn new(d: &Diagnostics) -> Result<LivePage, String> {
        let engine = page::engine().map_err(|e| e.to_string())?;
        // The views reach the ticker through this slot, filled once the mount is built: the
        // ticker holds the mount (to broadcast), the mount's factory only a weak reference.
        let slot: Arc<OnceLock<Weak<Ticker>>> = Arc::default();
        let (view_d, view_slot) = (d.clone(), slot.clone());
        let live = Live::builder(engine)
            .prefix(LIVE_PREFIX)
            .layout(|p| page::document(p.view, p.csrf_meta, p.scripts, true))
            .view(PAGE_PATH, TEMPLATE, move || StatsView {
                diagnostics: view_d.clone(),
                ticker: view_slot.get().and_then(Weak::upgrade),
                joined: false,
            })
            .build()
            .map_err(|e| e.to_string())?;
        let ticker = Arc::new(Ticker::new(
            Duration::from_secs(REFRESH_SECS.into()),
            Box::new({
                let live = live.clone();
                move || live.broadcast(TOPIC, Info::new(Tick))
            }),
        ));
        let _ = slot.set(Arc::downgrade(&ticker));
        Ok(LivePage {
            live,
            _ticker: ticker,
        })
    }
}

/// One client's stats page: the snapshot's figures as assigns, re-read at each tick.
struct StatsView {
    diagnostics: Diagnostics,
    ticker: Option<Arc<Ticker>>,
    /// Counted among the ticker's views (connected, mounted): leaves it when dropped.
    joined: bool,
}

impl StatsView {
    /// Sets every assign from a fresh snapshot; only those whose value differs are marked
    /// changed, so only they are rendered and sent.
    fn read(&self, socket: &mut Socket) {
        for (name, value) in self.diagnostics.page_assigns() {
            socket.assign(&name, value);
        }
    }
}

impl LiveView for StatsView {
    fn mount(&mut self, _params: &Json, _session: &Json, s: &mut Socket) -> Result<(), ViewError> {
        s.page_title(TITLE);
        self.read(s);
        if s.connected() && !self.joined {
            s.subscribe(TOPIC);
            if let Some(t) = &self.ticker {
                t.join();
                self.joined = true;
            }
        }
        Ok(())
    }

    fn handle_event(&mut self, event: &str, _: &Json, _: &mut Socket) -> Result<(), ViewError> {
        Err(format!("the stats page has no event {event:?}").into())
    }

    fn handle_info(&mut self, info: Info, s: &mut Socket) -> Result<(), ViewError> {
        if info.downcast_ref::<Tick>().is_some() {
            self.read(s);
        }
        Ok(())
    }
}

impl Drop for StatsView {
    fn drop(&mut self) {
        if let (true, Some(t)) = (self.joined, &self.ticker) {
            t.leave();
        }
    }
}

/// Calls `tick` every `every` on a thread of its own, which runs only while views are joined:
/// the first [`Ticker::join`] starts it, and it ends at the first tick after the last
/// [`Ticker::leave`].
pub(crate) struct Ticker {
    every: Duration,
    tick: Box<dyn Fn() -> usize + Send + Sync>,
    state: Mutex<TickState>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct TickState {
    views: usize,
    running: bool,
}

impl Ticker {
    pub(crate) fn new(every: Duration, tick: Box<dyn Fn() -> usize + Send + Sync>) -> Ticker {
        Ticker {
            every,
            tick,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TickState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One more view joined: starts the thread if it is not running.
    pub(crate) fn join(self: &Arc<Self>) {
        let mut st = self.state();
        st.views += 1;
        if st.running {
            return;
        }
        let me = self.clone();
        match std::thread::Builder::new()
            .name("galleon-stats-tick".to_owned())
            .spawn(move || me.run())
        {
            Ok(_) => st.running = true,
            Err(e) => tracing::error!(error = %e, "starting the stats page's ticker"),
        }
    }

    /// One view fewer.
    pub(crate) fn leave(&self) {
        let mut st = self.state();
        st.views = st.views.saturating_sub(1);
    }

    /// Whether the thread is running now.
    #[cfg(test)]
    fn running(&self) -> bool {
        self.state().running
    }

    fn run(self: Arc<Self>) {
        loop {
            std::thread::sleep(self.every);
            {
                // Checked and cleared under the lock `join` takes: a view joining now either
                // sees `running` false and starts a new thread, or is counted before this.
                let mut st = self.state();
                if st.views == 0 {
                    st.running = false;
                    return;
                }
            }
            (self.tick)();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use galleon_template::{Changed, Value};

    use crate::record::{Answered, RouteKey, Stats, StatsConfig};

    /// Waits up to 20 s for `f`, failing with `what`.
    fn wait(what: &str, f: impl Fn() -> bool) {
        let start = Instant::now();
        while !f() {
            assert!(start.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_ticker_runs_only_while_views_are_joined() {
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = Arc::new(Ticker::new(
            Duration::from_millis(1),
            Box::new({
                let ticks = ticks.clone();
                move || ticks.fetch_add(1, Ordering::Relaxed)
            }),
        ));
        assert!(!t.running());
        t.join();
        t.join();
        assert!(t.running());
        wait("ticks while joined", || ticks.load(Ordering::Relaxed) >= 3);
        t.leave();
        assert!(t.running(), "one view is still joined");
        t.leave();
        wait("the thread ends with the last view", || !t.running());
        let after = ticks.load(Ordering::Relaxed);
        // Joining again starts it again.
        t.join();
        wait("ticks again", || ticks.load(Ordering::Relaxed) > after);
        t.leave();
        wait("and ends again", || !t.running());
    }

    #[test]
    fn a_tick_reads_the_snapshot_and_only_what_changed_is_sent() {
        let stats = Arc::new(Stats::new(StatsConfig {
            record: true,
            access_log: false,
        }));
        let d = Diagnostics::new(&stats);
        let mut view = StatsView {
            diagnostics: d.clone(),
            ticker: None,
            joined: false,
        };
        let mut s = Socket::new(true);
        view.mount(&Json::Null, &Json::Null, &mut s).unwrap();
        assert!(s.changed("requests") && s.changed("routes"));
        assert_eq!(s.int("requests"), 0);
        let template = page::engine().unwrap().live(TEMPLATE).unwrap();
        let names: Vec<String> = d.page_assigns().into_iter().map(|(k, _)| k).collect();
        let values = |s: &Socket| -> Vec<(String, Value)> {
            names
                .iter()
                .map(|k| (k.clone(), s.get(k).cloned().unwrap_or(Value::Nil)))
                .collect()
        };
        let lookup = |all: Vec<(String, Value)>| {
            move |name: &str| all.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        };
        let before = values(&s);
        let first = template
            .render(lookup(before.clone()), Changed::All, None)
            .unwrap();
        let request = Answered {
            method: "GET",
            route: RouteKey::Labelled("/a"),
            status: 200,
            elapsed: Duration::from_micros(150),
            bytes: 10,
            writes: None,
            completed: true,
        };
        stats.answered(&request);
        view.handle_info(Info::new(Tick), &mut s).unwrap();
        assert_eq!(s.int("requests"), 1, "the tick re-read the snapshot");
        let after = values(&s);
        let changed: Vec<&str> = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| b.1 != a.1)
            .map(|(b, _)| b.0.as_str())
            .collect();
        assert!(changed.contains(&"requests"), "{changed:?}");
        assert!(!changed.contains(&"refresh_secs"), "{changed:?}");
        let next = template
            .render(
                lookup(after.clone()),
                Changed::Only(&|n| changed.contains(&n)),
                Some(&first),
            )
            .unwrap();
        let mut diff = String::new();
        template.diff(Some(&first), &next, &mut diff);
        assert!(diff.contains("\"1\""), "the new count is sent: {diff}");
        assert!(!diff.contains("<h2>"), "no static text is resent: {diff}");
        assert!(!diff.contains("resident memory"), "{diff}");
        // Another request to the same route, another tick: its row's numbers change, the
        // statics of the page and of the table are not sent again.
        stats.answered(&request);
        view.handle_info(Info::new(Tick), &mut s).unwrap();
        let again = values(&s);
        let changed: Vec<&str> = after
            .iter()
            .zip(&again)
            .filter(|(b, a)| b.1 != a.1)
            .map(|(b, _)| b.0.as_str())
            .collect();
        let last = template
            .render(
                lookup(again),
                Changed::Only(&|n| changed.contains(&n)),
                Some(&next),
            )
            .unwrap();
        diff.clear();
        template.diff(Some(&next), &last, &mut diff);
        assert!(diff.contains("\"2\""), "the count is 2: {diff}");
        assert!(!diff.contains("<td>") && !diff.contains("<h2>"), "{diff}");
    }
}
