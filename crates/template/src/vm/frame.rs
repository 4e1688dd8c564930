//! A render's frames: one per template being rendered (program counter, loop positions,
//! variables), and how a variable path is looked up in one.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::program::{Bind, Code, CodeKind, Program};
use crate::value::{Str, Value};

/// Variable slots and assigns a frame holds without allocating: a page's handful of loop
/// variables and assigns. Allocations per small render showed in profiles of 4 KB responses.
const INLINE_SLOTS: usize = 4;

/// One template being rendered: which program, where in it, and its variables.
#[derive(Debug)]
pub(super) struct Frame {
    pub(super) prog: usize,
    pub(super) pc: usize,
    pub(super) locals: SmallVec<[Value; INLINE_SLOTS]>,
    /// The frame's assigns, one per name the program uses (`None`: not given).
    pub(super) assigns: SmallVec<[Option<Value>; INLINE_SLOTS]>,
    pub(super) loops: Vec<Loop>,
}

impl Frame {
    pub(super) fn new(
        prog: &Program,
        index: usize,
        lookup: impl Fn(&Str) -> Option<Value>,
    ) -> Frame {
        Frame {
            prog: index,
            pc: 0,
            locals: SmallVec::from_elem(Value::Nil, prog.locals),
            assigns: prog.assigns.iter().map(lookup).collect(),
            loops: Vec::new(),
        }
    }
}

/// The state of one `for`.
#[derive(Debug)]
pub(super) enum Loop {
    /// `next..=last`, counted; `done` once `last` was yielded (so `last = i64::MAX` works).
    Range {
        next: i64,
        last: i64,
        index: i64,
        done: bool,
    },
    /// A list and the position of the next element.
    Items { items: Arc<[Value]>, next: usize },
}

impl Loop {
    /// Elements not yet bound.
    pub(super) fn remaining(&self) -> u64 {
        match self {
            Loop::Range {
                next, last, done, ..
            } => {
                if *done || next > last {
                    0
                } else {
                    u64::try_from(i128::from(*last) - i128::from(*next) + 1).unwrap_or(u64::MAX)
                }
            }
            Loop::Items { items, next } => items.len().saturating_sub(*next) as u64,
        }
    }

    /// Moves past `n` elements (at most [`Loop::remaining`]) without binding them: for a loop
    /// whose body does not read them.
    pub(super) fn skip(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        match self {
            Loop::Range {
                next,
                last,
                index,
                done,
            } => {
                let to = i128::from(*next) + i128::from(n);
                if to > i128::from(*last) {
                    *next = *last;
                    *done = true;
                } else {
                    *next = to as i64;
                }
                *index = index.wrapping_add(n as i64);
            }
            Loop::Items { items, next } => {
                *next = next.saturating_add(n as usize).min(items.len());
            }
        }
    }

    /// Binds the next element (and its index) into `locals`; false when the loop is exhausted.
    /// Writes in place: no `Value` is moved through the stack.
    #[inline(always)]
    pub(super) fn advance(&mut self, bind: Bind, locals: &mut [Value]) -> bool {
        let i = match self {
            Loop::Range {
                next,
                last,
                index,
                done,
            } => {
                if *done || *next > *last {
                    return false;
                }
                if let Some(slot) = bind.item.and_then(|s| locals.get_mut(s)) {
                    set_int(slot, *next);
                }
                if *next == *last {
                    *done = true;
                } else {
                    *next += 1;
                }
                let i = *index;
                *index = index.wrapping_add(1);
                i
            }
            Loop::Items { items, next } => {
                let Some(v) = items.get(*next) else {
                    return false;
                };
                if let Some(slot) = bind.item.and_then(|s| locals.get_mut(s)) {
                    match v {
                        Value::Int(i) => set_int(slot, *i),
                        v => *slot = v.clone(),
                    }
                }
                *next += 1;
                (*next - 1) as i64
            }
        };
        if let Some(slot) = bind.index.and_then(|s| locals.get_mut(s)) {
            set_int(slot, i);
        }
        true
    }
}

/// Stores an integer in a variable slot. When the slot already holds an integer (every iteration
/// of a loop over integers but the first) only the payload is written: no drop, no 40-byte move
/// through the stack, which profiling showed stalling on store forwarding.
#[inline]
pub(super) fn set_int(slot: &mut Value, i: i64) {
    match slot {
        Value::Int(old) => *old = i,
        other => *other = Value::Int(i),
    }
}

/// The value of a plain path (`x`, `@x`, `x.key.key`, a literal) without going through `eval`:
/// no step is counted (the instruction was) and nothing is cloned. `None` for anything else, and
/// for a path that does not resolve, which `eval` then reports.
#[inline(always)]
pub(super) fn lookup<'a>(frame: &'a Frame, code: &'a Code) -> Option<&'a Value> {
    match &code.kind {
        CodeKind::Local(s) => frame.locals.get(*s),
        _ => lookup_path(frame, code),
    }
}

pub(super) fn lookup_path<'a>(frame: &'a Frame, code: &'a Code) -> Option<&'a Value> {
    match &code.kind {
        CodeKind::Lit(v) => Some(v),
        CodeKind::Local(s) => frame.locals.get(*s),
        CodeKind::Assign(i) => frame.assigns.get(*i)?.as_ref(),
        CodeKind::Field(inner, key) => match lookup_path(frame, inner)? {
            Value::Map(m) => m.get(&key.bytes()[..]),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_loop_reaches_i64_max_without_overflow() {
        let mut l = Loop::Range {
            next: i64::MAX - 1,
            last: i64::MAX,
            index: 0,
            done: false,
        };
        let bind = Bind {
            item: Some(0),
            index: Some(1),
        };
        let mut locals = vec![Value::Nil, Value::Nil];
        assert!(l.advance(bind, &mut locals));
        assert_eq!(locals, [Value::Int(i64::MAX - 1), Value::Int(0)]);
        assert!(l.advance(bind, &mut locals));
        assert_eq!(locals, [Value::Int(i64::MAX), Value::Int(1)]);
        assert!(!l.advance(bind, &mut locals));
    }
}
