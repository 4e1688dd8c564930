//! Compiler: the syntax tree to a [`Program`]: a flat list of ops with jumps, all static text in
//! one shared buffer, variables resolved to slots, and constant output folded into the text.
//! Expressions and patterns are compiled in `expr.rs`.
//!
//! A loop whose body is static text alone (Blah, Doom) also gets a `Repeat`: the body repeated back
//! to back up to 32 KiB (`REPEAT_BLOCK`) at the end of the same text, so a render outputs many
//! iterations as one reference, still charging a step per iteration and pausing where the
//! one-by-one loop would (`tests/repeat.rs`).

mod block;
mod expr;
mod live;
mod suggest;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::ast::{Clause, Expr, ExprKind, Node, Pattern, Qualifier, Span};
use crate::error::{Error, ErrorKind, Location};
use crate::function::Function;
use crate::parser::{STEPPED_RANGE, WITH_OTHER, parse};
use crate::program::{
    Bind, Code, CodeKind, Generator, Instr, Op, PlainBody, Program, REPEAT_BLOCK, Repeat, SizeHint,
    Straight,
};
use crate::scalar::write_scalar;
use crate::span::SyntaxError;
use crate::value::Value;
use expr::{Names, R};

/// What a compile may depend on besides the source.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Options<'a> {
    /// EEx's `trim: true`.
    pub(crate) trim: bool,
    /// Functions registered from Rust, callable by name.
    pub(crate) functions: &'a [Function],
    /// Compiled for live pages (`compile/live.rs`).
    pub(crate) live: bool,
}

/// Compiles template `name` from `source`.
pub(crate) fn compile(name: &str, source: &str, options: Options<'_>) -> Result<Program, Error> {
    let located = |e: SyntaxError| {
        Error::new(ErrorKind::Syntax, e.message).at(Location::new(name, source, e.span))
    };
    let nodes = parse(source, options.trim).map_err(located)?;
    let mut c = Compiler {
        names: Names {
            template: name,
            scope: Vec::new(),
            locals: 0,
            assigns: Vec::new(),
            partials: Vec::new(),
            functions: options.functions,
            fn_slots: 0,
            binding_fn: false,
            all_assigns: false,
            blocks: Vec::new(),
        },
        text: Vec::new(),
        pending: Vec::new(),
        ops: Vec::new(),
        text_ops: Vec::new(),
        repeats: Vec::new(),
        plains: Vec::new(),
        live: options.live.then(live::LiveBuild::new),
    };
    c.nodes(&nodes).map_err(located)?;
    c.flush();
    // Each repeated body's block goes at the end of the text, so a render's one pin covers it.
    let mut blocks = Vec::with_capacity(c.repeats.len());
    for &at in &c.repeats {
        let Some((_, unit)) = c.text_ops.iter().find(|(i, _)| *i == at).cloned() else {
            continue;
        };
        let copies = (REPEAT_BLOCK / unit.len()).max(1);
        let start = c.text.len();
        for _ in 0..copies {
            c.text.extend_from_within(unit.clone());
        }
        blocks.push((at, unit.len(), start..c.text.len()));
    }
    let text = Bytes::from(c.text);
    let mut ops = c.ops;
    for (i, range) in c.text_ops {
        ops[i].text = text.slice(range);
    }
    for (i, unit, range) in blocks {
        if let Op::ForNext { repeat, .. } = &mut ops[i].op {
            *repeat = Some(Repeat {
                block: text.slice(range),
                unit,
            });
        }
    }
    for (body, next, bind) in c.plains {
        let decoded = PlainBody::decode(&ops, body, next, bind);
        if let Op::ForNext { plain, .. } = &mut ops[next].op {
            *plain = decoded.map(Box::new);
        }
    }
    let links = vec![usize::MAX; c.names.partials.len()];
    let straight = Straight::of(&ops);
    let live = c.live.map(|l| {
        // A skippable dynamic's reads, as indices into the final assign table.
        for (at, names) in l.reads {
            let idx: Option<Vec<u16>> = names
                .iter()
                .map(|n| {
                    c.names
                        .assigns
                        .iter()
                        .position(|a| a == n)
                        .map(|i| i as u16)
                })
                .collect();
            if let Op::Mark(crate::program::Mark::Dyn { reads, skip }) = &mut ops[at].op {
                match idx {
                    Some(i) => *reads = i.into(),
                    None => *skip = usize::MAX,
                }
            }
        }
        Arc::from(l.blocks)
    });
    Ok(Program {
        name: name.to_owned(),
        source: Arc::from(source),
        text,
        ops,
        assigns: c.names.assigns,
        all_assigns: c.names.all_assigns,
        locals: c.names.locals,
        partials: c.names.partials,
        links,
        size_hint: SizeHint::default(),
        straight,
        live,
    })
}

struct Compiler<'a> {
    names: Names<'a>,
    /// All static text so far.
    text: Vec<u8>,
    /// Static text not yet given an op (adjacent text and constants merge here).
    pending: Vec<u8>,
    ops: Vec<Instr>,
    /// Instructions whose text is this range of `text`, set once `text` is frozen.
    text_ops: Vec<(usize, Range<usize>)>,
    /// `ForNext` instructions whose loop body is their text alone (see [`Repeat`]).
    repeats: Vec<usize>,
    /// Loops that may be plain, as their body's start, their bottom and their binding: decoded
    /// once the text is final.
    plains: Vec<(usize, usize, Bind)>,
    /// A live compile's blocks and marks (`compile/live.rs`); `None`: an ordinary compile.
    live: Option<live::LiveBuild>,
}

impl Compiler<'_> {
    /// Emits `op`, carrying the pending static text.
    fn emit(&mut self, op: Op) -> usize {
        let at = self.ops.len();
        if !self.pending.is_empty() {
            let start = self.text.len();
            self.text.extend_from_slice(&self.pending);
            self.pending.clear();
            self.text_ops.push((at, start..self.text.len()));
        }
        self.ops.push(Instr {
            text: Bytes::new(),
            op,
        });
        at
    }

    /// Emits the pending text as an instruction of its own. Needed before a jump target: text
    /// riding on the target's instruction would be output by every path that jumps there.
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.emit(Op::Text);
        }
    }

    /// Points the jump of instruction `at` (a `Branch`, `Jump` or `Match`) at `target`.
    fn patch(&mut self, at: usize, to: usize) {
        match &mut self.ops[at].op {
            Op::Branch { target, .. } | Op::Jump(target) => *target = to,
            Op::Match { fail, .. } => *fail = Some(to),
            _ => {}
        }
    }

    fn nodes(&mut self, nodes: &[Node]) -> R<()> {
        for node in nodes {
            self.node(node)?;
        }
        Ok(())
    }

    /// Compiles `nodes` in a scope of their own: variables bound inside are not seen after.
    fn block(&mut self, nodes: &[Node]) -> R<()> {
        let scope = self.names.scope.len();
        let r = self.nodes(nodes);
        self.names.scope.truncate(scope);
        r
    }

    fn output(&mut self, code: Code) {
        let (code, escape) = match code.kind {
            CodeKind::Raw(inner) => (*inner, false),
            kind => (
                Code {
                    kind,
                    span: code.span,
                },
                true,
            ),
        };
        match code.kind {
            // Constant output is static text: `<%= "" %>` costs nothing at all.
            CodeKind::Lit(ref v)
                if !matches!(
                    v,
                    Value::List(_) | Value::Map(_) | Value::Tuple(_) | Value::Regex(_)
                ) =>
            {
                write_scalar(v, escape, &mut self.pending);
            }
            CodeKind::Partial { partial, args } => {
                self.emit(Op::Call {
                    partial,
                    args,
                    span: code.span,
                });
            }
            kind => {
                self.emit(Op::Output {
                    code: Code {
                        kind,
                        span: code.span,
                    },
                    escape,
                });
            }
        }
    }

    fn node(&mut self, node: &Node) -> R<()> {
        if self.live_dynamic(node) {
            return self.live_node(node);
        }
        self.node_code(node)
    }

    /// The code of `node` (in a live compile, the marks around it are `live_node`'s).
    fn node_code(&mut self, node: &Node) -> R<()> {
        match node {
            Node::Text(t) => {
                if let Some(l) = &mut self.live {
                    l.text(t);
                }
                self.pending.extend_from_slice(t.as_bytes());
            }
            Node::Output(e) => {
                self.fn_blocks(e)?;
                let code = self.names.expr(e)?;
                self.output(code);
            }
            Node::Exec(e) => {
                self.fn_blocks(e)?;
                let code = self.names.expr(e)?;
                self.emit(Op::Exec(code));
            }
            Node::Bind {
                pattern,
                value,
                output,
            } => {
                self.fn_blocks(value)?;
                let code = self.names.expr(value)?;
                let span = code.span;
                let slot = match (pattern, output) {
                    // `x = expr`: stored straight into `x`'s new slot.
                    (Pattern::Var(Some(name), _), false) => {
                        let slot = self.names.bind(name);
                        self.emit(Op::Set { slot, code });
                        return Ok(());
                    }
                    _ => self.names.fresh(),
                };
                self.emit(Op::Set { slot, code });
                let pattern = self.names.pattern(pattern)?;
                self.emit(Op::Match {
                    pattern,
                    slot,
                    fail: None,
                    span,
                });
                if *output {
                    self.output(Code {
                        kind: CodeKind::Local(slot),
                        span,
                    });
                }
            }
            Node::For { qualifiers, body } => self.for_loop(qualifiers, body)?,
            Node::If {
                cond,
                negate,
                then,
                otherwise,
            } => {
                let cond = self.names.expr(cond)?;
                let branch = self.emit(Op::Branch {
                    cond,
                    jump_when: *negate,
                    target: usize::MAX,
                });
                self.live_branch(then)?;
                let mut jump_over_else = None;
                if otherwise.is_empty() {
                    self.flush();
                } else {
                    // The then-branch's trailing text rides on its jump over the else-branch.
                    jump_over_else = Some(self.emit(Op::Jump(usize::MAX)));
                }
                let else_start = self.ops.len();
                self.patch(branch, else_start);
                if !otherwise.is_empty() {
                    self.live_branch(otherwise)?;
                }
                self.flush();
                if let Some(j) = jump_over_else {
                    let end = self.ops.len();
                    self.patch(j, end);
                }
            }
            Node::Case { subject, clauses } => self.case(subject, clauses)?,
            Node::Cond { clauses } => {
                let mut to_end = Vec::new();
                for (cond, body) in clauses {
                    self.flush();
                    let cond = self.names.expr(cond)?;
                    let branch = self.emit(Op::Branch {
                        cond,
                        jump_when: false,
                        target: usize::MAX,
                    });
                    self.live_branch(body)?;
                    to_end.push(self.emit(Op::Jump(usize::MAX)));
                    let next = self.ops.len();
                    self.patch(branch, next);
                }
                let span = clauses.first().map_or(Span::default(), |c| c.0.span);
                self.emit(Op::NoClause {
                    slot: None,
                    span,
                    with: false,
                });
                let end = self.ops.len();
                for j in to_end {
                    self.patch(j, end);
                }
            }
        }
        Ok(())
    }

    /// `case`: the subject in a slot, then each clause: match (jumping to the next clause on
    /// failure), guard, body, jump to the end. No match is an error, as in Elixir.
    fn case(&mut self, subject: &Expr, clauses: &[Clause]) -> R<()> {
        let code = self.names.expr(subject)?;
        let span = code.span;
        let slot = self.names.fresh();
        self.emit(Op::Set { slot, code });
        let mut to_end = Vec::new();
        for clause in clauses {
            let scope = self.names.scope.len();
            let pattern = self.names.pattern(&clause.pattern)?;
            let m = self.emit(Op::Match {
                pattern,
                slot,
                fail: Some(usize::MAX),
                span: clause.pattern.span(),
            });
            let guard = match &clause.guard {
                Some(g) => {
                    let cond = self.names.expr(g)?;
                    Some(self.emit(Op::Branch {
                        cond,
                        jump_when: false,
                        target: usize::MAX,
                    }))
                }
                None => None,
            };
            self.live_branch(&clause.body)?;
            self.names.scope.truncate(scope);
            to_end.push(self.emit(Op::Jump(usize::MAX)));
            let next = self.ops.len();
            self.patch(m, next);
            if let Some(g) = guard {
                self.patch(g, next);
            }
        }
        // A `with` block's `else` clauses are a `case` on the value that did not match.
        let with = matches!(&subject.kind, ExprKind::Var(n) if n == WITH_OTHER);
        self.emit(Op::NoClause {
            slot: Some(slot),
            span,
            with,
        });
        let end = self.ops.len();
        for j in to_end {
            self.patch(j, end);
        }
        Ok(())
    }

    /// A `for`: the first generator becomes the loop; filters and further generators nest
    /// inside it, in order.
    fn for_loop(&mut self, qualifiers: &[Qualifier], body: &[Node]) -> R<()> {
        let scope = self.names.scope.len();
        let r = self.qualifiers(qualifiers, body);
        self.names.scope.truncate(scope);
        r
    }

    fn qualifiers(&mut self, qualifiers: &[Qualifier], body: &[Node]) -> R<()> {
        let Some((first, rest)) = qualifiers.split_first() else {
            return self.live_body(body);
        };
        match first {
            Qualifier::Filter(cond) => {
                self.flush();
                let cond = self.names.expr(cond)?;
                let branch = self.emit(Op::Branch {
                    cond,
                    jump_when: false,
                    target: usize::MAX,
                });
                self.qualifiers(rest, body)?;
                self.flush();
                let end = self.ops.len();
                self.patch(branch, end);
                Ok(())
            }
            Qualifier::Gen(pattern, generator) => self.generator(pattern, generator, rest, body),
        }
    }

    fn generator(
        &mut self,
        pattern: &Pattern,
        generator: &Expr,
        rest: &[Qualifier],
        body_nodes: &[Node],
    ) -> R<()> {
        // `{x, i} <- Enum.with_index(list)` binds both without building a tuple per element.
        let with_index = match (&generator.kind, pattern) {
            (
                ExprKind::Call {
                    name, args, kwargs, ..
                },
                Pattern::Tuple(items, _),
            ) if name == "Enum.with_index"
                && args.len() == 1
                && kwargs.is_empty()
                && items.len() == 2
                && items.iter().all(|p| matches!(p, Pattern::Var(..))) =>
            {
                Some(&args[0])
            }
            _ => None,
        };
        let inner = with_index.unwrap_or(generator);
        let gen_ = match &inner.kind {
            ExprKind::Range(a, b) => {
                Generator::Range(self.names.expr(a)?, self.names.expr(b)?, None)
            }
            ExprKind::Call {
                name, args, kwargs, ..
            } if name == STEPPED_RANGE && args.len() == 3 && kwargs.is_empty() => Generator::Range(
                self.names.expr(&args[0])?,
                self.names.expr(&args[1])?,
                Some(Box::new(self.names.expr(&args[2])?)),
            ),
            _ => Generator::Items(self.names.expr(inner)?),
        };
        let init = self.emit(Op::ForInit {
            generator: gen_,
            bind: Bind {
                item: None,
                index: None,
            },
            exit: usize::MAX,
        });
        let var = |p: &Pattern| match p {
            Pattern::Var(name, _) => name.clone(),
            _ => None,
        };
        let (bind, matcher) = match (pattern, with_index) {
            (Pattern::Tuple(items, _), Some(_)) => {
                let (item, index) = (var(&items[0]), var(&items[1]));
                let bind = Bind {
                    item: item.map(|n| self.names.bind(&n)),
                    index: index.map(|n| self.names.bind(&n)),
                };
                (bind, None)
            }
            (Pattern::Var(name, _), None) => {
                let bind = Bind {
                    item: name.as_ref().map(|n| self.names.bind(n)),
                    index: None,
                };
                (bind, None)
            }
            // Any other pattern: the element goes to a hidden slot and is matched at the top
            // of the body; elements that do not match are skipped, as in Elixir.
            (p, _) => {
                let slot = self.names.fresh();
                let code = self.names.pattern(p)?;
                (
                    Bind {
                        item: Some(slot),
                        index: None,
                    },
                    Some((code, slot, p.span())),
                )
            }
        };
        let body = self.ops.len();
        let mut skip = None;
        if let Some((pattern, slot, span)) = matcher {
            skip = Some(self.emit(Op::Match {
                pattern,
                slot,
                fail: Some(usize::MAX),
                span,
            }));
        }
        self.qualifiers(rest, body_nodes)?;
        if skip.is_some() {
            // A skipped element jumps to the loop's bottom: its text must not ride there.
            self.flush();
        }
        // The body's trailing text rides on the loop's bottom instruction: once per iteration.
        // When that text is the whole body, every iteration outputs the same bytes.
        let constant = self.ops.len() == body
            && !self.pending.is_empty()
            && self.pending.len() <= REPEAT_BLOCK / 2;
        let next = self.emit(Op::ForNext {
            bind,
            body,
            repeat: None,
            plain: None,
        });
        if skip.is_none() && self.live.is_none() {
            self.plains.push((body, next, bind));
        }
        if let Some(m) = skip {
            self.patch(m, next);
        }
        if constant && self.live.is_none() {
            self.repeats.push(next);
        }
        let exit = self.ops.len();
        if let Op::ForInit {
            bind: b, exit: e, ..
        } = &mut self.ops[init].op
        {
            *b = bind;
            *e = exit;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::expr::resolve;
    use super::*;

    #[test]
    fn resolve_partials() {
        assert_eq!(
            resolve("pages/a.eex", "b.eex").as_deref(),
            Some("pages/b.eex")
        );
        assert_eq!(resolve("a.eex", "b.eex").as_deref(), Some("b.eex"));
        assert_eq!(resolve("pages/a.eex", "../b.eex").as_deref(), Some("b.eex"));
        assert_eq!(
            resolve("pages/a.eex", "/x/b.eex").as_deref(),
            Some("x/b.eex")
        );
        assert_eq!(resolve("a.eex", "../b.eex"), None);
    }

    #[test]
    fn constant_output_folds_into_static_text() {
        let a = compile(
            "a",
            "<%= for i <- 1..@n do %>x<%= \"\" %>y<% end %>",
            Options::default(),
        )
        .unwrap();
        let texts: Vec<&[u8]> = a
            .ops
            .iter()
            .map(|i| &i.text[..])
            .filter(|t| !t.is_empty())
            .collect();
        assert_eq!(texts, vec![b"xy"]);
        // One instruction per iteration: the loop's bottom, carrying the text.
        assert!(matches!(a.ops[1].op, Op::ForNext { .. }));
        assert_eq!(a.ops.len(), 2);
    }

    #[test]
    fn all_static_text_is_one_allocation() {
        let p = compile("a", "head<%= @a %>middle<%= @b %>tail", Options::default()).unwrap();
        let base = p.text.as_ptr() as usize;
        for i in &p.ops {
            let at = i.text.as_ptr() as usize;
            assert!(i.text.is_empty() || (at >= base && at + i.text.len() <= base + p.text.len()));
        }
        assert_eq!(&p.text[..], b"headmiddletail");
    }
}
