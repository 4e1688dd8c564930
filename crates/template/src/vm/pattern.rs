//! Pattern matching for `=`, `case` clauses, `for` generators and `fn` parameters: compares
//! with `===` and binds variables into a frame's (or the functions') slots.

use crate::program::PatCode;
use crate::value::Value;

/// True when `v` matches `p`; the variables of `p` are then bound in `locals`. (A failed match
/// may leave some bound: the compiler never reads them.)
pub(super) fn matches(p: &PatCode, v: &Value, locals: &mut [Value]) -> bool {
    match p {
        PatCode::Any => true,
        PatCode::Bind(slot) => {
            if let Some(s) = locals.get_mut(*slot) {
                *s = v.clone();
            }
            true
        }
        PatCode::Lit(lit) => lit == v,
        PatCode::Pin(slot) => locals.get(*slot) == Some(v),
        PatCode::Tuple(items) => match v {
            Value::Tuple(t) if t.len() == items.len() => items
                .iter()
                .zip(t.iter())
                .all(|(p, v)| matches(p, v, locals)),
            _ => false,
        },
        PatCode::Map(entries) => match v {
            Value::Map(m) => entries
                .iter()
                .all(|(k, p)| m.get(&k.bytes()[..]).is_some_and(|v| matches(p, v, locals))),
            _ => false,
        },
        PatCode::List(items) => match v {
            Value::List(l) if l.len() == items.len() => items
                .iter()
                .zip(l.iter())
                .all(|(p, v)| matches(p, v, locals)),
            _ => false,
        },
    }
}
