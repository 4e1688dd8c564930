//! Renderer: runs a [`Program`]'s ops against assigns, appending to an [`IoList`]. It can stop
//! after any op once the output has reached a size and resume later from where it stopped, which
//! is what streaming is: the whole state is a stack of frames (program counter, loop positions,
//! variables), never the output.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use galleon_iolist::{IoList, escape_html_into, needs_escape};
use smallvec::{SmallVec, smallvec};

use crate::ast::{BinOp, Span, UnOp};
use crate::compile::{Bind, Code, CodeKind, Generator, Instr, Op, Program, Repeat};
use crate::engine::{Catalog, Config};
use crate::error::{Error, ErrorKind};
use crate::value::{Str, Value};

/// Bytes of string built (by `<>`, `upcase`, ...) that cost one step of the step budget, so that
/// a template cannot build huge strings for free. A guess: copying 64 bytes costs about as much
/// as one op does (a few nanoseconds).
const BYTES_PER_STEP: usize = 64;

static NIL: Value = Value::Nil;

/// Variable slots and assigns a frame holds without allocating: a page's handful of loop
/// variables and assigns. Allocations per small render showed in profiles of 4 KB responses.
const INLINE_SLOTS: usize = 4;

/// One template being rendered: which program, where in it, and its variables.
#[derive(Debug)]
struct Frame {
    prog: usize,
    pc: usize,
    locals: SmallVec<[Value; INLINE_SLOTS]>,
    /// The frame's assigns, one per name the program uses (`None`: not given).
    assigns: SmallVec<[Option<Value>; INLINE_SLOTS]>,
    loops: Vec<Loop>,
}

impl Frame {
    fn new(prog: &Program, index: usize, lookup: impl Fn(&Str) -> Option<Value>) -> Frame {
        Frame {
            prog: index,
            pc: 0,
            locals: SmallVec::from_elem(Value::Nil, prog.locals),
            assigns: prog.assigns.iter().map(lookup).collect(),
            loops: Vec::new(),
        }
    }
}

/// The state of one `for`.
#[derive(Debug)]
enum Loop {
    /// `next..=last`, counted; `done` once `last` was yielded (so `last = i64::MAX` works).
    Range {
        next: i64,
        last: i64,
        index: i64,
        done: bool,
    },
    /// A list and the position of the next element.
    Items { items: Arc<[Value]>, next: usize },
}

impl Loop {
    /// Elements not yet bound.
    fn remaining(&self) -> u64 {
        match self {
            Loop::Range {
                next, last, done, ..
            } => {
                if *done || next > last {
                    0
                } else {
                    u64::try_from(i128::from(*last) - i128::from(*next) + 1).unwrap_or(u64::MAX)
                }
            }
            Loop::Items { items, next } => items.len().saturating_sub(*next) as u64,
        }
    }

    /// Moves past `n` elements (at most [`Loop::remaining`]) without binding them: for a loop
    /// whose body does not read them.
    fn skip(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        match self {
            Loop::Range {
                next,
                last,
                index,
                done,
            } => {
                let to = i128::from(*next) + i128::from(n);
                if to > i128::from(*last) {
                    *next = *last;
                    *done = true;
                } else {
                    *next = to as i64;
                }
                *index = index.wrapping_add(n as i64);
            }
            Loop::Items { items, next } => {
                *next = next.saturating_add(n as usize).min(items.len());
            }
        }
    }

    /// Binds the next element (and its index) into `locals`; false when the loop is exhausted.
    /// Writes in place: no `Value` is moved through the stack.
    #[inline(always)]
    fn advance(&mut self, bind: Bind, locals: &mut [Value]) -> bool {
        let i = match self {
            Loop::Range {
                next,
                last,
                index,
                done,
            } => {
                if *done || *next > *last {
                    return false;
                }
                if let Some(slot) = bind.item.and_then(|s| locals.get_mut(s)) {
                    set_int(slot, *next);
                }
                if *next == *last {
                    *done = true;
                } else {
                    *next += 1;
                }
                let i = *index;
                *index = index.wrapping_add(1);
                i
            }
            Loop::Items { items, next } => {
                let Some(v) = items.get(*next) else {
                    return false;
                };
                if let Some(slot) = bind.item.and_then(|s| locals.get_mut(s)) {
                    match v {
                        Value::Int(i) => set_int(slot, *i),
                        v => *slot = v.clone(),
                    }
                }
                *next += 1;
                (*next - 1) as i64
            }
        };
        if let Some(slot) = bind.index.and_then(|s| locals.get_mut(s)) {
            set_int(slot, i);
        }
        true
    }
}

/// Stores an integer in a variable slot. When the slot already holds an integer (every iteration
/// of a loop over integers but the first) only the payload is written: no drop, no 40-byte move
/// through the stack, which profiling showed stalling on store forwarding.
#[inline]
fn set_int(slot: &mut Value, i: i64) {
    match slot {
        Value::Int(old) => *old = i,
        other => *other = Value::Int(i),
    }
}

/// The templates a render runs: borrowed by a whole render (no reference count touched on the
/// catalog every worker thread shares), owned by a stream, which must outlive its engine handle.
#[derive(Debug)]
pub(crate) enum Programs<'c> {
    Borrowed(&'c Catalog),
    Owned(Arc<Catalog>),
}

impl std::ops::Deref for Programs<'_> {
    type Target = Catalog;

    #[inline]
    fn deref(&self) -> &Catalog {
        match self {
            Programs::Borrowed(c) => c,
            Programs::Owned(c) => c,
        }
    }
}

/// A resumable render: a stack of frames and a step budget.
#[derive(Debug)]
pub(crate) struct Vm<'c> {
    catalog: Programs<'c>,
    config: Config,
    frames: SmallVec<[Frame; 1]>,
    /// Steps left before the render fails with a limit error.
    pub(crate) steps: u64,
    /// Partial nesting outside this VM (for renders started inside an expression).
    depth_base: usize,
    /// The small-copy buffer, kept between chunks for its capacity.
    buf: Vec<u8>,
    /// Capacity the small-copy buffer gets at its first copy.
    first_buf: usize,
}

impl<'c> Vm<'c> {
    /// A render of program `index` with the assigns `assign` gives, not yet started.
    pub(crate) fn new(
        catalog: Programs<'c>,
        config: Config,
        index: usize,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Vm<'c> {
        let frame = Frame::new(&catalog.programs[index], index, |name| {
            assign(name.as_str())
        });
        Vm {
            steps: config.limits.max_steps,
            catalog,
            config,
            frames: smallvec![frame],
            depth_base: 0,
            buf: Vec::new(),
            first_buf: 64,
        }
    }

    /// Sizes the small-copy buffer for about `bytes` of output. The buffer is allocated at the
    /// first copy, not here: a render that copies nothing (a page of long static blocks)
    /// allocates none.
    pub(crate) fn reserve(&mut self, bytes: usize) {
        self.first_buf = bytes.clamp(64, FLUSH_AT);
    }

    /// Runs until done (`Ok(true)`) or until `out` holds at least `pause_at` bytes (`Ok(false)`:
    /// call again to resume).
    pub(crate) fn run(&mut self, out: &mut IoList, pause_at: usize) -> Result<bool, Error> {
        // Every static piece of a program is a slice of its text: pinned once here (and once per
        // partial called), each piece is then an offset into the pin, with no reference-count
        // traffic on text that every worker thread rendering the template shares.
        for frame in &self.frames {
            out.pin(&self.catalog.programs[frame.prog].text);
        }
        let mut buf = std::mem::take(&mut self.buf);
        let mut o = Out {
            list: out,
            buf: &mut buf,
            copy_below: self.config.copy_below,
            first_buf: self.first_buf,
        };
        let result = self.run_in(&mut o, pause_at);
        o.finish();
        self.buf = buf;
        result
    }

    fn run_in(&mut self, out: &mut Out<'_>, pause_at: usize) -> Result<bool, Error> {
        let catalog: &Catalog = &self.catalog;
        // One frame at a time: the inner loop runs its instructions until it calls a partial,
        // returns, pauses or fails.
        'frames: loop {
            let depth = self.depth_base + self.frames.len();
            let Some(frame) = self.frames.last_mut() else {
                return Ok(true);
            };
            let prog = &catalog.programs[frame.prog];
            loop {
                let Some(ins) = prog.ops.get(frame.pc) else {
                    // Dropped where it lies: `pop` would first move the ~400-byte frame out.
                    self.frames.truncate(self.frames.len() - 1);
                    continue 'frames;
                };
                frame.pc += 1;
                if self.steps == 0 {
                    return Err(step_limit(prog, op_span(&ins.op), &self.config));
                }
                self.steps -= 1;
                if !ins.text.is_empty() {
                    out.text(&ins.text);
                }
                match &ins.op {
                    Op::Text => {}
                    Op::Output { code, escape } => {
                        // Fast path: a variable, assign or key is output straight from where
                        // it lives; anything else (or a miss, to report it) takes `eval`.
                        let result = match lookup(frame, code) {
                            Some(v) => emit(out, v, *escape),
                            None => {
                                let mut ev = Eval::new(
                                    catalog,
                                    &self.config,
                                    prog,
                                    frame,
                                    &mut self.steps,
                                    depth,
                                );
                                let v = ev.eval(code)?;
                                emit(out, &v, *escape)
                            }
                        };
                        result.map_err(|m| prog.error(ErrorKind::TypeMismatch, code.span, m))?;
                    }
                    Op::Exec(code) => {
                        let mut ev =
                            Eval::new(catalog, &self.config, prog, frame, &mut self.steps, depth);
                        ev.eval(code)?;
                    }
                    Op::Branch {
                        cond,
                        jump_when,
                        target,
                    } => {
                        let truthy = match fast_cond(frame, cond) {
                            Some(t) => t,
                            None => {
                                let mut ev = Eval::new(
                                    catalog,
                                    &self.config,
                                    prog,
                                    frame,
                                    &mut self.steps,
                                    depth,
                                );
                                ev.eval(cond)?.is_truthy()
                            }
                        };
                        if truthy == *jump_when {
                            frame.pc = *target;
                        }
                    }
                    Op::Jump(target) => frame.pc = *target,
                    Op::ForInit {
                        generator,
                        bind,
                        exit,
                    } => {
                        let mut ev =
                            Eval::new(catalog, &self.config, prog, frame, &mut self.steps, depth);
                        let mut state = ev.generator(generator)?;
                        // A loop whose body is static text: every iteration at once.
                        if let Some(Instr {
                            op:
                                Op::ForNext {
                                    repeat: Some(rep),
                                    body,
                                    ..
                                },
                            ..
                        }) = prog.ops.get(frame.pc)
                            && *body == frame.pc
                        {
                            match repeat_rest(out, rep, &mut state, &mut self.steps, pause_at) {
                                Repeated::All => frame.pc = *exit,
                                Repeated::OutOfSteps => {
                                    return Err(step_limit(prog, Span::default(), &self.config));
                                }
                                // Resume at the loop's bottom, as the next iteration.
                                Repeated::Paused => {
                                    frame.loops.push(state);
                                    return Ok(false);
                                }
                            }
                        } else if state.advance(*bind, &mut frame.locals) {
                            frame.loops.push(state);
                        } else {
                            frame.pc = *exit;
                        }
                    }
                    Op::ForNext {
                        repeat: Some(rep),
                        body,
                        ..
                    } => {
                        // The body is this instruction's text, just output for the current
                        // element: output it for all the others at once, one step each, as
                        // their own iterations would have cost.
                        if let Some(state) = frame.loops.last_mut() {
                            match repeat_rest(out, rep, state, &mut self.steps, pause_at) {
                                Repeated::All => {
                                    frame.loops.pop();
                                }
                                Repeated::OutOfSteps => {
                                    return Err(step_limit(prog, Span::default(), &self.config));
                                }
                                Repeated::Paused => {
                                    frame.pc = *body;
                                    return Ok(false);
                                }
                            }
                        }
                    }
                    Op::ForNext { bind, body, .. } => {
                        let more = match frame.loops.last_mut() {
                            Some(state) => state.advance(*bind, &mut frame.locals),
                            None => false,
                        };
                        if more {
                            frame.pc = *body;
                        } else {
                            frame.loops.pop();
                        }
                    }
                    Op::Call {
                        partial,
                        args,
                        span,
                    } => {
                        let mut ev =
                            Eval::new(catalog, &self.config, prog, frame, &mut self.steps, depth);
                        let (target, args) = ev.call_args(*partial, args, *span)?;
                        let new = Frame::new(&catalog.programs[target], target, |name| {
                            args.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
                        });
                        out.list.pin(&catalog.programs[target].text);
                        self.frames.push(new);
                        if out.len() >= pause_at {
                            return Ok(false);
                        }
                        continue 'frames;
                    }
                }
                if out.len() >= pause_at {
                    return Ok(false);
                }
            }
        }
    }
}

/// How [`repeat_rest`] ended.
enum Repeated {
    /// Every remaining iteration was output.
    All,
    /// The output reached the pause point first; the loop state is moved to the iteration to
    /// resume with, at the loop's bottom instruction.
    Paused,
    /// The step budget ran out first.
    OutOfSteps,
}

/// Outputs every iteration left in `state` of a loop whose body is `rep`'s static text, one
/// step each, as the iterations run one by one would have cost.
fn repeat_rest(
    out: &mut Out<'_>,
    rep: &Repeat,
    state: &mut Loop,
    steps: &mut u64,
    pause_at: usize,
) -> Repeated {
    let left = state.remaining();
    let budget = left.min(*steps);
    let done = out.repeat(rep, budget, pause_at);
    *steps -= done;
    if done == left {
        Repeated::All
    } else if done == budget {
        Repeated::OutOfSteps
    } else {
        state.skip(done + 1);
        Repeated::Paused
    }
}

/// The error of a render that ran out of steps at `span` of `prog`.
fn step_limit(prog: &Program, span: Span, config: &Config) -> Error {
    prog.error(ErrorKind::Limit, span, step_limit_message(config))
}

fn step_limit_message(config: &Config) -> String {
    format!(
        "template exceeded its step limit ({} steps)",
        config.limits.max_steps
    )
}

/// The value of a plain path (`x`, `@x`, `x.key.key`, a literal) without going through `eval`:
/// no step is counted (the instruction was) and nothing is cloned. `None` for anything else, and
/// for a path that does not resolve, which `eval` then reports.
#[inline(always)]
fn lookup<'a>(frame: &'a Frame, code: &'a Code) -> Option<&'a Value> {
    match &code.kind {
        CodeKind::Local(s) => frame.locals.get(*s),
        _ => lookup_path(frame, code),
    }
}

fn lookup_path<'a>(frame: &'a Frame, code: &'a Code) -> Option<&'a Value> {
    match &code.kind {
        CodeKind::Lit(v) => Some(v),
        CodeKind::Local(s) => frame.locals.get(*s),
        CodeKind::Assign(i) => frame.assigns.get(*i)?.as_ref(),
        CodeKind::Field(inner, key) => match lookup_path(frame, inner)? {
            Value::Map(m) => m.get(&key.bytes()[..]),
            _ => None,
        },
        _ => None,
    }
}

/// The truthiness of a condition that is a plain path, or a comparison of two integer paths
/// (`i == 0`), without `eval`; `None` for anything else.
#[inline]
fn fast_cond(frame: &Frame, cond: &Code) -> Option<bool> {
    match &cond.kind {
        CodeKind::Binary(op, a, b) => {
            let (Value::Int(x), Value::Int(y)) = (lookup(frame, a)?, lookup(frame, b)?) else {
                return None;
            };
            Some(match op {
                BinOp::Eq => x == y,
                BinOp::Ne => x != y,
                BinOp::Lt => x < y,
                BinOp::Le => x <= y,
                BinOp::Gt => x > y,
                BinOp::Ge => x >= y,
                _ => return None,
            })
        }
        _ => lookup(frame, cond).map(Value::is_truthy),
    }
}

/// A span to blame for an op that has none of its own.
fn op_span(op: &Op) -> Span {
    match op {
        Op::Output { code, .. } | Op::Exec(code) | Op::Branch { cond: code, .. } => code.span,
        Op::ForInit {
            generator: Generator::Items(c) | Generator::Range(c, _),
            ..
        } => c.span,
        Op::Call { span, .. } => *span,
        Op::Text | Op::Jump(_) | Op::ForNext { .. } => Span::default(),
    }
}

/// Expression evaluation in one frame.
struct Eval<'a> {
    catalog: &'a Catalog,
    config: &'a Config,
    prog: &'a Program,
    frame: &'a Frame,
    steps: &'a mut u64,
    /// Partial nesting depth of this frame.
    depth: usize,
}

type Val<'a> = Cow<'a, Value>;

impl<'a> Eval<'a> {
    /// An evaluator for expressions of `frame`, spending steps from `steps`.
    fn new(
        catalog: &'a Catalog,
        config: &'a Config,
        prog: &'a Program,
        frame: &'a Frame,
        steps: &'a mut u64,
        depth: usize,
    ) -> Self {
        Eval {
            catalog,
            config,
            prog,
            frame,
            steps,
            depth,
        }
    }

    fn err(&self, kind: ErrorKind, span: Span, msg: impl Into<String>) -> Error {
        self.prog.error(kind, span, msg)
    }

    fn tick(&mut self, span: Span, n: u64) -> Result<(), Error> {
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

    fn generator(&mut self, g: &'a Generator) -> Result<Loop, Error> {
        match g {
            Generator::Range(a, b) => {
                let first = self.int(a, "a range bound")?;
                let last = self.int(b, "a range bound")?;
                Ok(Loop::Range {
                    next: first,
                    last,
                    index: 0,
                    done: false,
                })
            }
            Generator::Items(c) => match lookup(self.frame, c)
                .map_or_else(|| self.eval(c), |v| Ok(Cow::Borrowed(v)))?
            {
                Cow::Borrowed(Value::List(items)) => Ok(Loop::Items {
                    items: Arc::clone(items),
                    next: 0,
                }),
                Cow::Owned(Value::List(items)) => Ok(Loop::Items { items, next: 0 }),
                other => Err(self.err(
                    ErrorKind::TypeMismatch,
                    c.span,
                    format!(
                        "cannot iterate over {} (`for` needs a list or a range)",
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
    fn call_args(
        &mut self,
        partial: usize,
        args: &'a [(Str, Code)],
        span: Span,
    ) -> Result<(usize, Vec<(Str, Value)>), Error> {
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
        let mut values = Vec::with_capacity(args.len());
        for (k, c) in args {
            values.push((k.clone(), self.eval(c)?.into_owned()));
        }
        Ok((target, values))
    }

    fn eval(&mut self, c: &'a Code) -> Result<Val<'a>, Error> {
        self.tick(c.span, 1)?;
        Ok(match &c.kind {
            CodeKind::Lit(v) => Cow::Borrowed(v),
            CodeKind::Local(s) => Cow::Borrowed(self.frame.locals.get(*s).unwrap_or(&NIL)),
            CodeKind::Assign(i) => match self.frame.assigns.get(*i) {
                Some(Some(v)) => Cow::Borrowed(v),
                _ => {
                    let name = self.prog.assigns.get(*i).map_or("?", Str::as_str);
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
                    Value::Map(m) => m.contains_key(&key.bytes()[..]),
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
                    Value::Map(m) => m.get(&key.bytes()[..]),
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
                    (Value::Map(_), Value::Str(k)) => {
                        let k = k.clone();
                        project(v, |v| match v {
                            Value::Map(m) => m.get(&k.bytes()[..]),
                            _ => None,
                        })
                    }
                    (Value::Nil, _) => Cow::Borrowed(&NIL),
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
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.eval(i)?.into_owned());
                }
                Cow::Owned(Value::List(out.into()))
            }
            CodeKind::Length(inner) => {
                let v = self.eval(inner)?;
                let n = match &*v {
                    Value::List(l) => l.len(),
                    Value::Map(m) => m.len(),
                    Value::Str(s) => {
                        self.tick(c.span, (s.len() / BYTES_PER_STEP) as u64)?;
                        s.as_str().chars().count()
                    }
                    other => {
                        return Err(self.err(
                            ErrorKind::TypeMismatch,
                            c.span,
                            format!(
                                "`length` expects a list, map or string, not {}",
                                describe(other)
                            ),
                        ));
                    }
                };
                Cow::Owned(Value::Int(n as i64))
            }
            CodeKind::Upcase(inner) | CodeKind::Downcase(inner) => {
                let v = self.eval(inner)?;
                let Value::Str(s) = &*v else {
                    return Err(self.err(
                        ErrorKind::TypeMismatch,
                        c.span,
                        format!("expected a string, not {}", describe(&v)),
                    ));
                };
                self.tick(c.span, (s.len() / BYTES_PER_STEP) as u64)?;
                let out = if matches!(c.kind, CodeKind::Upcase(_)) {
                    s.as_str().to_uppercase()
                } else {
                    s.as_str().to_lowercase()
                };
                Cow::Owned(Value::from(out))
            }
            CodeKind::Raw(inner) => {
                let v = self.eval(inner)?;
                let mut html = IoList::new();
                let mut buf = Vec::new();
                let mut o = Out {
                    list: &mut html,
                    buf: &mut buf,
                    copy_below: self.config.copy_below,
                    first_buf: 64,
                };
                let r = emit(&mut o, &v, false);
                o.finish();
                r.map_err(|m| self.err(ErrorKind::TypeMismatch, c.span, m))?;
                Cow::Owned(Value::safe(html))
            }
            CodeKind::Partial { partial, args } => {
                let (target, args) = self.call_args(*partial, args, c.span)?;
                let target_prog = &self.catalog.programs[target];
                let frame = Frame::new(target_prog, target, |name| {
                    args.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
                });
                let mut vm = Vm {
                    catalog: Programs::Borrowed(self.catalog),
                    config: *self.config,
                    frames: smallvec![frame],
                    steps: *self.steps,
                    depth_base: self.depth,
                    buf: Vec::new(),
                    first_buf: 64,
                };
                let mut html = IoList::new();
                let max = self.config.limits.max_output;
                let done = vm.run(&mut html, max.saturating_add(1));
                *self.steps = vm.steps;
                if !done? {
                    return Err(self.err(
                        ErrorKind::Limit,
                        c.span,
                        format!("output exceeds the limit of {max} bytes"),
                    ));
                }
                Cow::Owned(Value::safe(html))
            }
        })
    }

    fn binary(
        &mut self,
        op: BinOp,
        a: &'a Code,
        b: &'a Code,
        span: Span,
    ) -> Result<Val<'a>, Error> {
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
        let y = self.eval(b)?;
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

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(x) => Some(*x),
        _ => None,
    }
}

/// `==` as in Elixir: `1 == 1.0`, structural for lists and maps.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Int(p), Value::Float(q)) | (Value::Float(q), Value::Int(p)) => *p as f64 == *q,
        (Value::List(p), Value::List(q)) => {
            p.len() == q.len() && p.iter().zip(q.iter()).all(|(x, y)| equal(x, y))
        }
        _ => a == b,
    }
}

/// A value's type, with the value itself when it is short, for error messages.
fn describe(v: &Value) -> String {
    match v {
        Value::Nil => "nil".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Int(i) => format!("the integer {i}"),
        Value::Float(x) => format!("the float {x:?}"),
        Value::Str(s) if s.len() <= 20 => format!("the string {s:?}"),
        other => format!("a {}", other.type_name()),
    }
}

/// Size of the buffers small copies gather in, in bytes. A full buffer becomes a segment of the
/// list as it is (moved, not copied) and a fresh one is started. A guess: large enough that a
/// table is a few dozen segments and allocations, small enough that a stream chunk is many.
const FLUSH_AT: usize = 4096;

/// A render's output: the list, with a buffer in front of it where small pieces (tags between
/// cells, digits) gather first, so a table cell costs three `memcpy`s, not three list pushes.
/// Everything that goes to the list by reference flushes the buffer first, so order is kept.
/// (Gathering cut a big-table render from 55.5 M to 38.6 M instructions under callgrind.)
pub(crate) struct Out<'o> {
    list: &'o mut IoList,
    buf: &'o mut Vec<u8>,
    copy_below: usize,
    /// Capacity `buf` gets when it has none.
    first_buf: usize,
}

impl Out<'_> {
    /// Bytes output so far (list plus buffer).
    #[inline]
    fn len(&self) -> usize {
        self.list.len() + self.buf.len()
    }

    /// Hands the buffered bytes to the list: a buffer of at least `copy_below` bytes is moved in
    /// whole (no copy) and replaced by a new one of `next` bytes; a shorter one is copied into the
    /// list's scratch, where it merges with its neighbours.
    fn flush_with(&mut self, next: usize) {
        if self.buf.len() >= self.copy_below.max(1) {
            let full = std::mem::replace(self.buf, Vec::with_capacity(next));
            self.list.push_bytes(Bytes::from(full));
        } else if !self.buf.is_empty() {
            self.list.push_copy(self.buf);
            self.buf.clear();
        }
    }

    /// Flush before a reference, the render going on. Inline for the common case of nothing to
    /// flush (a run of referenced pieces, such as a loop over static text).
    #[inline]
    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.flush_with(FLUSH_AT);
        }
    }

    /// Flush at the end of a render or chunk.
    fn finish(&mut self) {
        self.flush_with(0);
    }

    /// Copies a small piece.
    #[inline]
    fn copy(&mut self, s: &[u8]) {
        if self.buf.len() + s.len() > self.buf.capacity() {
            if self.buf.capacity() == 0 {
                self.buf.reserve(self.first_buf);
            } else if self.buf.len() >= FLUSH_AT / 2 {
                self.flush();
            }
        }
        self.buf.extend_from_slice(s);
    }

    /// Shared bytes: referenced when at least `copy_below` long, copied otherwise. Static text
    /// lies inside a pinned program text and costs no reference count (see [`Vm::run`]); other
    /// bytes (a string assign) are cloned.
    #[inline]
    fn text(&mut self, b: &Bytes) {
        if b.len() >= self.copy_below {
            self.flush();
            self.list.push_shared(b);
        } else {
            self.copy(b);
        }
    }

    /// Shared bytes, HTML-escaped: short strings are escaped into the buffer; long ones become
    /// references to their clean runs.
    fn escaped(&mut self, b: &Bytes) {
        if b.len() >= self.copy_below {
            self.flush();
            escape_html_into(self.list, b, self.copy_below);
        } else if !needs_escape(b) {
            self.copy(b);
        } else {
            for &c in b.iter() {
                match c {
                    b'&' => self.copy(b"&amp;"),
                    b'<' => self.copy(b"&lt;"),
                    b'>' => self.copy(b"&gt;"),
                    b'"' => self.copy(b"&quot;"),
                    b'\'' => self.copy(b"&#39;"),
                    c => self.copy(&[c]),
                }
            }
        }
    }

    /// Outputs `rep`'s body up to `n` times, in references to its block, stopping early once
    /// the output holds `pause_at` bytes. Returns how many times it was output.
    fn repeat(&mut self, rep: &Repeat, n: u64, pause_at: usize) -> u64 {
        let per_block = (rep.block.len() / rep.unit) as u64;
        let mut done = 0;
        while done < n && self.len() < pause_at {
            // No further than the iteration that reaches `pause_at`, where the loop run one
            // iteration at a time would have paused: chunks keep their size and step budget.
            let to_pause = (pause_at - self.len()).div_ceil(rep.unit) as u64;
            let k = per_block.min(n - done).min(to_pause);
            // A prefix of the block, by reference to the pinned text: no slice is made.
            let len = k as usize * rep.unit;
            if len >= self.copy_below {
                self.flush();
                self.list.push_shared_range(&rep.block, 0..len);
            } else {
                self.copy(&rep.block[..len]);
            }
            done += k;
        }
        done
    }

    /// Already-rendered HTML.
    fn html(&mut self, html: &Arc<IoList>) {
        self.flush();
        if html.len() < self.copy_below {
            self.list.append(html);
        } else {
            self.list.push_shared_list(Arc::clone(html));
        }
    }
}

/// Appends a value's output: escaped (unless `escape` is false or it is already safe HTML),
/// referenced when at least `copy_below` bytes long, copied otherwise.
pub(crate) fn emit(out: &mut Out<'_>, v: &Value, escape: bool) -> Result<(), String> {
    match v {
        Value::Nil => {}
        Value::Int(i) => {
            let mut buf = [0u8; 20];
            out.copy(format_int(*i, &mut buf));
        }
        Value::Str(s) if escape => out.escaped(s.bytes()),
        Value::Str(s) => out.text(s.bytes()),
        Value::Safe(html) => out.html(html),
        Value::Bool(_) | Value::Float(_) => {
            let mut buf = Vec::new();
            write_scalar(v, false, &mut buf);
            out.copy(&buf);
        }
        Value::List(_) | Value::Map(_) => {
            return Err(format!(
                "cannot output a {} (iterate it with `for`, or pick an element)",
                v.type_name()
            ));
        }
    }
    Ok(())
}

/// Writes a scalar's output into `buf` (used to fold constants into static text at compile
/// time); lists and maps write nothing.
pub(crate) fn write_scalar(v: &Value, escape: bool, buf: &mut Vec<u8>) {
    match v {
        Value::Nil | Value::List(_) | Value::Map(_) => {}
        Value::Bool(b) => buf.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(i) => {
            let mut tmp = [0u8; 20];
            buf.extend_from_slice(format_int(*i, &mut tmp));
        }
        Value::Float(x) => buf.extend_from_slice(format!("{x:?}").as_bytes()),
        Value::Str(s) if escape => {
            for &b in s.bytes().iter() {
                match b {
                    b'&' => buf.extend_from_slice(b"&amp;"),
                    b'<' => buf.extend_from_slice(b"&lt;"),
                    b'>' => buf.extend_from_slice(b"&gt;"),
                    b'"' => buf.extend_from_slice(b"&quot;"),
                    b'\'' => buf.extend_from_slice(b"&#39;"),
                    b => buf.push(b),
                }
            }
        }
        Value::Str(s) => buf.extend_from_slice(s.bytes()),
        Value::Safe(html) => {
            for seg in html.segments() {
                buf.extend_from_slice(seg);
            }
        }
    }
}

/// Decimal digits of `i`, written into the end of `buf` (20 bytes hold `i64::MIN`).
#[inline(always)]
fn format_int(i: i64, buf: &mut [u8; 20]) -> &[u8] {
    let neg = i < 0;
    let mut n = i.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if neg {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_int_edges() {
        let mut b = [0u8; 20];
        for i in [0, 7, -7, 10, 1234567890, i64::MAX, i64::MIN] {
            assert_eq!(format_int(i, &mut b), i.to_string().as_bytes());
        }
    }

    #[test]
    fn range_loop_reaches_i64_max_without_overflow() {
        let mut l = Loop::Range {
            next: i64::MAX - 1,
            last: i64::MAX,
            index: 0,
            done: false,
        };
        let bind = Bind {
            item: Some(0),
            index: Some(1),
        };
        let mut locals = vec![Value::Nil, Value::Nil];
        assert!(l.advance(bind, &mut locals));
        assert_eq!(locals, [Value::Int(i64::MAX - 1), Value::Int(0)]);
        assert!(l.advance(bind, &mut locals));
        assert_eq!(locals, [Value::Int(i64::MAX), Value::Int(1)]);
        assert!(!l.advance(bind, &mut locals));
    }
}
