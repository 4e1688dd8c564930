//! Live compiles (`EngineBuilder::live`): each dynamic of a block (an output, an `if`, `case`,
//! `cond` or `for`) is bracketed by [`Mark`]s, and each block's static text is kept apart, so a
//! render can be split into statics and dynamics (LiveView's `Rendered`) and a dynamic whose
//! assigns did not change can be skipped. Static text is still output, so partials and `fn`
//! blocks (compiled as usual) render as they always do.

use super::Compiler;
use super::expr::R;
use crate::ast::{Expr, ExprKind, Node, Qualifier};
use crate::program::{Mark, Op};

/// What a live compile keeps beside the code.
#[derive(Debug, Default)]
pub(super) struct LiveBuild {
    /// Each block's statics, by block number; a block with `n` dynamics has `n + 1`.
    pub(super) blocks: Vec<Vec<String>>,
    /// The blocks being compiled, innermost last (0, the template, at the bottom).
    stack: Vec<u32>,
    /// The body block of the `for` whose innermost body comes next.
    row: Option<u32>,
    /// `Dyn` marks that may be skipped, with the names of the assigns they read: resolved to
    /// indices once the program's assign table is final.
    pub(super) reads: Vec<(usize, Vec<String>)>,
}

impl LiveBuild {
    pub(super) fn new() -> LiveBuild {
        LiveBuild {
            blocks: vec![vec![String::new()]],
            stack: vec![0],
            ..LiveBuild::default()
        }
    }

    fn current(&mut self) -> &mut Vec<String> {
        let at = *self.stack.last().unwrap_or(&0) as usize;
        &mut self.blocks[at]
    }

    /// Static text of the current block.
    pub(super) fn text(&mut self, t: &str) {
        if let Some(last) = self.current().last_mut() {
            last.push_str(t);
        }
    }

    fn new_block(&mut self) -> u32 {
        self.blocks.push(vec![String::new()]);
        (self.blocks.len() - 1) as u32
    }
}

impl Compiler<'_> {
    /// Whether this node is a dynamic of its block in a live compile.
    pub(super) fn live_dynamic(&self, node: &Node) -> bool {
        self.live.is_some()
            && match node {
                Node::Text(_) | Node::Exec(_) => false,
                Node::Bind { output, .. } => *output,
                _ => true,
            }
    }

    /// Compiles `node`, a dynamic of the current block, between its marks.
    pub(super) fn live_node(&mut self, node: &Node) -> R<()> {
        let top = self.live.as_ref().is_some_and(|l| l.stack.len() == 1);
        let reads = match node {
            // `<%= x = expr %>` binds for the rest of the template: never skipped.
            Node::Bind { .. } => None,
            _ if top => self.skippable(node),
            _ => None,
        };
        let start = self.emit(Op::Mark(Mark::Dyn {
            reads: Box::new([]),
            skip: usize::MAX,
        }));
        match node {
            Node::For { qualifiers, body } => {
                let id = self.live_mut().new_block();
                self.emit(Op::Mark(Mark::Comp(id)));
                let outer = self.live_mut().row.replace(id);
                self.for_loop(qualifiers, body)?;
                self.live_mut().row = outer;
                self.emit(Op::Mark(Mark::End));
            }
            other => self.node_code(other)?,
        }
        self.emit(Op::Mark(Mark::End));
        let after = self.ops.len();
        let live = self.live_mut();
        live.current().push(String::new());
        if let Some(names) = reads {
            live.reads.push((start, names));
            if let Op::Mark(Mark::Dyn { skip, .. }) = &mut self.ops[start].op {
                *skip = after;
            }
        }
        Ok(())
    }

    /// A branch body (`if`, `case`, `cond`): a block of its own in a live compile.
    pub(super) fn live_branch(&mut self, nodes: &[Node]) -> R<()> {
        if self.live.is_none() {
            return self.block(nodes);
        }
        let id = self.live_mut().new_block();
        self.emit(Op::Mark(Mark::Block(id)));
        self.live_mut().stack.push(id);
        let r = self.block(nodes);
        self.live_mut().stack.pop();
        r?;
        self.emit(Op::Mark(Mark::End));
        Ok(())
    }

    /// The innermost body of a `for`: in a live compile, one row of its comprehension.
    pub(super) fn live_body(&mut self, nodes: &[Node]) -> R<()> {
        let Some(id) = self.live.as_mut().and_then(|l| l.row.take()) else {
            return self.nodes(nodes);
        };
        self.emit(Op::Mark(Mark::Row));
        self.live_mut().stack.push(id);
        let r = self.nodes(nodes);
        self.live_mut().stack.pop();
        r?;
        self.emit(Op::Mark(Mark::End));
        self.live_mut().row = Some(id);
        Ok(())
    }

    fn live_mut(&mut self) -> &mut LiveBuild {
        self.live.get_or_insert_with(LiveBuild::new)
    }

    /// The assigns `node` reads, when they alone decide its output: not when it reads `assigns`
    /// whole, calls a partial or reads a variable bound earlier in the template.
    fn skippable(&self, node: &Node) -> Option<Vec<String>> {
        let mut names = Vec::new();
        node_reads(node, &mut names, &|v| {
            v == "assigns" || self.names.lookup(v).is_some()
        })?;
        Some(names)
    }
}

/// The assigns every expression of `node` reads (its branches' and body's too), when known:
/// `outside` names the variables bound before the node (its own loop and clause variables are
/// not in scope yet when it is compiled).
fn node_reads(node: &Node, names: &mut Vec<String>, outside: &dyn Fn(&str) -> bool) -> Option<()> {
    let body = |nodes: &[Node], names: &mut Vec<String>| -> Option<()> {
        nodes.iter().try_for_each(|n| node_reads(n, names, outside))
    };
    match node {
        Node::Text(_) => {}
        Node::Output(e) | Node::Exec(e) => expr_reads(e, names, outside)?,
        Node::Bind { value, .. } => expr_reads(value, names, outside)?,
        Node::For {
            qualifiers,
            body: b,
        } => {
            for q in qualifiers {
                match q {
                    Qualifier::Gen(_, e) | Qualifier::Filter(e) => expr_reads(e, names, outside)?,
                }
            }
            body(b, names)?;
        }
        Node::Case { subject, clauses } => {
            expr_reads(subject, names, outside)?;
            for c in clauses {
                if let Some(g) = &c.guard {
                    expr_reads(g, names, outside)?;
                }
                body(&c.body, names)?;
            }
        }
        Node::Cond { clauses } => {
            for (c, b) in clauses {
                expr_reads(c, names, outside)?;
                body(b, names)?;
            }
        }
        Node::If {
            cond,
            then,
            otherwise,
            ..
        } => {
            expr_reads(cond, names, outside)?;
            body(then, names)?;
            body(otherwise, names)?;
        }
    }
    Some(())
}

/// Adds the assigns `e` reads to `names`; `None` when `e` reads a variable `outside` says comes
/// from outside, or calls a partial, or holds a `fn` block (whose body is template nodes).
fn expr_reads(e: &Expr, names: &mut Vec<String>, outside: &dyn Fn(&str) -> bool) -> Option<()> {
    let each = |es: &[Expr], names: &mut Vec<String>| -> Option<()> {
        es.iter().try_for_each(|e| expr_reads(e, names, outside))
    };
    match &e.kind {
        ExprKind::Lit(_) => {}
        ExprKind::Assign(name) => {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        ExprKind::Var(v) => {
            if outside(v) {
                return None;
            }
        }
        ExprKind::Field(inner, _) | ExprKind::Unary(_, inner) => expr_reads(inner, names, outside)?,
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Range(a, b) => {
            expr_reads(a, names, outside)?;
            expr_reads(b, names, outside)?;
        }
        ExprKind::List(es) | ExprKind::Tuple(es) | ExprKind::Interp(es) => each(es, names)?,
        ExprKind::Map(pairs) => {
            for (k, v) in pairs {
                expr_reads(k, names, outside)?;
                expr_reads(v, names, outside)?;
            }
        }
        ExprKind::If {
            cond,
            then,
            otherwise,
            ..
        } => {
            expr_reads(cond, names, outside)?;
            expr_reads(then, names, outside)?;
            if let Some(o) = otherwise {
                expr_reads(o, names, outside)?;
            }
        }
        ExprKind::Case { subject, clauses } => {
            expr_reads(subject, names, outside)?;
            clause_reads(clauses, names, outside)?;
        }
        ExprKind::Fn(clauses) => clause_reads(clauses, names, outside)?,
        ExprKind::FnBlock(_) => return None,
        ExprKind::For { qualifiers, body } => {
            for q in qualifiers {
                match q {
                    Qualifier::Gen(_, e) | Qualifier::Filter(e) => expr_reads(e, names, outside)?,
                }
            }
            expr_reads(body, names, outside)?;
        }
        ExprKind::Call {
            name, args, kwargs, ..
        } => {
            if name == "render" {
                return None;
            }
            each(args, names)?;
            for (_, _, v) in kwargs {
                expr_reads(v, names, outside)?;
            }
        }
    }
    Some(())
}

/// The reads of anonymous functions' clauses (a parameter named as a variable from outside is
/// taken for that variable: conservative).
fn clause_reads(
    clauses: &[crate::ast::FnClause],
    names: &mut Vec<String>,
    outside: &dyn Fn(&str) -> bool,
) -> Option<()> {
    for c in clauses {
        if let Some(g) = &c.guard {
            expr_reads(g, names, outside)?;
        }
        expr_reads(&c.body, names, outside)?;
    }
    Some(())
}
