//! The memory budget of a render ([`Limits::max_memory`](crate::Limits::max_memory)) and the
//! depth bound on values built while rendering ([`MAX_VALUE_DEPTH`]).
//!
//! Memory: every place that builds a value (a string, list, tuple or map: `<>`, `++`, a range
//! made a list, interpolation, literals, the built-in and `Enum` functions) charges its size
//! here *before* allocating when the size is known up front (`String.duplicate(s, n)` charges
//! `len(s) * n`), else right after building from inputs already charged. The accounting is
//! approximate (a list costs its length times the size of a [`Value`], a map entry a fixed
//! [`MAP_ENTRY_BYTES`]) and monotonic: frees are not credited, so the budget bounds the bytes
//! allocated, a bound on the bytes live. The count lives in a thread-local for the duration of
//! [`Vm::run`](crate::vm): the built-in functions are pure functions of values with no context
//! to pass a budget through, and a render runs on one thread at a time (a stream's chunks may
//! move between threads; each chunk sets it again). Outside a render there is no budget.
//!
//! Depth: a value nested deeper than [`MAX_VALUE_DEPTH`] would overflow the stack when it is
//! dropped, compared, printed or flattened (all recursive). Only `Enum.reduce` feeds a value
//! back into itself a number of times the data decides; every other construct adds a depth
//! bounded by the template's own size (expressions are at most 64 deep). So the accumulator is
//! measured after each call ([`Depth`]), and a render that nests deeper fails.

use std::cell::Cell;
use std::collections::HashMap;

#[cfg(test)]
use crate::value::Map;
use crate::value::Value;
#[cfg(test)]
use std::sync::Arc;

/// Deepest nesting of a value built by `Enum.reduce`: 1,000 levels. Dropping, comparing,
/// converting to a string and flattening a value recurse once per level (output does not: it
/// walks lists with a stack of its own). Measured in an unoptimized build, comparing took
/// between 650 bytes and 1.3 KB of stack a level, so 1,000 levels fit the 2 MiB of a reload
/// thread with room for the render around them; optimized, `tests/render_memory.rs` renders
/// a value at the bound on a 256 KiB thread. Real data nests a handful of levels.
pub const MAX_VALUE_DEPTH: usize = 1_000;

/// What a map entry is charged: its key, its value and a share of a B-tree node.
pub(crate) const MAP_ENTRY_BYTES: usize = size_of::<crate::value::Str>() + size_of::<Value>() + 16;

/// What each list or tuple element is charged.
pub(crate) const ELEMENT_BYTES: usize = size_of::<Value>();

thread_local! {
    /// Bytes left to the render running on this thread, and whether a charge failed since the
    /// last [`take_exceeded`]. No render: unlimited.
    static LEFT: Cell<(u64, bool)> = const { Cell::new((u64::MAX, false)) };
}

/// The budget of one [`Vm::run`](crate::vm): sets this thread's count to `left` and puts back
/// the one it replaced when dropped (a render started inside another's native function keeps
/// its own count).
pub(crate) struct Scope {
    saved: (u64, bool),
}

impl Scope {
    /// Starts counting from `left` bytes.
    pub(crate) fn enter(left: u64) -> Scope {
        Scope {
            saved: LEFT.replace((left, false)),
        }
    }

    /// Bytes left now.
    pub(crate) fn left(&self) -> u64 {
        LEFT.get().0
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        LEFT.set(self.saved);
    }
}

/// Bytes left to the current render (`u64::MAX` outside one).
pub(crate) fn left() -> u64 {
    LEFT.get().0
}

/// Sets the bytes left (after a partial rendered by a VM of its own spent some).
pub(crate) fn set_left(left: u64) {
    LEFT.set((left, LEFT.get().1));
}

/// Charges `bytes` to the current render; `Err` (and the exceeded mark) when they do not fit,
/// in which case nothing should be allocated.
#[inline]
pub(crate) fn charge(bytes: usize) -> Result<(), Exceeded> {
    let (left, _) = LEFT.get();
    match left.checked_sub(bytes as u64) {
        Some(rest) => {
            LEFT.set((rest, false));
            Ok(())
        }
        None => {
            LEFT.set((0, true));
            Err(Exceeded)
        }
    }
}

/// [`charge`] for a built-in function, whose errors are strings: the text is replaced by the
/// limit error where the evaluator sees [`take_exceeded`].
#[inline]
pub(crate) fn charge_str(bytes: usize) -> Result<(), String> {
    charge(bytes).map_err(|_| "memory limit".to_owned())
}

/// Whether a charge failed since the last call (and clears the mark).
pub(crate) fn take_exceeded() -> bool {
    let (left, exceeded) = LEFT.get();
    LEFT.set((left, false));
    exceeded
}

/// A charge that did not fit.
#[derive(Debug)]
pub(crate) struct Exceeded;

/// The bytes a value's outer layer takes: a string's bytes, a list's or tuple's elements, a
/// map's entries (what building it allocated, its elements being built before it and charged
/// then, or shared).
pub(crate) fn shallow_size(v: &Value) -> usize {
    match v {
        Value::Str(s) | Value::Atom(s) => s.len(),
        Value::List(l) => l.len().saturating_mul(ELEMENT_BYTES),
        Value::Tuple(t) => t.len().saturating_mul(ELEMENT_BYTES),
        Value::Map(m) => m.len().saturating_mul(MAP_ENTRY_BYTES),
        Value::Safe(h) => h.len(),
        _ => 0,
    }
}

/// The heap address of a value's outer layer and its length, if it has one: the identity
/// [`Depth`] remembers (lists of different lengths may share a buffer, see [`crate::List`]).
fn address(v: &Value) -> Option<(usize, usize)> {
    match v {
        Value::List(l) => Some((l.address(), l.len())),
        Value::Tuple(t) => Some((t.as_ptr() as usize, t.len())),
        Value::Map(m) => Some((std::sync::Arc::as_ptr(m) as usize, 0)),
        _ => None,
    }
}

/// Measures the depth of successive accumulators of `Enum.reduce` without walking again what
/// the previous one held: it remembers the height of each container it measured, by address,
/// and a container met again is not descended (so `[acc]` costs one step, `acc ++ [x]` one per
/// element, as the copy did; a container shared within the value is walked once). The
/// addresses stay valid because the accumulator they were read from is kept alive by the
/// caller while the next one is measured, and the memory is replaced with each measure's own.
/// A list extended in place (`acc ++ [x]`, see [`crate::List`]) shares its buffer with the
/// previous accumulator, whose elements it starts with: when the caller shows that accumulator
/// still alive (the parameter holding it), only the new elements are walked.
/// Iterative (an explicit stack, at most `limit` deep): measuring needs no thread stack.
#[derive(Default)]
pub(crate) struct Depth {
    known: HashMap<(usize, usize), usize>,
    /// The last list measured: its buffer's address, length and height.
    last_list: Option<(usize, usize, usize)>,
}

/// A container being walked: its address, height so far and the children left.
struct Walk<'v> {
    address: (usize, usize),
    height: usize,
    children: Children<'v>,
}

enum Children<'v> {
    Items(std::slice::Iter<'v, Value>),
    Values(std::collections::btree_map::Values<'v, crate::value::Str, Value>),
}

impl<'v> Children<'v> {
    fn of(v: &'v Value) -> Children<'v> {
        match v {
            Value::Map(m) => Children::Values(m.values()),
            Value::List(l) => Children::Items(l.iter()),
            Value::Tuple(t) => Children::Items(t.iter()),
            _ => Children::Items([].iter()),
        }
    }

    fn next(&mut self) -> Option<&'v Value> {
        match self {
            Children::Items(i) => i.next(),
            Children::Values(i) => i.next(),
        }
    }
}

impl Depth {
    /// True when `v` nests deeper than `limit` containers (`[[1]]` is 2 deep). `held` is what
    /// the parameter bound to the previous accumulator holds now, if anything.
    pub(crate) fn exceeds(&mut self, v: &Value, limit: usize, held: Option<&Value>) -> bool {
        let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
        // The previous list is alive (so its buffer's first elements are as measured) only if
        // the parameter still holds a view of it, of its length.
        let alive = matches!((held, self.last_list), (Some(Value::List(l)), Some((at, len, _)))
            if l.address() == at && l.len() == len);
        if !alive {
            self.last_list = None;
        }
        let height = self.walk(v, limit, &mut seen);
        self.known = if height.is_none() {
            HashMap::new()
        } else {
            seen
        };
        self.last_list = match (v, height) {
            (Value::List(l), Some(h)) => Some((l.address(), l.len(), h)),
            _ => None,
        };
        height.is_none()
    }

    /// `v`'s height (0 for a scalar), or `None` past `limit`.
    fn walk(
        &self,
        v: &Value,
        limit: usize,
        seen: &mut HashMap<(usize, usize), usize>,
    ) -> Option<usize> {
        let Some(root) = address(v) else {
            return Some(0);
        };
        if let Some(&h) = self.known.get(&root) {
            seen.insert(root, h);
            return (h <= limit).then_some(h);
        }
        let mut first = Walk {
            address: root,
            height: 1,
            children: Children::of(v),
        };
        if let (Value::List(l), Some((at, len, h))) = (v, self.last_list)
            && l.address() == at
            && l.len() >= len
        {
            // The previous list's elements are this one's first: alive in it, unchanged.
            first.height = h;
            first.children = Children::Items(l.get(len..).unwrap_or_default().iter());
        }
        let mut stack = vec![first];
        loop {
            let top = stack.last_mut()?;
            match top.children.next() {
                Some(c) => {
                    let Some(a) = address(c) else { continue };
                    if let Some(&h) = self.known.get(&a).or_else(|| seen.get(&a)) {
                        seen.insert(a, h);
                        top.height = top.height.max(h + 1);
                        if top.height > limit {
                            return None;
                        }
                    } else if stack.len() >= limit {
                        return None;
                    } else {
                        stack.push(Walk {
                            address: a,
                            height: 1,
                            children: Children::of(c),
                        });
                    }
                }
                None => {
                    let done = stack.pop()?;
                    seen.insert(done.address, done.height);
                    match stack.last_mut() {
                        Some(parent) => {
                            parent.height = parent.height.max(done.height + 1);
                            if parent.height > limit {
                                return None;
                            }
                        }
                        None => return Some(done.height),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list::List;

    fn nest(n: usize) -> Value {
        (0..n).fold(Value::Int(1), |v, _| Value::list([v]))
    }

    #[test]
    fn depth_counts_containers_and_stops_past_the_limit() {
        let mut d = Depth::default();
        assert!(!d.exceeds(&Value::Int(1), 0, None));
        assert!(!d.exceeds(&nest(3), 3, None));
        assert!(Depth::default().exceeds(&nest(4), 3, None));
        let mut m = Map::new();
        m.insert("a".into(), nest(2));
        assert!(!Depth::default().exceeds(&Value::Map(Arc::new(m.clone())), 3, None));
        assert!(Depth::default().exceeds(&Value::Map(Arc::new(m)), 2, None));
    }

    #[test]
    fn a_list_extended_in_place_has_only_its_new_elements_walked_and_they_count() {
        let mut d = Depth::default();
        let deep = |n: usize| (0..n).fold(Value::Int(0), |v, _| Value::list([v]));
        let mut acc = List::from(vec![deep(3)]);
        assert!(!d.exceeds(&Value::List(acc.clone()), 10, None));
        for _ in 0..100 {
            let (whole, prefix, _) = acc.append_unique(&[deep(2)]).unwrap();
            let held = Value::List(prefix);
            assert!(!d.exceeds(&Value::List(whole.clone()), 10, Some(&held)));
            drop(held);
            acc = whole;
        }
        // A deep element appended in place is measured, the old ones taken as known.
        let (whole, prefix, _) = acc.append_unique(&[deep(10)]).unwrap();
        let held = Value::List(prefix);
        assert!(d.exceeds(&Value::List(whole), 10, Some(&held)));
        // Without the previous list shown alive, everything is walked again.
        let mut d = Depth::default();
        let first = List::from(vec![deep(10)]);
        assert!(d.exceeds(&Value::List(first), 10, None));
    }

    #[test]
    fn a_remembered_accumulator_is_not_walked_again() {
        let mut d = Depth::default();
        let mut acc = Value::list([]);
        for i in 1..=50 {
            let next = Value::list([acc.clone(), acc.clone()]);
            assert!(!d.exceeds(&next, 51, None), "{i}");
            assert_eq!(d.known.len(), 2);
            acc = next;
        }
        assert!(d.exceeds(&Value::list([acc]), 51, None));
    }
}
