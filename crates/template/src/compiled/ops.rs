//! Operators and loops of compiled templates over typed fields: comparisons with Elixir's rules
//! (as the runtime engine applies them to the same values), truthiness, and iteration.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::ops::{describe, equal};
use crate::value::{Str, Value};

/// A value as the comparison operators see it.
#[derive(Debug, Clone, Copy)]
pub enum Scalar<'a> {
    /// `nil` (`None`).
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(&'a str),
    /// Any other [`Value`] (atoms, lists, maps...).
    Other(&'a Value),
}

impl Scalar<'_> {
    fn to_value(self) -> Cow<'static, Value> {
        Cow::Owned(match self {
            Scalar::Nil => Value::Nil,
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::Int(i) => Value::Int(i),
            Scalar::Float(x) => Value::Float(x),
            Scalar::Str(s) => Value::str(s),
            Scalar::Other(v) => v.clone(),
        })
    }

    fn describe(self) -> String {
        describe(&self.to_value())
    }
}

/// A value the comparison operators and `if` take: numbers, strings, booleans, `Option`,
/// [`Value`].
pub trait ToScalar {
    /// The value as the operators see it.
    fn scalar(&self) -> Scalar<'_>;
}

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl ToScalar for $t {
            #[inline(always)]
            fn scalar(&self) -> Scalar<'_> {
                Scalar::Int(*self as i64)
            }
        }
    )*};
}
int_scalar!(i8, i16, i32, i64, isize, u8, u16, u32);

macro_rules! wide_scalar {
    ($($t:ty),*) => {$(
        impl ToScalar for $t {
            /// Past `i64::MAX` a float, as `Value::from_serialize` converts it.
            #[inline(always)]
            fn scalar(&self) -> Scalar<'_> {
                match i64::try_from(*self) {
                    Ok(i) => Scalar::Int(i),
                    Err(_) => Scalar::Float(*self as f64),
                }
            }
        }
    )*};
}
wide_scalar!(u64, usize);

impl ToScalar for f64 {
    fn scalar(&self) -> Scalar<'_> {
        Scalar::Float(*self)
    }
}

impl ToScalar for f32 {
    fn scalar(&self) -> Scalar<'_> {
        Scalar::Float(f64::from(*self))
    }
}

impl ToScalar for bool {
    #[inline(always)]
    fn scalar(&self) -> Scalar<'_> {
        Scalar::Bool(*self)
    }
}

impl ToScalar for str {
    fn scalar(&self) -> Scalar<'_> {
        Scalar::Str(self)
    }
}

impl ToScalar for String {
    fn scalar(&self) -> Scalar<'_> {
        Scalar::Str(self)
    }
}

impl ToScalar for Cow<'_, str> {
    fn scalar(&self) -> Scalar<'_> {
        Scalar::Str(self)
    }
}

impl ToScalar for Str {
    fn scalar(&self) -> Scalar<'_> {
        Scalar::Str(self.as_str())
    }
}

impl ToScalar for Value {
    fn scalar(&self) -> Scalar<'_> {
        match self {
            Value::Nil => Scalar::Nil,
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Int(i) => Scalar::Int(*i),
            Value::Float(x) => Scalar::Float(*x),
            Value::Str(s) => Scalar::Str(s.as_str()),
            other => Scalar::Other(other),
        }
    }
}

impl<T: ToScalar> ToScalar for Option<T> {
    #[inline(always)]
    fn scalar(&self) -> Scalar<'_> {
        match self {
            Some(v) => v.scalar(),
            None => Scalar::Nil,
        }
    }
}

impl ToScalar for Scalar<'_> {
    #[inline(always)]
    fn scalar(&self) -> Scalar<'_> {
        *self
    }
}

macro_rules! deref_scalar {
    ($($t:ty),*) => {$(
        impl<T: ToScalar + ?Sized> ToScalar for $t {
            #[inline(always)]
            fn scalar(&self) -> Scalar<'_> {
                (**self).scalar()
            }
        }
    )*};
}
deref_scalar!(&T, &mut T, Box<T>, Rc<T>, Arc<T>);

/// `==` as in Elixir: `1 == 1.0`; values of different types are different.
#[inline]
pub fn eq(a: Scalar<'_>, b: Scalar<'_>) -> bool {
    match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => x == y,
        (Scalar::Str(x), Scalar::Str(y)) => x == y,
        (Scalar::Bool(x), Scalar::Bool(y)) => x == y,
        (Scalar::Nil, Scalar::Nil) => true,
        (Scalar::Int(x), Scalar::Float(y)) | (Scalar::Float(y), Scalar::Int(x)) => x as f64 == y,
        (Scalar::Float(x), Scalar::Float(y)) => x == y,
        (Scalar::Other(_), _) | (_, Scalar::Other(_)) => equal(&a.to_value(), &b.to_value()),
        _ => false,
    }
}

/// `===`: like `==`, but `1 !== 1.0`.
#[inline]
pub fn strict_eq(a: Scalar<'_>, b: Scalar<'_>) -> bool {
    match (a, b) {
        (Scalar::Int(_), Scalar::Float(_)) | (Scalar::Float(_), Scalar::Int(_)) => false,
        (Scalar::Other(_), _) | (_, Scalar::Other(_)) => *a.to_value() == *b.to_value(),
        _ => eq(a, b),
    }
}

/// `<`, `<=`, `>`, `>=` (`op` is the symbol): numbers with numbers, strings with strings;
/// anything else is a type mismatch, as in the runtime engine.
#[inline]
pub fn compare(op: &str, a: Scalar<'_>, b: Scalar<'_>) -> Result<bool, Error> {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(&y)),
        (Scalar::Str(x), Scalar::Str(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Scalar::Int(x), Scalar::Float(y)) => (x as f64).partial_cmp(&y),
        (Scalar::Float(x), Scalar::Int(y)) => x.partial_cmp(&(y as f64)),
        (Scalar::Float(x), Scalar::Float(y)) => x.partial_cmp(&y),
        _ => {
            return Err(Error::new(
                ErrorKind::TypeMismatch,
                format!(
                    "`{op}` cannot combine {} and {}",
                    a.describe(),
                    b.describe()
                ),
            ));
        }
    };
    let Some(ord) = ord else {
        return Ok(false);
    };
    Ok(match op {
        "<" => ord.is_lt(),
        "<=" => ord.is_le(),
        ">" => ord.is_gt(),
        _ => ord.is_ge(),
    })
}

/// A strict boolean operand (`and`, `or`, `not`).
pub fn strict_bool(op: &str, v: Scalar<'_>) -> Result<bool, Error> {
    match v {
        Scalar::Bool(b) => Ok(b),
        other => Err(Error::new(
            ErrorKind::TypeMismatch,
            format!("`{op}` expects a boolean, not {}", other.describe()),
        )),
    }
}

/// Truthiness (`if`, `&&`, `||`, `!`): everything but `nil` and `false` is true.
pub trait Truthy {
    /// False for `nil` (`None`) and `false`.
    fn truthy(&self) -> bool;
}

impl<T: ToScalar + ?Sized> Truthy for T {
    #[inline(always)]
    fn truthy(&self) -> bool {
        !matches!(self.scalar(), Scalar::Nil | Scalar::Bool(false))
    }
}

/// A collection a compiled `for` walks by reference. Resuming a stream skips to an element with
/// `Iterator::nth` (constant time on slices).
pub trait Iterate {
    /// An element, as the loop variable sees it.
    type Item<'a>
    where
        Self: 'a;
    /// The iterator.
    type Iter<'a>: Iterator<Item = Self::Item<'a>>
    where
        Self: 'a;
    /// Iterates the elements in order.
    fn iterate(&self) -> Self::Iter<'_>;
}

impl<T> Iterate for [T] {
    type Item<'a>
        = &'a T
    where
        T: 'a;
    type Iter<'a>
        = std::slice::Iter<'a, T>
    where
        T: 'a;
    #[inline(always)]
    fn iterate(&self) -> Self::Iter<'_> {
        self.iter()
    }
}

impl<T> Iterate for Vec<T> {
    type Item<'a>
        = &'a T
    where
        T: 'a;
    type Iter<'a>
        = std::slice::Iter<'a, T>
    where
        T: 'a;
    #[inline(always)]
    fn iterate(&self) -> Self::Iter<'_> {
        self.iter()
    }
}

impl<T, const N: usize> Iterate for [T; N] {
    type Item<'a>
        = &'a T
    where
        T: 'a;
    type Iter<'a>
        = std::slice::Iter<'a, T>
    where
        T: 'a;
    fn iterate(&self) -> Self::Iter<'_> {
        self.iter()
    }
}

impl<T> Iterate for VecDeque<T> {
    type Item<'a>
        = &'a T
    where
        T: 'a;
    type Iter<'a>
        = std::collections::vec_deque::Iter<'a, T>
    where
        T: 'a;
    fn iterate(&self) -> Self::Iter<'_> {
        self.iter()
    }
}

macro_rules! deref_iterate {
    ($($t:ty),*) => {$(
        impl<T: Iterate + ?Sized> Iterate for $t {
            type Item<'a>
                = T::Item<'a>
            where
                Self: 'a;
            type Iter<'a>
                = T::Iter<'a>
            where
                Self: 'a;
            #[inline(always)]
            fn iterate(&self) -> Self::Iter<'_> {
                (**self).iterate()
            }
        }
    )*};
}
deref_iterate!(&T, &mut T, Box<T>, Rc<T>, Arc<T>);

/// Iterates `x` from element `skip` on (0 for a fresh loop, the resume point of a stream).
#[inline(always)]
pub fn iter_from<T: Iterate + ?Sized>(x: &T, skip: usize) -> T::Iter<'_> {
    let mut it = x.iterate();
    if skip > 0 {
        it.nth(skip - 1);
    }
    it
}

/// `first..last` in a `for`: counted upwards, or downwards when `first > last`, as Elixir
/// counts it (and the engine).
pub fn range(first: Scalar<'_>, last: Scalar<'_>) -> Result<Counted, Error> {
    let bound = |s: Scalar<'_>| match s {
        Scalar::Int(i) => Ok(i),
        other => Err(Error::new(
            ErrorKind::TypeMismatch,
            format!(
                "expected an integer for a range bound, not {}",
                other.describe()
            ),
        )),
    };
    let (first, last) = (bound(first)?, bound(last)?);
    Ok(Counted {
        next: first,
        last,
        down: first > last,
        done: false,
    })
}

/// [`range`] from element `skip` on.
#[inline]
pub fn range_from(first: Scalar<'_>, last: Scalar<'_>, skip: usize) -> Result<Counted, Error> {
    let mut r = range(first, last)?;
    if skip > 0 {
        r.nth(skip - 1);
    }
    Ok(r)
}

/// Elements left in a range (from [`range_from`]), without overflow at the `i64` edges.
#[inline]
pub fn range_len(r: &Counted) -> u64 {
    if r.done {
        0
    } else {
        u64::try_from((i128::from(r.last) - i128::from(r.next)).abs() + 1).unwrap_or(u64::MAX)
    }
}

/// The integers of a `for` over `first..last`, one by one towards `last` (inclusive).
#[derive(Debug, Clone)]
pub struct Counted {
    next: i64,
    last: i64,
    down: bool,
    done: bool,
}

impl Iterator for Counted {
    type Item = i64;

    #[inline]
    fn next(&mut self) -> Option<i64> {
        if self.done {
            return None;
        }
        let i = self.next;
        if i == self.last {
            self.done = true;
        } else if self.down {
            self.next -= 1;
        } else {
            self.next += 1;
        }
        Some(i)
    }

    fn nth(&mut self, n: usize) -> Option<i64> {
        let left = range_len(self);
        if n as u64 >= left {
            self.done = true;
            return None;
        }
        // Within the range: the element `n` steps on fits in an i64.
        let n = n as i64;
        self.next = if self.down {
            self.next - n
        } else {
            self.next + n
        };
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(range_len(self)).ok();
        (n.unwrap_or(usize::MAX), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_follow_elixir() {
        assert!(eq(1i64.scalar(), 1.0f64.scalar()));
        assert!(!strict_eq(1i64.scalar(), 1.0f64.scalar()));
        assert!(!eq(1i64.scalar(), "1".scalar()));
        assert!(eq(None::<i64>.scalar(), Scalar::Nil));
        assert!(compare("<", 1u8.scalar(), 2.5f64.scalar()).unwrap());
        assert!(compare(">=", "b".scalar(), "a".scalar()).unwrap());
        let e = compare("<", 1i64.scalar(), "a".scalar()).unwrap_err();
        assert_eq!(
            e.message(),
            "`<` cannot combine the integer 1 and the string \"a\""
        );
        assert!(!Some(false).truthy() && !None::<i64>.truthy() && 0i64.truthy());
    }

    #[test]
    fn loops_resume_in_place() {
        let v = vec![1, 2, 3, 4];
        assert_eq!(iter_from(&v, 2).copied().collect::<Vec<_>>(), [3, 4]);
        let r = range_from(Scalar::Int(1), Scalar::Int(5), 3).unwrap();
        assert_eq!(r.collect::<Vec<_>>(), [4, 5]);
        assert_eq!(
            range(Scalar::Int(2), Scalar::Int(-1))
                .unwrap()
                .collect::<Vec<_>>(),
            [2, 1, 0, -1]
        );
        let r = range_from(Scalar::Int(5), Scalar::Int(1), 2).unwrap();
        assert_eq!((range_len(&r), r.collect::<Vec<_>>()), (3, vec![3, 2, 1]));
        let mut r = range(Scalar::Int(i64::MAX), Scalar::Int(i64::MIN)).unwrap();
        assert_eq!(range_len(&r), u64::MAX);
        assert_eq!(r.nth(1), Some(i64::MAX - 1));
        assert_eq!(r.nth(usize::MAX), None);
        let mut r = range(Scalar::Int(i64::MIN), Scalar::Int(i64::MAX)).unwrap();
        assert_eq!(range_len(&r), u64::MAX);
        r.nth(5);
        assert_eq!(range_len(&r), u64::MAX - 5);
        let mut r = range(Scalar::Int(3), Scalar::Int(3)).unwrap();
        assert_eq!(range_len(&r), 1);
        r.next();
        assert_eq!(range_len(&r), 0);
    }
}
