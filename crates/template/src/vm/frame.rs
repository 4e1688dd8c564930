//! A render's frames: one per template being rendered (program counter, loop positions,
//! variables), and how a variable path is looked up in one.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::ast::BinOp;
use crate::budget::MAP_ENTRY_BYTES;
use crate::list::List;
use crate::program::{Bind, Code, CodeKind, FieldName, Program};
use crate::value::{Map, Str, Value, word8};

/// Variable slots and assigns a frame holds without allocating: a page's handful of loop
/// variables and assigns. Allocations per small render showed in profiles of 4 KB responses.
const INLINE_SLOTS: usize = 4;

/// Loops a frame holds open without allocating (a table's rows and cells).
const INLINE_LOOPS: usize = 2;

/// One template being rendered: which program, where in it, and its variables.
#[derive(Debug)]
pub(super) struct Frame {
    pub(super) prog: usize,
    pub(super) pc: usize,
    pub(super) locals: SmallVec<[Value; INLINE_SLOTS]>,
    /// The frame's assigns, one per name the program uses (`None`: not given).
    pub(super) assigns: SmallVec<[Option<Value>; INLINE_SLOTS]>,
    /// Loops being run, innermost last; inline for a page's usual nesting of one or two.
    pub(super) loops: SmallVec<[Loop; INLINE_LOOPS]>,
}

impl Frame {
    /// A frame of program `index` (`prog`) with its variables (nil) and the assigns `lookup`
    /// gives.
    pub(super) fn new(
        prog: &Program,
        index: usize,
        lookup: impl Fn(&str) -> Option<Value>,
    ) -> Frame {
        let mut frame = Frame::empty(index);
        frame.fill(prog, lookup);
        frame
    }

    /// A frame of program `index` holding no variables or assigns yet: what [`Frame::fill`]
    /// fills where the frame lies (vectors built aside and moved in are copied whole).
    #[inline(always)]
    pub(super) fn empty(index: usize) -> Frame {
        Frame {
            prog: index,
            pc: 0,
            locals: SmallVec::new(),
            assigns: SmallVec::new(),
            loops: SmallVec::new(),
        }
    }

    /// Sets an [`Frame::empty`] frame's variables to nil and its assigns from `lookup`, one per
    /// name `prog` uses.
    #[inline(always)]
    pub(super) fn fill(&mut self, prog: &Program, lookup: impl Fn(&str) -> Option<Value>) {
        self.locals.reserve(prog.locals);
        for _ in 0..prog.locals {
            self.locals.push(Value::Nil);
        }
        self.assigns.reserve(prog.assigns.len());
        for name in &prog.assigns {
            self.assigns.push(lookup(name));
        }
    }
}

impl Frame {
    /// Phoenix's `assigns` as a value: the assigns of this frame that were given, by name
    /// (`prog` is the frame's program), and the bytes the map takes.
    pub(super) fn all_assigns(&self, prog: &Program) -> (Map, usize) {
        let map: Map = prog
            .assigns
            .iter()
            .zip(&self.assigns)
            .filter_map(|(name, v)| Some((Str::new(name), v.clone()?)))
            .collect();
        let bytes = map.len().saturating_mul(MAP_ENTRY_BYTES);
        (map, bytes)
    }
}

/// The assigns a partial was called with, looked up by name as its frame is filled.
#[derive(Debug)]
pub(super) enum Given {
    /// `key: value` pairs (a later key wins, as in Elixir's `Map.new`).
    Pairs(Vec<(Str, Value)>),
    /// A map's entries.
    Map(Arc<Map>),
}

impl Given {
    /// The assigns of a partial called with a value: a map, or a keyword list as Phoenix takes
    /// one (`Map.new`); `Err` names what it was instead.
    pub(super) fn of(v: Value) -> Result<Given, String> {
        let items = match v {
            Value::Map(m) => return Ok(Given::Map(m)),
            Value::List(items) => items,
            other => return Err(not_assigns(&other)),
        };
        let mut pairs = Vec::with_capacity(items.len());
        for item in items.iter() {
            match item {
                Value::Tuple(p) if p.len() == 2 && matches!(p[0], Value::Atom(_)) => {
                    if let Value::Atom(k) = &p[0] {
                        pairs.push((k.clone(), p[1].clone()));
                    }
                }
                _ => return Err(not_assigns(&Value::List(items.clone()))),
            }
        }
        Ok(Given::Pairs(pairs))
    }

    /// The value given for assign `name`.
    pub(super) fn get(&self, name: &str) -> Option<Value> {
        match self {
            Given::Pairs(p) => p
                .iter()
                .rev()
                .find(|(k, _)| k.as_str() == name)
                .map(|(_, v)| v.clone()),
            Given::Map(m) => m.get(name.as_bytes()).cloned(),
        }
    }
}

/// The error of a partial's assigns that are neither a map nor a keyword list.
fn not_assigns(v: &Value) -> String {
    format!(
        "the assigns of `render` must be a map or a keyword list, not {}",
        crate::ops::describe(v)
    )
}

/// The state of one `for`.
#[derive(Debug)]
pub(super) enum Loop {
    /// `next`, `next + step`, ... up to `last` (down to it when `step < 0`), counted; `done`
    /// once no element is left (so `last = i64::MAX` works).
    Range {
        next: i64,
        last: i64,
        step: i64,
        index: i64,
        done: bool,
    },
    /// A list and the position of the next element.
    Items { items: List, next: usize },
}

impl Loop {
    /// A counted loop from `first` to `last` by `step` (not zero), empty when `last` lies
    /// behind `first` in the step's direction.
    pub(super) fn range(first: i64, last: i64, step: i64) -> Loop {
        let done = if step > 0 { first > last } else { first < last };
        Loop::Range {
            next: first,
            last,
            step,
            index: 0,
            done,
        }
    }

    /// Elements not yet bound.
    pub(super) fn remaining(&self) -> u64 {
        match self {
            Loop::Range {
                next,
                last,
                step,
                done,
                ..
            } => {
                if *done {
                    0
                } else {
                    let span = (i128::from(*last) - i128::from(*next)) / i128::from(*step);
                    u64::try_from(span + 1).unwrap_or(u64::MAX)
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
                step,
                index,
                done,
            } => {
                let to = i128::from(*next) + i128::from(n) * i128::from(*step);
                let past = if *step > 0 {
                    to > i128::from(*last)
                } else {
                    to < i128::from(*last)
                };
                if past {
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
                step,
                index,
                done,
            } => {
                if *done {
                    return false;
                }
                if let Some(slot) = bind.item.and_then(|s| locals.get_mut(s)) {
                    set_int(slot, *next);
                }
                match next.checked_add(*step) {
                    Some(n) if (*step > 0 && n <= *last) || (*step < 0 && n >= *last) => *next = n,
                    _ => *done = true,
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
        CodeKind::Assign(i) => frame.assigns.get(*i)?.as_ref(),
        _ => lookup_path(frame, code),
    }
}

pub(super) fn lookup_path<'a>(frame: &'a Frame, code: &'a Code) -> Option<&'a Value> {
    lookup_in(&frame.locals, &frame.assigns, code)
}

/// An assign as a render holds it: owned by a frame (`Option<Value>`), or borrowed from the
/// caller's assigns for a whole render without frames (`Option<&Value>`, no reference count).
pub(crate) trait Slot {
    /// The value, `None` when the assign was not given.
    fn value(&self) -> Option<&Value>;
}

impl Slot for Option<Value> {
    #[inline(always)]
    fn value(&self) -> Option<&Value> {
        self.as_ref()
    }
}

impl Slot for Option<&Value> {
    #[inline(always)]
    fn value(&self) -> Option<&Value> {
        *self
    }
}

/// [`lookup`] over a frame's variables and assigns taken apart (the plain loop holds them as
/// slices).
#[inline]
pub(super) fn lookup_in<'a, S: Slot>(
    locals: &'a [Value],
    assigns: &'a [S],
    code: &'a Code,
) -> Option<&'a Value> {
    match &code.kind {
        CodeKind::Local(s) => locals.get(*s),
        CodeKind::Lit(v) => Some(v),
        CodeKind::Assign(i) => assigns.get(*i)?.value(),
        CodeKind::Field(inner, key) => match lookup_in(locals, assigns, inner)? {
            Value::Map(m) => field(m, key),
            _ => None,
        },
        _ => None,
    }
}

/// The truthiness of a condition that is a plain path, or a comparison of two integer paths
/// (`i == 0`), without `eval`; `None` for anything else.
#[inline]
pub(super) fn fast_cond<S: Slot>(locals: &[Value], assigns: &[S], cond: &Code) -> Option<bool> {
    match &cond.kind {
        CodeKind::Binary(op, a, b) => {
            let (Value::Int(x), Value::Int(y)) =
                (leaf(locals, assigns, a)?, leaf(locals, assigns, b)?)
            else {
                return None;
            };
            int_cmp(*op, *x, *y)
        }
        _ => leaf(locals, assigns, cond).map(Value::is_truthy),
    }
}

/// `x op y` for a comparison `op`; `None` for any other operator.
#[inline(always)]
pub(super) fn int_cmp(op: BinOp, x: i64, y: i64) -> Option<bool> {
    Some(match op {
        BinOp::Eq => x == y,
        BinOp::Ne => x != y,
        BinOp::Lt => x < y,
        BinOp::Le => x <= y,
        BinOp::Gt => x > y,
        BinOp::Ge => x >= y,
        _ => return None,
    })
}

/// [`lookup_in`] with a variable or literal (a comparison's usual operands) read in line.
#[inline(always)]
fn leaf<'a, S: Slot>(locals: &'a [Value], assigns: &'a [S], code: &'a Code) -> Option<&'a Value> {
    match &code.kind {
        CodeKind::Local(s) => locals.get(*s),
        CodeKind::Lit(v) => Some(v),
        _ => lookup_in(locals, assigns, code),
    }
}

/// The value of `key` in `m`, searched with [`Str`]'s in-line comparison.
#[inline]
pub(super) fn field<'a>(m: &'a Map, key: &Str) -> Option<&'a Value> {
    FieldKey::new(key).get(m)
}

/// A field name with its in-line comparison key computed once (a plain loop reads the same
/// field of every element).
#[derive(Clone, Copy)]
pub(super) struct FieldKey<'p> {
    key: &'p Str,
    /// [`word8`] of the name, for names of up to 8 bytes.
    word: u64,
}

impl<'p> FieldKey<'p> {
    #[inline(always)]
    pub(super) fn new(key: &'p Str) -> FieldKey<'p> {
        FieldKey {
            key,
            word: word8(key.bytes()),
        }
    }

    /// A name decoded when compiling, its key already computed.
    #[inline(always)]
    pub(super) fn decoded(name: &'p FieldName) -> FieldKey<'p> {
        FieldKey {
            key: &name.key,
            word: name.word,
        }
    }

    /// True when `k` is this name.
    #[inline(always)]
    fn is(&self, k: &Str) -> bool {
        let (a, b) = (k.bytes(), self.key.bytes());
        a.len() == b.len()
            && if b.len() <= 8 {
                word8(a) == self.word
            } else {
                a == b
            }
    }

    /// The field's value in `m`. A map of one or two keys (a record: `%{name: .., score: ..}`)
    /// is read at its ends, without the tree search.
    #[inline(always)]
    pub(super) fn get<'a>(&self, m: &'a Map) -> Option<&'a Value> {
        if m.len() <= 2 {
            let (k, v) = m.first_key_value()?;
            if self.is(k) {
                return Some(v);
            }
            let (k, v) = m.last_key_value()?;
            return self.is(k).then_some(v);
        }
        m.get(self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_keys_find_what_the_tree_finds() {
        let names = [
            "",
            "a",
            "ab",
            "ab\0",
            "name",
            "nam",
            "score",
            "scoreboard",
            "scoreboarx",
            "z",
        ];
        for n in 0..=4 {
            for start in 0..names.len() {
                let m: Map = (0..n)
                    .map(|i| {
                        (
                            Str::from(names[(start + i * 3) % names.len()]),
                            Value::Int(i as i64),
                        )
                    })
                    .collect();
                for key in names {
                    let key = Str::from(key);
                    assert_eq!(FieldKey::new(&key).get(&m), m.get(&key), "{key:?} in {m:?}");
                }
            }
        }
    }

    #[test]
    fn range_loop_reaches_i64_max_without_overflow() {
        let mut l = Loop::range(i64::MAX - 1, i64::MAX, 1);
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
        let mut l = Loop::range(i64::MIN + 1, i64::MIN, -1);
        assert_eq!(l.remaining(), 2);
        assert!(l.advance(bind, &mut locals) && l.advance(bind, &mut locals));
        assert_eq!(locals, [Value::Int(i64::MIN), Value::Int(1)]);
        assert!(!l.advance(bind, &mut locals));
    }

    /// Every element of a stepped or descending loop, bound one by one.
    fn bound(mut l: Loop) -> Vec<i64> {
        let bind = Bind {
            item: Some(0),
            index: None,
        };
        let mut locals = vec![Value::Nil];
        let mut out = Vec::new();
        while l.advance(bind, &mut locals) {
            out.push(match locals[0] {
                Value::Int(i) => i,
                _ => unreachable!(),
            });
        }
        out
    }

    #[test]
    fn range_loops_count_by_their_step_in_either_direction() {
        assert_eq!(bound(Loop::range(3, 1, -1)), [3, 2, 1]);
        assert_eq!(bound(Loop::range(0, 10, 5)), [0, 5, 10]);
        assert_eq!(bound(Loop::range(0, 11, 5)), [0, 5, 10]);
        assert_eq!(bound(Loop::range(10, 0, -3)), [10, 7, 4, 1]);
        assert!(bound(Loop::range(1, 3, -1)).is_empty());
        assert!(bound(Loop::range(3, 1, 1)).is_empty());
        assert_eq!(
            bound(Loop::range(i64::MAX - 3, i64::MAX, 2)),
            [i64::MAX - 3, i64::MAX - 1]
        );
        for (first, last, step) in [(0, 10, 3), (10, 0, -4), (5, 5, 1), (5, 5, -1), (1, 0, 1)] {
            assert_eq!(
                Loop::range(first, last, step).remaining(),
                bound(Loop::range(first, last, step)).len() as u64
            );
            let mut skipped = Loop::range(first, last, step);
            skipped.skip(1);
            let all = bound(Loop::range(first, last, step));
            assert_eq!(bound(skipped), all.get(1..).unwrap_or_default());
        }
    }
}
