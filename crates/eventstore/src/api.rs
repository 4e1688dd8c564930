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
//! | `GET /all?from=&limit=`                 | [`read_all`]     | 200 events of `$all`                     |
//! | `GET /all/subscribe?from=`              | [`subscribe_from`] | where the server's SSE stream starts   |
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

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::error::Error;
use crate::store::Store;
use crate::types::{Direction, EventData, ExpectedVersion, Json, RecordedEvent};

/// Most events one `POST /streams/{id}` may carry. A guess, one tenth of the store's own
/// [`crate::MAX_APPEND_EVENTS`], so one HTTP request holds a stream's lock only briefly.
pub const MAX_HTTP_APPEND_EVENTS: usize = 1_000;

/// Events returned by a read when the request has no `limit`: the seed benchmark's page size.
pub const DEFAULT_READ_LIMIT: usize = 100;

/// Largest `limit` a read request may ask for; larger values get a 400. A guess bounding one
/// response to ~1 MB of typical events.
pub const MAX_HTTP_READ_LIMIT: usize = 1_000;

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

/// Content type of every JSON answer.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// Content type of the `GET /all/subscribe` answer.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream";

/// Name of the header carrying the expected version of an append.
pub const EXPECTED_VERSION_HEADER: &str = "ES-Expected-Version";

/// An HTTP response: status, content type and a complete body.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    /// Status code.
    pub status: u16,
    /// Value of `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
}

impl ApiResponse {
    fn json<T: Serialize>(status: u16, value: &T) -> ApiResponse {
        match serde_json::to_vec(value) {
            Ok(body) => ApiResponse {
                status,
                content_type: JSON_CONTENT_TYPE,
                body: Bytes::from(body),
            },
            Err(e) => ApiResponse::error(500, &format!("cannot encode the response: {e}")),
        }
    }

    fn error(status: u16, message: &str) -> ApiResponse {
        #[derive(Serialize)]
        struct Body<'a> {
            error: &'a str,
        }
        let body = serde_json::to_vec(&Body { error: message }).unwrap_or_else(|_| b"{}".to_vec());
        ApiResponse {
            status,
            content_type: JSON_CONTENT_TYPE,
            body: Bytes::from(body),
        }
    }

    fn from_store_error(e: &Error) -> ApiResponse {
        match e {
            Error::WrongExpectedVersion { expected, actual } => {
                #[derive(Serialize)]
                struct Body {
                    error: String,
                    expected: String,
                    actual: Option<u64>,
                }
                ApiResponse::json(
                    409,
                    &Body {
                        error: e.to_string(),
                        expected: expected.to_string(),
                        actual: *actual,
                    },
                )
            }
            Error::DuplicateEventId(_) => ApiResponse::error(409, &e.to_string()),
            Error::StreamNotFound(_) => ApiResponse::error(404, &e.to_string()),
            Error::InvalidInput(_) => ApiResponse::error(400, &e.to_string()),
            e if e.is_transient() => {
                tracing::warn!(error = %e, "event store unavailable");
                ApiResponse::error(503, "the event store is temporarily unavailable")
            }
            e => {
                tracing::error!(error = %e, "event store request failed");
                ApiResponse::error(500, "internal error in the event store")
            }
        }
    }
}

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

/// Appends `e` as the JSON object `{"id","stream_id","version","position","type","data",
/// "metadata"}`; data and metadata are copied in as stored, not re-encoded.
fn write_event_json(out: &mut Vec<u8>, e: &RecordedEvent) {
    use std::io::Write as _;
    out.extend_from_slice(b"{\"id\":\"");
    out.extend_from_slice(
        e.id.hyphenated()
            .encode_lower(&mut Uuid::encode_buffer())
            .as_bytes(),
    );
    out.extend_from_slice(b"\",\"stream_id\":");
    write_json_string(out, &e.stream_id);
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        ",\"version\":{},\"position\":{},\"type\":",
        e.version, e.position
    );
    write_json_string(out, &e.event_type);
    out.extend_from_slice(b",\"data\":");
    out.extend_from_slice(e.data.get().as_bytes());
    out.extend_from_slice(b",\"metadata\":");
    out.extend_from_slice(e.metadata.get().as_bytes());
    out.push(b'}');
}

fn write_json_string(out: &mut Vec<u8>, s: &str) {
    // Serialising a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Bytes of JSON per event beyond its data and metadata (ids, numbers, keys), for sizing buffers.
const EVENT_JSON_OVERHEAD: usize = 160;

/// `{"stream_id"?, "events": [...], "next_from"}`: `next_from` is the `from` of the next page,
/// `null` when there is none in this direction.
fn read_body(
    stream_id: Option<&str>,
    events: &[RecordedEvent],
    next_from: Option<u64>,
) -> ApiResponse {
    use std::io::Write as _;
    let size: usize = events
        .iter()
        .map(|e| e.data.get().len() + e.metadata.get().len() + EVENT_JSON_OVERHEAD)
        .sum();
    let mut out = Vec::with_capacity(size + 64);
    out.push(b'{');
    if let Some(id) = stream_id {
        out.extend_from_slice(b"\"stream_id\":");
        write_json_string(&mut out, id);
        out.push(b',');
    }
    out.extend_from_slice(b"\"events\":[");
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_event_json(&mut out, e);
    }
    out.extend_from_slice(b"],\"next_from\":");
    // Writing into a Vec cannot fail.
    let _ = match next_from {
        Some(n) => write!(out, "{n}}}"),
        None => write!(out, "null}}"),
    };
    ApiResponse {
        status: 200,
        content_type: JSON_CONTENT_TYPE,
        body: Bytes::from(out),
    }
}

/// Parsed query parameters of the read routes.
struct ReadQuery {
    from: Option<u64>,
    limit: usize,
    direction: Direction,
}

/// The read routes' query: `pairs` are the query's decoded `(key, value)` pairs, in order.
fn parse_read_query(
    pairs: &[(&str, &str)],
    allow_direction: bool,
    max_limit: usize,
) -> Result<ReadQuery, ApiResponse> {
    let mut q = ReadQuery {
        from: None,
        limit: DEFAULT_READ_LIMIT.min(max_limit),
        direction: Direction::Forward,
    };
    for &(key, value) in pairs {
        match key {
            "from" => q.from = Some(parse_number("from", value)?),
            "limit" => {
                let n = parse_number("limit", value)?;
                if n == 0 || n > max_limit as u64 {
                    return Err(ApiResponse::error(
                        400,
                        &format!("query limit={n} is out of range 1..={max_limit}"),
                    ));
                }
                q.limit = n as usize;
            }
            "direction" if allow_direction => {
                q.direction = match value {
                    "forward" => Direction::Forward,
                    "backward" => Direction::Backward,
                    other => {
                        return Err(ApiResponse::error(
                            400,
                            &format!("query direction={other:?} must be forward or backward"),
                        ));
                    }
                }
            }
            other => {
                return Err(ApiResponse::error(
                    400,
                    &format!("unknown query parameter {other:?}"),
                ));
            }
        }
    }
    Ok(q)
}

/// Decimal digits only: Rust's `u64` parser also takes a leading `+`, which no client means.
fn parse_number(name: &str, value: &str) -> Result<u64, ApiResponse> {
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| value.parse::<u64>().ok())
        .flatten()
        .ok_or_else(|| {
            ApiResponse::error(
                400,
                &format!("query {name}={value:?} is not a non-negative integer"),
            )
        })
}

/// `GET /streams/{stream}?from=&limit=&direction=`: one page of the stream's events; `query`
/// holds the decoded query pairs.
pub async fn read_stream(
    store: &Store,
    limits: &ApiLimits,
    stream: &str,
    query: &[(&str, &str)],
) -> ApiResponse {
    let q = match parse_read_query(query, true, limits.max_read_limit) {
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

/// `GET /all?from=&limit=`: one page of `$all`; `query` holds the decoded query pairs.
pub async fn read_all(store: &Store, limits: &ApiLimits, query: &[(&str, &str)]) -> ApiResponse {
    let q = match parse_read_query(query, false, limits.max_read_limit) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let from = q.from.unwrap_or(0);
    match store.read_all(from, q.limit).await {
        Ok(events) => {
            let next_from = Some(events.last().map_or(from, |e| e.position + 1));
            read_body(None, &events, next_from)
        }
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// The position a `GET /all/subscribe` should start at: the `from` query parameter, else one
/// past the `Last-Event-ID` header of a reconnecting `EventSource` (its value is the `id:` of
/// the last frame, a position), else 0. A 400 response for anything malformed.
pub fn subscribe_from(
    query: &[(&str, &str)],
    last_event_id: Option<&str>,
) -> Result<u64, ApiResponse> {
    let q = parse_read_query(query, false, MAX_HTTP_READ_LIMIT)?;
    if let Some(from) = q.from {
        return Ok(from);
    }
    match last_event_id {
        Some(id) => id
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(|p| p.checked_add(1))
            .ok_or_else(|| {
                ApiResponse::error(
                    400,
                    &format!("Last-Event-ID {id:?} is not an event position"),
                )
            }),
        None => Ok(0),
    }
}

/// One server-sent-events frame for `event`: `id:` its position, `event:` its type, `data:`
/// the same JSON object `GET /all` returns per event (one `data:` line per line of JSON).
pub fn sse_frame(event: &RecordedEvent) -> Bytes {
    let mut buf = Vec::with_capacity(
        event.data.get().len() + event.metadata.get().len() + EVENT_JSON_OVERHEAD,
    );
    write_event_json(&mut buf, event);
    // Built from &str pieces and serde_json output: UTF-8.
    let json = String::from_utf8_lossy(&buf);
    let mut out = String::with_capacity(json.len() + event.event_type.len() + 48);
    out.push_str("id: ");
    out.push_str(&event.position.to_string());
    out.push_str("\nevent: ");
    out.push_str(&event.event_type);
    out.push('\n');
    // Every line break the SSE spec knows (CRLF, LF, CR) ends a `data:` line: a bare CR left
    // inside one would end the line for an `EventSource` and cut the JSON.
    for line in json
        .split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
    {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: &str, data: &str) -> RecordedEvent {
        RecordedEvent {
            id: Uuid::nil(),
            stream_id: "s".into(),
            version: 2,
            position: 42,
            event_type: event_type.into(),
            data: Json::from_string(data.into()).unwrap(),
            metadata: Json::empty_object(),
        }
    }

    #[test]
    fn sse_frame_shape() {
        let f = sse_frame(&event("Placed", "{\"a\":1}"));
        assert_eq!(
            std::str::from_utf8(&f).unwrap(),
            "id: 42\nevent: Placed\ndata: {\"id\":\"00000000-0000-0000-0000-000000000000\",\"stream_id\":\"s\",\
             \"version\":2,\"position\":42,\"type\":\"Placed\",\"data\":{\"a\":1},\"metadata\":{}}\n\n"
        );
    }

    #[test]
    fn sse_frame_splits_multiline_json() {
        let f = sse_frame(&event("T", "{\n  \"a\": 1\r\n}"));
        let text = std::str::from_utf8(&f).unwrap();
        assert!(text.ends_with("\n\n"));
        for line in text.trim_end().lines() {
            assert!(
                line.starts_with("id: ")
                    || line.starts_with("event: ")
                    || line.starts_with("data: "),
                "{line:?}"
            );
        }
        assert_eq!(text.matches("data: ").count(), 3);
    }

    #[test]
    fn sse_frames_split_every_kind_of_line_break() {
        let f = sse_frame(&event("T", "{\"a\":\r1,\n\"b\":\r\n2}"));
        let text = std::str::from_utf8(&f).unwrap();
        assert!(!text.contains('\r'), "{text:?}");
        let data: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect();
        assert_eq!(data.len(), 4, "{text:?}");
        let json: String = data.concat();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["data"], serde_json::json!({"a": 1, "b": 2}));
    }

    #[test]
    fn subscribe_from_rules() {
        assert_eq!(subscribe_from(&[], None).unwrap(), 0);
        assert_eq!(subscribe_from(&[("from", "7")], Some("3")).unwrap(), 7);
        assert_eq!(subscribe_from(&[], Some("3")).unwrap(), 4);
        assert_eq!(
            subscribe_from(&[("from", "x")], None).unwrap_err().status,
            400
        );
        assert_eq!(subscribe_from(&[], Some("abc")).unwrap_err().status, 400);
        assert_eq!(subscribe_from(&[("limit", "5")], None).unwrap(), 0);
        // A sign is not a number here (Rust's parser would take `+1`).
        assert_eq!(
            subscribe_from(&[("from", "+1")], None).unwrap_err().status,
            400
        );
        assert_eq!(
            subscribe_from(&[("from", "")], None).unwrap_err().status,
            400
        );
    }
}
