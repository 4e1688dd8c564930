//! The `Enum` functions that take a function (`Enum.map(@xs, fn x -> x * 2 end)`), and `for`
//! comprehensions (`for x <- @xs, do: x * 2`): the VM calls the function, binding its
//! parameters in the evaluator's function slots, once per element (each call's expression costs
//! its steps, as any expression does). Sorting is a merge sort of our own: the comparison runs
//! template code, which may fail or be inconsistent, and must do neither panic nor loop.

use std::cmp::Ordering;

use super::eval::Eval;
use super::pattern::matches;
use crate::ast::Span;
use crate::budget::{Depth, ELEMENT_BYTES, MAX_VALUE_DEPTH};
use crate::builtins::{Builtin, collections};
use crate::error::{Error, ErrorKind};
use crate::ops::{describe, to_string};
use crate::program::{Code, CodeKind, FnCode, ForCode, PatCode, QualCode};
use crate::value::{Str, Value};

impl<'a> Eval<'a> {
    /// Runs built-in `b`, which takes a function, on `args` (compiled by the compiler's rules:
    /// the function argument is a [`CodeKind::Fn`], or `:asc`/`:desc` where allowed).
    pub(super) fn higher_order(
        &mut self,
        b: Builtin,
        args: &'a [Code],
        span: Span,
    ) -> Result<Value, Error> {
        use Builtin as B;
        let arg = b
            .function_arg(args.len())
            .map_or(usize::MAX, |f| f.position);
        let mut f = None;
        let mut values = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            match &a.kind {
                CodeKind::Fn(code) if i == arg => f = Some(&**code),
                _ => values.push(self.eval(a)?.into_owned()),
            }
        }
        if b == B::RegexReplace {
            return self.regex_replace(f, values, span);
        }
        let fail = |this: &Self, m: String| this.failed(span, m);
        if let (B::MapUpdate, Some(f)) = (b, f) {
            return self.map_update(values, f, span);
        }
        let items = collections::elements(&values[0]).map_err(|m| fail(self, m))?;
        let Some(f) = f else {
            // `Enum.sort(xs, :asc | :desc)`.
            let desc = order(&values[1]).map_err(|m| fail(self, m))?;
            let mut v = items.to_vec();
            self.merge_sort(&mut v, &mut |_, a, b| {
                collections::compare(a, b).map(|o| if desc { o.is_ge() } else { o.is_le() })
            })
            .map_err(|m| fail(self, m))?;
            return Ok(Value::list(v));
        };
        Ok(match b {
            B::EnumMap => {
                self.alloc(span, items.len().saturating_mul(ELEMENT_BYTES))?;
                let mut out = Vec::with_capacity(items.len());
                for x in items.iter() {
                    out.push(self.apply(f, &[x])?);
                }
                Value::list(out)
            }
            B::EnumMapIntersperse => {
                let separator = values.get(1).cloned().unwrap_or_default();
                self.alloc(span, items.len().saturating_mul(2 * ELEMENT_BYTES))?;
                let mut out = Vec::with_capacity(items.len().saturating_mul(2));
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(separator.clone());
                    }
                    out.push(self.apply(f, &[x])?);
                }
                Value::list(out)
            }
            B::EnumEach => {
                // Run for what the function checks (an error fails the render); Elixir's
                // `Enum.each` returns `:ok`.
                for x in items.iter() {
                    self.apply(f, &[x])?;
                }
                Value::atom("ok")
            }
            B::MapNewBy => {
                let mut pairs = Vec::with_capacity(items.len());
                for x in items.iter() {
                    pairs.push(self.apply(f, &[x])?);
                }
                let mut map = crate::value::Map::new();
                collections::insert_pairs(&pairs, &mut map, "Map.new")
                    .map_err(|m| fail(self, m))?;
                Value::Map(std::sync::Arc::new(map))
            }
            B::EnumSplitWith => {
                let (mut yes, mut no) = (Vec::new(), Vec::new());
                for x in items.iter() {
                    if self.apply(f, &[x])?.is_truthy() {
                        yes.push(x.clone());
                    } else {
                        no.push(x.clone());
                    }
                }
                Value::Tuple(vec![Value::list(yes), Value::list(no)].into())
            }
            B::EnumFilter | B::EnumReject => {
                let keep = b == B::EnumFilter;
                let mut out = Vec::new();
                for x in items.iter() {
                    if self.apply(f, &[x])?.is_truthy() == keep {
                        out.push(x.clone());
                    }
                }
                Value::list(out)
            }
            B::EnumFind | B::EnumFindIndex => {
                for (i, x) in items.iter().enumerate() {
                    if self.apply(f, &[x])?.is_truthy() {
                        return Ok(if b == B::EnumFind {
                            x.clone()
                        } else {
                            Value::Int(i as i64)
                        });
                    }
                }
                // `Enum.find/3`'s default (values are the list, then the default if given).
                values.get(1).cloned().unwrap_or_default()
            }
            B::EnumAnyBy | B::EnumAllBy => {
                let any = b == B::EnumAnyBy;
                for x in items.iter() {
                    if self.apply(f, &[x])?.is_truthy() == any {
                        return Ok(Value::Bool(any));
                    }
                }
                Value::Bool(!any)
            }
            B::EnumCountBy => {
                let mut n = 0;
                for x in items.iter() {
                    n += i64::from(self.apply(f, &[x])?.is_truthy());
                }
                Value::Int(n)
            }
            B::EnumFlatMap => {
                let mut out = Vec::new();
                for x in items.iter() {
                    match self.apply(f, &[x])? {
                        Value::List(l) => {
                            // The same list returned each time is shared, not built: charged
                            // here, where it is copied.
                            self.alloc(span, l.len().saturating_mul(ELEMENT_BYTES))?;
                            out.extend(l.iter().cloned());
                        }
                        other => {
                            return Err(fail(
                                self,
                                format!(
                                    "Enum.flat_map's function must return a list, not {}",
                                    describe(&other)
                                ),
                            ));
                        }
                    }
                }
                Value::list(out)
            }
            B::EnumGroupBy => {
                let mut groups: std::collections::BTreeMap<Str, Vec<Value>> = Default::default();
                for x in items.iter() {
                    let k = self.apply(f, &[x])?;
                    let k = collections::map_key(&k, "Enum.group_by").map_err(|m| fail(self, m))?;
                    groups.entry(k).or_default().push(x.clone());
                }
                Value::Map(std::sync::Arc::new(
                    groups
                        .into_iter()
                        .map(|(k, v)| (k, Value::list(v)))
                        .collect(),
                ))
            }
            B::EnumTakeWhile | B::EnumDropWhile => {
                let mut n = 0;
                for x in items.iter() {
                    if !self.apply(f, &[x])?.is_truthy() {
                        break;
                    }
                    n += 1;
                }
                let (taken, rest) = items.split_at(n);
                Value::list(
                    if b == B::EnumTakeWhile { taken } else { rest }
                        .iter()
                        .cloned(),
                )
            }
            B::EnumReduce => {
                // The one construct that nests a value as deep as the data says (`[acc]` at
                // every step): measured after each call, the previous accumulator still alive (held by
                // the parameter bound to it, if any).
                let mut acc = values.pop().unwrap_or_default();
                let mut depth = Depth::default();
                // The slot of a one-clause function's accumulator parameter: what it holds
                // shows [`Depth`] whether the previous accumulator is still alive.
                let held = match &f.clauses[..] {
                    [only] => match only.params.last() {
                        Some(PatCode::Bind(slot)) => Some(*slot),
                        _ => None,
                    },
                    _ => None,
                };
                for x in items.iter() {
                    // The accumulator is handed over, not lent: the parameter then holds
                    // the only reference, so `acc <> w` can append in place.
                    let next = self.apply_owned(f, x, std::mem::take(&mut acc))?;
                    let holds = held.and_then(|s| self.fn_locals.get(s));
                    if depth.exceeds(&next, MAX_VALUE_DEPTH, holds) {
                        return Err(self.err(
                            ErrorKind::Limit,
                            span,
                            format!(
                                "Enum.reduce built a value nested more than {MAX_VALUE_DEPTH} deep"
                            ),
                        ));
                    }
                    acc = next;
                }
                acc
            }
            B::EnumMapJoin => {
                let joiner = match values.get(1) {
                    None => String::new(),
                    Some(j) => to_string(j).map_err(|m| fail(self, m))?,
                };
                self.alloc(span, joiner.len().saturating_mul(items.len()))?;
                let mut out = String::new();
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&joiner);
                    }
                    let v = self.apply(f, &[x])?;
                    out.push_str(&to_string(&v).map_err(|m| fail(self, m))?);
                }
                Value::from(out)
            }
            B::EnumSortBy | B::EnumMinBy | B::EnumMaxBy | B::EnumUniqBy => {
                self.alloc(span, items.len().saturating_mul(4 * ELEMENT_BYTES))?;
                let mut keyed = Vec::with_capacity(items.len());
                for x in items.iter() {
                    keyed.push(Value::Tuple(vec![self.apply(f, &[x])?, x.clone()].into()));
                }
                let key = |t: &Value| match t {
                    Value::Tuple(p) => (p[0].clone(), p[1].clone()),
                    _ => (Value::Nil, Value::Nil),
                };
                match b {
                    B::EnumSortBy => {
                        let desc = match values.get(1) {
                            Some(o) => order(o).map_err(|m| fail(self, m))?,
                            None => false,
                        };
                        self.merge_sort(&mut keyed, &mut |_, a, b| {
                            let o = collections::compare(&key(a).0, &key(b).0)?;
                            Ok(if desc { o.is_ge() } else { o.is_le() })
                        })
                        .map_err(|m| fail(self, m))?;
                        Value::list(keyed.iter().map(|t| key(t).1))
                    }
                    B::EnumUniqBy => {
                        let mut seen: Vec<Value> = Vec::new();
                        let mut out = Vec::new();
                        for t in &keyed {
                            let (k, x) = key(t);
                            if !seen.contains(&k) {
                                seen.push(k);
                                out.push(x);
                            }
                        }
                        Value::list(out)
                    }
                    _ => {
                        // The first least (or greatest) element, as Elixir's `min_by`/`max_by`.
                        let mut best: Option<(Value, Value)> = None;
                        for t in &keyed {
                            let (k, x) = key(t);
                            let better = match &best {
                                None => true,
                                Some((bk, _)) => {
                                    let o =
                                        collections::compare(&k, bk).map_err(|m| fail(self, m))?;
                                    if b == B::EnumMinBy {
                                        o == Ordering::Less
                                    } else {
                                        o == Ordering::Greater
                                    }
                                }
                            };
                            if better {
                                best = Some((k, x));
                            }
                        }
                        match best {
                            Some((_, x)) => x,
                            None => {
                                return Err(fail(self, "empty error: the list is empty".into()));
                            }
                        }
                    }
                }
            }
            B::EnumSortWith => {
                let mut v = items.to_vec();
                let mut failed = None;
                self.merge_sort(&mut v, &mut |this, a, b| match this.apply(f, &[a, b]) {
                    Ok(r) => Ok(r.is_truthy()),
                    Err(e) => {
                        failed = Some(e);
                        Err(String::new())
                    }
                })
                .map_err(|m| failed.take().unwrap_or_else(|| fail(self, m)))?;
                Value::list(v)
            }
            _ => return Err(fail(self, format!("{} takes no function", b.name()))),
        })
    }

    /// `for x <- xs, filter, do: body`: the body's values, generators nested in order.
    pub(super) fn comprehension(&mut self, f: &'a ForCode) -> Result<Value, Error> {
        self.fn_slots(f.slots_end);
        let mut out = Vec::new();
        self.qualify(&f.qualifiers, &f.body, &mut out)?;
        Ok(Value::list(out))
    }

    fn qualify(
        &mut self,
        qualifiers: &'a [QualCode],
        body: &'a Code,
        out: &mut Vec<Value>,
    ) -> Result<(), Error> {
        let Some((first, rest)) = qualifiers.split_first() else {
            self.alloc(body.span, ELEMENT_BYTES)?;
            out.push(self.eval(body)?.into_owned());
            return Ok(());
        };
        match first {
            QualCode::Filter(cond) => {
                if self.eval(cond)?.is_truthy() {
                    self.qualify(rest, body, out)?;
                }
            }
            QualCode::Gen(pattern, generator) => {
                let items = self.eval(generator)?;
                let items = collections::elements(&items)
                    .map_err(|m| self.err(ErrorKind::TypeMismatch, generator.span, m))?;
                for x in items.iter() {
                    if matches(pattern, x, &mut self.fn_locals) {
                        self.qualify(rest, body, out)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Calls `f` with `args`: the first clause whose parameters match and whose guard holds
    /// runs its body (none: Elixir's `FunctionClauseError`). A guard that fails to evaluate
    /// counts as false, as in Elixir; running out of steps does not.
    pub(super) fn apply(&mut self, f: &'a FnCode, args: &[&Value]) -> Result<Value, Error> {
        if let Ok(v) = self.first_clause(f, args, None)? {
            return Ok(v);
        }
        Err(self.no_clause(f, args))
    }

    /// [`apply`](Self::apply) with a last argument given by value and dropped once a clause
    /// matched, before its body runs (so the parameter bound to it may be its only owner).
    fn apply_owned(&mut self, f: &'a FnCode, x: &Value, last: Value) -> Result<Value, Error> {
        match self.first_clause(f, &[x], Some(last))? {
            Ok(v) => Ok(v),
            Err(last) => Err(self.no_clause(f, &[x, &last.unwrap_or_default()])),
        }
    }

    /// The error of calling `f` with `args` when no clause matches.
    fn no_clause(&self, f: &'a FnCode, args: &[&Value]) -> Error {
        let shown: Vec<String> = args.iter().map(|v| describe(v)).collect();
        self.err(
            ErrorKind::TypeMismatch,
            f.span,
            format!(
                "no function clause matching in anonymous fn/{}: {}",
                f.arity,
                shown.join(", ")
            ),
        )
    }

    /// `case v do ... end` inside one expression: the first clause matching `v` (and its guard)
    /// gives the value; none matching is an error, as in Elixir.
    /// Kept out of line: `eval`'s frame, which recursion multiplies, stays small.
    #[inline(never)]
    pub(super) fn case(&mut self, subject: &'a Code, f: &'a FnCode) -> Result<Value, Error> {
        let v = self.eval(subject)?.into_owned();
        let v = &v;
        match self.first_clause(f, &[v], None)? {
            Ok(out) => Ok(out),
            Err(_) if f.with_else => Err(self.err(
                ErrorKind::TypeMismatch,
                f.span,
                format!("no `with` clause matches {}", describe(v)),
            )),
            Err(_) => Err(self.err(
                ErrorKind::TypeMismatch,
                f.span,
                format!("no case clause matching: {}", describe(v)),
            )),
        }
    }

    /// The value of `f`'s first clause whose parameters match `args` and whose guard holds,
    /// if one does (a guard that fails counts as false, as in Elixir). `last`, when given, is
    /// one more argument after `args`, dropped before the body runs (given back when no clause
    /// matches).
    fn first_clause(
        &mut self,
        f: &'a FnCode,
        args: &[&Value],
        last: Option<Value>,
    ) -> Result<Result<Value, Option<Value>>, Error> {
        self.fn_slots(f.slots_end);
        'clauses: for clause in &f.clauses {
            for (p, v) in clause
                .params
                .iter()
                .zip(args.iter().copied().chain(last.as_ref()))
            {
                if !matches(p, v, &mut self.fn_locals) {
                    continue 'clauses;
                }
            }
            if let Some(guard) = &clause.guard {
                match self.eval(guard) {
                    Ok(v) if v.is_truthy() => {}
                    Err(e) if e.is_limit() => return Err(e),
                    _ => continue,
                }
            }
            drop(last);
            return Ok(Ok(self.eval(&clause.body)?.into_owned()));
        }
        Ok(Err(last))
    }

    /// Makes room for function slots below `end`.
    fn fn_slots(&mut self, end: usize) {
        if self.fn_locals.len() < end {
            self.fn_locals.resize(end, Value::Nil);
        }
    }

    /// Sorts `v` stably by `le(a, b)` ("`a` may come first"), a merge sort that calls it at
    /// most `n log n` times and, whatever it answers, ends.
    fn merge_sort(
        &mut self,
        v: &mut Vec<Value>,
        le: &mut dyn FnMut(&mut Self, &Value, &Value) -> Result<bool, String>,
    ) -> Result<(), String> {
        let n = v.len();
        let mut width = 1;
        let mut from = std::mem::take(v);
        let mut to = Vec::with_capacity(n);
        while width < n {
            to.clear();
            let mut start = 0;
            while start < n {
                let mid = (start + width).min(n);
                let end = (start + 2 * width).min(n);
                let (mut i, mut j) = (start, mid);
                while i < mid && j < end {
                    if le(self, &from[i], &from[j])? {
                        to.push(from[i].clone());
                        i += 1;
                    } else {
                        to.push(from[j].clone());
                        j += 1;
                    }
                }
                to.extend_from_slice(&from[i..mid]);
                to.extend_from_slice(&from[j..end]);
                start = end;
            }
            std::mem::swap(&mut from, &mut to);
            width *= 2;
        }
        *v = from;
        Ok(())
    }
}

/// `:asc` (false) or `:desc` (true).
fn order(v: &Value) -> Result<bool, String> {
    match v {
        Value::Atom(a) if a.as_str() == "asc" => Ok(false),
        Value::Atom(a) if a.as_str() == "desc" => Ok(true),
        other => Err(format!("expected :asc or :desc, not {}", describe(other))),
    }
}

impl<'a> Eval<'a> {
    /// `Map.update(map, key, default, fun)`: `fun` applied to the value at `key`, or `default`
    /// when there is none; the new map charged before it is built.
    fn map_update(
        &mut self,
        values: Vec<Value>,
        f: &'a FnCode,
        span: Span,
    ) -> Result<Value, Error> {
        let mut values = values.into_iter();
        let (map, key, default) = (
            values.next().unwrap_or_default(),
            values.next().unwrap_or_default(),
            values.next().unwrap_or_default(),
        );
        let Value::Map(m) = &map else {
            return Err(self.failed(span, format!("expected a map, not {}", describe(&map))));
        };
        let k = collections::map_key(&key, "Map.update").map_err(|m| self.failed(span, m))?;
        let new = match m.get(&k) {
            Some(old) => self.apply(f, &[old])?,
            None => default,
        };
        self.alloc(
            span,
            (m.len() + 1).saturating_mul(crate::budget::MAP_ENTRY_BYTES),
        )?;
        let mut out = (**m).clone();
        out.insert(k, new);
        Ok(Value::Map(std::sync::Arc::new(out)))
    }
}
