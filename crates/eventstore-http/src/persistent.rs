//! The persistent-subscription routes: create, inspect, list, delete, acknowledge, and where a
//! consumer's event stream starts (the stream itself is `sse.rs`'s).
//!
//! Consumer groups: a subscription created with `"partitions": N` splits its streams into `N`
//! partitions ([`galleon_eventstore::partition_of`]); each member (`?member=NAME`) gets the
//! events of the partitions it holds, each partition in order from its checkpoint; an ack moves
//! the checkpoint of the acknowledged event's partition (with `"member"`, only that member's).
//! An ack of a position the subscription did not deliver is 400, the checkpoint unchanged. A member whose stream goes unread for
//! `member_timeout_ms` (default [`galleon_eventstore::DEFAULT_MEMBER_TIMEOUT`]), or whose
//! connection closes, loses its partitions to the others; delivery is at least once.

use std::time::Duration;

use galleon_eventstore::{
    DEFAULT_GROUP_PARTITIONS, GroupSettings, GroupStatus, Store, Subscription, SubscriptionInfo,
};
use serde::{Deserialize, Serialize};

use crate::limits::{ApiLimits, DEFAULT_READ_LIMIT};
use crate::query::{after_last_event_id, filter, parse_number};
use crate::response::ApiResponse;

/// `{"name","category","types","checkpoint","created_at","group"?}`.
#[derive(Serialize)]
struct InfoBody<'a> {
    name: &'a str,
    category: Option<&'a str>,
    types: &'a [String],
    checkpoint: u64,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<GroupBody<'a>>,
}

/// A consumer group's settings, and on `GET /subscriptions/{name}` its members and partitions.
#[derive(Serialize)]
struct GroupBody<'a> {
    partitions: u32,
    member_timeout_ms: u128,
    #[serde(skip_serializing_if = "Option::is_none")]
    members: Option<Vec<MemberBody<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    assignments: Option<Vec<AssignmentBody<'a>>>,
}

#[derive(Serialize)]
struct MemberBody<'a> {
    member: &'a str,
    expires_at: String,
}

#[derive(Serialize)]
struct AssignmentBody<'a> {
    partition: u32,
    checkpoint: u64,
    owner: Option<&'a str>,
}

impl<'a> From<&'a SubscriptionInfo> for InfoBody<'a> {
    fn from(i: &'a SubscriptionInfo) -> InfoBody<'a> {
        InfoBody {
            name: &i.name,
            category: i.filter.category_name(),
            types: i.filter.event_types(),
            checkpoint: i.checkpoint,
            created_at: i.created_at.to_string(),
            group: i.group.map(|g| GroupBody {
                partitions: g.partitions,
                member_timeout_ms: g.member_timeout.as_millis(),
                members: None,
                assignments: None,
            }),
        }
    }
}

impl<'a> InfoBody<'a> {
    /// With the group's members and partitions.
    fn with_status(mut self, st: &'a GroupStatus) -> InfoBody<'a> {
        if let Some(g) = &mut self.group {
            g.members = Some(
                st.members
                    .iter()
                    .map(|m| MemberBody {
                        member: &m.member,
                        expires_at: m.expires_at.to_string(),
                    })
                    .collect(),
            );
            g.assignments = Some(
                st.partitions
                    .iter()
                    .map(|p| AssignmentBody {
                        partition: p.partition,
                        checkpoint: p.checkpoint,
                        owner: p.owner.as_deref(),
                    })
                    .collect(),
            );
        }
        self
    }
}

/// Where a new subscription starts: a position, or `"end"` (only events not yet readable).
#[derive(Deserialize)]
#[serde(untagged)]
enum Start {
    Position(u64),
    Named(String),
}

/// The body of `PUT /subscriptions/{name}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    from: Option<Start>,
    category: Option<String>,
    #[serde(default)]
    types: Vec<String>,
    /// Makes it a consumer group of this many partitions.
    partitions: Option<u32>,
    /// A consumer group's member timeout (needs `partitions`).
    member_timeout_ms: Option<u64>,
}

/// `PUT /subscriptions/{name}` with `{"from"?: 0 | "end", "category"?, "types"?: [...],
/// "partitions"?: N, "member_timeout_ms"?: MS}` (an empty body: everything from position 0):
/// creates the subscription (with `partitions`, a consumer group: see
/// [`Store::create_group`]; `member_timeout_ms` defaults to
/// [`galleon_eventstore::DEFAULT_MEMBER_TIMEOUT`]), or returns the existing one if its filter and group
/// settings are the same (its checkpoint kept), 200 either way; 409 when it exists with others.
pub(crate) async fn create_subscription(store: &Store, name: &str, body: &[u8]) -> ApiResponse {
    let body: CreateBody = if body.iter().all(u8::is_ascii_whitespace) {
        CreateBody {
            from: None,
            category: None,
            types: Vec::new(),
            partitions: None,
            member_timeout_ms: None,
        }
    } else {
        match serde_json::from_slice(body) {
            Ok(b) => b,
            Err(e) => {
                return ApiResponse::error(
                    400,
                    &format!(
                        "invalid request body (expected {{\"from\"?: position or \"end\", \"category\"?, \"types\"?: [...], \"partitions\"?, \"member_timeout_ms\"?}}): {e}"
                    ),
                );
            }
        }
    };
    let group = match (body.partitions, body.member_timeout_ms) {
        (None, None) => None,
        (None, Some(_)) => {
            return ApiResponse::error(
                400,
                "\"member_timeout_ms\" applies to consumer groups: give \"partitions\" too",
            );
        }
        (partitions, timeout) => {
            let defaults = GroupSettings::default();
            let g = GroupSettings {
                partitions: partitions.unwrap_or(DEFAULT_GROUP_PARTITIONS),
                member_timeout: timeout.map_or(defaults.member_timeout, Duration::from_millis),
            };
            if let Err(e) = g.validate() {
                return ApiResponse::from_store_error(&e);
            }
            Some(g)
        }
    };
    let f = match filter(
        body.category.as_deref(),
        body.types.iter().map(String::as_str).collect(),
    ) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let from = match body.from {
        None => 0,
        Some(Start::Position(p)) => p,
        Some(Start::Named(n)) if n == "end" => match store.head_position().await {
            Ok(p) => p,
            Err(e) => return ApiResponse::from_store_error(&e),
        },
        Some(Start::Named(n)) => {
            return ApiResponse::error(
                400,
                &format!("\"from\": {n:?} is neither a position nor \"end\""),
            );
        }
    };
    let created = match group {
        None => store.create_subscription(name, from, f).await,
        Some(g) => store.create_group(name, from, f, g).await,
    };
    match created {
        Ok(info) => ApiResponse::json(200, &InfoBody::from(&info)),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `GET /subscriptions/{name}`: the subscription and its checkpoint, and for a consumer group
/// its live members and each partition's checkpoint and owner; 404 when unknown.
pub(crate) async fn subscription_info(store: &Store, name: &str) -> ApiResponse {
    let info = match store.subscription_info(name).await {
        Ok(info) => info,
        Err(e) => return ApiResponse::from_store_error(&e),
    };
    if info.group.is_none() {
        return ApiResponse::json(200, &InfoBody::from(&info));
    }
    match store.group_status(name).await {
        Ok(st) => ApiResponse::json(200, &InfoBody::from(&info).with_status(&st)),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `GET /subscriptions`: `{"subscriptions": [...], "next_after"}`, by name (byte order), at
/// most `limit=` of them (default [`DEFAULT_READ_LIMIT`] or the maximum if lower; 1 to
/// [`ApiLimits::max_read_limit`]), with names after `after=` (all without). `next_after` is the
/// `after=` of the next page, `null` on the last one. Any other query parameter is a 400.
pub(crate) async fn list_subscriptions(
    store: &Store,
    limits: &ApiLimits,
    query: &[(&str, &str)],
) -> ApiResponse {
    #[derive(Serialize)]
    struct Body<'a> {
        subscriptions: Vec<InfoBody<'a>>,
        next_after: Option<&'a str>,
    }
    let (after, limit) = match list_query(query, limits.max_read_limit) {
        Ok(q) => q,
        Err(r) => return r,
    };
    // One more than the page: whether there is a next page, without an empty last one.
    match store.list_subscriptions_page(after, limit + 1).await {
        Ok(mut list) => {
            let more = list.len() > limit;
            list.truncate(limit);
            let next_after = if more {
                list.last().map(|i| i.name.as_str())
            } else {
                None
            };
            ApiResponse::json(
                200,
                &Body {
                    subscriptions: list.iter().map(InfoBody::from).collect(),
                    next_after,
                },
            )
        }
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `GET /subscriptions`'s `after=` and `limit=`, each at most once; a 400 for anything else.
fn list_query<'q>(
    query: &[(&str, &'q str)],
    max_limit: usize,
) -> Result<(Option<&'q str>, usize), ApiResponse> {
    let mut after = None;
    let mut limit = None;
    for &(key, value) in query {
        match key {
            "after" if after.is_none() => after = Some(value),
            "limit" if limit.is_none() => {
                let n = parse_number("limit", value)?;
                if n == 0 || n > max_limit as u64 {
                    return Err(ApiResponse::error(
                        400,
                        &format!("query limit={n} is out of range 1..={max_limit}"),
                    ));
                }
                limit = Some(n as usize);
            }
            "after" | "limit" => {
                return Err(ApiResponse::error(
                    400,
                    &format!("query {key}= is given twice"),
                ));
            }
            other => {
                return Err(ApiResponse::error(
                    400,
                    &format!(
                        "unknown query parameter {other:?} (this route takes after= and limit=)"
                    ),
                ));
            }
        }
    }
    Ok((after, limit.unwrap_or(DEFAULT_READ_LIMIT.min(max_limit))))
}

/// `DELETE /subscriptions/{name}`: 200 `{"deleted": name}`; 404 when unknown.
pub(crate) async fn delete_subscription(store: &Store, name: &str) -> ApiResponse {
    #[derive(Serialize)]
    struct Body<'a> {
        deleted: &'a str,
    }
    match store.delete_subscription(name).await {
        Ok(()) => ApiResponse::json(200, &Body { deleted: name }),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `POST /subscriptions/{name}/ack` with `{"position": N}`: everything up to and including `N`
/// is done; 200 `{"name", "checkpoint"}` (the checkpoint never moves back). On a consumer
/// group: `N` and everything before it of `N`'s partition, 200 `{"name", "checkpoint",
/// "partition"}`; with `"member": M`, only if `M` holds that partition. `N` must be an event the
/// subscription delivered (its `id:`): otherwise 400 saying what was expected, the checkpoint
/// unchanged ([`Store::ack_event`], [`Store::ack_member`]).
pub(crate) async fn ack(store: &Store, name: &str, body: &[u8]) -> ApiResponse {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct AckBody {
        position: u64,
        member: Option<String>,
    }
    #[derive(Serialize)]
    struct Body<'a> {
        name: &'a str,
        checkpoint: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        partition: Option<u32>,
    }
    let (position, member) = match serde_json::from_slice::<AckBody>(body) {
        Ok(b) => (b.position, b.member),
        Err(e) => {
            return ApiResponse::error(
                400,
                &format!(
                    "invalid request body (expected {{\"position\": the id: of the last event handled, \"member\"?: a consumer group member}}): {e}"
                ),
            );
        }
    };
    let acked = match member {
        None => store.ack_event(name, position).await,
        Some(member) => store.ack_member(name, &member, position).await,
    };
    match acked {
        Ok(a) => ApiResponse::json(
            200,
            &Body {
                name,
                checkpoint: a.checkpoint,
                partition: a.partition,
            },
        ),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// Where `GET /subscriptions/{name}/events` starts, and the subscription: its checkpoint, or one
/// past `Last-Event-ID` when a reconnecting `EventSource` has seen further (its unacknowledged
/// events are its own to finish). 404 when unknown, 400 for a malformed `Last-Event-ID` and for
/// a consumer group (consumed with [`consume_group_from`]).
pub(crate) async fn consume_from(
    store: &Store,
    name: &str,
    last_event_id: Option<&str>,
) -> Result<(SubscriptionInfo, u64), ApiResponse> {
    let after = after_last_event_id(last_event_id)?;
    let info = store
        .subscription_info(name)
        .await
        .map_err(|e| ApiResponse::from_store_error(&e))?;
    if info.group.is_some() {
        return Err(ApiResponse::error(
            400,
            &format!("subscription {name:?} is a consumer group: consume it with ?member=NAME"),
        ));
    }
    let from = info.checkpoint.max(after);
    Ok((info, from))
}

/// `GET /subscriptions/{name}/events?member=M`: joins consumer group `name` as member `M` and
/// returns its stream ([`Store::consume_group`]): each of its partitions from its
/// checkpoint (`Last-Event-ID` does not apply: ids are per partition in order, not across the
/// stream). 404 when unknown; 400 for a bad member name or a plain subscription.
pub(crate) async fn consume_group_from(
    store: &Store,
    name: &str,
    member: &str,
) -> Result<(SubscriptionInfo, Subscription), ApiResponse> {
    store
        .consume_group(name, member)
        .await
        .map_err(|e| ApiResponse::from_store_error(&e))
}
