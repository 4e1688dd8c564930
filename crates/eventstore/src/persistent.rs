//! Persistent subscriptions: named, with a filter and a checkpoint the store keeps, so a
//! consumer resumes where it acknowledged after any restart (of itself or of the server).
//!
//! Delivery is at least once: [`Store::consume`] starts at the checkpoint, the consumer handles
//! events in order and acknowledges a position with [`Store::ack`] when everything up to it is
//! done (acks are cumulative and never move the checkpoint back). Events after the last ack are
//! delivered again after a restart; handlers must tolerate that (event ids identify repeats).
//! Several consumers of one name each get every event (no partitioning: consumer groups are not
//! built yet); the checkpoint is the furthest ack of any of them.

use crate::error::{Error, Result};
use crate::filter::EventFilter;
use crate::store::{Backend, Store};
use crate::subscription::Subscription;
use crate::types::{SubscriptionInfo, validate_subscription_name};

impl Store {
    /// Creates the persistent subscription `name`, delivering the events that pass `filter`
    /// from position `from` on (0: everything; [`Store::head_position`]: only new events).
    /// Creating one that exists with the same filter returns it unchanged (its checkpoint is
    /// kept: a consumer may call this on every start); with another filter it is
    /// [`Error::SubscriptionExists`].
    pub async fn create_subscription(
        &self,
        name: &str,
        from: u64,
        filter: EventFilter,
    ) -> Result<SubscriptionInfo> {
        validate_subscription_name(name)?;
        let from = from.min(i64::MAX as u64);
        match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.create_subscription(name, from, &filter).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.create_subscription(name, from, &filter).await?,
        };
        let info = self.subscription_info(name).await?;
        if info.filter != filter {
            return Err(Error::SubscriptionExists(name.to_owned()));
        }
        Ok(info)
    }

    /// The subscription `name`; [`Error::SubscriptionNotFound`] when there is none.
    pub async fn subscription_info(&self, name: &str) -> Result<SubscriptionInfo> {
        validate_subscription_name(name)?;
        let found = match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.get_subscription(name).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.get_subscription(name).await?,
        };
        found.ok_or_else(|| Error::SubscriptionNotFound(name.to_owned()))
    }

    /// Every persistent subscription, by name.
    pub async fn list_subscriptions(&self) -> Result<Vec<SubscriptionInfo>> {
        match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.list_subscriptions().await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.list_subscriptions().await,
        }
    }

    /// Deletes the subscription `name` and its checkpoint; [`Error::SubscriptionNotFound`]
    /// when there is none. Consumers already running keep going without a checkpoint.
    pub async fn delete_subscription(&self, name: &str) -> Result<()> {
        validate_subscription_name(name)?;
        let deleted = match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.delete_subscription(name).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.delete_subscription(name).await?,
        };
        if deleted {
            Ok(())
        } else {
            Err(Error::SubscriptionNotFound(name.to_owned()))
        }
    }

    /// Acknowledges every event of `name` up to and including `position`: the checkpoint
    /// becomes `position + 1` unless it is already further. Returns the checkpoint. Durable when
    /// it returns (the same commit rules as an append).
    pub async fn ack(&self, name: &str, position: u64) -> Result<u64> {
        validate_subscription_name(name)?;
        let checkpoint = position.saturating_add(1).min(i64::MAX as u64);
        let stored = match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.ack_subscription(name, checkpoint).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.ack_subscription(name, checkpoint).await?,
        };
        stored.ok_or_else(|| Error::SubscriptionNotFound(name.to_owned()))
    }

    /// Consumes `name` from its checkpoint: its events, stored then live, as
    /// [`Store::subscribe`] delivers them. Acknowledge with [`Store::ack`].
    pub async fn consume(&self, name: &str) -> Result<(SubscriptionInfo, Subscription)> {
        let info = self.subscription_info(name).await?;
        let sub = self.subscribe(info.checkpoint, info.filter.clone());
        Ok((info, sub))
    }
}
