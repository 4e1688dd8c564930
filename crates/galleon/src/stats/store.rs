//! The event store's figures for the stats page, `stats.json` and `/metrics`, read from
//! [`Store::stats`] (atomics, no query) at the moment of each request.

use std::sync::Arc;

use galleon_eventstore::Store;

use super::routes::{EventsSource, Figure};

/// The figures of `store`, read when asked.
pub(crate) fn source(store: Store) -> EventsSource {
    Arc::new(move || {
        let s = store.stats();
        let mut figures = vec![
            Figure {
                name: "galleon_events_appends",
                help: "appends stored (this process)",
                counter: true,
                value: s.appends as f64,
            },
            Figure {
                name: "galleon_events_appended",
                help: "events those appends carried",
                counter: true,
                value: s.events_appended as f64,
            },
            Figure {
                name: "galleon_events_conflicts",
                help: "appends refused for their expected version",
                counter: true,
                value: s.conflicts as f64,
            },
            Figure {
                name: "galleon_events_subscribers",
                help: "subscriptions open",
                counter: false,
                value: s.subscribers as f64,
            },
            Figure {
                name: "galleon_events_live_subscribers",
                help: "subscriptions following the live feed",
                counter: false,
                value: s.live_subscribers as f64,
            },
            Figure {
                name: "galleon_events_all_watermark",
                help: "$all position the fan-out has published up to",
                counter: false,
                value: s.all_watermark as f64,
            },
        ];
        if let Some(lag) = s.all_lag_micros {
            figures.push(Figure {
                name: "galleon_events_all_lag_seconds",
                help: "$all lag: newest event's commit to its publication, seconds",
                counter: false,
                value: lag as f64 / 1e6,
            });
        }
        figures
    })
}
