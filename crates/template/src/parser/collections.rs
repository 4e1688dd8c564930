//! Literal collections: lists (with keyword-list entries, `[class: "btn"]`, each the tuple
//! `{:class, "btn"}`), tuples and maps.

use crate::ast::{Expr, ExprKind, Span};
use crate::lexer::{SyntaxError, Tok, Token};
use crate::value::Value;

use super::expr::Parser;

impl Parser {
    /// `[a, b]`, or a keyword list `[class: "x", id: 1]` (also after positional items,
    /// `[1, a: 2]`, as in Elixir): each `key: value` is the tuple `{:key, value}`; `[` is
    /// consumed.
    pub(super) fn list(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        let mut items = Vec::new();
        let mut keyword = false;
        if !self.eat_sym("]") {
            loop {
                if let Some(key) = self.keyword_key() {
                    keyword = true;
                    let value = self.expr()?;
                    let pair = key.span.to(value.span);
                    items.push(Expr {
                        kind: ExprKind::Tuple(vec![key, value]),
                        span: pair,
                    });
                } else if keyword {
                    return Err(SyntaxError::new(
                        self.here(),
                        "unexpected expression after a keyword list: keywords must come last",
                    ));
                } else {
                    items.push(self.expr()?);
                }
                if self.eat_sym("]") {
                    break;
                }
                self.expect_sym(",")?;
            }
        }
        Ok(Expr {
            kind: ExprKind::List(items),
            span: span.to(self.prev_span()),
        })
    }

    /// `{a, b}`; `{` is consumed.
    pub(super) fn tuple(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        let items = self.items("}")?;
        Ok(Expr {
            kind: ExprKind::Tuple(items),
            span: span.to(self.prev_span()),
        })
    }

    /// Comma-separated expressions up to `close` (the opening bracket is consumed).
    fn items(&mut self, close: &str) -> Result<Vec<Expr>, SyntaxError> {
        let mut items = Vec::new();
        if !self.eat_sym(close) {
            loop {
                items.push(self.expr()?);
                if self.eat_sym(close) {
                    break;
                }
                self.expect_sym(",")?;
            }
        }
        Ok(items)
    }

    /// A `key:` token, consumed, as the atom it names (keyword lists and map literals).
    fn keyword_key(&mut self) -> Option<Expr> {
        let Some(Token {
            tok: Tok::Key(k),
            span,
            ..
        }) = self.tokens.get(self.pos)
        else {
            return None;
        };
        let key = Expr {
            kind: ExprKind::Lit(Value::atom(k)),
            span: *span,
        };
        self.pos += 1;
        Some(key)
    }

    /// `%{k => v, key: v}`; `%{` is consumed.
    pub(super) fn map(&mut self, span: Span) -> Result<Expr, SyntaxError> {
        let mut entries = Vec::new();
        if !self.eat_sym("}") {
            loop {
                if let Some(key) = self.keyword_key() {
                    entries.push((key, self.expr()?));
                } else {
                    let key = self.expr()?;
                    self.expect_sym("=>")?;
                    entries.push((key, self.expr()?));
                }
                if self.eat_sym("}") {
                    break;
                }
                self.expect_sym(",")?;
            }
        }
        Ok(Expr {
            kind: ExprKind::Map(entries),
            span: span.to(self.prev_span()),
        })
    }
}
