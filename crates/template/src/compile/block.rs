//! `fn` blocks (`Enum.map(@items, fn item -> %>...<% end)`): each clause's body is compiled
//! as instructions of the program, jumped over where the tag stands, ending in a jump to
//! [`RETURN`]; the `fn` itself becomes an ordinary function whose clauses' bodies are
//! [`CodeKind::Block`]s, which the VM runs in a copy of the frame and whose output is the value.

use super::Compiler;
use super::expr::{FN_SLOT, Names, R};
use crate::ast::{BlockClause, Expr, ExprKind, Span};
use crate::lexer::SyntaxError;
use crate::program::{BlockCode, Code, CodeKind, FnClauseCode, FnCode, Op, RETURN};

/// A `fn` block's bodies, compiled before the expression holding it.
pub(super) struct CompiledBlock {
    /// The `fn`'s span: which `fn` block this is.
    span: Span,
    /// The number of variables in scope where the bodies were compiled: the `fn` must be
    /// compiled in the same scope (not inside another function, whose parameters its bodies
    /// cannot see).
    scope: usize,
    /// Per clause: the first instruction of its body, and the frame slot each variable its
    /// parameters bind takes there.
    clauses: Vec<(usize, Vec<(String, usize)>)>,
}

impl Compiler<'_> {
    /// Compiles the bodies of the `fn` blocks in `e` (a tag's expression), ahead of it.
    /// Out of line: `node`'s frame, which nested blocks multiply, stays small.
    #[inline(never)]
    pub(super) fn fn_blocks(&mut self, e: &Expr) -> R<()> {
        // A `fn` block's body is a value, output as one dynamic: compiled as usual.
        let live = self.live.take();
        let r = self.fn_blocks_in(e);
        self.live = live;
        r
    }

    fn fn_blocks_in(&mut self, e: &Expr) -> R<()> {
        let mut found = Vec::new();
        find(e, &mut found);
        for (clauses, span) in found {
            // The text before the tag rides on the jump over the bodies.
            let over = self.emit(Op::Jump(usize::MAX));
            let mut compiled = Vec::with_capacity(clauses.len());
            for clause in clauses {
                let scope = self.names.scope.len();
                let mut vars = Vec::new();
                clause.params.iter().for_each(|p| p.bound(&mut vars));
                let slots = vars
                    .into_iter()
                    .map(|(name, _)| {
                        let slot = self.names.bind(&name);
                        (name, slot)
                    })
                    .collect();
                let start = self.ops.len();
                let r = self.nodes(&clause.body);
                self.names.scope.truncate(scope);
                r?;
                // The body's trailing text rides on its return.
                self.emit(Op::Jump(RETURN));
                compiled.push((start, slots));
            }
            let end = self.ops.len();
            self.patch(over, end);
            self.names.blocks.push(CompiledBlock {
                span,
                scope: self.names.scope.len(),
                clauses: compiled,
            });
        }
        Ok(())
    }
}

impl Names<'_> {
    /// The function of `fn` block `clauses` (at `span`), its bodies compiled by
    /// [`Compiler::fn_blocks`]: each clause's parameters bind function slots (matched and
    /// guarded as any `fn`'s), then move into its body's frame slots.
    /// Out of line: `expr`'s frame, which recursion multiplies, stays small.
    #[inline(never)]
    pub(super) fn fn_block(&mut self, clauses: &[BlockClause], span: Span) -> R<Code> {
        let Some(at) = self.blocks.iter().position(|b| b.span == span) else {
            return Err(SyntaxError::new(
                span,
                "a `fn` spanning tags must be an argument of the call in its tag, not inside \
                 another function, a `case` or a one-line `for`",
            ));
        };
        if self.blocks[at].scope != self.scope.len() {
            return Err(SyntaxError::new(
                span,
                "a `fn` spanning tags cannot stand inside another function or a one-line `for`",
            ));
        }
        let compiled = std::mem::take(&mut self.blocks[at].clauses);
        let mut out = Vec::with_capacity(clauses.len());
        for (clause, (start, slots)) in clauses.iter().zip(compiled) {
            let scope = self.scope.len();
            let r = self.block_clause(clause, start, &slots, span);
            self.scope.truncate(scope);
            out.push(r?);
        }
        Ok(Code {
            kind: CodeKind::Fn(Box::new(FnCode {
                arity: clauses.first().map_or(0, |c| c.params.len()),
                clauses: out,
                slots_end: self.fn_slots,
                span,
                with_else: false,
            })),
            span,
        })
    }

    fn block_clause(
        &mut self,
        clause: &BlockClause,
        start: usize,
        slots: &[(String, usize)],
        span: Span,
    ) -> R<FnClauseCode> {
        let params = clause
            .params
            .iter()
            .map(|p| self.fn_pattern(p))
            .collect::<R<Vec<_>>>()?;
        let guard = match &clause.guard {
            Some(g) => Some(self.expr(g)?),
            None => None,
        };
        let moves = slots
            .iter()
            .filter_map(|(name, frame)| Some((self.lookup(name)?.checked_sub(FN_SLOT)?, *frame)))
            .collect();
        Ok(FnClauseCode {
            params,
            guard,
            body: Code {
                kind: CodeKind::Block(Box::new(BlockCode { start, moves })),
                span,
            },
        })
    }
}

/// The `fn` blocks of `e`, in order (not those in their bodies: those are tags of their own),
/// outside functions, comprehensions and `case` clauses.
fn find<'e>(e: &'e Expr, out: &mut Vec<(&'e [BlockClause], Span)>) {
    let mut walk = |x: &'e Expr| find(x, out);
    match &e.kind {
        ExprKind::FnBlock(clauses) => out.push((clauses, e.span)),
        ExprKind::Lit(_) | ExprKind::Assign(_) | ExprKind::Var(_) => {}
        ExprKind::Field(x, _) | ExprKind::Unary(_, x) => walk(x),
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Range(a, b) => {
            walk(a);
            walk(b);
        }
        ExprKind::List(xs) | ExprKind::Tuple(xs) | ExprKind::Interp(xs) => {
            xs.iter().for_each(walk);
        }
        ExprKind::Map(kvs) => kvs.iter().for_each(|(k, v)| {
            walk(k);
            walk(v);
        }),
        ExprKind::If {
            cond,
            then,
            otherwise,
            ..
        } => {
            walk(cond);
            walk(then);
            if let Some(o) = otherwise {
                walk(o);
            }
        }
        // Not inside what binds variables of its own: a `fn` block's bodies could not see them
        // (`Names::fn_block` then reports the `fn` block).
        ExprKind::Case { subject, .. } => walk(subject),
        ExprKind::Fn(_) | ExprKind::For { .. } => {}
        ExprKind::Call { args, kwargs, .. } => {
            args.iter().for_each(&mut walk);
            kwargs.iter().for_each(|(_, _, v)| walk(v));
        }
    }
}
