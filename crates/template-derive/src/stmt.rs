//! Template nodes to Rust statements, resumable: every block reads its resume position from a
//! state slot and every loop its element index, so a stream pauses after any loop iteration
//! and continues there (outputs before the position are skipped; bindings are recomputed).

use std::collections::BTreeMap;

use galleon_template::Value;
use galleon_template::syntax::{BinOp, Expr, ExprKind, Node, Pattern, Qualifier, Span};
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use crate::attrs::{Field, Kind};
use crate::names::var_ident;
use crate::not_native::{NotNative, R};
use crate::statics;

/// An enclosing block or loop, for saving the position when a stream pauses.
enum Frame {
    /// Item `index` of the block whose position is slot `slot`.
    Seq { slot: usize, index: usize },
    /// The loop whose element index is slot `slot` (variable `__i{slot}`).
    Loop { slot: usize },
}

/// A block's items: static text (text and constants, merged) or a node.
enum Item<'n> {
    Static(Vec<u8>),
    Node(&'n Node),
}

/// Code generation state.
pub(crate) struct Gen<'a> {
    pub(crate) source: &'a str,
    pub(crate) fields: &'a BTreeMap<String, Field>,
    pub(crate) copy_below: usize,
    /// Resume slots allocated so far.
    pub(crate) slots: usize,
    /// Variables in scope, innermost last.
    scope: Vec<(String, Kind)>,
    frames: Vec<Frame>,
}

impl<'a> Gen<'a> {
    pub(crate) fn new(
        source: &'a str,
        fields: &'a BTreeMap<String, Field>,
        copy_below: usize,
    ) -> Gen<'a> {
        Gen {
            source,
            fields,
            copy_below,
            slots: 0,
            scope: Vec::new(),
            frames: Vec::new(),
        }
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<Kind> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, k)| *k)
    }

    fn alloc(&mut self) -> usize {
        self.slots += 1;
        self.slots - 1
    }

    /// Text and constant outputs merged into static runs; other nodes as they are.
    fn items<'n>(&self, nodes: &'n [Node]) -> Vec<Item<'n>> {
        let mut items: Vec<Item<'n>> = Vec::new();
        let push = |items: &mut Vec<Item<'n>>, bytes: &[u8]| {
            if let Some(Item::Static(s)) = items.last_mut() {
                s.extend_from_slice(bytes);
            } else {
                items.push(Item::Static(bytes.to_vec()));
            }
        };
        for node in nodes {
            let folded = match node {
                Node::Text(t) => Some(t.as_bytes().to_vec()),
                Node::Output(e) if statics::is_closed(e) => statics::fold(self.source, e, true),
                Node::Exec(e) if statics::is_closed(e) => statics::fold(self.source, e, false),
                _ => None,
            };
            match folded {
                Some(bytes) => push(&mut items, &bytes),
                None => items.push(Item::Node(node)),
            }
        }
        items
    }

    /// A block: its items, each output only at or after the resume position.
    pub(crate) fn seq(&mut self, nodes: &[Node]) -> R<TokenStream> {
        let items = self.items(nodes);
        let slot = self.alloc();
        let k = format_ident!("__k{}", slot);
        let scope = self.scope.len();
        let mut code = quote! {
            let #k: usize = if PAUSE { ::core::mem::take(&mut __st[#slot]) } else { 0 };
        };
        for (index, item) in items.iter().enumerate() {
            let (always, guarded) = match item {
                Item::Static(bytes) => (TokenStream::new(), statics::emit(bytes, self.copy_below)),
                Item::Node(node) => {
                    self.frames.push(Frame::Seq { slot, index });
                    let r = self.node(node);
                    self.frames.pop();
                    r?
                }
            };
            code.extend(always);
            if !guarded.is_empty() {
                code.extend(quote! { if #k <= #index { #guarded } });
            }
        }
        self.scope.truncate(scope);
        Ok(code)
    }

    /// One node: code run even when resuming past it (bindings), and code run only at or after
    /// the resume position (output, blocks).
    fn node(&mut self, node: &Node) -> R<(TokenStream, TokenStream)> {
        let none = TokenStream::new;
        Ok(match node {
            Node::Text(t) => (none(), statics::emit(t.as_bytes(), self.copy_below)),
            Node::Output(e) => (none(), self.output(e)?),
            Node::Exec(e) => {
                let (v, _) = self.value(e)?;
                (none(), quote! { let _ = &(#v); })
            }
            Node::Bind {
                pattern,
                value,
                output,
            } => {
                let (v, kind) = self.value(value)?;
                let id = match pattern {
                    Pattern::Var(Some(name), _) => {
                        self.scope.push((name.clone(), kind));
                        var_ident(name)
                    }
                    Pattern::Var(None, _) => format_ident!("__unused"),
                    _ => return Err(not_a_variable(pattern)),
                };
                let out = if *output {
                    self.render_located(value, &quote! { #id }, false)
                } else {
                    none()
                };
                (quote! { let #id = &(#v); }, out)
            }
            Node::For { qualifiers, body } => (none(), self.for_loop(qualifiers, body)?),
            Node::If {
                cond,
                negate,
                then,
                otherwise,
            } => {
                let c = self.cond_negated(cond, *negate)?;
                let t = self.seq(then)?;
                let o = self.seq(otherwise)?;
                (none(), quote! { if #c { #t } else { #o } })
            }
            Node::Case { subject, .. } => {
                return Err(NotNative::block(
                    self.source,
                    "case",
                    subject.span,
                    "a `case` block",
                ));
            }
            Node::Cond { clauses } => {
                let at = clauses.first().map_or(Span::default(), |(c, _)| c.span);
                return Err(NotNative::block(self.source, "cond", at, "a `cond` block"));
            }
        })
    }

    /// `if` (or, negated, `unless`) `cond` as a Rust `bool`.
    fn cond_negated(&mut self, cond: &Expr, negate: bool) -> R<TokenStream> {
        let c = self.cond(cond)?;
        Ok(if negate {
            quote! { !(#c) }
        } else {
            c
        })
    }

    /// `<%= e %>`: escaped, or not for `raw(x)`.
    fn output(&mut self, e: &Expr) -> R<TokenStream> {
        self.output_at(e, e)
    }

    /// `e` output by `<%= at %>`: a one-line `if c, do: a, else: b` outputs the branch taken
    /// (nothing without `else:`); an output error is located at the whole tag's expression, as
    /// the engine locates it.
    fn output_at(&mut self, e: &Expr, at: &Expr) -> R<TokenStream> {
        match &e.kind {
            ExprKind::If {
                cond,
                negate,
                then,
                otherwise,
            } => {
                let c = self.cond_negated(cond, *negate)?;
                let t = self.output_at(then, at)?;
                let o = match otherwise {
                    Some(o) => self.output_at(o, at)?,
                    None => TokenStream::new(),
                };
                Ok(quote! { if #c { #t } else { #o } })
            }
            // `a || b` outputs `a` when truthy, else `b`; `a && b` outputs `b` when `a` is
            // truthy, else `a` (Elixir's values of these operators).
            ExprKind::Binary(op @ (BinOp::OrElse | BinOp::AndAlso), a, b) => {
                let c = self.cond(a)?;
                let (first, second) = (self.output_at(a, at)?, self.output_at(b, at)?);
                Ok(if *op == BinOp::OrElse {
                    quote! { if #c { #first } else { #second } }
                } else {
                    quote! { if #c { #second } else { #first } }
                })
            }
            ExprKind::Call {
                name, args, kwargs, ..
            } if (name == "raw" || name == "Phoenix.HTML.raw")
                && args.len() == 1
                && kwargs.is_empty() =>
            {
                let (v, _) = self.value(&args[0])?;
                Ok(self.render_located(at, &v, true))
            }
            _ => {
                let (v, _) = self.value(e)?;
                Ok(self.render_located(at, &v, false))
            }
        }
    }

    fn render_located(&self, e: &Expr, v: &TokenStream, raw: bool) -> TokenStream {
        let call = if raw {
            quote! { ::galleon_template::compiled::Render::__write_raw(&(#v), __out) }
        } else {
            quote! { ::galleon_template::compiled::Render::__write(&(#v), __out) }
        };
        let r = self.located(e, call);
        quote! { #r; }
    }

    /// Code saving the enclosing blocks' positions and loops' element indexes, for a pause.
    fn saves(&self) -> TokenStream {
        self.frames
            .iter()
            .map(|f| match f {
                Frame::Seq { slot, index } => quote! { __st[#slot] = #index; },
                Frame::Loop { slot } => {
                    let outer = format_ident!("__i{}", slot);
                    quote! { __st[#slot] = #outer; }
                }
            })
            .collect()
    }

    /// A loop variable pattern: `x` or `_`.
    fn bind_var(&mut self, p: &Pattern, kind: Kind) -> R<TokenStream> {
        match p {
            Pattern::Var(Some(name), _) => {
                self.scope.push((name.clone(), kind));
                let id = var_ident(name);
                Ok(quote! { #id })
            }
            Pattern::Var(None, _) => Ok(quote! { _ }),
            _ => Err(not_a_variable(p)),
        }
    }

    /// `for pattern <- iterable, filters... do`: a Rust `for` over the iterable by reference
    /// (a range counted, `Enum.with_index` enumerated), one generator.
    fn for_loop(&mut self, qualifiers: &[Qualifier], body: &[Node]) -> R<TokenStream> {
        let (pattern, iterable, rest) = match qualifiers {
            [Qualifier::Gen(pattern, iterable), rest @ ..] => (pattern, iterable, rest),
            [Qualifier::Filter(f), ..] => {
                return Err(NotNative::new(f.span, "a `for` filter before a generator"));
            }
            [] => {
                return Err(NotNative::new(
                    Span::default(),
                    "a `for` without a generator",
                ));
            }
        };
        let slot = self.alloc();
        let s = format_ident!("__s{}", slot);
        let i = format_ident!("__i{}", slot);
        let scope = self.scope.len();
        let c = quote! { ::galleon_template::compiled };
        let mut pre = TokenStream::new();
        if let (ExprKind::Range(a, b), []) = (&iterable.kind, rest)
            && let [Item::Static(unit)] = &self.items(body)[..]
            && !unit.is_empty()
        {
            let (a, b) = (self.scalar(a)?, self.scalar(b)?);
            let r = self.located(iterable, quote! { #c::range_from(#a, #b, #s) });
            let saves = self.saves();
            return Ok(statics::repeat(unit, slot, &r, &saves, self.copy_below));
        }
        let (pat, iter) = match (&iterable.kind, pattern) {
            (ExprKind::Range(a, b), _) => {
                let (a, b) = (self.scalar(a)?, self.scalar(b)?);
                let r = self.located(iterable, quote! { #c::range_from(#a, #b, #s) });
                (self.bind_var(pattern, Kind::Typed)?, r)
            }
            (
                ExprKind::Call {
                    name, args, kwargs, ..
                },
                Pattern::Tuple(parts, _),
            ) if name == "Enum.with_index"
                && (1..=2).contains(&args.len())
                && kwargs.is_empty()
                && parts.len() == 2 =>
            {
                // An offset natively when it is a literal integer, far from overflowing (the
                // engine checks the sum; no list gets near 2^62 elements).
                let offset = match args.get(1).map(|a| &a.kind) {
                    None => 0,
                    Some(ExprKind::Lit(Value::Int(k))) if k.unsigned_abs() <= 1 << 62 => *k,
                    Some(_) => {
                        return Err(NotNative::new(
                            args[1].span,
                            "an `Enum.with_index` offset that is not a literal integer",
                        ));
                    }
                };
                let (x, kind) = self.value(&args[0])?;
                if kind != Kind::Typed {
                    return Err(NotNative::new(args[0].span, DYNAMIC_FOR));
                }
                let item = self.bind_var(&parts[0], Kind::Typed)?;
                let n = format_ident!("__n{}", slot);
                if let Pattern::Var(Some(name), _) = &parts[1] {
                    let idx: Ident = var_ident(name);
                    self.scope.push((name.clone(), Kind::Typed));
                    pre = quote! { let #idx = #n as i64 + #offset; };
                } else if !matches!(parts[1], Pattern::Var(None, _)) {
                    return Err(not_a_variable(&parts[1]));
                }
                let iter = quote! {{
                    let mut it = #c::Iterate::iterate(&(#x)).enumerate();
                    if #s > 0 { it.nth(#s - 1); }
                    it
                }};
                (quote! { (#n, #item) }, iter)
            }
            _ => {
                let (x, kind) = self.value(iterable)?;
                if kind != Kind::Typed {
                    return Err(NotNative::new(iterable.span, DYNAMIC_FOR));
                }
                (
                    self.bind_var(pattern, Kind::Typed)?,
                    quote! { #c::iter_from(&(#x), #s) },
                )
            }
        };
        let mut filters = Vec::new();
        for q in rest {
            match q {
                Qualifier::Filter(f) => filters.push(self.cond(f)?),
                Qualifier::Gen(p, e) => {
                    return Err(NotNative::new(p.span().to(e.span), "a second generator"));
                }
            }
        }
        let skip = if filters.is_empty() {
            TokenStream::new()
        } else {
            quote! { if !(#((#filters))&&*) { #i += 1; continue; } }
        };
        let saves = self.saves();
        self.frames.push(Frame::Loop { slot });
        let body = self.seq(body);
        self.frames.pop();
        self.scope.truncate(scope);
        let body = body?;
        Ok(quote! {
            let #s: usize = if PAUSE { ::core::mem::take(&mut __st[#slot]) } else { 0 };
            let mut #i: usize = #s;
            for #pat in #iter {
                #pre
                #skip
                #body
                #i += 1;
                if PAUSE && __out.len() >= __limit {
                    __st[#slot] = #i;
                    #saves
                    return ::core::result::Result::Ok(false);
                }
            }
        })
    }
}

/// Why a `for` over a dynamic value is not native.
const DYNAMIC_FOR: &str = "`for` over a `Value` or a map";

/// `p`, where only a variable (or `_`) is compiled natively.
fn not_a_variable(p: &Pattern) -> NotNative {
    NotNative::new(p.span(), "a pattern other than a variable")
}
