//! The rounding of `Float.round/floor/ceil` with a precision, on a float's exact decimal
//! expansion, and the options of `:erlang.float_to_binary/2`.

use super::{Failure, expected};
use crate::ops::describe;
use crate::value::Value;

/// Rounds half away from zero at `digits` decimals, on the float's exact decimal expansion, as
/// Elixir's `Float.round/2` does (`Float.round(2.675, 2)` is 2.67: the float is below 2.675).
pub(super) fn round_half_up(x: f64, digits: i32) -> f64 {
    let r: f64 = fixed(x.abs(), digits as usize).parse().unwrap_or(x.abs());
    if x.is_sign_negative() { -r } else { r }
}

/// Which way [`round_toward`] goes.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Rounding {
    Floor,
    Ceil,
}

/// `Float.floor/2` and `Float.ceil/2`: `x` cut at `digits` decimals of its exact value, then
/// one unit of the last decimal away from zero when anything was cut on that side
/// (`Float.floor(-0.01, 1)` is -0.1, `Float.ceil(-0.01, 1)` is zero).
pub(super) fn round_toward(x: f64, digits: i32, way: Rounding) -> f64 {
    let exact = format!("{:.1100}", x.abs());
    let (int, frac) = exact.split_once('.').unwrap_or((&exact, ""));
    let digits = digits as usize;
    let cut = frac[digits..].bytes().any(|d| d != b'0');
    let mut n: Vec<u8> = format!("{int}{}", &frac[..digits]).into_bytes();
    if cut && ((way == Rounding::Floor) == x.is_sign_negative()) {
        increment(&mut n);
    }
    let point = n.len() - digits;
    let text = format!(
        "{}.{}",
        std::str::from_utf8(&n[..point]).unwrap_or("0"),
        std::str::from_utf8(&n[point..]).unwrap_or("0")
    );
    let magnitude: f64 = text.parse().unwrap_or(x.abs());
    if x.is_sign_negative() {
        -magnitude
    } else {
        magnitude
    }
}

/// Adds one to a decimal number written as ASCII digits (`"199"` becomes `"200"`).
fn increment(n: &mut Vec<u8>) {
    let mut i = n.len();
    loop {
        if i == 0 {
            n.insert(0, b'1');
            return;
        }
        i -= 1;
        if n[i] == b'9' {
            n[i] = b'0';
        } else {
            n[i] += 1;
            return;
        }
    }
}

/// `x` with `digits` decimals, its exact value rounded half away from zero (`fixed(0.125, 2)`
/// is "0.13", `fixed(2.5, 0)` is "3"): `Float.round/2`'s rule. (Erlang's `float_to_binary`
/// rounds otherwise: [`crate::float::float_to_decimals`].)
fn fixed(x: f64, digits: usize) -> String {
    // Rust prints a float's exact decimal expansion when asked for enough digits.
    let exact = format!("{:.1100}", x.abs());
    let (int, frac) = exact.split_once('.').unwrap_or((&exact, ""));
    let keep = &frac[..digits];
    let round_up = frac.as_bytes().get(digits).is_some_and(|&d| d >= b'5');
    let mut n: Vec<u8> = format!("{int}{keep}").into_bytes();
    if round_up {
        increment(&mut n);
    }
    let point = n.len() - digits;
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let int = std::str::from_utf8(&n[..point]).unwrap_or("0");
    match std::str::from_utf8(&n[point..]).unwrap_or("") {
        "" => format!("{sign}{int}"),
        frac => format!("{sign}{int}.{frac}"),
    }
}

/// `:erlang.float_to_binary/2`'s options as Erlang reads them, in order (the last `decimals`
/// wins): `{:decimals, n}` and `:compact`; anything else is Erlang's "invalid option in list".
pub(super) fn float_options(opts: &Value) -> Result<(Option<&Value>, bool), Failure> {
    let Value::List(items) = opts else {
        return Err(expected("a list of options", opts));
    };
    let (mut decimals, mut compact) = (None, false);
    for item in items.iter() {
        match item {
            Value::Tuple(t)
                if t.len() == 2 && matches!(&t[0], Value::Atom(k) if k.as_str() == "decimals") =>
            {
                decimals = Some(&t[1]);
            }
            Value::Atom(a) if a.as_str() == "compact" => compact = true,
            other => {
                return Err(format!(
                    "invalid option {} (galleon takes decimals: n and :compact)",
                    describe(other)
                ));
            }
        }
    }
    Ok((decimals, compact))
}

/// Erlang's `:compact`: the trailing zeros of the decimals go, but one digit stays after the
/// point (`"3.1000"` is `"3.1"`, `"3.0000"` is `"3.0"`, `"3"` stays `"3"`).
pub(super) fn compacted(mut text: String) -> String {
    if text.contains('.') {
        while text.ends_with('0') && !text.ends_with(".0") {
            text.pop();
        }
    }
    text
}
