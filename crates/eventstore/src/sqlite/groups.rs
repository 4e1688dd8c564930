//! Consumer groups on SQLite: `subscription_partitions` (a checkpoint and an owner per
//! partition) and `subscription_members` (a row per member with its expiry). A heartbeat is one
//! `BEGIN IMMEDIATE` transaction: the write lock serialises the members of every group, so each
//! sees the others' claims and releases (the rule itself is `crate::groups::plan`).

use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use super::subscriptions::DELIVERS;
use crate::error::Result;
use crate::groups::{GroupSettings, MemberState, PartitionState, not_a_group, plan};
use crate::time::Timestamp;

impl SqliteStore {
    /// Runs one heartbeat of `member` (or its departure, `leave`) and returns the partitions it
    /// holds afterwards with their checkpoints; `None` when the subscription does not exist.
    pub(crate) async fn group_heartbeat(
        &self,
        name: &str,
        member: &str,
        leave: bool,
    ) -> Result<Option<Vec<(u32, u64)>>> {
        let (name, member) = (name.to_owned(), member.to_owned());
        self.with_reader(move |conn| {
            let tx = rusqlite::Transaction::new_unchecked(
                conn,
                rusqlite::TransactionBehavior::Immediate,
            )?;
            let Some(settings) = settings(&tx, &name)? else {
                return Ok(None);
            };
            let now = Timestamp::now().as_micros();
            if leave {
                tx.prepare_cached(
                    "DELETE FROM subscription_members WHERE name = ?1 AND member = ?2",
                )?
                .execute(params![name, member])?;
            } else {
                let expires = now.saturating_add(settings.timeout_ms().saturating_mul(1000));
                tx.prepare_cached(
                    "INSERT INTO subscription_members (name, member, expires_at) \
                     VALUES (?1, ?2, ?3) ON CONFLICT (name, member) \
                     DO UPDATE SET expires_at = excluded.expires_at",
                )?
                .execute(params![name, member, expires])?;
            }
            tx.prepare_cached(
                "DELETE FROM subscription_members WHERE name = ?1 AND expires_at <= ?2",
            )?
            .execute(params![name, now])?;
            let mut live: Vec<String> = tx
                .prepare_cached("SELECT member FROM subscription_members WHERE name = ?1")?
                .query_map([&name], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            live.sort_unstable();
            let owners: Vec<Option<String>> = tx
                .prepare_cached(
                    "SELECT owner FROM subscription_partitions WHERE name = ?1 ORDER BY partition",
                )?
                .query_map([&name], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            let plan = plan(&live, &owners, &member);
            let mut set = tx.prepare_cached(
                "UPDATE subscription_partitions SET owner = ?3 WHERE name = ?1 AND partition = ?2",
            )?;
            for p in &plan.release {
                set.execute(params![name, p, None::<String>])?;
            }
            for p in &plan.claim {
                set.execute(params![name, p, member])?;
            }
            drop(set);
            let owned: Vec<(u32, u64)> = tx
                .prepare_cached(
                    "SELECT partition, checkpoint FROM subscription_partitions \
                     WHERE name = ?1 AND owner = ?2 ORDER BY partition",
                )?
                .query_map(params![name, member], |r| {
                    Ok((r.get::<_, u32>(0)?, r.get::<_, i64>(1)? as u64))
                })?
                .collect::<rusqlite::Result<_>>()?;
            tx.commit()?;
            Ok(Some(owned))
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
