//! The values that go in and out of a store: events, versions, positions.
//!
//! `EventData` goes in, `RecordedEvent` comes out; `Json` is checked once and kept as text.

use std::fmt;
use std::time::Duration;

use uuid::Uuid;

use crate::error::{Error, Result};
pub use crate::expected::ExpectedVersion;
use crate::time::Timestamp;

/// Longest stream id accepted, in bytes. A guess: long enough for `aggregate-<uuid>` names with
/// room to spare, short enough to keep the `(stream_id, version)` index compact.
pub const MAX_STREAM_ID_BYTES: usize = 255;

/// Longest event type accepted, in bytes. Same reasoning as [`MAX_STREAM_ID_BYTES`].
pub const MAX_EVENT_TYPE_BYTES: usize = 255;

/// Most events one `append` call may carry. A guess that bounds one transaction's memory and lock
/// time; it must stay below `1 << POSITION_SHIFT` (65 536) because the PostgreSQL backend numbers
/// the events of one transaction in the low 16 bits of their position (see DESIGN-NOTES.md).
pub const MAX_APPEND_EVENTS: usize = 10_000;

/// Most events one read call returns; larger `max` values are clamped to this. A guess that bounds
/// the memory of one read (10 000 events of ~300 bytes is ~3 MB).
pub const MAX_READ_EVENTS: usize = 10_000;

/// Reading direction of [`crate::Store::read_stream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// Increasing versions, starting at `from_version`.
    #[default]
    Forward,
    /// Decreasing versions, starting at `from_version` (use `u64::MAX` for "from the end").
    Backward,
}

/// A JSON document kept as text, exactly as given: checked once when it is built from
/// untrusted text, then stored, read back and embedded in responses without being parsed again.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Json(Box<str>);

impl Json {
    /// Checks that `text` is one JSON value and keeps it.
    pub fn from_string(text: String) -> Result<Json> {
        serde_json::from_str::<serde::de::IgnoredAny>(&text)
            .map_err(|e| Error::InvalidInput(format!("invalid JSON: {e}")))?;
        Ok(Json(text.into_boxed_str()))
    }

    /// Serialises `value` to JSON text.
    pub fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Json> {
        serde_json::to_string(value)
            .map(|s| Json(s.into_boxed_str()))
            .map_err(|e| Error::InvalidInput(format!("value is not serialisable to JSON: {e}")))
    }

    /// Text that is already known to be JSON: from the store's own storage (PostgreSQL's `json`
    /// type checks on insert; SQLite only ever receives checked text) or from serde_json's raw
    /// values, which it checked while parsing.
    pub(crate) fn trusted(text: String) -> Json {
        Json(text.into_boxed_str())
    }

    /// `{}`: the metadata of an event that has none.
    pub fn empty_object() -> Json {
        Json("{}".into())
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }

    /// Deserialises the JSON text.
    pub fn parse<'a, T: serde::Deserialize<'a>>(&'a self) -> serde_json::Result<T> {
        serde_json::from_str(&self.0)
    }
}

impl From<Box<serde_json::value::RawValue>> for Json {
    fn from(raw: Box<serde_json::value::RawValue>) -> Json {
        Json(raw.into())
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An event to append: the caller's id, a type name, JSON data and JSON metadata.
#[derive(Debug, Clone)]
pub struct EventData {
    /// Unique id; appending the same ids again at the same place is an idempotent retry.
    pub id: Uuid,
    /// Type name, e.g. `OrderPlaced`.
    pub event_type: String,
    /// The JSON payload, kept as text.
    pub data: Json,
    /// JSON metadata, kept as text (`{}` when there is none).
    pub metadata: Json,
}

impl EventData {
    /// An event with a fresh id, serialising `data` to JSON, with `{}` as metadata.
    ///
    /// The id is a UUID version 7: time-ordered (48 bits of Unix milliseconds, then random
    /// bits), so ids made one after another are increasing and land at the right end of the
    /// store's unique index on event ids instead of on a random page of it (PostgreSQL: ~20 %
    /// less server CPU per stored event; see DESIGN-NOTES.md). It reveals when the event was
    /// created; callers who mind choose their own ids with [`EventData::with_id`].
    pub fn json<T: serde::Serialize + ?Sized>(
        event_type: impl Into<String>,
        data: &T,
    ) -> Result<Self> {
        let data = Json::to_json(data)?;
        Ok(EventData {
            id: Uuid::now_v7(),
            event_type: event_type.into(),
            data,
            metadata: Json::empty_object(),
        })
    }

    /// Replaces the id (for idempotent retries the caller chooses ids itself).
    pub fn with_id(mut self, id: Uuid) -> Self {
        self.id = id;
        self
    }

    /// Replaces the metadata with `metadata` serialised to JSON.
    pub fn with_metadata<T: serde::Serialize + ?Sized>(mut self, metadata: &T) -> Result<Self> {
        self.metadata = Json::to_json(metadata)?;
        Ok(self)
    }
}

/// An event as stored: the appended data plus its stream, version and global position.
#[derive(Debug, Clone)]
pub struct RecordedEvent {
    /// The event's id.
    pub id: Uuid,
    /// The stream it belongs to.
    pub stream_id: String,
    /// Its version in the stream: 0 for the first event, then 1, 2, ...
    pub version: u64,
    /// Its position in `$all`: strictly increasing in `$all` order, with gaps.
    pub position: u64,
    /// Type name.
    pub event_type: String,
    /// JSON payload.
    pub data: Json,
    /// JSON metadata.
    pub metadata: Json,
    /// When the store recorded it: the time of its append's transaction (PostgreSQL: the
    /// transaction's `now()`; SQLite: the writer's clock when its group commit started). Events
    /// stored before schema 5 (PostgreSQL) or 2 (SQLite) carry the time of that upgrade.
    pub recorded_at: Timestamp,
}

/// Where an append put its events. Versions and positions of one append are contiguous:
/// event `i` has version `first_version + i` and position `first_position + i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    /// Version of the first appended event.
    pub first_version: u64,
    /// Version of the last appended event: the value to pass as `Exact` next time.
    pub last_version: u64,
    /// Position of the first appended event in `$all`.
    pub first_position: u64,
    /// Position of the last appended event in `$all`.
    pub last_position: u64,
}

/// A stream's metadata ([`crate::Store::stream_metadata`]): what its reads show. Applied on
/// reads of the stream only (`GET /streams/{id}`, [`crate::Store::read_stream`]); `$all`,
/// categories and subscriptions keep every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamMetadata {
    /// Only the latest `max_count` events are read (older ones are hidden, not removed).
    pub max_count: Option<u64>,
    /// Only events recorded less than `max_age` ago are read.
    pub max_age: Option<Duration>,
    /// Reads start at this version: the events before it are hidden.
    pub truncate_before: Option<u64>,
    /// Soft-deleted ([`crate::Store::delete_stream`]): the stream reads as not found until an
    /// event is appended after the delete.
    pub deleted: bool,
}

/// Longest persistent subscription name accepted, in bytes. A guess: room for
/// `service.projection-v2`-style names.
pub const MAX_SUBSCRIPTION_NAME_BYTES: usize = 100;

/// A persistent subscription as the store keeps it (see [`crate::Store::create_subscription`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionInfo {
    /// Its name.
    pub name: String,
    /// The events it delivers.
    pub filter: crate::EventFilter,
    /// Where delivery continues: one past the last acknowledged position (the start position
    /// until the first ack).
    pub checkpoint: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// `Some` for a consumer group ([`crate::Store::create_group`]): its events are split by
    /// stream among its members, each partition with its own checkpoint (`checkpoint` above is
    /// then the lowest of them: where the group as a whole is complete).
    pub group: Option<crate::groups::GroupSettings>,
}

/// Checks a persistent subscription name: 1 to [`MAX_SUBSCRIPTION_NAME_BYTES`] bytes of ASCII
/// letters, digits, `_`, `-` and `.`, so it can go in a URL path as it is.
pub fn validate_subscription_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SUBSCRIPTION_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "subscription name {name:?} must be 1 to {MAX_SUBSCRIPTION_NAME_BYTES} characters of A-Z, a-z, 0-9, `_`, `-` and `.`"
        )))
    }
}

/// Checks a stream id: 1 to [`MAX_STREAM_ID_BYTES`] bytes, no control characters, not starting
/// with `$` (reserved for system streams such as `$all`).
pub fn validate_stream_id(stream: &str) -> Result<()> {
    if stream.is_empty() {
        return Err(Error::InvalidInput("stream id is empty".into()));
    }
    if stream.len() > MAX_STREAM_ID_BYTES {
        return Err(Error::InvalidInput(format!(
            "stream id is {} bytes long, the limit is {MAX_STREAM_ID_BYTES}",
            stream.len()
        )));
    }
    if stream.starts_with('$') {
        return Err(Error::InvalidInput(format!(
            "stream id {stream:?} starts with `$`, which is reserved"
        )));
    }
    if stream.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!(
            "stream id {stream:?} contains a control character"
        )));
    }
    Ok(())
}

/// Checks the events of an append: 1 to [`MAX_APPEND_EVENTS`] events, valid type names, no id twice.
/// Deepest nesting of arrays and objects accepted in an event's data or metadata: serde_json's
/// default recursion limit, so a consumer parsing events with serde_json's defaults can read
/// every stored event; the same on both backends (PostgreSQL's own parser fails much deeper,
/// SQLite's not at all).
pub const MAX_JSON_DEPTH: usize = 128;

/// Whether `text` (valid JSON) nests arrays and objects more than `max` deep.
fn nested_deeper_than(text: &str, max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

pub(crate) fn validate_events(events: &[EventData]) -> Result<()> {
    if events.is_empty() {
        return Err(Error::InvalidInput(
            "an append needs at least one event".into(),
        ));
    }
    if events.len() > MAX_APPEND_EVENTS {
        return Err(Error::InvalidInput(format!(
            "an append carries {} events, the limit is {MAX_APPEND_EVENTS}",
            events.len()
        )));
    }
    let mut ids = std::collections::HashSet::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        if e.event_type.is_empty() || e.event_type.len() > MAX_EVENT_TYPE_BYTES {
            return Err(Error::InvalidInput(format!(
                "event {i}: type must be 1 to {MAX_EVENT_TYPE_BYTES} bytes long"
            )));
        }
        if e.event_type.chars().any(char::is_control) {
            return Err(Error::InvalidInput(format!(
                "event {i}: type contains a control character"
            )));
        }
        for (what, json) in [("data", &e.data), ("metadata", &e.metadata)] {
            if nested_deeper_than(json.get(), MAX_JSON_DEPTH) {
                return Err(Error::InvalidInput(format!(
                    "event {i}: {what} is nested more than {MAX_JSON_DEPTH} levels deep (the limit is {MAX_JSON_DEPTH})"
                )));
            }
        }
        if !ids.insert(e.id) {
            return Err(Error::InvalidInput(format!(
                "event {i}: id {} appears twice in this append",
                e.id
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_depth() {
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(!nested_deeper_than(&nest(MAX_JSON_DEPTH), MAX_JSON_DEPTH));
        assert!(nested_deeper_than(
            &nest(MAX_JSON_DEPTH + 1),
            MAX_JSON_DEPTH
        ));
        // Brackets inside strings, escaped quotes included, are not nesting.
        let s = format!("{{\"a\":\"\\\"{}\"}}", "[".repeat(500));
        assert!(!nested_deeper_than(&s, 2), "{s}");
        assert!(!nested_deeper_than(r#"{"a":[1,{"b":[]}]}"#, 4));
        assert!(nested_deeper_than(r#"{"a":[1,{"b":[]}]}"#, 3));
        assert!(nested_deeper_than(r#"{"a":[1,{"b":[[]]}]}"#, 4));
    }

    #[test]
    fn stream_id_rules() {
        assert!(validate_stream_id("order-1").is_ok());
        assert!(validate_stream_id("").is_err());
        assert!(validate_stream_id("$all").is_err());
        assert!(validate_stream_id("a\nb").is_err());
        assert!(validate_stream_id(&"x".repeat(MAX_STREAM_ID_BYTES + 1)).is_err());
    }

    #[test]
    fn json_checks_untrusted_text() {
        assert_eq!(
            Json::from_string(" {\"a\": [1]} ".into()).unwrap().get(),
            " {\"a\": [1]} "
        );
        let err = Json::from_string("{\"a\":".into()).unwrap_err().to_string();
        assert!(err.contains("line 1 column 5"), "{err}");
        assert!(Json::from_string("1 2".into()).is_err());
        assert_eq!(
            Json::to_json(&[1, 2]).unwrap().parse::<Vec<u8>>().unwrap(),
            [1, 2]
        );
    }

    #[test]
    fn default_ids_are_time_ordered() {
        let ids: Vec<Uuid> = (0..1000)
            .map(|_| EventData::json("T", &1).unwrap().id)
            .collect();
        assert!(ids.iter().all(|id| id.get_version_num() == 7));
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing");
    }

    #[test]
    fn events_rules() {
        let e = EventData::json("T", &1).unwrap();
        assert!(validate_events(&[]).is_err());
        assert!(validate_events(std::slice::from_ref(&e)).is_ok());
        let err = validate_events(&[e.clone(), e]).unwrap_err().to_string();
        assert!(err.contains("appears twice"), "{err}");
    }
}
