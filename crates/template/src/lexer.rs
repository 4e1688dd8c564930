//! Lexer: template source to text and tags (with EEx's `trim` applied to the text), and a tag's
//! contents to expression tokens, each with its span.

use crate::ast::Span;
pub(crate) use crate::span::SyntaxError;
use crate::strlit::{RawPart, sigil, sigil_close, string};

/// `<%=` or `<%`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TagKind {
    /// `<%= ... %>`: the value is output.
    Output,
    /// `<% ... %>`: evaluated for its effect only.
    Exec,
}

/// A piece of template source.
#[derive(Debug)]
pub(crate) enum Piece {
    /// Literal text (with `<%%` already turned into `<%`).
    Text(String),
    /// A tag; `inner` is the span between `<%=`/`<%` and `%>`.
    Tag {
        kind: TagKind,
        open: Span,
        inner: Span,
    },
}

fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// Text, a tag, or a comment (which produces nothing but, like a tag, bounds text for `trim`).
enum Raw {
    Text(String),
    Tag(Piece),
    Comment,
}

/// Splits a template into text and tags. Comments (`<%# ... %>`, `<%!-- ... --%>`) are dropped
/// here. With `trim`, whitespace around tags is removed by EEx's rule (see [`trim_texts`]).
pub(crate) fn split(src: &str, trim: bool) -> Result<Vec<Piece>, SyntaxError> {
    let b = src.as_bytes();
    let mut raw = Vec::new();
    let mut text = String::new();
    // EEx's `trim_init`: whitespace before a first tag at the very start is dropped.
    let mut text_start = 0;
    if trim {
        let ws = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
        if b[ws..].starts_with(b"<%") {
            text_start = ws;
        }
    }
    let mut i = text_start;
    while let Some(p) = find(b, i, b"<%") {
        if b.get(p + 2) == Some(&b'%') {
            // `<%%` stands for a literal `<%`.
            text.push_str(&src[text_start..p + 2]);
            text_start = p + 3;
            i = p + 3;
            continue;
        }
        text.push_str(&src[text_start..p]);
        raw.push(Raw::Text(std::mem::take(&mut text)));
        if b[p..].starts_with(b"<%!--") {
            let Some(close) = find(b, p + 5, b"--%>") else {
                return Err(SyntaxError::new(
                    Span::new(p, p + 5),
                    "unclosed comment: `<%!--` without a matching `--%>`",
                ));
            };
            raw.push(Raw::Comment);
            i = close + 4;
            text_start = i;
            continue;
        }
        let open = Span::new(p, p + 2);
        let (kind, inner_start) = match b.get(p + 2) {
            Some(b'=') => (Some(TagKind::Output), p + 3),
            Some(b'#') => (None, p + 3),
            _ => (Some(TagKind::Exec), p + 2),
        };
        let close = match kind {
            None => find(b, inner_start, b"%>"),
            Some(_) => find_close(b, inner_start)?,
        };
        let Some(close) = close else {
            return Err(SyntaxError::new(
                Span::new(p, inner_start),
                "unclosed tag: `<%` without a matching `%>`",
            ));
        };
        raw.push(match kind {
            Some(kind) => Raw::Tag(Piece::Tag {
                kind,
                open: Span::new(open.start, inner_start),
                inner: Span::new(inner_start, close),
            }),
            None => Raw::Comment,
        });
        i = close + 2;
        text_start = i;
    }
    text.push_str(&src[text_start..]);
    raw.push(Raw::Text(text));
    if trim {
        trim_texts(&mut raw);
    }
    // Text on both sides of a comment is one piece.
    let mut out = Vec::new();
    let mut text = String::new();
    for r in raw {
        match r {
            Raw::Text(t) => text.push_str(&t),
            Raw::Comment => {}
            Raw::Tag(tag) => {
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(tag);
            }
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// EEx's `trim: true` (Elixir 1.14, `EEx.Compiler.trim_if_needed`), applied around every tag
/// and comment in order: before it, trailing blanks and line breaks of the text are removed,
/// leaving one line break if there was any; after it, leading blanks and line breaks are
/// removed the same way, and trailing whitespace at the end of the template goes entirely.
fn trim_texts(raw: &mut [Raw]) {
    let last = raw.len().saturating_sub(1);
    for k in 0..raw.len() {
        if matches!(raw[k], Raw::Text(_)) {
            continue;
        }
        if let Some(Raw::Text(before)) = k.checked_sub(1).map(|j| &mut raw[j]) {
            trim_left(before);
        }
        if let Some(Raw::Text(after)) = raw.get_mut(k + 1) {
            trim_right(after, k + 1 == last);
        }
    }
}

fn trim_left(text: &mut String) {
    let mut cut = text.len();
    let mut breaks = 0;
    loop {
        let t = text[..cut].trim_end_matches([' ', '\t']);
        if let Some(t) = t.strip_suffix('\n') {
            cut = t.strip_suffix('\r').unwrap_or(t).len();
            breaks += 1;
        } else {
            break;
        }
    }
    if breaks > 0 {
        text.truncate(cut);
        text.push('\n');
    }
}

fn trim_right(text: &mut String, at_end: bool) {
    let mut from = 0;
    let mut breaks = 0;
    loop {
        let t = text[from..].trim_start_matches([' ', '\t']);
        if t.is_empty() && at_end {
            text.clear();
            return;
        }
        let skipped = text.len() - from - t.len();
        if let Some(r) = t.strip_prefix("\r\n").or_else(|| t.strip_prefix('\n')) {
            from += skipped + (t.len() - r.len());
            breaks += 1;
        } else {
            break;
        }
    }
    if breaks > 0 {
        text.replace_range(..from, "\n");
    }
}

/// Finds the `%>` closing a tag, skipping string literals (so `<%= "%>" %>` works).
fn find_close(b: &[u8], from: usize) -> Result<Option<usize>, SyntaxError> {
    let mut j = from;
    while j < b.len() {
        match b[j] {
            b'"' => {
                let start = j;
                j += 1;
                loop {
                    match b.get(j) {
                        None => {
                            return Err(SyntaxError::new(
                                Span::new(start, start + 1),
                                "unterminated string literal",
                            ));
                        }
                        Some(b'\\') => j += 2,
                        Some(b'"') => break,
                        Some(_) => j += 1,
                    }
                }
            }
            b'%' if b.get(j + 1) == Some(&b'>') => return Ok(Some(j)),
            // A sigil's contents, which may hold a quote (`~r/"/`), up to its closing delimiter;
            // one never closed is left to the tokenizer to report, in the tag `%>` closes.
            b'~' if is_sigil(b, j, b.len()) => {
                let close = sigil_close(b[j + 2]).unwrap_or(b'/');
                let mut k = j + 3;
                while k < b.len() && b[k] != close {
                    k += if b[k] == b'\\' { 2 } else { 1 };
                }
                if k < b.len() {
                    j = k;
                }
            }
            _ => {}
        }
        j += 1;
    }
    Ok(None)
}

/// An expression token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// `name` (keywords too: `do`, `end`, `for`, `true`...).
    Ident(String),
    /// `Name` (a module alias, as in `String.upcase`).
    Alias(String),
    /// `@name`.
    Assign(String),
    /// `name:` in a keyword list.
    Key(String),
    /// An integer literal.
    Int(i64),
    /// A float literal.
    Float(f64),
    /// A string literal, unescaped.
    Str(String),
    /// A string literal with `#{...}` in it: its pieces, the code already tokenized.
    Interp(Vec<Part>),
    /// `:name` or `:"name"`.
    Atom(String),
    /// `~r/.../mods` and the other sigils: the letter, the contents (each `#{...}` tokenized)
    /// and the modifier letters.
    Sigil(char, Vec<Part>, String),
    /// Punctuation and operators.
    Sym(&'static str),
}

/// A piece of an interpolated string.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Part {
    /// Text, escapes decoded.
    Lit(String),
    /// The tokens of one `#{...}`, and the span of the code between the braces.
    Code(Vec<Token>, Span),
}

/// A token and where it is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) span: Span,
    /// A line break comes between the previous token and this one (Elixir ends a call
    /// without parentheses there, and starts a `fn`'s next clause).
    pub(crate) after_break: bool,
}

/// Operators and punctuation, longest first so that `<=` wins over `<`.
const SYMBOLS: [&str; 38] = [
    "===", "!==", "<-", "<>", "<=", ">=", "==", "!=", "=~", "&&", "||", "..", "|>", "->", "=>",
    "++", "//", "%{", "<", ">", "!", ".", "+", "-", "*", "/", "(", ")", "[", "]", "{", "}", ",",
    "=", "|", "^", "&", ";",
];

/// Whether a sigil starts at `i`: `~`, a letter and a delimiter Elixir allows.
fn is_sigil(b: &[u8], i: usize, end: usize) -> bool {
    i + 2 < end && b[i + 1].is_ascii_alphabetic() && sigil_close(b[i + 2]).is_some()
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_lowercase() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Tokenizes `src[span]` (the inside of one tag). Spans are absolute offsets into `src`.
pub(crate) fn tokenize(src: &str, span: Span) -> Result<Vec<Token>, SyntaxError> {
    let b = src.as_bytes();
    let end = span.end;
    let mut i = span.start;
    let mut out = Vec::new();
    let mut after_break = false;
    while i < end {
        let c = b[i];
        if c.is_ascii_whitespace() {
            after_break |= c == b'\n';
            i += 1;
            continue;
        }
        if c == b'#' {
            // A comment, to the end of the line.
            while i < end && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        let tok = if c.is_ascii_digit() {
            let (tok, next) = number(src, i, end)?;
            i = next;
            tok
        } else if is_ident_start(c) || c.is_ascii_uppercase() {
            while i < end && is_ident_char(b[i]) {
                i += 1;
            }
            if i < end && (b[i] == b'?' || b[i] == b'!') && !c.is_ascii_uppercase() {
                // `empty?` style names; but not `a != b`.
                if !(b[i] == b'!' && b.get(i + 1) == Some(&b'=')) {
                    i += 1;
                }
            }
            let name = src[start..i].to_owned();
            if c.is_ascii_uppercase() {
                Tok::Alias(name)
            } else if i < end && b[i] == b':' && b.get(i + 1) != Some(&b':') {
                i += 1;
                Tok::Key(name)
            } else {
                Tok::Ident(name)
            }
        } else if c == b'@' {
            i += 1;
            if i >= end || !is_ident_start(b[i]) {
                return Err(SyntaxError::new(
                    Span::new(start, start + 1),
                    "`@` must be followed by an assign name",
                ));
            }
            while i < end && is_ident_char(b[i]) {
                i += 1;
            }
            Tok::Assign(src[start + 1..i].to_owned())
        } else if c == b'"' {
            let (parts, next) = string(src, i, end)?;
            i = next;
            match <[RawPart; 1]>::try_from(parts) {
                Ok([RawPart::Lit(s)]) => Tok::Str(s),
                Ok(parts) => interp(src, Vec::from(parts))?,
                Err(parts) => interp(src, parts)?,
            }
        } else if c == b':' && b.get(i + 1) == Some(&b'"') && i + 1 < end {
            let (parts, next) = string(src, i + 1, end)?;
            i = next;
            match <[RawPart; 1]>::try_from(parts) {
                Ok([RawPart::Lit(s)]) => Tok::Atom(s),
                _ => {
                    return Err(SyntaxError::new(
                        Span::new(start, i),
                        "interpolation in an atom is not supported",
                    ));
                }
            }
        } else if c == b':'
            && i + 1 < end
            && (is_ident_start(b[i + 1]) || b[i + 1].is_ascii_uppercase())
        {
            i += 1;
            while i < end && is_ident_char(b[i]) {
                i += 1;
            }
            if i < end && (b[i] == b'?' || b[i] == b'!') && b.get(i + 1) != Some(&b'=') {
                i += 1;
            }
            Tok::Atom(src[start + 1..i].to_owned())
        } else if c == b'&' && i + 1 < end && b[i + 1].is_ascii_digit() {
            // `&1`, a capture's argument: a variable no other name can spell.
            i += 1;
            while i < end && b[i].is_ascii_digit() {
                i += 1;
            }
            Tok::Ident(src[start..i].to_owned())
        } else if c == b'~' && is_sigil(b, i, end) {
            let (sig, next) = sigil(src, i, end)?;
            i = next;
            Tok::Sigil(sig.letter, tokenize_parts(src, sig.parts)?, sig.mods)
        } else if c == b'\'' {
            return Err(SyntaxError::new(
                Span::new(i, i + 1),
                "single-quoted charlists are not supported; use a \"string\"",
            ));
        } else if let Some(sym) = SYMBOLS.iter().find(|s| b[i..end].starts_with(s.as_bytes())) {
            i += sym.len();
            Tok::Sym(sym)
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            return Err(SyntaxError::new(
                Span::new(i, i + ch.len_utf8()),
                format!("unexpected character `{ch}`"),
            ));
        };
        out.push(Token {
            tok,
            span: Span::new(start, i),
            after_break,
        });
        after_break = false;
    }
    Ok(out)
}

/// Lexes an integer (`1_000_000`) or a float (`1.5`, `2.0e-3`) starting at `i`.
fn number(src: &str, mut i: usize, end: usize) -> Result<(Tok, usize), SyntaxError> {
    let b = src.as_bytes();
    let start = i;
    if b[i] == b'0' && i + 1 < end {
        let radix = match b.get(i + 1) {
            Some(b'x') => 16,
            Some(b'o') => 8,
            Some(b'b') => 2,
            _ => 0,
        };
        if radix != 0 {
            i += 2;
            while i < end && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let span = Span::new(start, i);
            let digits: String = src[start + 2..i].chars().filter(|&c| c != '_').collect();
            return match i64::from_str_radix(&digits, radix) {
                Ok(n) if !digits.is_empty() => Ok((Tok::Int(n), i)),
                _ => Err(SyntaxError::new(span, "invalid number literal")),
            };
        }
    }
    let digits = |i: &mut usize| -> Result<(), SyntaxError> {
        while *i < end && (b[*i].is_ascii_digit() || b[*i] == b'_') {
            if b[*i] == b'_' && !(b.get(*i + 1).is_some_and(u8::is_ascii_digit) && *i + 1 < end) {
                return Err(SyntaxError::new(
                    Span::new(*i, *i + 1),
                    "`_` in a number must stand between two digits",
                ));
            }
            *i += 1;
        }
        Ok(())
    };
    digits(&mut i)?;
    let mut float = false;
    if i + 1 < end && b[i] == b'.' && b[i + 1].is_ascii_digit() {
        float = true;
        i += 1;
        digits(&mut i)?;
        if i < end && (b[i] == b'e' || b[i] == b'E') {
            let mut j = i + 1;
            if j < end && (b[j] == b'+' || b[j] == b'-') {
                j += 1;
            }
            if j < end && b[j].is_ascii_digit() {
                i = j;
                digits(&mut i)?;
            }
        }
    }
    let span = Span::new(start, i);
    if i < end && is_ident_char(b[i]) {
        return Err(SyntaxError::new(
            Span::new(start, i + 1),
            "invalid number literal",
        ));
    }
    let text: String = src[start..i].chars().filter(|&c| c != '_').collect();
    if float {
        text.parse::<f64>()
            .map(|x| (Tok::Float(x), i))
            .map_err(|_| SyntaxError::new(span, "invalid float literal"))
    } else {
        text.parse::<i64>()
            .map(|n| (Tok::Int(n), i))
            .map_err(|_| SyntaxError::new(span, "integer literal does not fit in 64 bits"))
    }
}

/// An interpolated string's token: each `#{...}` tokenized.
fn interp(src: &str, parts: Vec<RawPart>) -> Result<Tok, SyntaxError> {
    Ok(Tok::Interp(tokenize_parts(src, parts)?))
}

/// A string's or a sigil's parts with each `#{...}` tokenized.
fn tokenize_parts(src: &str, parts: Vec<RawPart>) -> Result<Vec<Part>, SyntaxError> {
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        out.push(match p {
            RawPart::Lit(s) => Part::Lit(s),
            RawPart::Code(span) => Part::Code(tokenize(src, span)?, span),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s, Span::new(0, s.len()))
            .unwrap()
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn splits_text_tags_comments_and_escaped_open() {
        let p = split("a<%= x %>b<%# c %>d<%% e %>", false).unwrap();
        assert_eq!(p.len(), 3);
        assert!(matches!(&p[0], Piece::Text(t) if t == "a"));
        assert!(
            matches!(&p[1], Piece::Tag { kind: TagKind::Output, inner, .. } if *inner == Span::new(4, 7))
        );
        assert!(matches!(&p[2], Piece::Text(t) if t == "bd<% e %>"));
    }

    #[test]
    fn closing_inside_a_string_does_not_close_the_tag() {
        let p = split(r#"<%= "%>" %>!"#, false).unwrap();
        assert!(matches!(&p[1], Piece::Text(t) if t == "!"));
    }

    #[test]
    fn numbers_ranges_and_keys() {
        assert_eq!(
            toks("1..@iters"),
            vec![Tok::Int(1), Tok::Sym(".."), Tok::Assign("iters".into())]
        );
        assert_eq!(toks("100_000_000"), vec![Tok::Int(100_000_000)]);
        assert_eq!(toks("2.5e3"), vec![Tok::Float(2500.0)]);
        assert_eq!(toks("key: 1"), vec![Tok::Key("key".into()), Tok::Int(1)]);
        assert_eq!(
            toks("a!=b"),
            vec![
                Tok::Ident("a".into()),
                Tok::Sym("!="),
                Tok::Ident("b".into())
            ]
        );
    }

    #[test]
    fn trim_follows_eex() {
        let text = |src: &str| -> String {
            split(src, true)
                .unwrap()
                .into_iter()
                .map(|p| match p {
                    Piece::Text(t) => t,
                    Piece::Tag { .. } => "|".to_owned(),
                })
                .collect()
        };
        // Checked against EEx.eval_string(src, [], trim: true) in Elixir 1.14.
        assert_eq!(text("a\n  <% x %>\n  <%= x %>\nb\n"), "a\n|\n|\nb\n");
        assert_eq!(text("\n\n  <%= x %>  \n\n"), "|");
        assert_eq!(text("a <%= x %> b"), "a | b");
        assert_eq!(text("a<%!-- c --%>b"), "ab");
    }

    #[test]
    fn atoms_radix_and_new_symbols() {
        assert_eq!(
            toks(":ok :\"a b\" 0x1F 0b101 a === b |> c"),
            vec![
                Tok::Atom("ok".into()),
                Tok::Atom("a b".into()),
                Tok::Int(31),
                Tok::Int(5),
                Tok::Ident("a".into()),
                Tok::Sym("==="),
                Tok::Ident("b".into()),
                Tok::Sym("|>"),
                Tok::Ident("c".into()),
            ]
        );
    }

    #[test]
    fn bad_numbers_are_errors() {
        for s in ["1__0", "1_", "99999999999999999999", "12abc"] {
            assert!(tokenize(s, Span::new(0, s.len())).is_err(), "{s}");
        }
    }
}
