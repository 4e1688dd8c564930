//! Who holds `$all` back. `$all` is read below the oldest transaction still running anywhere in
//! the cluster (`pg_snapshot_xmin`), so one transaction left open, in any database, delays every
//! event committed after it began: delayed, never lost, but silently. A task checks now and then
//! whether committed events wait behind such a transaction; one older than the warning age is
//! logged (its `pid`, database and age, once per transaction) and shown in [`crate::StoreStats`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::Pool;

use crate::time::Timestamp;

/// The oldest running transaction, when committed events wait behind it: its `pid`, database
/// and seconds open. One row at most; no row when nothing is held back.
const SQL_HOLDER: &str = "\
WITH line AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS x), \
     top AS (SELECT position FROM events ORDER BY position DESC LIMIT 1) \
SELECT a.pid, a.datname::text, \
       EXTRACT(EPOCH FROM clock_timestamp() - a.xact_start)::float8 \
FROM line, top, pg_stat_activity a \
WHERE top.position >= (line.x << 16) \
  AND a.backend_xid IS NOT NULL \
  AND a.backend_xid::text::bigint = line.x % 4294967296 \
LIMIT 1";

/// What the check last found, read by [`crate::Store::stats`] without a query.
#[derive(Debug, Default)]
pub(crate) struct HeldBack {
    /// The holder's `pid`; 0: nothing held back past the warning age.
    pid: AtomicU32,
    /// When the holder's transaction began, microseconds since the epoch.
    since_micros: AtomicU64,
}

impl HeldBack {
    /// The holder's `pid` and how long its transaction has been open, if one holds `$all` back
    /// past the warning age.
    pub(crate) fn get(&self) -> Option<(u32, Duration)> {
        let pid = self.pid.load(Ordering::Relaxed);
        (pid != 0).then(|| {
            let since = self.since_micros.load(Ordering::Relaxed);
            let now = Timestamp::now().as_micros().max(0) as u64;
            (pid, Duration::from_micros(now.saturating_sub(since)))
        })
    }
}

/// How often the holder is looked for: a quarter of the warning age, within 250 ms to 2 s.
fn check_every(warning: Duration) -> Duration {
    (warning / 4).clamp(Duration::from_millis(250), Duration::from_secs(2))
}

/// Looks for a transaction holding `$all` back for as long as the store is open.
pub(super) async fn watch(pool: Pool, found: Arc<HeldBack>, warning: Duration) {
    let mut tick = tokio::time::interval(check_every(warning));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The transaction last warned about: (pid, start), so each is logged once.
    let mut warned: Option<(i32, u64)> = None;
    loop {
        tick.tick().await;
        let row = match pool.get().await {
            Ok(client) => client.query_opt(SQL_HOLDER, &[]).await,
            Err(_) => continue,
        };
        let holder = match row {
            Ok(Some(r)) => {
                let (pid, db, age): (i32, Option<String>, Option<f64>) =
                    (r.get(0), r.get(1), r.get(2));
                age.filter(|a| *a >= warning.as_secs_f64())
                    .map(|a| (pid, db, a))
            }
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(error = %e, "looking for a transaction holding $all back");
                continue;
            }
        };
        match holder {
            Some((pid, db, age)) => {
                let now = Timestamp::now().as_micros().max(0) as u64;
                let since = now.saturating_sub((age * 1e6) as u64);
                found.since_micros.store(since, Ordering::Relaxed);
                found.pid.store(pid as u32, Ordering::Relaxed);
                // The same transaction seen again has (about) the same start.
                let same = warned.is_some_and(|(p, s)| p == pid && s.abs_diff(since) < 1_000_000);
                if !same {
                    tracing::warn!(
                        pid,
                        database = db.as_deref().unwrap_or("?"),
                        open_for_s = (age * 10.0).round() / 10.0,
                        "$all is held back by a transaction open for {age:.1} s (pid {pid}, \
                         database {}): events committed since it began are delivered when it \
                         ends (consider idle_in_transaction_session_timeout)",
                        db.as_deref().unwrap_or("?"),
                    );
                    warned = Some((pid, since));
                }
            }
            None => {
                if let Some((pid, _)) = warned.take() {
                    tracing::info!(pid, "$all is no longer held back");
                }
                found.pid.store(0, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_runs_four_times_per_warning_age_within_bounds() {
        assert_eq!(
            check_every(Duration::from_secs(5)),
            Duration::from_millis(1250)
        );
        assert_eq!(
            check_every(Duration::from_millis(100)),
            Duration::from_millis(250)
        );
        assert_eq!(check_every(Duration::from_secs(60)), Duration::from_secs(2));
    }

    #[test]
    fn nothing_found_is_none() {
        assert_eq!(HeldBack::default().get(), None);
    }
}
