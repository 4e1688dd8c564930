//! String literals: Elixir's escapes and the spans of `#{...}` interpolations. Knows nothing of
//! tokens, so the lexer (which tokenizes the interpolated code) can use it without a cycle.

use crate::parser::{MAX_NESTING, too_deep};
use crate::span::{Span, SyntaxError};

/// A piece of a string literal.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RawPart {
    /// Literal text, escapes decoded.
    Lit(String),
    /// The code inside `#{` and `}` (not yet tokenized).
    Code(Span),
}

/// Lexes the double-quoted string whose opening quote is at `i`, up to `end`. Returns its parts
/// (one `Lit` when nothing is interpolated) and the offset after the closing quote.
///
/// Strings nested in interpolations (`"#{"#{x}"}"`) are read recursively, so their nesting is
/// held to [`MAX_NESTING`] levels of `#{`: past it, a located error, not a stack overflow.
pub(crate) fn string(
    src: &str,
    i: usize,
    end: usize,
) -> Result<(Vec<RawPart>, usize), SyntaxError> {
    string_in(src, i, end, 0)
}

/// [`string`] inside `depth` interpolations.
fn string_in(
    src: &str,
    i: usize,
    end: usize,
    depth: usize,
) -> Result<(Vec<RawPart>, usize), SyntaxError> {
    let b = src.as_bytes();
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut j = i + 1;
    while j < end {
        let c = b[j];
        match c {
            b'"' => {
                if !text.is_empty() || parts.is_empty() {
                    parts.push(RawPart::Lit(text));
                }
                return Ok((parts, j + 1));
            }
            b'#' if b.get(j + 1) == Some(&b'{') && j + 1 < end => {
                if depth >= MAX_NESTING {
                    return Err(too_deep(Span::new(j, j + 2), "string interpolation"));
                }
                let close = interpolation_end(src, j + 2, end, depth + 1)?;
                if !text.is_empty() {
                    parts.push(RawPart::Lit(std::mem::take(&mut text)));
                }
                parts.push(RawPart::Code(Span::new(j + 2, close)));
                j = close + 1;
            }
            b'\\' => j = escape(src, j, end, &mut text)?,
            _ => {
                let ch = src[j..].chars().next().unwrap_or('\u{fffd}');
                text.push(ch);
                j += ch.len_utf8();
            }
        }
    }
    Err(SyntaxError::new(
        Span::new(i, i + 1),
        "unterminated string literal",
    ))
}

/// Decodes the escape whose backslash is at `j` into `out`; returns the offset after it.
fn escape(src: &str, j: usize, end: usize, out: &mut String) -> Result<usize, SyntaxError> {
    let b = src.as_bytes();
    let Some(&e) = b.get(j + 1).filter(|_| j + 1 < end) else {
        return Err(SyntaxError::new(
            Span::new(j, j + 1),
            "unterminated string literal",
        ));
    };
    let simple = match e {
        b'n' => Some('\n'),
        b't' => Some('\t'),
        b'r' => Some('\r'),
        b'0' => Some('\0'),
        b'e' => Some('\x1b'),
        b'a' => Some('\x07'),
        b'b' => Some('\x08'),
        b'd' => Some('\x7f'),
        b'f' => Some('\x0c'),
        b'v' => Some('\x0b'),
        b's' => Some(' '),
        _ => None,
    };
    if let Some(c) = simple {
        out.push(c);
        return Ok(j + 2);
    }
    match e {
        // A backslash before a newline continues the line.
        b'\n' => Ok(j + 2),
        b'x' => {
            let hex = src.get(j + 2..(j + 4).min(end)).unwrap_or("");
            if hex.len() != 2 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(SyntaxError::new(
                    Span::new(j, (j + 2).min(end)),
                    "`\\x` must be followed by two hexadecimal digits",
                ));
            }
            let byte = u8::from_str_radix(hex, 16).unwrap_or(0);
            if byte > 0x7f {
                return Err(SyntaxError::new(
                    Span::new(j, j + 4),
                    "`\\x` escapes above 7F make a string that is not UTF-8; use `\\u` instead",
                ));
            }
            out.push(char::from(byte));
            Ok(j + 4)
        }
        b'u' => {
            let (hex, next) = if b.get(j + 2) == Some(&b'{') {
                let close = src[j + 3..end].find('}').map(|k| j + 3 + k);
                match close {
                    Some(c) => (&src[j + 3..c], c + 1),
                    None => ("", j + 3),
                }
            } else {
                (src.get(j + 2..(j + 6).min(end)).unwrap_or(""), j + 6)
            };
            let valid = (1..=6).contains(&hex.len())
                && hex.bytes().all(|c| c.is_ascii_hexdigit())
                && (b.get(j + 2) == Some(&b'{') || hex.len() == 4);
            let ch = valid
                .then(|| u32::from_str_radix(hex, 16).ok())
                .flatten()
                .and_then(char::from_u32);
            match ch {
                Some(c) => {
                    out.push(c);
                    Ok(next)
                }
                None => Err(SyntaxError::new(
                    Span::new(j, next.min(end)),
                    "invalid `\\u` escape: write `\\uHHHH` or `\\u{H...}` with a Unicode code point",
                )),
            }
        }
        _ => {
            // Any other escaped character stands for itself (`\"`, `\\`, `\#`).
            let ch = src[j + 1..].chars().next().unwrap_or('\\');
            out.push(ch);
            Ok(j + 1 + ch.len_utf8())
        }
    }
}

/// A sigil's contents (`~r/a+/i`, `~w(a b)`), read by Elixir's rules for the letter.
#[derive(Debug)]
pub(crate) struct Sigil {
    /// The sigil's letter (`r`, `s`, `w`, `S`...).
    pub(crate) letter: char,
    /// The contents; for a lowercase letter with each `#{...}` apart and escapes decoded.
    pub(crate) parts: Vec<RawPart>,
    /// The modifier letters after the closing delimiter.
    pub(crate) mods: String,
}

/// The closing delimiter of a sigil opened with `open`, if Elixir allows `open` there.
pub(crate) fn sigil_close(open: u8) -> Option<u8> {
    Some(match open {
        b'(' => b')',
        b'[' => b']',
        b'{' => b'}',
        b'<' => b'>',
        b'/' | b'|' | b'"' | b'\'' => open,
        _ => return None,
    })
}

/// Lexes the sigil whose `~` is at `i` (a letter and an opening delimiter follow: the caller
/// checked with [`sigil_close`]); returns it and the offset after its modifiers. Inside, an
/// escaped closing delimiter stands for itself and a backslash before a line break joins the
/// lines; a lowercase letter also interpolates `#{...}` and decodes escapes: `~r` only `\f \n
/// \r \t \v \a` (the regex engine reads the others, so `\d` stays `\d`), the others all of
/// a string's.
pub(crate) fn sigil(src: &str, i: usize, end: usize) -> Result<(Sigil, usize), SyntaxError> {
    let b = src.as_bytes();
    let letter = char::from(b[i + 1]);
    let close = sigil_close(b[i + 2]).unwrap_or(b'/');
    let lower = letter.is_ascii_lowercase();
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut j = i + 3;
    loop {
        if j >= end {
            return Err(SyntaxError::new(
                Span::new(i, i + 3),
                format!("unterminated sigil: no closing `{}`", char::from(close)),
            ));
        }
        let c = b[j];
        if c == close {
            break;
        }
        match c {
            b'\\' if b.get(j + 1) == Some(&close) && j + 1 < end => {
                text.push(char::from(close));
                j += 2;
            }
            b'\\' if b.get(j + 1) == Some(&b'\n') && j + 1 < end => j += 2,
            b'#' if lower && b.get(j + 1) == Some(&b'{') && j + 1 < end => {
                let stop = interpolation_end(src, j + 2, end, 1)?;
                if !text.is_empty() {
                    parts.push(RawPart::Lit(std::mem::take(&mut text)));
                }
                parts.push(RawPart::Code(Span::new(j + 2, stop)));
                j = stop + 1;
            }
            b'\\' if lower && letter != 'r' => j = escape(src, j, end, &mut text)?,
            b'\\' if lower => {
                let decoded = match b.get(j + 1).filter(|_| j + 1 < end) {
                    Some(b'f') => Some('\x0c'),
                    Some(b'n') => Some('\n'),
                    Some(b'r') => Some('\r'),
                    Some(b't') => Some('\t'),
                    Some(b'v') => Some('\x0b'),
                    Some(b'a') => Some('\x07'),
                    _ => None,
                };
                match decoded {
                    Some(d) => {
                        text.push(d);
                        j += 2;
                    }
                    None => {
                        // The backslash and what it escapes, both as written.
                        text.push('\\');
                        j += 1;
                        if let Some(ch) = src[j..end].chars().next() {
                            text.push(ch);
                            j += ch.len_utf8();
                        }
                    }
                }
            }
            _ => {
                let ch = src[j..].chars().next().unwrap_or('\u{fffd}');
                text.push(ch);
                j += ch.len_utf8();
            }
        }
    }
    if !text.is_empty() || parts.is_empty() {
        parts.push(RawPart::Lit(text));
    }
    let mut k = j + 1;
    while k < end && b[k].is_ascii_alphabetic() {
        k += 1;
    }
    let mods = src[j + 1..k].to_owned();
    Ok((
        Sigil {
            letter,
            parts,
            mods,
        },
        k,
    ))
}

/// The offset of the `}` closing an interpolation whose code starts at `from` (`depth`
/// interpolations deep), skipping nested braces and strings.
fn interpolation_end(
    src: &str,
    from: usize,
    end: usize,
    depth: usize,
) -> Result<usize, SyntaxError> {
    let b = src.as_bytes();
    let mut braces = 0usize;
    let mut j = from;
    while j < end {
        match b[j] {
            b'{' => braces += 1,
            b'}' if braces == 0 => return Ok(j),
            b'}' => braces -= 1,
            b'"' => {
                let (_, next) = string_in(src, j, end, depth)?;
                j = next;
                continue;
            }
            _ => {}
        }
        j += 1;
    }
    Err(SyntaxError::new(
        Span::new(from.saturating_sub(2), from),
        "unterminated `#{` in a string",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> String {
        match string(s, 0, s.len()).unwrap().0.as_slice() {
            [RawPart::Lit(t)] => t.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn escapes_decode_like_elixir() {
        assert_eq!(lit(r#""\x41\u00e9\u{1F600}""#), "Aé😀");
        assert_eq!(lit(r#""a\sb\#{c}\"""#), "a b#{c}\"");
        assert_eq!(lit(r#""""#), "");
        for bad in [r#""\xE9""#, r#""\u00""#, r#""\u{110000}""#, r#""\x4""#] {
            assert!(string(bad, 0, bad.len()).is_err(), "{bad}");
        }
    }

    fn sigil_lit(s: &str) -> (String, String) {
        let (sig, next) = sigil(s, 0, s.len()).unwrap();
        assert_eq!(next, s.len());
        match sig.parts.as_slice() {
            [RawPart::Lit(t)] => (t.clone(), sig.mods),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sigils_escape_as_elixir() {
        assert_eq!(
            sigil_lit(r"~r/a\/b\d\n/iu"),
            ("a/b\\d\n".into(), "iu".into())
        );
        assert_eq!(sigil_lit(r"~r{a\}b\\}"), ("a}b\\\\".into(), "".into()));
        assert_eq!(sigil_lit("~r/a\\\nb/"), ("ab".into(), "".into()));
        assert_eq!(sigil_lit(r"~s(a\)b\x41)"), ("a)bA".into(), "".into()));
        assert_eq!(sigil_lit(r"~S(f\(\)x)"), ("f\\()x".into(), "".into()));
        assert_eq!(sigil_lit(r"~r/\#{a}/"), ("\\#{a}".into(), "".into()));
        let s = r#"~r/a#{x}b/"#;
        let (sig, _) = sigil(s, 0, s.len()).unwrap();
        assert_eq!(sig.parts.len(), 3);
        assert!(sigil("~r/abc", 0, 6).is_err());
    }

    #[test]
    fn interpolation_spans_skip_nested_strings_and_braces() {
        let s = r#""a#{f("}", %{b: 1})}c""#;
        let (parts, next) = string(s, 0, s.len()).unwrap();
        assert_eq!(next, s.len());
        assert_eq!(parts.len(), 3);
        assert!(
            matches!(&parts[1], RawPart::Code(sp) if &s[sp.start..sp.end] == r#"f("}", %{b: 1})"#)
        );
    }
}
