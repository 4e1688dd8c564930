//! Functions registered from Rust ([`crate::EngineBuilder::function`]): a closure with typed
//! arguments, called from templates by name. Arguments are converted with [`FromValue`] and
//! the result with [`IntoResult`]; a conversion error or an `Err` returned by the closure
//! becomes a render error located at the call.

use std::fmt;
use std::sync::Arc;

use crate::ops::describe;
use crate::value::{Str, Value};

/// The type-erased form of a registered function.
type Erased = dyn Fn(&[Value]) -> Result<Value, String> + Send + Sync;

/// A function registered from Rust: its name, arity and body.
#[derive(Clone)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) arity: usize,
    pub(crate) call: Arc<Erased>,
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.name, self.arity)
    }
}

/// A template value converted to a Rust argument type; `Err` says what was expected.
pub trait FromValue: Sized {
    /// Converts, or says why not (e.g. "expected an integer, not the string \"x\"").
    fn from_value(v: &Value) -> Result<Self, String>;
}

fn wrong(what: &str, v: &Value) -> String {
    format!("expected {what}, not {}", describe(v))
}

impl FromValue for Value {
    fn from_value(v: &Value) -> Result<Self, String> {
        Ok(v.clone())
    }
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i),
            other => Err(wrong("an integer", other)),
        }
    }
}

impl FromValue for f64 {
    /// Integers are accepted too, as in Elixir arithmetic.
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Float(x) => Ok(*x),
            Value::Int(i) => Ok(*i as f64),
            other => Err(wrong("a number", other)),
        }
    }
}

impl FromValue for bool {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Bool(b) => Ok(*b),
            other => Err(wrong("a boolean", other)),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Str(s) => Ok(s.as_str().to_owned()),
            other => Err(wrong("a string", other)),
        }
    }
}

impl FromValue for Str {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Str(s) => Ok(s.clone()),
            other => Err(wrong("a string", other)),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    /// `nil` is `None`.
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Nil => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

impl<T: FromValue> FromValue for Vec<T> {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::List(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| T::from_value(v).map_err(|e| format!("element {i}: {e}")))
                .collect(),
            other => Err(wrong("a list", other)),
        }
    }
}

/// What a registered function may return: anything that converts into a [`Value`], or a
/// `Result` of one whose error is shown in the render error.
pub trait IntoResult {
    /// The value, or the message of the error.
    fn into_result(self) -> Result<Value, String>;
}

macro_rules! into_result_via_value {
    ($($t:ty),*) => {$(
        impl IntoResult for $t {
            fn into_result(self) -> Result<Value, String> {
                Ok(Value::from(self))
            }
        }
    )*};
}

into_result_via_value!(Value, String, &str, Str, i64, i32, u32, f64, bool);

impl<T: Into<Value>> IntoResult for Option<T> {
    fn into_result(self) -> Result<Value, String> {
        Ok(self.map_or(Value::Nil, Into::into))
    }
}

impl<T: Into<Value>> IntoResult for Vec<T> {
    fn into_result(self) -> Result<Value, String> {
        Ok(Value::from(self))
    }
}

impl<T: IntoResult, E: fmt::Display> IntoResult for Result<T, E> {
    fn into_result(self) -> Result<Value, String> {
        self.map_err(|e| e.to_string())?.into_result()
    }
}

/// A Rust closure that can be registered: `Fn(A, B, ...) -> R` for up to four arguments, each
/// [`FromValue`], returning [`IntoResult`]. `Args` only tells the arities apart.
pub trait IntoFunction<Args>: Send + Sync + 'static {
    /// The number of arguments and the type-erased body.
    #[doc(hidden)]
    fn into_erased(self) -> (usize, Arc<Erased>);
}

macro_rules! into_function {
    ($n:expr; $($a:ident),*) => {
        impl<F, R, $($a),*> IntoFunction<($($a,)*)> for F
        where
            F: Fn($($a),*) -> R + Send + Sync + 'static,
            R: IntoResult,
            $($a: FromValue,)*
        {
            #[allow(non_snake_case, unused_variables, unused_mut, unused_assignments)]
            fn into_erased(self) -> (usize, Arc<Erased>) {
                let body = move |args: &[Value]| -> Result<Value, String> {
                    let mut i = 0;
                    $(
                        let $a = $a::from_value(&args[i])
                            .map_err(|e| format!("argument {}: {e}", i + 1))?;
                        i += 1;
                    )*
                    (self)($($a),*).into_result()
                };
                ($n, Arc::new(body))
            }
        }
    };
}

into_function!(0;);
into_function!(1; A);
into_function!(2; A, B);
into_function!(3; A, B, C);
into_function!(4; A, B, C, D);

impl Function {
    pub(crate) fn new<Args>(name: &str, f: impl IntoFunction<Args>) -> Function {
        let (arity, call) = f.into_erased();
        Function {
            name: name.to_owned(),
            arity,
            call,
        }
    }
}
