//! The HTTP face of the store, independent of any HTTP server: one function per route, called by
//! the server's router with the parameters it has already decoded (the stream id, the query's
//! pairs, the `ES-Expected-Version` header, the body), answering an [`ApiResponse`] (status,
//! content type, JSON body). `GET /all/subscribe` streams, so the server drives it with
//! [`subscribe_from`], [`crate::Store::subscribe_all`] and [`sse_frame`].
//!
//! | route                                   | function         | answer                                   |
//! |-----------------------------------------|------------------|------------------------------------------|
//! | `POST /streams/{id}`                    | [`append`]       | 201 positions; 409 conflict; 400 bad JSON or header |
//! | `GET /streams/{id}?from=&limit=&direction=forward\|backward` | [`read_stream`] | 200 events; 404 unknown stream |
//! | `GET /streams/{id}/metadata`            | [`stream_metadata`] | 200 `max_count`, `max_age_ms`, `truncate_before`, `deleted` |
//! | `PUT /streams/{id}/metadata` `{"max_count"?, "max_age_ms"?, "truncate_before"?}` | [`set_stream_metadata`] | 200; 400 |
//! | `POST /streams/{id}/delete`                  | [`delete_stream`] | 200 `truncate_before` (soft delete); 404 |
//! | `GET /all?from=&limit=&category=&type=` | [`read_all`]     | 200 events of `$all`, filtered if asked  |
//! | `GET /categories/{c}?from=&limit=&type=` | [`read_category`] | 200 events of streams `c` or `c-...`  |
//! | `GET /all/subscribe?from=&category=&type=` | [`subscribe_query`] | where the server's SSE stream starts, its filter |
//! | `PUT /subscriptions/{name}` `{"from"?, "category"?, "types"?, "partitions"?, "member_timeout_ms"?}` | [`create_subscription`] | 200 the subscription (a consumer group with `partitions`); 409 other filter or settings |
//! | `GET /subscriptions`, `GET /subscriptions/{name}` | [`list_subscriptions`], [`subscription_info`] | 200 (a group's members and partitions); 404 |
//! | `DELETE /subscriptions/{name}`          | [`delete_subscription`] | 200; 404                           |
//! | `GET /subscriptions/{name}/events` (`Last-Event-ID`) | [`consume_from`] | where its SSE stream starts  |
//! | `GET /subscriptions/{name}/events?member=M` | [`consume_group_from`] | a consumer group member's stream |
//! | `POST /subscriptions/{name}/ack` `{"position"}` | [`ack`]  | 200 the checkpoint (a group: of the event's partition); 404 |
//!
//! Consumer groups: a subscription created with `"partitions": N` splits its streams into `N`
//! partitions ([`crate::partition_of`]); each member (`?member=NAME`) gets the events of the
//! partitions it holds, each partition in order from its checkpoint; an ack moves the
//! checkpoint of the acknowledged event's partition. A member whose stream goes unread for
//! `member_timeout_ms` (default [`crate::DEFAULT_MEMBER_TIMEOUT`]), or whose connection closes,
//! loses its partitions to the others; delivery is at least once.
//!
//! Stream metadata applies to stream reads only (`$all`, categories and subscriptions keep every
//! event); a soft-deleted stream reads as 404 until something is appended, and a `no_stream`
//! append then continues after its old last version.
//!
//! Filters: `category=C` keeps events of streams named `C` or `C-...` (message-db's rule, see
//! [`crate::category_of`]); `type=T` (repeatable) keeps events of any of the types named. Every
//! event's JSON carries its `recorded_at` (RFC 3339, UTC, microseconds).
//!
//! # Examples
//! ```
//! use galleon_eventstore::{Store, api};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(&format!("sqlite:{}", dir.path().join("e.db").display())).await.unwrap();
//! let body = br#"[{"type":"Placed","data":{"n":1}}]"#;
//! let limits = api::ApiLimits::default();
//! let r = api::append(&store, &limits, "order-1", Some("no_stream"), body).await;
//! assert_eq!(r.status, 201);
//! let r = api::read_stream(&store, &limits, "order-1", &[("limit", "10")]).await;
//! assert_eq!(r.status, 200);
//! # });
//! ```

mod persistent;
mod query;
mod response;
mod streams;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::store::Store;
use crate::types::{Direction, EventData, ExpectedVersion, Json};
pub use persistent::{
    ack, consume_from, consume_group_from, create_subscription, delete_subscription,
    list_subscriptions, subscription_info,
};
pub use query::{DEFAULT_READ_LIMIT, MAX_HTTP_READ_LIMIT, subscribe_from, subscribe_query};
use query::{Takes, parse_read_query};
use response::read_body;
pub use response::{ApiResponse, JSON_CONTENT_TYPE, SSE_CONTENT_TYPE, sse_frame};
pub use streams::{delete_stream, set_stream_metadata, stream_metadata};

/// Most events one `POST /streams/{id}` may carry. A guess, one tenth of the store's own
/// [`crate::MAX_APPEND_EVENTS`], so one HTTP request holds a stream's lock only briefly.
pub const MAX_HTTP_APPEND_EVENTS: usize = 1_000;

/// Per-request bounds of the HTTP API (`galleon serve --max-append-events`, `--max-read-limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiLimits {
    /// Most events one `POST /streams/{id}` may carry; at most [`crate::MAX_APPEND_EVENTS`].
    pub max_append_events: usize,
    /// Largest `limit` a read may ask for; at most [`crate::MAX_READ_EVENTS`]. A read without
    /// `limit` returns [`DEFAULT_READ_LIMIT`] events, or this many if fewer.
    pub max_read_limit: usize,
}

impl Default for ApiLimits {
    fn default() -> ApiLimits {
        ApiLimits {
            max_append_events: MAX_HTTP_APPEND_EVENTS,
            max_read_limit: MAX_HTTP_READ_LIMIT,
        }
    }
}

/// Name of the header carrying the expected version of an append.
pub const EXPECTED_VERSION_HEADER: &str = "ES-Expected-Version";

/// One event of a `POST /streams/{id}` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewEvent {
    id: Option<Uuid>,
    #[serde(rename = "type")]
    event_type: String,
    data: Box<RawValue>,
    metadata: Option<Box<RawValue>>,
}

#[derive(Serialize)]
struct AppendBody<'a> {
    stream_id: &'a str,
    first_version: u64,
    last_version: u64,
    first_position: u64,
    last_position: u64,
}

/// `POST /streams/{stream}`: appends the body's events (a JSON array of `{"id"?, "type",
/// "data", "metadata"?}`) under `expected_version` (the `ES-Expected-Version` header: `any`,
/// `no_stream`, `stream_exists` or a version; absent means `any`). The body's size is the
/// server's business (its request body limit), checked before the body was read.
pub async fn append(
    store: &Store,
    limits: &ApiLimits,
    stream: &str,
    expected_version: Option<&str>,
    body: &[u8],
) -> ApiResponse {
    let expected = match expected_version {
        None => ExpectedVersion::Any,
        Some(v) => match ExpectedVersion::parse(v) {
            Ok(v) => v,
            Err(_) => {
                return ApiResponse::error(
                    400,
                    &format!(
                        "header {EXPECTED_VERSION_HEADER}: {v:?} is not one of any, no_stream, stream_exists or a non-negative integer"
                    ),
                );
            }
        },
    };
    let parsed: Vec<NewEvent> = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return ApiResponse::error(
                400,
                &format!(
                    "invalid request body (expected a JSON array of {{\"id\"?, \"type\", \"data\", \"metadata\"?}}): {e}"
                ),
            );
        }
    };
    if parsed.len() > limits.max_append_events {
        return ApiResponse::error(
            400,
            &format!(
                "{} events in one request, the limit is {}",
                parsed.len(),
                limits.max_append_events
            ),
        );
    }
    let events: Vec<EventData> = parsed
        .into_iter()
        .map(|e| EventData {
            // Time-ordered, like `EventData::json`'s.
            id: e.id.unwrap_or_else(Uuid::now_v7),
            event_type: e.event_type,
            data: Json::from(e.data),
            metadata: e.metadata.map_or_else(Json::empty_object, Json::from),
        })
        .collect();
    match store.append(stream, expected, events).await {
        Ok(r) => ApiResponse::json(
            201,
            &AppendBody {
                stream_id: stream,
                first_version: r.first_version,
                last_version: r.last_version,
                first_position: r.first_position,
                last_position: r.last_position,
            },
        ),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `GET /streams/{stream}?from=&limit=&direction=`: one page of the stream's events; `query`
/// holds the decoded query pairs.
pub async fn read_stream(
    store: &Store,
    limits: &ApiLimits,
    stream: &str,
    query: &[(&str, &str)],
) -> ApiResponse {
    let q = match parse_read_query(query, Takes::Direction, limits.max_read_limit) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let from = q.from.unwrap_or(match q.direction {
        Direction::Forward => 0,
        Direction::Backward => u64::MAX,
    });
    match store.read_stream(stream, from, q.limit, q.direction).await {
        Ok(events) => {
            let next_from = events.last().and_then(|e| match q.direction {
                Direction::Forward => Some(e.version + 1),
                Direction::Backward => e.version.checked_sub(1),
            });
            read_body(Some(stream), &events, next_from)
        }
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `GET /all?from=&limit=&category=&type=`: one page of `$all`, or of the events of one
/// category and/or of some types (`type=` repeated: any of them); `query` holds the decoded
/// query pairs. `next_from` is one past the last event returned (`from` when none was).
pub async fn read_all(store: &Store, limits: &ApiLimits, query: &[(&str, &str)]) -> ApiResponse {
    match parse_read_query(query, Takes::Filter, limits.max_read_limit) {
        Ok(q) => read_filtered(store, q).await,
        Err(r) => r,
    }
}

/// `GET /categories/{category}?from=&limit=&type=`: `GET /all?category=` with the category in
/// the path.
pub async fn read_category(
    store: &Store,
    limits: &ApiLimits,
    category: &str,
    query: &[(&str, &str)],
) -> ApiResponse {
    let mut q = match parse_read_query(query, Takes::Types, limits.max_read_limit) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let types: Vec<&str> = q.filter.event_types().iter().map(String::as_str).collect();
    q.filter = match query::filter(Some(category), types) {
        Ok(f) => f,
        Err(r) => return r,
    };
    read_filtered(store, q).await
}

async fn read_filtered(store: &Store, q: query::ReadQuery) -> ApiResponse {
    let from = q.from.unwrap_or(0);
    match store.read_filtered(from, q.limit, &q.filter).await {
        Ok(events) => {
            let next_from = Some(events.last().map_or(from, |e| e.position + 1));
            read_body(None, &events, next_from)
        }
        Err(e) => ApiResponse::from_store_error(&e),
    }
}
