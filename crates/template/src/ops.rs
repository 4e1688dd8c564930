//! Operations on values shared by the evaluator and the built-in functions: Elixir's `==` and
//! `===`, `to_string` (the `String.Chars` protocol), and how a value is named in an error.

use crate::float::write_float;
use crate::value::Value;

/// Element-wise `==` of two lists or tuples.
fn all_equal(p: &[Value], q: &[Value]) -> bool {
    p.len() == q.len() && p.iter().zip(q.iter()).all(|(x, y)| equal(x, y))
}

/// `==` as in Elixir: `1 == 1.0`, structural for lists, tuples and maps.
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Int(p), Value::Float(q)) | (Value::Float(q), Value::Int(p)) => *p as f64 == *q,
        (Value::List(p), Value::List(q)) => all_equal(p, q),
        (Value::Tuple(p), Value::Tuple(q)) => all_equal(p, q),
        (Value::Map(p), Value::Map(q)) => {
            p.len() == q.len()
                && p.iter()
                    .zip(q.iter())
                    .all(|((k1, v1), (k2, v2))| k1 == k2 && equal(v1, v2))
        }
        _ => a == b,
    }
}

/// Outputting a regex: Phoenix.HTML.Safe (and String.Chars) are not implemented for Regex.
pub(crate) const REGEX_OUTPUT: &str = "cannot output a regex (Phoenix.HTML.Safe is not implemented for Regex; use `inspect` or `Regex.source`)";

/// `to_string/1` and `"#{...}"`: Elixir's `String.Chars`. Lists are chardata (strings and code
/// points); maps, tuples and safe HTML have no string form.
pub(crate) fn to_text(v: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::Nil => {}
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(i) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        Value::Float(x) => write_float(*x, out),
        Value::Str(s) | Value::Atom(s) => out.extend_from_slice(s.bytes()),
        Value::List(items) => {
            // Charged as it grows, for the same reason as `List.flatten`: nested lists may share.
            crate::budget::charge_str(items.len() + 1)?;
            for item in items.iter() {
                match item {
                    Value::Int(c) => match u32::try_from(*c).ok().and_then(char::from_u32) {
                        Some(c) => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                        None => return Err(format!("{c} is not a Unicode code point")),
                    },
                    Value::Str(s) => out.extend_from_slice(s.bytes()),
                    Value::List(_) => to_text(item, out)?,
                    other => {
                        return Err(format!(
                            "cannot convert a list holding {} to a string",
                            describe(other)
                        ));
                    }
                }
            }
        }
        Value::Map(_) | Value::Tuple(_) | Value::Safe(_) | Value::Regex(_) => {
            return Err(format!("cannot convert {} to a string", describe(v)));
        }
    }
    Ok(())
}

/// [`to_text`] as a `String`.
pub(crate) fn to_string(v: &Value) -> Result<String, String> {
    let mut out = Vec::new();
    to_text(v, &mut out)?;
    String::from_utf8(out).map_err(|_| "the result is not valid UTF-8".to_owned())
}

/// A value's type, with the value itself when it is short, for error messages.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Nil => "nil".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Int(i) => format!("the integer {i}"),
        Value::Float(x) => format!("the float {x:?}"),
        Value::Str(s) if s.len() <= 20 => format!("the string {s:?}"),
        Value::Atom(a) if a.len() <= 20 => format!("the atom :{a}"),
        other => format!("a {}", other.type_name()),
    }
}
