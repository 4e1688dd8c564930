//! Whole iterations of a plain loop over elements read in place from its list, run back to
//! back while nothing can interrupt them: the checks that `vm/plain.rs` makes between the
//! instructions of an iteration are made once per iteration here, from bounds on what an
//! iteration can write and charge ([`run`]: a small function of its own, so that the buffer
//! position and the element stay in registers across the steps). Entered from a loop's
//! `ForInit` over an assign's list ([`run_assign`]: no loop state is made for a loop that runs
//! to its end), from `plain::run` for a loop already under way ([`first`]), and from a whole
//! render without frames (`vm/straight.rs`, its assigns borrowed: [`Slot`]).

use super::{Exit, NARROW, code_at, decide, general};
use crate::error::Error;
use crate::program::{Bind, Instr, Kind, Op, Piece, PlainBody, Program, SLOT, Src, Step};
use crate::value::Value;
use crate::vm::frame::{FieldKey, Frame, Loop, Slot, lookup_in, set_int};
use crate::vm::out::{MAX_INT_LEN, Out, clean, copy_into, escaped_len, write_escaped, write_int};

/// The plain loop whose bottom instruction is at `at`, from its `ForInit` (its step charged,
/// its text output, the frame's program counter at the body), when it iterates the list in
/// assign `assign` and its body runs whole iterations (see [`first`]): run from the
/// list where the frame holds it, so that a loop that runs to its end makes no loop state (no
/// reference count on the list). A loop that stops before its end gets its state then and goes
/// on as [`super::run`] would. `None` when the loop is not of this kind (nothing was done): the
/// `ForInit` then runs as usual.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(in crate::vm) fn run_assign(
    out: &mut Out<'_>,
    frame: &mut Frame,
    prog: &Program,
    at: usize,
    bind: Bind,
    assign: usize,
    steps: &mut u64,
    pause_at: usize,
) -> Option<Result<Exit, Error>> {
    let (body, plain) = plain_loop(prog, at)?;
    let Frame {
        locals,
        assigns,
        loops,
        pc,
        ..
    } = &mut *frame;
    let Some(Some(Value::List(items))) = assigns.get(assign) else {
        return None;
    };
    let ops = prog.ops.get(body..at)?;
    if body != *pc || !whole_body_fits(plain, ops, out.copy_below()) {
        return None;
    }
    let whole_body = Body::new(plain, ops, assigns, bind.index, out.value_copy_below());
    let base = out.list.len();
    let (buf, pos) = out.cursor();
    let limit = (buf.len().saturating_sub(SLOT)).min(pause_at.saturating_sub(base + 1));
    let mut to = At {
        k: 0,
        pos,
        left: *steps,
    };
    run(&whole_body, items, locals, buf, limit, &mut to);
    out.set_pos(to.pos);
    *steps = to.left;
    if to.k >= items.len() {
        *pc = at + 1;
        return Some(Ok(Exit::Go));
    }
    loops.push(Loop::Items {
        items: items.clone(),
        next: to.k,
    });
    Some(general(out, frame, prog, at, bind, steps, pause_at))
}

/// The plain loop whose bottom instruction is at `at`: where its body starts, and the body as
/// the compiler decoded it; `None` for any other instruction.
#[inline(always)]
fn plain_loop(prog: &Program, at: usize) -> Option<(usize, &PlainBody)> {
    match prog.ops.get(at) {
        Some(Instr {
            op:
                Op::ForNext {
                    body,
                    plain: Some(plain),
                    ..
                },
            ..
        }) => Some((*body, plain)),
        _ => None,
    }
}

/// True when a plain body (`ops`, decoded as `plain`) runs in whole iterations: its jumps go
/// forward, its texts are all copied as padded pieces, it is not a batch of outputs alone (those
/// run in [`general`]), and it reads its element in place.
#[inline(always)]
fn whole_body_fits(plain: &PlainBody, ops: &[Instr], copy_below: usize) -> bool {
    let texts_copied = plain.longest <= SLOT && (plain.longest == 0 || plain.longest < copy_below);
    let batch = plain.outputs_only && plain.longest <= NARROW;
    plain.forward && texts_copied && !batch && !plain.binds_item && ops.len() == plain.steps.len()
}

/// Whole iterations (`plain/whole.rs`) of a loop over a list's elements whose body can go
/// without checks and is not a batch of outputs alone (those run in [`general`]): as many as
/// can run from the loop's next element. True when they ran to the end: the loop is then done
/// (popped, the program counter past its bottom); otherwise [`general`] goes on from the
/// element they stopped at.
#[inline(always)]
pub(super) fn first(
    out: &mut Out<'_>,
    frame: &mut Frame,
    prog: &Program,
    at: usize,
    bind: Bind,
    steps: &mut u64,
    pause_at: usize,
) -> bool {
    let Some((body, plain)) = plain_loop(prog, at) else {
        return false;
    };
    let Frame {
        locals,
        assigns,
        loops,
        pc,
        ..
    } = frame;
    let Some(Loop::Items { items, next }) = loops.last_mut() else {
        return false;
    };
    let Some(ops) = prog.ops.get(body..at) else {
        return false;
    };
    if !whole_body_fits(plain, ops, out.copy_below()) {
        return false;
    }
    let whole_body = Body::new(plain, ops, assigns, bind.index, out.value_copy_below());
    let base = out.list.len();
    let (buf, pos) = out.cursor();
    let limit = (buf.len().saturating_sub(SLOT)).min(pause_at.saturating_sub(base + 1));
    let mut to = At {
        k: *next,
        pos,
        left: *steps,
    };
    run(&whole_body, items, locals, buf, limit, &mut to);
    out.set_pos(to.pos);
    (*next, *steps) = (to.k, to.left);
    if to.k < items.len() {
        return false;
    }
    loops.pop();
    *pc = at + 1;
    true
}

/// A plain loop's body as a run of whole iterations reads it.
pub(in crate::vm) struct Body<'a, S> {
    pub(super) steps: &'a [Step],
    /// The text of the loop's bottom instruction.
    pub(super) bottom: &'a Piece,
    /// The body's instructions (for the code of paths and conditions other than the element's).
    pub(super) ops: &'a [Instr],
    pub(super) assigns: &'a [S],
    /// The slot of the element's index, if the loop binds one.
    pub(super) index: Option<usize>,
    /// Most bytes an iteration writes, strings longer than an integer aside.
    pub(in crate::vm) iter_max: usize,
    /// Strings at least this long are referenced: not written here.
    pub(super) value_copy_below: usize,
}

impl<'a, S: Slot> Body<'a, S> {
    /// The body of a plain loop whose instructions are `ops`, reading `assigns`.
    #[inline(always)]
    pub(in crate::vm) fn new(
        plain: &'a PlainBody,
        ops: &'a [Instr],
        assigns: &'a [S],
        index: Option<usize>,
        value_copy_below: usize,
    ) -> Body<'a, S> {
        Body {
            steps: &plain.steps,
            bottom: &plain.bottom,
            ops,
            assigns,
            index,
            iter_max: plain.text_bytes + plain.outputs * MAX_INT_LEN,
            value_copy_below,
        }
    }
}

/// Where a run stands: the next element, the buffer position, the steps left.
#[derive(Clone, Copy)]
pub(in crate::vm) struct At {
    pub(in crate::vm) k: usize,
    pub(in crate::vm) pos: usize,
    pub(in crate::vm) left: u64,
}

/// Runs whole iterations of `body` over `items` from `at.k`, writing into `buf` up to `limit`
/// (at most its length less [`SLOT`], and below the pause point, so that no iteration can fill
/// the buffer or pause), each only with the steps for its every instruction left. An iteration
/// that meets an element, a value or a condition it does not write itself (a long or unclean
/// string, a path that does not resolve) stops the run before it is committed: the caller
/// goes on with it one instruction at a time. Its index may have been bound already, which the
/// caller's advance binds again.
#[inline(never)]
pub(in crate::vm) fn run<S: Slot>(
    body: &Body<'_, S>,
    items: &[Value],
    locals: &mut [Value],
    buf: &mut [u8],
    limit: usize,
    at: &mut At,
) {
    let per_iter = body.steps.len() as u64 + 1;
    let At {
        mut k,
        mut pos,
        mut left,
    } = *at;
    'items: while let Some(item) = items.get(k) {
        if left < per_iter || limit.saturating_sub(pos) < body.iter_max {
            break;
        }
        if let Some(slot) = body.index.and_then(|s| locals.get_mut(s)) {
            set_int(slot, k as i64);
        }
        let locals: &[Value] = locals;
        // Bytes strings longer than an integer may take beyond `iter_max`.
        let mut slack = limit - pos - body.iter_max;
        let mut w = pos;
        let mut charged = 1;
        let mut j = 0;
        while let Some(st) = body.steps.get(j) {
            let mut next = j + 1;
            match st.kind {
                Kind::Output { escape } => {
                    let v = match &st.src {
                        Src::Item => Some(item),
                        Src::Field(name) => match item {
                            Value::Map(m) => FieldKey::decoded(name).get(m),
                            _ => None,
                        },
                        Src::Path => {
                            code_at(body.ops, j).and_then(|c| lookup_in(locals, body.assigns, c))
                        }
                    };
                    match v {
                        Some(Value::Int(i)) => {
                            put(buf, &mut w, &st.text);
                            w += write_int(&mut buf[w..w + MAX_INT_LEN], *i);
                        }
                        Some(Value::Str(s))
                            if s.len() < body.value_copy_below
                                && s.len().saturating_sub(MAX_INT_LEN) <= slack
                                && (!escape || clean(s.bytes())) =>
                        {
                            let n = s.len();
                            slack -= n.saturating_sub(MAX_INT_LEN);
                            put(buf, &mut w, &st.text);
                            copy_into(&mut buf[w..w + n], s.bytes());
                            w += n;
                        }
                        // A short string with bytes to escape (a name with an apostrophe):
                        // escaped here, as `Out::escaped` escapes it, when its entities fit.
                        Some(Value::Str(s)) if escape && s.len() < body.value_copy_below => {
                            match put_escaped(buf, w, &st.text, s.bytes(), slack) {
                                Some((to, used)) => {
                                    w = to;
                                    slack -= used;
                                }
                                None => break 'items,
                            }
                        }
                        // Nil outputs nothing, as `emit` writes it.
                        Some(Value::Nil) => put(buf, &mut w, &st.text),
                        _ => break 'items,
                    }
                }
                Kind::Branch {
                    test,
                    jump_when,
                    target,
                } => {
                    let Some(truthy) = decide(test, locals, body.assigns, body.ops, j) else {
                        break 'items;
                    };
                    put(buf, &mut w, &st.text);
                    if truthy == jump_when {
                        next = target;
                    }
                }
                Kind::Text => put(buf, &mut w, &st.text),
                Kind::Jump(target) => {
                    put(buf, &mut w, &st.text);
                    next = target;
                }
            }
            charged += 1;
            j = next;
        }
        put(buf, &mut w, body.bottom);
        pos = w;
        left -= charged;
        k += 1;
    }
    *at = At { k, pos, left };
}

/// Step text `p` and then `s` HTML-escaped, at `w`, when the entities take no more than
/// `slack` bytes beyond an integer's room: the new position and the slack used. Out of line:
/// rare, and kept out of the registers of the common outputs.
#[cold]
#[inline(never)]
fn put_escaped(
    buf: &mut [u8],
    mut w: usize,
    p: &Piece,
    s: &[u8],
    slack: usize,
) -> Option<(usize, usize)> {
    let n = escaped_len(s);
    let used = n.saturating_sub(MAX_INT_LEN);
    if used > slack {
        return None;
    }
    put(buf, &mut w, p);
    write_escaped(&mut buf[w..w + n], s);
    Some((w + n, used))
}

/// A piece's text as its one padded copy (the run leaves [`SLOT`] bytes of room past `limit`).
#[inline(always)]
fn put(buf: &mut [u8], w: &mut usize, p: &Piece) {
    buf[*w..*w + SLOT].copy_from_slice(&p.bytes);
    *w += p.len;
}
