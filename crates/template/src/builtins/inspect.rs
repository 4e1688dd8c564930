//! `inspect/1`: a value as Elixir 1.14's `Kernel.inspect/1` prints it with its default options,
//! for debug panels (`<pre><%= inspect(@params) %></pre>`):
//!
//! - strings quoted, with Elixir's escapes (`\"`, `\\`, `\#{`, `\n`, `\e`, ...); at most 4,096
//!   characters, then `" <> ...`; a string that is not printable (a control character, a C1
//!   code point) as its bytes, `<<1, 2>>`, at most 50 of them;
//! - atoms `:ok`, `:"a b"` (quoted unless an identifier), `nil`, `true`, `false`;
//! - floats as `inspect` prints them: an integral float below 1e16 in full (`1000.0`, where
//!   `to_string` writes `1.0e3`), any other as `to_string`;
//! - lists `[1, 2]`, keyword lists `[a: 1]`, lists of printable ASCII codes as charlists
//!   (`'hi'`), tuples `{:ok, 1}`; at most 50 elements, then `...`, and as Elixir's
//!   `container_doc`, element `k` is printed with a limit of `50 - k - 1`, so deep in a long
//!   list the nested collections shorten (`[1, 2, ...], [1, ...], [...], ...]`);
//! - maps `%{a: 1, "b c": 2}`: galleon's map keys are strings, printed as the atom keys Phoenix's
//!   assigns have (see the crate docs' differences from EEx), in key order, at most 50 entries.
//!
//! The text is charged to the render's memory budget as it grows: a value sharing its parts
//! (`[acc, acc]` built by a reduce) may print to far more bytes than it holds.

use super::Failure;
use crate::budget;
use crate::float::float_string;
use crate::value::Value;

/// The most elements of a collection printed (`inspect`'s `:limit`).
const LIMIT: usize = 50;

/// The most characters of a string printed (`inspect`'s `:printable_limit`).
const PRINTABLE_LIMIT: usize = 4096;

/// `inspect(v)`.
pub(super) fn inspect(v: &Value) -> Result<String, Failure> {
    let mut p = Printer {
        out: String::new(),
        charged: 0,
    };
    p.value(v, LIMIT)?;
    p.charge()?;
    Ok(p.out)
}

struct Printer {
    out: String,
    /// How much of `out` the memory budget has been charged for.
    charged: usize,
}

impl Printer {
    /// Charges what was written since the last charge.
    fn charge(&mut self) -> Result<(), Failure> {
        budget::charge_str(self.out.len() - self.charged)?;
        self.charged = self.out.len();
        Ok(())
    }

    /// Prints `v`, its collections cut after `limit` elements.
    fn value(&mut self, v: &Value, limit: usize) -> Result<(), Failure> {
        match v {
            Value::Nil => self.out.push_str("nil"),
            Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) => self.out.push_str(&i.to_string()),
            Value::Float(x) => self.out.push_str(&float(*x)),
            Value::Str(s) => self.string(&s.bytes()[..], limit),
            Value::Atom(a) => atom(a.as_str(), &mut self.out),
            Value::Regex(r) => regex(r, &mut self.out),
            // The pair `{:safe, iodata}` it is in Phoenix, cut as a tuple is.
            Value::Safe(html) => match limit {
                0 => self.out.push_str("{...}"),
                1 => self.out.push_str("{:safe, ...}"),
                _ => {
                    self.out.push_str("{:safe, ");
                    self.string(&html.to_bytes()[..], limit - 2);
                    self.out.push('}');
                }
            },
            Value::Tuple(items) => {
                self.out.push('{');
                self.items(items, limit, Printer::value)?;
                self.out.push('}');
            }
            Value::List(items) if charlist(items) => self.charlist(items),
            Value::List(items) if keyword(items) => {
                self.out.push('[');
                self.items(items, limit, |p, pair, limit| match pair {
                    Value::Tuple(kv) => {
                        key(atom_name(&kv[0]), &mut p.out);
                        p.value(&kv[1], limit)
                    }
                    other => p.value(other, limit),
                })?;
                self.out.push(']');
            }
            Value::List(items) => {
                self.out.push('[');
                self.items(items, limit, Printer::value)?;
                self.out.push(']');
            }
            Value::Map(m) => {
                self.out.push_str("%{");
                let mut left = limit;
                for (i, (k, item)) in m.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    if left == 0 {
                        self.out.push_str("...");
                        break;
                    }
                    left -= 1;
                    key(k.as_str(), &mut self.out);
                    self.value(item, left)?;
                    self.charge()?;
                }
                self.out.push('}');
            }
        }
        Ok(())
    }

    /// `items` separated by `, `, the first `limit` of them, then `...`; each printed with
    /// the limit left after it.
    fn items(
        &mut self,
        items: &[Value],
        limit: usize,
        mut each: impl FnMut(&mut Printer, &Value, usize) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        let mut left = limit;
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            if left == 0 {
                self.out.push_str("...");
                break;
            }
            left -= 1;
            each(self, item, left)?;
            self.charge()?;
        }
        Ok(())
    }

    /// A string, quoted when printable (checked over the characters printed), else its bytes,
    /// the first `limit` of them.
    fn string(&mut self, bytes: &[u8], limit: usize) {
        let text = std::str::from_utf8(bytes)
            .ok()
            .filter(|t| t.chars().take(PRINTABLE_LIMIT).all(printable));
        match text {
            Some(t) => {
                self.out.push('"');
                let mut chars = t.chars().peekable();
                let mut n = 0;
                while let Some(c) = chars.next() {
                    if n == PRINTABLE_LIMIT {
                        self.out.push_str("\" <> ...");
                        return;
                    }
                    n += 1;
                    let next = chars.peek().copied();
                    escape(c, '"', next, &mut self.out);
                }
                self.out.push('"');
            }
            None => {
                self.out.push_str("<<");
                for (i, b) in bytes.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    if i == limit {
                        self.out.push_str("...");
                        break;
                    }
                    self.out.push_str(&b.to_string());
                }
                self.out.push_str(">>");
            }
        }
    }

    /// A list of printable ASCII codes as a charlist, `'hi'`.
    fn charlist(&mut self, items: &[Value]) {
        self.out.push('\'');
        let chars: Vec<char> = items
            .iter()
            .filter_map(|v| match v {
                Value::Int(i) => u8::try_from(*i).ok().map(char::from),
                _ => None,
            })
            .collect();
        for (i, &c) in chars.iter().enumerate() {
            if i == PRINTABLE_LIMIT {
                self.out.push_str("' ++ ...");
                return;
            }
            escape(c, '\'', chars.get(i + 1).copied(), &mut self.out);
        }
        self.out.push('\'');
    }
}

/// Appends `c` as it reads inside a literal quoted by `quote`, `next` the character after it
/// (`#` is escaped only before `{`, where it would start an interpolation).
fn escape(c: char, quote: char, next: Option<char>, out: &mut String) {
    match c {
        '\\' => out.push_str("\\\\"),
        '#' if next == Some('{') => out.push_str("\\#"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{0b}' => out.push_str("\\v"),
        '\u{08}' => out.push_str("\\b"),
        '\u{0c}' => out.push_str("\\f"),
        '\u{1b}' => out.push_str("\\e"),
        '\u{7f}' => out.push_str("\\d"),
        '\u{07}' => out.push_str("\\a"),
        // The byte order mark, invisible but printable, is spelled out as Elixir does.
        '\u{feff}' => out.push_str("\\uFEFF"),
        c if c == quote => {
            out.push('\\');
            out.push(c);
        }
        c => out.push(c),
    }
}

/// A regex as Elixir 1.14's `Inspect.Regex` prints it: `~r/source/opts`, `/` escaped (an
/// escaped pair `\\c` kept as written), `#{` as `\\#{`, control characters as `\\n` or `\\xHH`.
fn regex(r: &crate::regexp::Regex, out: &mut String) {
    out.push_str("~r/");
    let mut chars = r.source().chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        match c {
            '\\' => {
                out.push('\\');
                if let Some(n) = next.filter(|&n| n != '#') {
                    out.push(n);
                    chars.next();
                }
            }
            '#' if next == Some('{') => out.push_str("\\#"),
            '/' => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{07}' => out.push_str("\\a"),
            c if printable(c) && !c.is_ascii_control() => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push_str(&format!("\\x{{{:X}}}", c as u32)),
        }
    }
    out.push('/');
    out.push_str(r.opts());
}

/// Elixir's `String.printable?/1` for one character.
fn printable(c: char) -> bool {
    matches!(c as u32,
        0x20..=0x7E | 0xA0..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
        || matches!(
            c,
            '\n' | '\r' | '\t' | '\u{0b}' | '\u{08}' | '\u{0c}' | '\u{1b}' | '\u{7f}' | '\u{07}'
        )
}

/// Whether a list prints as a charlist: not empty, and every element the code of a printable
/// ASCII character (Elixir's `List.ascii_printable?/1`).
fn charlist(items: &[Value]) -> bool {
    !items.is_empty()
        && items.iter().all(|v| {
            matches!(v, Value::Int(i) if (0x20..=0x7E).contains(i)
                || matches!(i, 7..=13 | 27))
        })
}

/// Whether a list prints as a keyword list: not empty, and every element a pair whose first
/// element is an atom.
fn keyword(items: &[Value]) -> bool {
    !items.is_empty()
        && items.iter().all(|v| {
            matches!(v, Value::Tuple(t)
                if t.len() == 2 && matches!(t[0], Value::Atom(_) | Value::Bool(_) | Value::Nil))
        })
}

fn atom_name(v: &Value) -> &str {
    match v {
        Value::Atom(a) => a.as_str(),
        Value::Bool(true) => "true",
        Value::Bool(false) => "false",
        _ => "nil",
    }
}

/// Whether an atom's name needs no quotes: an identifier (letters, digits, `_`, `@`, not
/// starting with a digit or `@`), optionally ending in `?` or `!`.
fn identifier(name: &str) -> bool {
    let body = name.strip_suffix(['?', '!']).unwrap_or(name);
    let mut chars = body.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '@')
}

/// The operators and special forms an atom prints bare as, as a value (`:+`, `:<>`) and as a
/// key (`[!: 1]`): Elixir 1.14's list, found by inspecting each (`:"~~~"`, `:"//"` and `:"::"`
/// are quoted).
const OPERATORS: &[&str] = &[
    "+", "-", "*", "/", "==", "!=", "===", "!==", "<", ">", "<=", ">=", "<>", "++", "--", "|>",
    "!", "&&", "||", "=~", "..", "...", "..//", "@", ".", "^", "<<<", ">>>", "&&&", "|||", "<~",
    "~>", "<~>", "<-", "\\\\", "=", "|", "&", "->", "%{}", "{}", "%", "<<>>", "+++", "---",
];

/// Appends atom `name` as `inspect` prints it: `:ok`, `:"a b"`, `Foo` for `:"Elixir.Foo"`.
fn atom(name: &str, out: &mut String) {
    if let Some(alias) = name.strip_prefix("Elixir.")
        && !alias.is_empty()
        && alias.split('.').all(|part| {
            part.starts_with(|c: char| c.is_ascii_uppercase())
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    {
        out.push_str(alias);
        return;
    }
    out.push(':');
    if identifier(name) || OPERATORS.contains(&name) {
        out.push_str(name);
    } else {
        quoted(name, out);
    }
}

/// Appends a map's or a keyword list's key as an atom key: `a: ` or `"a b": `.
fn key(name: &str, out: &mut String) {
    if identifier(name) || OPERATORS.contains(&name) {
        out.push_str(name);
    } else {
        quoted(name, out);
    }
    out.push_str(": ");
}

fn quoted(name: &str, out: &mut String) {
    out.push('"');
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        escape(c, '"', next, out);
    }
    out.push('"');
}

/// A float as `inspect` prints it: an integral float of magnitude from 1 to 1e16 with all its
/// digits (`1000.0`), any other as `to_string` does (`1.0e16`, `0.1`).
fn float(x: f64) -> String {
    if (1.0..1.0e16).contains(&x.abs()) && x.trunc() == x {
        format!("{}.0", x as i64)
    } else {
        float_string(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_elixir_inspects() {
        // Each checked against `inspect/1` in Elixir 1.14.
        let s = |t: &str| Value::str(t);
        let ints = |xs: &[i64]| Value::list(xs.iter().map(|&i| Value::Int(i)));
        for (v, want) in [
            (s("a\"b\\c\n\t#{x}"), r#""a\"b\\c\n\t\#{x}""#),
            (s("\u{1}a"), "<<1, 97>>"),
            (s("\u{85}"), "<<194, 133>>"),
            (Value::atom("ok"), ":ok"),
            (Value::atom("a b"), r#":"a b""#),
            (Value::atom("foo?"), ":foo?"),
            (Value::atom("9a"), r#":"9a""#),
            (Value::atom("Elixir.Foo"), "Foo"),
            (Value::Float(1000.0), "1000.0"),
            (Value::Float(1.0e16), "1.0e16"),
            (Value::Float(0.1), "0.1"),
            (ints(&[104, 105]), "'hi'"),
            (ints(&[127, 104]), "[127, 104]"),
            (ints(&[]), "[]"),
            (
                Value::list([Value::Tuple(vec![Value::atom("b c"), Value::Int(2)].into())]),
                r#"["b c": 2]"#,
            ),
            (
                Value::map([("a", Value::Int(1)), ("first name", Value::Nil)]),
                r#"%{a: 1, "first name": nil}"#,
            ),
            (
                Value::Tuple(vec![Value::atom("ok"), Value::Bool(true)].into()),
                "{:ok, true}",
            ),
        ] {
            assert_eq!(inspect(&v).unwrap(), want);
        }
        let long = inspect(&ints(&(1..=51).collect::<Vec<_>>())).unwrap();
        assert!(long.ends_with("49, 50, ...]"), "{long}");
        let nested = Value::list((0..60).map(|_| ints(&[1, 2, 3])));
        let nested = inspect(&nested).unwrap();
        assert!(
            nested.ends_with("[1, 2, 3], [1, 2, ...], [1, ...], [...], ...]"),
            "{nested}"
        );
        let text = inspect(&s(&"x".repeat(5000))).unwrap();
        assert!(text.ends_with("xx\" <> ...") && text.len() == 4096 + 9);
    }
}
