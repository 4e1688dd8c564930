//! What every event-store route shares: path parameters, the query's pairs, headers, and
//! answers in the API's JSON shape.

use std::borrow::Cow;

use galleon_eventstore::api;
use galleon_http::{IoList, Request, Response, StatusCode, percent_decode, split_query};

/// The header an `EventSource` sends when it reconnects: the `id:` of the last frame it saw.
pub(super) const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// The route's stream id, decoded by the router; one that decodes to something holding `/` is
/// not a stream of this API.
pub(super) fn stream_param(req: &Request) -> Result<&str, Box<Response>> {
    match req.param("id") {
        Some(s) if !s.is_empty() && !s.contains('/') => Ok(s),
        _ => Err(Box::new(json_error(
            StatusCode::NOT_FOUND,
            "no such route: the stream id is missing or contains `/`",
        ))),
    }
}

/// The route's path parameter `name` (a category or a subscription name), decoded by the
/// router: non-empty and without `/`, else a JSON 404.
pub(super) fn path_param<'r>(req: &'r Request, name: &str) -> Result<&'r str, Box<Response>> {
    match req.param(name) {
        Some(s) if !s.is_empty() && !s.contains('/') => Ok(s),
        _ => Err(Box::new(json_error(
            StatusCode::NOT_FOUND,
            &format!("no such route: the {name} is missing or contains `/`"),
        ))),
    }
}

/// The query's pairs, percent-decoded (`+` is kept: these are numbers and names); a bad escape
/// is a 400, not a pair silently dropped.
pub(super) fn query_pairs(req: &Request) -> Result<Vec<QueryPair<'_>>, Box<Response>> {
    split_query(req.query())
        .map(
            |(k, v)| match (percent_decode(k, false), percent_decode(v, false)) {
                (Some(k), Some(v)) => Ok((k, v)),
                _ => Err(Box::new(json_error(
                    StatusCode::BAD_REQUEST,
                    &format!("query {k}: bad percent escape or not UTF-8 in {v:?}"),
                ))),
            },
        )
        .collect()
}

/// A decoded query pair, borrowed from the request where nothing needed decoding.
pub(super) type QueryPair<'r> = (Cow<'r, str>, Cow<'r, str>);

/// `pairs` as the `&str` pairs the API takes.
pub(super) fn borrowed<'a>(pairs: &'a [QueryPair<'_>]) -> Vec<(&'a str, &'a str)> {
    pairs.iter().map(|(k, v)| (&**k, &**v)).collect()
}

/// The value of header `name`: `Ok(None)` when absent, a 400 when it is not UTF-8 (treating it
/// as absent would, for `ES-Expected-Version`, turn a guarded append into an unguarded one).
pub(super) fn header<'r>(req: &'r Request, name: &str) -> Result<Option<&'r str>, Box<Response>> {
    match req.header(name) {
        None => Ok(None),
        Some(raw) => std::str::from_utf8(raw).map(Some).map_err(|_| {
            Box::new(json_error(
                StatusCode::BAD_REQUEST,
                &format!("header {name}: the value is not UTF-8"),
            ))
        }),
    }
}

/// An [`api::ApiResponse`] as a [`Response`]: same status, content type and bytes.
pub(super) fn into_response(resp: api::ApiResponse) -> Response {
    Response::new(StatusCode(resp.status), IoList::from(resp.body))
        .with_header("content-type", resp.content_type)
}

/// A stream id whose percent-escapes do not decode: a JSON 400, like every API answer.
pub(super) fn bad_stream_id(_req: &Request) -> Response {
    json_error(
        StatusCode::BAD_REQUEST,
        "stream id: malformed percent-escape or not UTF-8",
    )
}

/// A category or subscription name whose percent-escapes do not decode: a JSON 400.
pub(super) fn bad_name(_req: &Request) -> Response {
    json_error(
        StatusCode::BAD_REQUEST,
        "path: malformed percent-escape or not UTF-8 in the name",
    )
}

/// `{"error": message}` with `status`, shaped like the API's own errors.
pub(super) fn json_error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    Response::new(status, body).with_header("content-type", api::JSON_CONTENT_TYPE)
}
