//! The schema: versioned migrations (`migrations/*.sql`), applied on open under an advisory
//! lock, and the rules for schema names.
//!
//! The history, never edited: `0005` adds `recorded_at` and the indexes by category and type,
//! `0006` the `subscriptions` table, `0007` each stream's last position (appends from two processes
//! keep version order), `0008` consumer groups, `0009` stream metadata. A database newer than the
//! build is refused.

use crate::error::{Error, Result};

/// Key of the advisory lock that serialises concurrent migrations (any fixed number works;
/// this one is "galleon" in ASCII, truncated to 8 bytes' worth of hex digits).
const MIGRATION_LOCK_KEY: i64 = 0x67616c6c656f6e;

/// Schema migrations, applied in order; the schema version is the number applied. Each is a
/// file of `migrations/`, kept as history: once released, a migration never changes.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_events_streams_append.sql"),
    include_str!("migrations/0002_group_commit.sql"),
    include_str!("migrations/0003_stream_numbers.sql"),
    include_str!("migrations/0004_one_index_entry_per_append.sql"),
    include_str!("migrations/0005_recorded_at_categories_types.sql"),
    include_str!("migrations/0006_persistent_subscriptions.sql"),
    include_str!("migrations/0007_stream_order_across_processes.sql"),
    include_str!("migrations/0008_consumer_groups.sql"),
    include_str!("migrations/0009_stream_metadata.sql"),
];

/// Longest identifier PostgreSQL keeps (`NAMEDATALEN - 1` in a default build).
const MAX_IDENTIFIER_BYTES: usize = 63;

/// Schema names we accept: they are put into `search_path`, so keep them to plain identifiers.
pub(super) fn valid_schema(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_IDENTIFIER_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

/// Creates the schema (if named) and applies the missing migrations in one transaction, under an
/// advisory lock so that processes starting together migrate one after the other.
pub(super) async fn migrate(client: &tokio_postgres::Client, schema: Option<&str>) -> Result<()> {
    migrate_to(client, schema, MIGRATIONS.len()).await
}

/// [`migrate`] up to schema version `target` (tests build older schemas with it).
pub(super) async fn migrate_to(
    client: &tokio_postgres::Client,
    schema: Option<&str>,
    target: usize,
) -> Result<()> {
    client.batch_execute("BEGIN").await?;
    let result = async {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
            .await?;
        if let Some(schema) = schema {
            // Validated by `valid_schema`, so safe to splice.
            client
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await?;
        }
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_version (
                    version    bigint PRIMARY KEY,
                    applied_at timestamptz NOT NULL DEFAULT now())",
            )
            .await?;
        let current: i64 = client
            .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
            .await?
            .try_get(0)?;
        let supported = MIGRATIONS.len() as i64;
        if current > supported {
            return Err(Error::SchemaTooNew {
                found: current,
                supported,
            });
        }
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .take(target)
            .skip(current as usize)
        {
            client.batch_execute(sql).await?;
            client
                .execute(
                    "INSERT INTO schema_version (version) VALUES ($1)",
                    &[&(i as i64 + 1)],
                )
                .await?;
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => client.batch_execute("COMMIT").await?,
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names() {
        assert!(valid_schema("galleon_test_1"));
        assert!(!valid_schema("1abc"));
        assert!(!valid_schema("a;drop"));
        assert!(!valid_schema("Upper"));
        assert!(!valid_schema(&"a".repeat(MAX_IDENTIFIER_BYTES + 1)));
    }
}
