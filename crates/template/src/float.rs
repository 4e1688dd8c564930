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
    // Outside the digits: pad with zeros unless the exponent form is no longer.
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
    } else if place - len + 2 <= exp_cost {
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

/// [`write_float`] as a `String`.
pub(crate) fn float_string(x: f64) -> String {
    let mut b = Vec::new();
    write_float(x, &mut b);
    String::from_utf8(b).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert_eq!(float_string(x), s, "{x:?}");
        }
    }
}
