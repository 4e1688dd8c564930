//! What the HTTP API answers: [`ApiResponse`], errors as `{"error": ...}`, and events as JSON
//! and as server-sent-event frames, written by hand so stored JSON is copied, not re-encoded.

use bytes::Bytes;
use serde::Serialize;
use uuid::Uuid;

use crate::error::Error;
#[cfg(test)]
use crate::types::Json;
use crate::types::RecordedEvent;

/// Content type of every JSON answer.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// Content type of the `GET /all/subscribe` answer.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream";

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
    pub(crate) fn json<T: Serialize>(status: u16, value: &T) -> ApiResponse {
        match serde_json::to_vec(value) {
            Ok(body) => ApiResponse {
                status,
                content_type: JSON_CONTENT_TYPE,
                body: Bytes::from(body),
            },
            Err(e) => ApiResponse::error(500, &format!("cannot encode the response: {e}")),
        }
    }

    pub(crate) fn error(status: u16, message: &str) -> ApiResponse {
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

    pub(crate) fn from_store_error(e: &Error) -> ApiResponse {
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
            Error::StreamNotFound(_) | Error::SubscriptionNotFound(_) => {
                ApiResponse::error(404, &e.to_string())
            }
            Error::SubscriptionExists(_) => ApiResponse::error(409, &e.to_string()),
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

/// Appends `e` as the JSON object `{"id","stream_id","version","position","type","data",
/// "metadata","recorded_at"}`; data and metadata are copied in as stored, not re-encoded.
pub(crate) fn write_event_json(out: &mut Vec<u8>, e: &RecordedEvent) {
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
    let _ = write!(out, ",\"recorded_at\":\"{}\"}}", e.recorded_at);
}

pub(crate) fn write_json_string(out: &mut Vec<u8>, s: &str) {
    // Serialising a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Bytes of JSON per event beyond its data and metadata (ids, numbers, keys), for sizing buffers.
pub(crate) const EVENT_JSON_OVERHEAD: usize = 160;

/// `{"stream_id"?, "events": [...], "next_from"}`: `next_from` is the `from` of the next page,
/// `null` when there is none in this direction.
pub(crate) fn read_body(
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
            recorded_at: crate::Timestamp::from_micros(1_709_251_199_500_000),
        }
    }

    #[test]
    fn sse_frame_shape() {
        let f = sse_frame(&event("Placed", "{\"a\":1}"));
        assert_eq!(
            std::str::from_utf8(&f).unwrap(),
            "id: 42\nevent: Placed\ndata: {\"id\":\"00000000-0000-0000-0000-000000000000\",\"stream_id\":\"s\",\
             \"version\":2,\"position\":42,\"type\":\"Placed\",\"data\":{\"a\":1},\"metadata\":{},\
             \"recorded_at\":\"2024-02-29T23:59:59.500000Z\"}\n\n"
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
}
