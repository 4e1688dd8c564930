//! Consumer groups on PostgreSQL: `subscription_partitions` (a checkpoint and an owner per
//! partition) and `subscription_members` (a row per member, its expiry by the server's clock, so
//! members on several nodes agree on who is dead). A heartbeat is one transaction that locks the
//! subscription's row first, so the heartbeats of one group run one at a time and each sees the
//! others' claims and releases (the rule itself is `crate::groups::plan`).

use super::PgStore;
use super::subscriptions::DELIVERS;
use crate::error::Result;
use crate::groups::{GroupSettings, MemberState, PartitionState, not_a_group, plan};
use crate::time::Timestamp;

/// The clock the members' expiries are measured by: the server's, in microseconds.
const NOW_MICROS: &str = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

impl PgStore {
    /// Runs one heartbeat of `member` (or its departure, `leave`) and returns the partitions it
    /// holds afterwards with their checkpoints; `None` when the subscription does not exist.
    pub(crate) async fn group_heartbeat(
        &self,
        name: &str,
        member: &str,
        leave: bool,
    ) -> Result<Option<Vec<(u32, u64)>>> {
        let mut client = self.inner.pool.get().await?;
        let tx = client.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT partitions, member_timeout_ms, {NOW_MICROS} FROM subscriptions \
                     WHERE name = $1 FOR UPDATE"
                ),
                &[&name],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let partitions: Option<i32> = row.try_get(0)?;
        let timeout: Option<i64> = row.try_get(1)?;
        let now: i64 = row.try_get(2)?;
        let settings = GroupSettings::from_columns(partitions.map(i64::from), timeout)
            .ok_or_else(|| not_a_group(name))?;
        if leave {
            tx.execute(
                "DELETE FROM subscription_members WHERE name = $1 AND member = $2",
                &[&name, &member],
            )
            .await?;
        } else {
            let expires = now.saturating_add(settings.timeout_ms().saturating_mul(1000));
            tx.execute(
                "INSERT INTO subscription_members (name, member, expires_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (name, member) DO UPDATE SET expires_at = excluded.expires_at",
                &[&name, &member, &expires],
            )
            .await?;
        }
        tx.execute(
            "DELETE FROM subscription_members WHERE name = $1 AND expires_at <= $2",
            &[&name, &now],
        )
        .await?;
        let mut live: Vec<String> = tx
            .query(
                "SELECT member FROM subscription_members WHERE name = $1",
                &[&name],
            )
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?;
        // Byte order, whatever the database's collation: every member must compute the same.
        live.sort_unstable();
        let owners: Vec<Option<String>> = tx
            .query(
                "SELECT owner FROM subscription_partitions WHERE name = $1 ORDER BY partition",
                &[&name],
            )
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?;
        let plan = plan(&live, &owners, member);
        if !plan.release.is_empty() {
            tx.execute(
                "UPDATE subscription_partitions SET owner = NULL \
                 WHERE name = $1 AND partition = ANY($2)",
                &[&name, &plan.release],
            )
            .await?;
        }
        if !plan.claim.is_empty() {
            tx.execute(
                "UPDATE subscription_partitions SET owner = $3 \
                 WHERE name = $1 AND partition = ANY($2)",
                &[&name, &plan.claim, &member],
            )
            .await?;
        }
        let owned = tx
            .query(
                "SELECT partition, checkpoint FROM subscription_partitions \
                 WHERE name = $1 AND owner = $2 ORDER BY partition",
                &[&name, &member],
            )
            .await?
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<_, i32>(0)? as u32,
                    r.try_get::<_, i64>(1)? as u64,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        tx.commit().await?;
        Ok(Some(owned))
    }

    /// Every partition and every member not yet expired; `None` when the subscription does
    /// not exist.
    pub(crate) async fn group_state(
        &self,
        name: &str,
    ) -> Result<Option<(Vec<PartitionState>, Vec<MemberState>)>> {
        if self.get_subscription(name).await?.is_none() {
            return Ok(None);
        }
        let partitions = self
            .run(
                "SELECT partition, checkpoint, owner FROM subscription_partitions \
                 WHERE name = $1 ORDER BY partition",
                &[&name],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(PartitionState {
                    partition: r.try_get::<_, i32>(0)? as u32,
                    checkpoint: r.try_get::<_, i64>(1)? as u64,
                    owner: r.try_get(2)?,
                })
            })
            .collect::<Result<_>>()?;
        let mut members = self
            .run(
                &format!(
                    "SELECT member, expires_at FROM subscription_members \
                     WHERE name = $1 AND expires_at > {NOW_MICROS}"
                ),
                &[&name],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(MemberState {
                    member: r.try_get(0)?,
                    expires_at: Timestamp::from_micros(r.try_get(1)?),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        members.sort_unstable_by(|a, b| a.member.cmp(&b.member));
        Ok(Some((partitions, members)))
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
        let sql = format!(
            "UPDATE subscription_partitions SET checkpoint = GREATEST(checkpoint, $2 + 1) \
             WHERE name = $1 AND partition = $3 AND ($4::text IS NULL OR owner = $4) \
               AND {DELIVERS} RETURNING checkpoint"
        );
        let rows = self
            .run(&sql, &[&name, &position, &(partition as i32), &member])
            .await?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0) as u64))
    }

    /// The stream and type of the event at `position`, if one is stored there.
    pub(crate) async fn event_at(&self, position: i64) -> Result<Option<(String, String)>> {
        let rows = self
            .run(
                "SELECT stream_id, event_type FROM events WHERE position = $1",
                &[&position],
            )
            .await?;
        rows.first()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .transpose()
    }
}
