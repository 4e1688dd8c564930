//! The values that go in and out of a store: events, versions, positions.

use std::fmt;

use uuid::Uuid;

use crate::error::{Error, Result};

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

/// What the caller expects of the stream before an append (optimistic concurrency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExpectedVersion {
    /// No check.
    Any,
    /// The stream must have no events.
    NoStream,
    /// The stream must have at least one event.
    StreamExists,
    /// The stream's last event must have exactly this version (versions start at 0).
    Exact(u64),
}

impl ExpectedVersion {
    /// Does a stream whose last version is `actual` (`None`: no events) satisfy this expectation?
    pub fn accepts(self, actual: Option<u64>) -> bool {
        match self {
            ExpectedVersion::Any => true,
            ExpectedVersion::NoStream => actual.is_none(),
            ExpectedVersion::StreamExists => actual.is_some(),
            ExpectedVersion::Exact(v) => actual == Some(v),
        }
    }

    /// Parses the `ES-Expected-Version` header value: `any`, `no_stream`, `stream_exists` or a
    /// non-negative integer.
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim() {
            "any" => Ok(ExpectedVersion::Any),
            "no_stream" => Ok(ExpectedVersion::NoStream),
            "stream_exists" => Ok(ExpectedVersion::StreamExists),
            other => other.parse::<u64>().map(ExpectedVersion::Exact).map_err(|_| {
                Error::InvalidInput(format!(
                    "expected version {other:?} is not one of any, no_stream, stream_exists or a non-negative integer"
                ))
            }),
        }
    }
}

impl fmt::Display for ExpectedVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpectedVersion::Any => f.write_str("any"),
            ExpectedVersion::NoStream => f.write_str("no_stream"),
            ExpectedVersion::StreamExists => f.write_str("stream_exists"),
            ExpectedVersion::Exact(v) => write!(f, "{v}"),
        }
    }
}

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
    fn expected_version_parse_and_accept() {
        assert_eq!(ExpectedVersion::parse("any").unwrap(), ExpectedVersion::Any);
        assert_eq!(
            ExpectedVersion::parse("no_stream").unwrap(),
            ExpectedVersion::NoStream
        );
        assert_eq!(
            ExpectedVersion::parse("stream_exists").unwrap(),
            ExpectedVersion::StreamExists
        );
        assert_eq!(
            ExpectedVersion::parse("17").unwrap(),
            ExpectedVersion::Exact(17)
        );
        let err = ExpectedVersion::parse("-1").unwrap_err().to_string();
        assert!(err.contains("\"-1\""), "{err}");
        assert!(ExpectedVersion::NoStream.accepts(None));
        assert!(!ExpectedVersion::NoStream.accepts(Some(0)));
        assert!(ExpectedVersion::StreamExists.accepts(Some(0)));
        assert!(!ExpectedVersion::StreamExists.accepts(None));
        assert!(ExpectedVersion::Exact(3).accepts(Some(3)));
        assert!(!ExpectedVersion::Exact(3).accepts(Some(4)));
        assert!(ExpectedVersion::Any.accepts(None));
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
