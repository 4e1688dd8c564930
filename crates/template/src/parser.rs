//! Parser: tags and text to a tree of [`Node`]s, with block structure (`for`, `if`, `unless`,
//! `else`, `end`) checked, and expressions parsed by precedence climbing.

use crate::ast::{BinOp, Expr, ExprKind, Node, Pattern, Span, UnOp};
use crate::lexer::{Piece, SyntaxError, TagKind, Tok, Token, split, tokenize};
use crate::value::Value;

/// Deepest nesting of expressions and blocks the parser accepts. A guess with a wide margin:
/// real templates nest a handful of levels; this bounds recursion so no input overflows the stack.
pub(crate) const MAX_NESTING: usize = 64;

/// A block opened by a tag and not yet closed.
struct Open {
    kind: OpenKind,
    span: Span,
    body: Vec<Node>,
    otherwise: Option<Vec<Node>>,
}

enum OpenKind {
    For { pattern: Pattern, generator: Expr },
    If { cond: Expr, negate: bool },
}

impl OpenKind {
    fn word(&self) -> &'static str {
        match self {
            OpenKind::For { .. } => "for",
            OpenKind::If { negate: false, .. } => "if",
            OpenKind::If { negate: true, .. } => "unless",
        }
    }
}

impl Open {
    fn close(self) -> Node {
        match self.kind {
            OpenKind::For { pattern, generator } => Node::For {
                pattern,
                generator,
                body: self.body,
            },
            OpenKind::If { cond, negate } => Node::If {
                cond,
                negate,
                then: self.body,
                otherwise: self.otherwise.unwrap_or_default(),
            },
        }
    }

    /// Where nodes go now: the `else` branch once it has begun.
    fn nodes(&mut self) -> &mut Vec<Node> {
        match &mut self.otherwise {
            Some(o) => o,
            None => &mut self.body,
        }
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
    End,
    Else,
    Open(OpenKind),
    Expr(Expr),
}

/// Parses a whole template.
pub(crate) fn parse(src: &str) -> Result<Vec<Node>, SyntaxError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    for piece in split(src)? {
        let (kind, open, inner) = match piece {
            Piece::Text(t) => {
                current(&mut stack, &mut nodes).push(Node::Text(t));
                continue;
            }
            Piece::Tag { kind, open, inner } => (kind, open, inner),
        };
        let tokens = tokenize(src, inner)?;
        let tag_span = Span::new(open.start, inner.end + 2);
        match classify(tokens, tag_span)? {
            Tag::End => {
                let Some(block) = stack.pop() else {
                    return Err(SyntaxError::new(
                        tag_span,
                        "`end` without an open `for`, `if` or `unless`",
                    ));
                };
                let node = block.close();
                current(&mut stack, &mut nodes).push(node);
            }
            Tag::Else => match stack.last_mut() {
                Some(open) => match (&open.kind, &open.otherwise) {
                    (OpenKind::If { .. }, None) => open.otherwise = Some(Vec::new()),
                    (OpenKind::If { .. }, Some(_)) => {
                        return Err(SyntaxError::new(tag_span, "a second `else` in one block"));
                    }
                    (OpenKind::For { .. }, _) => {
                        return Err(SyntaxError::new(tag_span, "`for` has no `else` branch"));
                    }
                },
                None => {
                    return Err(SyntaxError::new(
                        tag_span,
                        "`else` outside an `if` or `unless` block",
                    ));
                }
            },
            Tag::Open(block) => {
                if kind == TagKind::Exec {
                    return Err(SyntaxError::new(
                        tag_span,
                        format!(
                            "a `{}` block must open with `<%=` (with `<%` its output would be lost)",
                            block.word()
                        ),
                    ));
                }
                if stack.len() >= MAX_NESTING {
                    return Err(SyntaxError::new(tag_span, "blocks nested too deeply"));
                }
                stack.push(Open {
                    kind: block,
                    span: tag_span,
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
        }
    }
    if let Some(open) = stack.pop() {
        return Err(SyntaxError::new(
            open.span,
            format!(
                "`{}` block is never closed with `<% end %>`",
                open.kind.word()
            ),
        ));
    }
    Ok(nodes)
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
        (Some("end"), 1) => return Ok(Tag::End),
        (Some("else"), 1) => return Ok(Tag::Else),
        _ => {}
    }
    let mut p = Parser {
        tokens,
        pos: 0,
        end: tag_span.end.saturating_sub(2),
        depth: 0,
    };
    let tag = match first.as_deref() {
        Some("for") => {
            p.pos = 1;
            let pattern = p.pattern()?;
            p.expect_sym("<-")?;
            let generator = p.expr()?;
            p.expect_word("do")?;
            Tag::Open(OpenKind::For { pattern, generator })
        }
        Some(w @ ("if" | "unless")) => {
            p.pos = 1;
            let negate = w == "unless";
            let cond = p.expr()?;
            p.expect_word("do")?;
            Tag::Open(OpenKind::If { cond, negate })
        }
        Some(w @ ("end" | "else" | "do")) => {
            return Err(SyntaxError::new(
                p.tokens[0].span,
                format!("`{w}` must stand alone in its tag"),
            ));
        }
        _ => {
            let e = p.expr()?;
            if p.peek_word() == Some("do") {
                return Err(SyntaxError::new(
                    p.tokens[p.pos].span,
                    "only `for`, `if` and `unless` open blocks",
                ));
            }
            Tag::Expr(e)
        }
    };
    if let Some(t) = p.tokens.get(p.pos) {
        return Err(SyntaxError::new(
            t.span,
            "unexpected token after expression",
        ));
    }
    Ok(tag)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    /// Offset of the end of the tag's contents, for "expected ... here" errors at the end.
    end: usize,
    depth: usize,
}

/// Binding power of an infix operator: (left, right); right = left + 1 is left-associative.
fn infix(tok: &Tok) -> Option<(u8, u8, Infix)> {
    let (bp, right_assoc, op) = match tok {
        Tok::Ident(w) if w == "or" => (1, false, Infix::Bin(BinOp::Or)),
        Tok::Sym("||") => (1, false, Infix::Bin(BinOp::OrElse)),
        Tok::Ident(w) if w == "and" => (2, false, Infix::Bin(BinOp::And)),
        Tok::Sym("&&") => (2, false, Infix::Bin(BinOp::AndAlso)),
        Tok::Sym("==") => (3, false, Infix::Bin(BinOp::Eq)),
        Tok::Sym("!=") => (3, false, Infix::Bin(BinOp::Ne)),
        Tok::Sym("<") => (4, false, Infix::Bin(BinOp::Lt)),
        Tok::Sym("<=") => (4, false, Infix::Bin(BinOp::Le)),
        Tok::Sym(">") => (4, false, Infix::Bin(BinOp::Gt)),
        Tok::Sym(">=") => (4, false, Infix::Bin(BinOp::Ge)),
        Tok::Sym("..") => (5, true, Infix::Range),
        Tok::Sym("<>") => (5, true, Infix::Bin(BinOp::Concat)),
        Tok::Sym("+") => (6, false, Infix::Bin(BinOp::Add)),
        Tok::Sym("-") => (6, false, Infix::Bin(BinOp::Sub)),
        Tok::Sym("*") => (7, false, Infix::Bin(BinOp::Mul)),
        Tok::Sym("/") => (7, false, Infix::Bin(BinOp::Div)),
        _ => return None,
    };
    let l = bp * 2;
    Some(if right_assoc {
        (l, l, op)
    } else {
        (l, l + 1, op)
    })
}

/// Binding power of prefix operators: above every infix operator.
const PREFIX_BP: u8 = 16;

enum Infix {
    Bin(BinOp),
    Range,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|t| &t.tok)
    }

    fn peek_word(&self) -> Option<&str> {
        match self.peek() {
            Some(Tok::Ident(w)) => Some(w),
            _ => None,
        }
    }

    fn here(&self) -> Span {
        match self.tokens.get(self.pos) {
            Some(t) => t.span,
            None => Span::new(self.end, self.end),
        }
    }

    fn next_token(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn expect_sym(&mut self, sym: &str) -> Result<Span, SyntaxError> {
        match self.tokens.get(self.pos) {
            Some(Token {
                tok: Tok::Sym(s),
                span,
            }) if *s == sym => {
                let span = *span;
                self.pos += 1;
                Ok(span)
            }
            _ => Err(SyntaxError::new(self.here(), format!("expected `{sym}`"))),
        }
    }

    fn expect_word(&mut self, w: &str) -> Result<(), SyntaxError> {
        if self.peek_word() == Some(w) {
            self.pos += 1;
            Ok(())
        } else {
            Err(SyntaxError::new(self.here(), format!("expected `{w}`")))
        }
    }

    fn eat_sym(&mut self, sym: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn binding(&mut self) -> Result<(Option<String>, Span), SyntaxError> {
        let span = self.here();
        match self.next_token() {
            Some(Token {
                tok: Tok::Ident(name),
                ..
            }) if !is_keyword(&name) => Ok(((name != "_").then_some(name), span)),
            _ => Err(SyntaxError::new(span, "expected a variable name")),
        }
    }

    fn pattern(&mut self) -> Result<Pattern, SyntaxError> {
        if self.eat_sym("{") {
            let a = self.binding()?;
            self.expect_sym(",")?;
            let b = self.binding()?;
            self.expect_sym("}")?;
            return Ok(Pattern::Pair(a, b));
        }
        let (name, span) = self.binding()?;
        Ok(Pattern::Var(name, span))
    }

    fn expr(&mut self) -> Result<Expr, SyntaxError> {
        self.expr_bp(0)
    }

    fn expr_bp(&mut self, min_bp: u8) -> Result<Expr, SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(SyntaxError::new(
                self.here(),
                "expression nested too deeply",
            ));
        }
        let mut lhs = self.prefix()?;
        while let Some((l, r, op)) = self.peek().and_then(infix) {
            if l < min_bp {
                break;
            }
            self.pos += 1;
            let rhs = self.expr_bp(r)?;
            let span = lhs.span.to(rhs.span);
            let kind = match op {
                Infix::Bin(op) => ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                Infix::Range => ExprKind::Range(Box::new(lhs), Box::new(rhs)),
            };
            lhs = Expr { kind, span };
        }
        self.depth -= 1;
        Ok(lhs)
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
            let inner = self.expr_bp(PREFIX_BP)?;
            let span = span.to(inner.span);
            // Fold `-literal` so that `-9223372036854775807 - 1` and `-1` are plain literals.
            if op == UnOp::Neg {
                match &inner.kind {
                    ExprKind::Lit(Value::Int(n)) if n.checked_neg().is_some() => {
                        return Ok(Expr {
                            kind: ExprKind::Lit(Value::Int(-n)),
                            span,
                        });
                    }
                    ExprKind::Lit(Value::Float(x)) => {
                        return Ok(Expr {
                            kind: ExprKind::Lit(Value::Float(-x)),
                            span,
                        });
                    }
                    _ => {}
                }
            }
            return Ok(Expr {
                kind: ExprKind::Unary(op, Box::new(inner)),
                span,
            });
        }
        let mut e = self.primary()?;
        loop {
            if self.eat_sym(".") {
                let span = self.here();
                match self.next_token() {
                    Some(Token {
                        tok: Tok::Ident(name),
                        ..
                    }) => {
                        e = Expr {
                            span: e.span.to(span),
                            kind: ExprKind::Field(Box::new(e), name),
                        };
                    }
                    _ => return Err(SyntaxError::new(span, "expected a key name after `.`")),
                }
            } else if self.eat_sym("[") {
                let index = self.expr()?;
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

    fn primary(&mut self) -> Result<Expr, SyntaxError> {
        let span = self.here();
        let Some(t) = self.next_token() else {
            return Err(SyntaxError::new(span, "expected an expression"));
        };
        let lit = |v: Value| {
            Ok(Expr {
                kind: ExprKind::Lit(v),
                span,
            })
        };
        match t.tok {
            Tok::Int(n) => lit(Value::Int(n)),
            Tok::Float(x) => lit(Value::Float(x)),
            Tok::Str(s) => lit(Value::from(s)),
            Tok::Assign(name) => Ok(Expr {
                kind: ExprKind::Assign(name),
                span,
            }),
            Tok::Ident(w) if w == "true" => lit(Value::Bool(true)),
            Tok::Ident(w) if w == "false" => lit(Value::Bool(false)),
            Tok::Ident(w) if w == "nil" => lit(Value::Nil),
            Tok::Ident(w) if is_keyword(&w) => {
                Err(SyntaxError::new(span, format!("unexpected keyword `{w}`")))
            }
            Tok::Ident(name) => {
                if matches!(self.peek(), Some(Tok::Sym("("))) {
                    self.call(name, span)
                } else {
                    Ok(Expr {
                        kind: ExprKind::Var(name),
                        span,
                    })
                }
            }
            Tok::Alias(module) => {
                // `Module.function(...)`: only calls, e.g. `String.upcase(x)`.
                self.expect_sym(".")?;
                let fspan = self.here();
                match self.next_token() {
                    Some(Token {
                        tok: Tok::Ident(f), ..
                    }) if matches!(self.peek(), Some(Tok::Sym("("))) => {
                        self.call(format!("{module}.{f}"), span.to(fspan))
                    }
                    _ => Err(SyntaxError::new(
                        fspan,
                        format!("expected a function call after `{module}.`"),
                    )),
                }
            }
            Tok::Sym("(") => {
                let inner = self.expr()?;
                let close = self.expect_sym(")")?;
                Ok(Expr {
                    kind: inner.kind,
                    span: span.to(close),
                })
            }
            Tok::Sym("[") => {
                let mut items = Vec::new();
                if !self.eat_sym("]") {
                    loop {
                        items.push(self.expr()?);
                        if self.eat_sym("]") {
                            break;
                        }
                        self.expect_sym(",")?;
                    }
                }
                Ok(Expr {
                    kind: ExprKind::List(items),
                    span: span.to(self.tokens[self.pos - 1].span),
                })
            }
            Tok::Key(k) => Err(SyntaxError::new(
                span,
                format!("unexpected keyword argument `{k}:` outside a call"),
            )),
            Tok::Sym(s) => Err(SyntaxError::new(span, format!("unexpected `{s}`"))),
        }
    }

    /// `name(args..., key: value...)`; the `(` is next.
    fn call(&mut self, name: String, name_span: Span) -> Result<Expr, SyntaxError> {
        self.expect_sym("(")?;
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        if !self.eat_sym(")") {
            loop {
                if let Some(Token {
                    tok: Tok::Key(k),
                    span,
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
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
        }
        let close = self.tokens[self.pos - 1].span;
        Ok(Expr {
            kind: ExprKind::Call {
                name,
                name_span,
                args,
                kwargs,
            },
            span: name_span.to(close),
        })
    }
}

fn is_keyword(w: &str) -> bool {
    matches!(
        w,
        "do" | "end"
            | "else"
            | "for"
            | "if"
            | "unless"
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

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(s: &str) -> Expr {
        let src = format!("<%= {s} %>");
        match parse(&src).unwrap().pop() {
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
            ExprKind::List(items) => {
                format!(
                    "[{}]",
                    items.iter().map(shape).collect::<Vec<_>>().join(",")
                )
            }
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
    }

    #[test]
    fn blocks_nest() {
        let nodes =
            parse("<%= for x <- @xs do %><%= if x do %>a<% else %>b<% end %><% end %>").unwrap();
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
        assert!(parse(&src).is_err());
        let src = format!("<%= {}1 %>", "-".repeat(10_000));
        assert!(parse(&src).is_err());
        let src = "<%= if true do %>".repeat(1000);
        assert!(parse(&src).is_err());
    }
}
