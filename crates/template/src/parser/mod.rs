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
mod tests;
