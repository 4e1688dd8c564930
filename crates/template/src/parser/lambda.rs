//! What binds variables inside an expression: anonymous functions (`fn x, acc -> body end`),
//! captures (`&(&1 * 2)`, `& &1.name`, `&String.upcase/1`), read into [`ExprKind::Fn`], and
//! `for` comprehensions, whose qualifiers the block `for` shares. Captures become functions
//! whose parameters are the variables `&1`, `&2`... (names no template variable can spell).

use crate::ast::{Expr, ExprKind, FnClause, Pattern, Qualifier, Span};
use crate::lexer::{SyntaxError, Tok, Token};

use super::expr::{Parser, is_keyword};
use super::pattern::{check_bindings, to_pattern};

/// Most parameters a function may take (captures count `&1` to `&N`).
const MAX_PARAMS: usize = 8;

impl Parser {
    /// `fn params [when guard] -> body end`; `fn` is consumed (at `span`). Clauses are
    /// separated by `;` or a line break, as in Elixir; each body is one expression.
    pub(super) fn anonymous_fn(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        let mut clauses: Vec<FnClause> = Vec::new();
        loop {
            let start = self.here();
            let (params, guard) = self.fn_head(span)?;
            if let Some(first) = clauses.first()
                && first.params.len() != params.len()
            {
                return Err(SyntaxError::new(
                    start,
                    "the clauses of a `fn` must take the same number of parameters",
                ));
            }
            let body = self.expr()?;
            clauses.push(FnClause {
                params,
                guard,
                body,
            });
            if self.peek_word() == Some("end") {
                self.pos += 1;
                break;
            }
            let next_clause =
                self.eat_sym(";") || self.tokens.get(self.pos).is_some_and(|t| t.after_break);
            if !next_clause {
                return Err(SyntaxError::new(
                    self.here(),
                    "expected `end` closing the `fn` (each clause's body is one expression)",
                ));
            }
        }
        Ok(Expr {
            span: span.to(self.tokens[self.pos - 1].span),
            kind: ExprKind::Fn(clauses),
        })
    }

    /// A `fn` clause's head: `params [when guard] ->`, `->` consumed; `span` is the `fn`'s.
    pub(super) fn fn_head(
        &mut self,
        span: Span,
    ) -> Result<(Vec<Pattern>, Option<Expr>), SyntaxError> {
        let start = self.here();
        let mut params = Vec::new();
        if !matches!(self.peek(), Some(Tok::Sym("->"))) && self.peek_word() != Some("when") {
            loop {
                params.push(to_pattern(self.expr()?)?);
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let guard = self.guard()?;
        if !self.eat_sym("->") {
            return Err(SyntaxError::new(
                self.here(),
                "expected `->` after a `fn`'s parameters",
            ));
        }
        if params.len() > MAX_PARAMS {
            return Err(SyntaxError::new(
                start,
                format!("a `fn` takes at most {MAX_PARAMS} parameters"),
            ));
        }
        check_bindings(&Pattern::Tuple(params.clone(), span))?;
        Ok((params, guard))
    }

    /// A capture after `&` (at `span`): `&Module.fun/2`, `&fun/1`, or an expression using
    /// `&1`... (`&(&1 * 2)`, `& &1.name`), which takes everything to its right, as in Elixir.
    pub(super) fn capture(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        if let Some((name, name_span, arity)) = self.function_reference() {
            let params: Vec<String> = (1..=arity).map(|i| format!("&{i}")).collect();
            let args = params
                .iter()
                .map(|p| Expr {
                    kind: ExprKind::Var(p.clone()),
                    span: name_span,
                })
                .collect();
            let whole = span.to(self.tokens[self.pos - 1].span);
            return Ok(Expr {
                span: whole,
                kind: ExprKind::Fn(vec![FnClause {
                    params: params
                        .into_iter()
                        .map(|p| Pattern::Var(Some(p), name_span))
                        .collect(),
                    guard: None,
                    body: Expr {
                        span: whole,
                        kind: ExprKind::Call {
                            name,
                            name_span,
                            args,
                            kwargs: Vec::new(),
                        },
                    },
                }]),
            });
        }
        let body = self.expr()?;
        let mut seen = [false; MAX_PARAMS + 1];
        placeholders(&body, &mut seen)?;
        let arity = seen.iter().rposition(|&s| s).unwrap_or(0);
        if arity == 0 {
            return Err(SyntaxError::new(
                body.span,
                "a capture `&(...)` must use its argument `&1`",
            ));
        }
        if let Some(missing) = (1..arity).find(|&i| !seen[i]) {
            return Err(SyntaxError::new(
                body.span,
                format!("capture argument &{arity} cannot be defined without &{missing}"),
            ));
        }
        Ok(Expr {
            span: span.to(body.span),
            kind: ExprKind::Fn(vec![FnClause {
                params: (1..=arity)
                    .map(|i| Pattern::Var(Some(format!("&{i}")), span))
                    .collect(),
                guard: None,
                body,
            }]),
        })
    }

    /// `pattern <- expr, filter, pattern <- expr ...` after `for`, up to `do` (a block's, when
    /// `one_line` is false, consumed) or `, do:` (a comprehension's, `do:` consumed), and the
    /// collectable of `into: x` written before `do` or `do:` (`for x <- xs, into: "", do: ...`).
    /// `pattern = var <- list` binds both (as `var <- list, pattern <- [var]`: elements not
    /// matching are skipped).
    pub(super) fn qualifiers_into(
        &mut self,
        one_line: bool,
    ) -> Result<(Vec<Qualifier>, Option<Expr>), SyntaxError> {
        let mut out = Vec::new();
        let mut into = None;
        loop {
            let e = self.expr()?;
            if self.eat_sym("=") {
                let right = self.expr()?;
                if !self.eat_sym("<-") {
                    return Err(SyntaxError::new(
                        self.here(),
                        "expected `<-` after `pattern = variable` in a `for`",
                    ));
                }
                let list = self.expr()?;
                aliased_generator(e, right, list, &mut out)?;
            } else if self.eat_sym("<-") {
                if let ExprKind::Var(name) = &e.kind
                    && is_keyword(name)
                {
                    return Err(SyntaxError::new(e.span, "expected a variable name"));
                }
                let pattern = to_pattern(e)?;
                check_bindings(&pattern)?;
                out.push(Qualifier::Gen(pattern, self.expr()?));
            } else if out.is_empty() {
                return Err(SyntaxError::new(self.here(), "expected `<-`"));
            } else {
                out.push(Qualifier::Filter(e));
            }
            if !one_line && self.peek_word() == Some("do") {
                self.pos += 1;
                return Ok((out, into));
            }
            self.expect_sym(",")?;
            if matches!(self.peek(), Some(Tok::Key(k)) if k == "into") {
                self.pos += 1;
                into = Some(self.expr()?);
                if !one_line {
                    self.expect_word("do")?;
                    return Ok((out, into));
                }
                if !self.eat_sym(",") || !matches!(self.peek(), Some(Tok::Key(k)) if k == "do") {
                    return Err(SyntaxError::new(
                        self.here(),
                        "expected `do:` after `into:` in a one-line `for`",
                    ));
                }
            }
            if one_line && matches!(self.peek(), Some(Tok::Key(k)) if k == "do") {
                self.pos += 1;
                return Ok((out, into));
            }
        }
    }

    /// `for x <- xs, filter, do: body` (or `for(...)`); `for` is consumed (at `span`). With
    /// `into: x` it is `Enum.into(for ..., x)`: `into: ""` joins the bodies (strings), as
    /// Phoenix views write `for x <- @xs, into: "", do: "<li>#{x}</li>"`.
    pub(super) fn comprehension(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        let paren = self.here().start == span.end && self.eat_sym("(");
        let (qualifiers, into) = self.qualifiers_into(true)?;
        let body = self.expr()?;
        if paren {
            self.expect_sym(")")?;
        }
        let whole = span.to(self.tokens[self.pos - 1].span);
        let list = Expr {
            span: whole,
            kind: ExprKind::For {
                qualifiers,
                body: Box::new(body),
            },
        };
        Ok(match into {
            None => list,
            Some(into) => Expr {
                span: whole,
                kind: ExprKind::Call {
                    name: "Enum.into".to_owned(),
                    name_span: span,
                    args: vec![list, into],
                    kwargs: Vec::new(),
                },
            },
        })
    }

    /// `Module.Sub.fun/N` or `fun/N` at the cursor, consumed: the name, its span and `N`.
    fn function_reference(&mut self) -> Option<(String, Span, usize)> {
        let start = self.pos;
        let mut name = String::new();
        let first = self.tokens.get(start)?.span;
        let mut at = start;
        while let Some(Token {
            tok: Tok::Alias(m), ..
        }) = self.tokens.get(at)
        {
            name.push_str(m);
            name.push('.');
            at += 1;
            if !matches!(
                self.tokens.get(at),
                Some(Token {
                    tok: Tok::Sym("."),
                    ..
                })
            ) {
                return None;
            }
            at += 1;
        }
        let Some(Token {
            tok: Tok::Ident(f),
            span: last,
            ..
        }) = self.tokens.get(at)
        else {
            return None;
        };
        name.push_str(f);
        let arity = match (self.tokens.get(at + 1), self.tokens.get(at + 2)) {
            (
                Some(Token {
                    tok: Tok::Sym("/"), ..
                }),
                Some(Token {
                    tok: Tok::Int(n), ..
                }),
            ) => usize::try_from(*n)
                .ok()
                .filter(|n| (1..=MAX_PARAMS).contains(n))?,
            _ => return None,
        };
        let name_span = first.to(*last);
        self.pos = at + 3;
        Some((name, name_span, arity))
    }
}

/// The variable an aliased generator binds when neither side of its `=` is one: `_` names
/// are never bound by a template's patterns, so no template variable is this one.
const ALIASED: &str = "_for";

/// `left = right <- list` as generators: the side that is a variable (or a hidden one) over
/// `list`, then each other side over the one-element list of that variable.
fn aliased_generator(
    left: Expr,
    right: Expr,
    list: Expr,
    out: &mut Vec<Qualifier>,
) -> Result<(), SyntaxError> {
    let span = left.span.to(right.span);
    let (left, right) = (to_pattern(left)?, to_pattern(right)?);
    check_bindings(&Pattern::Tuple(vec![left.clone(), right.clone()], span))?;
    let ((name, at), others) = match (left, right) {
        (Pattern::Var(Some(name), at), p) | (p, Pattern::Var(Some(name), at)) => {
            ((name, at), vec![p])
        }
        (a, b) => ((ALIASED.to_owned(), span), vec![a, b]),
    };
    out.push(Qualifier::Gen(Pattern::Var(Some(name.clone()), at), list));
    for p in others {
        let var = Expr {
            kind: ExprKind::Var(name.clone()),
            span: at,
        };
        out.push(Qualifier::Gen(
            p,
            Expr {
                kind: ExprKind::List(vec![var]),
                span: at,
            },
        ));
    }
    Ok(())
}

/// Marks in `seen` the capture arguments `&N` that `e` uses (not those of a nested function).
fn placeholders(e: &Expr, seen: &mut [bool]) -> Result<(), SyntaxError> {
    let mut walk = |e: &Expr| placeholders(e, seen);
    match &e.kind {
        ExprKind::Var(name) => {
            if let Some(n) = name.strip_prefix('&') {
                match n.parse::<usize>() {
                    Ok(i) if (1..seen.len()).contains(&i) => seen[i] = true,
                    _ => {
                        return Err(SyntaxError::new(
                            e.span,
                            format!("capture argument `{name}`: expected &1 to &{MAX_PARAMS}"),
                        ));
                    }
                }
            }
            Ok(())
        }
        ExprKind::Lit(_) | ExprKind::Assign(_) | ExprKind::Fn(_) | ExprKind::FnBlock(_) => Ok(()),
        ExprKind::Case { subject, clauses } => {
            walk(subject)?;
            for c in clauses {
                if let Some(g) = &c.guard {
                    walk(g)?;
                }
                walk(&c.body)?;
            }
            Ok(())
        }
        ExprKind::For { qualifiers, body } => {
            for q in qualifiers {
                match q {
                    Qualifier::Gen(_, e) | Qualifier::Filter(e) => walk(e)?,
                }
            }
            walk(body)
        }
        ExprKind::Field(x, _) | ExprKind::Unary(_, x) => walk(x),
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Range(a, b) => {
            walk(a)?;
            walk(b)
        }
        ExprKind::List(items) | ExprKind::Tuple(items) | ExprKind::Interp(items) => {
            items.iter().try_for_each(walk)
        }
        ExprKind::Map(entries) => entries.iter().try_for_each(|(k, v)| {
            walk(k)?;
            walk(v)
        }),
        ExprKind::If {
            cond,
            then,
            otherwise,
            ..
        } => {
            walk(cond)?;
            walk(then)?;
            otherwise.as_deref().map_or(Ok(()), walk)
        }
        ExprKind::Call { args, kwargs, .. } => {
            args.iter().try_for_each(&mut walk)?;
            kwargs.iter().try_for_each(|(_, _, v)| walk(v))
        }
    }
}
