//! The query strings of the read and subscribe routes: numbers, limits, directions, filters.

use galleon_eventstore::{Direction, EventFilter};

use crate::limits::{DEFAULT_READ_LIMIT, MAX_HTTP_READ_LIMIT};
use crate::response::ApiResponse;

/// Parsed query parameters of the read routes.
pub(crate) struct ReadQuery {
    pub(crate) from: Option<u64>,
    pub(crate) limit: usize,
    pub(crate) direction: Direction,
    /// `category=` (at most once) and `type=` (repeatable, any of them).
    pub(crate) filter: EventFilter,
}

/// Which parameters a route takes besides `from` and `limit`.
#[derive(Clone, Copy)]
pub(crate) enum Takes {
    /// `direction=` (stream reads).
    Direction,
    /// `category=` and `type=` (`$all` reads and subscriptions).
    Filter,
    /// `type=` only (category reads, whose category is in the path).
    Types,
}

/// The read routes' query: `pairs` are the query's decoded `(key, value)` pairs, in order.
pub(crate) fn parse_read_query(
    pairs: &[(&str, &str)],
    takes: Takes,
    max_limit: usize,
) -> Result<ReadQuery, ApiResponse> {
    let mut q = ReadQuery {
        from: None,
        limit: DEFAULT_READ_LIMIT.min(max_limit),
        direction: Direction::Forward,
        filter: EventFilter::all(),
    };
    let mut category: Option<&str> = None;
    let mut types: Vec<&str> = Vec::new();
    let allow_direction = matches!(takes, Takes::Direction);
    for &(key, value) in pairs {
        match key {
            "category" if matches!(takes, Takes::Filter) => {
                if category.replace(value).is_some() {
                    return Err(ApiResponse::error(
                        400,
                        "query category= is given twice; a filter has at most one category",
                    ));
                }
            }
            "type" if matches!(takes, Takes::Filter | Takes::Types) => types.push(value),
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
    q.filter = filter(category, types)?;
    Ok(q)
}

/// The filter of a category (if any) and event types (any of them), or a 400 saying what is
/// wrong with them.
pub(crate) fn filter(category: Option<&str>, types: Vec<&str>) -> Result<EventFilter, ApiResponse> {
    let base = match category {
        Some(c) => EventFilter::category(c),
        None => Ok(EventFilter::all()),
    };
    base.and_then(|f| f.with_types(types))
        .map_err(|e| ApiResponse::error(400, &format!("query: {e}")))
}

/// Decimal digits only: Rust's `u64` parser also takes a leading `+`, which no client means.
pub(crate) fn parse_number(name: &str, value: &str) -> Result<u64, ApiResponse> {
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

/// Where a `GET /all/subscribe` starts, and its filter (`category=`, `type=`): the `from` query
/// parameter, else one past the `Last-Event-ID` header of a reconnecting `EventSource` (its
/// value is the `id:` of the last frame, a position), else 0. A 400 for anything malformed.
/// `limit=` is accepted and has no effect, as before.
pub(crate) fn subscribe_query(
    query: &[(&str, &str)],
    last_event_id: Option<&str>,
) -> Result<(u64, EventFilter), ApiResponse> {
    let q = parse_read_query(query, Takes::Filter, MAX_HTTP_READ_LIMIT)?;
    let from = match q.from {
        Some(from) => from,
        None => after_last_event_id(last_event_id)?,
    };
    Ok((from, q.filter))
}

/// One past the `Last-Event-ID` (a position), 0 without one.
pub(crate) fn after_last_event_id(last_event_id: Option<&str>) -> Result<u64, ApiResponse> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn subscribe_from(
        query: &[(&str, &str)],
        last_event_id: Option<&str>,
    ) -> Result<u64, ApiResponse> {
        subscribe_query(query, last_event_id).map(|(from, _)| from)
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

    #[test]
    fn filters_in_queries() {
        let (from, f) = subscribe_query(
            &[("category", "account"), ("type", "A"), ("type", "B")],
            None,
        )
        .unwrap();
        assert_eq!(from, 0);
        assert_eq!(f.category_name(), Some("account"));
        assert_eq!(f.event_types(), ["A", "B"]);
        for bad in [
            &[("category", "a"), ("category", "b")][..],
            &[("category", "a-b")],
            &[("category", "")],
            &[("type", "")],
        ] {
            let r = subscribe_query(bad, None).unwrap_err();
            assert_eq!(r.status, 400, "{bad:?}");
        }
        // Stream reads take no filter, category reads no second category.
        assert!(parse_read_query(&[("type", "A")], Takes::Direction, 10).is_err());
        assert!(parse_read_query(&[("category", "a")], Takes::Types, 10).is_err());
        assert!(parse_read_query(&[("type", "A")], Takes::Types, 10).is_ok());
    }
}
