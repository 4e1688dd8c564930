//! Events as the API writes them: one JSON object per event (in read bodies and in each
//! server-sent-events frame), written by hand so stored JSON is copied, not re-encoded.

use bytes::Bytes;
use galleon_eventstore::{RecordedEvent, Timestamp};
use uuid::Uuid;

use crate::response::ApiResponse;

/// Appends `t` in RFC 3339 (UTC, microseconds), as its `Display` prints it, without the
/// formatting machinery ([`Timestamp::write_rfc3339`]).
fn write_timestamp(out: &mut Vec<u8>, t: Timestamp) {
    t.write_rfc3339(out);
}

/// Appends `e` as the JSON object `{"id","stream_id","version","position","type","data",
/// "metadata","recorded_at"}`; data and metadata are copied in as stored, not re-encoded.
pub(crate) fn write_event_json(out: &mut Vec<u8>, e: &RecordedEvent) {
    out.extend_from_slice(b"{\"id\":\"");
    out.extend_from_slice(
        e.id.hyphenated()
            .encode_lower(&mut Uuid::encode_buffer())
            .as_bytes(),
    );
    out.extend_from_slice(b"\",\"stream_id\":");
    write_json_string(out, &e.stream_id);
    out.extend_from_slice(b",\"version\":");
    push_u64(out, e.version);
    out.extend_from_slice(b",\"position\":");
    push_u64(out, e.position);
    out.extend_from_slice(b",\"type\":");
    write_json_string(out, &e.event_type);
    out.extend_from_slice(b",\"data\":");
    out.extend_from_slice(e.data.get().as_bytes());
    out.extend_from_slice(b",\"metadata\":");
    out.extend_from_slice(e.metadata.get().as_bytes());
    out.extend_from_slice(b",\"recorded_at\":\"");
    write_timestamp(out, e.recorded_at);
    out.extend_from_slice(b"\"}");
}

/// Appends `v` in decimal (what `{}` prints), through `itoa` rather than the formatting
/// machinery: every event written to a subscriber or a read goes through here twice.
pub(crate) fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
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
    ApiResponse::raw_json(200, Bytes::from(out))
}

/// Bytes of an SSE frame beyond its event type and JSON: `id: `, the position, `event: `,
/// `data: `, line ends.
const SSE_FRAME_OVERHEAD: usize = 48;

/// One server-sent-events frame for `event`: `id:` its position, `event:` its type, `data:`
/// the same JSON object `GET /all` returns per event (one `data:` line per line of JSON).
///
/// Written once into one buffer: the fan-out formats every live event with this.
pub fn sse_frame(event: &RecordedEvent) -> Bytes {
    let (data, metadata) = (event.data.get(), event.metadata.get());
    let mut out = Vec::with_capacity(
        data.len()
            + metadata.len()
            + 2 * event.event_type.len()
            + event.stream_id.len()
            + EVENT_JSON_OVERHEAD
            + SSE_FRAME_OVERHEAD,
    );
    out.extend_from_slice(b"id: ");
    push_u64(&mut out, event.position);
    out.extend_from_slice(b"\nevent: ");
    out.extend_from_slice(event.event_type.as_bytes());
    out.extend_from_slice(b"\n");
    // Every line break the SSE spec knows (CRLF, LF, CR) ends a `data:` line: a bare CR left
    // inside one would end the line for an `EventSource` and cut the JSON. Only the stored data
    // and metadata can hold one: the stream id and type are escaped by serde_json, and the id,
    // numbers and timestamp have none.
    let breaks = |s: &str| s.bytes().any(|b| b == b'\n' || b == b'\r');
    if breaks(data) || breaks(metadata) {
        let mut json = Vec::with_capacity(data.len() + metadata.len() + EVENT_JSON_OVERHEAD);
        write_event_json(&mut json, event);
        for line in json
            .split(|&b| b == b'\n')
            .flat_map(|l| l.strip_suffix(b"\r").unwrap_or(l).split(|&b| b == b'\r'))
        {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    } else {
        out.extend_from_slice(b"data: ");
        write_event_json(&mut out, event);
        out.push(b'\n');
    }
    out.push(b'\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use galleon_eventstore::{Json, Timestamp};

    fn event(event_type: &str, data: &str) -> RecordedEvent {
        RecordedEvent {
            id: Uuid::nil(),
            stream_id: "s".into(),
            version: 2,
            position: 42,
            event_type: event_type.into(),
            data: Json::from_string(data.into()).unwrap(),
            metadata: Json::empty_object(),
            recorded_at: Timestamp::from_micros(1_709_251_199_500_000),
        }
    }

    /// `sse_frame` as it was first written (through `String`s and `format!`): the bytes the
    /// faster one must reproduce.
    fn sse_frame_reference(event: &RecordedEvent) -> String {
        let json = format!(
            "{{\"id\":\"{}\",\"stream_id\":{},\"version\":{},\"position\":{},\"type\":{},\"data\":{},\"metadata\":{},\"recorded_at\":\"{}\"}}",
            event.id,
            serde_json::to_string(&event.stream_id).unwrap(),
            event.version,
            event.position,
            serde_json::to_string(&event.event_type).unwrap(),
            event.data.get(),
            event.metadata.get(),
            event.recorded_at
        );
        let mut out = format!("id: {}\nevent: {}\n", event.position, event.event_type);
        for line in json
            .split('\n')
            .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
        {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
        out
    }

    #[test]
    fn sse_frame_matches_the_reference() {
        let datas = [
            "{}",
            "{\"a\":1}",
            "{\n  \"a\": 1\r\n}",
            "{\"a\":\r1,\n\"b\":\r\n2}",
            "\n{\"a\":\"é\\n\u{1F600}\"}\r",
            "\r\n\r\n{}\n\n",
            "[1,\r\r2]",
        ];
        let metas = ["{}", "{\"m\":\"x\"}", "{\r\n}", "\n{}"];
        for (i, data) in datas.iter().enumerate() {
            for meta in metas {
                let mut e = event(if i % 2 == 0 { "Placed" } else { "Typé.v2" }, data);
                e.metadata = Json::from_string(meta.into()).unwrap();
                e.stream_id = format!("order-{i}\"q\\");
                e.id = Uuid::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210 * i as u128);
                e.version = [0, 9, 10, u64::MAX][i % 4];
                e.position = [0, 1, 99_999, u64::MAX][(i + 1) % 4];
                e.recorded_at = Timestamp::from_micros(
                    [
                        0,
                        -1,
                        1_709_251_199_500_000,
                        253_402_300_799_999_999,
                        -62_167_219_200_000_001,
                        i64::MAX,
                        i64::MIN,
                    ][i % 7],
                );
                let f = sse_frame(&e);
                assert_eq!(
                    std::str::from_utf8(&f).unwrap(),
                    sse_frame_reference(&e),
                    "{e:?}"
                );
            }
        }
    }

    #[test]
    fn push_u64_prints_as_display() {
        for v in [
            0,
            1,
            9,
            10,
            99,
            100,
            12_345,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            push_u64(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
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
