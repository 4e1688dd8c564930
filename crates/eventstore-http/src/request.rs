//! [`ApiRequest`]: a request as the API reads it, whichever server decoded it (method, raw path
//! and query, the three headers it looks at, the body), and the decoding every route shares.

use std::borrow::Cow;

use galleon_http::{percent_decode, split_query};

use crate::response::ApiResponse;

/// Name of the header carrying the expected version of an append.
pub const EXPECTED_VERSION_HEADER: &str = "ES-Expected-Version";

/// The header an `EventSource` sends when it reconnects: the `id:` of the last frame it saw.
pub const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// One request to the API, borrowed from the server's own request type.
///
/// The path and query are raw (percent-encoded, as on the request line): the API decodes them
/// itself, so both mounts decode them alike. Header values are raw bytes too: one that is not
/// UTF-8 is a 400, not a header silently dropped.
///
/// # Examples
/// ```
/// use galleon_eventstore_http::ApiRequest;
///
/// let body = br#"[{"type":"Placed","data":{}}]"#;
/// let req = ApiRequest::new("POST", "/streams/order-1", "", body)
///     .with_header("ES-Expected-Version", b"no_stream")
///     .with_header("x-ignored", b"anything");
/// assert_eq!(req.path(), "/streams/order-1");
/// ```
#[derive(Debug, Clone)]
pub struct ApiRequest<'a> {
    method: &'a str,
    path: &'a str,
    query: &'a str,
    authorization: Option<&'a [u8]>,
    expected_version: Option<&'a [u8]>,
    last_event_id: Option<&'a [u8]>,
    body: &'a [u8],
}

/// Which of the headers the API reads a name is.
#[derive(Clone, Copy)]
enum Known {
    Authorization,
    ExpectedVersion,
    LastEventId,
}

impl<'a> ApiRequest<'a> {
    /// The headers the API reads (lowercase); an adapter passes the first value of each it has
    /// to [`ApiRequest::with_header`].
    pub const HEADERS: [&'static str; 3] =
        ["authorization", "es-expected-version", "last-event-id"];

    /// A request without headers: `method` as its token (`GET`), `path` and `query` raw, as on
    /// the request line (the query without its `?`).
    pub fn new(method: &'a str, path: &'a str, query: &'a str, body: &'a [u8]) -> ApiRequest<'a> {
        ApiRequest {
            method,
            path,
            query,
            authorization: None,
            expected_version: None,
            last_event_id: None,
            body,
        }
    }

    /// Adds a header. Names are matched without regard to case; the API reads only
    /// [`ApiRequest::HEADERS`] and ignores other names; of one name given twice the first is
    /// kept (what both servers' header lookups return).
    pub fn with_header(mut self, name: &str, value: &'a [u8]) -> ApiRequest<'a> {
        let known = if name.eq_ignore_ascii_case("authorization") {
            Known::Authorization
        } else if name.eq_ignore_ascii_case(EXPECTED_VERSION_HEADER) {
            Known::ExpectedVersion
        } else if name.eq_ignore_ascii_case(LAST_EVENT_ID_HEADER) {
            Known::LastEventId
        } else {
            return self;
        };
        let slot = match known {
            Known::Authorization => &mut self.authorization,
            Known::ExpectedVersion => &mut self.expected_version,
            Known::LastEventId => &mut self.last_event_id,
        };
        slot.get_or_insert(value);
        self
    }

    /// The method's token.
    pub fn method(&self) -> &'a str {
        self.method
    }

    /// The raw path.
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// The raw query, without `?`.
    pub fn query(&self) -> &'a str {
        self.query
    }

    /// The body.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// The raw `Authorization` value.
    pub(crate) fn authorization(&self) -> Option<&'a [u8]> {
        self.authorization
    }

    /// The `ES-Expected-Version` value; a 400 when it is not UTF-8 (treating it as absent would
    /// turn a guarded append into an unguarded one).
    pub(crate) fn expected_version(&self) -> Result<Option<&'a str>, ApiResponse> {
        utf8_header(EXPECTED_VERSION_HEADER, self.expected_version)
    }

    /// The `Last-Event-ID` value; a 400 when it is not UTF-8.
    pub(crate) fn last_event_id(&self) -> Result<Option<&'a str>, ApiResponse> {
        utf8_header(LAST_EVENT_ID_HEADER, self.last_event_id)
    }

    /// The query's pairs, percent-decoded (`+` is kept: these are numbers and names); a bad
    /// escape is a 400, not a pair silently dropped.
    pub(crate) fn query_pairs(&self) -> Result<Vec<QueryPair<'a>>, ApiResponse> {
        split_query(self.query)
            .map(
                |(k, v)| match (percent_decode(k, false), percent_decode(v, false)) {
                    (Some(k), Some(v)) => Ok((k, v)),
                    _ => Err(ApiResponse::error(
                        400,
                        &format!("query {k}: bad percent escape or not UTF-8 in {v:?}"),
                    )),
                },
            )
            .collect()
    }
}

fn utf8_header<'a>(name: &str, raw: Option<&'a [u8]>) -> Result<Option<&'a str>, ApiResponse> {
    match raw {
        None => Ok(None),
        Some(raw) => std::str::from_utf8(raw).map(Some).map_err(|_| {
            ApiResponse::error(400, &format!("header {name}: the value is not UTF-8"))
        }),
    }
}

/// A decoded query pair, borrowed from the request where nothing needed decoding.
pub(crate) type QueryPair<'r> = (Cow<'r, str>, Cow<'r, str>);

/// `pairs` as the `&str` pairs the routes take.
pub(crate) fn borrowed<'a>(pairs: &'a [QueryPair<'_>]) -> Vec<(&'a str, &'a str)> {
    pairs.iter().map(|(k, v)| (&**k, &**v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_matched_without_case_and_the_first_is_kept() {
        let r = ApiRequest::new("GET", "/all", "", b"")
            .with_header("Last-Event-ID", b"7")
            .with_header("last-event-id", b"9")
            .with_header("AUTHORIZATION", b"Bearer x")
            .with_header("es-expected-version", b"\xff");
        assert_eq!(r.last_event_id().unwrap(), Some("7"));
        assert_eq!(r.authorization(), Some(&b"Bearer x"[..]));
        let bad = r.expected_version().unwrap_err();
        assert_eq!(bad.status, 400);
        assert!(
            String::from_utf8_lossy(&bad.body)
                .contains("ES-Expected-Version: the value is not UTF-8")
        );
    }

    #[test]
    fn query_pairs_decode_escapes_and_refuse_bad_ones() {
        let r = ApiRequest::new("GET", "/all", "type=a%20b&from=1+2&x", b"");
        let pairs = r.query_pairs().unwrap();
        assert_eq!(
            borrowed(&pairs),
            [("type", "a b"), ("from", "1+2"), ("x", "")]
        );
        let r = ApiRequest::new("GET", "/all", "type=%zz", b"");
        assert_eq!(r.query_pairs().unwrap_err().status, 400);
        let r = ApiRequest::new("GET", "/all", "type=%ff", b"");
        assert_eq!(r.query_pairs().unwrap_err().status, 400);
    }
}
