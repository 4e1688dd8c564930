//! Consumer groups on SQLite: `subscription_partitions` (a checkpoint and an owner per
//! partition) and `subscription_members` (a row per member with its expiry). A heartbeat (of all
//! of a process's members of one group) is one `BEGIN IMMEDIATE` transaction: the write lock
//! serialises the heartbeats of every group, so each sees the others' claims and releases (the
//! rule itself is `crate::groups::plan`).

use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use super::subscriptions::DELIVERS;
use crate::error::Result;
use crate::groups::{
    Beat, GroupSettings, Holdings, MemberState, PartitionState, holdings, not_a_group, plan_beat,
};
use crate::time::Timestamp;

impl SqliteStore {
    /// Runs one heartbeat of this process's members of group `name` ([`Beat`]: renewals and
    /// departures) in one `BEGIN IMMEDIATE` transaction, and returns the group's settings and
    /// what each local member holds afterwards; `None` when the subscription does not exist.
    /// Partition rows are written only where an owner changed.
    pub(crate) async fn group_beat(
        &self,
        name: &str,
        beat: Beat,
    ) -> Result<Option<(GroupSettings, Holdings)>> {
        let name = name.to_owned();
        self.with_reader(move |conn| {
            let tx = rusqlite::Transaction::new_unchecked(
                conn,
                rusqlite::TransactionBehavior::Immediate,
            )?;
            let Some(settings) = settings(&tx, &name)? else {
                return Ok(None);
            };
            let now = Timestamp::now().as_micros();
            let mut leave = tx.prepare_cached(
                "DELETE FROM subscription_members WHERE name = ?1 AND member = ?2",
            )?;
            for member in &beat.leave {
                leave.execute(params![name, member])?;
            }
            drop(leave);
            let expires = now.saturating_add(settings.timeout_ms().saturating_mul(1000));
            let mut renew = tx.prepare_cached(
                "INSERT INTO subscription_members (name, member, expires_at) \
                 VALUES (?1, ?2, ?3) ON CONFLICT (name, member) \
                 DO UPDATE SET expires_at = excluded.expires_at",
            )?;
            for member in &beat.renew {
                renew.execute(params![name, member, expires])?;
            }
            drop(renew);
            tx.prepare_cached(
                "DELETE FROM subscription_members WHERE name = ?1 AND expires_at <= ?2",
            )?
            .execute(params![name, now])?;
            let mut live: Vec<String> = tx
                .prepare_cached("SELECT member FROM subscription_members WHERE name = ?1")?
                .query_map([&name], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            live.sort_unstable();
            let rows: Vec<(Option<String>, u64)> = tx
                .prepare_cached(
                    "SELECT owner, checkpoint FROM subscription_partitions \
                     WHERE name = ?1 ORDER BY partition",
                )?
                .query_map([&name], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?
                .collect::<rusqlite::Result<_>>()?;
            let (mut owners, checkpoints): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
            let changed = plan_beat(&live, &mut owners, &beat);
            let mut set = tx.prepare_cached(
                "UPDATE subscription_partitions SET owner = ?3 WHERE name = ?1 AND partition = ?2",
            )?;
            for p in changed {
                set.execute(params![name, p as i64, owners[p]])?;
            }
            drop(set);
            tx.commit()?;
            Ok(Some((
                settings,
                holdings(&live, &owners, &checkpoints, &beat.local),
            )))
        })
        .await
    }

    /// Every partition and every member not yet expired; `None` when the subscription does
    /// not exist.
    pub(crate) async fn group_state(
        &self,
        name: &str,
    ) -> Result<Option<(Vec<PartitionState>, Vec<MemberState>)>> {
        let name = name.to_owned();
        self.with_reader(move |conn| {
            let tx = conn.unchecked_transaction()?;
            if settings(&tx, &name)?.is_none() {
                return Ok(None);
            }
            let partitions = tx
                .prepare_cached(
                    "SELECT partition, checkpoint, owner FROM subscription_partitions \
                     WHERE name = ?1 ORDER BY partition",
                )?
                .query_map([&name], |r| {
                    Ok(PartitionState {
                        partition: r.get(0)?,
                        checkpoint: r.get::<_, i64>(1)? as u64,
                        owner: r.get(2)?,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            let members = tx
                .prepare_cached(
                    "SELECT member, expires_at FROM subscription_members \
                     WHERE name = ?1 AND expires_at > ?2 ORDER BY member",
                )?
                .query_map(params![name, Timestamp::now().as_micros()], |r| {
                    Ok(MemberState {
                        member: r.get(0)?,
                        expires_at: Timestamp::from_micros(r.get(1)?),
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            Ok(Some((partitions, members)))
        })
        .await
    }

    /// Acknowledges `position` in partition `partition` (the partition of its stream): moves
    /// the partition's checkpoint forward to `position + 1` if the group delivers an event
    /// there ([`DELIVERS`]) and, with `member`, that member holds the partition, all in the
    /// statement that moves it; `None` otherwise, or when there is no such partition.
    pub(crate) async fn ack_partition(
        &self,
        name: &str,
        partition: u32,
        position: i64,
        member: Option<&str>,
    ) -> Result<Option<u64>> {
        let (name, member) = (name.to_owned(), member.map(str::to_owned));
        self.with_reader(move |conn| {
            let stored: Option<i64> = conn
                .prepare_cached(&format!(
                    "UPDATE subscription_partitions SET checkpoint = MAX(checkpoint, ?2 + 1) \
                     WHERE name = ?1 AND partition = ?3 AND (?4 IS NULL OR owner = ?4) \
                       AND {DELIVERS} RETURNING checkpoint"
                ))?
                .query_row(params![name, position, partition, member], |r| r.get(0))
                .optional()?;
            Ok(stored.map(|c| c as u64))
        })
        .await
    }

    /// The stream and type of the event at `position`, if one is stored there.
    pub(crate) async fn event_at(&self, position: i64) -> Result<Option<(String, String)>> {
        self.with_reader(move |conn| {
            Ok(conn
                .prepare_cached("SELECT stream_id, event_type FROM events WHERE position = ?1")?
                .query_row([position], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?)
        })
        .await
    }
}

/// The group settings of subscription `name`: `None` when it does not exist, an error when it is
/// not a group.
fn settings(conn: &rusqlite::Connection, name: &str) -> Result<Option<GroupSettings>> {
    let row: Option<(Option<i64>, Option<i64>)> = conn
        .prepare_cached("SELECT partitions, member_timeout_ms FROM subscriptions WHERE name = ?1")?
        .query_row([name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match row {
        None => Ok(None),
        Some((p, t)) => GroupSettings::from_columns(p, t)
            .map(Some)
            .ok_or_else(|| not_a_group(name)),
    }
}
