//! Expression evaluation in one frame: paths, operators, functions, partials called inside an
//! expression. Every node evaluated costs a step.

use std::borrow::Cow;
use std::sync::Arc;

use galleon_iolist::IoList;

use super::frame::{Frame, Given, Loop, lookup};
use super::out::{Out, emit};
use crate::ast::{BinOp, Span, UnOp};
use crate::budget::{self, ELEMENT_BYTES, MAP_ENTRY_BYTES, shallow_size};
use crate::builtins::{self, collections};
use crate::error::{Error, ErrorKind};
use crate::ops::{describe, equal, to_text};
use crate::program::{Catalog, Code, CodeKind, Config, Generator, PartialArgs, Program};
use crate::value::{Map, Value};

/// Renders the partial whose first frame is `frame` into `out` until done (`Ok(true)`) or until
/// `out` holds `pause_at` bytes (`Ok(false)`), spending from `steps`, `depth` partials deep.
pub(super) type RenderPartial = fn(
    catalog: &Catalog,
    config: &Config,
    frame: Frame,
    steps: &mut u64,
    depth: usize,
    out: &mut IoList,
    pause_at: usize,
) -> Result<bool, Error>;

/// Bytes of string built (by `<>`, `upcase`, ...) that cost one step of the step budget, so that
/// a template cannot build huge strings for free. A guess: copying 64 bytes costs about as much
/// as one op does (a few nanoseconds).
pub(super) const BYTES_PER_STEP: usize = 64;

static NIL: Value = Value::Nil;

/// Expression evaluation in one frame.
pub(super) struct Eval<'a> {
    /// Runs a partial called inside an expression (the VM's; passed in so that this module
    /// does not depend on the VM that depends on it).
    pub(super) partial: RenderPartial,
    pub(super) catalog: &'a Catalog,
    pub(super) config: &'a Config,
    pub(super) prog: &'a Program,
    pub(super) frame: &'a Frame,
    pub(super) steps: &'a mut u64,
    /// Partial nesting depth of this frame.
    pub(super) depth: usize,
    /// Parameters of the anonymous functions being called (`vm/higher.rs`), by function slot.
    pub(super) fn_locals: Vec<Value>,
}

type Val<'a> = Cow<'a, Value>;

impl<'a> Eval<'a> {
    /// An evaluator for expressions of `frame`, spending steps from `steps`.
    pub(super) fn new(
        partial: RenderPartial,
        catalog: &'a Catalog,
        config: &'a Config,
        prog: &'a Program,
        frame: &'a Frame,
        steps: &'a mut u64,
        depth: usize,
    ) -> Self {
        Eval {
            partial,
            catalog,
            config,
            prog,
            frame,
            steps,
            depth,
            fn_locals: Vec::new(),
        }
    }

    pub(super) fn err(&self, kind: ErrorKind, span: Span, msg: impl Into<String>) -> Error {
        self.prog.error(kind, span, msg)
    }

    pub(super) fn tick(&mut self, span: Span, n: u64) -> Result<(), Error> {
        match self.steps.checked_sub(n) {
            Some(left) => {
                *self.steps = left;
                Ok(())
            }
            None => {
                *self.steps = 0;
                Err(self.err(ErrorKind::Limit, span, step_limit_message(self.config)))
            }
        }
    }

    /// Charges `bytes` of values about to be built (or just built from charged inputs) to the
    /// memory budget: the memory-limit error when they do not fit.
    pub(super) fn alloc(&mut self, span: Span, bytes: usize) -> Result<(), Error> {
        budget::charge(bytes).map_err(|_| self.memory_limit(span))
    }

    /// The memory-limit error at `span`.
    pub(super) fn memory_limit(&self, span: Span) -> Error {
        self.err(ErrorKind::Limit, span, memory_limit_message(self.config))
    }

    /// A built-in function's failure: the memory-limit error if it ran out of memory budget,
    /// else a type error with its message.
    pub(super) fn failed(&self, span: Span, m: String) -> Error {
        if budget::take_exceeded() {
            self.memory_limit(span)
        } else {
            self.err(ErrorKind::TypeMismatch, span, m)
        }
    }

    /// Charges a function's result to the memory budget (its outer layer: what the function
    /// built around elements charged when they were built, or shared), then to the steps.
    fn charge_built(&mut self, v: &Value, span: Span) -> Result<(), Error> {
        self.alloc(span, shallow_size(v))?;
        self.charge(v, span)
    }

    /// Charges a function's result: a step per 64 bytes of string or per list element built.
    fn charge(&mut self, v: &Value, span: Span) -> Result<(), Error> {
        let n = match v {
            Value::Str(s) => s.len() / BYTES_PER_STEP,
            Value::List(l) => l.len(),
            _ => 0,
        };
        self.tick(span, n as u64)
    }

    pub(super) fn generator(&mut self, g: &'a Generator) -> Result<Loop, Error> {
        match g {
            Generator::Range(a, b, step) => {
                let first = self.int(a, "a range bound")?;
                let last = self.int(b, "a range bound")?;
                // Without a step, `first..last` counts down when first > last, as in Elixir.
                let step = match step {
                    None if first > last => -1,
                    None => 1,
                    Some(c) => match self.int(c, "a range's step")? {
                        0 => {
                            let m = "a range's step cannot be zero";
                            return Err(self.err(ErrorKind::TypeMismatch, c.span, m.to_owned()));
                        }
                        s => s,
                    },
                };
                Ok(Loop::range(first, last, step))
            }
            Generator::Items(c) => match lookup(self.frame, c)
                .map_or_else(|| self.eval(c), |v| Ok(Cow::Borrowed(v)))?
            {
                Cow::Borrowed(Value::List(items)) => Ok(Loop::Items {
                    items: items.clone(),
                    next: 0,
                }),
                Cow::Owned(Value::List(items)) => Ok(Loop::Items { items, next: 0 }),
                // A map yields its `{key, value}` pairs in key order.
                m @ (Cow::Borrowed(Value::Map(_)) | Cow::Owned(Value::Map(_))) => {
                    let items = collections::elements(&m)
                        .map_err(|e| self.err(ErrorKind::TypeMismatch, c.span, e))?;
                    self.tick(c.span, items.len() as u64)?;
                    self.alloc(c.span, items.len().saturating_mul(3 * ELEMENT_BYTES))?;
                    Ok(Loop::Items { items, next: 0 })
                }
                other => Err(self.err(
                    ErrorKind::TypeMismatch,
                    c.span,
                    format!(
                        "cannot iterate over {} (`for` needs a list, a map or a range)",
                        describe(&other)
                    ),
                )),
            },
        }
    }

    fn int(&mut self, c: &'a Code, what: &str) -> Result<i64, Error> {
        // A literal, variable or assign holding an integer (`1..@iters`) is read where it lives,
        // charged the one step `eval` would charge it.
        if let CodeKind::Lit(_) | CodeKind::Local(_) | CodeKind::Assign(_) = c.kind
            && let Some(&Value::Int(i)) = lookup(self.frame, c)
        {
            self.tick(c.span, 1)?;
            return Ok(i);
        }
        match *self.eval(c)? {
            Value::Int(i) => Ok(i),
            ref other => Err(self.err(
                ErrorKind::TypeMismatch,
                c.span,
                format!("{what} must be an integer, not {}", describe(other)),
            )),
        }
    }

    /// Evaluates a partial call's arguments and finds its program.
    pub(super) fn call_args(
        &mut self,
        partial: usize,
        args: &'a PartialArgs,
        span: Span,
    ) -> Result<(usize, Given), Error> {
        if self.depth >= self.config.limits.max_depth {
            return Err(self.err(
                ErrorKind::Limit,
                span,
                format!(
                    "partials nested more than {} deep",
                    self.config.limits.max_depth
                ),
            ));
        }
        let target = match self.prog.links.get(partial) {
            Some(&t) if t < self.catalog.programs.len() => t,
            _ => {
                let name = self.prog.partials.get(partial).map_or("?", |p| &p.0);
                return Err(self.err(
                    ErrorKind::NotFound,
                    span,
                    format!("no template named `{name}`"),
                ));
            }
        };
        let given = match args {
            PartialArgs::Keywords(args) => {
                let mut values = Vec::with_capacity(args.len());
                for (k, c) in args {
                    values.push((k.clone(), self.eval(c)?.into_owned()));
                }
                Given::Pairs(values)
            }
            PartialArgs::Value(c) => {
                let v = self.eval(c)?.into_owned();
                if let Value::List(l) = &v {
                    self.alloc(c.span, l.len().saturating_mul(MAP_ENTRY_BYTES))?;
                }
                Given::of(v).map_err(|m| self.err(ErrorKind::TypeMismatch, c.span, m))?
            }
        };
        Ok((target, given))
    }

    pub(super) fn eval(&mut self, c: &'a Code) -> Result<Val<'a>, Error> {
        self.tick(c.span, 1)?;
        Ok(match &c.kind {
            CodeKind::Lit(v) => Cow::Borrowed(v),
            CodeKind::Local(s) => Cow::Borrowed(self.frame.locals.get(*s).unwrap_or(&NIL)),
            CodeKind::Assign(i) => match self.frame.assigns.get(*i) {
                Some(Some(v)) => Cow::Borrowed(v),
                _ => {
                    let name = self.prog.assigns.get(*i).map_or("?", String::as_str);
                    return Err(self.err(
                        ErrorKind::UnknownAssign,
                        c.span,
                        format!("unknown assign @{name}"),
                    ));
                }
            },
            CodeKind::Field(inner, key) => {
                let v = self.eval(inner)?;
                let found = match &*v {
                    Value::Map(m) => m.contains_key(key),
                    other => {
                        return Err(self.err(
                            ErrorKind::TypeMismatch,
                            c.span,
                            format!("cannot read key `{key}` of {}", describe(other)),
                        ));
                    }
                };
                if !found {
                    return Err(self.err(
                        ErrorKind::UnknownKey,
                        c.span,
                        format!("key `{key}` not found in map"),
                    ));
                }
                project(v, |v| match v {
                    Value::Map(m) => m.get(key),
                    _ => None,
                })
            }
            CodeKind::Index(inner, index) => {
                let v = self.eval(inner)?;
                let i = self.eval(index)?;
                match (&*v, &*i) {
                    (Value::List(items), Value::Int(n)) => {
                        let len = items.len() as i64;
                        let at = if *n < 0 { len + n } else { *n };
                        project(v, |v| match v {
                            Value::List(items) if (0..len).contains(&at) => items.get(at as usize),
                            _ => None,
                        })
                    }
                    // A keyword list: `opts[:class]` is the first `{:class, v}`'s value.
                    (Value::List(_), Value::Atom(_)) => keyword_value(v, &i),
                    (Value::Map(_), Value::Str(k) | Value::Atom(k)) => {
                        let k = k.clone();
                        project(v, |v| match v {
                            Value::Map(m) => m.get(&k.bytes()[..]),
                            _ => None,
                        })
                    }
                    (Value::Nil, _) | (Value::Map(_), _) => Cow::Borrowed(&NIL),
                    (a, b) => {
                        return Err(self.err(
                            ErrorKind::TypeMismatch,
                            c.span,
                            format!("cannot index {} with {}", describe(a), describe(b)),
                        ));
                    }
                }
            }
            CodeKind::Unary(op, inner) => {
                let v = self.eval(inner)?;
                Cow::Owned(match (op, &*v) {
                    (UnOp::Not, Value::Bool(b)) => Value::Bool(!b),
                    (UnOp::Bang, v) => Value::Bool(!v.is_truthy()),
                    (UnOp::Neg, Value::Int(n)) => match n.checked_neg() {
                        Some(n) => Value::Int(n),
                        None => {
                            return Err(self.err(
                                ErrorKind::Arithmetic,
                                c.span,
                                "integer overflow",
                            ));
                        }
                    },
                    (UnOp::Neg, Value::Float(x)) => Value::Float(-x),
                    (UnOp::Not, other) => {
                        return Err(self.err(
                            ErrorKind::TypeMismatch,
                            c.span,
                            format!("`not` expects a boolean, not {}", describe(other)),
                        ));
                    }
                    (UnOp::Neg, other) => {
                        return Err(self.err(
                            ErrorKind::TypeMismatch,
                            c.span,
                            format!("cannot negate {}", describe(other)),
                        ));
                    }
                })
            }
            CodeKind::Binary(op, a, b) => self.binary(*op, a, b, c.span)?,
            CodeKind::List(items) => {
                self.alloc(c.span, items.len() * ELEMENT_BYTES)?;
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.eval(i)?.into_owned());
                }
                Cow::Owned(Value::List(out.into()))
            }
            CodeKind::Tuple(items) => {
                self.alloc(c.span, items.len() * ELEMENT_BYTES)?;
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.eval(i)?.into_owned());
                }
                Cow::Owned(Value::Tuple(out.into()))
            }
            CodeKind::Map(entries) => {
                self.alloc(c.span, entries.len() * MAP_ENTRY_BYTES)?;
                let mut m = Map::new();
                for (k, v) in entries {
                    let key = match &*self.eval(k)? {
                        Value::Str(s) | Value::Atom(s) => s.clone(),
                        other => {
                            return Err(self.err(
                                ErrorKind::TypeMismatch,
                                k.span,
                                format!(
                                    "map keys must be strings or atoms, not {}",
                                    describe(other)
                                ),
                            ));
                        }
                    };
                    m.insert(key, self.eval(v)?.into_owned());
                }
                Cow::Owned(Value::Map(Arc::new(m)))
            }
            CodeKind::Interp(parts) => {
                let mut out = Vec::new();
                for p in parts {
                    let v = self.eval(p)?;
                    to_text(&v, &mut out).map_err(|m| self.failed(p.span, m))?;
                }
                self.alloc(c.span, out.len())?;
                self.tick(c.span, (out.len() / BYTES_PER_STEP) as u64)?;
                let s = String::from_utf8(out).map_err(|_| {
                    self.err(
                        ErrorKind::TypeMismatch,
                        c.span,
                        "the result is not valid UTF-8",
                    )
                })?;
                Cow::Owned(Value::from(s))
            }
            CodeKind::If(cond, negate, then, otherwise) => {
                if self.eval(cond)?.is_truthy() != *negate {
                    self.eval(then)?
                } else {
                    match otherwise {
                        Some(o) => self.eval(o)?,
                        None => Cow::Borrowed(&NIL),
                    }
                }
            }
            CodeKind::RangeList(lo, hi) => {
                let first = self.int(lo, "a range bound")?;
                let last = self.int(hi, "a range bound")?;
                // Elixir's `first..last` counts down when first > last.
                let n = (i128::from(last) - i128::from(first)).unsigned_abs() + 1;
                self.tick(c.span, u64::try_from(n).unwrap_or(u64::MAX))?;
                let bytes = n.saturating_mul(ELEMENT_BYTES as u128);
                self.alloc(c.span, usize::try_from(bytes).unwrap_or(usize::MAX))?;
                let items: Vec<Value> = if first <= last {
                    (first..=last).map(Value::Int).collect()
                } else {
                    (last..=first).rev().map(Value::Int).collect()
                };
                Cow::Owned(Value::List(items.into()))
            }
            CodeKind::InRange(x, lo, hi) => {
                let v = self.eval(x)?.into_owned();
                let first = self.int(lo, "a range bound")?;
                let last = self.int(hi, "a range bound")?;
                let inside = match v {
                    Value::Int(i) => (first.min(last)..=first.max(last)).contains(&i),
                    _ => false,
                };
                Cow::Owned(Value::Bool(inside))
            }
            CodeKind::HigherOrder(b, args) => {
                let v = self.higher_order(*b, args, c.span)?;
                if b.selects() || b.charges_itself() {
                    self.charge(&v, c.span)?;
                } else {
                    self.charge_built(&v, c.span)?;
                }
                Cow::Owned(v)
            }
            CodeKind::For(f) => {
                let v = self.comprehension(f)?;
                self.charge(&v, c.span)?;
                Cow::Owned(v)
            }
            CodeKind::AssignOrNil(i) => match self.frame.assigns.get(*i) {
                Some(Some(v)) => Cow::Borrowed(v),
                _ => Cow::Borrowed(&NIL),
            },
            CodeKind::FnLocal(slot) => {
                Cow::Owned(self.fn_locals.get(*slot).cloned().unwrap_or_default())
            }
            CodeKind::Case(subject, clauses) => Cow::Owned(self.case(subject, clauses)?),
            CodeKind::Fn(_) => {
                return Err(self.err(
                    ErrorKind::TypeMismatch,
                    c.span,
                    "a function is not a value here",
                ));
            }
            CodeKind::Builtin(b, args) => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(self.eval(a)?.into_owned());
                }
                // A result that is its first argument (`to_string` of a string) or a part of
                // its arguments (`hd`, `Map.get`) was not built, and one charged before it was
                // built (`String.duplicate`) is not charged again.
                let first = values.first().and_then(identity);
                // A regex function's input is scanned whatever it returns: charged first.
                let scanned = builtins::scanned(*b, &values) / BYTES_PER_STEP;
                self.tick(c.span, scanned as u64)?;
                let v = builtins::call(*b, values).map_err(|m| self.failed(c.span, m))?;
                if b.selects() || b.charges_itself() || (first.is_some() && identity(&v) == first) {
                    self.charge(&v, c.span)?;
                } else {
                    self.charge_built(&v, c.span)?;
                }
                Cow::Owned(v)
            }
            CodeKind::Native(i, args) => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(self.eval(a)?.into_owned());
                }
                let f = &self.catalog.functions[*i];
                let v = (f.call)(&values).map_err(|m| {
                    self.err(
                        ErrorKind::Function,
                        c.span,
                        format!("{}/{}: {m}", f.name, f.arity),
                    )
                })?;
                self.charge_built(&v, c.span)?;
                Cow::Owned(v)
            }
            CodeKind::Raw(inner) => {
                let v = self.eval(inner)?;
                if !matches!(
                    &*v,
                    Value::Str(_) | Value::Safe(_) | Value::Nil | Value::List(_)
                ) {
                    return Err(self.err(
                        ErrorKind::TypeMismatch,
                        c.span,
                        format!(
                            "`raw` expects a string, safe HTML, a list or nil, not {}",
                            describe(&v)
                        ),
                    ));
                }
                let mut html = IoList::new();
                let mut buf = Vec::new();
                let mut o = Out::new(
                    &mut html,
                    &mut buf,
                    self.config.copy_below,
                    self.config.value_copy_below,
                    64,
                );
                let r = emit(&mut o, &v, false);
                o.finish();
                drop(o);
                r.map_err(|m| self.err(ErrorKind::TypeMismatch, c.span, m))?;
                self.alloc(c.span, html.len())?;
                Cow::Owned(Value::safe(html))
            }
            CodeKind::AllAssigns => {
                let (map, bytes) = self.frame.all_assigns(self.prog);
                self.alloc(c.span, bytes)?;
                Cow::Owned(Value::Map(Arc::new(map)))
            }
            CodeKind::Partial { partial, args } => {
                let (target, args) = self.call_args(*partial, args, c.span)?;
                let target_prog = &self.catalog.programs[target];
                let frame = Frame::new(target_prog, target, |name| args.get(name));
                Cow::Owned(self.nested(frame, c.span)?)
            }
            CodeKind::Block(b) => Cow::Owned(self.block(b, c.span)?),
        })
    }

    fn binary(
        &mut self,
        op: BinOp,
        a: &'a Code,
        b: &'a Code,
        span: Span,
    ) -> Result<Val<'a>, Error> {
        // `acc <> b` on a function parameter: `b` first (reading `acc` has no effect to order).
        let mut right = None;
        if let (BinOp::Concat | BinOp::ListConcat, CodeKind::FnLocal(slot)) = (op, &a.kind) {
            let y = self.eval(b)?;
            if let Some(v) = self.append_to_local(*slot, &y, span)? {
                return Ok(Cow::Owned(v));
            }
            right = Some(y);
        }
        let x = self.eval(a)?;
        // Short-circuit operators first: the right side may not be evaluated.
        match op {
            BinOp::Or | BinOp::And => {
                let Value::Bool(l) = *x else {
                    return Err(self.err(
                        ErrorKind::TypeMismatch,
                        a.span,
                        format!(
                            "`{}` expects a boolean on its left, not {} (use `{}` for truthiness)",
                            op.symbol(),
                            describe(&x),
                            if op == BinOp::Or { "||" } else { "&&" }
                        ),
                    ));
                };
                return if l == (op == BinOp::Or) {
                    Ok(x)
                } else {
                    self.eval(b)
                };
            }
            BinOp::OrElse => return if x.is_truthy() { Ok(x) } else { self.eval(b) },
            BinOp::AndAlso => return if x.is_truthy() { self.eval(b) } else { Ok(x) },
            _ => {}
        }
        let y = match right {
            Some(y) => y,
            None => self.eval(b)?,
        };
        let mismatch = |s: &Self| {
            s.err(
                ErrorKind::TypeMismatch,
                span,
                format!(
                    "`{}` cannot combine {} and {}",
                    op.symbol(),
                    describe(&x),
                    describe(&y)
                ),
            )
        };
        let overflow = |s: &Self| s.err(ErrorKind::Arithmetic, span, "integer overflow");
        let v = match op {
            BinOp::Eq => Value::Bool(equal(&x, &y)),
            BinOp::Ne => Value::Bool(!equal(&x, &y)),
            BinOp::StrictEq => Value::Bool(*x == *y),
            BinOp::StrictNe => Value::Bool(*x != *y),
            BinOp::In => Value::Bool(
                collections::member(&x, &y)
                    .map_err(|m| self.err(ErrorKind::TypeMismatch, span, m))?,
            ),
            BinOp::ListConcat => match (&*x, &*y) {
                (Value::List(p), Value::List(q)) => {
                    self.tick(span, (p.len() + q.len()) as u64)?;
                    self.alloc(span, (p.len() + q.len()).saturating_mul(ELEMENT_BYTES))?;
                    Value::List(p.iter().chain(q.iter()).cloned().collect())
                }
                _ => return Err(mismatch(self)),
            },
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let ord = match (&*x, &*y) {
                    (Value::Int(p), Value::Int(q)) => p.partial_cmp(q),
                    (Value::Str(p), Value::Str(q)) => p.partial_cmp(q),
                    (p, q) => match (number(p), number(q)) {
                        (Some(p), Some(q)) => p.partial_cmp(&q),
                        _ => return Err(mismatch(self)),
                    },
                };
                let Some(ord) = ord else {
                    // NaN compares false to everything.
                    return Ok(Cow::Owned(Value::Bool(false)));
                };
                Value::Bool(match op {
                    BinOp::Lt => ord.is_lt(),
                    BinOp::Le => ord.is_le(),
                    BinOp::Gt => ord.is_gt(),
                    _ => ord.is_ge(),
                })
            }
            BinOp::Concat => match (&*x, &*y) {
                (Value::Str(p), Value::Str(q)) => {
                    self.tick(span, ((p.len() + q.len()) / BYTES_PER_STEP) as u64)?;
                    self.alloc(span, p.len() + q.len())?;
                    let mut s = String::with_capacity(p.len() + q.len());
                    s.push_str(p.as_str());
                    s.push_str(q.as_str());
                    Value::from(s)
                }
                _ => return Err(mismatch(self)),
            },
            BinOp::Add | BinOp::Sub | BinOp::Mul => match (&*x, &*y) {
                (Value::Int(p), Value::Int(q)) => {
                    let r = match op {
                        BinOp::Add => p.checked_add(*q),
                        BinOp::Sub => p.checked_sub(*q),
                        _ => p.checked_mul(*q),
                    };
                    Value::Int(r.ok_or_else(|| overflow(self))?)
                }
                (p, q) => match (number(p), number(q)) {
                    (Some(p), Some(q)) => Value::Float(match op {
                        BinOp::Add => p + q,
                        BinOp::Sub => p - q,
                        _ => p * q,
                    }),
                    _ => return Err(mismatch(self)),
                },
            },
            BinOp::Div => match (number(&x), number(&y)) {
                (Some(_), Some(0.0)) => {
                    return Err(self.err(ErrorKind::Arithmetic, span, "division by zero"));
                }
                (Some(p), Some(q)) => Value::Float(p / q),
                _ => return Err(mismatch(self)),
            },
            BinOp::Or | BinOp::And | BinOp::OrElse | BinOp::AndAlso => Value::Nil,
        };
        Ok(Cow::Owned(v))
    }
}

/// Narrows a value to a part of it, keeping the borrow when there is one. A missing part is nil.
fn project<'a>(v: Val<'a>, f: impl for<'b> Fn(&'b Value) -> Option<&'b Value>) -> Val<'a> {
    match v {
        Cow::Borrowed(r) => Cow::Borrowed(f(r).unwrap_or(&NIL)),
        Cow::Owned(o) => Cow::Owned(f(&o).cloned().unwrap_or_default()),
    }
}

/// `opts[:key]` on a keyword list: the first `{:key, value}`'s value, or nil. Out of line, so
/// that `eval`'s frame, which recursion multiplies, stays small.
#[inline(never)]
fn keyword_value<'a>(list: Val<'a>, key: &Value) -> Val<'a> {
    project(list, |v| match v {
        Value::List(items) => crate::builtins::collections::keyword_find(items, key),
        _ => None,
    })
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(x) => Some(*x),
        _ => None,
    }
}

/// The error of a render that ran out of steps at `span` of `prog`.
pub(super) fn step_limit(prog: &Program, span: Span, config: &Config) -> Error {
    prog.error(ErrorKind::Limit, span, step_limit_message(config))
}

/// What a render that built more than its memory budget of values is told: the limit, and where
/// to raise it (the library's field, `galleon serve`'s flag).
fn memory_limit_message(config: &Config) -> String {
    format!(
        "template exceeded its memory limit ({} bytes of values built; Limits::max_memory, \
         galleon serve --max-template-memory)",
        config.limits.max_memory
    )
}

/// The identity of a value's heap part, to tell a function's result that is one of its
/// arguments from one it built.
fn identity(v: &Value) -> Option<(usize, usize)> {
    match v {
        Value::Str(s) | Value::Atom(s) => Some((s.bytes().as_ptr() as usize, s.len())),
        Value::List(l) => Some((l.as_ptr() as usize, l.len())),
        Value::Tuple(t) => Some((t.as_ptr() as usize, t.len())),
        Value::Map(m) => Some((Arc::as_ptr(m) as usize, m.len())),
        Value::Safe(h) => Some((Arc::as_ptr(h) as usize, 0)),
        _ => None,
    }
}

fn step_limit_message(config: &Config) -> String {
    format!(
        "template exceeded its step limit ({} steps)",
        config.limits.max_steps
    )
}
