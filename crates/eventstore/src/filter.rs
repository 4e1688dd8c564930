//! [`EventFilter`]: which events of `$all` a filtered read or subscription wants, by category
//! and by event type; the same rule in Rust (for the live feed) as in both backends' SQL.

use crate::error::{Error, Result};
use crate::types::{MAX_EVENT_TYPE_BYTES, MAX_STREAM_ID_BYTES, RecordedEvent};

/// Most event types one filter may name. A guess: a consumer listing more types than this
/// wants a category or all events; on PostgreSQL each type is one index range per read.
pub const MAX_FILTER_TYPES: usize = 32;

/// The category of a stream, as message-db defines it: the part of the name before the first
/// `-` (`account-123` and `account-123-x` are in `account`), or the whole name when it has none.
pub fn category_of(stream: &str) -> &str {
    stream.split_once('-').map_or(stream, |(c, _)| c)
}

/// Which events a read or subscription of `$all` wants: all of them by default; with a
/// `category`, only events of streams in it; with `event_types`, only events of one of those
/// types. Both set: both must hold.
///
/// # Examples
/// ```
/// use galleon_eventstore::EventFilter;
///
/// let f = EventFilter::category("account").unwrap().with_types(["Opened"]).unwrap();
/// assert!(f.matches_parts("account-1", "Opened"));
/// assert!(!f.matches_parts("account-1", "Closed"));
/// assert!(!f.matches_parts("accounts-1", "Opened"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct EventFilter {
    category: Option<String>,
    event_types: Vec<String>,
}

impl EventFilter {
    /// Every event.
    pub fn all() -> EventFilter {
        EventFilter::default()
    }

    /// Events of streams in `category` (which must not contain `-`: it could never match).
    pub fn category(category: impl Into<String>) -> Result<EventFilter> {
        let category = category.into();
        if category.is_empty() || category.len() > MAX_STREAM_ID_BYTES {
            return Err(Error::InvalidInput(format!(
                "category must be 1 to {MAX_STREAM_ID_BYTES} bytes long"
            )));
        }
        if category.contains('-') || category.chars().any(char::is_control) {
            return Err(Error::InvalidInput(format!(
                "category {category:?} contains `-` or a control character: a category is the part of a stream id before its first `-`"
            )));
        }
        Ok(EventFilter {
            category: Some(category),
            event_types: Vec::new(),
        })
    }

    /// Only events whose type is one of `types` (in addition to the category, if any). Types
    /// given twice count once; at most [`MAX_FILTER_TYPES`].
    pub fn with_types<I, S>(mut self, types: I) -> Result<EventFilter>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for t in types {
            let t = t.into();
            if t.is_empty() || t.len() > MAX_EVENT_TYPE_BYTES {
                return Err(Error::InvalidInput(format!(
                    "event type filter must be 1 to {MAX_EVENT_TYPE_BYTES} bytes long"
                )));
            }
            if !self.event_types.contains(&t) {
                self.event_types.push(t);
            }
        }
        if self.event_types.len() > MAX_FILTER_TYPES {
            return Err(Error::InvalidInput(format!(
                "{} event types in one filter, the limit is {MAX_FILTER_TYPES}",
                self.event_types.len()
            )));
        }
        // One order, so that equal filters compare and hash equal.
        self.event_types.sort_unstable();
        Ok(self)
    }

    /// The category, if the filter has one.
    pub fn category_name(&self) -> Option<&str> {
        self.category.as_deref()
    }

    /// The event types (sorted); empty means any type.
    pub fn event_types(&self) -> &[String] {
        &self.event_types
    }

    /// True when the filter lets every event through.
    pub fn is_all(&self) -> bool {
        self.category.is_none() && self.event_types.is_empty()
    }

    /// Whether an event of `stream` with type `event_type` passes.
    pub fn matches_parts(&self, stream: &str, event_type: &str) -> bool {
        self.category
            .as_deref()
            .is_none_or(|c| category_of(stream) == c)
            && (self.event_types.is_empty() || self.event_types.iter().any(|t| t == event_type))
    }

    /// Whether `event` passes.
    pub fn matches(&self, event: &RecordedEvent) -> bool {
        self.matches_parts(&event.stream_id, &event.event_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_follow_message_db() {
        assert_eq!(category_of("account-123"), "account");
        assert_eq!(category_of("account-123-x"), "account");
        assert_eq!(category_of("account"), "account");
        assert_eq!(category_of("-x"), "");
        assert!(EventFilter::category("a-b").is_err());
        assert!(EventFilter::category("").is_err());
    }

    #[test]
    fn types_are_deduplicated_sorted_and_bounded() {
        let f = EventFilter::all().with_types(["B", "A", "B"]).unwrap();
        assert_eq!(f.event_types(), ["A", "B"]);
        assert!(f.matches_parts("x", "A") && !f.matches_parts("x", "C"));
        let many = (0..=MAX_FILTER_TYPES).map(|i| format!("T{i}"));
        assert!(EventFilter::all().with_types(many).is_err());
        assert!(EventFilter::all().with_types([""]).is_err());
        assert!(EventFilter::all().is_all());
    }
}
