//! Patterns, read as expressions and then checked: the left side of `=`, of `<-`, and `case`
//! clauses. Only what a template needs: variables, `_`, literals, `^pin`, tuples, lists.

use crate::ast::{Expr, ExprKind, Pattern, UnOp};
use crate::lexer::SyntaxError;
use crate::value::Value;

/// The pattern an expression spells, or an error at the part that is not a pattern.
pub(super) fn to_pattern(e: Expr) -> Result<Pattern, SyntaxError> {
    let span = e.span;
    Ok(match e.kind {
        ExprKind::Var(name) => {
            let bind = !name.starts_with('_');
            Pattern::Var(bind.then_some(name), span)
        }
        // `%{status: :paid}` (a constant map, folded by the parser): each value a literal.
        ExprKind::Lit(Value::Map(m)) => Pattern::Map(
            m.iter()
                .map(|(k, v)| (k.as_str().to_owned(), Pattern::Lit(v.clone(), span)))
                .collect(),
            span,
        ),
        ExprKind::Map(entries) => {
            let mut out = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                let key = match &k.kind {
                    ExprKind::Lit(Value::Atom(s) | Value::Str(s)) => s.as_str().to_owned(),
                    _ => {
                        return Err(SyntaxError::new(
                            k.span,
                            "a map pattern's keys are atoms or strings",
                        ));
                    }
                };
                out.push((key, to_pattern(v)?));
            }
            Pattern::Map(out, span)
        }
        ExprKind::Lit(v @ Value::List(_)) => {
            return Err(SyntaxError::new(
                span,
                format!("a {} literal cannot be a pattern here", v.type_name()),
            ));
        }
        ExprKind::Lit(v) => Pattern::Lit(v, span),
        ExprKind::Unary(UnOp::Neg, inner) => match inner.kind {
            ExprKind::Lit(Value::Int(i)) => Pattern::Lit(Value::Int(i.wrapping_neg()), span),
            ExprKind::Lit(Value::Float(x)) => Pattern::Lit(Value::Float(-x), span),
            _ => return Err(not_a_pattern(span)),
        },
        ExprKind::Tuple(items) => Pattern::Tuple(
            items
                .into_iter()
                .map(to_pattern)
                .collect::<Result<_, _>>()?,
            span,
        ),
        ExprKind::List(items) => Pattern::List(
            items
                .into_iter()
                .map(to_pattern)
                .collect::<Result<_, _>>()?,
            span,
        ),
        ExprKind::Call { name, mut args, .. } if name == "^" && args.len() == 1 => {
            match args.pop().map(|a| a.kind) {
                Some(ExprKind::Var(v)) => Pattern::Pin(v, span),
                _ => return Err(not_a_pattern(span)),
            }
        }
        _ => return Err(not_a_pattern(span)),
    })
}

fn not_a_pattern(span: crate::ast::Span) -> SyntaxError {
    SyntaxError::new(
        span,
        "not a pattern: patterns are variables, `_`, literals, `^var`, `{...}`, `[...]` and `%{...}`",
    )
}

/// The variables a pattern binds, in order, for duplicate checks.
pub(super) fn check_bindings(p: &Pattern) -> Result<(), SyntaxError> {
    fn walk<'a>(p: &'a Pattern, seen: &mut Vec<&'a str>) -> Result<(), SyntaxError> {
        match p {
            Pattern::Var(Some(name), span) => {
                if seen.contains(&name.as_str()) {
                    return Err(SyntaxError::new(
                        *span,
                        format!("variable `{name}` bound twice in one pattern"),
                    ));
                }
                seen.push(name);
            }
            Pattern::Tuple(items, _) | Pattern::List(items, _) => {
                for i in items {
                    walk(i, seen)?;
                }
            }
            Pattern::Map(entries, _) => {
                for (_, p) in entries {
                    walk(p, seen)?;
                }
            }
            Pattern::Var(None, _) | Pattern::Lit(..) | Pattern::Pin(..) => {}
        }
        Ok(())
    }
    walk(p, &mut Vec::new())
}
