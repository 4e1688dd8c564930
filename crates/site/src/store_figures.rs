//! The event store's figures for the stats page, `stats.json` and `/metrics`, read from
//! [`Store::stats`] (atomics, no query) at the moment of each request.

use galleon_eventstore::Store;
use galleon_stats::Figure;

/// The figures of `store`, read when asked: a source for [`galleon_stats::Diagnostics::figures`].
pub fn source(store: Store) -> impl Fn() -> Vec<Figure> + Send + Sync + 'static {
    move || {
        let s = store.stats();
        let mut figures = vec![
            Figure::counter(
                "galleon_events_appends",
                "appends stored (this process)",
                s.appends as f64,
            ),
            Figure::counter(
                "galleon_events_appended",
                "events those appends carried",
                s.events_appended as f64,
            ),
            Figure::counter(
                "galleon_events_conflicts",
                "appends refused for their expected version",
                s.conflicts as f64,
            ),
            Figure::gauge(
                "galleon_events_subscribers",
                "subscriptions open",
                s.subscribers as f64,
            ),
            Figure::gauge(
                "galleon_events_live_subscribers",
                "subscriptions following the live feed",
                s.live_subscribers as f64,
            ),
            Figure::gauge(
                "galleon_events_all_watermark",
                "$all position the fan-out has published up to",
                s.all_watermark as f64,
            ),
        ];
        if let Some(lag) = s.all_lag_micros {
            figures.push(Figure::gauge(
                "galleon_events_all_lag_seconds",
                "$all lag: newest event's commit to its publication, seconds",
                lag as f64 / 1e6,
            ));
        }
        if let (Some(pid), Some(age)) = (s.all_held_back_by, s.all_held_back_micros) {
            figures.push(Figure::gauge(
                "galleon_events_all_held_back_seconds",
                "$all held back by an open transaction: its age, seconds",
                age as f64 / 1e6,
            ));
            figures.push(Figure::gauge(
                "galleon_events_all_held_back_pid",
                "$all held back by an open transaction: its pid",
                f64::from(pid),
            ));
        }
        figures
    }
}
