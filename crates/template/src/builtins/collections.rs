//! `Enum`, `Map` and `List` functions. A map used as an enumerable is its `{key, value}` pairs
//! in key order, as in Elixir for small maps.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{Builtin, Failure, expected};
use crate::budget;
use crate::list::List;
use crate::ops::to_string;
use crate::value::{Str, Value};

/// The elements of an enumerable: a list, or a map's `{key, value}` pairs.
pub(crate) fn elements(v: &Value) -> Result<List, Failure> {
    match v {
        Value::List(l) => Ok(l.clone()),
        Value::Map(m) => Ok(m
            .iter()
            .map(|(k, v)| Value::Tuple(vec![Value::Str(k.clone()), v.clone()].into()))
            .collect()),
        other => Err(expected("a list or a map", other)),
    }
}

/// Erlang's term order: numbers < atoms < tuples < maps < lists < strings; within a type,
/// the natural order (numbers by value, strings by bytes, lists and tuples element-wise).
pub(crate) fn compare(a: &Value, b: &Value) -> Result<Ordering, Failure> {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Int(_) | Value::Float(_) => 0,
            Value::Atom(_) | Value::Bool(_) | Value::Nil => 1,
            Value::Tuple(_) => 2,
            Value::Map(_) => 3,
            Value::List(_) => 4,
            Value::Str(_) => 5,
            Value::Safe(_) => 6,
            // A struct: a map in Erlang's order, after the others galleon has.
            Value::Regex(_) => 7,
        }
    }
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
            let f = |v: &Value| match v {
                Value::Int(i) => *i as f64,
                Value::Float(x) => *x,
                _ => 0.0,
            };
            f(a).partial_cmp(&f(b)).unwrap_or(Ordering::Equal)
        }
        (Value::Str(x), Value::Str(y)) => x.cmp(y),
        (Value::List(x), Value::List(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let o = compare(p, q)?;
                if o.is_ne() {
                    return Ok(o);
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Tuple(x), Value::Tuple(y)) => {
            let o = x.len().cmp(&y.len());
            if o.is_ne() {
                return Ok(o);
            }
            for (p, q) in x.iter().zip(y.iter()) {
                let o = compare(p, q)?;
                if o.is_ne() {
                    return Ok(o);
                }
            }
            Ordering::Equal
        }
        _ if rank(a) == 1 && rank(b) == 1 => atom_name(a).cmp(atom_name(b)),
        _ if rank(a) != rank(b) => rank(a).cmp(&rank(b)),
        _ => return Err("cannot order these values".to_owned()),
    })
}

fn atom_name(v: &Value) -> &str {
    match v {
        Value::Atom(a) => a.as_str(),
        Value::Bool(true) => "true",
        Value::Bool(false) => "false",
        _ => "nil",
    }
}

fn int(v: &Value) -> Result<i64, Failure> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(expected("an integer", other)),
    }
}

/// A value as the key of a map a function builds: a string or an atom (galleon's map keys are
/// strings; an integer key would change the map's order and the key's type).
pub(crate) fn map_key(v: &Value, function: &str) -> Result<Str, Failure> {
    match v {
        Value::Str(s) | Value::Atom(s) => Ok(s.clone()),
        other => Err(format!(
            "{function} builds a map, whose keys are strings or atoms here, not {}",
            crate::ops::describe(other)
        )),
    }
}

/// A map key given as a string or an atom (galleon's map keys are strings).
fn key(v: &Value) -> Option<&Str> {
    match v {
        Value::Str(s) | Value::Atom(s) => Some(s),
        _ => None,
    }
}

/// `first..last//step` as a list, as Elixir enumerates it: up from `first` by a positive
/// step while not past `last`, down by a negative one; empty when the step points away from
/// `last`; a zero step is an error. Charged before it is built.
fn stepped_range(first: &Value, last: &Value, step: &Value) -> Result<Value, Failure> {
    let int = |v: &Value| match v {
        Value::Int(i) => Ok(i128::from(*i)),
        other => Err(expected("an integer range bound and step", other)),
    };
    let (first, last, step) = (int(first)?, int(last)?, int(step)?);
    if step == 0 {
        return Err("a range's step cannot be zero".to_owned());
    }
    let n = if (step > 0 && first <= last) || (step < 0 && first >= last) {
        (last - first) / step + 1
    } else {
        0
    };
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    budget::charge_str(n.saturating_mul(budget::ELEMENT_BYTES))?;
    // Every element lies between `first` and `last`: each fits in an i64.
    Ok(Value::list(
        (0..n).map(|k| Value::Int((first + step * k as i128) as i64)),
    ))
}

/// The value of a keyword list's first `{key, value}` pair with this key (`opts[:class]`,
/// `Keyword.get`): other elements are passed over, as Erlang's `lists:keyfind` does.
pub(crate) fn keyword_find<'v>(items: &'v [Value], key: &Value) -> Option<&'v Value> {
    items.iter().find_map(|item| match item {
        Value::Tuple(pair) if pair.len() == 2 && pair[0] == *key => Some(&pair[1]),
        _ => None,
    })
}

/// `Enum.chunk_every(items, count, step \\ count, leftover \\ [])` as Elixir runs it: chunks
/// start every `step` elements and the first one short of `count` is the last: `:discard`
/// drops it, a list fills it up to `count` (as far as it goes).
pub(super) fn chunk_every(
    a: &Value,
    count: &Value,
    step: &Value,
    leftover: &Value,
) -> Result<Value, Failure> {
    let items = elements(a)?;
    let n = int(count)?;
    if n <= 0 {
        return Err(expected("a positive chunk size", count));
    }
    let step = match step {
        Value::Nil => n,
        s => int(s)?,
    };
    if step <= 0 {
        return Err(expected("a positive step", &Value::Int(step)));
    }
    let fill: Option<List> = match leftover {
        Value::Nil => Some(List::default()),
        Value::Atom(d) if d.as_str() == "discard" => None,
        other => Some(elements(other)?),
    };
    let (n, step) = (n as usize, step as usize);
    // Charged before the chunks are built (a step of 1 copies each element `count` times):
    // the complete chunks and at most one short one.
    let complete = match items.len().checked_sub(n) {
        Some(extra) => extra / step + 1,
        None => 0,
    };
    let elements_built = (complete + 1).saturating_mul(n.min(items.len()) + 1);
    budget::charge_str(elements_built.saturating_mul(budget::ELEMENT_BYTES))?;
    let mut out = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let end = start.saturating_add(n);
        if end <= items.len() {
            out.push(Value::list(items[start..end].iter().cloned()));
        } else {
            if let Some(fill) = &fill {
                let missing = end - items.len();
                let c: Vec<Value> = items[start..]
                    .iter()
                    .chain(fill.iter().take(missing))
                    .cloned()
                    .collect();
                out.push(Value::List(c.into()));
            }
            break;
        }
        start = start.saturating_add(step);
    }
    Ok(Value::List(out.into()))
}

/// Runs an `Enum`, `Map` or `List` built-in on its (up to three) arguments.
pub(super) fn call(b: Builtin, a: Value, x: Value, y: Value) -> Result<Value, Failure> {
    use Builtin as B;
    match b {
        B::MapGet | B::MapHasKey | B::MapKeys | B::MapValues => {
            let Value::Map(m) = &a else {
                return Err(expected("a map", &a));
            };
            let found = key(&x).and_then(|k| m.get(&k.bytes()[..]));
            return Ok(match b {
                B::MapGet => found.cloned().unwrap_or(y),
                B::MapHasKey => Value::Bool(found.is_some()),
                B::MapKeys => Value::list(m.keys().map(|k| Value::Str(k.clone()))),
                _ => Value::list(m.values().cloned()),
            });
        }
        B::RangeStep => return stepped_range(&a, &x, &y),
        B::KeywordGet => {
            let Value::List(items) = &a else {
                return Err(expected("a keyword list", &a));
            };
            if !matches!(x, Value::Atom(_)) {
                return Err(expected("an atom key", &x));
            }
            return Ok(keyword_find(items, &x).cloned().unwrap_or(y));
        }
        B::EnumCount => {
            if let Value::Map(m) = &a {
                return Ok(Value::Int(m.len() as i64));
            }
        }
        B::EnumInto => {
            return match &x {
                Value::Map(m) => {
                    let mut out = (**m).clone();
                    insert_pairs(&elements(&a)?, &mut out, "Enum.into")?;
                    Ok(Value::Map(Arc::new(out)))
                }
                Value::List(l) => {
                    let items = elements(&a)?;
                    Ok(Value::list(l.iter().chain(items.iter()).cloned()))
                }
                // `for x <- xs, into: "", do: ...`: strings only, as Elixir's `Collectable`
                // for binaries takes.
                Value::Str(s) => {
                    let items = elements(&a)?;
                    let mut out = s.as_str().to_owned();
                    for v in items.iter() {
                        let Value::Str(part) = v else {
                            return Err(expected("strings to collect into a string", v));
                        };
                        out.push_str(part.as_str());
                    }
                    Ok(Value::from(out))
                }
                other => Err(expected("a map, a list or a string to collect into", other)),
            };
        }
        B::MapNew => {
            let mut out = crate::value::Map::new();
            insert_pairs(&elements(&a)?, &mut out, "Map.new")?;
            return Ok(Value::Map(Arc::new(out)));
        }
        _ => {}
    }
    let items = elements(&a)?;
    let list = |v: Vec<Value>| Ok(Value::List(v.into()));
    match b {
        B::EnumCount => Ok(Value::Int(items.len() as i64)),
        B::EnumJoin => {
            let sep = match &x {
                Value::Nil => String::new(),
                Value::Str(s) => s.as_str().to_owned(),
                other => return Err(expected("a string separator", other)),
            };
            budget::charge_str(sep.len().saturating_mul(items.len()))?;
            let mut out = String::new();
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&sep);
                }
                out.push_str(&to_string(v)?);
            }
            Ok(Value::from(out))
        }
        B::EnumAt => {
            let i = int(&x)?;
            let len = items.len() as i64;
            let at = if i < 0 { len + i } else { i };
            Ok(if (0..len).contains(&at) {
                items[at as usize].clone()
            } else {
                y
            })
        }
        B::EnumReverse => list(items.iter().rev().cloned().collect()),
        B::EnumSum => {
            let mut int_sum: i64 = 0;
            let mut float_sum: Option<f64> = None;
            for v in items.iter() {
                match (v, &mut float_sum) {
                    (Value::Int(i), None) => {
                        int_sum = int_sum.checked_add(*i).ok_or("integer overflow")?
                    }
                    (Value::Int(i), Some(f)) => *f += *i as f64,
                    (Value::Float(x), None) => float_sum = Some(int_sum as f64 + x),
                    (Value::Float(x), Some(f)) => *f += x,
                    (other, _) => return Err(expected("a list of numbers", other)),
                }
            }
            Ok(float_sum.map_or(Value::Int(int_sum), Value::Float))
        }
        B::EnumMin | B::EnumMax => {
            let mut best: Option<&Value> = None;
            for v in items.iter() {
                best = Some(match best {
                    None => v,
                    Some(b0) => {
                        let o = compare(v, b0)?;
                        if (b == B::EnumMin && o.is_lt()) || (b == B::EnumMax && o.is_gt()) {
                            v
                        } else {
                            b0
                        }
                    }
                });
            }
            best.cloned()
                .ok_or_else(|| "empty list (Enum.EmptyError)".to_owned())
        }
        B::EnumSort => {
            let mut v = items.to_vec();
            let mut err = None;
            v.sort_by(|p, q| {
                compare(p, q).unwrap_or_else(|e| {
                    err = Some(e);
                    Ordering::Equal
                })
            });
            match err {
                Some(e) => Err(e),
                None => list(v),
            }
        }
        B::EnumFrequencies => {
            let mut counts = crate::value::Map::new();
            for v in items.iter() {
                let n = counts
                    .entry(map_key(v, "Enum.frequencies")?)
                    .or_insert(Value::Int(0));
                if let Value::Int(c) = n {
                    *c += 1;
                }
            }
            Ok(Value::Map(Arc::new(counts)))
        }
        B::EnumUniq => {
            let mut out: Vec<Value> = Vec::new();
            for v in items.iter() {
                if !out.iter().any(|o| o == v) {
                    out.push(v.clone());
                }
            }
            list(out)
        }
        B::EnumTake | B::EnumDrop => {
            let n = int(&x)?;
            let len = items.len();
            let k = usize::try_from(n.unsigned_abs())
                .unwrap_or(usize::MAX)
                .min(len);
            let range = match (b == B::EnumTake, n >= 0) {
                (true, true) => 0..k,
                (true, false) => len - k..len,
                (false, true) => k..len,
                (false, false) => 0..len - k,
            };
            list(items[range].to_vec())
        }
        B::EnumEmpty => Ok(Value::Bool(items.is_empty())),
        B::EnumMember => Ok(Value::Bool(items.iter().any(|v| v == &x))),
        B::EnumWithIndex => {
            // `Enum.with_index(list, offset)` numbers from `offset`.
            let offset = if matches!(x, Value::Nil) { 0 } else { int(&x)? };
            let mut out = Vec::with_capacity(items.len());
            for (i, v) in items.iter().enumerate() {
                let n = offset.checked_add(i as i64).ok_or("integer overflow")?;
                out.push(Value::Tuple(vec![v.clone(), Value::Int(n)].into()));
            }
            list(out)
        }
        B::EnumToList => list(items.to_vec()),
        B::EnumConcat => {
            let more = elements(&x)?;
            list(items.iter().chain(more.iter()).cloned().collect())
        }
        B::EnumZip => {
            let other = elements(&x)?;
            list(
                items
                    .iter()
                    .zip(other.iter())
                    .map(|(p, q)| Value::Tuple(vec![p.clone(), q.clone()].into()))
                    .collect(),
            )
        }
        B::EnumSlice => {
            let len = items.len() as i64;
            let mut start = int(&x)?;
            let count = int(&y)?;
            if count < 0 {
                return Err(expected("a non-negative count", &y));
            }
            if start < 0 {
                start = (start + len).max(0);
            }
            if start >= len {
                return list(Vec::new());
            }
            let end = start.saturating_add(count).min(len);
            list(items[start as usize..end as usize].to_vec())
        }
        B::EnumIntersperse => {
            let mut out = Vec::with_capacity(items.len().saturating_mul(2));
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(x.clone());
                }
                out.push(v.clone());
            }
            list(out)
        }
        B::EnumSplit => {
            // A negative count splits that many from the end, as Elixir's.
            let n = int(&x)?;
            let len = items.len();
            let k = usize::try_from(n.unsigned_abs())
                .unwrap_or(usize::MAX)
                .min(len);
            let at = if n >= 0 { k } else { len - k };
            let (front, back) = items.split_at(at);
            Ok(Value::Tuple(
                vec![Value::list(front.to_vec()), Value::list(back.to_vec())].into(),
            ))
        }
        B::ListFirst => Ok(items.first().cloned().unwrap_or_default()),
        B::ListLast => Ok(items.last().cloned().unwrap_or_default()),
        B::ListFlatten => {
            // Charged as it grows: a list sharing its sublists (`[acc, acc]` in a reduce)
            // flattens to exponentially many elements.
            fn flat(items: &[Value], out: &mut Vec<Value>) -> Result<(), Failure> {
                for v in items {
                    match v {
                        Value::List(l) => flat(l, out)?,
                        other => {
                            budget::charge_str(budget::ELEMENT_BYTES)?;
                            out.push(other.clone());
                        }
                    }
                }
                Ok(())
            }
            let mut out = Vec::new();
            flat(&items, &mut out)?;
            list(out)
        }
        _ => Err(format!("{b:?} is not a collection function")),
    }
}

/// Puts `{key, value}` pairs into `map` (a later key replacing an earlier one), for the
/// built-in `function` that builds the map.
pub(crate) fn insert_pairs(
    pairs: &[Value],
    map: &mut crate::value::Map,
    function: &str,
) -> Result<(), Failure> {
    for pair in pairs {
        match pair {
            Value::Tuple(kv) if kv.len() == 2 => {
                map.insert(map_key(&kv[0], function)?, kv[1].clone());
            }
            other => {
                return Err(format!(
                    "{function} expects {{key, value}} tuples, not {}",
                    crate::ops::describe(other)
                ));
            }
        }
    }
    Ok(())
}

/// `x in enumerable`: membership by `===`, as Elixir's `Enum.member?` (so `1 in [1.0]` is
/// false).
pub(crate) fn member(x: &Value, collection: &Value) -> Result<bool, Failure> {
    Ok(elements(collection)?.iter().any(|v| v == x))
}
