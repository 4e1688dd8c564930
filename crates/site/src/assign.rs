//! Assign values given as text (a query string's `?iters=10`, `galleon render -a iters=10`): JSON
//! where the text parses as JSON, else the text as a string. One rule for the site and the CLI.

use galleon_http::Request;
use galleon_template::Value;

/// A query pair that did not percent-decode: it may have been the one the page asked for.
#[derive(Debug)]
pub struct Undecodable;

/// The request's query value for `name`, read by [`parse_value`]; `Err` when the query has no
/// such pair and some pair of it does not percent-decode, so that a page refuses the request
/// rather than fall back to a default or its data file (`/doom?iters=%zz` is not a 30 GB `/doom`).
pub fn from_query(req: &Request, name: &str) -> Result<Option<Value>, Undecodable> {
    match req.query_value(name) {
        Some(v) => Ok(Some(parse_value(&v))),
        None if query_decodes(req.query()) => Ok(None),
        None => Err(Undecodable),
    }
}

/// Whether every name and value of `query` percent-decodes to UTF-8 (what
/// [`Request::query_value`] needs to see a pair at all).
pub fn query_decodes(query: &str) -> bool {
    galleon_http::split_query(query).all(|(k, v)| {
        galleon_http::percent_decode(k, true).is_some()
            && galleon_http::percent_decode(v, true).is_some()
    })
}

/// A query value as an assign: JSON where it parses (`10`, `true`, `[1,2]`, `"x"`), else the
/// string itself. Plain integers, the common case (`?iters=10`), skip the JSON parser; the
/// result is the same (tested).
pub fn parse_value(v: &str) -> Value {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let plain_int = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.len() > 1 && digits.starts_with('0'))
        && v != "-0";
    if plain_int && let Ok(i) = v.parse::<i64>() {
        return Value::Int(i);
    }
    match serde_json::from_str::<serde_json::Value>(v) {
        Ok(json) => json.into(),
        Err(_) => Value::str(v),
    }
}

/// `KEY=VALUE` (what `galleon render --assign` takes), the value read by [`parse_value`].
pub fn parse_pair(s: &str) -> Result<(String, Value), String> {
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got `{s}`"))?;
    if key.is_empty() {
        return Err(format!("empty assign name in `{s}`"));
    }
    Ok((key.to_owned(), parse_value(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old rule, which the integer fast path must agree with.
    fn via_json(v: &str) -> Value {
        serde_json::from_str::<serde_json::Value>(v).map_or_else(|_| Value::str(v), Value::from)
    }

    #[test]
    fn query_values_parse_as_json_or_stay_strings() {
        for v in [
            "0",
            "10",
            "-7",
            "-0",
            "007",
            "-01",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "99999999999999999999",
            "1.5",
            "1e3",
            " 10",
            "10 ",
            "+1",
            "-",
            "",
            "--1",
            "1-",
            "true",
            "null",
            "[1,2]",
            "\"x\"",
            "abc",
            "{\"a\":1}",
        ] {
            assert_eq!(parse_value(v), via_json(v), "{v:?}");
        }
        assert_eq!(parse_value("10"), Value::Int(10));
        assert_eq!(parse_value("007"), Value::str("007"));
    }

    #[test]
    fn pairs() {
        assert_eq!(parse_pair("a=1"), Ok(("a".to_owned(), Value::Int(1))));
        assert_eq!(parse_pair("a=b=c"), Ok(("a".to_owned(), Value::str("b=c"))));
        assert!(parse_pair("=1").is_err());
        assert!(parse_pair("a").is_err());
    }
}
