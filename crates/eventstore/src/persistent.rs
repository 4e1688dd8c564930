//! Persistent subscriptions: named, with a filter and a checkpoint the store keeps, so a
//! consumer resumes where it acknowledged after any restart (of itself or of the server).
//!
//! Delivery is at least once: [`Store::consume`] starts at the checkpoint, the consumer handles
//! events in order and acknowledges a position with [`Store::ack`] when everything up to it is
//! done (acks are cumulative and never move the checkpoint back). An ack names an event the
//! subscription delivers (stored, below the head, passing its filter), checked in the statement
//! that moves the checkpoint; anything else is [`Error::InvalidAck`] and moves nothing. Events
//! after the last ack are delivered again after a restart; handlers must tolerate that (event ids
//! identify repeats).
//! Several consumers of one plain subscription each get every event; the checkpoint is the
//! furthest ack of any of them. A consumer group (`consumer_group.rs`) splits the events by
//! stream among its members instead, with a checkpoint per partition.

use crate::error::{Error, Result};
use crate::filter::EventFilter;
use crate::groups::{GroupSettings, partition_of};
use crate::store::{Backend, Store};
use crate::subscription::Subscription;
use crate::types::{SubscriptionInfo, validate_subscription_name};

/// Persistent subscriptions (consumer groups included) a store holds by default
/// ([`crate::OpenOptions::max_subscriptions`]): a guess, far more than a deployment's consumers,
/// far fewer than would make listing or the store's bookkeeping slow.
pub const DEFAULT_MAX_SUBSCRIPTIONS: usize = 10_000;

impl Store {
    /// Creates the persistent subscription `name`, delivering the events that pass `filter`
    /// from position `from` on (0: everything; [`Store::head_position`]: only new events).
    /// Creating one that exists with the same filter returns it unchanged (its checkpoint is
    /// kept: a consumer may call this on every start); with another filter it is
    /// [`Error::SubscriptionExists`]. A new one past [`crate::OpenOptions::max_subscriptions`]
    /// is [`Error::TooManySubscriptions`].
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
        let max = self.max_subscriptions.min(i64::MAX as usize) as i64;
        let within_limit = match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => {
                s.create_subscription(name, from, &filter, group, max)
                    .await?
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => {
                p.create_subscription(name, from, &filter, group, max)
                    .await?
            }
        };
        if !within_limit {
            return Err(Error::TooManySubscriptions {
                limit: self.max_subscriptions,
            });
        }
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

    /// One page of the persistent subscriptions: at most `limit` of them, by name (byte order)
    /// ascending, with names after `after` (all of them without). The next page is the one
    /// after the last name of this one; a page shorter than `limit` is the last. `limit` 0 is
    /// an empty page.
    pub async fn list_subscriptions_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SubscriptionInfo>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let limit = limit.min(i64::MAX as usize) as i64;
        let after = after.map(str::to_owned);
        match self.backend() {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.list_subscriptions_page(after, limit).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.list_subscriptions_page(after, limit).await,
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
    ///
    /// `position` must be that of an event the subscription delivers: stored, readable (below
    /// [`Store::head_position`]) and passing its filter; otherwise it is [`Error::InvalidAck`]
    /// and the checkpoint stays. Checked in the statement that moves the checkpoint. Repeating
    /// an ack is fine, and so is acking an event already behind the checkpoint (a slow
    /// duplicate): the checkpoint does not move back.
    pub async fn ack(&self, name: &str, position: u64) -> Result<u64> {
        self.ack_event(name, position).await.map(|a| a.checkpoint)
    }

    /// [`Store::ack`], saying which checkpoint moved. On a plain subscription: every event up
    /// to `position`. On a consumer group: the event at `position` and every event before it
    /// *of its partition* (the member got that partition's events in order); the other
    /// partitions' checkpoints stay. [`Error::InvalidAck`] when the subscription does not
    /// deliver an event at `position` (as for [`Store::ack`]).
    pub async fn ack_event(&self, name: &str, position: u64) -> Result<Acked> {
        self.ack_as(name, None, position).await
    }

    /// [`Store::ack_event`] by `member` of consumer group `name`: also refused
    /// ([`Error::InvalidAck`]) when the partition of the event at `position` is not held by
    /// `member` (another member's, or one it lost to another after its timeout: that member
    /// delivers it again from the partition's checkpoint). [`Error::InvalidInput`] on a plain
    /// subscription.
    pub async fn ack_member(&self, name: &str, member: &str, position: u64) -> Result<Acked> {
        self.ack_as(name, Some(member), position).await
    }

    async fn ack_as(&self, name: &str, member: Option<&str>, position: u64) -> Result<Acked> {
        validate_subscription_name(name)?;
        if let Some(member) = member {
            crate::consumer_group::validate_member_name(member)?;
        }
        let info = self.subscription_info(name).await?;
        if member.is_some() && info.group.is_none() {
            return Err(Error::InvalidInput(format!(
                "subscription {name:?} is not a consumer group: acknowledge without a member"
            )));
        }
        // No event is stored at a position past i64 (nor at i64::MAX: its checkpoint would be
        // past it).
        let at = i64::try_from(position).ok().filter(|&p| p < i64::MAX);
        let acked = match (at, info.group) {
            (None, _) => None,
            (Some(at), None) => {
                self.backend()
                    .ack_subscription(name, at)
                    .await?
                    .map(|checkpoint| Acked {
                        checkpoint,
                        partition: None,
                    })
            }
            (Some(at), Some(group)) => match self.backend().event_at(at).await? {
                None => None,
                Some((stream, _)) => {
                    let partition = partition_of(&stream, group.partitions);
                    self.backend()
                        .ack_partition(name, partition, at, member)
                        .await?
                        .map(|checkpoint| Acked {
                            checkpoint,
                            partition: Some(partition),
                        })
                }
            },
        };
        match acked {
            Some(a) => Ok(a),
            None => Err(self.refused_ack(name, member, position).await),
        }
    }

    /// Why an ack of `position` was refused (the statement that would have moved the
    /// checkpoint found no delivered event there): [`Error::InvalidAck`] saying what was wrong
    /// and what was expected, or the subscription's absence if it was deleted meanwhile.
    async fn refused_ack(&self, name: &str, member: Option<&str>, position: u64) -> Error {
        let info = match self.subscription_info(name).await {
            Ok(info) => info,
            Err(e) => return e,
        };
        let head = match self.head_position().await {
            Ok(head) => head,
            Err(e) => return e,
        };
        let event = match i64::try_from(position) {
            Ok(at) => match self.backend().event_at(at).await {
                Ok(event) => event,
                Err(e) => return e,
            },
            Err(_) => None,
        };
        let reason = match event {
            _ if position >= head => {
                format!("it is past the head ({head}): nothing there has been delivered")
            }
            None => "no event is stored there".to_owned(),
            Some((stream, ty)) if !info.filter.matches_parts(&stream, &ty) => format!(
                "its event (stream {stream:?}, type {ty:?}) is not in the subscription's filter ({})",
                describe(&info.filter)
            ),
            Some((stream, _)) => match (info.group, member) {
                (Some(group), Some(member)) => {
                    let partition = partition_of(&stream, group.partitions);
                    let owner = match self.group_status(name).await {
                        Ok(st) => st
                            .partitions
                            .into_iter()
                            .find(|p| p.partition == partition)
                            .and_then(|p| p.owner),
                        Err(e) => return e,
                    };
                    match owner {
                        Some(owner) if owner == member => "it is not delivered yet".to_owned(),
                        Some(owner) => format!(
                            "its partition {partition} is held by member {owner:?}, not {member:?}"
                        ),
                        None => format!(
                            "its partition {partition} is held by no member, not {member:?}"
                        ),
                    }
                }
                _ => "it is not delivered yet".to_owned(),
            },
        };
        let expected = match member {
            Some(member) => format!(
                "expected the position (SSE id:) of an event member {member:?} was delivered"
            ),
            None => {
                "expected the position (SSE id:) of an event the subscription delivered".to_owned()
            }
        };
        Error::InvalidAck {
            position,
            reason: format!("{reason}; {expected}"),
        }
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

/// A filter in words, for the error of an ack outside it.
fn describe(filter: &EventFilter) -> String {
    match (filter.category_name(), filter.event_types()) {
        (None, []) => "every event".to_owned(),
        (Some(c), []) => format!("category {c:?}"),
        (None, types) => format!("types {types:?}"),
        (Some(c), types) => format!("category {c:?}, types {types:?}"),
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
