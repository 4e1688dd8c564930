//! Errors: what went wrong, and where in which template, with a source excerpt and a caret.

use std::fmt;

use crate::span::Span;

/// What kind of error an [`Error`] is. New kinds may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The template does not parse or compile (bad syntax, unknown variable or function).
    Syntax,
    /// `@name` is not among the assigns.
    UnknownAssign,
    /// `map.key` on a map without that key.
    UnknownKey,
    /// A value of the wrong type for an operation (adding a string, iterating a number...).
    TypeMismatch,
    /// Integer overflow or division by zero.
    Arithmetic,
    /// A function registered from Rust got an argument of the wrong type or returned an error.
    Function,
    /// The render went past a [`Limits`](crate::Limits) bound: steps, output size or nesting.
    Limit,
    /// No template by that name (a render call, or a partial that does not exist).
    NotFound,
    /// Reading a template file failed.
    Io,
    /// The assigns given to a render are malformed (not a JSON object...).
    Data,
}

/// Where an error happened: template name, 1-based line and column (in characters), the byte
/// span in the template source, and the source line for the excerpt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    name: String,
    line: usize,
    column: usize,
    span: (usize, usize),
    line_text: String,
    caret_width: usize,
}

impl Location {
    /// Locates byte span `span` of `source` (the whole template text of `name`).
    pub(crate) fn new(name: &str, source: &str, span: Span) -> Location {
        let start = floor_char_boundary(source, span.start.min(source.len()));
        let end = floor_char_boundary(source, span.end.clamp(start, source.len()));
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..]
            .find('\n')
            .map_or(source.len(), |i| start + i);
        let line = source[..start].matches('\n').count() + 1;
        let column = source[line_start..start].chars().count() + 1;
        let caret_width = source[start..end.min(line_end)].chars().count().max(1);
        Location {
            name: name.to_owned(),
            line,
            column,
            span: (start, end),
            line_text: source[line_start..line_end]
                .trim_end_matches('\r')
                .to_owned(),
            caret_width,
        }
    }

    /// The template's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// 1-based line.
    pub fn line(&self) -> usize {
        self.line
    }

    /// 1-based column, counted in characters.
    pub fn column(&self) -> usize {
        self.column
    }

    /// Byte range in the template source.
    pub fn span(&self) -> (usize, usize) {
        self.span
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A template error: a kind, a message and, for anything tied to a template, its [`Location`].
///
/// `Display` prints `name:line:column: message` followed by the source line and a caret under
/// the offending text:
///
/// ```text
/// pages/x.html.eex:2:8: unknown assign @title
///   |
/// 2 | <h1><%= @title %></h1>
///   |         ^^^^^^
/// ```
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: ErrorKind,
    message: String,
    location: Option<Location>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            inner: Box::new(Inner {
                kind,
                message: message.into(),
                location: None,
                source: None,
            }),
        }
    }

    pub(crate) fn at(mut self, location: Location) -> Error {
        self.inner.location = Some(location);
        self
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.inner.source = Some(Box::new(source));
        self
    }

    pub(crate) fn data(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Data, message)
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// The message, without location.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// Where it happened, when it happened in a template.
    pub fn location(&self) -> Option<&Location> {
        self.inner.location.as_ref()
    }

    /// The template name, if located.
    pub fn name(&self) -> Option<&str> {
        self.location().map(Location::name)
    }

    /// The 1-based line, if located.
    pub fn line(&self) -> Option<usize> {
        self.location().map(Location::line)
    }

    /// The 1-based column, if located.
    pub fn column(&self) -> Option<usize> {
        self.location().map(Location::column)
    }

    /// The template does not parse or compile.
    pub fn is_parse(&self) -> bool {
        self.kind() == ErrorKind::Syntax
    }

    /// Rendering failed on the values: unknown assign or key, type mismatch, arithmetic.
    pub fn is_render(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::UnknownAssign
                | ErrorKind::UnknownKey
                | ErrorKind::TypeMismatch
                | ErrorKind::Arithmetic
                | ErrorKind::Function
        )
    }

    /// A [`Limits`](crate::Limits) bound was reached.
    pub fn is_limit(&self) -> bool {
        self.kind() == ErrorKind::Limit
    }

    /// No template by that name.
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// Reading a template failed.
    pub fn is_io(&self) -> bool {
        self.kind() == ErrorKind::Io
    }

    /// The assigns were malformed.
    pub fn is_data(&self) -> bool {
        self.kind() == ErrorKind::Data
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(loc) = &self.inner.location else {
            return f.write_str(&self.inner.message);
        };
        writeln!(
            f,
            "{}:{}:{}: {}",
            loc.name, loc.line, loc.column, self.inner.message
        )?;
        let gutter = loc.line.to_string().len();
        let pad = " ".repeat(gutter);
        // Tabs would misplace the caret; show them as one space each.
        let text = loc.line_text.replace('\t', " ");
        writeln!(f, "{pad} |")?;
        writeln!(f, "{} | {}", loc.line, text)?;
        write!(
            f,
            "{pad} | {}{}",
            " ".repeat(loc.column - 1),
            "^".repeat(loc.caret_width)
        )
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.inner.kind)
            .field("message", &self.inner.message)
            .field("location", &self.inner.location)
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_counts_lines_and_characters() {
        let src = "héllo\n<%= @x %>\n";
        let at = src.find("@x").unwrap();
        let loc = Location::new("t.eex", src, Span::new(at, at + 2));
        assert_eq!((loc.line(), loc.column()), (2, 5));
        let e = Error::new(ErrorKind::UnknownAssign, "unknown assign @x").at(loc);
        assert_eq!(
            e.to_string(),
            "t.eex:2:5: unknown assign @x\n  |\n2 | <%= @x %>\n  |     ^^"
        );
    }

    #[test]
    fn location_survives_out_of_range_spans() {
        let loc = Location::new("t", "ab\u{e9}", Span::new(3, 99));
        assert_eq!((loc.line(), loc.column()), (1, 3));
    }
}
