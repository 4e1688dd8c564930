//! `if`, `unless` and `case` as expressions, inside one tag: the one-line
//! `if c, do: a, else: b`, and the `do ... end` forms Phoenix pages write in an attribute,
//! `<%= if @active do "on" else "off" end %>` or a `case` spread over the lines of one tag:
//!
//! ```text
//! <span class="<%= case @status do
//!   "paid" -> "badge-green"
//!   _ -> "badge-grey"
//! end %>">
//! ```
//!
//! `with p <- e, ... do value else clauses end` is read here too, as `case`s.
//!
//! Each branch and each clause's body is one expression. The block forms, whose bodies are
//! template text between tags, are read by the tag parser (`mod.rs`).

use crate::ast::{Expr, ExprKind, FnClause, Pattern, Span};
use crate::lexer::{SyntaxError, Tok, Token};
use crate::value::Value;

use super::bound_name;
use super::expr::Parser;
use super::pattern::{check_bindings, to_pattern};

impl Parser {
    /// After `if`/`unless` (at `span`): `cond, do: a, else: b`, `(cond, do: a)`, or
    /// `cond do a else b end`.
    pub(super) fn if_expr(&mut self, negate: bool, span: Span) -> Result<Expr, SyntaxError> {
        let paren = matches!(self.peek(), Some(Tok::Sym("("))) && self.here().start == span.end;
        if paren {
            self.pos += 1;
        }
        let mut cond = self.expr()?;
        let mut bind = None;
        if self.eat_sym("=") {
            bind = Some(bound_name(&cond, if negate { "unless" } else { "if" })?);
            cond = self.expr()?;
        }
        let e = if !paren && self.peek_word() == Some("do") {
            self.inline_if(cond, negate, span)?
        } else {
            self.one_line_if(cond, negate, paren, span)?
        };
        Ok(match bind {
            Some((name, at)) => bound_if(e, name, at),
            None => e,
        })
    }

    /// `, do: a, else: b` (then `)` if `paren`), the condition read.
    fn one_line_if(
        &mut self,
        cond: Expr,
        negate: bool,
        paren: bool,
        span: Span,
    ) -> Result<Expr, SyntaxError> {
        self.expect_sym(",")?;
        let mut then = None;
        let mut otherwise = None;
        loop {
            let kspan = self.here();
            match self.next_token() {
                Some(Token {
                    tok: Tok::Key(k), ..
                }) if k == "do" && then.is_none() => then = Some(Box::new(self.expr()?)),
                Some(Token {
                    tok: Tok::Key(k), ..
                }) if k == "else" && then.is_some() && otherwise.is_none() => {
                    otherwise = Some(Box::new(self.expr()?))
                }
                _ => {
                    return Err(SyntaxError::new(
                        kspan,
                        "expected `do:` (then `else:`) in a one-line `if`",
                    ));
                }
            }
            if !self.eat_sym(",") {
                break;
            }
        }
        if paren {
            self.expect_sym(")")?;
        }
        let Some(then) = then else {
            return Err(SyntaxError::new(self.here(), "expected `do:`"));
        };
        Ok(Expr {
            span: span.to(self.prev_span()),
            kind: ExprKind::If {
                cond: Box::new(cond),
                negate,
                then,
                otherwise,
            },
        })
    }

    /// `do then [else otherwise] end`, `do` next: an `if` whose branches are expressions.
    fn inline_if(&mut self, cond: Expr, negate: bool, span: Span) -> Result<Expr, SyntaxError> {
        let word = if negate { "unless" } else { "if" };
        self.expect_word("do")?;
        let then = Box::new(self.expr()?);
        let otherwise = if self.peek_word() == Some("else") {
            self.pos += 1;
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        if self.peek_word() != Some("end") {
            let expected = if otherwise.is_some() {
                "`end`"
            } else {
                "`else` or `end`"
            };
            return Err(SyntaxError::new(
                self.here(),
                format!(
                    "expected {expected} in `{word} ... do ... end` (each branch is one expression)"
                ),
            ));
        }
        self.pos += 1;
        Ok(Expr {
            span: span.to(self.prev_span()),
            kind: ExprKind::If {
                cond: Box::new(cond),
                negate,
                then,
                otherwise,
            },
        })
    }

    /// After `case` (at `span`): `subject do pattern [when guard] -> value ... end`, the
    /// clauses separated by line breaks or `;`. No clause matching is a render error, as in
    /// Elixir.
    pub(super) fn case_expr(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        let subject = self.expr()?;
        self.expect_word("do")?;
        let mut clauses: Vec<FnClause> = Vec::new();
        loop {
            if self.peek_word() == Some("end") || self.peek().is_none() {
                return Err(SyntaxError::new(
                    self.here(),
                    "expected a `pattern -> value` clause in `case ... do ... end`",
                ));
            }
            clauses.push(self.match_clause("a `case` clause's pattern")?);
            if self.clauses_end("case")? {
                self.pos += 1;
                break;
            }
        }
        Ok(Expr {
            span: span.to(self.prev_span()),
            kind: ExprKind::Case {
                subject: Box::new(subject),
                clauses,
            },
        })
    }
}

/// `if name = value ...` as an expression: `case value do name when name -> then; name ->
/// otherwise end` (`unless` swaps the branches), so `name` is bound in both.
fn bound_if(e: Expr, name: String, at: Span) -> Expr {
    let ExprKind::If {
        cond,
        negate,
        then,
        otherwise,
    } = e.kind
    else {
        return e;
    };
    let otherwise = otherwise.map_or(
        Expr {
            kind: ExprKind::Lit(crate::value::Value::Nil),
            span: e.span,
        },
        |o| *o,
    );
    let (truthy, falsy) = if negate {
        (otherwise, *then)
    } else {
        (*then, otherwise)
    };
    let var = || Pattern::Var(Some(name.clone()), at);
    Expr {
        span: e.span,
        kind: ExprKind::Case {
            subject: cond,
            clauses: vec![
                FnClause {
                    params: vec![var()],
                    guard: Some(Expr {
                        kind: ExprKind::Var(name.clone()),
                        span: at,
                    }),
                    body: truthy,
                },
                FnClause {
                    params: vec![var()],
                    guard: None,
                    body: falsy,
                },
            ],
        },
    }
}

/// The variable holding what a `with` clause did not match: no template can spell it.
pub(crate) const WITH_OTHER: &str = "%with";

/// The atoms tagging a `with`'s two outcomes: no template writes them.
pub(super) const WITH_DONE: &str = "galleon.with.done";
pub(super) const WITH_ELSE: &str = "galleon.with.else";

impl Parser {
    /// One `pattern [when guard] -> body` clause of a `case` or of a `with`'s `else`; `what`
    /// names the pattern in the error for a missing `->`.
    fn match_clause(&mut self, what: &str) -> Result<FnClause, SyntaxError> {
        let pattern = to_pattern(self.expr()?)?;
        check_bindings(&pattern)?;
        let guard = self.guard()?;
        if !self.eat_sym("->") {
            return Err(SyntaxError::new(
                self.here(),
                format!("expected `->` after {what}"),
            ));
        }
        let body = self.expr()?;
        Ok(FnClause {
            params: vec![pattern],
            guard,
            body,
        })
    }

    /// After a clause's body: whether `end` follows (not consumed), else the `;` or line break
    /// before the next clause (consumed); anything else is an error naming the `block`.
    fn clauses_end(&mut self, block: &str) -> Result<bool, SyntaxError> {
        if self.peek_word() == Some("end") {
            return Ok(true);
        }
        let next_clause =
            self.eat_sym(";") || self.tokens.get(self.pos).is_some_and(|t| t.after_break);
        if !next_clause {
            return Err(SyntaxError::new(
                self.here(),
                format!(
                    "expected `end` closing the `{block}` (each clause's body is one expression)"
                ),
            ));
        }
        Ok(false)
    }
}

impl Parser {
    /// After `with` (at `span`): `p1 <- e1, p2 <- e2 do value [else clauses] end`, read as
    /// `case e1 do p1 -> case e2 do p2 -> {done, value}; v -> {else, v} end; v -> {else, v}
    /// end`, then that outcome's `case`: the value, or the first value not matching run
    /// through the `else` clauses (none matching is an error), or returned as is without
    /// `else`, as in Elixir. Each clause is evaluated only when the ones before matched; a
    /// `pattern = value` clause that does not match is an error, and a bare expression is
    /// evaluated and passed over, as in Elixir.
    pub(super) fn with_expr(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        let steps = self.with_steps()?;
        self.expect_word("do")?;
        let value = self.expr()?;
        let mut otherwise = Vec::new();
        if self.peek_word() == Some("else") {
            self.pos += 1;
            loop {
                otherwise.push(self.match_clause("a `with`'s `else` clause pattern")?);
                if self.clauses_end("with")? {
                    break;
                }
            }
        }
        if self.peek_word() != Some("end") {
            return Err(SyntaxError::new(
                self.here(),
                "expected `else` or `end` in `with ... do ... end` (the value is one expression)",
            ));
        }
        self.pos += 1;
        let whole = span.to(self.prev_span());
        Ok(with_cases(steps, value, otherwise, whole))
    }

    /// A `with`'s clauses up to `do` (not consumed): `pattern [when guard] <- value`,
    /// `pattern = value` or a bare expression, separated by commas.
    pub(super) fn with_steps(&mut self) -> Result<Vec<WithStep>, SyntaxError> {
        let mut steps = Vec::new();
        loop {
            let left = self.expr()?;
            let guard = self.guard()?;
            let falls = self.eat_sym("<-");
            if guard.is_some() && !falls {
                return Err(SyntaxError::new(
                    self.here(),
                    "expected `<-` after a `with` clause's guard",
                ));
            }
            if falls || self.eat_sym("=") {
                let pattern = to_pattern(left)?;
                check_bindings(&pattern)?;
                steps.push(WithStep {
                    pattern,
                    guard,
                    value: self.expr()?,
                    falls,
                });
            } else {
                // A bare expression is evaluated, and the next clause follows.
                steps.push(WithStep {
                    pattern: Pattern::Var(None, left.span),
                    guard: None,
                    value: left,
                    falls: false,
                });
            }
            if !self.eat_sym(",") {
                return Ok(steps);
            }
        }
    }
}

/// One clause of a `with`: `pattern [when guard] <- value` (`falls`: a value not matching
/// goes to `else`), or `pattern = value` (one not matching is an error).
#[derive(Debug)]
pub(super) struct WithStep {
    pub(super) pattern: Pattern,
    pub(super) guard: Option<Expr>,
    pub(super) value: Expr,
    pub(super) falls: bool,
}

/// The `case`s a `with`'s clauses are read as, around `inner` (what the last clause matching
/// leads to): each clause's value matched against its pattern (and guard), the value not
/// matching a `<-` clause tagged `{WITH_ELSE, value}`.
pub(super) fn with_steps_cases(steps: Vec<WithStep>, mut inner: Expr, span: Span) -> Expr {
    let at = |kind: ExprKind| Expr { kind, span };
    for step in steps.into_iter().rev() {
        let mut clauses = vec![FnClause {
            params: vec![step.pattern],
            guard: step.guard,
            body: inner,
        }];
        if step.falls {
            clauses.push(FnClause {
                params: vec![Pattern::Var(Some(WITH_OTHER.to_owned()), span)],
                guard: None,
                body: at(ExprKind::Tuple(vec![
                    at(ExprKind::Lit(Value::atom(WITH_ELSE))),
                    at(ExprKind::Var(WITH_OTHER.to_owned())),
                ])),
            });
        }
        inner = at(ExprKind::Case {
            subject: Box::new(step.value),
            clauses,
        });
    }
    inner
}

/// The `case`s a `with` is read as (see [`Parser::with_expr`]).
fn with_cases(steps: Vec<WithStep>, value: Expr, otherwise: Vec<FnClause>, span: Span) -> Expr {
    let at = |kind: ExprKind| Expr { kind, span };
    let atom = |name: &str| at(ExprKind::Lit(Value::atom(name)));
    let other = || Pattern::Var(Some(WITH_OTHER.to_owned()), span);
    let inner = with_steps_cases(
        steps,
        at(ExprKind::Tuple(vec![atom(WITH_DONE), value])),
        span,
    );
    let unmatched = at(ExprKind::Var(WITH_OTHER.to_owned()));
    let on_else = if otherwise.is_empty() {
        unmatched
    } else {
        at(ExprKind::Case {
            subject: Box::new(unmatched),
            clauses: otherwise,
        })
    };
    let tag = |name: &str| Pattern::Lit(Value::atom(name), span);
    at(ExprKind::Case {
        subject: Box::new(inner),
        clauses: vec![
            FnClause {
                params: vec![Pattern::Tuple(
                    vec![
                        tag(WITH_DONE),
                        Pattern::Var(Some(WITH_OTHER.to_owned()), span),
                    ],
                    span,
                )],
                guard: None,
                body: at(ExprKind::Var(WITH_OTHER.to_owned())),
            },
            FnClause {
                params: vec![Pattern::Tuple(vec![tag(WITH_ELSE), other()], span)],
                guard: None,
                body: on_else,
            },
        ],
    })
}
