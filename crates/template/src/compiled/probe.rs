//! `nil` for typed values of any type: what the derive's generated code calls for `if @user` and
//! `@user.name` when `user` is an `Option` of a struct (which has no [`ToScalar`] impl).
//!
//! Dispatch is by autoref specialization: generated code calls a method on `&&&Probe(&v)`
//! (truthiness) or `&&Probe(&v)` (a key's base), and method lookup picks the first impl whose
//! type matches at the fewest dereferences: a value with scalar truthiness (`bool`,
//! `Option<bool>`, strings, numbers) tests as a scalar; another `Option` is `nil` when `None`;
//! anything else (a struct, a list) is true, as every value but `nil` and `false` is in Elixir.
//! This works on the concrete types of the generated code; in code generic over a type
//! parameter, the parameter counts as "anything else".
//!
//! [`ToScalar`]: super::ToScalar

use super::ops::Truthy;
use crate::error::{Error, ErrorKind};

/// A reference to a value, for the dispatch above.
#[doc(hidden)]
#[derive(Debug)]
pub struct Probe<'a, T: ?Sized>(pub &'a T);

/// Truthiness of a value with scalar truthiness (first choice).
#[doc(hidden)]
pub trait TruthyScalar {
    fn __truthy(&self) -> bool;
}

impl<T: Truthy + ?Sized> TruthyScalar for &&Probe<'_, T> {
    #[inline(always)]
    fn __truthy(&self) -> bool {
        self.0.truthy()
    }
}

/// Truthiness of an `Option` of a non-scalar (second choice): `None` is `nil`, a value is true.
#[doc(hidden)]
pub trait TruthyOption {
    fn __truthy(&self) -> bool;
}

impl<T> TruthyOption for &Probe<'_, Option<T>> {
    #[inline(always)]
    fn __truthy(&self) -> bool {
        self.0.is_some()
    }
}

/// A loop variable: a reference to the element.
impl<T> TruthyOption for &Probe<'_, &Option<T>> {
    #[inline(always)]
    fn __truthy(&self) -> bool {
        self.0.is_some()
    }
}

/// Truthiness of anything else (last choice): true.
#[doc(hidden)]
pub trait TruthyAny {
    fn __truthy(&self) -> bool;
}

impl<T: ?Sized> TruthyAny for Probe<'_, T> {
    #[inline(always)]
    fn __truthy(&self) -> bool {
        true
    }
}

/// The value whose field `key` is read, from an `Option` (first choice): the runtime engine's
/// error on `None`, as for `nil.key`.
#[doc(hidden)]
pub trait BaseOption<'a> {
    type Target: ?Sized;
    fn __base(&self, key: &str) -> Result<&'a Self::Target, Error>;
}

impl<'a, T> BaseOption<'a> for &Probe<'a, Option<T>> {
    type Target = T;
    #[inline(always)]
    fn __base(&self, key: &str) -> Result<&'a T, Error> {
        some_or_nil_key(self.0.as_ref(), key)
    }
}

/// A loop variable: a reference to the element.
impl<'a, T> BaseOption<'a> for &Probe<'a, &Option<T>> {
    type Target = T;
    #[inline(always)]
    fn __base(&self, key: &str) -> Result<&'a T, Error> {
        some_or_nil_key(self.0.as_ref(), key)
    }
}

/// The engine's error for `nil.key`.
fn some_or_nil_key<'a, T>(v: Option<&'a T>, key: &str) -> Result<&'a T, Error> {
    v.ok_or_else(|| {
        Error::new(
            ErrorKind::TypeMismatch,
            format!("cannot read key `{key}` of nil"),
        )
    })
}

/// The value whose field is read, from anything else (last choice): the value itself.
#[doc(hidden)]
pub trait BaseAny<'a> {
    type Target: ?Sized;
    fn __base(&self, key: &str) -> Result<&'a Self::Target, Error>;
}

impl<'a, T: ?Sized> BaseAny<'a> for Probe<'a, T> {
    type Target = T;
    #[inline(always)]
    fn __base(&self, _key: &str) -> Result<&'a T, Error> {
        Ok(self.0)
    }
}

// The borrows clippy calls needless are the dispatch, written as the derive writes them.
#[cfg(test)]
#[allow(clippy::needless_borrow)]
mod tests {
    use super::*;

    struct User {
        name: &'static str,
    }

    #[test]
    fn truthiness_picks_the_scalar_rule_then_option_then_true() {
        let (some_false, none_bool) = (Some(false), None::<bool>);
        let (some_user, no_user) = (Some(User { name: "a" }), None::<User>);
        let empty: Vec<u8> = Vec::new();
        assert!(!(&&&Probe(&false)).__truthy());
        assert!(!(&&&Probe(&some_false)).__truthy());
        assert!(!(&&&Probe(&none_bool)).__truthy());
        assert!((&&&Probe(&"")).__truthy());
        assert!((&&&Probe(&some_user)).__truthy());
        assert!(!(&&&Probe(&no_user)).__truthy());
        assert!((&&&Probe(&User { name: "b" })).__truthy());
        assert!((&&&Probe(&empty)).__truthy());
        assert!(!(&&&Probe(&&no_user)).__truthy());
        assert!((&&&Probe(&&some_user)).__truthy());
    }

    #[test]
    fn a_key_of_none_is_the_engines_error() {
        let (some_user, no_user) = (Some(User { name: "a" }), None::<User>);
        assert_eq!((&&Probe(&some_user)).__base("name").unwrap().name, "a");
        let e = (&&Probe(&no_user)).__base("name").err().unwrap();
        assert_eq!(e.kind(), ErrorKind::TypeMismatch);
        assert_eq!(e.to_string(), "cannot read key `name` of nil");
        assert_eq!((&&Probe(&&some_user)).__base("name").unwrap().name, "a");
        assert!((&&Probe(&&no_user)).__base("name").is_err());
        let user = User { name: "c" };
        assert_eq!((&&Probe(&user)).__base("name").unwrap().name, "c");
    }
}
