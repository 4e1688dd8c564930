//! Floats printed the way Elixir prints them (`Float.to_string/1`, string interpolation,
//! Phoenix's output): the shortest digits that read back as the same float, placed by Erlang's
//! `io_lib_format:fwrite_g/1` rule: plain decimal notation unless scientific notation is
//! shorter, so `1000.0` is `1.0e3`, `100.0` is `100.0`, `0.0001` is `0.0001` and `0.00001` is
//! `1.0e-5`. Rust's `{:e}` already finds the shortest round-trip digits; only the placement
//! differs from Rust's `{:?}` (`1000.0`, `1e16`).

/// Appends Elixir's text for `x` to `out`. NaN and infinities (which Elixir cannot produce)
/// print as Rust prints them.
pub(crate) fn write_float(x: f64, out: &mut Vec<u8>) {
    if !x.is_finite() {
        out.extend_from_slice(format!("{x}").as_bytes());
        return;
    }
    if x == 0.0 {
        out.extend_from_slice(if x.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return;
    }
    // `d.ddde-N`: the shortest round-trip digits and the exponent of the first one.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    if x < 0.0 {
        out.push(b'-');
    }
    // Where the decimal point goes, counted in digits from the left (fwrite_g's `Place`).
    let place = exp + 1;
    let len = digits.len() as i32;
    if (0 < place) && (place < len) {
        out.extend_from_slice(&digits[..place as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[place as usize..]);
        return;
    }
    if place == 0 {
        out.extend_from_slice(b"0.");
        out.extend_from_slice(&digits);
        return;
    }
    // Outside the digits: pad with zeros unless the exponent form is no longer; from 2^53 up
    // (where floats are no longer all integers) always the exponent form, as OTP 24 does.
    let exp_text = (place - 1).to_string();
    let exp_dot = if len == 1 { 2 } else { 1 };
    let exp_cost = exp_text.len() as i32 + 1 + exp_dot;
    if place < 0 {
        if 2 - place <= exp_cost {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-place) as usize));
            out.extend_from_slice(&digits);
            return;
        }
    } else if place - len + 2 <= exp_cost && x.abs() < TWO_POW_53 {
        out.extend_from_slice(&digits);
        out.extend(std::iter::repeat_n(b'0', (place - len) as usize));
        out.extend_from_slice(b".0");
        return;
    }
    out.push(digits[0]);
    out.push(b'.');
    if len == 1 {
        out.push(b'0');
    } else {
        out.extend_from_slice(&digits[1..]);
    }
    out.push(b'e');
    out.extend_from_slice(exp_text.as_bytes());
}

/// 2^53: from here up `fwrite_g` always prints the exponent form (`9.007199254740992e15`).
const TWO_POW_53: f64 = 9_007_199_254_740_992.0;

/// [`write_float`] as a `String`.
pub(crate) fn float_string(x: f64) -> String {
    let mut b = Vec::new();
    write_float(x, &mut b);
    String::from_utf8(b).unwrap_or_default()
}

/// The most decimals `float_to_binary(x, decimals: n)` takes (Erlang's limit).
pub(crate) const MAX_DECIMALS: usize = 253;

/// Erlang's `float_to_binary(x, [{decimals, n}])` (OTP 25's `sys_double_to_chars_fast`), which
/// Phoenix pages use for prices; `None` where Erlang raises `badarg` (a text of 256 bytes or
/// more, as `1.0e300` gives: the VM formats into a 256-byte buffer).
///
/// Erlang does not round the float's exact value. Up to 2^53 and with fewer than 19 decimals,
/// it splits the magnitude into its integer part and its fraction, multiplies the fraction by
/// `10^n` *in floating point* and rounds that product half away from zero (C's `round`), so
/// `0.075` (a little below 0.075 exactly) with 2 decimals is `0.08`, as are `1.115` and
/// `0.045`; with no decimals it rounds the magnitude half away from zero (`2.5` is `3`).
/// Larger values, and more decimals, are printed by `printf("%.*f")`: the exact value, a tie
/// going to the even digit (what Rust's `{:.n}` does too). The sign is the float's sign bit, so
/// `-0.0` and `-0.001` with 2 decimals are `-0.00`. Checked against `erl` by
/// `tests/float_decimals.rs`.
pub(crate) fn float_to_decimals(x: f64, decimals: usize) -> Option<String> {
    const POW10: [f64; 19] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18,
    ];
    /// 2^53: past it a double has no fraction and the fast path's integers would not be exact.
    const MAX_FAST: f64 = 9_007_199_254_740_992.0;
    let magnitude = x.abs();
    if magnitude > MAX_FAST || decimals >= POW10.len() || !x.is_finite() {
        // An integer part of 256 digits or more cannot fit, whatever the decimals: refused
        // before formatting, so a huge float costs no 300-byte string.
        if magnitude >= 1.0e256 {
            return None;
        }
        let s = format!("{x:.decimals$}");
        return (s.len() < 256).then_some(s);
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    // `magnitude <= 2^53` here, so the conversions below are exact.
    if decimals == 0 {
        return Some(format!("{sign}{}", magnitude.round() as u64));
    }
    let int = magnitude.floor();
    let scale = POW10[decimals];
    let frac = ((magnitude - int) * scale).round();
    let (int, frac) = if frac >= scale {
        (int as u64 + 1, 0)
    } else {
        (int as u64, frac as u64)
    };
    Some(format!("{sign}{int}.{frac:0decimals$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_round_as_erlang_does() {
        // Each checked against `float_to_binary/2` in OTP 25.
        for (x, n, s) in [
            (0.075, 2, "0.08"),
            (1.115, 2, "1.12"),
            (0.045, 2, "0.05"),
            (0.015, 2, "0.02"),
            (0.125, 2, "0.13"),
            (2.5, 0, "3"),
            (-2.5, 0, "-3"),
            (-0.001, 2, "-0.00"),
            (-0.0, 0, "-0"),
            (0.995, 2, "1.00"),
            (1.0e20, 2, "100000000000000000000.00"),
            (1.0e15 + 0.125, 2, "1000000000000000.13"),
            (f64::powi(2.0, -20), 19, "0.0000009536743164062"),
        ] {
            assert_eq!(float_to_decimals(x, n).as_deref(), Some(s), "{x:?} {n}");
        }
        assert_eq!(float_to_decimals(1.0e300, 0), None);
        assert_eq!(float_to_decimals(2.0e243, 11), None);
        assert_eq!(float_to_decimals(2.0e243, 10).map(|s| s.len()), Some(255));
        assert_eq!(
            float_to_decimals(1.0e-300, MAX_DECIMALS).map(|s| s.len()),
            Some(255)
        );
    }

    #[test]
    fn prints_like_elixir() {
        // Each pair checked against `to_string/1` in Elixir 1.14 on OTP 25.
        for (x, s) in [
            (1000.0, "1.0e3"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (1.0e16, "1.0e16"),
            (1.0e15, "1.0e15"),
            (123456789012345.0, "123456789012345.0"),
            (1.0e-5, "1.0e-5"),
            (0.0001, "0.0001"),
            (1.5e-7, "1.5e-7"),
            (2.5, "2.5"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1.0e100, "1.0e100"),
            (5.0e-324, "5.0e-324"),
            (1.7976931348623157e308, "1.7976931348623157e308"),
            (0.30000000000000004, "0.30000000000000004"),
            (12345.678, "12345.678"),
            (99999.0, "99999.0"),
            (100000.0, "1.0e5"),
            (0.001, "0.001"),
            (1.23e-8, "1.23e-8"),
            (-1.5, "-1.5"),
            (1.0, "1.0"),
            (10.0, "10.0"),
            (9007199254740990.0, "9007199254740990.0"),
            (4503599627370497.0, "4503599627370497.0"),
            (9007199254740992.0, "9.007199254740992e15"),
            (-9007199254740992.0, "-9.007199254740992e15"),
            (18014398509481984.0, "1.8014398509481984e16"),
            (100000000000000016.0, "1.0000000000000002e17"),
        ] {
            assert_eq!(float_string(x), s, "{x:?}");
        }
    }
}
