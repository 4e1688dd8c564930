//! Persistent subscriptions: named, with a filter and a checkpoint the store keeps, so a
//! consumer resumes where it acknowledged after any restart (of itself or of the server).
//!
//! Delivery is at least once: [`Store::consume`] starts at the checkpoint, the consumer handles
//! events in order and acknowledges a position with [`Store::ack`] when everything up to it is
//! done (acks are cumulative and never move the checkpoint back). Events after the last ack are
//! delivered again after a restart; handlers must tolerate that (event ids identify repeats).
//! Several consumers of one plain subscription each get every event; the checkpoint is the
//! furthest ack of any of them. A consumer group (`consumer_group.rs`) splits the events by
//! stream among its members instead, with a checkpoint per partition.

use crate::error::{Error, Result};
use crate::filter::EventFilter;
use crate::groups::{GroupSettings, partition_of};
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
        self.create_subscription_as(name, from, filter, None).await
    }

    /// [`Store::create_subscription`], or [`Store::create_group`] with `group`.
    pub(crate) async fn create_subscription_as(
        &self,
        name: &str,
        from: u64,
        filter: EventFilter,
        group: Option<GroupSettings>,
    ) -> Result<SubscriptionInfo> {
        validate_subscription_name(name)?;
        let from = from.min(i64::MAX as u64);
        match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.create_subscription(name, from, &filter, group).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.create_subscription(name, from, &filter, group).await?,
        };
        let info = self.subscription_info(name).await?;
        if info.filter != filter || info.group != group {
            return Err(Error::SubscriptionExists(name.to_owned()));
        }
        Ok(info)
    }

    /// The subscription `name`; [`Error::SubscriptionNotFound`] when there is none. A
    /// consumer group's `checkpoint` is the lowest of its partitions'.
    pub async fn subscription_info(&self, name: &str) -> Result<SubscriptionInfo> {
        validate_subscription_name(name)?;
        let found = match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.get_subscription(name).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.get_subscription(name).await?,
        };
        let mut info = found.ok_or_else(|| Error::SubscriptionNotFound(name.to_owned()))?;
        if info.group.is_some() {
            let (partitions, _) = self
                .backend()
                .group_state(name)
                .await?
                .ok_or_else(|| Error::SubscriptionNotFound(name.to_owned()))?;
            if let Some(low) = partitions.iter().map(|p| p.checkpoint).min() {
                info.checkpoint = low;
            }
        }
        Ok(info)
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
    /// it returns (the same commit rules as an append). For a consumer group see
    /// [`Store::ack_event`]: this is its checkpoint.
    pub async fn ack(&self, name: &str, position: u64) -> Result<u64> {
        self.ack_event(name, position).await.map(|a| a.checkpoint)
    }

    /// [`Store::ack`], saying which checkpoint moved. On a plain subscription: every event up
    /// to `position`. On a consumer group: the event at `position` and every event before it
    /// *of its partition* (the member got that partition's events in order); the other
    /// partitions' checkpoints stay. [`Error::InvalidInput`] when a group has no event at
    /// `position`.
    pub async fn ack_event(&self, name: &str, position: u64) -> Result<Acked> {
        validate_subscription_name(name)?;
        let checkpoint = position.saturating_add(1).min(i64::MAX as u64);
        let info = self.subscription_info(name).await?;
        if let Some(group) = info.group {
            let stream = self.backend().stream_at(position).await?.ok_or_else(|| {
                Error::InvalidInput(format!(
                    "no event at position {position}: a consumer group acknowledges an event it delivered (its id:)"
                ))
            })?;
            let partition = partition_of(&stream, group.partitions);
            let stored = self
                .backend()
                .ack_partition(name, partition, checkpoint)
                .await?
                .ok_or_else(|| Error::SubscriptionNotFound(name.to_owned()))?;
            return Ok(Acked {
                checkpoint: stored,
                partition: Some(partition),
            });
        }
        let stored = match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.ack_subscription(name, checkpoint).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.ack_subscription(name, checkpoint).await?,
        };
        let checkpoint = stored.ok_or_else(|| Error::SubscriptionNotFound(name.to_owned()))?;
        Ok(Acked {
            checkpoint,
            partition: None,
        })
    }

    /// Consumes `name` from its checkpoint: its events, stored then live, as
    /// [`Store::subscribe`] delivers them. Acknowledge with [`Store::ack`].
    /// [`Error::InvalidInput`] for a consumer group: consume it with [`Store::consume_group`].
    pub async fn consume(&self, name: &str) -> Result<(SubscriptionInfo, Subscription)> {
        let info = self.subscription_info(name).await?;
        if info.group.is_some() {
            return Err(Error::InvalidInput(format!(
                "subscription {name:?} is a consumer group: consume it as a member"
            )));
        }
        let sub = self.subscribe(info.checkpoint, info.filter.clone());
        Ok((info, sub))
    }
}

/// What an acknowledgement moved ([`Store::ack_event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    /// The checkpoint after the ack (it never moves back).
    pub checkpoint: u64,
    /// The consumer group partition whose checkpoint it is; `None` for a plain subscription.
    pub partition: Option<u32>,
}
