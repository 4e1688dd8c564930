//! The `Regex` functions, `=~`, `String.match?` and `String.replace`/`split` with a regex
//! pattern, with Elixir 1.14's results (unmatched groups as `""`, empty matches as PCRE finds
//! them). The strings and lists they build are charged to the memory budget as they are built.

use std::sync::Arc;

use super::{Builtin as B, Failure, expected, option};
use crate::budget::{self, ELEMENT_BYTES, MAP_ENTRY_BYTES};
use crate::regexp::Regex;
use crate::value::{Map, Value};

/// What compiling a regex at render time is charged besides its source: 4 KiB, a guess at a
/// small pattern's compiled size (its transient memory is bounded by the regex size limit).
const COMPILE_BYTES: usize = 4096;

/// Whether `b` called on `args` is one of these (the `String` functions only with a regex
/// pattern, or `String.replace/4`'s options).
pub(super) fn handles(b: B, args: &[Value]) -> bool {
    match b {
        B::RegexCompile
        | B::RegexMatch
        | B::RegexRun
        | B::RegexScan
        | B::RegexReplace
        | B::RegexSplit
        | B::RegexNamedCaptures
        | B::RegexSource
        | B::StringMatch
        | B::MatchOp => true,
        B::StringReplace => args.len() == 4 || matches!(args.get(1), Some(Value::Regex(_))),
        B::StringSplit => matches!(args.get(1), Some(Value::Regex(_))),
        _ => false,
    }
}

/// The bytes of input the call scans (the subject string, or the source compiled), for the
/// step budget: charged before the call.
pub(crate) fn scanned(b: B, args: &[Value]) -> usize {
    let at = match b {
        B::RegexMatch
        | B::RegexRun
        | B::RegexScan
        | B::RegexReplace
        | B::RegexSplit
        | B::RegexNamedCaptures => 1,
        B::RegexCompile | B::StringMatch | B::MatchOp | B::StringReplace | B::StringSplit => 0,
        _ => return 0,
    };
    match args.get(at) {
        Some(Value::Str(s)) => s.len(),
        _ => 0,
    }
}

/// Runs `b` (one [`handles`] accepts) on `args`.
pub(super) fn call(b: B, args: Vec<Value>) -> Result<Value, Failure> {
    let mut args = args.into_iter();
    let mut arg = || args.next().unwrap_or_default();
    let (a, c, d, e) = (arg(), arg(), arg(), arg());
    match b {
        B::RegexCompile => {
            let source = string(&a)?;
            let opts = match &c {
                Value::Nil => "",
                other => string(other)?,
            };
            budget::charge_str(COMPILE_BYTES + source.len())?;
            Ok(Value::Regex(Arc::new(Regex::compile(source, opts)?)))
        }
        B::RegexSource => Ok(Value::from(regex(&a)?.source())),
        B::RegexMatch => Ok(Value::Bool(regex(&a)?.inner().is_match(string(&c)?))),
        B::StringMatch => Ok(Value::Bool(regex(&c)?.inner().is_match(string(&a)?))),
        B::MatchOp => {
            let s = string(&a)?;
            match &c {
                Value::Regex(r) => Ok(Value::Bool(r.inner().is_match(s))),
                Value::Str(p) => Ok(Value::Bool(s.contains(p.as_str()))),
                other => Err(expected("a regex or a string on the right of =~", other)),
            }
        }
        B::RegexRun => {
            let (r, s) = (regex(&a)?, string(&c)?);
            let capture = match option(&d, "capture")? {
                None => "all",
                Some(Value::Atom(k)) if matches!(k.as_str(), "all" | "first" | "all_but_first") => {
                    k.as_str()
                }
                Some(other) => {
                    return Err(expected("capture: :all, :first or :all_but_first", other));
                }
            };
            let Some(caps) = r.inner().captures(s) else {
                return Ok(Value::Nil);
            };
            let mut groups = groups(&caps)?;
            match capture {
                "first" => groups.truncate(1),
                "all_but_first" => drop(groups.remove(0)),
                _ => {}
            }
            list(groups)
        }
        B::RegexScan => {
            let (r, s) = (regex(&a)?, string(&c)?);
            let mut found = Vec::new();
            for caps in r.matches(s) {
                found.push(list(groups(&caps)?)?);
            }
            Ok(Value::list(found))
        }
        B::RegexNamedCaptures => {
            let (r, s) = (regex(&a)?, string(&c)?);
            let Some(caps) = r.inner().captures(s) else {
                return Ok(Value::Nil);
            };
            let mut map = Map::new();
            for name in r.inner().capture_names().flatten() {
                let text = caps.name(name).map_or("", |m| m.as_str());
                budget::charge_str(MAP_ENTRY_BYTES + name.len() + text.len())?;
                map.insert(name.into(), Value::from(text));
            }
            Ok(Value::Map(Arc::new(map)))
        }
        B::RegexReplace => replace(regex(&a)?, string(&c)?, string(&d)?, &e),
        B::StringReplace => match &c {
            Value::Regex(r) => replace(r, string(&a)?, string(&d)?, &e),
            // `String.replace(s, "a", "b", global: false)`: the first occurrence only.
            pattern => {
                let (s, from, to) = (string(&a)?, string(pattern)?, string(&d)?);
                let global = !matches!(option(&e, "global")?, Some(Value::Bool(false)));
                if global {
                    return super::text::call(B::StringReplace, a.clone(), c.clone(), d.clone());
                }
                budget::charge_str(s.len() + to.len())?;
                Ok(Value::from(s.replacen(from, to, 1)))
            }
        },
        B::RegexSplit => split(regex(&a)?, string(&c)?, &d),
        B::StringSplit => split(regex(&c)?, string(&a)?, &d),
        other => Err(format!("{} is not a regex function", other.name())),
    }
}

fn regex(v: &Value) -> Result<&Regex, Failure> {
    match v {
        Value::Regex(r) => Ok(r),
        other => Err(expected("a regex", other)),
    }
}

fn string(v: &Value) -> Result<&str, Failure> {
    match v {
        Value::Str(s) => Ok(s.as_str()),
        other => Err(expected("a string", other)),
    }
}

/// A list built here, its elements charged.
fn list(items: Vec<Value>) -> Result<Value, Failure> {
    budget::charge_str(items.len().saturating_mul(ELEMENT_BYTES))?;
    Ok(Value::list(items))
}

/// A match's groups as `Regex.run` gives them: the whole match, then each group up to the last
/// that took part (`""` for one that did not in between), each string charged.
fn groups(caps: &regex::Captures<'_>) -> Result<Vec<Value>, Failure> {
    let last = (0..caps.len())
        .rev()
        .find(|&i| caps.get(i).is_some())
        .unwrap_or(0);
    let mut out = Vec::with_capacity(last + 1);
    for i in 0..=last {
        let text = caps.get(i).map_or("", |m| m.as_str());
        budget::charge_str(text.len())?;
        out.push(Value::from(text));
    }
    Ok(out)
}

/// `Regex.replace(re, s, replacement, global: g)`: `\N`, `\g{N}` and `\0` in the replacement
/// stand for the groups (a group that did not match, or does not exist, for `""`), `\\` for a
/// backslash. The result is charged as it is built.
fn replace(r: &Regex, s: &str, with: &str, opts: &Value) -> Result<Value, Failure> {
    let global = !matches!(option(opts, "global")?, Some(Value::Bool(false)));
    let pieces = replacement(with);
    let mut out = String::new();
    let mut last = 0;
    for caps in r.matches(s) {
        let Some(whole) = caps.get(0) else { break };
        let before = out.len();
        out.push_str(&s[last..whole.start()]);
        for p in &pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Group(i) => out.push_str(caps.get(*i).map_or("", |m| m.as_str())),
            }
        }
        budget::charge_str(out.len() - before)?;
        last = whole.end();
        if !global {
            break;
        }
    }
    budget::charge_str(s.len() - last)?;
    out.push_str(&s[last..]);
    Ok(Value::from(out))
}

/// A piece of a replacement string.
#[derive(Debug, PartialEq)]
enum Piece {
    Text(String),
    Group(usize),
}

/// Elixir's `Regex.precompile_replacement`: `\N...` (all the digits that follow) and `\g{N}`
/// are groups, `\\` a backslash, anything else itself.
fn replacement(with: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = with;
    while let Some(c) = rest.chars().next() {
        let group = if let Some(after) = rest.strip_prefix("\\g{") {
            let n = after.bytes().take_while(u8::is_ascii_digit).count();
            (n > 0 && after.as_bytes().get(n) == Some(&b'}'))
                .then(|| (&after[..n], &after[n + 1..]))
        } else if let Some(after) = rest.strip_prefix('\\')
            && after.starts_with(|c: char| c.is_ascii_digit())
        {
            let n = after.bytes().take_while(u8::is_ascii_digit).count();
            Some((&after[..n], &after[n..]))
        } else {
            None
        };
        if let Some((digits, after)) = group {
            if !text.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut text)));
            }
            // More digits than any pattern has groups: a group that does not exist.
            out.push(Piece::Group(digits.parse().unwrap_or(usize::MAX)));
            rest = after;
        } else if let Some(after) = rest.strip_prefix("\\\\") {
            text.push('\\');
            rest = after;
        } else {
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    out
}

/// `Regex.split(re, s, parts: n, trim: t)` by Elixir 1.14's `do_split`: with `trim`, empty
/// pieces are dropped, and the pieces stop at `n`, the last holding the rest.
fn split(r: &Regex, s: &str, opts: &Value) -> Result<Value, Failure> {
    let trim = option(opts, "trim")?.is_some_and(Value::is_truthy);
    let parts = match option(opts, "parts")? {
        None => 0,
        Some(Value::Atom(a)) if a.as_str() == "infinity" => 0,
        Some(Value::Int(n)) if *n > 0 => *n,
        Some(other) => return Err(expected("parts: a positive integer or :infinity", other)),
    };
    if s.is_empty() {
        return list(if trim { vec![] } else { vec![Value::from("")] });
    }
    let mut out = Vec::new();
    let piece = |t: &str, out: &mut Vec<Value>| -> Result<(), Failure> {
        budget::charge_str(t.len())?;
        out.push(Value::from(t));
        Ok(())
    };
    let (mut offset, mut counter) = (0, parts);
    let mut matches = r.matches(s);
    loop {
        if trim && s.len() <= offset {
            break;
        }
        if counter == 1 {
            piece(&s[offset..], &mut out)?;
            break;
        }
        let Some(whole) = matches.next().and_then(|c| c.get(0)) else {
            piece(&s[offset..], &mut out)?;
            break;
        };
        if whole.start() < offset {
            continue;
        }
        if !(whole.start() == offset && trim) {
            piece(&s[offset..whole.start()], &mut out)?;
            counter -= 1;
        }
        offset = whole.end();
    }
    list(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(s: &str) -> Value {
        Value::Regex(Arc::new(Regex::compile(s, "").unwrap()))
    }

    fn strs(v: &Value) -> Vec<String> {
        match v {
            Value::List(l) => l
                .iter()
                .map(|x| match x {
                    Value::Str(s) => s.to_string(),
                    other => format!("{other:?}"),
                })
                .collect(),
            Value::Str(s) => vec![s.to_string()],
            other => panic!("{other:?}"),
        }
    }

    fn run(b: B, args: Vec<Value>) -> Value {
        call(b, args).unwrap()
    }

    /// Each checked against Elixir 1.14.
    #[test]
    fn empty_matches_as_elixir() {
        let s = Value::str;
        assert_eq!(
            strs(&run(B::RegexSplit, vec![re(""), s("abc")])),
            ["", "a", "b", "c", ""]
        );
        assert_eq!(
            strs(&run(B::StringReplace, vec![s("abc"), re(""), s("-")])),
            ["-a-b-c-"]
        );
        assert_eq!(
            strs(&run(B::RegexReplace, vec![re("a*"), s("baaac"), s("-")])),
            ["-b--c-"]
        );
        assert_eq!(
            strs(&run(B::RegexSplit, vec![re("a*"), s("baaac")])),
            ["", "b", "", "c", ""]
        );
        let scan = run(B::RegexScan, vec![re("a*"), s("baaac")]);
        assert_eq!(format!("{scan:?}"), r#"[[""], ["aaa"], [""], [""]]"#);
        assert_eq!(strs(&run(B::RegexSplit, vec![re("x"), s("")])), [""]);
    }

    #[test]
    fn groups_split_options_and_replacements_as_elixir() {
        let s = Value::str;
        let scan = run(B::RegexScan, vec![re("(a)|(b)"), s("ab")]);
        assert_eq!(format!("{scan:?}"), r#"[["a", "a"], ["b", "", "b"]]"#);
        let opts = |k: &str, v: Value| Value::list([Value::Tuple(vec![Value::atom(k), v].into())]);
        let got = run(
            B::RegexSplit,
            vec![re(","), s(",a,b,c,"), opts("parts", Value::Int(2))],
        );
        assert_eq!(strs(&got), ["", "a,b,c,"]);
        let got = run(
            B::RegexSplit,
            vec![re(","), s(",a,,b,"), opts("trim", Value::Bool(true))],
        );
        assert_eq!(strs(&got), ["a", "b"]);
        let got = run(
            B::RegexReplace,
            vec![
                re(r"(\w+)@(\w+)"),
                s("bob@ex"),
                s(r"\2 at \1 \0 \\ \9 \g{1}"),
            ],
        );
        assert_eq!(strs(&got), [r"ex at bob bob@ex \  bob"]);
        let got = run(
            B::RegexReplace,
            vec![
                re("b"),
                s("abcb"),
                s("x"),
                opts("global", Value::Bool(false)),
            ],
        );
        assert_eq!(strs(&got), ["axcb"]);
        let caps = run(B::RegexNamedCaptures, vec![re(r"(?<x>a)(?<y>b)?"), s("a")]);
        assert_eq!(format!("{caps:?}"), r#"{"x": "a", "y": ""}"#);
        assert_eq!(run(B::RegexRun, vec![re("z"), s("a")]), Value::Nil);
    }
}
