//! Compiler: the syntax tree to a [`Program`]: a flat list of ops with jumps, all static text in
//! one shared buffer, variables resolved to slots, and constant output folded into the text.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::ast::{Expr, ExprKind, Node, Pattern, Span};
use crate::error::{Error, ErrorKind, Location};
use crate::lexer::SyntaxError;
use crate::parser::parse;
use crate::program::{
    Bind, Code, CodeKind, Generator, Instr, Op, Program, REPEAT_BLOCK, Repeat, SizeHint,
};
use crate::scalar::write_scalar;
use crate::value::{Str, Value};

/// Compiles template `name` from `source`.
pub(crate) fn compile(name: &str, source: &str) -> Result<Program, Error> {
    let located = |e: SyntaxError| {
        Error::new(ErrorKind::Syntax, e.message).at(Location::new(name, source, e.span))
    };
    let nodes = parse(source).map_err(located)?;
    let mut c = Compiler {
        name,
        text: Vec::new(),
        pending: Vec::new(),
        ops: Vec::new(),
        text_ops: Vec::new(),
        repeats: Vec::new(),
        scope: Vec::new(),
        locals: 0,
        assigns: Vec::new(),
        partials: Vec::new(),
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
    let links = vec![usize::MAX; c.partials.len()];
    Ok(Program {
        name: name.to_owned(),
        source: Arc::from(source),
        text,
        ops,
        assigns: c.assigns,
        locals: c.locals,
        partials: c.partials,
        links,
        size_hint: SizeHint::default(),
    })
}

struct Compiler<'a> {
    name: &'a str,
    /// All static text so far.
    text: Vec<u8>,
    /// Static text not yet given an op (adjacent text and constants merge here).
    pending: Vec<u8>,
    ops: Vec<Instr>,
    /// Instructions whose text is this range of `text`, set once `text` is frozen.
    text_ops: Vec<(usize, Range<usize>)>,
    /// `ForNext` instructions whose loop body is their text alone (see [`Repeat`]).
    repeats: Vec<usize>,
    /// Variables in scope and their slots, innermost last.
    scope: Vec<(String, usize)>,
    locals: usize,
    assigns: Vec<Str>,
    partials: Vec<(String, Span)>,
}

type R<T> = Result<T, SyntaxError>;

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

    fn nodes(&mut self, nodes: &[Node]) -> R<()> {
        for node in nodes {
            self.node(node)?;
        }
        Ok(())
    }

    fn node(&mut self, node: &Node) -> R<()> {
        match node {
            Node::Text(t) => self.pending.extend_from_slice(t.as_bytes()),
            Node::Output(e) => {
                let code = self.expr(e)?;
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
                    CodeKind::Lit(ref v) if !matches!(v, Value::List(_) | Value::Map(_)) => {
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
            Node::Exec(e) => {
                let code = self.expr(e)?;
                self.emit(Op::Exec(code));
            }
            Node::For {
                pattern,
                generator,
                body,
            } => self.for_loop(pattern, generator, body)?,
            Node::If {
                cond,
                negate,
                then,
                otherwise,
            } => {
                let cond = self.expr(cond)?;
                let branch = self.emit(Op::Branch {
                    cond,
                    jump_when: *negate,
                    target: usize::MAX,
                });
                self.nodes(then)?;
                let mut jump_over_else = None;
                if otherwise.is_empty() {
                    self.flush();
                } else {
                    // The then-branch's trailing text rides on its jump over the else-branch.
                    jump_over_else = Some(self.emit(Op::Jump(usize::MAX)));
                }
                let else_start = self.ops.len();
                if let Op::Branch { target, .. } = &mut self.ops[branch].op {
                    *target = else_start;
                }
                self.nodes(otherwise)?;
                self.flush();
                if let Some(j) = jump_over_else {
                    self.ops[j].op = Op::Jump(self.ops.len());
                }
            }
        }
        Ok(())
    }

    fn for_loop(&mut self, pattern: &Pattern, generator: &Expr, body_nodes: &[Node]) -> R<()> {
        let (inner, with_index) = match &generator.kind {
            ExprKind::Call {
                name, args, kwargs, ..
            } if name == "Enum.with_index" && args.len() == 1 && kwargs.is_empty() => {
                (&args[0], true)
            }
            _ => (generator, false),
        };
        let gen_ = match &inner.kind {
            ExprKind::Range(a, b) => Generator::Range(self.expr(a)?, self.expr(b)?),
            _ => Generator::Items(self.expr(inner)?),
        };
        let (item, index) = match (pattern, with_index) {
            (Pattern::Var(name, _), false) => (name, &None),
            (Pattern::Pair((name, _), (index, _)), true) => (name, index),
            (Pattern::Var(_, span), true) => {
                return Err(SyntaxError::new(
                    *span,
                    "`Enum.with_index` yields pairs: write `for {item, index} <- ...`",
                ));
            }
            (Pattern::Pair((_, span), _), false) => {
                return Err(SyntaxError::new(
                    *span,
                    "a `{item, index}` pattern needs `Enum.with_index(...)` as the generator",
                ));
            }
        };
        let init = self.emit(Op::ForInit {
            generator: gen_,
            bind: Bind {
                item: None,
                index: None,
            },
            exit: usize::MAX,
        });
        let scope_len = self.scope.len();
        let bind = Bind {
            item: item.as_ref().map(|n| self.bind(n)),
            index: index.as_ref().map(|n| self.bind(n)),
        };
        let body = self.ops.len();
        self.nodes(body_nodes)?;
        // The body's trailing text rides on the loop's bottom instruction: once per iteration.
        // When that text is the whole body, every iteration outputs the same bytes.
        let constant = self.ops.len() == body
            && !self.pending.is_empty()
            && self.pending.len() <= REPEAT_BLOCK / 2;
        let next = self.emit(Op::ForNext {
            bind,
            body,
            repeat: None,
        });
        if constant {
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
        self.scope.truncate(scope_len);
        Ok(())
    }

    /// A new slot for variable `name`, shadowing any outer one.
    fn bind(&mut self, name: &str) -> usize {
        // Slots of variables out of scope are not reused: frames are small either way.
        let slot = self.locals;
        self.locals += 1;
        self.scope.push((name.to_owned(), slot));
        slot
    }

    fn expr(&mut self, e: &Expr) -> R<Code> {
        let kind = match &e.kind {
            ExprKind::Lit(v) => CodeKind::Lit(v.clone()),
            ExprKind::Assign(name) => {
                let i = match self.assigns.iter().position(|a| a.as_str() == name) {
                    Some(i) => i,
                    None => {
                        self.assigns.push(Str::new(name));
                        self.assigns.len() - 1
                    }
                };
                CodeKind::Assign(i)
            }
            ExprKind::Var(name) => match self.scope.iter().rev().find(|(n, _)| n == name) {
                Some((_, slot)) => CodeKind::Local(*slot),
                None => {
                    return Err(SyntaxError::new(
                        e.span,
                        format!("undefined variable `{name}` (did you mean `@{name}`?)"),
                    ));
                }
            },
            ExprKind::Field(inner, key) => {
                CodeKind::Field(Box::new(self.expr(inner)?), Str::new(key))
            }
            ExprKind::Index(a, i) => {
                CodeKind::Index(Box::new(self.expr(a)?), Box::new(self.expr(i)?))
            }
            ExprKind::Unary(op, a) => CodeKind::Unary(*op, Box::new(self.expr(a)?)),
            ExprKind::Binary(op, a, b) => {
                CodeKind::Binary(*op, Box::new(self.expr(a)?), Box::new(self.expr(b)?))
            }
            ExprKind::Range(..) => {
                return Err(SyntaxError::new(
                    e.span,
                    "a range `first..last` can only be the generator of a `for`",
                ));
            }
            ExprKind::List(items) => {
                CodeKind::List(items.iter().map(|i| self.expr(i)).collect::<R<_>>()?)
            }
            ExprKind::Call {
                name,
                name_span,
                args,
                kwargs,
            } => self.call(name, *name_span, args, kwargs, e.span)?,
        };
        Ok(Code { kind, span: e.span })
    }

    fn call(
        &mut self,
        name: &str,
        name_span: Span,
        args: &[Expr],
        kwargs: &[(String, Span, Expr)],
        span: Span,
    ) -> R<CodeKind> {
        let unary = |c: &mut Self, f: fn(Box<Code>) -> CodeKind| -> R<CodeKind> {
            if args.len() != 1 || !kwargs.is_empty() {
                return Err(SyntaxError::new(
                    span,
                    format!("`{name}` takes exactly one argument"),
                ));
            }
            Ok(f(Box::new(c.expr(&args[0])?)))
        };
        match name {
            "length" | "Enum.count" => unary(self, CodeKind::Length),
            "upcase" | "String.upcase" => unary(self, CodeKind::Upcase),
            "downcase" | "String.downcase" => unary(self, CodeKind::Downcase),
            "raw" | "Phoenix.HTML.raw" => unary(self, CodeKind::Raw),
            "render" => {
                let target = match args {
                    [
                        Expr {
                            kind: ExprKind::Lit(Value::Str(s)),
                            span,
                        },
                    ] => (s.as_str(), *span),
                    _ => {
                        return Err(SyntaxError::new(
                            span,
                            "`render` takes a template name as a string literal, then `key: value` assigns",
                        ));
                    }
                };
                let Some(resolved) = resolve(self.name, target.0) else {
                    return Err(SyntaxError::new(
                        target.1,
                        "partial path leaves the template root",
                    ));
                };
                let mut compiled = Vec::with_capacity(kwargs.len());
                for (k, kspan, v) in kwargs {
                    if compiled.iter().any(|(n, _): &(Str, Code)| n.as_str() == k) {
                        return Err(SyntaxError::new(
                            *kspan,
                            format!("assign `{k}` given twice"),
                        ));
                    }
                    compiled.push((Str::new(k), self.expr(v)?));
                }
                let partial = match self.partials.iter().position(|(n, _)| *n == resolved) {
                    Some(i) => i,
                    None => {
                        self.partials.push((resolved, span));
                        self.partials.len() - 1
                    }
                };
                Ok(CodeKind::Partial {
                    partial,
                    args: compiled,
                })
            }
            "Enum.with_index" => Err(SyntaxError::new(
                name_span,
                "`Enum.with_index` is only supported as the generator of a `for`",
            )),
            _ => Err(SyntaxError::new(
                name_span,
                format!(
                    "unknown function `{name}/{}`",
                    args.len() + usize::from(!kwargs.is_empty())
                ),
            )),
        }
    }
}

/// Resolves partial `rel` against the directory of template `from`: `"x.html.eex"` called from
/// `"pages/a.html.eex"` is `"pages/x.html.eex"`; a leading `/` starts at the root; `..` goes up.
/// `None` when the path climbs out of the root.
pub(crate) fn resolve(from: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    let rel = match rel.strip_prefix('/') {
        Some(r) => r,
        None => {
            parts.extend(from.split('/'));
            parts.pop();
            rel
        }
    };
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
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
        let a = compile("a", "<%= for i <- 1..@n do %>x<%= \"\" %>y<% end %>").unwrap();
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
        let p = compile("a", "head<%= @a %>middle<%= @b %>tail").unwrap();
        let base = p.text.as_ptr() as usize;
        for i in &p.ops {
            let at = i.text.as_ptr() as usize;
            assert!(i.text.is_empty() || (at >= base && at + i.text.len() <= base + p.text.len()));
        }
        assert_eq!(&p.text[..], b"headmiddletail");
    }
}
