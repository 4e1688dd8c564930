//! Persistent subscriptions on PostgreSQL: one row each in `subscriptions`, one statement per
//! operation on a pooled connection (an ack is one `UPDATE ... GREATEST`, committed when it
//! returns).

use super::PgStore;
use super::read::{discard_if_broken, is_broken};
use crate::error::{Error, Result};
use crate::filter::EventFilter;
use crate::groups::GroupSettings;
use crate::time::Timestamp;
use crate::types::SubscriptionInfo;

/// One statement: the row unless one of that name exists or `$7` or more others do, and for a
/// group (`$5` not null) its partitions, only when the row was inserted; answers whether the
/// subscription exists now or was refused by the limit only (`false`). Concurrent creations
/// each count the rows committed before them, so together they may pass the limit.
const SQL_CREATE: &str = "WITH existing AS (SELECT 1 FROM subscriptions WHERE name = $1::text), \
     n AS (SELECT count(*) AS c FROM subscriptions), \
     created AS ( \
       INSERT INTO subscriptions (name, category, event_types, checkpoint, partitions, member_timeout_ms) \
       SELECT $1::text, $2::text, $3::text[], $4::bigint, $5::integer, $6::bigint \
       WHERE NOT EXISTS (SELECT 1 FROM existing) AND (SELECT c FROM n) < $7::bigint \
       ON CONFLICT (name) DO NOTHING RETURNING name, partitions), \
     parts AS ( \
       INSERT INTO subscription_partitions (name, partition, checkpoint) \
       SELECT created.name, p, $4::bigint FROM created, generate_series(0, created.partitions - 1) AS p \
       WHERE created.partitions IS NOT NULL) \
     SELECT EXISTS (SELECT 1 FROM existing) OR (SELECT c FROM n) < $7::bigint";
const SQL_GET: &str = "SELECT name, category, event_types, checkpoint, created_at, partitions, \
     member_timeout_ms FROM subscriptions WHERE name = $1";
const SQL_LIST: &str = "SELECT name, category, event_types, checkpoint, created_at, partitions, \
     member_timeout_ms FROM subscriptions ORDER BY name COLLATE \"C\"";
/// A page: names after `$1` (any when null) in byte order (`COLLATE "C"`, as SQLite's), at most
/// `$2`.
const SQL_LIST_PAGE: &str = "SELECT name, category, event_types, checkpoint, created_at, \
     partitions, member_timeout_ms FROM subscriptions \
     WHERE $1::text IS NULL OR name COLLATE \"C\" > $1::text COLLATE \"C\" \
     ORDER BY name COLLATE \"C\" LIMIT $2";
const SQL_DELETE: &str = "DELETE FROM subscriptions WHERE name = $1 RETURNING 1";
/// True when subscription `$1` delivers the event at position `$2`: one is stored there, below
/// the line `$all` is read under (so final, and every event before it too), passing the
/// subscription's filter. The condition of every ack, in the statement that moves the
/// checkpoint, so the line it checks is the one of that statement's snapshot.
pub(super) const DELIVERS: &str = "EXISTS (SELECT 1 FROM subscriptions s \
       JOIN events e ON e.position = $2 WHERE s.name = $1 \
       AND e.position < ((pg_snapshot_xmin(pg_current_snapshot())::text::bigint) << 16) \
       AND (s.category IS NULL OR split_part(e.stream_id, '-', 1) = s.category) \
       AND (cardinality(s.event_types) = 0 OR e.event_type = ANY(s.event_types)))";

fn info(row: &tokio_postgres::Row) -> Result<SubscriptionInfo> {
    let name: String = row.try_get(0)?;
    let category: Option<String> = row.try_get(1)?;
    let types: Vec<String> = row.try_get(2)?;
    let checkpoint: i64 = row.try_get(3)?;
    let created: std::time::SystemTime = row.try_get(4)?;
    let partitions: Option<i32> = row.try_get(5)?;
    let timeout_ms: Option<i64> = row.try_get(6)?;
    let filter = match category {
        Some(c) => EventFilter::category(c),
        None => Ok(EventFilter::all()),
    }
    .and_then(|f| f.with_types(types))
    .map_err(|e| Error::Corrupt(format!("subscription {name:?}: {e}")))?;
    Ok(SubscriptionInfo {
        name,
        filter,
        checkpoint: checkpoint as u64,
        created_at: Timestamp::from(created),
        group: GroupSettings::from_columns(partitions.map(i64::from), timeout_ms),
    })
}

impl PgStore {
    pub(super) async fn run(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let client = self.inner.pool.get().await?;
        let result = match client.prepare_cached(sql).await {
            Ok(stmt) => client.query(&stmt, params).await,
            Err(e) => Err(e),
        };
        result.map_err(|e| {
            if is_broken(&e) {
                discard_if_broken(client, &e);
            }
            e.into()
        })
    }

    /// Inserts the subscription unless one of that name exists, with a partition row each
    /// (checkpoint `from`, no owner) for a group; `false` (nothing inserted) when there is none
    /// of that name and `max` or more others ([`SQL_CREATE`]).
    pub(crate) async fn create_subscription(
        &self,
        name: &str,
        from: u64,
        filter: &EventFilter,
        group: Option<GroupSettings>,
        max: i64,
    ) -> Result<bool> {
        let category = filter.category_name();
        let types = filter.event_types();
        let partitions = group.map(|g| g.partitions as i32);
        let timeout = group.map(|g| g.timeout_ms());
        let rows = self
            .run(
                SQL_CREATE,
                &[
                    &name,
                    &category,
                    &types,
                    &(from as i64),
                    &partitions,
                    &timeout,
                    &max,
                ],
            )
            .await?;
        Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
    }

    pub(crate) async fn get_subscription(&self, name: &str) -> Result<Option<SubscriptionInfo>> {
        self.run(SQL_GET, &[&name])
            .await?
            .first()
            .map(info)
            .transpose()
    }

    pub(crate) async fn list_subscriptions(&self) -> Result<Vec<SubscriptionInfo>> {
        self.run(SQL_LIST, &[]).await?.iter().map(info).collect()
    }

    /// At most `limit` subscriptions with names after `after` (any without), by name.
    pub(crate) async fn list_subscriptions_page(
        &self,
        after: Option<String>,
        limit: i64,
    ) -> Result<Vec<SubscriptionInfo>> {
        self.run(SQL_LIST_PAGE, &[&after, &limit])
            .await?
            .iter()
            .map(info)
            .collect()
    }

    pub(crate) async fn delete_subscription(&self, name: &str) -> Result<bool> {
        Ok(!self.run(SQL_DELETE, &[&name]).await?.is_empty())
    }

    /// Acknowledges `position`: moves the checkpoint forward to `position + 1` (never back) if
    /// the subscription delivers an event there ([`DELIVERS`], in the same statement); `None`
    /// when it does not, or there is no such subscription.
    pub(crate) async fn ack_subscription(&self, name: &str, position: i64) -> Result<Option<u64>> {
        let sql = format!(
            "UPDATE subscriptions SET checkpoint = GREATEST(checkpoint, $2 + 1) \
             WHERE name = $1 AND {DELIVERS} RETURNING checkpoint"
        );
        let rows = self.run(&sql, &[&name, &position]).await?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0) as u64))
    }
}
