//! Stream metadata on PostgreSQL: a `stream_meta` row per stream that has any
//! (`crate::stream_meta` applies it).

use std::time::Duration;

use super::PgStore;
use crate::error::Result;
use crate::types::StreamMetadata;

impl PgStore {
    /// The stream's metadata row, if it has one.
    pub(crate) async fn get_meta(&self, stream: &str) -> Result<Option<StreamMetadata>> {
        let rows = self
            .run(
                "SELECT max_count, max_age_ms, truncate_before, deleted FROM stream_meta \
                 WHERE stream_id = $1",
                &[&stream],
            )
            .await?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        Ok(Some(StreamMetadata {
            max_count: r.try_get::<_, Option<i64>>(0)?.map(|n| n as u64),
            max_age: r
                .try_get::<_, Option<i64>>(1)?
                .map(|ms| Duration::from_millis(ms as u64)),
            truncate_before: r.try_get::<_, Option<i64>>(2)?.map(|v| v as u64),
            deleted: r.try_get(3)?,
        }))
    }

    /// Stores the stream's metadata whole.
    pub(crate) async fn put_meta(&self, stream: &str, meta: StreamMetadata) -> Result<()> {
        let max_count = meta.max_count.map(|n| n.min(i64::MAX as u64) as i64);
        let max_age = meta
            .max_age
            .map(|a| a.as_millis().min(i64::MAX as u128) as i64);
        let tb = meta.truncate_before.map(|v| v.min(i64::MAX as u64) as i64);
        self.run(
            "INSERT INTO stream_meta (stream_id, max_count, max_age_ms, truncate_before, deleted) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (stream_id) DO UPDATE SET \
             max_count = excluded.max_count, max_age_ms = excluded.max_age_ms, \
             truncate_before = excluded.truncate_before, deleted = excluded.deleted",
            &[&stream, &max_count, &max_age, &tb, &meta.deleted],
        )
        .await?;
        Ok(())
    }
}
