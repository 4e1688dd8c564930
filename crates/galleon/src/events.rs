//! The event store in `galleon serve`: the `--events*` configuration, opened with
//! [`galleon_eventstore_http::open`] and served by [`galleon_eventstore_http::EventsApi`]
//! (its crate docs list the routes, roles and limits).

use std::time::Duration;

use galleon_eventstore::{OpenOptions, Store};

/// `--events` when neither the flag nor `GALLEON_EVENTS` is given: an SQLite file under the
/// working directory, created (with its directory) on first start.
pub(crate) const DEFAULT_EVENTS_URL: &str = "sqlite:./data/events.db";

/// The `--events` value that serves no event store (the routes are not mounted).
pub(crate) const EVENTS_OFF: &str = "off";

/// The event-store part of `galleon serve`'s configuration.
#[derive(Debug, Clone)]
pub(crate) struct EventsConfig {
    /// `sqlite:PATH`, `postgres://...` or [`EVENTS_OFF`].
    pub(crate) url: String,
    /// PostgreSQL only: the schema holding the tables, created when missing.
    pub(crate) schema: Option<String>,
    /// Silence after which a subscription sends a keep-alive comment.
    pub(crate) keep_alive: Duration,
    /// Live-feed batches kept for subscribers that fall behind.
    pub(crate) subscriber_buffer: usize,
    /// Most events the live feed's reader takes per query when behind.
    pub(crate) tail_batch: usize,
    /// SQLite only: the store's reader threads.
    pub(crate) sqlite_reader_threads: usize,
    /// Most persistent subscriptions the store holds.
    pub(crate) max_subscriptions: usize,
    /// PostgreSQL only: a transaction holding `$all` back this long is logged and shown.
    pub(crate) held_back_warning: std::time::Duration,
}

/// Opens the store `config` names; `None` when it is [`EVENTS_OFF`]. Errors name the URL
/// (password hidden) and say what went wrong.
pub(crate) async fn open(config: &EventsConfig) -> anyhow::Result<Option<Store>> {
    if config.url == EVENTS_OFF {
        anyhow::ensure!(
            config.schema.is_none(),
            "--events-schema needs an event store, but --events is off"
        );
        return Ok(None);
    }
    anyhow::ensure!(
        !config.url.trim().is_empty(),
        "--events (or GALLEON_EVENTS) is empty: give sqlite:PATH, postgres://... or {EVENTS_OFF}"
    );
    let is_pg = config.url.starts_with("postgres://") || config.url.starts_with("postgresql://");
    anyhow::ensure!(
        config.schema.is_none() || is_pg,
        "--events-schema applies to PostgreSQL only, but --events is {}",
        galleon_eventstore_http::redact(&config.url)
    );
    let options = OpenOptions {
        pg_schema: config.schema.clone(),
        pg_application_name: Some("galleon".to_owned()),
        subscriber_buffer: Some(config.subscriber_buffer),
        tail_batch_max: Some(config.tail_batch),
        sqlite_reader_threads: Some(config.sqlite_reader_threads),
        max_subscriptions: Some(config.max_subscriptions),
        held_back_warning: Some(config.held_back_warning),
        ..OpenOptions::default()
    };
    Ok(Some(
        galleon_eventstore_http::open(&config.url, options).await?,
    ))
}
