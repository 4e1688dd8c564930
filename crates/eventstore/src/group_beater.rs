//! The heartbeats of a process's consumer-group members, coalesced: one beater task per (store
//! handle, group) with members here runs ONE heartbeat transaction per interval for all of them
//! (`Backend::group_beat`), computes the assignment once, and publishes what each member holds
//! through one `watch` channel per group. So idle members cost one small transaction per group
//! per interval, not one per member (a thousand members of one group took a write transaction
//! each per second before, and SQLite's appends waited for the write lock behind them).
//!
//! A member proves it is alive by its stream being polled: each poll sets its `polled` flag
//! (every publication wakes it, so a polled stream sets it once per beat); the beater renews only
//! the members whose flag it finds set, and clears them. A stream left unpolled is not renewed
//! and, after the member timeout, expires as before. Joining (a stream's first poll) and leaving
//! (the last stream of a member name dropped) wake the beater for an early beat. It stops when
//! the group has no member left here; the next join starts another.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::error::Error;
use crate::groups::{Beat, GroupSettings};
use crate::store::{Backend, Store};

/// Wait before retrying a heartbeat that failed on a transient error.
const BEAT_RETRY: Duration = Duration::from_millis(200);

/// The time between heartbeats of a group of `settings`: a third of its member timeout, at most
/// [`crate::MAX_HEARTBEAT_INTERVAL`].
pub(crate) fn interval_of(settings: &GroupSettings) -> Duration {
    (settings.member_timeout / 3).min(crate::MAX_HEARTBEAT_INTERVAL)
}

/// The groups with members in this store handle (and its clones), each with its beater.
#[derive(Debug, Default)]
pub(crate) struct Beaters {
    groups: Mutex<HashMap<String, Arc<Group>>>,
}

/// One group's local members and what its last beat found.
#[derive(Debug)]
struct Group {
    name: String,
    members: Mutex<Members>,
    /// Wakes the beater before its interval: a join, a departure, a lapsed lease.
    wake: Notify,
    snapshot: watch::Sender<Arc<Snapshot>>,
}

#[derive(Debug, Default)]
struct Members {
    by_name: HashMap<String, Local>,
    /// Names whose last stream was dropped, to delete at the next beat.
    leaving: Vec<String>,
}

/// A member name with streams in this process.
#[derive(Debug)]
struct Local {
    /// Its open streams (a second consumer under one name shares the first's partitions).
    streams: usize,
    /// Set by its streams when polled, cleared by each beat that renews it.
    polled: Arc<AtomicBool>,
    /// Until when its last renewal holds (the renewing beat's start + the member timeout).
    lease_until: Option<Instant>,
}

/// What a beat found, for every local member: published to all of them at once.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// Per live local member: its partitions with their checkpoints, and its lease.
    pub(crate) held: HashMap<String, Held>,
    /// A beat failed for good (the group was deleted, say): the members end with this.
    pub(crate) failed: Option<Arc<Error>>,
}

#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) partitions: Vec<(u32, u64)>,
    /// The member must stop delivering past this without a newer snapshot.
    pub(crate) lease_until: Instant,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Beaters {
    /// Registers a stream of `member` in group `name`, starting the group's beater if it has
    /// none here. Must run inside a tokio runtime.
    pub(crate) fn join(
        &self,
        store: &Store,
        name: &str,
        member: &str,
        settings: GroupSettings,
    ) -> Membership {
        let mut groups = lock(&self.groups);
        let group = groups
            .entry(name.to_owned())
            .or_insert_with(|| {
                let group = Arc::new(Group {
                    name: name.to_owned(),
                    members: Mutex::default(),
                    wake: Notify::new(),
                    snapshot: watch::Sender::new(Arc::default()),
                });
                tokio::spawn(run(store.clone(), group.clone(), interval_of(&settings)));
                group
            })
            .clone();
        let polled = {
            let mut m = lock(&group.members);
            m.leaving.retain(|n| n != member);
            let local = m.by_name.entry(member.to_owned()).or_insert_with(|| Local {
                streams: 0,
                polled: Arc::default(),
                lease_until: None,
            });
            local.streams += 1;
            local.polled.clone()
        };
        let snapshot = group.snapshot.subscribe();
        Membership {
            group,
            member: member.to_owned(),
            polled,
            snapshot,
        }
    }

    /// Forgets `group` if it has no member left here; true when it did (its beater then ends).
    fn retire(&self, group: &Arc<Group>) -> bool {
        let mut groups = lock(&self.groups);
        let m = lock(&group.members);
        if !m.by_name.is_empty() || !m.leaving.is_empty() {
            return false;
        }
        if groups
            .get(&group.name)
            .is_some_and(|g| Arc::ptr_eq(g, group))
        {
            groups.remove(&group.name);
        }
        true
    }
}

/// One member stream's place in its group's beats. Dropping it is the stream's departure.
#[derive(Debug)]
pub(crate) struct Membership {
    group: Arc<Group>,
    member: String,
    polled: Arc<AtomicBool>,
    /// The group's latest [`Snapshot`].
    pub(crate) snapshot: watch::Receiver<Arc<Snapshot>>,
}

impl Membership {
    /// The member's name.
    pub(crate) fn member(&self) -> &str {
        &self.member
    }

    /// The group's name.
    pub(crate) fn group(&self) -> &str {
        &self.group.name
    }

    /// The stream is being polled: renew the member at the next beat.
    pub(crate) fn polled(&self) {
        self.polled.store(true, Ordering::Relaxed);
    }

    /// Asks for a beat now (the stream's first poll, or its lease lapsed).
    pub(crate) fn beat_soon(&self) {
        self.polled();
        self.group.wake.notify_one();
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut m = lock(&self.group.members);
        if let Some(local) = m.by_name.get_mut(&self.member) {
            local.streams -= 1;
            if local.streams == 0 {
                m.by_name.remove(&self.member);
                m.leaving.push(std::mem::take(&mut self.member));
            }
        }
        drop(m);
        // Hands the partitions over at once (the beater deletes the row); without a runtime the
        // beater is gone too and the member timeout does it.
        self.group.wake.notify_one();
    }
}

/// The beater of `group`: a beat every `interval` (or when woken) while it has members here.
async fn run(store: Store, group: Arc<Group>, mut interval: Duration) {
    let mut next = Instant::now() + interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = group.wake.notified() => {}
        }
        let started = Instant::now();
        next = started + interval;
        let beat = {
            let mut m = lock(&group.members);
            if m.by_name.is_empty() && m.leaving.is_empty() {
                drop(m);
                if store.beaters().retire(&group) {
                    return;
                }
                continue;
            }
            let mut beat = Beat {
                leave: m.leaving.clone(),
                ..Beat::default()
            };
            for (name, local) in &m.by_name {
                if local.polled.swap(false, Ordering::Relaxed) {
                    beat.renew.push(name.clone());
                }
                beat.local.push(name.clone());
            }
            m.leaving.clear();
            beat
        };
        if beat.renew.is_empty() && beat.leave.is_empty() {
            // Nobody polled, nobody left: nothing to write (unpolled members expire).
            continue;
        }
        store.note_group_heartbeat();
        match store.backend().group_beat(&group.name, beat.clone()).await {
            Ok(Some((settings, held))) => {
                interval = interval_of(&settings);
                next = started + interval;
                let lease = started + settings.member_timeout;
                let mut m = lock(&group.members);
                for name in &beat.renew {
                    if let Some(local) = m.by_name.get_mut(name) {
                        local.lease_until = Some(lease);
                    }
                }
                let held = held
                    .into_iter()
                    .filter_map(|(name, partitions)| {
                        let lease_until = m.by_name.get(&name)?.lease_until?;
                        Some((
                            name,
                            Held {
                                partitions,
                                lease_until,
                            },
                        ))
                    })
                    .collect();
                drop(m);
                group
                    .snapshot
                    .send_replace(Arc::new(Snapshot { held, failed: None }));
            }
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, name = %group.name, "consumer group heartbeat failed; retrying");
                let mut m = lock(&group.members);
                // Not renewed nor gone yet: try again.
                for name in &beat.renew {
                    if let Some(local) = m.by_name.get(name) {
                        local.polled.store(true, Ordering::Relaxed);
                    }
                }
                for name in beat.leave {
                    if !m.by_name.contains_key(&name) {
                        m.leaving.push(name);
                    }
                }
                next = Instant::now() + BEAT_RETRY.min(interval);
            }
            outcome => {
                let e = match outcome {
                    Err(e) => e,
                    _ => Error::SubscriptionNotFound(group.name.clone()),
                };
                group.snapshot.send_replace(Arc::new(Snapshot {
                    held: HashMap::new(),
                    failed: Some(Arc::new(e)),
                }));
            }
        }
    }
}

impl Backend {
    /// One heartbeat of this process's members of group `name`: see [`Beat`].
    pub(crate) async fn group_beat(
        &self,
        name: &str,
        beat: Beat,
    ) -> crate::Result<Option<(GroupSettings, crate::groups::Holdings)>> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.group_beat(name, beat).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.group_beat(name, beat).await,
        }
    }
}

/// A copy of a beat's fatal error for one member (errors are not `Clone`).
pub(crate) fn copy_error(e: &Error) -> Error {
    match e {
        Error::SubscriptionNotFound(n) => Error::SubscriptionNotFound(n.clone()),
        Error::InvalidInput(m) => Error::InvalidInput(m.clone()),
        other => Error::Backend {
            backend: "consumer group",
            message: other.to_string(),
            transient: false,
            source: other.to_string().into(),
        },
    }
}
