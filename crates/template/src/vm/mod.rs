//! Renderer: runs a [`Program`]'s ops against assigns, appending to an [`IoList`]. It can stop
//! after any op once the output has reached a size and resume later from where it stopped, which
//! is what streaming is: the whole state is a stack of frames (program counter, loop positions,
//! variables), never the output.

mod append;
mod block;
mod eval;
mod frame;
mod higher;
mod out;
mod pattern;
mod plain;
mod replace;
mod straight;

use std::sync::Arc;

use galleon_iolist::IoList;
use smallvec::{SmallVec, smallvec};

use crate::ast::Span;
use crate::budget;
use crate::error::{Error, ErrorKind};
use crate::ops::describe;
use crate::program::{
    Catalog, Code, CodeKind, Config, Generator, Instr, Mark, Op, Program, Repeat,
};
use crate::value::Value;
use eval::{Eval, step_limit};
pub(crate) use frame::Slot;
use frame::{Frame, Loop, fast_cond, lookup};
use out::{FLUSH_AT, Out, emit};
pub(crate) use straight::render as render_straight;

/// Bytes the first buffer gets beyond the size asked for (the last render's, or a chunk's).
/// A plain loop writes an iteration without checks only with room for the most it can write
/// (its texts, 20 bytes an output, and a 32-byte padded copy): a buffer sized to the page
/// exactly would send the last iterations of a loop near its end the careful way, or make it
/// grow. A guess covering a body of several outputs.
const FIRST_BUF_SLACK: usize = 256;

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
    /// Bytes of values left to build before the render fails with a limit error (counted in
    /// `budget`'s thread-local while [`Vm::run`] runs).
    pub(crate) memory: u64,
    /// Partial nesting outside this VM (for renders started inside an expression).
    depth_base: usize,
    /// The small-copy buffer, kept between chunks for its capacity.
    buf: Vec<u8>,
    /// Capacity the small-copy buffer gets at its first copy.
    first_buf: usize,
    /// A live render's record of its marks (`None`: marks are passed over).
    live: Option<Box<LiveRec>>,
}

/// What a live render records: its marks, where its own frame ran them (partials' are theirs).
#[derive(Debug, Default)]
pub(crate) struct LiveRec {
    /// Which of the program's assigns changed since the render the client has, by index;
    /// `None`: a whole render, nothing skipped.
    pub(crate) changed: Option<Vec<bool>>,
    /// Each mark with the output's length in bytes there.
    pub(crate) marks: Vec<(Recorded, usize)>,
}

/// A mark as the render met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// A dynamic starts.
    Dyn,
    /// A dynamic whose assigns did not change: skipped, no `End` follows.
    Unchanged,
    /// A block, by number, starts.
    Block(u32),
    /// A comprehension, by body block number, starts.
    Comp(u32),
    /// A row starts.
    Row,
    /// The innermost open dynamic, block, comprehension or row ends.
    End,
}

impl<'c> Vm<'c> {
    /// A render of program `index` with the assigns `assign` gives, not yet started.
    pub(crate) fn new(
        catalog: Programs<'c>,
        config: Config,
        index: usize,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Vm<'c> {
        let mut vm = Vm {
            steps: config.limits.max_steps,
            memory: config.limits.max_memory as u64,
            catalog,
            config,
            frames: smallvec![Frame::empty(index)],
            depth_base: 0,
            buf: Vec::new(),
            first_buf: 64,
            live: None,
        };
        // Filled where it lies in the VM: vectors filled aside and moved in are copied whole.
        let prog = &vm.catalog.programs[index];
        if let Some(frame) = vm.frames.first_mut() {
            frame.fill(prog, assign);
        }
        vm
    }

    /// A whole render of program `index` into `out`, as [`Vm::new`], [`Vm::reserve`] and
    /// [`Vm::run`] would run it, with the VM built where it runs: returned from `new`, its
    /// ~500 bytes would be copied into the caller's. True when it ended within `pause_at`.
    pub(crate) fn whole(
        catalog: &'c Catalog,
        config: Config,
        index: usize,
        assign: impl Fn(&str) -> Option<Value>,
        bytes: usize,
        out: &mut IoList,
        pause_at: usize,
    ) -> Result<bool, Error> {
        Self::whole_then(catalog, config, index, assign, bytes, out, pause_at, drop)
            .map(|paused| paused.is_none())
    }

    /// [`Vm::whole`] for a render that may go on as a stream: `None` when it ended within
    /// `pause_at`, else the VM, now owning the catalog, to continue from where it paused. Built
    /// where it runs, the VM is moved only in that rarer case.
    pub(crate) fn whole_or_rest(
        catalog: &'c Arc<Catalog>,
        config: Config,
        index: usize,
        assign: impl Fn(&str) -> Option<Value>,
        bytes: usize,
        out: &mut IoList,
        pause_at: usize,
    ) -> Result<Option<Vm<'static>>, Error> {
        Self::whole_then(catalog, config, index, assign, bytes, out, pause_at, |vm| {
            vm.into_owned(Arc::clone(catalog))
        })
    }

    /// The whole render of [`Vm::whole`]; a VM that paused is handed to `paused`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn whole_then<R>(
        catalog: &'c Catalog,
        config: Config,
        index: usize,
        assign: impl Fn(&str) -> Option<Value>,
        bytes: usize,
        out: &mut IoList,
        pause_at: usize,
        paused: impl FnOnce(Vm<'c>) -> R,
    ) -> Result<Option<R>, Error> {
        let mut vm = Vm {
            steps: config.limits.max_steps,
            memory: config.limits.max_memory as u64,
            catalog: Programs::Borrowed(catalog),
            config,
            frames: smallvec![Frame::empty(index)],
            depth_base: 0,
            buf: Vec::new(),
            first_buf: 64,
            live: None,
        };
        if let Some(frame) = vm.frames.first_mut() {
            frame.fill(&catalog.programs[index], assign);
        }
        vm.reserve(bytes);
        if vm.run(out, pause_at)? {
            return Ok(None);
        }
        Ok(Some(paused(vm)))
    }

    /// A whole live render of program `index` (compiled live) into `out`: the marks its own
    /// frame met, with the output's length at each.
    pub(crate) fn live(
        catalog: &'c Catalog,
        config: Config,
        index: usize,
        assign: impl Fn(&str) -> Option<Value>,
        changed: Option<Vec<bool>>,
        out: &mut IoList,
    ) -> Result<Vec<(Recorded, usize)>, Error> {
        let mut vm = Vm::new(Programs::Borrowed(catalog), config, index, assign);
        vm.live = Some(Box::new(LiveRec {
            changed,
            marks: Vec::new(),
        }));
        vm.run(out, usize::MAX)?;
        Ok(vm.live.map(|l| l.marks).unwrap_or_default())
    }

    /// The same render, now owning its catalog: how a whole render that outgrew its bound goes
    /// on as a stream from where it paused (frames own their values; only the catalog was
    /// borrowed).
    pub(crate) fn into_owned(self, catalog: Arc<Catalog>) -> Vm<'static> {
        Vm {
            catalog: Programs::Owned(catalog),
            config: self.config,
            frames: self.frames,
            steps: self.steps,
            memory: self.memory,
            depth_base: self.depth_base,
            buf: self.buf,
            first_buf: self.first_buf,
            live: self.live,
        }
    }

    /// Sizes the small-copy buffer for about `bytes` of output. The buffer is allocated at the
    /// first copy, not here: a render that copies nothing (a page of long static blocks)
    /// allocates none.
    pub(crate) fn reserve(&mut self, bytes: usize) {
        self.first_buf = bytes.saturating_add(FIRST_BUF_SLACK).clamp(64, FLUSH_AT);
    }

    /// Runs until done (`Ok(true)`) or until `out` holds at least `pause_at` bytes (`Ok(false)`:
    /// call again to resume).
    pub(crate) fn run(&mut self, out: &mut IoList, pause_at: usize) -> Result<bool, Error> {
        // The catalog held apart from `self` for the render (a stream's by one more reference),
        // so that the output can hold its programs' texts while the frames change.
        let owned;
        let catalog: &Catalog = match &self.catalog {
            Programs::Borrowed(c) => c,
            Programs::Owned(c) => {
                owned = Arc::clone(c);
                &owned
            }
        };
        let mut buf = std::mem::take(&mut self.buf);
        let mut o = Out::new(
            out,
            &mut buf,
            self.config.copy_below,
            self.config.value_copy_below,
            self.first_buf,
        );
        // Every static piece of a program is a slice of its text: pinned once (and once per
        // partial called), each piece is then an offset into the pin, with no reference-count
        // traffic on text that every worker thread rendering the template shares. Pinned at the
        // first reference: a page of copies only pins nothing.
        for frame in &self.frames {
            o.pin_later(&catalog.programs[frame.prog].text);
        }
        let scope = budget::Scope::enter(self.memory);
        let result = self.run_in(catalog, &mut o, pause_at);
        self.memory = scope.left();
        drop(scope);
        o.finish();
        drop(o);
        self.buf = buf;
        result
    }

    fn run_in<'o>(
        &mut self,
        catalog: &'o Catalog,
        out: &mut Out<'o>,
        pause_at: usize,
    ) -> Result<bool, Error> {
        // One frame at a time: the inner loop runs its instructions until it calls a partial,
        // returns, pauses or fails.
        // An expression evaluator over a frame (the same seven arguments at every use).
        macro_rules! eval {
            ($prog:expr, $frame:expr, $depth:expr) => {
                Eval::new(
                    render_partial,
                    catalog,
                    &self.config,
                    $prog,
                    $frame,
                    &mut self.steps,
                    $depth,
                )
            };
        }
        'frames: loop {
            let depth = self.depth_base + self.frames.len();
            // Marks count in the live render's own frame only (a partial's are its own).
            let own = self.frames.len() == 1;
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
                            // An integer is written here, without the call.
                            Some(Value::Int(i)) => {
                                out.int(*i);
                                Ok(())
                            }
                            Some(v) => emit(out, v, *escape),
                            None => {
                                let mut ev = eval!(prog, frame, depth);
                                let v = ev.eval(code)?;
                                emit(out, &v, *escape)
                            }
                        };
                        result.map_err(|m| prog.error(ErrorKind::TypeMismatch, code.span, m))?;
                    }
                    Op::Exec(code) => {
                        let mut ev = eval!(prog, frame, depth);
                        ev.eval(code)?;
                    }
                    Op::Branch {
                        cond,
                        jump_when,
                        target,
                    } => {
                        let truthy = match fast_cond(&frame.locals, &frame.assigns, cond) {
                            Some(t) => t,
                            None => {
                                let mut ev = eval!(prog, frame, depth);
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
                        // A plain loop over an assign's list: whole iterations over the list
                        // where the frame holds it, before any loop state is made.
                        if let Generator::Items(Code {
                            kind: CodeKind::Assign(a),
                            ..
                        }) = generator
                            && let Some(at) = exit.checked_sub(1)
                            && let Some(exit) = plain::run_assign(
                                out,
                                frame,
                                prog,
                                at,
                                *bind,
                                *a,
                                &mut self.steps,
                                pause_at,
                            )
                        {
                            match exit? {
                                plain::Exit::Go => {}
                                plain::Exit::Pause => return Ok(false),
                            }
                            if out.len() >= pause_at {
                                return Ok(false);
                            }
                            continue;
                        }
                        let mut ev = eval!(prog, frame, depth);
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
                        } else if let Some(Instr {
                            op:
                                Op::ForNext {
                                    plain: Some(_),
                                    body,
                                    ..
                                },
                            ..
                        }) = exit.checked_sub(1).and_then(|at| prog.ops.get(at))
                            && *body == frame.pc
                        {
                            // A plain loop runs from its first element in `vm/plain.rs`, which
                            // advances and checks the pause point as this op would have.
                            frame.loops.push(state);
                            let at = *exit - 1;
                            match plain::run(
                                out,
                                frame,
                                prog,
                                at,
                                *bind,
                                &mut self.steps,
                                pause_at,
                            )? {
                                plain::Exit::Go => {}
                                plain::Exit::Pause => return Ok(false),
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
                    Op::ForNext {
                        bind,
                        plain: Some(_),
                        ..
                    } => {
                        match plain::run(
                            out,
                            frame,
                            prog,
                            frame.pc - 1,
                            *bind,
                            &mut self.steps,
                            pause_at,
                        )? {
                            plain::Exit::Go => {}
                            plain::Exit::Pause => return Ok(false),
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
                    Op::Set { slot, code } => {
                        let mut ev = eval!(prog, frame, depth);
                        let v = ev.eval(code)?.into_owned();
                        if let Some(s) = frame.locals.get_mut(*slot) {
                            *s = v;
                        }
                    }
                    Op::Match {
                        pattern,
                        slot,
                        fail,
                        span,
                    } => {
                        let v = frame.locals.get(*slot).cloned().unwrap_or_default();
                        if !pattern::matches(pattern, &v, &mut frame.locals) {
                            match fail {
                                Some(target) => frame.pc = *target,
                                None => return Err(no_match(prog, &v, *span)),
                            }
                        }
                    }
                    Op::NoClause { slot, span, with } => {
                        let v = slot.and_then(|s| frame.locals.get(s));
                        return Err(no_clause(prog, v, *span, *with));
                    }
                    Op::Mark(m) => {
                        if let (true, Some(rec)) = (own, self.live.as_deref_mut()) {
                            live_mark(rec, m, out.len(), &mut frame.pc);
                        }
                    }
                    Op::Call {
                        partial,
                        args,
                        span,
                    } => {
                        let mut ev = eval!(prog, frame, depth);
                        let (target, args) = ev.call_args(*partial, args, *span)?;
                        let new =
                            Frame::new(&catalog.programs[target], target, |name| args.get(name));
                        out.pin_later(&catalog.programs[target].text);
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

/// Records mark `m` at output length `at`; a dynamic none of whose assigns changed is recorded
/// unchanged and jumped over.
fn live_mark(rec: &mut LiveRec, m: &Mark, at: usize, pc: &mut usize) {
    let r = match m {
        Mark::Dyn { reads, skip } => {
            if let (true, Some(changed)) = (*skip != usize::MAX, &rec.changed)
                && !reads
                    .iter()
                    .any(|&i| changed.get(i as usize).copied().unwrap_or(true))
            {
                *pc = *skip;
                Recorded::Unchanged
            } else {
                Recorded::Dyn
            }
        }
        Mark::Block(b) => Recorded::Block(*b),
        Mark::Comp(b) => Recorded::Comp(*b),
        Mark::Row => Recorded::Row,
        Mark::End => Recorded::End,
    };
    rec.marks.push((r, at));
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

/// The error of a `pattern = value` that did not match. Out of line: the VM's loop stays small.
#[cold]
#[inline(never)]
fn no_match(prog: &Program, v: &Value, span: Span) -> Error {
    prog.error(
        ErrorKind::TypeMismatch,
        span,
        format!("no match of right hand side value: {}", describe(v)),
    )
}

/// The error of a `case` (`v` is its subject; `with`: a `with`'s `else`) or `cond` (`None`)
/// none of whose clauses applied.
#[cold]
#[inline(never)]
fn no_clause(prog: &Program, v: Option<&Value>, span: Span, with: bool) -> Error {
    let message = match v {
        Some(v) if with => format!("no `with` clause matches {}", describe(v)),
        Some(v) => format!("no `case` clause matches {}", describe(v)),
        None => "no `cond` clause is truthy".to_owned(),
    };
    prog.error(ErrorKind::TypeMismatch, span, message)
}

/// A span to blame for an op that has none of its own.
fn op_span(op: &Op) -> Span {
    match op {
        Op::Output { code, .. }
        | Op::Exec(code)
        | Op::Branch { cond: code, .. }
        | Op::Set { code, .. } => code.span,
        Op::Match { span, .. } | Op::NoClause { span, .. } => *span,
        Op::ForInit {
            generator: Generator::Items(c) | Generator::Range(c, _, _),
            ..
        } => c.span,
        Op::Call { span, .. } => *span,
        Op::Text | Op::Jump(_) | Op::ForNext { .. } | Op::Mark(_) => Span::default(),
    }
}

/// [`RenderPartial`] for expressions: a partial rendered by a VM of its own.
#[allow(clippy::too_many_arguments)]
fn render_partial(
    catalog: &Catalog,
    config: &Config,
    frame: Frame,
    steps: &mut u64,
    depth: usize,
    out: &mut IoList,
    pause_at: usize,
) -> Result<bool, Error> {
    let mut vm = Vm {
        catalog: Programs::Borrowed(catalog),
        config: *config,
        frames: smallvec![frame],
        steps: *steps,
        memory: budget::left(),
        depth_base: depth,
        buf: Vec::new(),
        first_buf: 64,
        live: None,
    };
    let done = vm.run(out, pause_at);
    *steps = vm.steps;
    budget::set_left(vm.memory);
    done
}
