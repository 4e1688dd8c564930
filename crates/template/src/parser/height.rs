//! The height of a syntax tree, for the parser's depth limit.
//!
//! The parser recurses once per level of parentheses, brackets, calls and right-associative
//! operators, but it builds left-associative chains (`a + b + c`, `x |> f |> g`, `a and b`) and
//! postfix chains (`a.b.c`, `a[i][j]`) in a loop: without a check on the tree itself, an input
//! of a few kilobytes makes a tree thousands of levels deep on the left, and every later pass
//! that recurses over it (compiling, rendering, `Debug`, dropping its boxes, the derive's code
//! generation) would overflow the stack. So the parser measures what it builds: no expression
//! it returns is more than [`MAX_NESTING`](super::MAX_NESTING) levels high.

use crate::ast::{Expr, ExprKind, Pattern, Qualifier, Span};
use crate::span::SyntaxError;

use super::MAX_NESTING;

/// The error for an expression, or a string's interpolations, past the limit.
pub(crate) fn too_deep(span: Span, what: &str) -> SyntaxError {
    SyntaxError::new(
        span,
        format!("{what} nested too deeply (more than {MAX_NESTING} levels); split it up"),
    )
}

/// The height of `e` (a literal is 1, `a + 1` is 2) if it is at most `limit`, else `limit + 1`.
/// Recurses at most `limit + 1` calls deep whatever the tree, and looks at each node at most
/// once.
pub(super) fn height(e: &Expr, limit: usize) -> usize {
    if limit == 0 {
        return 1;
    }
    let below = limit - 1;
    let h = |e: &Expr| height(e, below);
    let children = match &e.kind {
        ExprKind::Lit(_) | ExprKind::Assign(_) | ExprKind::Var(_) => 0,
        ExprKind::Field(a, _) | ExprKind::Unary(_, a) => h(a),
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Range(a, b) => h(a).max(h(b)),
        ExprKind::List(items) | ExprKind::Tuple(items) | ExprKind::Interp(items) => {
            highest(items.iter(), below)
        }
        ExprKind::Map(entries) => highest(entries.iter().flat_map(|(k, v)| [k, v]), below),
        ExprKind::If {
            cond,
            then,
            otherwise,
            ..
        } => h(cond).max(h(then)).max(otherwise.as_deref().map_or(0, h)),
        ExprKind::Case { subject, clauses } => h(subject).max(
            clauses
                .iter()
                .map(|c| {
                    let params = c.params.iter().map(|p| pattern_height(p, below));
                    let guard = c.guard.as_ref().map_or(0, h);
                    params.max().unwrap_or(0).max(guard).max(h(&c.body))
                })
                .max()
                .unwrap_or(0),
        ),
        ExprKind::Fn(clauses) => clauses
            .iter()
            .map(|c| {
                let params = c.params.iter().map(|p| pattern_height(p, below));
                let guard = c.guard.as_ref().map_or(0, h);
                params.max().unwrap_or(0).max(guard).max(h(&c.body))
            })
            .max()
            .unwrap_or(0),
        // The bodies are tags of their own, each measured when it was read.
        ExprKind::FnBlock(clauses) => clauses
            .iter()
            .map(|c| {
                let params = c.params.iter().map(|p| pattern_height(p, below));
                params.max().unwrap_or(0).max(c.guard.as_ref().map_or(0, h))
            })
            .max()
            .unwrap_or(0),
        ExprKind::For { qualifiers, body } => qualifiers
            .iter()
            .map(|q| match q {
                Qualifier::Gen(p, e) => pattern_height(p, below).max(h(e)),
                Qualifier::Filter(e) => h(e),
            })
            .max()
            .unwrap_or(0)
            .max(h(body)),
        ExprKind::Call { args, kwargs, .. } => {
            highest(args.iter().chain(kwargs.iter().map(|(_, _, e)| e)), below)
        }
    };
    1 + children.min(limit)
}

/// The greatest [`height`] of `es` (0 for none).
fn highest<'a>(es: impl Iterator<Item = &'a Expr>, limit: usize) -> usize {
    es.map(|e| height(e, limit)).max().unwrap_or(0)
}

/// The height of a pattern, as [`height`] measures an expression.
fn pattern_height(p: &Pattern, limit: usize) -> usize {
    if limit == 0 {
        return 1;
    }
    let h = |p: &Pattern| pattern_height(p, limit - 1);
    let children = match p {
        Pattern::Var(..) | Pattern::Lit(..) | Pattern::Pin(..) => 0,
        Pattern::Tuple(ps, _) | Pattern::List(ps, _) => ps.iter().map(h).max().unwrap_or(0),
        Pattern::Map(entries, _) => entries.iter().map(|(_, p)| h(p)).max().unwrap_or(0),
    };
    1 + children.min(limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse;

    fn output(src: &str) -> Expr {
        match parse(src, false).unwrap().pop() {
            Some(crate::ast::Node::Output(e)) => e,
            other => panic!("not an output: {other:?}"),
        }
    }

    #[test]
    fn heights_count_levels_and_stop_at_the_limit() {
        assert_eq!(height(&output("<%= 1 %>"), 64), 1);
        assert_eq!(height(&output("<%= 1 + 2 * 3 %>"), 64), 3);
        assert_eq!(height(&output("<%= [[1], %{a: [2]}] %>"), 64), 4);
        assert_eq!(height(&output("<%= @x |> f |> g %>"), 64), 3);
        assert_eq!(height(&output("<%= 1 + 1 + 1 + 1 %>"), 2), 3);
        assert_eq!(height(&output("<%= 1 + 1 + 1 + 1 %>"), 0), 1);
    }
}
