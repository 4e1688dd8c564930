//! The stream routes: append, read a stream forward or backward, read `$all` and categories
//! (filtered), and stream metadata and soft delete.
//!
//! Stream metadata applies to stream reads only (`$all`, categories and subscriptions keep every
//! event); a soft-deleted stream reads as 404 until something is appended, and a `no_stream`
//! append then continues after its old last version.

use std::time::Duration;

use galleon_eventstore::{Direction, EventData, ExpectedVersion, Json, Store, StreamMetadata};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::encode::read_body;
use crate::limits::ApiLimits;
use crate::query::{ReadQuery, Takes, filter, parse_read_query};
use crate::request::EXPECTED_VERSION_HEADER;
use crate::response::ApiResponse;

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
/// `no_stream`, `stream_exists` or a version; absent means `any`). The body's size was checked
/// before (`ApiLimits::max_body_bytes`).
pub(crate) async fn append(
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
pub(crate) async fn read_stream(
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
pub(crate) async fn read_all(
    store: &Store,
    limits: &ApiLimits,
    query: &[(&str, &str)],
) -> ApiResponse {
    match parse_read_query(query, Takes::Filter, limits.max_read_limit) {
        Ok(q) => read_filtered(store, q).await,
        Err(r) => r,
    }
}

/// `GET /categories/{category}?from=&limit=&type=`: `GET /all?category=` with the category in
/// the path.
pub(crate) async fn read_category(
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
    q.filter = match filter(Some(category), types) {
        Ok(f) => f,
        Err(r) => return r,
    };
    read_filtered(store, q).await
}

async fn read_filtered(store: &Store, q: ReadQuery) -> ApiResponse {
    let from = q.from.unwrap_or(0);
    match store.read_filtered(from, q.limit, &q.filter).await {
        Ok(events) => {
            let next_from = Some(events.last().map_or(from, |e| e.position + 1));
            read_body(None, &events, next_from)
        }
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `{"stream_id", "max_count", "max_age_ms", "truncate_before", "deleted"}`.
#[derive(Serialize)]
struct MetaBody<'a> {
    stream_id: &'a str,
    max_count: Option<u64>,
    max_age_ms: Option<u128>,
    truncate_before: Option<u64>,
    deleted: bool,
}

fn meta_body<'a>(stream: &'a str, m: &StreamMetadata) -> MetaBody<'a> {
    MetaBody {
        stream_id: stream,
        max_count: m.max_count,
        max_age_ms: m.max_age.map(|a| a.as_millis()),
        truncate_before: m.truncate_before,
        deleted: m.deleted,
    }
}

/// `GET /streams/{id}/metadata`: the stream's metadata (`null`s and `"deleted": false` when it
/// has none).
pub(crate) async fn stream_metadata(store: &Store, stream: &str) -> ApiResponse {
    match store.stream_metadata(stream).await {
        Ok(m) => ApiResponse::json(200, &meta_body(stream, &m)),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `PUT /streams/{id}/metadata` with `{"max_count"?, "max_age_ms"?, "truncate_before"?}`:
/// replaces the stream's read rules (a field left out removes its rule); 200 the metadata; 400
/// for a bad body or a limit of 0.
pub(crate) async fn set_stream_metadata(store: &Store, stream: &str, body: &[u8]) -> ApiResponse {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SetBody {
        max_count: Option<u64>,
        max_age_ms: Option<u64>,
        truncate_before: Option<u64>,
    }
    let b: SetBody = match serde_json::from_slice(body) {
        Ok(b) => b,
        Err(e) => {
            return ApiResponse::error(
                400,
                &format!(
                    "invalid request body (expected {{\"max_count\"?, \"max_age_ms\"?, \"truncate_before\"?}}, non-negative integers): {e}"
                ),
            );
        }
    };
    let meta = StreamMetadata {
        max_count: b.max_count,
        max_age: b.max_age_ms.map(Duration::from_millis),
        truncate_before: b.truncate_before,
        deleted: false,
    };
    if let Err(e) = store.set_stream_metadata(stream, meta).await {
        return ApiResponse::from_store_error(&e);
    }
    stream_metadata(store, stream).await
}

/// `POST /streams/{id}/delete`: soft delete; 200 `{"stream_id", "truncate_before"}`; 404 when the
/// stream has no events (or none since an earlier delete).
pub(crate) async fn delete_stream(store: &Store, stream: &str) -> ApiResponse {
    #[derive(Serialize)]
    struct Body<'a> {
        stream_id: &'a str,
        truncate_before: u64,
    }
    match store.delete_stream(stream).await {
        Ok(truncate_before) => ApiResponse::json(
            200,
            &Body {
                stream_id: stream,
                truncate_before,
            },
        ),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}
