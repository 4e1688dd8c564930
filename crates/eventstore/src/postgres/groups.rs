//! Consumer groups on PostgreSQL: `subscription_partitions` (a checkpoint and an owner per
//! partition) and `subscription_members` (a row per member, its expiry by the server's clock, so
//! members on several nodes agree on who is dead). A heartbeat (of all of one process's members
//! of a group) is one transaction that locks the subscription's row first, so the heartbeats of
//! one group, from every node, run one at a time and each sees the others' claims and releases
//! (the rule itself is `crate::groups::plan`).

use super::PgStore;
use super::subscriptions::DELIVERS;
use crate::error::Result;
use crate::groups::{
    Beat, GroupSettings, Holdings, MemberState, PartitionState, holdings, not_a_group, plan_beat,
};
use crate::time::Timestamp;

/// The clock the members' expiries are measured by: the server's, in microseconds.
const NOW_MICROS: &str = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

impl PgStore {
    /// Runs one heartbeat of this process's members of group `name` ([`Beat`]: renewals and
    /// departures) in one transaction, and returns the group's settings and what each local
    /// member holds afterwards; `None` when the subscription does not exist. Partition rows are
    /// written only where an owner changed.
    pub(crate) async fn group_beat(
        &self,
        name: &str,
        beat: Beat,
    ) -> Result<Option<(GroupSettings, Holdings)>> {
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
        if !beat.leave.is_empty() {
            tx.execute(
                "DELETE FROM subscription_members WHERE name = $1 AND member = ANY($2)",
                &[&name, &beat.leave],
            )
            .await?;
        }
        if !beat.renew.is_empty() {
            let expires = now.saturating_add(settings.timeout_ms().saturating_mul(1000));
            tx.execute(
                "INSERT INTO subscription_members (name, member, expires_at) \
                 SELECT $1, m, $3 FROM unnest($2::text[]) AS m \
                 ON CONFLICT (name, member) DO UPDATE SET expires_at = excluded.expires_at",
                &[&name, &beat.renew, &expires],
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
        let rows = tx
            .query(
                "SELECT owner, checkpoint FROM subscription_partitions \
                 WHERE name = $1 ORDER BY partition",
                &[&name],
            )
            .await?;
        let mut owners = Vec::with_capacity(rows.len());
        let mut checkpoints = Vec::with_capacity(rows.len());
        for r in &rows {
            owners.push(r.try_get::<_, Option<String>>(0)?);
            checkpoints.push(r.try_get::<_, i64>(1)? as u64);
        }
        let changed = plan_beat(&live, &mut owners, &beat);
        if !changed.is_empty() {
            let parts: Vec<i32> = changed.iter().map(|&p| p as i32).collect();
            let to: Vec<Option<String>> = changed.iter().map(|&p| owners[p].clone()).collect();
            tx.execute(
                "UPDATE subscription_partitions AS p SET owner = u.owner \
                 FROM unnest($2::integer[], $3::text[]) AS u(partition, owner) \
                 WHERE p.name = $1 AND p.partition = u.partition",
                &[&name, &parts, &to],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Some((
            settings,
            holdings(&live, &owners, &checkpoints, &beat.local),
        )))
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
