//! Sigils: `~r` (a call of `Regex.compile!`), `~s` and `~S` (strings), `~w` and `~W` (lists of
//! words), read from the lexer's sigil token.

use crate::ast::{Expr, ExprKind, Span};
use crate::lexer::{Part, SyntaxError};
use crate::value::Value;

use super::expr::Parser;

impl Parser {
    /// `~r/src/mods` (a call of `Regex.compile!`, which the compiler runs when the source is
    /// literal), `~s(...)` and `~S(...)` (strings), `~w(...)` and `~W(...)` (words, with the
    /// modifiers `s` or `a`).
    pub(super) fn sigil(
        &mut self,
        letter: char,
        parts: Vec<Part>,
        mods: &str,
        span: Span,
    ) -> Result<Expr, SyntaxError> {
        let mut text = self.interpolation(parts, span)?;
        if let ExprKind::Interp(items) = &mut text.kind
            && items.len() == 1
            && matches!(items[0].kind, ExprKind::Lit(Value::Str(_)))
            && let Some(only) = items.pop()
        {
            text.kind = only.kind;
        }
        let bad_mods = |what: &str| {
            SyntaxError::new(
                span,
                format!("invalid modifiers `{mods}` for ~{letter} ({what})"),
            )
        };
        let kind = match letter {
            'r' | 'R' => ExprKind::Call {
                name: "Regex.compile!".to_owned(),
                name_span: span,
                args: vec![
                    text,
                    Expr {
                        kind: ExprKind::Lit(Value::from(mods)),
                        span,
                    },
                ],
                kwargs: Vec::new(),
            },
            's' | 'S' if mods.is_empty() => text.kind,
            's' | 'S' => return Err(bad_mods("it takes none")),
            'w' | 'W' if !matches!(mods, "" | "s" | "a") => {
                return Err(bad_mods(
                    "galleon takes `s` or `a`; charlists are not supported",
                ));
            }
            'w' | 'W' => match text.kind {
                ExprKind::Lit(Value::Str(words)) => ExprKind::List(
                    words
                        .as_str()
                        .split_whitespace()
                        .map(|w| Expr {
                            kind: ExprKind::Lit(if mods == "a" {
                                Value::atom(w)
                            } else {
                                Value::str(w)
                            }),
                            span,
                        })
                        .collect(),
                ),
                _ if mods == "a" => {
                    return Err(SyntaxError::new(
                        span,
                        "~w with `a` takes no interpolation (galleon makes no atoms at render time)",
                    ));
                }
                kind => ExprKind::Call {
                    name: "String.split".to_owned(),
                    name_span: span,
                    args: vec![Expr { kind, span }],
                    kwargs: Vec::new(),
                },
            },
            other => {
                return Err(SyntaxError::new(
                    span,
                    format!(
                        "the sigil ~{other} is not supported (galleon has ~r, ~s, ~w, ~R, ~S and ~W)"
                    ),
                ));
            }
        };
        Ok(Expr { kind, span })
    }
}
