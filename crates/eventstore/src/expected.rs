//! [`ExpectedVersion`]: what an append expects of its stream (optimistic concurrency).

use std::fmt;

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
    pub fn parse(s: &str) -> Result<Self, BadExpectedVersion> {
        match s.trim() {
            "any" => Ok(ExpectedVersion::Any),
            "no_stream" => Ok(ExpectedVersion::NoStream),
            "stream_exists" => Ok(ExpectedVersion::StreamExists),
            // Digits only: `u64`'s parser would also take `+5`.
            other if !other.is_empty() && other.bytes().all(|b| b.is_ascii_digit()) => other
                .parse::<u64>()
                .map(ExpectedVersion::Exact)
                .map_err(|_| BadExpectedVersion(other.to_owned())),
            other => Err(BadExpectedVersion(other.to_owned())),
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

/// A value [`ExpectedVersion::parse`] does not accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadExpectedVersion(String);

impl fmt::Display for BadExpectedVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "expected version {:?} is not one of any, no_stream, stream_exists or a non-negative integer",
            self.0
        )
    }
}

impl std::error::Error for BadExpectedVersion {}

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
        for signed in ["+1", "+0", "-0", " 1 2", "1e3", ""] {
            assert!(ExpectedVersion::parse(signed).is_err(), "{signed:?}");
        }
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
}
