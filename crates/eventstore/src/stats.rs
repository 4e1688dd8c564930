//! [`StoreStats`]: counters of one store handle (and its clones) for a stats page: appends,
//! conflicts, live subscribers, the `$all` watermark and how far it trails. Each is an atomic
//! updated once per append call or per subscriber, never per event; reading them takes no lock
//! and runs no query.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::types::AppendResult;

/// A snapshot of a store handle's counters ([`crate::Store::stats`]). Counts start at 0 when the
/// store is opened and cover the appends and subscribers of this process only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Append calls that succeeded (an idempotent retry answered from storage counts too).
    pub appends: u64,
    /// Events those appends carried.
    pub events_appended: u64,
    /// Appends refused because the stream did not satisfy their expected version.
    pub conflicts: u64,
    /// Subscriptions open now ([`crate::Subscription`]s not yet dropped: catching up or live,
    /// persistent subscriptions' consumers and consumer-group members included).
    pub subscribers: usize,
    /// Of those, the ones following the live feed now (the rest read the store themselves).
    pub live_subscribers: usize,
    /// The `$all` watermark this process's fan-out has reached: one past the last position it
    /// published (0 while nobody subscribes and it has never run).
    pub all_watermark: u64,
    /// How far the watermark trailed the appends when the fan-out last published: the time from
    /// the newest event's `recorded_at` (its transaction's time) to its publication, in
    /// microseconds. On PostgreSQL this includes the wait for older transactions of the cluster
    /// (see ARCHITECTURE.md, "`$all` on PostgreSQL"). `None` until a batch has been published.
    pub all_lag_micros: Option<u64>,
    /// PostgreSQL: the `pid` of a transaction that has held `$all` back past
    /// [`crate::OpenOptions::held_back_warning`] (committed events wait for it to end), as the
    /// last check, at most a couple of seconds old, found it. `None` otherwise, and on SQLite.
    pub all_held_back_by: Option<u32>,
    /// How long that transaction has been open, in microseconds.
    pub all_held_back_micros: Option<u64>,
    /// Consumer-group heartbeat transactions this handle ran (renewals, joins and departures
    /// of its members): a handful per group per heartbeat interval, however many members
    /// the group has here (see `consumer_group.rs`).
    pub group_heartbeats: u64,
}

/// The append and group-heartbeat counters of one store handle, shared by its clones.
#[derive(Debug, Default)]
pub(crate) struct AppendCounters {
    appends: AtomicU64,
    events: AtomicU64,
    conflicts: AtomicU64,
    /// [`StoreStats::group_heartbeats`].
    group_heartbeats: AtomicU64,
}

impl AppendCounters {
    /// Counts the outcome of one append call.
    pub(crate) fn note(&self, outcome: &Result<AppendResult>) {
        match outcome {
            Ok(r) => {
                self.appends.fetch_add(1, Ordering::Relaxed);
                let n = r.last_version.saturating_sub(r.first_version) + 1;
                self.events.fetch_add(n, Ordering::Relaxed);
            }
            Err(Error::WrongExpectedVersion { .. }) => {
                self.conflicts.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {}
        }
    }

    /// Counts one consumer-group heartbeat transaction.
    pub(crate) fn note_group_heartbeat(&self) {
        self.group_heartbeats.fetch_add(1, Ordering::Relaxed);
    }

    /// [`StoreStats::group_heartbeats`] so far.
    pub(crate) fn group_heartbeats(&self) -> u64 {
        self.group_heartbeats.load(Ordering::Relaxed)
    }

    /// `(appends, events_appended, conflicts)`.
    pub(crate) fn load(&self) -> (u64, u64, u64) {
        (
            self.appends.load(Ordering::Relaxed),
            self.events.load(Ordering::Relaxed),
            self.conflicts.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExpectedVersion;

    #[test]
    fn appends_events_and_conflicts_are_counted_apart() {
        let c = AppendCounters::default();
        let ok = |first, last| {
            Ok(AppendResult {
                first_version: first,
                last_version: last,
                first_position: 10,
                last_position: 10 + last - first,
            })
        };
        c.note(&ok(0, 2));
        c.note(&ok(3, 3));
        c.note(&Err(Error::WrongExpectedVersion {
            expected: ExpectedVersion::NoStream,
            actual: Some(3),
        }));
        c.note(&Err(Error::InvalidInput("x".into())));
        assert_eq!(c.load(), (2, 4, 1));
    }
}
