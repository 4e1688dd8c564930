//! Consumer groups: the pure part. A persistent subscription created as a group
//! ([`crate::Store::create_group`]) splits its events into a fixed number of partitions by
//! stream ([`partition_of`]), each with its own checkpoint and at most one owner among the
//! group's live members; this file holds the settings, the partition rule and the assignment
//! rule ([`plan`]) that both backends apply inside one transaction.
//!
//! Membership is a row per member with an expiry, pushed forward by each heartbeat (a process
//! renews all its members of a group whose streams are being polled in one transaction, every
//! third of the member timeout: `consumer_group.rs`). A member whose row expired is dead: its
//! partitions may be claimed. Every member, at each heartbeat, computes the same target
//! assignment from the sorted list of live members (partition `p` belongs to member `p mod n`),
//! releases what it holds outside its target and claims what is in its target and free
//! ([`plan`]; [`plan_beat`] applies it for each of a process's members in turn). A partition
//! therefore moves only after its owner released it or died: never two owners at once by the
//! store's account.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::time::Timestamp;

/// Partitions of a consumer group unless its creator says otherwise: the most members that can
/// share one group. A guess: more members than this on one subscription are rare, and each
/// partition is one small row.
pub const DEFAULT_GROUP_PARTITIONS: u32 = 16;

/// Most partitions a group may have: each heartbeat of a group reads every partition row.
pub const MAX_GROUP_PARTITIONS: u32 = 1024;

/// How long a member may go without a heartbeat (its stream not polled: a dead process, a dead
/// connection, a client that stopped reading) before its partitions go to the others, unless the
/// group was created with another (`member_timeout_ms`). A guess like Kafka's old session
/// timeout: long enough to ride out a GC pause or a slow handler, short enough that a crash
/// stalls its streams for seconds, not minutes.
pub const DEFAULT_MEMBER_TIMEOUT: Duration = Duration::from_secs(10);

/// Shortest member timeout accepted (a member heartbeats every third of it).
pub const MIN_MEMBER_TIMEOUT: Duration = Duration::from_millis(100);

/// Longest member timeout accepted: an hour.
pub const MAX_MEMBER_TIMEOUT: Duration = Duration::from_secs(3600);

/// How a persistent subscription is shared by a consumer group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupSettings {
    /// Partitions its streams are split into (1 to [`MAX_GROUP_PARTITIONS`]): at most this many
    /// members receive events at once. One partition is active/passive failover.
    pub partitions: u32,
    /// Silence after which a member counts as dead ([`MIN_MEMBER_TIMEOUT`] to
    /// [`MAX_MEMBER_TIMEOUT`]).
    pub member_timeout: Duration,
}

impl Default for GroupSettings {
    fn default() -> GroupSettings {
        GroupSettings {
            partitions: DEFAULT_GROUP_PARTITIONS,
            member_timeout: DEFAULT_MEMBER_TIMEOUT,
        }
    }
}

impl GroupSettings {
    /// Checks the bounds; the message names the one out of range.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_GROUP_PARTITIONS).contains(&self.partitions) {
            return Err(Error::InvalidInput(format!(
                "partitions {}: expected 1 to {MAX_GROUP_PARTITIONS}",
                self.partitions
            )));
        }
        if !(MIN_MEMBER_TIMEOUT..=MAX_MEMBER_TIMEOUT).contains(&self.member_timeout) {
            return Err(Error::InvalidInput(format!(
                "member timeout {} ms: expected {} to {} ms",
                self.member_timeout.as_millis(),
                MIN_MEMBER_TIMEOUT.as_millis(),
                MAX_MEMBER_TIMEOUT.as_millis()
            )));
        }
        Ok(())
    }

    /// The member timeout in whole milliseconds, as stored.
    pub(crate) fn timeout_ms(&self) -> i64 {
        i64::try_from(self.member_timeout.as_millis()).unwrap_or(i64::MAX)
    }

    /// Settings as stored: `partitions` and `member_timeout_ms` columns, both `NULL` for a plain
    /// subscription.
    pub(crate) fn from_columns(partitions: Option<i64>, timeout_ms: Option<i64>) -> Option<Self> {
        Some(GroupSettings {
            partitions: u32::try_from(partitions?).ok()?,
            member_timeout: Duration::from_millis(u64::try_from(timeout_ms?).ok()?),
        })
    }
}

/// The partition of `stream` in a group of `partitions` partitions: FNV-1a (64 bits) of the
/// stream id's bytes modulo `partitions`. Fixed forever (stored checkpoints depend on it), the
/// same in every process.
pub fn partition_of(stream: &str, partitions: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in stream.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(partitions.max(1))) as u32
}

/// One partition of a group as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// Its number, `0..partitions`.
    pub partition: u32,
    /// Where its delivery continues: one past its last acknowledged position.
    pub checkpoint: u64,
    /// The member holding it, if any (possibly one whose timeout has passed and who has not been
    /// replaced yet).
    pub owner: Option<String>,
}

/// A member of a group as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberState {
    /// Its name.
    pub member: String,
    /// When it counts as dead unless it heartbeats before.
    pub expires_at: Timestamp,
}

/// A consumer group's state ([`crate::Store::group_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    /// Its settings.
    pub settings: GroupSettings,
    /// Every partition, by number.
    pub partitions: Vec<PartitionState>,
    /// Members not yet expired, by name.
    pub members: Vec<MemberState>,
}

/// The error of a group operation on a plain subscription.
pub(crate) fn not_a_group(name: &str) -> Error {
    Error::InvalidInput(format!(
        "subscription {name:?} is not a consumer group (it was created without partitions)"
    ))
}

/// What one heartbeat changes: partitions to give up and partitions to take.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) release: Vec<i32>,
    pub(crate) claim: Vec<i32>,
}

/// The heartbeat of `me`: `live` the live members sorted by name (with `me` unless it is
/// leaving), `owners[p]` the owner of partition `p`. Partition `p`'s target is `live[p % n]`.
pub(crate) fn plan(live: &[String], owners: &[Option<String>], me: &str) -> Plan {
    let n = live.len();
    let mut out = Plan::default();
    for (p, owner) in owners.iter().enumerate() {
        let mine = n > 0 && live[p % n] == me;
        let held_by_me = owner.as_deref() == Some(me);
        if held_by_me && !mine {
            out.release.push(p as i32);
        } else if mine && owner.as_ref().is_none_or(|o| !live.contains(o)) {
            out.claim.push(p as i32);
        }
    }
    out
}

/// One coalesced heartbeat of a process's members of a group: what to change in storage.
#[derive(Debug, Default, Clone)]
pub(crate) struct Beat {
    /// Members to renew (their expiry pushed forward; inserted when new): those whose stream
    /// was polled since the last beat.
    pub(crate) renew: Vec<String>,
    /// Members leaving (their rows deleted, their partitions released).
    pub(crate) leave: Vec<String>,
    /// Every member of the group in this process: the ones whose holdings are reported.
    pub(crate) local: Vec<String>,
}

/// The partitions (with checkpoints) each of a process's members holds after a beat, by member;
/// only members still live are present.
pub(crate) type Holdings = std::collections::HashMap<String, Vec<(u32, u64)>>;

/// Applies, in one pass, the heartbeat of every member of `beat`: first the departures, then the
/// renewals, each member's [`plan`] seeing the owners its predecessors left, exactly as if their
/// heartbeats had run one after another. `live` is sorted; `owners` is updated in place; returns
/// the partitions whose owner changed (none when the assignment is already settled, so an idle
/// group writes no partition row).
pub(crate) fn plan_beat(live: &[String], owners: &mut [Option<String>], beat: &Beat) -> Vec<usize> {
    let before = owners.to_vec();
    for m in beat.leave.iter().chain(&beat.renew) {
        let p = plan(live, owners, m);
        for r in p.release {
            owners[r as usize] = None;
        }
        for c in p.claim {
            owners[c as usize] = Some(m.clone());
        }
    }
    (0..owners.len())
        .filter(|&p| owners[p] != before[p])
        .collect()
}

/// What each of `local` still live (`live` is sorted) holds by `owners`, with `checkpoints`.
pub(crate) fn holdings(
    live: &[String],
    owners: &[Option<String>],
    checkpoints: &[u64],
    local: &[String],
) -> Holdings {
    let mut out: Holdings = local
        .iter()
        .filter(|m| live.binary_search(m).is_ok())
        .map(|m| (m.clone(), Vec::new()))
        .collect();
    for (p, owner) in owners.iter().enumerate() {
        if let Some(held) = owner.as_ref().and_then(|o| out.get_mut(o)) {
            held.push((p as u32, checkpoints[p]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn partitions_are_stable_and_spread() {
        assert_eq!(partition_of("order-1", 16), partition_of("order-1", 16));
        assert_eq!(partition_of("anything", 1), 0);
        let mut seen = [0usize; 8];
        for i in 0..800 {
            seen[partition_of(&format!("account-{i}"), 8) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        // FNV-1a of the empty string is the offset basis.
        assert_eq!(partition_of("", 7), (0xcbf2_9ce4_8422_2325u64 % 7) as u32);
    }

    #[test]
    fn a_member_claims_free_or_dead_partitions_of_its_share_and_releases_the_rest() {
        let live = s(&["a", "b"]);
        // Everything held by a (alone before b joined): a releases the odd ones.
        let owners: Vec<Option<String>> = (0..4).map(|_| Some("a".to_string())).collect();
        let a = plan(&live, &owners, "a");
        assert_eq!(
            a,
            Plan {
                release: vec![1, 3],
                claim: vec![]
            }
        );
        // b cannot take them while a holds them and is live...
        assert_eq!(plan(&live, &owners, "b"), Plan::default());
        // ...but takes them once released, or held by a dead member.
        let owners = vec![
            Some("a".into()),
            None,
            Some("a".into()),
            Some("dead".into()),
        ];
        assert_eq!(plan(&live, &owners, "b").claim, vec![1, 3]);
        // A member leaving (not in `live`) releases everything it holds.
        let left = plan(&s(&["b"]), &[Some("a".into()), None], "a");
        assert_eq!(
            left,
            Plan {
                release: vec![0],
                claim: vec![]
            }
        );
        // The only member claims all free partitions and keeps its own.
        let all = plan(&s(&["a"]), &[None, Some("a".into())], "a");
        assert_eq!(
            all,
            Plan {
                release: vec![],
                claim: vec![0]
            }
        );
    }

    #[test]
    fn a_beat_applies_every_local_member_in_turn() {
        let live = s(&["a", "b", "c"]);
        // a held everything; b and c join, a renews, x (elsewhere) left partition 3 free.
        let mut owners = vec![
            Some("a".to_string()),
            Some("a".into()),
            Some("a".into()),
            None,
        ];
        let beat = Beat {
            renew: s(&["a", "b", "c"]),
            leave: vec![],
            local: s(&["a", "b", "c", "gone"]),
        };
        // a releases 1 and 2 first, so b and c take them in the same beat; 3 goes to a.
        let changed = plan_beat(&live, &mut owners, &beat);
        assert_eq!(changed, vec![1, 2, 3]);
        assert_eq!(
            owners,
            vec![
                Some("a".into()),
                Some("b".into()),
                Some("c".into()),
                Some("a".into())
            ]
        );
        // Settled: nothing changes, nothing to write.
        assert!(plan_beat(&live, &mut owners, &beat).is_empty());
        let held = holdings(&live, &owners, &[5, 6, 7, 8], &beat.local);
        assert_eq!(held["a"], vec![(0, 5), (3, 8)]);
        assert_eq!(held["b"], vec![(1, 6)]);
        assert!(!held.contains_key("gone"), "not live: absent");
        // c leaves: its partition goes to a (2 % 2), a hands 3 to b, all in one beat.
        let live = s(&["a", "b"]);
        let beat = Beat {
            renew: s(&["a", "b"]),
            leave: s(&["c"]),
            local: s(&["a", "b"]),
        };
        assert_eq!(plan_beat(&live, &mut owners, &beat), vec![2, 3]);
        assert_eq!(
            owners,
            vec![
                Some("a".into()),
                Some("b".into()),
                Some("a".into()),
                Some("b".into())
            ]
        );
    }

    #[test]
    fn settings_bounds() {
        assert!(GroupSettings::default().validate().is_ok());
        let bad = GroupSettings {
            partitions: 0,
            ..GroupSettings::default()
        };
        assert!(bad.validate().is_err());
        let bad = GroupSettings {
            member_timeout: Duration::from_millis(10),
            ..GroupSettings::default()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("10 ms"));
        assert_eq!(
            GroupSettings::from_columns(Some(4), Some(500)),
            Some(GroupSettings {
                partitions: 4,
                member_timeout: Duration::from_millis(500)
            })
        );
        assert_eq!(GroupSettings::from_columns(None, None), None);
    }
}
