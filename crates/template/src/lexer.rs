//! Lexer: template source to text and tags, and a tag's contents to expression tokens.

use crate::ast::Span;

/// A syntax error before it is given a template name: a span and a message.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub(crate) span: Span,
    pub(crate) message: String,
}

impl SyntaxError {
    pub(crate) fn new(span: Span, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            span,
            message: message.into(),
        }
    }
}

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

/// Splits a template into text and tags. Comments (`<%# ... %>`) are dropped here.
pub(crate) fn split(src: &str) -> Result<Vec<Piece>, SyntaxError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut text = String::new();
    let mut text_start = 0;
    let mut i = 0;
    while let Some(p) = find(b, i, b"<%") {
        if b.get(p + 2) == Some(&b'%') {
            // `<%%` stands for a literal `<%`.
            text.push_str(&src[text_start..p + 2]);
            text_start = p + 3;
            i = p + 3;
            continue;
        }
        text.push_str(&src[text_start..p]);
        let open = Span::new(p, p + 2);
        let (kind, inner_start) = match b.get(p + 2) {
            Some(b'=') => (Some(TagKind::Output), p + 3),
            Some(b'#') => (None, p + 3),
            _ => (Some(TagKind::Exec), p + 2),
        };
        // Text around a comment stays one piece.
        if kind.is_some() && !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
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
        if let Some(kind) = kind {
            out.push(Piece::Tag {
                kind,
                open: Span::new(open.start, inner_start),
                inner: Span::new(inner_start, close),
            });
        }
        i = close + 2;
        text_start = i;
    }
    text.push_str(&src[text_start..]);
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
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
    /// Punctuation and operators.
    Sym(&'static str),
}

/// A token and where it is.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) span: Span,
}

/// Operators and punctuation, longest first so that `<=` wins over `<`.
const SYMBOLS: [&str; 24] = [
    "<-", "<>", "<=", ">=", "==", "!=", "&&", "||", "..", "<", ">", "!", ".", "+", "-", "*", "/",
    "(", ")", "[", "]", "{", "}", ",",
];

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
    while i < end {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
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
            let (s, next) = string(src, i, end)?;
            i = next;
            Tok::Str(s)
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
        });
    }
    Ok(out)
}

/// Lexes an integer (`1_000_000`) or a float (`1.5`, `2.0e-3`) starting at `i`.
fn number(src: &str, mut i: usize, end: usize) -> Result<(Tok, usize), SyntaxError> {
    let b = src.as_bytes();
    let start = i;
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

/// Lexes a double-quoted string starting at `i` (the quote).
fn string(src: &str, i: usize, end: usize) -> Result<(String, usize), SyntaxError> {
    let mut out = String::new();
    let mut chars = src[i + 1..end].char_indices();
    while let Some((k, c)) = chars.next() {
        let at = i + 1 + k;
        match c {
            '"' => return Ok((out, at + 1)),
            '#' if src[at + 1..end].starts_with('{') => {
                return Err(SyntaxError::new(
                    Span::new(at, at + 2),
                    "string interpolation is not supported; use `<>`",
                ));
            }
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, '0')) => out.push('\0'),
                Some((_, 'e')) => out.push('\x1b'),
                Some((_, other)) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    Err(SyntaxError::new(
        Span::new(i, i + 1),
        "unterminated string literal",
    ))
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
        let p = split("a<%= x %>b<%# c %>d<%% e %>").unwrap();
        assert_eq!(p.len(), 3);
        assert!(matches!(&p[0], Piece::Text(t) if t == "a"));
        assert!(
            matches!(&p[1], Piece::Tag { kind: TagKind::Output, inner, .. } if *inner == Span::new(4, 7))
        );
        assert!(matches!(&p[2], Piece::Text(t) if t == "bd<% e %>"));
    }

    #[test]
    fn closing_inside_a_string_does_not_close_the_tag() {
        let p = split(r#"<%= "%>" %>!"#).unwrap();
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
    fn bad_numbers_are_errors() {
        for s in ["1__0", "1_", "99999999999999999999", "12abc"] {
            assert!(tokenize(s, Span::new(0, s.len())).is_err(), "{s}");
        }
    }
}
