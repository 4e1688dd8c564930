//! Persistent subscriptions on SQLite: one row each in `subscriptions` (types as a JSON array),
//! written on a pooled connection, outside the events writer: an ack waits for the write lock
//! like any writer (`busy_timeout`), and is on disk when it returns (`synchronous=FULL`).
//! Consumer groups' partitions and members are in `groups.rs`.

use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::error::{Error, Result};
use crate::filter::EventFilter;
use crate::groups::GroupSettings;
use crate::time::Timestamp;
use crate::types::SubscriptionInfo;

/// True when subscription `?1` delivers the event at position `?2`: one is stored there and it
/// passes the subscription's filter (every stored event is final on SQLite: one writer commits
/// in position order). The condition of every ack, in the statement that moves the checkpoint.
pub(super) const DELIVERS: &str = "EXISTS (SELECT 1 FROM subscriptions s \
       JOIN events e ON e.position = ?2 WHERE s.name = ?1 \
       AND (s.category IS NULL OR e.category = s.category) \
       AND (json_array_length(s.event_types) = 0 \
            OR e.event_type IN (SELECT value FROM json_each(s.event_types))))";

const COLUMNS: &str =
    "name, category, event_types, checkpoint, created_at, partitions, member_timeout_ms";

/// A `subscriptions` row as read.
type Row = (
    String,
    Option<String>,
    String,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
);

fn row_to_info(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
    ))
}

fn info(
    (name, category, types, checkpoint, created, partitions, timeout): Row,
) -> Result<SubscriptionInfo> {
    let types: Vec<String> = serde_json::from_str(&types)
        .map_err(|e| Error::Corrupt(format!("subscription {name:?}: event types: {e}")))?;
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
        created_at: Timestamp::from_micros(created),
        group: GroupSettings::from_columns(partitions, timeout),
    })
}

impl SqliteStore {
    /// Inserts the subscription unless one of that name exists, with a partition row each
    /// (checkpoint `from`, no owner) for a group; `false` (nothing inserted) when there is none
    /// of that name and `max` or more others.
    pub(crate) async fn create_subscription(
        &self,
        name: &str,
        from: u64,
        filter: &EventFilter,
        group: Option<GroupSettings>,
        max: i64,
    ) -> Result<bool> {
        let name = name.to_owned();
        let category = filter.category_name().map(str::to_owned);
        let types = serde_json::to_string(filter.event_types())
            .map_err(|e| Error::InvalidInput(format!("event types not encodable: {e}")))?;
        self.with_reader(move |conn| {
            let tx = rusqlite::Transaction::new_unchecked(
                conn,
                rusqlite::TransactionBehavior::Immediate,
            )?;
            let (exists, count): (bool, i64) = tx
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM subscriptions WHERE name = ?1), \
                     (SELECT count(*) FROM subscriptions)",
                )?
                .query_row([&name], |r| Ok((r.get(0)?, r.get(1)?)))?;
            if !exists && count >= max {
                return Ok(false);
            }
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO subscriptions (name, category, event_types, checkpoint, \
                     created_at, partitions, member_timeout_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (name) DO NOTHING",
                )?
                .execute(params![
                    name,
                    category,
                    types,
                    from as i64,
                    Timestamp::now().as_micros(),
                    group.map(|g| i64::from(g.partitions)),
                    group.map(|g| g.timeout_ms()),
                ])?;
            if let (1, Some(g)) = (inserted, group) {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO subscription_partitions (name, partition, checkpoint) \
                     VALUES (?1, ?2, ?3)",
                )?;
                for p in 0..g.partitions {
                    insert.execute(params![name, p, from as i64])?;
                }
            }
            tx.commit()?;
            Ok(true)
        })
        .await
    }

    pub(crate) async fn get_subscription(&self, name: &str) -> Result<Option<SubscriptionInfo>> {
        let name = name.to_owned();
        self.with_reader(move |conn| {
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM subscriptions WHERE name = ?1"
                ))?
                .query_row([&name], row_to_info)
                .optional()?;
            row.map(info).transpose()
        })
        .await
    }

    pub(crate) async fn list_subscriptions(&self) -> Result<Vec<SubscriptionInfo>> {
        self.with_reader(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM subscriptions ORDER BY name"
            ))?;
            let rows = stmt.query_map([], row_to_info)?;
            rows.map(|r| info(r?)).collect()
        })
        .await
    }

    /// At most `limit` subscriptions with names after `after` (any without), by name.
    pub(crate) async fn list_subscriptions_page(
        &self,
        after: Option<String>,
        limit: i64,
    ) -> Result<Vec<SubscriptionInfo>> {
        self.with_reader(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM subscriptions WHERE ?1 IS NULL OR name > ?1 \
                 ORDER BY name LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![after, limit], row_to_info)?;
            rows.map(|r| info(r?)).collect()
        })
        .await
    }

    pub(crate) async fn delete_subscription(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.with_reader(move |conn| {
            let tx = rusqlite::Transaction::new_unchecked(
                conn,
                rusqlite::TransactionBehavior::Immediate,
            )?;
            let n = tx
                .prepare_cached("DELETE FROM subscriptions WHERE name = ?1")?
                .execute([&name])?;
            tx.prepare_cached("DELETE FROM subscription_partitions WHERE name = ?1")?
                .execute([&name])?;
            tx.prepare_cached("DELETE FROM subscription_members WHERE name = ?1")?
                .execute([&name])?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    /// Acknowledges `position`: moves the checkpoint forward to `position + 1` (never back) if
    /// the subscription delivers an event there ([`DELIVERS`], in the same statement); `None`
    /// when it does not, or there is no such subscription.
    pub(crate) async fn ack_subscription(&self, name: &str, position: i64) -> Result<Option<u64>> {
        let name = name.to_owned();
        self.with_reader(move |conn| {
            let stored: Option<i64> = conn
                .prepare_cached(&format!(
                    "UPDATE subscriptions SET checkpoint = MAX(checkpoint, ?2 + 1) \
                     WHERE name = ?1 AND {DELIVERS} RETURNING checkpoint"
                ))?
                .query_row(params![name, position], |r| r.get(0))
                .optional()?;
            Ok(stored.map(|c| c as u64))
        })
        .await
    }
}
