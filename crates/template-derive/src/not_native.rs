//! Why a template is not compiled natively: the first expression or construct the derive has no
//! Rust lowering for ([`NotNative`]), where it is in the template, and the compile-time messages
//! that name it: the runtime engine's `serde::Serialize` requirement on the fields (rustc's
//! `#[diagnostic::on_unimplemented]` text of a trait generated per template) and the refusal of
//! `#[template(native)]`.

use galleon_template::Value;
use galleon_template::syntax::{BinOp, Expr, ExprKind, Span, UnOp};

/// What compiles natively, in one line, for the messages (the crate docs have the full list).
pub(crate) const NATIVE_SUMMARY: &str = "`@field`, variables, `a.key`, literals other than \
     atoms, `== != === !== < <= > >=`, `not`, `!`, `and or && ||` (as conditions and outputs), \
     `raw(x)`, one-line `if` in an output, `if`/`unless` blocks, `for` over a field, a range or \
     `Enum.with_index` (one generator, with filters), `x = e`, and tags that read no assign or \
     variable (computed at build time)";

/// Longest expression text quoted in a message, in characters; longer ones are cut with `...`.
const QUOTE_CHARS: usize = 60;

/// The template uses a construct compiled only by the runtime engine: byte span `span` of the
/// source is the construct, `what` says what it is ("the function `length`").
#[derive(Debug)]
pub(crate) struct NotNative {
    pub(crate) span: Span,
    pub(crate) what: String,
}

/// A lowering, or the construct that has none.
pub(crate) type R<T> = Result<T, NotNative>;

impl NotNative {
    pub(crate) fn new(span: Span, what: impl Into<String>) -> NotNative {
        NotNative {
            span,
            what: what.into(),
        }
    }

    /// Expression `e` itself has no native lowering (its operands may).
    pub(crate) fn expr(e: &Expr) -> NotNative {
        NotNative::new(e.span, describe(e))
    }

    /// A `case` (`keyword` "case", at its subject) or `cond` (at its first clause's condition)
    /// block: the span runs from the keyword, found in the source before `at`, to `at`'s end.
    pub(crate) fn block(source: &str, keyword: &str, at: Span, what: &str) -> NotNative {
        let start = keyword_before(source, keyword, at.start).unwrap_or(at.start);
        let end = if keyword == "cond" {
            start + keyword.len()
        } else {
            at.end
        };
        NotNative::new(Span::new(start, end), what)
    }

    /// "`length(@items)` (the function `length`) at page.html.eex:3:7": the construct quoted
    /// from template `name`'s `source`, what it is, and its line and column as the engine's
    /// errors give them.
    pub(crate) fn site(&self, name: &str, source: &str) -> String {
        let e = galleon_template::compiled::syntax_error(
            "",
            name,
            source,
            self.span.start,
            self.span.end,
        );
        let (line, column) = (e.line().unwrap_or(1), e.column().unwrap_or(1));
        let text = quote_text(source.get(self.span.start..self.span.end).unwrap_or(""));
        format!("`{text}` ({}) at {name}:{line}:{column}", self.what)
    }

    /// The source line and a caret under the construct, as in the engine's errors.
    fn excerpt(&self, name: &str, source: &str) -> String {
        let e = galleon_template::compiled::syntax_error(
            "",
            name,
            source,
            self.span.start,
            self.span.end,
        );
        let shown = e.to_string();
        // The first line is the location and the (empty) message, already in the sentence.
        shown
            .split_once('\n')
            .map_or(String::new(), |(_, rest)| rest.to_owned())
    }

    /// The error of `#[template(native)]` on a template that is not native: the same sentence
    /// as the fallback's `Serialize` error, the template line, and the ways out.
    pub(crate) fn refusal(&self, name: &str, source: &str) -> String {
        format!(
            "{} is not compiled natively, and `#[template(native)]` refuses the runtime engine\n\
             {}\n\
             rewrite it with what compiles natively: {NATIVE_SUMMARY};\n\
             or remove `native`: the template then renders through the runtime engine, which \
             needs its fields to implement `serde::Serialize`",
            self.site(name, source),
            self.excerpt(name, source),
        )
    }

    /// The `#[diagnostic::on_unimplemented]` strings (message, label, notes) of the trait the
    /// fallback requires of each field it reads: rustc prints them when a field is not
    /// `serde::Serialize`, `{Self}` being the field's type. The template's text is escaped
    /// (`{` `}` are format syntax there).
    pub(crate) fn serialize_diagnostic(&self, name: &str, source: &str) -> [String; 5] {
        let site = escape_format(&self.site(name, source));
        let text = escape_format(&quote_text(
            source.get(self.span.start..self.span.end).unwrap_or(""),
        ));
        [
            format!(
                "{site} is not compiled natively, so this template renders through the runtime \
                 engine, which needs `{{Self}}: serde::Serialize`"
            ),
            "read by the template: the runtime engine converts it with `serde::Serialize`"
                .to_owned(),
            "derive or implement `serde::Serialize` for `{Self}` (for a collection or an \
             `Option`, for what it holds)"
                .to_owned(),
            format!(
                "or rewrite `{text}` with what compiles natively: {}",
                escape_format(NATIVE_SUMMARY)
            ),
            "`#[template(native)]` makes a template that is not compiled natively a build \
             error instead of a runtime-engine render"
                .to_owned(),
        ]
    }
}

/// What expression `e` is, for a message: `e` is a shape with no native lowering.
fn describe(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Call { name, .. } if name == "render" => "a partial".to_owned(),
        ExprKind::Call { name, .. } => format!("the function `{name}`"),
        ExprKind::Binary(op, ..) => match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
                format!("arithmetic, `{}`", op.symbol())
            }
            BinOp::Concat => "string concatenation, `<>`".to_owned(),
            BinOp::ListConcat => "list concatenation, `++`".to_owned(),
            BinOp::In => "membership, `in`".to_owned(),
            BinOp::And | BinOp::Or | BinOp::AndAlso | BinOp::OrElse => format!(
                "`{}` as a value, natively only as a condition or an output",
                op.symbol()
            ),
            _ => format!("the operator `{}` here", op.symbol()),
        },
        ExprKind::Unary(UnOp::Neg, _) => "negation, `-`".to_owned(),
        ExprKind::Unary(..) => "this operator here".to_owned(),
        ExprKind::Index(..) => "access with `[]`".to_owned(),
        ExprKind::Range(..) => "a range, natively only as a `for` generator".to_owned(),
        ExprKind::List(_) => "a list".to_owned(),
        ExprKind::Tuple(_) => "a tuple".to_owned(),
        ExprKind::Map(_) => "a map".to_owned(),
        ExprKind::Interp(_) => "string interpolation".to_owned(),
        ExprKind::If { .. } => "a one-line `if` as a value, natively only output".to_owned(),
        ExprKind::Fn(_) => "an anonymous function".to_owned(),
        ExprKind::FnBlock(_) => "an anonymous function spanning tags".to_owned(),
        ExprKind::Case { .. } => "a `case ... do ... end` inside one expression".to_owned(),
        ExprKind::For { .. } => "a `for` expression".to_owned(),
        ExprKind::Lit(Value::Atom(_)) => "an atom".to_owned(),
        ExprKind::Lit(_) => "this literal".to_owned(),
        ExprKind::Field(..) => "`.key` here".to_owned(),
        ExprKind::Assign(_) | ExprKind::Var(_) => "this value here".to_owned(),
    }
}

/// The start of the last `keyword` before byte `before` that is followed by `do` (`case x do`,
/// `cond do`), if any.
fn keyword_before(source: &str, keyword: &str, before: usize) -> Option<usize> {
    let head = source.get(..before)?;
    head.rmatch_indices(keyword)
        .map(|(i, _)| i)
        .find(|&i| keyword == "case" || source[i + keyword.len()..].trim_start().starts_with("do"))
}

/// Template text as quoted in a message: whitespace runs (newlines too) as one space, at most
/// [`QUOTE_CHARS`] characters.
fn quote_text(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let one_line = words.join(" ");
    if one_line.chars().count() <= QUOTE_CHARS {
        return one_line;
    }
    let cut: String = one_line.chars().take(QUOTE_CHARS - 3).collect();
    format!("{}...", cut.trim_end())
}

/// `text` as literal text of a `#[diagnostic::on_unimplemented]` string (braces doubled).
fn escape_format(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use galleon_template::syntax;

    use super::*;
    use crate::attrs::{Field, Kind};
    use crate::stmt::Gen;

    /// The construct that keeps `source` from compiling natively, as the messages quote it;
    /// `None` when it compiles natively. Fields: `items` (a `Vec`), `user` (a `Value`).
    fn why(source: &str) -> Option<String> {
        let field = |kind, ty| Field {
            kind,
            ty,
            span: proc_macro2::Span::call_site(),
        };
        let fields = BTreeMap::from([
            (
                "items".to_owned(),
                field(Kind::Typed, syn::parse_quote!(Vec<String>)),
            ),
            (
                "user".to_owned(),
                field(Kind::Dynamic, syn::parse_quote!(Value)),
            ),
        ]);
        let nodes = syntax::parse(source, false).unwrap();
        let mut g = Gen::new(source, &fields, 64);
        g.seq(&nodes).err().map(|e| e.site("t.html.eex", source))
    }

    #[test]
    fn names_the_first_construct_with_its_line_and_column() {
        assert_eq!(
            why("<ul>\n  <%= length(@items) %> items\n</ul>").as_deref(),
            Some("`length(@items)` (the function `length`) at t.html.eex:2:7")
        );
        // The innermost construct, not the tag around it.
        assert_eq!(
            why("<%= if @items == [] do %>none<% end %>").as_deref(),
            Some("`[]` (a list) at t.html.eex:1:18")
        );
        assert_eq!(
            why("<p><%= @user.name %></p>").as_deref(),
            Some("`@user.name` (`.name` on a `Value` or a map) at t.html.eex:1:8")
        );
        assert_eq!(why("<%= for x <- @items do %><%= x %><% end %>"), None);
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(
            why("é—<%= String.upcase(\"a\" <> @items) %>").as_deref(),
            Some(
                "`String.upcase(\"a\" <> @items)` (the function `String.upcase`) at t.html.eex:1:7"
            )
        );
    }

    #[test]
    fn blocks_and_patterns_are_located_at_their_keyword() {
        assert_eq!(
            why("a\n<%= case @items do %><% [] -> %>none<% _ -> %>some<% end %>").as_deref(),
            Some("`case @items` (a `case` block) at t.html.eex:2:5")
        );
        assert_eq!(
            why("<%= cond do %>\n<% @items -> %>some<% true -> %>none<% end %>").as_deref(),
            Some("`cond` (a `cond` block) at t.html.eex:1:5")
        );
        assert_eq!(
            why("<% {a, b} = @items %><%= a %>").as_deref(),
            Some("`{a, b}` (a pattern other than a variable) at t.html.eex:1:4")
        );
        assert_eq!(
            why("<%= for x <- @items, y <- @items do %><%= x %><%= y %><% end %>").as_deref(),
            Some("`y <- @items` (a second generator) at t.html.eex:1:22")
        );
        assert_eq!(
            why("<%= for {x, i} <- Enum.with_index(@items, @items) do %><%= x %><% end %>")
                .as_deref(),
            Some(
                "`@items` (an `Enum.with_index` offset that is not a literal integer) at \
                 t.html.eex:1:43"
            )
        );
    }

    #[test]
    fn long_and_multiline_expressions_are_quoted_on_one_line_and_cut() {
        assert_eq!(quote_text("Enum.map(\n    @items,\n    fn x -> x end)"), {
            "Enum.map( @items, fn x -> x end)"
        });
        let long = format!("f({})", "x, ".repeat(40));
        let quoted = quote_text(&long);
        assert!(quoted.chars().count() <= QUOTE_CHARS, "{quoted}");
        assert!(
            quoted.starts_with("f(x, x, x,") && quoted.ends_with("x..."),
            "{quoted}"
        );
        assert_eq!(quote_text("length(@items)"), "length(@items)");
    }

    #[test]
    fn diagnostic_strings_escape_template_braces_and_keep_self() {
        let source = "<% {a, b} = @pair %>";
        let nn = NotNative::new(Span::new(3, 9), "a pattern other than a variable");
        let [message, _, derive, rewrite, _] = nn.serialize_diagnostic("p.html.eex", source);
        assert_eq!(
            message,
            "`{{a, b}}` (a pattern other than a variable) at p.html.eex:1:4 is not compiled \
             natively, so this template renders through the runtime engine, which needs \
             `{Self}: serde::Serialize`"
        );
        assert!(derive.starts_with("derive or implement `serde::Serialize` for `{Self}`"));
        assert!(
            rewrite.starts_with("or rewrite `{{a, b}}` with"),
            "{rewrite}"
        );
    }

    #[test]
    fn refusal_shows_the_template_line_and_caret() {
        let source = "<h1>\n<%= String.upcase(@name) %></h1>";
        let start = source.find("String").unwrap();
        let nn = NotNative::new(Span::new(start, start + 20), "the function `String.upcase`");
        let text = nn.refusal("n.html.eex", source);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..4],
            [
                "`String.upcase(@name)` (the function `String.upcase`) at n.html.eex:2:5 is \
                 not compiled natively, and `#[template(native)]` refuses the runtime engine",
                "  |",
                "2 | <%= String.upcase(@name) %></h1>",
                "  |     ^^^^^^^^^^^^^^^^^^^^",
            ]
        );
        assert!(lines[4].starts_with("rewrite it with what compiles natively: `@field`"));
        assert!(lines[5].starts_with("or remove `native`"));
    }
}
