//! [`List`], what [`Value::List`] holds: a shared list that `acc ++ tail` may extend in place
//! while nothing else holds its buffer, so `Enum.reduce(xs, [], fn x, acc -> acc ++ [x] end)`
//! is amortised linear rather than a copy of the whole list per element.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::value::Value;

/// A shared list of values: a view of the first `len` elements of a buffer. Views made by
/// `acc ++ tail` in place share one buffer; the elements past a view's end are not its own.
#[derive(Clone, Default)]
pub struct List {
    buf: Arc<Vec<Value>>,
    len: usize,
}

impl List {
    /// The elements, as a slice (also what `Deref` gives).
    pub fn as_slice(&self) -> &[Value] {
        // `len` never exceeds the buffer's length: a view is made of a buffer at least as
        // long, and a buffer only grows while it is unique (no view of it exists).
        self.buf.get(..self.len).unwrap_or_default()
    }

    /// The address of the shared buffer: with the length, the list's identity (views of one
    /// buffer share it; it does not move when the buffer grows).
    pub(crate) fn address(&self) -> usize {
        Arc::as_ptr(&self.buf) as usize
    }

    /// `self ++ tail`, written into this list's buffer when nothing else holds it: returns the
    /// whole list, a view of its first `self.len()` elements (what `self` was) and the bytes
    /// newly allocated (the grown buffer's capacity in elements' bytes, 0 when it had room), for
    /// the memory budget. `Err(self)` when the buffer is shared: the caller copies.
    pub(crate) fn append_unique(mut self, tail: &[Value]) -> Result<(List, List, usize), List> {
        let len = self.len;
        let Some(buf) = Arc::get_mut(&mut self.buf) else {
            return Err(self);
        };
        // Elements past the view belong to no one once the buffer is unique.
        buf.truncate(len);
        let before = buf.capacity();
        buf.reserve(tail.len());
        let grown = if buf.capacity() > before {
            buf.capacity() * std::mem::size_of::<Value>()
        } else {
            0
        };
        buf.extend_from_slice(tail);
        let whole = List {
            len: buf.len(),
            buf: Arc::clone(&self.buf),
        };
        Ok((whole, self, grown))
    }
}

impl Deref for List {
    type Target = [Value];

    fn deref(&self) -> &[Value] {
        self.as_slice()
    }
}

impl From<Vec<Value>> for List {
    fn from(v: Vec<Value>) -> List {
        List {
            len: v.len(),
            buf: Arc::new(v),
        }
    }
}

impl FromIterator<Value> for List {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> List {
        List::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_unique_grows_in_place_and_keeps_the_prefix() {
        let mut list = List::from(vec![Value::Int(0)]);
        let mut allocs = 0;
        for i in 1..1000 {
            let (whole, prefix, grown) = list.append_unique(&[Value::Int(i)]).unwrap();
            assert_eq!(prefix.len(), i as usize);
            assert_eq!(whole.len(), i as usize + 1);
            assert_eq!(whole.address(), prefix.address(), "one buffer");
            if grown > 0 {
                allocs += 1;
            }
            drop(prefix);
            list = whole;
        }
        assert!(allocs < 20, "{allocs} reallocations: not doubling");
        assert_eq!(list.get(999), Some(&Value::Int(999)));
    }

    #[test]
    fn a_shared_buffer_is_copied_and_a_kept_view_does_not_change() {
        let list = List::from(vec![Value::Int(1), Value::Int(2)]);
        let other = list.clone();
        let back = list.append_unique(&[Value::Int(3)]).unwrap_err();
        assert_eq!(back, other);
        drop(other);
        let (whole, prefix, _) = back.append_unique(&[Value::Int(3)]).unwrap();
        // The prefix view holds the buffer: the next append copies, and the view still reads
        // what it read.
        let again = whole.append_unique(&[Value::Int(4)]).unwrap_err();
        assert_eq!(prefix.as_slice(), &[Value::Int(1), Value::Int(2)]);
        assert_eq!(again.len(), 3);
        // Once the view is gone, appending to the shorter view drops what lay past it.
        drop(again);
        let (whole, _, _) = prefix.append_unique(&[Value::Int(9)]).unwrap();
        assert_eq!(
            whole.as_slice(),
            &[Value::Int(1), Value::Int(2), Value::Int(9)]
        );
    }
}
