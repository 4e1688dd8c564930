//! Expressions and patterns to [`Code`] and [`PatCode`]: names resolved (variables to slots,
//! `@assigns` to indexes, functions to built-ins, registered functions or partials).
//!
//! Phoenix's `assigns[:name]` (nil when not given) and `assigns.name` read as `@name`. A call of a
//! built-in that takes a function (`Enum.map(xs, fn x -> ... end)`) compiles to
//! `CodeKind::HigherOrder`, told apart here so that other built-ins pay no check.

use super::suggest::{phoenix_helper, suggest};
use crate::ast::{BinOp, Expr, ExprKind, FnClause, Pattern, Qualifier, Span};
use crate::builtins::{self, Builtin};
use crate::function::Function;
use crate::lexer::SyntaxError;
use crate::parser::WITH_OTHER;
use crate::program::{
    Code, CodeKind, FnClauseCode, FnCode, ForCode, PartialArgs, PatCode, QualCode,
};
use crate::value::{Str, Value};

pub(super) type R<T> = Result<T, SyntaxError>;

/// What names mean in one template being compiled.
pub(super) struct Names<'a> {
    /// The template's name, to resolve partial paths.
    pub(super) template: &'a str,
    /// Variables in scope and their slots, innermost last.
    pub(super) scope: Vec<(String, usize)>,
    pub(super) locals: usize,
    pub(super) assigns: Vec<String>,
    pub(super) partials: Vec<(String, Span)>,
    pub(super) functions: &'a [Function],
    /// Slots of anonymous functions' parameters used so far (a namespace of their own).
    pub(super) fn_slots: usize,
    /// Whether patterns now bind a function's parameters (into function slots).
    pub(super) binding_fn: bool,
    /// Whether the template reads `assigns` whole.
    pub(super) all_assigns: bool,
    /// The `fn` blocks whose bodies are compiled, for the expression holding them.
    pub(super) blocks: Vec<super::block::CompiledBlock>,
}

/// Where function slots start in [`Names::scope`]: frame slots are below.
pub(super) const FN_SLOT: usize = usize::MAX / 2;

impl Names<'_> {
    /// A new slot for variable `name`, shadowing any outer one.
    pub(super) fn bind(&mut self, name: &str) -> usize {
        if self.binding_fn {
            self.fn_slots += 1;
            self.scope
                .push((name.to_owned(), FN_SLOT + self.fn_slots - 1));
            return self.fn_slots - 1;
        }
        // Slots of variables out of scope are not reused: frames are small either way.
        let slot = self.fresh();
        self.scope.push((name.to_owned(), slot));
        slot
    }

    /// A slot no variable names (a `case` subject, a loop element being matched).
    pub(super) fn fresh(&mut self) -> usize {
        self.locals += 1;
        self.locals - 1
    }

    /// The index of assign `name` in the program's assigns, added when new.
    fn assign(&mut self, name: &str) -> usize {
        match self.assigns.iter().position(|a| a == name) {
            Some(i) => i,
            None => {
                self.assigns.push(name.to_owned());
                self.assigns.len() - 1
            }
        }
    }

    /// Whether `e` is Phoenix's `assigns` (not a variable of that name).
    fn is_assigns(&self, e: &Expr) -> bool {
        matches!(&e.kind, ExprKind::Var(n) if n == "assigns") && self.lookup("assigns").is_none()
    }

    pub(super) fn lookup(&self, name: &str) -> Option<usize> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, s)| *s)
    }

    /// A pattern, binding its variables (after whatever it is matched against was compiled:
    /// `x = x + 1` reads the old `x`).
    pub(super) fn pattern(&mut self, p: &Pattern) -> R<PatCode> {
        Ok(match p {
            Pattern::Var(None, _) => PatCode::Any,
            Pattern::Var(Some(name), _) => PatCode::Bind(self.bind(name)),
            Pattern::Lit(v, _) => PatCode::Lit(v.clone()),
            Pattern::Pin(_, span) if self.binding_fn => {
                return Err(SyntaxError::new(
                    *span,
                    "a pin `^x` in a `fn`'s parameters is not supported",
                ));
            }
            Pattern::Pin(name, span) => match self.lookup(name) {
                Some(slot) if slot >= FN_SLOT => {
                    return Err(SyntaxError::new(
                        *span,
                        "a pin `^x` of a `fn`'s parameter is not supported",
                    ));
                }
                Some(slot) => PatCode::Pin(slot),
                None => {
                    return Err(SyntaxError::new(
                        *span,
                        format!("undefined variable `{name}` in `^{name}`"),
                    ));
                }
            },
            Pattern::Tuple(items, _) => {
                PatCode::Tuple(items.iter().map(|i| self.pattern(i)).collect::<R<_>>()?)
            }
            Pattern::List(items, _) => {
                PatCode::List(items.iter().map(|i| self.pattern(i)).collect::<R<_>>()?)
            }
            Pattern::Map(entries, _) => PatCode::Map(
                entries
                    .iter()
                    .map(|(k, p)| Ok((Str::new(k), self.pattern(p)?)))
                    .collect::<R<_>>()?,
            ),
        })
    }

    pub(super) fn expr(&mut self, e: &Expr) -> R<Code> {
        let kind = match &e.kind {
            ExprKind::Lit(v) => CodeKind::Lit(v.clone()),
            ExprKind::Assign(name) => CodeKind::Assign(self.assign(name)),
            // Phoenix's `assigns[:name]` (nil when not given) and `assigns.name`.
            ExprKind::Index(map, key) if self.is_assigns(map) => match &key.kind {
                ExprKind::Lit(Value::Atom(k) | Value::Str(k)) => {
                    CodeKind::AssignOrNil(self.assign(k.as_str()))
                }
                _ => {
                    return Err(SyntaxError::new(
                        key.span,
                        "`assigns[...]` takes a literal name, as in `assigns[:title]`",
                    ));
                }
            },
            ExprKind::Field(map, key) if self.is_assigns(map) => CodeKind::Assign(self.assign(key)),
            ExprKind::Var(name) if name == "assigns" && self.lookup(name).is_none() => {
                self.all_assigns = true;
                CodeKind::AllAssigns
            }
            ExprKind::Var(name) => match self.lookup(name) {
                Some(slot) if slot >= FN_SLOT => CodeKind::FnLocal(slot - FN_SLOT),
                Some(slot) => CodeKind::Local(slot),
                None if name.starts_with('&') => {
                    return Err(SyntaxError::new(
                        e.span,
                        format!("`{name}` is a capture's argument: it belongs inside `&(...)`"),
                    ));
                }
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
            ExprKind::Binary(BinOp::In, a, b) => match &b.kind {
                ExprKind::Range(lo, hi) => CodeKind::InRange(
                    Box::new(self.expr(a)?),
                    Box::new(self.expr(lo)?),
                    Box::new(self.expr(hi)?),
                ),
                _ => CodeKind::Binary(BinOp::In, Box::new(self.expr(a)?), Box::new(self.expr(b)?)),
            },
            ExprKind::Binary(op, a, b) => {
                CodeKind::Binary(*op, Box::new(self.expr(a)?), Box::new(self.expr(b)?))
            }
            ExprKind::Range(..) => {
                return Err(SyntaxError::new(
                    e.span,
                    "a range `first..last` can only be the generator of a `for`, the right side of `in` or an `Enum` function's argument",
                ));
            }
            ExprKind::List(items) => CodeKind::List(self.exprs(items)?),
            ExprKind::Tuple(items) => CodeKind::Tuple(self.exprs(items)?),
            ExprKind::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    out.push((self.expr(k)?, self.expr(v)?));
                }
                CodeKind::Map(out)
            }
            ExprKind::Interp(parts) => CodeKind::Interp(self.exprs(parts)?),
            ExprKind::If {
                cond,
                negate,
                then,
                otherwise,
            } => CodeKind::If(
                Box::new(self.expr(cond)?),
                *negate,
                Box::new(self.expr(then)?),
                match otherwise {
                    Some(o) => Some(Box::new(self.expr(o)?)),
                    None => None,
                },
            ),
            ExprKind::Call {
                name,
                name_span,
                args,
                kwargs,
            } => self.call(name, *name_span, args, kwargs, e.span)?,
            ExprKind::For { qualifiers, body } => self.comprehension(qualifiers, body)?,
            ExprKind::Case { subject, clauses } => self.case(subject, clauses, e.span)?,
            ExprKind::Fn(_) | ExprKind::FnBlock(_) => {
                return Err(SyntaxError::new(
                    e.span,
                    "a function can only be passed to an `Enum` function that takes one (`Enum.map`, `Enum.filter`, `Enum.reduce`...)",
                ));
            }
        };
        Ok(Code { kind, span: e.span })
    }

    fn exprs(&mut self, items: &[Expr]) -> R<Vec<Code>> {
        items.iter().map(|i| self.expr(i)).collect()
    }

    fn call(
        &mut self,
        name: &str,
        name_span: Span,
        args: &[Expr],
        kwargs: &[(String, Span, Expr)],
        span: Span,
    ) -> R<CodeKind> {
        if name == "render" {
            return self.partial(args, kwargs, span);
        }
        if !kwargs.is_empty() {
            return self.call_with_options(name, name_span, args, kwargs, span);
        }
        let arity = args.len();
        if name == "raw" || name == "Phoenix.HTML.raw" {
            return self.raw(name, args, span);
        }
        if name == "Regex.compile!"
            && let Some(v) = literal_regex(args)?
        {
            return Ok(CodeKind::Lit(v));
        }
        // Registered functions come first: an application may shadow a built-in.
        if let Some(i) = self
            .functions
            .iter()
            .position(|f| f.name == name && f.arity == arity)
        {
            return Ok(CodeKind::Native(i, self.exprs(args)?));
        }
        if let Some(b) = builtins::lookup(name, arity) {
            let args = self.builtin_args(b, args)?;
            return Ok(if b.function_arg(arity).is_some() {
                CodeKind::HigherOrder(b, args)
            } else {
                CodeKind::Builtin(b, args)
            });
        }
        Err(self.unknown(name, name_span, arity))
    }

    /// A call with keyword options (`String.split(s, ",", trim: true)`): the built-ins that
    /// take options get them as a keyword list, last. Out of line, as are `raw` and `case`:
    /// `call` is on the path of every nested call, so its frame stays small.
    #[inline(never)]
    fn call_with_options(
        &mut self,
        name: &str,
        name_span: Span,
        args: &[Expr],
        kwargs: &[(String, Span, Expr)],
        span: Span,
    ) -> R<CodeKind> {
        let arity = args.len() + 1;
        // Keyword options, for the built-ins that take them: a keyword list, last.
        if let Some(b) = builtins::lookup(name, arity).filter(|b| b.takes_options()) {
            let mut code = self.builtin_args(b, args)?;
            let mut opts = Vec::with_capacity(kwargs.len());
            for (k, kspan, v) in kwargs {
                let key = Code {
                    kind: CodeKind::Lit(Value::atom(k)),
                    span: *kspan,
                };
                opts.push(Code {
                    span: kspan.to(v.span),
                    kind: CodeKind::Tuple(vec![key, self.expr(v)?]),
                });
            }
            code.push(Code {
                kind: CodeKind::List(opts),
                span,
            });
            return Ok(CodeKind::Builtin(b, code));
        }
        // Known with these arguments, with or without the options: the options are wrong.
        let takes = |n: usize| {
            builtins::lookup(name, n).is_some()
                || self
                    .functions
                    .iter()
                    .any(|f| f.name == name && f.arity == n)
        };
        let callable = takes(arity) || takes(args.len());
        if callable {
            return Err(SyntaxError::new(
                name_span,
                format!("`{name}` takes no keyword arguments"),
            ));
        }
        Err(self.unknown(name, name_span, arity))
    }

    /// `raw(x)`: a literal argument must be something `raw` takes.
    #[inline(never)]
    fn raw(&mut self, name: &str, args: &[Expr], span: Span) -> R<CodeKind> {
        if args.len() != 1 {
            return Err(SyntaxError::new(
                span,
                format!("`{name}` takes exactly one argument"),
            ));
        }
        if let ExprKind::Lit(v) = &args[0].kind
            && !matches!(v, Value::Str(_) | Value::Nil | Value::List(_))
        {
            return Err(SyntaxError::new(
                args[0].span,
                format!(
                    "`raw` expects a string, safe HTML, a list or nil, not a {}",
                    v.type_name()
                ),
            ));
        }
        Ok(CodeKind::Raw(Box::new(self.expr(&args[0])?)))
    }

    /// The error for a call of `name` with `arity` arguments that nothing answers: the arities
    /// it takes when the name is known, else the nearest known name when one is close.
    fn unknown(&self, name: &str, name_span: Span, arity: usize) -> SyntaxError {
        if name == crate::parser::STEP {
            return SyntaxError::new(
                name_span,
                "`//` gives a range its step: `first..last//step`",
            );
        }
        let known = builtins::exists(name) || self.functions.iter().any(|f| f.name == name);
        if known {
            return SyntaxError::new(
                name_span,
                format!("`{name}` does not take {arity} argument(s)"),
            );
        }
        let registered: Vec<(&str, [usize; 1])> = self
            .functions
            .iter()
            .map(|f| (f.name.as_str(), [f.arity]))
            .collect();
        let mut candidates: Vec<(&str, &[usize])> = builtins::names().collect();
        candidates.extend([("raw", &[1][..]), ("render", &[1, 2][..])]);
        candidates.extend(registered.iter().map(|(n, a)| (*n, &a[..])));
        let hint = match suggest(name, arity, candidates) {
            Some(s) => format!(": did you mean `{s}`?"),
            None if phoenix_helper(name) => format!(
                ": `{name}` is a Phoenix.HTML helper, which galleon does not have (only `raw`); \
                 an application registers its own with `EngineBuilder::function`"
            ),
            None => String::new(),
        };
        SyntaxError::new(
            name_span,
            format!("unknown function `{name}/{arity}`{hint}"),
        )
    }

    /// Arguments of a built-in; an `Enum` function's first argument may be a range, and the
    /// function argument of one that takes a function must be a `fn` or a capture.
    #[inline(never)]
    fn builtin_args(&mut self, b: Builtin, args: &[Expr]) -> R<Vec<Code>> {
        let mut out = Vec::with_capacity(args.len());
        let function = b.function_arg(args.len());
        for (i, a) in args.iter().enumerate() {
            let wanted = function.filter(|f| f.position == i);
            if let (ExprKind::Range(lo, hi), true) = (&a.kind, i == 1 && b.takes_range_bounds()) {
                out.push(self.expr(lo)?);
                out.push(self.expr(hi)?);
                continue;
            }
            out.push(match (&a.kind, wanted) {
                (_, _) if i == 1 && b.takes_range_bounds() => {
                    return Err(SyntaxError::new(
                        a.span,
                        format!("`{}/2` takes a range `first..last` here", b.name()),
                    ));
                }
                (ExprKind::Range(lo, hi), _) if i == 0 && b.takes_enumerable() => Code {
                    kind: CodeKind::RangeList(Box::new(self.expr(lo)?), Box::new(self.expr(hi)?)),
                    span: a.span,
                },
                (ExprKind::Fn(clauses), Some(f))
                    if clauses[0].params.len() == f.arity || f.arity == builtins::ANY_ARITY =>
                {
                    self.function(clauses, a.span)?
                }
                (ExprKind::FnBlock(clauses), Some(f)) if clauses[0].params.len() == f.arity => {
                    self.fn_block(clauses, a.span)?
                }
                (ExprKind::FnBlock(clauses), Some(f)) => {
                    let takes = clauses[0].params.len();
                    return Err(arity_mismatch(b, f.arity, takes, a.span));
                }
                (ExprKind::Fn(clauses), Some(f)) => {
                    let takes = clauses[0].params.len();
                    return Err(arity_mismatch(b, f.arity, takes, a.span));
                }
                (_, Some(f)) if !f.or_order => {
                    return Err(SyntaxError::new(
                        a.span,
                        format!(
                            "`{}` expects a function here (`fn x -> ... end` or `&(...)`)",
                            b.name()
                        ),
                    ));
                }
                _ => self.expr(a)?,
            });
        }
        Ok(out)
    }

    /// A `for` comprehension: generators and filters in order, each generator's variables
    /// (function slots) seen by what follows it.
    fn comprehension(&mut self, qualifiers: &[Qualifier], body: &Expr) -> R<CodeKind> {
        let scope = self.scope.len();
        let r = self.comprehension_in_scope(qualifiers, body);
        self.scope.truncate(scope);
        r
    }

    fn comprehension_in_scope(&mut self, qualifiers: &[Qualifier], body: &Expr) -> R<CodeKind> {
        let mut out = Vec::with_capacity(qualifiers.len());
        for q in qualifiers {
            out.push(match q {
                Qualifier::Gen(pattern, generator) => {
                    let generator = match &generator.kind {
                        ExprKind::Range(lo, hi) => Code {
                            kind: CodeKind::RangeList(
                                Box::new(self.expr(lo)?),
                                Box::new(self.expr(hi)?),
                            ),
                            span: generator.span,
                        },
                        _ => self.expr(generator)?,
                    };
                    QualCode::Gen(self.fn_pattern(pattern)?, generator)
                }
                Qualifier::Filter(cond) => QualCode::Filter(self.expr(cond)?),
            });
        }
        let slots_end = self.fn_slots;
        Ok(CodeKind::For(Box::new(ForCode {
            qualifiers: out,
            slots_end,
            body: self.expr(body)?,
        })))
    }

    /// `case subject do ... end` inside one expression; out of line, so that `expr`'s frame,
    /// which recursion multiplies, stays small.
    #[inline(never)]
    fn case(&mut self, subject: &Expr, clauses: &[FnClause], span: Span) -> R<CodeKind> {
        let with_else = matches!(&subject.kind, ExprKind::Var(n) if n == WITH_OTHER);
        let subject = self.expr(subject)?;
        let mut f = self.fn_code(clauses, span)?;
        f.with_else = with_else;
        Ok(CodeKind::Case(Box::new(subject), Box::new(f)))
    }

    /// An anonymous function: each clause's parameters bind function slots, seen only in its
    /// guard and body.
    fn function(&mut self, clauses: &[FnClause], span: Span) -> R<Code> {
        Ok(Code {
            kind: CodeKind::Fn(Box::new(self.fn_code(clauses, span)?)),
            span,
        })
    }

    /// The clauses of a function (or of a one-expression `case`), compiled.
    fn fn_code(&mut self, clauses: &[FnClause], span: Span) -> R<FnCode> {
        let mut out = Vec::with_capacity(clauses.len());
        for clause in clauses {
            let scope = self.scope.len();
            let compiled = self.clause(clause);
            self.scope.truncate(scope);
            out.push(compiled?);
        }
        Ok(FnCode {
            arity: clauses.first().map_or(0, |c| c.params.len()),
            clauses: out,
            slots_end: self.fn_slots,
            span,
            with_else: false,
        })
    }

    /// A pattern whose variables bind function slots (a `fn`'s parameter, a comprehension's
    /// generator).
    pub(super) fn fn_pattern(&mut self, p: &Pattern) -> R<PatCode> {
        self.binding_fn = true;
        let code = self.pattern(p);
        self.binding_fn = false;
        code
    }

    fn clause(&mut self, clause: &FnClause) -> R<FnClauseCode> {
        let params: R<Vec<PatCode>> = clause.params.iter().map(|p| self.fn_pattern(p)).collect();
        Ok(FnClauseCode {
            params: params?,
            guard: match &clause.guard {
                Some(g) => Some(self.expr(g)?),
                None => None,
            },
            body: self.expr(&clause.body)?,
        })
    }

    /// `render("partial.html.eex", key: value)`, or with any expression giving a map of
    /// assigns: `render("form.html", Map.put(assigns, :action, @path))`.
    fn partial(
        &mut self,
        args: &[Expr],
        kwargs: &[(String, Span, Expr)],
        span: Span,
    ) -> R<CodeKind> {
        let (target, value) = match args {
            [
                Expr {
                    kind: ExprKind::Lit(Value::Str(s)),
                    span,
                },
                rest @ ..,
            ] if rest.len() <= 1 && (rest.is_empty() || kwargs.is_empty()) => {
                ((s.as_str(), *span), rest.first())
            }
            _ => {
                return Err(SyntaxError::new(
                    span,
                    "`render` takes a template name as a string literal, then its assigns (`key: value` pairs or a map)",
                ));
            }
        };
        let Some(resolved) = resolve(self.template, target.0) else {
            return Err(SyntaxError::new(
                target.1,
                "partial path leaves the template root",
            ));
        };
        let args = match value {
            Some(v) => PartialArgs::Value(Box::new(self.expr(v)?)),
            None => {
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
                PartialArgs::Keywords(compiled)
            }
        };
        let partial = match self.partials.iter().position(|(n, _)| *n == resolved) {
            Some(i) => i,
            None => {
                self.partials.push((resolved, span));
                self.partials.len() - 1
            }
        };
        Ok(CodeKind::Partial { partial, args })
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

/// `Regex.compile!` (what `~r/.../` is) of literal strings, compiled now: a bad pattern is a
/// located compile error, as in Elixir, where the sigil compiles when the template does.
fn literal_regex(args: &[Expr]) -> Result<Option<Value>, SyntaxError> {
    let text = |e: &Expr| match &e.kind {
        ExprKind::Lit(Value::Str(s)) => Some(s.as_str().to_owned()),
        _ => None,
    };
    let (source, opts) = match args {
        [s] => (text(s), Some(String::new())),
        [s, o] => (text(s), text(o)),
        _ => (None, None),
    };
    let (Some(source), Some(opts)) = (source, opts) else {
        return Ok(None);
    };
    match crate::regexp::Regex::compile(&source, &opts) {
        Ok(r) => Ok(Some(Value::Regex(std::sync::Arc::new(r)))),
        Err(m) => Err(SyntaxError::new(args[0].span, m)),
    }
}

/// The error of passing built-in `b` a function of `takes` parameters where it calls it with
/// `calls` arguments.
fn arity_mismatch(b: Builtin, calls: usize, takes: usize, span: Span) -> SyntaxError {
    SyntaxError::new(
        span,
        format!(
            "`{}` calls this function with {calls} argument(s); it takes {takes}",
            b.name()
        ),
    )
}
