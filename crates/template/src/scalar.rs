//! A scalar value's output as bytes, for folding constants into static text at compile time.

use crate::float::write_float;
use crate::value::Value;

/// Writes a scalar's output into `buf` (used to fold constants into static text at compile
/// time); lists and maps write nothing.
pub(crate) fn write_scalar(v: &Value, escape: bool, buf: &mut Vec<u8>) {
    match v {
        Value::Nil | Value::List(_) | Value::Map(_) | Value::Tuple(_) | Value::Regex(_) => {}
        Value::Bool(b) => buf.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(i) => buf.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        Value::Float(x) => write_float(*x, buf),
        Value::Str(s) | Value::Atom(s) if escape => {
            for &b in s.bytes().iter() {
                match b {
                    b'&' => buf.extend_from_slice(b"&amp;"),
                    b'<' => buf.extend_from_slice(b"&lt;"),
                    b'>' => buf.extend_from_slice(b"&gt;"),
                    b'"' => buf.extend_from_slice(b"&quot;"),
                    b'\'' => buf.extend_from_slice(b"&#39;"),
                    b => buf.push(b),
                }
            }
        }
        Value::Str(s) | Value::Atom(s) => buf.extend_from_slice(s.bytes()),
        Value::Safe(html) => {
            for seg in html.segments() {
                buf.extend_from_slice(seg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_print_as_rust_does_at_the_edges() {
        for i in [0, 7, -7, 10, 1234567890, i64::MAX, i64::MIN] {
            let mut b = Vec::new();
            write_scalar(&Value::Int(i), false, &mut b);
            assert_eq!(b, i.to_string().as_bytes());
        }
    }
}
