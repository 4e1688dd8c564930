//! Expressions: a cursor over one tag's tokens and precedence climbing with Elixir's operator
//! table. The pipe is rewritten here (`a |> f(b)` is `f(a, b)`), and so is the one-line `if`.

use crate::ast::{BinOp, BlockClause, Expr, ExprKind, Span, UnOp};
use crate::lexer::{Part, SyntaxError, Tok, Token};
use crate::value::Value;

use super::MAX_NESTING;
use super::blocks::FN_BLOCK;
use super::height::{height, too_deep};

/// A cursor over the tokens of one tag (or of one `#{...}`).
pub(super) struct Parser {
    pub(super) tokens: Vec<Token>,
    pub(super) pos: usize,
    /// Offset of the end of the tag's contents, for "expected ... here" errors at the end.
    pub(super) end: usize,
    pub(super) depth: usize,
    /// The clauses of a `fn` spanning tags, taken where [`FN_BLOCK`] stands in the tokens.
    pub(super) block: Option<Vec<BlockClause>>,
}

/// The name of the call `last//step` builds, until `first..` takes it in.
pub(crate) const STEP: &str = "//";

/// The built-in `first..last//step` calls (see [`crate::builtins`]).
pub(crate) const STEPPED_RANGE: &str = "..//";

/// What an infix operator builds.
enum Infix {
    Bin(BinOp),
    Range,
    /// `last//step`, the right side of `first..last//step`.
    Step,
    Pipe,
    NotIn,
    /// `=~`: a call of the built-in `=~`.
    Match,
}

/// Binding power of an infix operator: (left, right); right = left + 1 is left-associative.
/// The levels follow Elixir's table, loosest first: `or ||`, `and &&`, `== != === !==`,
/// `< <= > >=`, `|>`, `in`, `.. <> ++` (right-associative), `+ -`, `* /`.
fn infix(tok: &Tok, next: Option<&Tok>) -> Option<(u8, u8, Infix, usize)> {
    let (bp, right_assoc, op, len) = match tok {
        Tok::Ident(w) if w == "or" => (1, false, Infix::Bin(BinOp::Or), 1),
        Tok::Sym("||") => (1, false, Infix::Bin(BinOp::OrElse), 1),
        Tok::Ident(w) if w == "and" => (2, false, Infix::Bin(BinOp::And), 1),
        Tok::Sym("&&") => (2, false, Infix::Bin(BinOp::AndAlso), 1),
        Tok::Sym("==") => (3, false, Infix::Bin(BinOp::Eq), 1),
        Tok::Sym("!=") => (3, false, Infix::Bin(BinOp::Ne), 1),
        Tok::Sym("===") => (3, false, Infix::Bin(BinOp::StrictEq), 1),
        Tok::Sym("!==") => (3, false, Infix::Bin(BinOp::StrictNe), 1),
        Tok::Sym("=~") => (3, false, Infix::Match, 1),
        Tok::Sym("<") => (4, false, Infix::Bin(BinOp::Lt), 1),
        Tok::Sym("<=") => (4, false, Infix::Bin(BinOp::Le), 1),
        Tok::Sym(">") => (4, false, Infix::Bin(BinOp::Gt), 1),
        Tok::Sym(">=") => (4, false, Infix::Bin(BinOp::Ge), 1),
        Tok::Sym("|>") => (5, false, Infix::Pipe, 1),
        Tok::Ident(w) if w == "in" => (6, false, Infix::Bin(BinOp::In), 1),
        Tok::Ident(w) if w == "not" && matches!(next, Some(Tok::Ident(n)) if n == "in") => {
            (6, false, Infix::NotIn, 2)
        }
        Tok::Sym("..") => (7, true, Infix::Range, 1),
        Tok::Sym("//") => (7, true, Infix::Step, 1),
        Tok::Sym("<>") => (7, true, Infix::Bin(BinOp::Concat), 1),
        Tok::Sym("++") => (7, true, Infix::Bin(BinOp::ListConcat), 1),
        Tok::Sym("+") => (8, false, Infix::Bin(BinOp::Add), 1),
        Tok::Sym("-") => (8, false, Infix::Bin(BinOp::Sub), 1),
        Tok::Sym("*") => (9, false, Infix::Bin(BinOp::Mul), 1),
        Tok::Sym("/") => (9, false, Infix::Bin(BinOp::Div), 1),
        _ => return None,
    };
    let l = bp * 2;
    Some(if right_assoc {
        (l, l, op, len)
    } else {
        (l, l + 1, op, len)
    })
}

/// The node for `lhs op rhs` (the pipe rewritten into a call). Kept out of
/// [`Parser::expr_bp`], whose frame is on the stack once per level of nesting, so that frame
/// stays small (a debug build gives every local of a function its own slot).
fn combine(op: Infix, op_span: Span, lhs: Expr, rhs: Expr) -> Result<Expr, SyntaxError> {
    let span = lhs.span.to(rhs.span);
    let kind = match op {
        Infix::Bin(op) => ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        // `first..last//step`: a call of the built-in that lists the range (`..//` is no name a
        // template can spell); a `//` elsewhere is left a call of `//`, which the compiler
        // reports.
        Infix::Range => match rhs.kind {
            ExprKind::Call {
                name,
                name_span,
                mut args,
                kwargs,
            } if name == STEP && args.len() == 2 => {
                args.insert(0, lhs);
                ExprKind::Call {
                    name: STEPPED_RANGE.to_owned(),
                    name_span,
                    args,
                    kwargs,
                }
            }
            kind => ExprKind::Range(
                Box::new(lhs),
                Box::new(Expr {
                    kind,
                    span: rhs.span,
                }),
            ),
        },
        Infix::Match => ExprKind::Call {
            name: "=~".to_owned(),
            name_span: op_span,
            args: vec![lhs, rhs],
            kwargs: Vec::new(),
        },
        Infix::Step => ExprKind::Call {
            name: STEP.to_owned(),
            name_span: op_span,
            args: vec![lhs, rhs],
            kwargs: Vec::new(),
        },
        Infix::NotIn => ExprKind::Unary(
            UnOp::Not,
            Box::new(Expr {
                kind: ExprKind::Binary(BinOp::In, Box::new(lhs), Box::new(rhs)),
                span,
            }),
        ),
        Infix::Pipe => match rhs.kind {
            ExprKind::Call {
                name,
                name_span,
                mut args,
                kwargs,
            } => {
                args.insert(0, lhs);
                ExprKind::Call {
                    name,
                    name_span,
                    args,
                    kwargs,
                }
            }
            // `x |> length`: a name alone is a call, as in Elixir.
            ExprKind::Var(name) if !name.starts_with('&') => ExprKind::Call {
                name,
                name_span: rhs.span,
                args: vec![lhs],
                kwargs: Vec::new(),
            },
            _ => {
                return Err(SyntaxError::new(
                    op_span.to(rhs.span),
                    "the right side of `|>` must be a function call, as in `x |> f(y)`",
                ));
            }
        },
    };
    Ok(Expr { kind, span })
}

/// `op inner`, the operator at `span`; `-literal` is folded so that
/// `-9223372036854775807 - 1` and `-1` are plain literals. Out of [`Parser::prefix`], which is on
/// the stack once per level, like [`combine`].
fn unary(op: UnOp, span: Span, inner: Expr) -> Expr {
    let span = span.to(inner.span);
    if op == UnOp::Neg {
        match &inner.kind {
            ExprKind::Lit(Value::Int(n)) if n.checked_neg().is_some() => {
                return Expr {
                    kind: ExprKind::Lit(Value::Int(-n)),
                    span,
                };
            }
            ExprKind::Lit(Value::Float(x)) => {
                return Expr {
                    kind: ExprKind::Lit(Value::Float(-x)),
                    span,
                };
            }
            _ => {}
        }
    }
    Expr {
        kind: ExprKind::Unary(op, Box::new(inner)),
        span,
    }
}

/// Binding power of prefix operators: above every infix operator.
const PREFIX_BP: u8 = 20;

impl Parser {
    pub(super) fn new(tokens: Vec<Token>, end: usize) -> Parser {
        Parser {
            tokens,
            pos: 0,
            end,
            depth: 0,
            block: None,
        }
    }

    pub(super) fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|t| &t.tok)
    }

    pub(super) fn peek_word(&self) -> Option<&str> {
        match self.peek() {
            Some(Tok::Ident(w)) => Some(w),
            _ => None,
        }
    }

    /// A clause's `when guard`, if it has one.
    pub(super) fn guard(&mut self) -> Result<Option<Expr>, SyntaxError> {
        if self.peek_word() != Some("when") {
            return Ok(None);
        }
        self.pos += 1;
        self.expr().map(Some)
    }

    pub(super) fn here(&self) -> Span {
        match self.tokens.get(self.pos) {
            Some(t) => t.span,
            None => Span::new(self.end, self.end),
        }
    }

    pub(super) fn next_token(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    /// The span of the token just consumed.
    pub(super) fn prev_span(&self) -> Span {
        self.tokens
            .get(self.pos.saturating_sub(1))
            .map_or(Span::new(self.end, self.end), |t| t.span)
    }

    pub(super) fn expect_sym(&mut self, sym: &str) -> Result<Span, SyntaxError> {
        match self.tokens.get(self.pos) {
            Some(Token {
                tok: Tok::Sym(s),
                span,
                ..
            }) if *s == sym => {
                let span = *span;
                self.pos += 1;
                Ok(span)
            }
            _ => Err(SyntaxError::new(self.here(), format!("expected `{sym}`"))),
        }
    }

    pub(super) fn expect_word(&mut self, w: &str) -> Result<(), SyntaxError> {
        if self.peek_word() == Some(w) {
            self.pos += 1;
            Ok(())
        } else {
            Err(SyntaxError::new(self.here(), format!("expected `{w}`")))
        }
    }

    pub(super) fn eat_sym(&mut self, sym: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// An expression at most [`MAX_NESTING`] levels high (see `height.rs`).
    pub(super) fn expr(&mut self) -> Result<Expr, SyntaxError> {
        Ok(self.expr_bp(0)?.0)
    }

    /// An expression of operators binding at least `min_bp`, and its height. Both the
    /// recursion (`depth`) and the height of the tree built are held to [`MAX_NESTING`]: a
    /// left-associative chain is built in the loop below, one level per operator, without
    /// recursing.
    fn expr_bp(&mut self, min_bp: u8) -> Result<(Expr, usize), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(too_deep(self.here(), "expression"));
        }
        let start = self.here();
        let mut lhs = self.prefix()?;
        let mut lhs_height = height(&lhs, MAX_NESTING);
        if lhs_height > MAX_NESTING {
            return Err(too_deep(start, "expression"));
        }
        while let Some((l, r, op, len)) = self
            .peek()
            .and_then(|t| infix(t, self.tokens.get(self.pos + 1).map(|t| &t.tok)))
        {
            if l < min_bp {
                break;
            }
            let op_span = self.here();
            self.pos += len;
            let (rhs, rhs_height) = self.expr_bp(r)?;
            // The height of the node built below: `not in` is two nodes, a pipe adds `lhs` to
            // the arguments of the call on its right.
            lhs_height = match op {
                Infix::NotIn => 2 + lhs_height.max(rhs_height),
                Infix::Pipe => rhs_height.max(1 + lhs_height),
                Infix::Bin(_) | Infix::Range | Infix::Step | Infix::Match => {
                    1 + lhs_height.max(rhs_height)
                }
            };
            if lhs_height > MAX_NESTING {
                return Err(too_deep(op_span, "expression"));
            }
            lhs = combine(op, op_span, lhs, rhs)?;
        }
        self.depth -= 1;
        Ok((lhs, lhs_height))
    }

    fn prefix(&mut self) -> Result<Expr, SyntaxError> {
        let span = self.here();
        let op = match self.peek() {
            Some(Tok::Ident(w)) if w == "not" => Some(UnOp::Not),
            Some(Tok::Sym("!")) => Some(UnOp::Bang),
            Some(Tok::Sym("-")) => Some(UnOp::Neg),
            _ => None,
        };
        if let Some(op) = op {
            self.pos += 1;
            let (inner, _) = self.expr_bp(PREFIX_BP)?;
            return Ok(unary(op, span, inner));
        }
        self.postfix()
    }

    /// A primary expression and the `.key` and `[index]` after it.
    fn postfix(&mut self) -> Result<Expr, SyntaxError> {
        let mut e = self.primary()?;
        // `a.b.c` and `a[i][j]` are built in this loop too: each adds a level.
        let mut e_height = height(&e, MAX_NESTING);
        loop {
            if e_height > MAX_NESTING {
                return Err(too_deep(self.prev_span(), "expression"));
            }
            if self.eat_sym(".") {
                e = self.field(e)?;
                e_height += 1;
            } else if matches!(self.peek(), Some(Tok::Sym("["))) && self.here().start == e.span.end
            {
                // `a[i]` only without a space: `f [1]` is not an index.
                self.pos += 1;
                let (index, index_height) = self.expr_bp(0)?;
                e_height = 1 + e_height.max(index_height);
                let close = self.expect_sym("]")?;
                e = Expr {
                    span: e.span.to(close),
                    kind: ExprKind::Index(Box::new(e), Box::new(index)),
                };
            } else {
                return Ok(e);
            }
        }
    }

    /// `e.key`; the `.` is consumed.
    fn field(&mut self, e: Expr) -> Result<Expr, SyntaxError> {
        let span = self.here();
        match self.next_token() {
            Some(Token {
                tok: Tok::Ident(name),
                ..
            }) => Ok(Expr {
                span: e.span.to(span),
                kind: ExprKind::Field(Box::new(e), name),
            }),
            _ => Err(SyntaxError::new(span, "expected a key name after `.`")),
        }
    }

    /// A value, a bracketed expression, a call...: what operators apply to. A dispatch only:
    /// each form is read by its own function, so that this frame, on the stack once per level
    /// of nesting, holds none of their locals.
    fn primary(&mut self) -> Result<Expr, SyntaxError> {
        let span = self.here();
        let Some(t) = self.next_token() else {
            return Err(SyntaxError::new(span, "expected an expression"));
        };
        match t.tok {
            Tok::Sym("(") => self.parenthesized(span),
            Tok::Sym("[") => self.list(span),
            Tok::Sym("{") => self.tuple(span),
            Tok::Sym("%{") => self.map(span),
            Tok::Sym("&") => self.capture(span),
            Tok::Interp(parts) => self.interpolation(parts, span),
            Tok::Sigil(letter, parts, mods) => self.sigil(letter, parts, &mods, span),
            Tok::Alias(module) => self.remote_call(module, span),
            Tok::Atom(a) => self.atom(a, span),
            Tok::Ident(w) => self.word(w, span),
            tok => self.other(tok, span),
        }
    }

    /// `( expr )`; `(` is consumed (at `span`).
    fn parenthesized(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        let inner = self.expr()?;
        let close = self.expect_sym(")")?;
        Ok(Expr {
            kind: inner.kind,
            span: span.to(close),
        })
    }

    /// `:name`, or `:erlang.float_to_binary(x, decimals: 2)`: a call into an Erlang module.
    fn atom(&mut self, a: String, span: Span) -> Result<Expr, SyntaxError> {
        let erlang_call = matches!(self.peek(), Some(Tok::Sym(".")))
            && matches!(
                self.tokens.get(self.pos + 1),
                Some(Token {
                    tok: Tok::Ident(_),
                    ..
                })
            )
            && matches!(
                self.tokens.get(self.pos + 2),
                Some(Token {
                    tok: Tok::Sym("("),
                    ..
                })
            );
        if !erlang_call {
            return Ok(Expr {
                kind: ExprKind::Lit(Value::atom(&a)),
                span,
            });
        }
        self.pos += 1;
        let Some(Token {
            tok: Tok::Ident(f),
            span: fspan,
            ..
        }) = self.next_token()
        else {
            return Err(SyntaxError::new(span, "expected a function name"));
        };
        self.call(format!(":{a}.{f}"), span.to(fspan))
    }

    /// A word: `true`, `false`, `nil`, a one-line `if`, `fn`, a comprehension, a call or a
    /// variable.
    fn word(&mut self, w: String, span: Span) -> Result<Expr, SyntaxError> {
        let lit = |v: Value| {
            Ok(Expr {
                kind: ExprKind::Lit(v),
                span,
            })
        };
        match w.as_str() {
            "true" => lit(Value::Bool(true)),
            "false" => lit(Value::Bool(false)),
            "nil" => lit(Value::Nil),
            "if" | "unless" => self.if_expr(w == "unless", span),
            "case" => self.case_expr(span),
            "with" => self.with_expr(span),
            "fn" => self.anonymous_fn(span),
            "for" => self.comprehension(span),
            FN_BLOCK if self.block.is_some() => Ok(Expr {
                kind: ExprKind::FnBlock(self.block.take().unwrap_or_default()),
                span,
            }),
            _ if is_keyword(&w) => Err(SyntaxError::new(span, format!("unexpected keyword `{w}`"))),
            _ => {
                if matches!(self.peek(), Some(Tok::Sym("("))) && self.here().start == span.end {
                    self.call(w, span)
                } else if self.bare_args_follow(span) {
                    self.bare_call(w, span)
                } else {
                    Ok(Expr {
                        kind: ExprKind::Var(w),
                        span,
                    })
                }
            }
        }
    }

    /// Literals, assigns, `^pin`, and the tokens that cannot start an expression.
    fn other(&mut self, tok: Tok, span: Span) -> Result<Expr, SyntaxError> {
        let lit = |v: Value| {
            Ok(Expr {
                kind: ExprKind::Lit(v),
                span,
            })
        };
        match tok {
            Tok::Int(n) => lit(Value::Int(n)),
            Tok::Float(x) => lit(Value::Float(x)),
            Tok::Str(s) => lit(Value::from(s)),
            Tok::Assign(name) => Ok(Expr {
                kind: ExprKind::Assign(name),
                span,
            }),
            Tok::Sym("^") => match self.next_token() {
                // A pin is only meaningful in a pattern; the pattern converter checks where.
                Some(Token {
                    tok: Tok::Ident(name),
                    span: s,
                    ..
                }) => Ok(Expr {
                    kind: ExprKind::Call {
                        name: "^".to_owned(),
                        name_span: span,
                        args: vec![Expr {
                            kind: ExprKind::Var(name),
                            span: s,
                        }],
                        kwargs: Vec::new(),
                    },
                    span: span.to(s),
                }),
                _ => Err(SyntaxError::new(span, "`^` must be followed by a variable")),
            },
            Tok::Key(k) => Err(SyntaxError::new(
                span,
                format!("unexpected keyword argument `{k}:` outside a call"),
            )),
            Tok::Sym(s) => Err(SyntaxError::new(span, format!("unexpected `{s}`"))),
            // Dispatched by `primary`.
            Tok::Ident(_) | Tok::Alias(_) | Tok::Atom(_) | Tok::Interp(_) | Tok::Sigil(..) => {
                Err(SyntaxError::new(span, "unexpected token"))
            }
        }
    }

    /// `Module.function(...)`: only calls, e.g. `String.upcase(x)`; `Phoenix.HTML.raw` too.
    fn remote_call(&mut self, module: String, span: Span) -> Result<Expr, SyntaxError> {
        let mut module = module;
        loop {
            self.expect_sym(".")?;
            let fspan = self.here();
            match self.next_token() {
                Some(Token {
                    tok: Tok::Alias(more),
                    ..
                }) => module = format!("{module}.{more}"),
                Some(Token {
                    tok: Tok::Ident(f), ..
                }) if matches!(self.peek(), Some(Tok::Sym("("))) => {
                    return self.call(format!("{module}.{f}"), span.to(fspan));
                }
                Some(Token {
                    tok: Tok::Ident(f),
                    span: end,
                    ..
                }) => {
                    // Arguments without parentheses, or none: `Mod.fun` is a call, as in Elixir.
                    let name = format!("{module}.{f}");
                    if self.bare_args_follow(end) {
                        return self.bare_call(name, span.to(end));
                    }
                    return Ok(self.call_expr(name, span.to(end), Vec::new(), Vec::new()));
                }
                _ => {
                    return Err(SyntaxError::new(
                        fspan,
                        format!("expected a function call after `{module}.`"),
                    ));
                }
            }
        }
    }

    /// `"a #{b} c"`: each `#{...}` parsed on its own tokens.
    pub(super) fn interpolation(
        &mut self,
        parts: Vec<Part>,
        span: Span,
    ) -> Result<Expr, SyntaxError> {
        let mut out = Vec::with_capacity(parts.len());
        for part in parts {
            match part {
                Part::Lit(s) => out.push(Expr {
                    kind: ExprKind::Lit(Value::from(s)),
                    span,
                }),
                Part::Code(tokens, code) => {
                    if tokens.is_empty() {
                        // `#{}` is nil, which converts to "".
                        out.push(Expr {
                            kind: ExprKind::Lit(Value::Nil),
                            span: code,
                        });
                        continue;
                    }
                    let mut p = Parser::new(tokens, code.end);
                    p.depth = self.depth;
                    let e = p.expr()?;
                    if let Some(t) = p.tokens.get(p.pos) {
                        return Err(SyntaxError::new(
                            t.span,
                            "unexpected token after expression",
                        ));
                    }
                    out.push(e);
                }
            }
        }
        Ok(Expr {
            kind: ExprKind::Interp(out),
            span,
        })
    }

    /// `name(args..., key: value...)`; the `(` is next.
    fn call(&mut self, name: String, name_span: Span) -> Result<Expr, SyntaxError> {
        self.expect_sym("(")?;
        let (mut args, mut kwargs) = (Vec::new(), Vec::new());
        if !self.eat_sym(")") {
            loop {
                self.argument(&mut args, &mut kwargs)?;
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
        }
        Ok(self.call_expr(name, name_span, args, kwargs))
    }

    /// Whether a call without parentheses starts here, after a function name ending at `name`:
    /// a space, then a token that can only begin an argument (`raw @html`, `length @xs`,
    /// `String.upcase @name`, `link "Home", to: "/"`), as Elixir reads `f x`.
    fn bare_args_follow(&self, name: Span) -> bool {
        let Some(t) = self.tokens.get(self.pos) else {
            return false;
        };
        t.span.start > name.end
            && !t.after_break
            && match &t.tok {
                Tok::Int(_)
                | Tok::Float(_)
                | Tok::Str(_)
                | Tok::Interp(_)
                | Tok::Sigil(..)
                | Tok::Atom(_)
                | Tok::Assign(_)
                | Tok::Alias(_)
                | Tok::Key(_) => true,
                // Not `not`: `x not in xs` is an operator.
                Tok::Ident(w) => {
                    !is_keyword(w) || matches!(w.as_str(), "true" | "false" | "nil" | "fn")
                }
                Tok::Sym(s) => matches!(*s, "[" | "{" | "%{" | "!" | "&"),
            }
    }

    /// `f a, b, key: c` without parentheses: the arguments run to the first token after one
    /// that is not a comma (`do`, the end of the tag, a closing bracket).
    fn bare_call(&mut self, name: String, name_span: Span) -> Result<Expr, SyntaxError> {
        let (mut args, mut kwargs) = (Vec::new(), Vec::new());
        loop {
            self.argument(&mut args, &mut kwargs)?;
            if !self.eat_sym(",") {
                break;
            }
        }
        Ok(self.call_expr(name, name_span, args, kwargs))
    }

    /// One argument of a call: positional, or `key: value` (keywords last).
    fn argument(
        &mut self,
        args: &mut Vec<Expr>,
        kwargs: &mut Vec<(String, Span, Expr)>,
    ) -> Result<(), SyntaxError> {
        if let Some(Token {
            tok: Tok::Key(k),
            span,
            ..
        }) = self.tokens.get(self.pos).cloned()
        {
            self.pos += 1;
            kwargs.push((k, span, self.expr()?));
        } else if !kwargs.is_empty() {
            return Err(SyntaxError::new(
                self.here(),
                "positional arguments must come before keyword arguments",
            ));
        } else {
            args.push(self.expr()?);
        }
        Ok(())
    }

    fn call_expr(
        &self,
        name: String,
        name_span: Span,
        args: Vec<Expr>,
        kwargs: Vec<(String, Span, Expr)>,
    ) -> Expr {
        let close = self.prev_span();
        Expr {
            kind: ExprKind::Call {
                name,
                name_span,
                args,
                kwargs,
            },
            span: name_span.to(close),
        }
    }
}

pub(super) fn is_keyword(w: &str) -> bool {
    matches!(
        w,
        "do" | "end"
            | "else"
            | "for"
            | "if"
            | "unless"
            | "case"
            | "cond"
            | "true"
            | "false"
            | "nil"
            | "and"
            | "or"
            | "not"
            | "in"
            | "fn"
            | "when"
    )
}
