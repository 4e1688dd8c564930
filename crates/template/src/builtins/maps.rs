//! `Map` and `Keyword` functions that build a new map or list (`Map.put`, `Keyword.merge`...),
//! each charged to the memory budget before it is built. Keys are strings in a map (an atom
//! key is its name) and atoms in a keyword list, as the crate docs say.

use std::sync::Arc;

use super::{Builtin, Failure, expected};
use crate::budget::{self, ELEMENT_BYTES, MAP_ENTRY_BYTES};
use crate::value::{Map, Str, Value};

/// True for the built-ins this module runs.
pub(super) fn handles(b: Builtin) -> bool {
    use Builtin as B;
    matches!(
        b,
        B::MapPut
            | B::MapPutNew
            | B::MapMerge
            | B::MapDelete
            | B::MapDrop
            | B::MapTake
            | B::MapFetch
            | B::MapToList
            | B::KeywordPut
            | B::KeywordMerge
            | B::KeywordDelete
            | B::KeywordHasKey
            | B::KeywordFetch
            | B::KeywordKeys
    )
}

/// Runs `b` on its (up to three) arguments.
pub(super) fn call(b: Builtin, a: Value, x: Value, y: Value) -> Result<Value, Failure> {
    use Builtin as B;
    match b {
        B::KeywordPut
        | B::KeywordMerge
        | B::KeywordDelete
        | B::KeywordHasKey
        | B::KeywordFetch
        | B::KeywordKeys => return keyword(b, &a, x, y),
        _ => {}
    }
    let m = map(&a)?;
    Ok(match b {
        B::MapPut | B::MapPutNew => {
            let k = key(&x, b.name())?;
            if b == B::MapPutNew && m.contains_key(&k) {
                return Ok(a);
            }
            Value::Map(Arc::new(built(m, 1, |out| {
                out.insert(k, y);
            })?))
        }
        B::MapMerge => {
            let other = map(&x)?;
            if other.is_empty() {
                return Ok(a);
            }
            Value::Map(Arc::new(built(m, other.len(), |out| {
                out.extend(other.iter().map(|(k, v)| (k.clone(), v.clone())));
            })?))
        }
        B::MapDelete => match string_key(&x) {
            Some(k) if m.contains_key(k) => Value::Map(Arc::new(built(m, 0, |out| {
                out.remove(k);
            })?)),
            _ => a,
        },
        B::MapDrop => {
            let keys = key_list(&x, b.name())?;
            Value::Map(Arc::new(built(m, 0, |out| {
                for k in keys.iter().filter_map(string_key) {
                    out.remove(k);
                }
            })?))
        }
        B::MapTake => {
            let keys = key_list(&x, b.name())?;
            budget::charge_str(keys.len().saturating_mul(MAP_ENTRY_BYTES))?;
            let out: Map = keys
                .iter()
                .filter_map(string_key)
                .filter_map(|k| m.get(k).map(|v| (k.clone(), v.clone())))
                .collect();
            Value::Map(Arc::new(out))
        }
        B::MapFetch => match string_key(&x).and_then(|k| m.get(k)) {
            Some(v) => ok(v.clone())?,
            None => Value::atom("error"),
        },
        B::MapToList => {
            budget::charge_str(m.len().saturating_mul(3 * ELEMENT_BYTES))?;
            Value::list(
                m.iter()
                    .map(|(k, v)| Value::Tuple(vec![Value::Str(k.clone()), v.clone()].into())),
            )
        }
        _ => return Err(format!("{b:?} is not a map function")),
    })
}

/// The `Keyword` functions: `a` a keyword list, `x` an atom key (or a second list).
fn keyword(b: Builtin, a: &Value, x: Value, y: Value) -> Result<Value, Failure> {
    use Builtin as B;
    let items = keyword_list(a)?;
    if b == B::KeywordKeys {
        budget::charge_str(items.len().saturating_mul(ELEMENT_BYTES))?;
        return Ok(Value::list(items.iter().map(|(k, _)| (*k).clone())));
    }
    if b == B::KeywordMerge {
        let other = keyword_list(&x)?;
        budget::charge_str((items.len() + other.len()).saturating_mul(ELEMENT_BYTES))?;
        let kept = pairs(a)
            .zip(&items)
            .filter(|(_, (k, _))| !other.iter().any(|(o, _)| o == k))
            .map(|(pair, _)| pair.clone());
        return Ok(Value::list(
            kept.chain(pairs(&x).cloned()).collect::<Vec<_>>(),
        ));
    }
    if !matches!(x, Value::Atom(_)) {
        return Err(expected("an atom key", &x));
    }
    let found = items.iter().find(|(k, _)| **k == x).map(|(_, v)| *v);
    Ok(match b {
        B::KeywordHasKey => Value::Bool(found.is_some()),
        B::KeywordFetch => match found {
            Some(v) => ok(v.clone())?,
            None => Value::atom("error"),
        },
        B::KeywordDelete | B::KeywordPut => {
            // `Keyword.put` adds one element and its two-element tuple.
            let extra = usize::from(b == B::KeywordPut);
            budget::charge_str((items.len() + extra * 3).saturating_mul(ELEMENT_BYTES))?;
            let mut out = Vec::with_capacity(items.len() + extra);
            if b == B::KeywordPut {
                out.push(Value::Tuple(vec![x.clone(), y].into()));
            }
            out.extend(
                pairs(a)
                    .zip(&items)
                    .filter(|(_, (k, _))| **k != x)
                    .map(|(pair, _)| pair.clone()),
            );
            Value::list(out)
        }
        _ => return Err(format!("{b:?} is not a keyword function")),
    })
}

/// The map a function takes, or Elixir's `BadMapError` as a message.
fn map(v: &Value) -> Result<&Map, Failure> {
    match v {
        Value::Map(m) => Ok(m),
        other => Err(expected("a map", other)),
    }
}

/// A copy of `m` with room charged for `extra` more entries, changed by `change`.
fn built(m: &Map, extra: usize, change: impl FnOnce(&mut Map)) -> Result<Map, Failure> {
    budget::charge_str((m.len().saturating_add(extra)).saturating_mul(MAP_ENTRY_BYTES))?;
    let mut out = m.clone();
    change(&mut out);
    Ok(out)
}

/// A key to put in a map: a string or an atom (its name).
fn key(v: &Value, function: &str) -> Result<Str, Failure> {
    super::collections::map_key(v, function)
}

/// A key to look up: strings and atoms only (no other key can be in a map).
fn string_key(v: &Value) -> Option<&Str> {
    match v {
        Value::Str(s) | Value::Atom(s) => Some(s),
        _ => None,
    }
}

/// The keys of `Map.drop`/`Map.take`: a list.
fn key_list<'v>(v: &'v Value, function: &str) -> Result<&'v [Value], Failure> {
    match v {
        Value::List(l) => Ok(l),
        other => Err(format!(
            "{function} expects a list of keys, not {}",
            crate::ops::describe(other)
        )),
    }
}

/// `{:ok, v}`, charged.
fn ok(v: Value) -> Result<Value, Failure> {
    budget::charge_str(2 * ELEMENT_BYTES)?;
    Ok(Value::Tuple(vec![Value::atom("ok"), v].into()))
}

/// The elements of a list (already checked by [`keyword_list`]).
fn pairs(v: &Value) -> impl Iterator<Item = &Value> {
    match v {
        Value::List(l) => l.iter(),
        _ => [].iter(),
    }
}

/// A keyword list's `(key, value)` pairs: every element must be an `{atom, value}` tuple.
fn keyword_list(v: &Value) -> Result<Vec<(&Value, &Value)>, Failure> {
    let Value::List(items) = v else {
        return Err(expected("a keyword list", v));
    };
    budget::charge_str(items.len().saturating_mul(2 * size_of::<usize>()))?;
    items
        .iter()
        .map(|item| match item {
            Value::Tuple(p) if p.len() == 2 && matches!(p[0], Value::Atom(_)) => Ok((&p[0], &p[1])),
            other => Err(format!(
                "expected a keyword list ({{atom, value}} tuples), found {}",
                crate::ops::describe(other)
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kw(pairs: &[(&str, i64)]) -> Value {
        Value::list(
            pairs
                .iter()
                .map(|(k, v)| Value::Tuple(vec![Value::atom(k), Value::Int(*v)].into())),
        )
    }

    fn m(pairs: &[(&str, i64)]) -> Value {
        Value::map(pairs.iter().map(|(k, v)| (*k, Value::Int(*v))))
    }

    #[test]
    fn map_functions_follow_elixir() {
        let a = m(&[("a", 1), ("b", 2)]);
        let put = call(Builtin::MapPut, a.clone(), Value::atom("c"), Value::Int(3));
        assert_eq!(put, Ok(m(&[("a", 1), ("b", 2), ("c", 3)])));
        let keep = call(
            Builtin::MapPutNew,
            a.clone(),
            Value::atom("a"),
            Value::Int(9),
        );
        assert_eq!(keep, Ok(a.clone()));
        let merged = call(Builtin::MapMerge, a.clone(), m(&[("b", 5)]), Value::Nil);
        assert_eq!(merged, Ok(m(&[("a", 1), ("b", 5)])));
        let dropped = call(
            Builtin::MapDrop,
            a.clone(),
            Value::list([Value::atom("a"), Value::Int(1)]),
            Value::Nil,
        );
        assert_eq!(dropped, Ok(m(&[("b", 2)])));
        let fetched = call(Builtin::MapFetch, a.clone(), Value::str("z"), Value::Nil);
        assert_eq!(fetched, Ok(Value::atom("error")));
        let bad = call(Builtin::MapPut, Value::Int(1), Value::atom("a"), Value::Nil);
        assert_eq!(bad, Err("expected a map, not the integer 1".to_owned()));
    }

    #[test]
    fn keyword_functions_follow_elixir() {
        let a = kw(&[("a", 1), ("b", 2), ("a", 3)]);
        let put = call(
            Builtin::KeywordPut,
            a.clone(),
            Value::atom("a"),
            Value::Int(9),
        );
        assert_eq!(put, Ok(kw(&[("a", 9), ("b", 2)])));
        let merged = call(
            Builtin::KeywordMerge,
            a.clone(),
            kw(&[("b", 7)]),
            Value::Nil,
        );
        assert_eq!(merged, Ok(kw(&[("a", 1), ("a", 3), ("b", 7)])));
        let keys = call(Builtin::KeywordKeys, a.clone(), Value::Nil, Value::Nil);
        assert_eq!(keys, Ok(Value::list(["a", "b", "a"].map(Value::atom))));
        let not_kw = call(
            Builtin::KeywordKeys,
            Value::list([Value::Int(1)]),
            Value::Nil,
            Value::Nil,
        );
        assert!(not_kw.is_err());
    }
}
