//! `String` functions. Positions and lengths count code points, not grapheme clusters (see the
//! crate docs: Elixir counts graphemes, which differs only for combining sequences and emoji
//! built of several code points).

use super::{Builtin, Failure, expected, titlecase};
use crate::budget;
use crate::value::Value;

/// True for the built-ins this module runs.
pub(super) fn handles(b: Builtin) -> bool {
    use Builtin as B;
    matches!(
        b,
        B::Upcase
            | B::Downcase
            | B::StringLength
            | B::StringCapitalize
            | B::StringTrim
            | B::StringTrimLeading
            | B::StringTrimTrailing
            | B::StringSplit
            | B::StringReplace
            | B::StringContains
            | B::StringStartsWith
            | B::StringEndsWith
            | B::StringDuplicate
            | B::StringPadLeading
            | B::StringPadTrailing
            | B::StringReverse
            | B::StringSlice
            | B::StringFirst
            | B::StringLast
            | B::StringAt
            | B::StringToInteger
            | B::StringGraphemes
            | B::StringCodepoints
    )
}

fn string(v: &Value) -> Result<&str, Failure> {
    match v {
        Value::Str(s) => Ok(s.as_str()),
        other => Err(expected("a string", other)),
    }
}

fn int(v: &Value) -> Result<i64, Failure> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(expected("an integer", other)),
    }
}

/// Elixir's whitespace for `trim` and `split/1`: Unicode whitespace.
fn ws(c: char) -> bool {
    c.is_whitespace()
}

/// Whether `test` holds for the pattern `p`, or for one of the list of patterns `p`.
fn any_pattern(p: &Value, test: impl Fn(&str) -> bool) -> Result<Value, Failure> {
    Ok(Value::Bool(match p {
        Value::List(items) => {
            let mut any = false;
            for item in items.iter() {
                any = any || test(string(item)?);
            }
            any
        }
        one => test(string(one)?),
    }))
}

/// A pattern or a list of patterns (`String.split(s, [",", ";"])`).
fn patterns(p: &Value) -> Result<Vec<&str>, Failure> {
    match p {
        Value::List(items) => items.iter().map(string).collect(),
        one => Ok(vec![string(one)?]),
    }
}

/// The first match of any of `seps` in `s` (the longest of those starting there, as
/// `:binary.split` picks): its offset and length.
fn find(s: &str, seps: &[&str]) -> Option<(usize, usize)> {
    if let [one] = seps {
        return s.find(one).map(|at| (at, one.len()));
    }
    // One pass from the left (not a search per pattern, which a pattern that never occurs
    // would make quadratic over the pieces).
    s.char_indices().find_map(|(at, _)| {
        let len = seps
            .iter()
            .filter(|p| s[at..].starts_with(**p))
            .map(|p| p.len())
            .max()?;
        Some((at, len))
    })
}

/// Runs a `String` built-in on its (up to three) arguments.
pub(super) fn call(b: Builtin, a: Value, x: Value, y: Value) -> Result<Value, Failure> {
    use Builtin as B;
    let s = string(&a)?;
    let chars = || s.chars();
    let string_of = |t: String| Ok(Value::from(t));
    match b {
        B::Upcase => string_of(s.to_uppercase()),
        // Code point by code point: Elixir's default mode has no final-sigma rule ("ΑΣ" is
        // "ασ"), which Rust's `str::to_lowercase` applies.
        B::Downcase => string_of(chars().flat_map(char::to_lowercase).collect()),
        B::StringLength => Ok(Value::Int(chars().count() as i64)),
        B::StringCapitalize => {
            let mut c = chars();
            let mut out: String = c.next().map(titlecase::titlecase).unwrap_or_default();
            out.extend(c.flat_map(char::to_lowercase));
            string_of(out)
        }
        // `String.trim(s, "-")` strips repeats of the whole given string, not a set of
        // characters (`String.trim("abab x ab", "ab")` is " x ").
        B::StringTrim | B::StringTrimLeading | B::StringTrimTrailing
            if !matches!(x, Value::Nil) =>
        {
            let t = string(&x)?;
            if t.is_empty() {
                return Err("an empty string to trim".to_owned());
            }
            let mut r = s;
            if b != B::StringTrimTrailing {
                while let Some(rest) = r.strip_prefix(t) {
                    r = rest;
                }
            }
            if b != B::StringTrimLeading {
                while let Some(rest) = r.strip_suffix(t) {
                    r = rest;
                }
            }
            string_of(r.to_owned())
        }
        B::StringTrim => string_of(s.trim_matches(ws).to_owned()),
        B::StringTrimLeading => string_of(s.trim_start_matches(ws).to_owned()),
        B::StringTrimTrailing => string_of(s.trim_end_matches(ws).to_owned()),
        // `String.split(s, sep, trim: true, parts: n)`, as Elixir's `split_each`.
        B::StringSplit if !matches!(y, Value::Nil) => {
            let trim = super::option(&y, "trim")?.is_some_and(Value::is_truthy);
            let parts = match super::option(&y, "parts")? {
                None => None,
                Some(Value::Atom(a)) if a.as_str() == "infinity" => None,
                Some(Value::Int(n)) if *n > 0 => Some(*n as usize),
                Some(other) => {
                    return Err(expected("parts: a positive integer or :infinity", other));
                }
            };
            let Some(parts) = parts else {
                let Value::List(all) = call(B::StringSplit, a, x, Value::Nil)? else {
                    return Err("String.split gave no list".to_owned());
                };
                return Ok(Value::list(
                    all.iter()
                        .filter(|p| !(trim && matches!(p, Value::Str(s) if s.as_str().is_empty())))
                        .cloned(),
                ));
            };
            let seps = patterns(&x)?;
            if seps.iter().any(|p| p.is_empty()) {
                return Err("`parts:` with an empty pattern is not supported".to_owned());
            }
            let mut out = Vec::new();
            let mut rest = Some(s);
            while let Some(r) = rest {
                if out.len() + 1 == parts {
                    if !(trim && r.is_empty()) {
                        out.push(Value::from(r));
                    }
                    break;
                }
                // The next piece, past the empty ones when trimming.
                let mut r = r;
                rest = loop {
                    match find(r, &seps) {
                        Some((at, len)) if trim && at == 0 => r = &r[len..],
                        Some((at, len)) => {
                            out.push(Value::from(&r[..at]));
                            break Some(&r[at + len..]);
                        }
                        None => {
                            if !(trim && r.is_empty()) {
                                out.push(Value::from(r));
                            }
                            break None;
                        }
                    }
                };
            }
            Ok(Value::list(out))
        }
        B::StringSplit => Ok(Value::list(match &x {
            Value::Nil => s
                .split(ws)
                .filter(|p| !p.is_empty())
                .map(Value::from)
                .collect::<Vec<_>>(),
            Value::Str(sep) if sep.as_str().is_empty() => {
                let mut parts: Vec<Value> = chars().map(|c| Value::from(c.to_string())).collect();
                parts.push(Value::from(""));
                parts.insert(0, Value::from(""));
                parts
            }
            sep => {
                let seps = patterns(sep)?;
                if seps.iter().any(|p| p.is_empty()) {
                    return Err("an empty pattern in a list of patterns".to_owned());
                }
                let mut parts = Vec::new();
                let mut r = s;
                while let Some((at, len)) = find(r, &seps) {
                    parts.push(Value::from(&r[..at]));
                    r = &r[at + len..];
                }
                parts.push(Value::from(r));
                parts
            }
        })),
        B::StringReplace => {
            let (from, to) = (string(&x)?, string(&y)?);
            if from.is_empty() {
                // Elixir puts the replacement around every code point: "ab" gives "-a-b-".
                let n = chars().count() + 1;
                budget::charge_str(s.len() + n.saturating_mul(to.len()))?;
                let mut out = String::from(to);
                for c in chars() {
                    out.push(c);
                    out.push_str(to);
                }
                return string_of(out);
            }
            budget::charge_str(s.len() + s.matches(from).count().saturating_mul(to.len()))?;
            string_of(s.replace(from, to))
        }
        // One pattern or a list of them (any matching; none in an empty list).
        B::StringContains => any_pattern(&x, |p| s.contains(p)),
        B::StringStartsWith => any_pattern(&x, |p| s.starts_with(p)),
        B::StringEndsWith => any_pattern(&x, |p| s.ends_with(p)),
        B::StringGraphemes | B::StringCodepoints => {
            Ok(Value::list(chars().map(|c| Value::from(c.to_string()))))
        }
        B::StringDuplicate => {
            let n = usize::try_from(int(&x)?).map_err(|_| "a negative count".to_owned())?;
            // Charged before it is built: a count from the query cannot allocate gigabytes.
            budget::charge_str(s.len().saturating_mul(n))?;
            string_of(s.repeat(n))
        }
        B::StringPadLeading | B::StringPadTrailing => {
            let width = usize::try_from(int(&x)?).map_err(|_| "a negative width".to_owned())?;
            let pad = match &y {
                Value::Nil => " ",
                other => string(other)?,
            };
            if pad.is_empty() {
                return Err("an empty padding".to_owned());
            }
            let len = chars().count();
            let missing = width.saturating_sub(len).min(1 << 20);
            let widest = pad.chars().map(char::len_utf8).max().unwrap_or(1);
            budget::charge_str(s.len() + missing * widest)?;
            let filler: String = pad.chars().cycle().take(missing).collect();
            string_of(if b == B::StringPadLeading {
                filler + s
            } else {
                s.to_owned() + &filler
            })
        }
        B::StringReverse => string_of(chars().rev().collect()),
        B::StringSlice => {
            let len = chars().count() as i64;
            let mut start = int(&x)?;
            let count = int(&y)?;
            if count < 0 {
                return Err(expected("a non-negative length", &y));
            }
            if start < 0 {
                start += len;
            }
            if start < 0 || start >= len {
                return string_of(String::new());
            }
            string_of(chars().skip(start as usize).take(count as usize).collect())
        }
        B::StringFirst | B::StringLast => {
            let c = if b == B::StringFirst {
                chars().next()
            } else {
                chars().last()
            };
            Ok(c.map_or(Value::Nil, |c| Value::from(c.to_string())))
        }
        B::StringAt => {
            let len = chars().count() as i64;
            let mut i = int(&x)?;
            if i < 0 {
                i += len;
            }
            Ok(if (0..len).contains(&i) {
                chars()
                    .nth(i as usize)
                    .map_or(Value::Nil, |c| Value::from(c.to_string()))
            } else {
                Value::Nil
            })
        }
        B::StringToInteger => {
            // `String.to_integer(s, base)`: a base from 2 to 36, digits in either case.
            let base = match x {
                Value::Nil => 10,
                Value::Int(b) if (2..=36).contains(&b) => b as u32,
                other => return Err(expected("a base from 2 to 36", &other)),
            };
            i64::from_str_radix(s, base)
                .map(Value::Int)
                .map_err(|_| format!("{s:?} is not an integer (or does not fit in 64 bits)"))
        }
        _ => Err(format!("{b:?} is not a string function")),
    }
}
