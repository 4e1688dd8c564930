//! Parser: tags and text to a tree of [`Node`]s, with block structure (`for`, `if`, `unless`,
//! `case`, `cond`, `else`, `->` clauses, `end`) checked. Expressions are parsed in `expr.rs`
//! (`if` and `case` inside one expression in `conditional.rs`, lists, tuples and maps in
//! `collections.rs`), patterns checked in `pattern.rs`; `fn` and `with` blocks over several
//! tags are read in `blocks.rs`.

mod blocks;
mod collections;
mod conditional;
mod expr;
mod height;
mod lambda;
mod pattern;
mod sigil;

use crate::ast::{Clause, Expr, ExprKind, Node, Pattern, Qualifier, Span};
use crate::lexer::{Piece, SyntaxError, TagKind, Tok, Token, split, tokenize};
use blocks::{OpenFn, OpenWith, clause_head, for_into};
use expr::Parser;
use pattern::{check_bindings, to_pattern};

/// Deepest nesting the parser accepts, counted separately for blocks (`for`, `if`... inside one
/// another), for each expression (the height of its tree: `(((x)))` and `1 + 1 + 1 + 1` are
/// both 4 levels, as are 3 pipes or `and`s after a value), and for strings in `#{...}`
/// interpolations. A guess with a wide margin: real templates nest a handful of levels.
///
/// Past it, parsing fails with a located syntax error. This is what keeps every pass over the
/// tree (compiling, rendering, the derive's code generation, dropping it) within a small stack
/// on any thread: the parser itself recurses at most this deep, and builds no deeper tree, even
/// where it builds iteratively (left-associative operators, `a.b.c`, `a[i][j]`); see
/// `height.rs`. `tests/depth.rs` compiles and renders the deepest accepted shapes on a thread
/// with a 256 KiB stack.
pub(crate) const MAX_NESTING: usize = 64;

pub(crate) use conditional::WITH_OTHER;
pub(crate) use expr::{STEP, STEPPED_RANGE};
pub(crate) use height::too_deep;

/// A block opened by a tag and not yet closed.
struct Open {
    kind: OpenKind,
    span: Span,
    /// Opened with `<%`: EEx evaluates it and drops its value, so it outputs nothing.
    silent: bool,
    body: Vec<Node>,
    otherwise: Option<Vec<Node>>,
}

enum OpenKind {
    /// The qualifiers, and the collectable of `into: x`.
    For(Vec<Qualifier>, Option<Expr>),
    /// `bind`: `if name = value do`, the variable `cond` is bound to (see [`bound_if`]).
    If {
        cond: Expr,
        negate: bool,
        bind: Option<(String, Span)>,
    },
    /// `clauses` are complete; `pending` is the clause whose body is being read.
    Case {
        subject: Expr,
        clauses: Vec<Clause>,
        pending: Option<(crate::ast::Pattern, Option<Expr>)>,
    },
    Cond {
        clauses: Vec<(Expr, Vec<Node>)>,
        pending: Option<Expr>,
    },
    Fn(OpenFn),
    With(OpenWith),
}

impl OpenKind {
    fn word(&self) -> &'static str {
        match self {
            OpenKind::For(..) => "for",
            OpenKind::Fn(_) => "fn",
            OpenKind::With(_) => "with",
            OpenKind::If { negate: false, .. } => "if",
            OpenKind::If { negate: true, .. } => "unless",
            OpenKind::Case { .. } => "case",
            OpenKind::Cond { .. } => "cond",
        }
    }
}

impl Open {
    /// Closes the clause being read (of a `case` or `cond`), if any.
    fn end_clause(&mut self) {
        let body = std::mem::take(&mut self.body);
        match &mut self.kind {
            OpenKind::Case {
                clauses, pending, ..
            } => {
                if let Some((pattern, guard)) = pending.take() {
                    clauses.push(Clause {
                        pattern,
                        guard,
                        body,
                    });
                }
            }
            OpenKind::Cond { clauses, pending } => {
                if let Some(cond) = pending.take() {
                    clauses.push((cond, body));
                }
            }
            OpenKind::For(..) | OpenKind::If { .. } | OpenKind::Fn(_) | OpenKind::With(_) => {
                self.body = body
            }
        }
    }

    /// The block's nodes, closed by a `<% end %>` (a `fn` block is closed in [`parse`]).
    fn close(mut self) -> Result<Vec<Node>, SyntaxError> {
        self.end_clause();
        Ok(vec![match self.kind {
            OpenKind::For(qualifiers, None) => Node::For {
                qualifiers,
                body: self.body,
            },
            OpenKind::For(qualifiers, Some(into)) => {
                return Ok(for_into(qualifiers, into, self.body));
            }
            OpenKind::With(with) => with.close(self.body, self.span),
            OpenKind::Fn(f) => {
                return Err(SyntaxError::new(
                    f.at,
                    "a `fn` spanning tags is closed by `<% end) %>`, its call's closing parenthesis after `end`",
                ));
            }
            OpenKind::If {
                cond,
                negate,
                bind: None,
            } => Node::If {
                cond,
                negate,
                then: self.body,
                otherwise: self.otherwise.unwrap_or_default(),
            },
            OpenKind::If {
                cond,
                negate,
                bind: Some((name, span)),
            } => {
                let (truthy, falsy) = (self.body, self.otherwise.unwrap_or_default());
                let (when_truthy, when_falsy) = if negate {
                    (falsy, truthy)
                } else {
                    (truthy, falsy)
                };
                let var = || Pattern::Var(Some(name.clone()), span);
                Node::Case {
                    subject: cond,
                    clauses: vec![
                        Clause {
                            pattern: var(),
                            guard: Some(Expr {
                                kind: ExprKind::Var(name.clone()),
                                span,
                            }),
                            body: when_truthy,
                        },
                        Clause {
                            pattern: var(),
                            guard: None,
                            body: when_falsy,
                        },
                    ],
                }
            }
            OpenKind::Case {
                subject, clauses, ..
            } => {
                if clauses.is_empty() {
                    return Err(SyntaxError::new(
                        self.span,
                        "`case` needs at least one `<% pattern -> %>` clause",
                    ));
                }
                Node::Case { subject, clauses }
            }
            OpenKind::Cond { clauses, .. } => {
                if clauses.is_empty() {
                    return Err(SyntaxError::new(
                        self.span,
                        "`cond` needs at least one `<% condition -> %>` clause",
                    ));
                }
                Node::Cond { clauses }
            }
        }])
    }

    /// Where nodes go now: the `else` branch once it has begun.
    fn nodes(&mut self) -> &mut Vec<Node> {
        match &mut self.otherwise {
            Some(o) => o,
            None => &mut self.body,
        }
    }

    /// A `case`/`cond` before its first clause: only whitespace may stand there.
    fn awaiting_clause(&self) -> bool {
        matches!(
            &self.kind,
            OpenKind::Case { pending: None, clauses, .. } if clauses.is_empty()
        ) || matches!(
            &self.kind,
            OpenKind::Cond { pending: None, clauses } if clauses.is_empty()
        )
    }
}

fn current<'a>(stack: &'a mut [Open], top: &'a mut Vec<Node>) -> &'a mut Vec<Node> {
    match stack.last_mut() {
        Some(open) => open.nodes(),
        None => top,
    }
}

/// What a tag holds.
enum Tag {
    /// `end`, and the tokens after it (`end)` closing a `fn` block).
    End(Vec<Token>),
    Else,
    Open(OpenKind),
    /// `pattern [when guard] ->` (a `case` clause) or `condition ->` (a `cond` clause): the
    /// tokens before `->`.
    Clause(Vec<Token>),
    /// `fn params ->` ending the tag, after the start of its call: a `fn` block.
    OpenFn(OpenFn),
    Expr(Expr),
    Bind(crate::ast::Pattern, Expr),
}

/// Parses a whole template.
pub fn parse(src: &str, trim: bool) -> Result<Vec<Node>, SyntaxError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    for piece in split(src, trim)? {
        let (kind, open, inner) = match piece {
            Piece::Text(t) => {
                if let Some(open) = stack.last()
                    && open.awaiting_clause()
                {
                    if t.trim().is_empty() {
                        continue;
                    }
                    return Err(SyntaxError::new(
                        open.span,
                        format!(
                            "only whitespace may stand between `{} ... do` and its first clause",
                            open.kind.word()
                        ),
                    ));
                }
                current(&mut stack, &mut nodes).push(Node::Text(t));
                continue;
            }
            Piece::Tag { kind, open, inner } => (kind, open, inner),
        };
        let tokens = tokenize(src, inner)?;
        let tag_span = Span::new(open.start, inner.end + 2);
        match classify(tokens, tag_span)? {
            Tag::End(suffix) => {
                let Some(block) = stack.pop() else {
                    return Err(SyntaxError::new(
                        tag_span,
                        "`end` without an open `for`, `if`, `unless`, `case` or `cond`",
                    ));
                };
                let silent = block.silent;
                if let OpenKind::Fn(f) = block.kind {
                    // The call the `fn` is an argument of: its value is output (or, opened
                    // with `<%`, evaluated and dropped, as EEx does).
                    let mut p = f.close(block.body, suffix, inner.end);
                    let node = match expr_tag(&mut p)? {
                        Tag::Bind(pattern, value) => Node::Bind {
                            pattern,
                            value,
                            output: !silent,
                        },
                        Tag::Expr(e) if silent => Node::Exec(e),
                        Tag::Expr(e) => Node::Output(e),
                        _ => unreachable!("expr_tag makes expressions and bindings"),
                    };
                    current(&mut stack, &mut nodes).push(node);
                } else if let Some(t) = suffix.first() {
                    return Err(SyntaxError::new(
                        t.span,
                        "`end` must stand alone in its tag (only a `fn` block's `end` takes more)",
                    ));
                } else {
                    let closed = block.close()?;
                    // A block opened with `<%` outputs nothing (EEx evaluates it and drops the
                    // value): it is checked, then left out.
                    if !silent {
                        current(&mut stack, &mut nodes).extend(closed);
                    }
                }
            }
            Tag::Else => match stack.last_mut() {
                Some(open) => match (&open.kind, &open.otherwise) {
                    (OpenKind::If { .. }, None) => open.otherwise = Some(Vec::new()),
                    (OpenKind::If { .. }, Some(_)) => {
                        return Err(SyntaxError::new(tag_span, "a second `else` in one block"));
                    }
                    (OpenKind::With(_), _) => {
                        return Err(SyntaxError::new(
                            tag_span,
                            "a `with`'s `else` takes its first clause in the same tag, as EEx \
                             wants: `<% else {:error, reason} -> %>`",
                        ));
                    }
                    (other, _) => {
                        return Err(SyntaxError::new(
                            tag_span,
                            format!("`{}` has no `else` branch", other.word()),
                        ));
                    }
                },
                None => {
                    return Err(SyntaxError::new(
                        tag_span,
                        "`else` outside an `if` or `unless` block",
                    ));
                }
            },
            Tag::Clause(tokens) => {
                let Some(open) = stack.last_mut() else {
                    return Err(SyntaxError::new(
                        tag_span,
                        "a `->` clause outside a `case` or `cond` block",
                    ));
                };
                let end = tokens.last().map_or(tag_span.end, |t| t.span.end);
                let starts_else = matches!(
                    tokens.first(),
                    Some(Token { tok: Tok::Ident(w), .. }) if w == "else"
                );
                match &mut open.kind {
                    OpenKind::With(with) if starts_else => {
                        let body = std::mem::take(&mut open.body);
                        with.begin_else(tokens[1..].to_vec(), body, tag_span)?;
                    }
                    _ if starts_else => {
                        return Err(SyntaxError::new(
                            tag_span,
                            format!("`{}` has no `else ... ->` clauses", open.kind.word()),
                        ));
                    }
                    OpenKind::With(with) => {
                        let body = std::mem::take(&mut open.body);
                        with.clause(tokens, body, tag_span)?;
                    }
                    OpenKind::Fn(f) => {
                        let body = std::mem::take(&mut open.body);
                        let mut tokens = tokens;
                        tokens.push(Token {
                            tok: Tok::Sym("->"),
                            span: Span::new(end, end),
                            after_break: false,
                        });
                        f.clause(tokens, body, end)?;
                    }
                    OpenKind::Case { .. } => {
                        let head = clause_head(tokens, end)?;
                        open.end_clause();
                        if let OpenKind::Case { pending, .. } = &mut open.kind {
                            *pending = Some(head);
                        }
                    }
                    OpenKind::Cond { .. } => {
                        let mut p = Parser::new(tokens, end);
                        let cond = p.expr()?;
                        if let Some(t) = p.tokens.get(p.pos) {
                            return Err(SyntaxError::new(t.span, "unexpected token before `->`"));
                        }
                        open.end_clause();
                        if let OpenKind::Cond { pending, .. } = &mut open.kind {
                            *pending = Some(cond);
                        }
                    }
                    other => {
                        return Err(SyntaxError::new(
                            tag_span,
                            format!("`{}` has no `->` clauses", other.word()),
                        ));
                    }
                }
            }
            Tag::OpenFn(f) => {
                if stack.len() >= MAX_NESTING {
                    return Err(too_deep(tag_span, "blocks"));
                }
                stack.push(Open {
                    kind: OpenKind::Fn(f),
                    span: tag_span,
                    silent: kind == TagKind::Exec,
                    body: Vec::new(),
                    otherwise: None,
                });
            }
            Tag::Open(block) => {
                if stack.len() >= MAX_NESTING {
                    return Err(too_deep(tag_span, "blocks"));
                }
                stack.push(Open {
                    kind: block,
                    span: tag_span,
                    silent: kind == TagKind::Exec,
                    body: Vec::new(),
                    otherwise: None,
                });
            }
            Tag::Expr(e) => {
                let node = match kind {
                    TagKind::Output => Node::Output(e),
                    TagKind::Exec => Node::Exec(e),
                };
                current(&mut stack, &mut nodes).push(node);
            }
            Tag::Bind(pattern, value) => {
                current(&mut stack, &mut nodes).push(Node::Bind {
                    pattern,
                    value,
                    output: kind == TagKind::Output,
                });
            }
        }
        if let Some(open) = stack.last()
            && open.awaiting_clause()
            && !current_is_empty(&stack)
        {
            return Err(SyntaxError::new(
                tag_span,
                format!("expected a `->` clause in `{}`", open.kind.word()),
            ));
        }
    }
    if let Some(open) = stack.pop() {
        let end = match open.kind {
            OpenKind::Fn(_) => "end)",
            _ => "end",
        };
        return Err(SyntaxError::new(
            open.span,
            format!(
                "`{}` block is never closed with `<% {end} %>`",
                open.kind.word()
            ),
        ));
    }
    Ok(nodes)
}

fn current_is_empty(stack: &[Open]) -> bool {
    stack.last().is_none_or(|o| o.body.is_empty())
}

fn classify(tokens: Vec<Token>, tag_span: Span) -> Result<Tag, SyntaxError> {
    let first = match tokens.first() {
        Some(Token {
            tok: Tok::Ident(w), ..
        }) => Some(w.clone()),
        _ => None,
    };
    match (first.as_deref(), tokens.len()) {
        (_, 0) => return Err(SyntaxError::new(tag_span, "empty tag")),
        (Some("end"), 1) => return Ok(Tag::End(Vec::new())),
        (Some("else"), 1) => return Ok(Tag::Else),
        _ => {}
    }
    if matches!(
        tokens.last(),
        Some(Token {
            tok: Tok::Sym("->"),
            ..
        })
    ) {
        if let Some(open) = OpenFn::open(&tokens) {
            return Ok(Tag::OpenFn(open?));
        }
        let mut tokens = tokens;
        tokens.pop();
        if tokens.is_empty() {
            return Err(SyntaxError::new(tag_span, "expected a pattern before `->`"));
        }
        return Ok(Tag::Clause(tokens));
    }
    let mut p = Parser::new(tokens, tag_span.end.saturating_sub(2));
    let ends_with_do =
        matches!(p.tokens.last(), Some(Token { tok: Tok::Ident(w), .. }) if w == "do");
    let tag = match first.as_deref() {
        Some("for") if ends_with_do => {
            p.pos = 1;
            let (qualifiers, into) = p.qualifiers_into(false)?;
            Tag::Open(OpenKind::For(qualifiers, into))
        }
        Some("with") if ends_with_do => {
            p.pos = 1;
            let steps = p.with_steps()?;
            p.expect_word("do")?;
            Tag::Open(OpenKind::With(OpenWith::new(steps)))
        }
        Some(w @ ("if" | "unless")) if ends_with_do => {
            p.pos = 1;
            let negate = w == "unless";
            let mut cond = p.expr()?;
            let mut bind = None;
            if p.eat_sym("=") {
                bind = Some(bound_name(&cond, w)?);
                cond = p.expr()?;
            }
            p.expect_word("do")?;
            Tag::Open(OpenKind::If { cond, negate, bind })
        }
        Some("case") if ends_with_do => {
            p.pos = 1;
            let subject = p.expr()?;
            p.expect_word("do")?;
            Tag::Open(OpenKind::Case {
                subject,
                clauses: Vec::new(),
                pending: None,
            })
        }
        Some("cond") => {
            p.pos = 1;
            p.expect_word("do")?;
            Tag::Open(OpenKind::Cond {
                clauses: Vec::new(),
                pending: None,
            })
        }
        Some("end") => return Ok(Tag::End(p.tokens.split_off(1))),
        Some(w @ ("else" | "do")) => {
            return Err(SyntaxError::new(
                p.tokens[0].span,
                format!("`{w}` must stand alone in its tag"),
            ));
        }
        _ => return expr_tag(&mut p),
    };
    end_of_tag(&p)?;
    Ok(tag)
}

/// A tag holding an expression, or a binding `pattern = expr`, all of `p`'s tokens.
fn expr_tag(p: &mut Parser) -> Result<Tag, SyntaxError> {
    let e = p.expr()?;
    if p.eat_sym("=") {
        let pattern = to_pattern(e)?;
        check_bindings(&pattern)?;
        let value = p.expr()?;
        end_of_tag(p)?;
        return Ok(Tag::Bind(pattern, value));
    }
    if p.peek_word() == Some("do") {
        return Err(SyntaxError::new(
            p.tokens[p.pos].span,
            "only `for`, `if`, `unless`, `case`, `cond` and `with` open blocks",
        ));
    }
    end_of_tag(p)?;
    Ok(Tag::Expr(e))
}

/// The variable of `if name = value do` (the flash idiom of Phoenix's generators,
/// `if info = get_flash(@conn, :info) do`): bound to the value in both branches, the first
/// taken when it is truthy. Only a variable: Elixir raises when another pattern does not
/// match, which a condition hardly means.
pub(super) fn bound_name(cond: &Expr, word: &str) -> Result<(String, Span), SyntaxError> {
    match &cond.kind {
        ExprKind::Var(name) if !name.starts_with('&') => Ok((name.clone(), cond.span)),
        _ => Err(SyntaxError::new(
            cond.span,
            format!(
                "only a variable can be bound in an `{word}` condition (`{word} user = @current_user do`)"
            ),
        )),
    }
}

fn end_of_tag(p: &Parser) -> Result<(), SyntaxError> {
    match p.tokens.get(p.pos) {
        Some(t) => Err(SyntaxError::new(
            t.span,
            "unexpected token after expression",
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{ExprKind, Pattern};

    fn expr(s: &str) -> Expr {
        let src = format!("<%= {s} %>");
        match parse(&src, false).unwrap().pop() {
            Some(Node::Output(e)) => e,
            other => panic!("not an output: {other:?}"),
        }
    }

    fn shape(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Lit(v) => format!("{v:?}"),
            ExprKind::Assign(n) => format!("@{n}"),
            ExprKind::Var(n) => n.clone(),
            ExprKind::Field(e, k) => format!("{}.{k}", shape(e)),
            ExprKind::Index(e, i) => format!("{}[{}]", shape(e), shape(i)),
            ExprKind::Unary(op, e) => format!("({op:?} {})", shape(e)),
            ExprKind::Binary(op, a, b) => {
                format!("({} {} {})", shape(a), op.symbol(), shape(b))
            }
            ExprKind::Range(a, b) => format!("({}..{})", shape(a), shape(b)),
            ExprKind::FnBlock(clauses) => clauses
                .iter()
                .map(|c| format!("fnblock/{}({} nodes)", c.params.len(), c.body.len()))
                .collect::<Vec<_>>()
                .join(";"),
            ExprKind::Fn(clauses) => clauses
                .iter()
                .map(|c| {
                    let guard = c
                        .guard
                        .as_ref()
                        .map_or(String::new(), |g| format!(" when {}", shape(g)));
                    format!("fn/{}{guard}({})", c.params.len(), shape(&c.body))
                })
                .collect::<Vec<_>>()
                .join(";"),
            ExprKind::Case { subject, clauses } => {
                let bodies: Vec<String> = clauses.iter().map(|c| shape(&c.body)).collect();
                format!("case({};{})", shape(subject), bodies.join(";"))
            }
            ExprKind::For { qualifiers, body } => {
                format!("for/{}({})", qualifiers.len(), shape(body))
            }
            ExprKind::List(items) | ExprKind::Tuple(items) | ExprKind::Interp(items) => {
                format!(
                    "[{}]",
                    items.iter().map(shape).collect::<Vec<_>>().join(",")
                )
            }
            ExprKind::Map(entries) => entries
                .iter()
                .map(|(k, v)| format!("{}=>{}", shape(k), shape(v)))
                .collect::<Vec<_>>()
                .join(","),
            ExprKind::If {
                cond,
                then,
                otherwise,
                ..
            } => format!(
                "if({},{},{})",
                shape(cond),
                shape(then),
                otherwise.as_ref().map_or("-".to_owned(), |o| shape(o))
            ),
            ExprKind::Call {
                name, args, kwargs, ..
            } => format!(
                "{name}({}{})",
                args.iter().map(shape).collect::<Vec<_>>().join(","),
                kwargs
                    .iter()
                    .map(|(k, _, v)| format!(",{k}:{}", shape(v)))
                    .collect::<String>()
            ),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(shape(&expr("1 + 2 * 3")), "(1 + (2 * 3))");
        assert_eq!(shape(&expr("1 - 2 - 3")), "((1 - 2) - 3)");
        assert_eq!(
            shape(&expr("\"a\" <> \"b\" <> \"c\"")),
            "(\"a\" <> (\"b\" <> \"c\"))"
        );
        assert_eq!(
            shape(&expr("a.b[0] == 1 and not c or d")),
            "(((a.b[0] == 1) and (Not c)) or d)"
        );
        assert_eq!(shape(&expr("1..@n + 1")), "(1..(@n + 1))");
        assert_eq!(shape(&expr("-5")), "-5");
        assert_eq!(
            shape(&expr("render(\"x.html.eex\", a: 1, b: @b)")),
            "render(\"x.html.eex\",a:1,b:@b)"
        );
        assert_eq!(shape(&expr("String.upcase(x)")), "String.upcase(x)");
        assert_eq!(
            shape(&expr("@xs |> Enum.map(1) |> Enum.join(\",\")")),
            "Enum.join(Enum.map(@xs,1),\",\")"
        );
        assert_eq!(shape(&expr("a in [1] and b")), "((a in [1]) and b)");
        assert_eq!(shape(&expr("if a, do: 1, else: 2")), "if(a,1,2)");
        assert_eq!(shape(&expr("x not in [1]")), "(Not (x in [1]))");
    }

    #[test]
    fn anonymous_functions_and_captures() {
        assert_eq!(shape(&expr("fn x -> x * 2 end")), "fn/1((x * 2))");
        assert_eq!(shape(&expr("fn x, acc -> acc end")), "fn/2(acc)");
        assert_eq!(shape(&expr("fn -> 1 end")), "fn/0(1)");
        assert_eq!(
            shape(&expr("fn 3 -> :three; x when x > 9 -> x end")),
            "fn/1(:three);fn/1 when (x > 9)(x)"
        );
        // Clauses on their own lines; a line break also ends a call without parentheses.
        assert_eq!(
            shape(&expr("fn\n  0 -> f\n  x -> x\nend")),
            "fn/1(f);fn/1(x)"
        );
        assert_eq!(shape(&expr("&(&1 + 1)")), "fn/1((&1 + 1))");
        assert_eq!(shape(&expr("& &1.name")), "fn/1(&1.name)");
        assert_eq!(shape(&expr("&(&2 <> &1)")), "fn/2((&2 <> &1))");
        assert_eq!(shape(&expr("&String.upcase/1")), "fn/1(String.upcase(&1))");
        assert_eq!(shape(&expr("&rem/2")), "fn/2(rem(&1,&2))");
        assert_eq!(
            shape(&expr("@xs |> Enum.map(&(&1 * 2)) |> length")),
            "length(Enum.map(@xs,fn/1((&1 * 2))))"
        );
        assert_eq!(shape(&expr("for x <- @xs, x > 1, do: x")), "for/2(x)");
        assert_eq!(
            shape(&expr("Enum.join(for(x <- @xs, do: x))")),
            "Enum.join(for/1(x))"
        );
        for (bad, why) in [
            ("for x <- @xs, do x", "unexpected keyword `do`"),
            ("fn x -> x", "expected `end` closing the `fn`"),
            ("fn x -> x y", "expected `end` closing the `fn`"),
            (
                "fn 1 -> :a; x, y -> x end",
                "must take the same number of parameters",
            ),
            ("fn x x end", "not a pattern"),
            ("fn x y -> x end", "not a pattern"),
            ("fn x, x -> x end", "bound twice"),
            ("&(1 + 1)", "must use its argument `&1`"),
            ("&(&2)", "&2 cannot be defined without &1"),
            ("&(&9)", "expected &1 to &8"),
        ] {
            let e = parse(&format!("<%= {bad} %>"), false).unwrap_err();
            assert!(e.message.contains(why), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn map_patterns() {
        let nodes = parse(
            "<%= case @o do %><% %{status: \"paid\", total: t} -> %><%= t %><% %{} -> %>-<% end %>",
            false,
        )
        .unwrap();
        let [Node::Case { clauses, .. }] = &nodes[..] else {
            panic!("{nodes:?}")
        };
        match (&clauses[0].pattern, &clauses[1].pattern) {
            (Pattern::Map(first, _), Pattern::Map(empty, _)) => {
                let keys: Vec<&str> = first.iter().map(|(k, _)| k.as_str()).collect();
                assert_eq!(keys, ["status", "total"]);
                assert!(matches!(first[1].1, Pattern::Var(Some(ref n), _) if n == "t"));
                assert!(empty.is_empty());
            }
            other => panic!("{other:?}"),
        }
        let e = parse("<% %{@k => v} = @m %>", false).unwrap_err();
        assert!(
            e.message.contains("keys are atoms or strings"),
            "{}",
            e.message
        );
        let e = parse("<% %{a: x, b: x} = @m %>", false).unwrap_err();
        assert!(e.message.contains("bound twice"), "{}", e.message);
    }

    /// Calls without parentheses, as Phoenix templates write them (`raw @html`): the arguments
    /// are whole expressions, up to a token after one that is not a comma.
    #[test]
    fn calls_without_parentheses() {
        assert_eq!(shape(&expr("raw @html")), "raw(@html)");
        assert_eq!(shape(&expr("length @xs > 0")), "length((@xs > 0))");
        assert_eq!(
            shape(&expr("String.upcase @a <> \"!\"")),
            "String.upcase((@a <> \"!\"))"
        );
        assert_eq!(
            shape(&expr("render \"x.html.eex\", a: 1")),
            "render(\"x.html.eex\",a:1)"
        );
        assert_eq!(shape(&expr("f g x, [1]")), "f(g(x,[1]))");
        assert_eq!(
            shape(&expr("@xs |> Enum.join \",\"")),
            "Enum.join(@xs,\",\")"
        );
        // Still operators and indexes, not calls (Elixir reads `x -1` as `x(-1)`, ambiguous).
        assert_eq!(shape(&expr("x - 1")), "(x - 1)");
        assert_eq!(shape(&expr("x -1")), "(x - 1)");
        assert_eq!(shape(&expr("x in [1]")), "(x in [1])");
        assert_eq!(shape(&expr("x[0]")), "x[0]");
        match parse(
            "<%= for x <- Enum.reverse @xs do %><%= x %><% end %>",
            false,
        )
        .unwrap()
        .as_slice()
        {
            [Node::For { qualifiers, .. }] => match &qualifiers[..] {
                [Qualifier::Gen(_, e)] => assert_eq!(shape(e), "Enum.reverse(@xs)"),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    /// `fn` and `with` blocks over several tags, `into:` and aliased generators.
    #[test]
    fn blocks_across_tags() {
        let nodes = parse(
            "<%= Enum.map(@xs, fn 0 -> %>a<% n when n > 1 -> %>b<%= n %><% end) |> length %>",
            false,
        )
        .unwrap();
        match &nodes[..] {
            [Node::Output(e)] => assert_eq!(
                shape(e),
                "length(Enum.map(@xs,fnblock/1(1 nodes);fnblock/1(2 nodes)))"
            ),
            other => panic!("{other:?}"),
        }
        // Opened with `<%`, the call is evaluated and its binding kept.
        match &parse(
            "<% rows = Enum.map(@xs, fn x -> %><%= x %><% end) %>",
            false,
        )
        .unwrap()[..]
        {
            [Node::Bind { output: false, .. }] => {}
            other => panic!("{other:?}"),
        }
        match &parse("<%= for %{id: id} = row <- @rows do %><% end %>", false).unwrap()[..] {
            [Node::For { qualifiers, .. }] => assert_eq!(qualifiers.len(), 2),
            other => panic!("{other:?}"),
        }
        match &parse("<%= for x <- @xs, into: \"\" do %><% end %>", false).unwrap()[..] {
            [Node::Bind { .. }, Node::Output(_), Node::For { .. }] => {}
            other => panic!("{other:?}"),
        }
        match &parse(
            "<%= with {:ok, x} when x > 1 <- @r do %><%= x %><% else _ -> %>-<% end %>",
            false,
        )
        .unwrap()[..]
        {
            [Node::Case { clauses, .. }] => assert_eq!(clauses.len(), 2),
            other => panic!("{other:?}"),
        }
        for (bad, why) in [
            (
                "<%= Enum.map(@xs, fn x -> %>a",
                "`fn` block is never closed with `<% end) %>`",
            ),
            ("<%= for x <- @xs do %><% end) %>", "`end` must stand alone"),
            (
                "<%= Enum.map(@xs, fn x -> %><% x, y -> %><% end) %>",
                "same number of parameters",
            ),
            (
                "<%= Enum.map(@xs, fn x -> %><% else %><% end) %>",
                "`fn` has no `else` branch",
            ),
            (
                "<%= with x <- @x do %><% else %><% end %>",
                "first clause in the same tag",
            ),
            (
                "<%= with x <- @x do %><% y -> %><% end %>",
                "follow its `else`",
            ),
            (
                "<%= with x <- @x do %><% else y -> %><% else z -> %><% end %>",
                "a second `else`",
            ),
            (
                "<%= with x when x <- 1, y when y = 2 do x end %>",
                "expected `<-` after",
            ),
            ("<%= for %{a: x} = x <- @xs do %><% end %>", "bound twice"),
            (
                "<%= for %{a: x} = y do %><% end %>",
                "expected `<-` after `pattern = variable`",
            ),
            ("<%= for x <- @xs, into: [] %>", "expected `do:`"),
        ] {
            let e = parse(bad, false).unwrap_err();
            assert!(e.message.contains(why), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn blocks_nest() {
        let nodes = parse(
            "<%= for x <- @xs do %><%= if x do %>a<% else %>b<% end %><% end %>",
            false,
        )
        .unwrap();
        match &nodes[..] {
            [Node::For { body, .. }] => match &body[..] {
                [
                    Node::If {
                        then, otherwise, ..
                    },
                ] => {
                    assert_eq!((then.len(), otherwise.len()), (1, 1));
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let src = format!("<%= {}1{} %>", "(".repeat(10_000), ")".repeat(10_000));
        assert!(parse(&src, false).is_err());
        let src = format!("<%= {}1 %>", "-".repeat(10_000));
        assert!(parse(&src, false).is_err());
        let src = "<%= if true do %>".repeat(1000);
        assert!(parse(&src, false).is_err());
    }
}
