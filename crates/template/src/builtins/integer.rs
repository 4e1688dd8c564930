//! `Integer.to_string/2` and `Integer.digits/1,2`: an integer in another base, with Elixir's
//! rules (bases 2 to 36, letters uppercase, a negative number's digits all negative in
//! `digits`). A bad base is an error, as Elixir's `ArgumentError`.

use super::{Builtin, Failure, expected};
use crate::value::Value;

/// Runs `Integer.to_string(n, base)` or `Integer.digits(n[, base])` (`base` nil: 10).
pub(super) fn call(b: Builtin, n: Value, base: Value) -> Result<Value, Failure> {
    let Value::Int(n) = n else {
        return Err(expected("an integer", &n));
    };
    let base = match base {
        Value::Nil if b == Builtin::IntegerDigits => 10,
        Value::Int(base) if (2..=36).contains(&base) => base as u64,
        other => return Err(expected("a base from 2 to 36", &other)),
    };
    let digits = digits(n.unsigned_abs(), base);
    Ok(if b == Builtin::IntegerDigits {
        let sign = if n < 0 { -1 } else { 1 };
        Value::list(digits.iter().map(|&d| Value::Int(sign * i64::from(d))))
    } else {
        let mut text = String::with_capacity(digits.len() + 1);
        if n < 0 {
            text.push('-');
        }
        text.extend(
            digits
                .iter()
                .filter_map(|&d| char::from_digit(u32::from(d), 36))
                .map(|c| c.to_ascii_uppercase()),
        );
        Value::from(text)
    })
}

/// The digits of `n` in `base`, most significant first (`[0]` for 0).
fn digits(mut n: u64, base: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        out.push((n % base) as u8);
        n /= base;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_as_elixir() {
        let s = |n: i64, base: i64| {
            call(
                Builtin::IntegerToStringBase,
                Value::Int(n),
                Value::Int(base),
            )
        };
        assert_eq!(s(255, 16).unwrap(), Value::str("FF"));
        assert_eq!(s(-255, 2).unwrap(), Value::str("-11111111"));
        assert_eq!(s(35, 36).unwrap(), Value::str("Z"));
        assert_eq!(s(i64::MIN, 10).unwrap(), Value::str(&i64::MIN.to_string()));
        assert!(s(5, 99).is_err() && s(5, 1).is_err());
        let d = |n: i64| call(Builtin::IntegerDigits, Value::Int(n), Value::Nil).unwrap();
        assert_eq!(d(-123), Value::list([-1, -2, -3].map(Value::Int)));
        assert_eq!(d(0), Value::list([Value::Int(0)]));
    }
}
