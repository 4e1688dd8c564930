//! Consumer groups: [`Store::create_group`], [`Store::consume_group`], [`Store::group_status`],
//! and the member's stream. The rules (partitions, assignment) are in `groups.rs`; the storage
//! in each backend's `groups.rs`; the heartbeats in `group_beater.rs`.
//!
//! A member's stream is an ordinary filtered [`Subscription`] from the lowest checkpoint of the
//! partitions it holds, passing on only the events of those partitions, each from its own
//! checkpoint. Every third of the member timeout (at most [`MAX_HEARTBEAT_INTERVAL`]) its group's
//! beater (one per store handle and group, for all of the handle's members of the group, in one
//! transaction) renews the members whose streams were polled since the last beat, and publishes
//! what each holds: a lost partition's events stop at once; a gained one is delivered from its
//! checkpoint (the subscription restarts further back if need be, skipping what it already
//! passed for the partitions it kept). So within one stream (one partition) events arrive in
//! order, from the last acknowledged one; across streams they may not. A stream not polled for
//! the member timeout (a dead connection, a client that stopped reading) is not renewed and loses
//! its partitions to the others; dropping it hands them over at once. A member whose lease (its
//! last renewal + the timeout) passed without a newer beat delivers nothing until one comes.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::filter::EventFilter;
use crate::group_beater::{Held, Membership, copy_error};
use crate::groups::{GroupSettings, GroupStatus, partition_of};
use crate::store::{Backend, Store};
use crate::subscription::Subscription;
use crate::types::{RecordedEvent, SubscriptionInfo, validate_subscription_name};

/// Longest time between a group's heartbeats (otherwise a third of the member timeout): how
/// soon members notice one joining or leaving elsewhere, so partitions move between live members
/// within about two of these. One small transaction per group (not per member) per interval in
/// each process with members of the group.
pub const MAX_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

impl Backend {
    pub(crate) async fn group_state(
        &self,
        name: &str,
    ) -> Result<
        Option<(
            Vec<crate::groups::PartitionState>,
            Vec<crate::groups::MemberState>,
        )>,
    > {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.group_state(name).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.group_state(name).await,
        }
    }

    pub(crate) async fn ack_partition(
        &self,
        name: &str,
        partition: u32,
        position: i64,
        member: Option<&str>,
    ) -> Result<Option<u64>> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.ack_partition(name, partition, position, member).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.ack_partition(name, partition, position, member).await,
        }
    }

    pub(crate) async fn ack_subscription(&self, name: &str, position: i64) -> Result<Option<u64>> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.ack_subscription(name, position).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.ack_subscription(name, position).await,
        }
    }

    /// The stream and type of the event stored at `position`, if any.
    pub(crate) async fn event_at(&self, position: i64) -> Result<Option<(String, String)>> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.event_at(position).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.event_at(position).await,
        }
    }
}

impl Store {
    /// Creates the persistent subscription `name` as a consumer group: its events (those that
    /// pass `filter`, from position `from`) are split by stream into `settings.partitions`
    /// partitions ([`crate::partition_of`]), each delivered to one member at a time, in order,
    /// with a checkpoint of its own. Consume it with [`Store::consume_group`]; acknowledge with
    /// [`Store::ack`] or, checking that the member holds the partition, [`Store::ack_member`]
    /// (an ack moves the checkpoint of the acknowledged event's partition only).
    /// Creating it again with the same filter and settings returns it unchanged; with others it
    /// is [`Error::SubscriptionExists`].
    pub async fn create_group(
        &self,
        name: &str,
        from: u64,
        filter: EventFilter,
        settings: GroupSettings,
    ) -> Result<SubscriptionInfo> {
        settings.validate()?;
        self.create_subscription_as(name, from, filter, Some(settings))
            .await
    }

    /// The partitions of group `name` (checkpoint, owner) and its live members.
    /// [`Error::SubscriptionNotFound`] when there is none, [`Error::InvalidInput`] when `name` is
    /// a plain subscription.
    pub async fn group_status(&self, name: &str) -> Result<GroupStatus> {
        let info = self.subscription_info(name).await?;
        let settings = info.group.ok_or_else(|| crate::groups::not_a_group(name))?;
        let (partitions, members) = self
            .backend()
            .group_state(name)
            .await?
            .ok_or_else(|| Error::SubscriptionNotFound(name.to_owned()))?;
        Ok(GroupStatus {
            settings,
            partitions,
            members,
        })
    }

    /// Consumes group `name` as `member` (a name of the same rules as a subscription's, unique
    /// among the group's members: a second consumer under one name shares its partitions): the
    /// events of the partitions it holds, each partition from its checkpoint, in order within a
    /// partition. The member is renewed while its stream is polled; one left unpolled for the group's member
    /// timeout loses its partitions to the other members, and dropping it hands them over at
    /// once. Delivery is at least once: after a handover the new holder starts at the
    /// partition's checkpoint. [`Error::InvalidInput`] when `name` is a plain subscription.
    pub async fn consume_group(
        &self,
        name: &str,
        member: &str,
    ) -> Result<(SubscriptionInfo, Subscription)> {
        validate_member_name(member)?;
        let info = self.subscription_info(name).await?;
        let settings = info.group.ok_or_else(|| crate::groups::not_a_group(name))?;
        let state = MemberStream {
            membership: self.beaters().join(self, name, member, settings),
            store: self.clone(),
            filter: info.filter.clone(),
            partitions: settings.partitions,
            owned: HashMap::new(),
            sub: None,
            next: 0,
            lease_until: Instant::now(),
            joined: false,
            fresh: false,
            asked: false,
            failed: false,
        };
        let stream = futures::stream::unfold(state, MemberStream::step);
        Ok((info, Subscription::from_stream(stream)))
    }
}

/// A member's name follows the rules of a subscription's.
pub(crate) fn validate_member_name(member: &str) -> Result<()> {
    validate_subscription_name(member).map_err(|_| {
        Error::InvalidInput(format!(
            "member name {member:?} must be 1 to {} characters of A-Z, a-z, 0-9, `_`, `-` and `.`",
            crate::MAX_SUBSCRIPTION_NAME_BYTES
        ))
    })
}

struct MemberStream {
    /// Its place in the group's beats; dropping it gives the partitions up at once.
    membership: Membership,
    store: Store,
    filter: EventFilter,
    partitions: u32,
    /// The partitions held, each with the position below which its events are not delivered
    /// (its checkpoint, or where the current subscription already was when it was kept).
    owned: HashMap<u32, u64>,
    /// The subscription the events come from; `None` while nothing is held.
    sub: Option<Subscription>,
    /// One past the last position `sub` yielded, delivered or not.
    next: u64,
    /// The hold is the store's until then (the last renewing beat's start + the timeout): past
    /// it, without a newer beat, the member stops delivering.
    lease_until: Instant,
    /// Whether the first poll asked for a beat yet.
    joined: bool,
    /// A snapshot arrived that is not applied yet.
    fresh: bool,
    /// The lease lapsed and a beat was asked for (cleared by the next snapshot).
    asked: bool,
    failed: bool,
}

impl MemberStream {
    async fn step(mut self) -> Option<(Result<RecordedEvent>, MemberStream)> {
        loop {
            if self.failed {
                return None;
            }
            // Polled: alive. The first poll joins at once rather than at the next interval.
            if self.joined {
                self.membership.polled();
            } else {
                self.joined = true;
                self.membership.beat_soon();
            }
            // (`changed()` below marks the value it woke for as seen: hence `fresh`.)
            if std::mem::take(&mut self.fresh)
                || self.membership.snapshot.has_changed().unwrap_or(false)
            {
                let snapshot = self.membership.snapshot.borrow_and_update().clone();
                if let Some(e) = &snapshot.failed {
                    self.failed = true;
                    return Some((Err(copy_error(e)), self));
                }
                self.apply(snapshot.held.get(self.membership.member()))
                    .await;
            }
            let lease = self.lease_until;
            let holding = !self.owned.is_empty();
            // Not renewed in time (a late beat): the others may hold our partitions by now, so
            // nothing is delivered until a beat says what is still ours. The partitions are
            // kept meanwhile: if they still are ours, delivery goes on where it stopped.
            let lapsed = holding && Instant::now() >= lease;
            if lapsed && !self.asked {
                self.asked = true;
                self.membership.beat_soon();
            }
            let changed = self.membership.snapshot.changed();
            let sub = match self.sub.as_mut() {
                Some(sub) if !lapsed => sub,
                _ => {
                    tokio::select! {
                        r = changed => match r {
                            Ok(()) => self.fresh = true,
                            Err(_) => return None,
                        },
                        _ = tokio::time::sleep_until(lease), if holding && !lapsed => {}
                    }
                    continue;
                }
            };
            tokio::select! {
                item = sub.next() => match item {
                    Some(Ok(e)) => {
                        self.next = e.position + 1;
                        let p = partition_of(&e.stream_id, self.partitions);
                        if self.owned.get(&p).is_some_and(|&from| e.position >= from) {
                            return Some((Ok(e), self));
                        }
                    }
                    Some(Err(e)) => {
                        self.failed = true;
                        return Some((Err(e), self));
                    }
                    None => return None,
                },
                r = changed => match r {
                    Ok(()) => self.fresh = true,
                    Err(_) => return None,
                },
                _ = tokio::time::sleep_until(lease), if holding => {}
            }
        }
    }

    /// Applies what a beat found this member holds (`None`: nothing, not live), keeping the
    /// subscription when it can.
    async fn apply(&mut self, held: Option<&Held>) {
        self.asked = false;
        // A lease already past (a member not renewed lately) is kept: delivery waits for a
        // beat that renews it (`step`).
        let mut held = match held {
            Some(h) => {
                self.lease_until = h.lease_until;
                h.partitions.clone()
            }
            None => Vec::new(),
        };
        if held.iter().any(|(p, _)| !self.owned.contains_key(p)) {
            let (store, group) = (self.store.clone(), self.membership.group().to_owned());
            refresh_checkpoints(&store, &group, &mut held).await;
        }
        let running = self.sub.is_some();
        let mut restart = !running;
        let mut owned = HashMap::with_capacity(held.len());
        for (p, checkpoint) in held {
            match self.owned.get(&p) {
                Some(&from) if running => {
                    owned.insert(p, from.max(checkpoint));
                }
                _ => {
                    owned.insert(p, checkpoint);
                    restart |= checkpoint < self.next;
                }
            }
        }
        if owned.is_empty() {
            self.sub = None;
        } else if restart {
            // What the old subscription passed for the kept partitions is not delivered again.
            if running {
                for (p, from) in owned.iter_mut() {
                    if self.owned.contains_key(p) {
                        *from = (*from).max(self.next);
                    }
                }
            }
            let from = owned.values().copied().min().unwrap_or(0);
            self.sub = Some(self.store.subscribe(from, self.filter.clone()));
            self.next = from;
        }
        self.owned = owned;
    }
}

/// A gained partition starts from its checkpoint as stored now, not as the beat read it:
/// this member's own acks since (of events it delivered before it lost the partition, say
/// to a late beat) would otherwise be delivered again. Rare (a change of holdings), and a
/// read; on an error the beat's checkpoints stand (at least once).
async fn refresh_checkpoints(store: &Store, group: &str, held: &mut [(u32, u64)]) {
    match store.backend().group_state(group).await {
        Ok(Some((partitions, _))) => {
            for (p, checkpoint) in held.iter_mut() {
                if let Some(now) = partitions.get(*p as usize).filter(|s| s.partition == *p) {
                    *checkpoint = (*checkpoint).max(now.checkpoint);
                }
            }
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "reading a consumer group's checkpoints failed"),
    }
}
