//! Stream metadata on SQLite: a `stream_meta` row per stream that has any (`crate::stream_meta`
//! applies it), written on a pooled connection like subscriptions.

use std::time::Duration;

use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::error::Result;
use crate::types::StreamMetadata;

impl SqliteStore {
    /// The stream's metadata row, if it has one.
    pub(crate) async fn get_meta(&self, stream: &str) -> Result<Option<StreamMetadata>> {
        let stream = stream.to_owned();
        self.with_reader(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT max_count, max_age_ms, truncate_before, deleted FROM stream_meta \
                     WHERE stream_id = ?1",
                )?
                .query_row([&stream], |r| {
                    Ok(StreamMetadata {
                        max_count: r.get::<_, Option<i64>>(0)?.map(|n| n as u64),
                        max_age: r
                            .get::<_, Option<i64>>(1)?
                            .map(|ms| Duration::from_millis(ms as u64)),
                        truncate_before: r.get::<_, Option<i64>>(2)?.map(|v| v as u64),
                        deleted: r.get(3)?,
                    })
                })
                .optional()?)
        })
        .await
    }

    /// Stores the stream's metadata whole.
    pub(crate) async fn put_meta(&self, stream: &str, meta: StreamMetadata) -> Result<()> {
        let stream = stream.to_owned();
        self.with_reader(move |conn| {
            conn.prepare_cached(
                "INSERT INTO stream_meta (stream_id, max_count, max_age_ms, truncate_before, deleted) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (stream_id) DO UPDATE SET \
                 max_count = excluded.max_count, max_age_ms = excluded.max_age_ms, \
                 truncate_before = excluded.truncate_before, deleted = excluded.deleted",
            )?
            .execute(params![
                stream,
                meta.max_count.map(|n| n.min(i64::MAX as u64) as i64),
                meta.max_age.map(|a| a.as_millis().min(i64::MAX as u128) as i64),
                meta.truncate_before.map(|v| v.min(i64::MAX as u64) as i64),
                meta.deleted,
            ])?;
            Ok(())
        })
        .await
    }
}
