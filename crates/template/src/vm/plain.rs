//! Loops whose body is plain output (`<td><%= col %></td>`: static text and paths, branches and
//! jumps within the body) run here as a native loop over their steps, decoded when compiling
//! ([`PlainBody`]): no dispatch, the step budget and the loop's variables in registers. Every
//! instruction is still charged its step and followed by the pause check, in the same order as
//! one at a time, so output, step accounting and pause points are those of the general loop in
//! `vm/mod.rs`.

use bytes::Bytes;

use super::frame::{FieldKey, Frame, Loop, Slot, fast_cond, int_cmp, lookup_in, set_int};
use super::out::{MAX_INT_LEN, Out, clean, copy_into, emit, write_int};
use crate::error::{Error, ErrorKind};
use crate::list::List;
use crate::program::{Bind, Code, Instr, Kind, NARROW, Op, Piece, Program, SLOT, Src, Step, Test};
use crate::value::Value;

mod whole;

pub(super) use whole::{At, Body, run as run_whole, run_assign};

/// How [`run`] left the loop.
pub(super) enum Exit {
    /// Go on at the frame's program counter: the loop is done, or the next instruction needs
    /// the general loop (out of steps, a path that does not resolve).
    Go,
    /// The output reached the pause point; resume at the frame's program counter.
    Pause,
}

/// Runs the rest of the plain loop whose bottom instruction is at `at`, from its next advance:
/// called by the bottom once executed up to its advance (step charged, text output), or by the
/// loop's `ForInit` once it pushed the loop's state. Advances, then runs the body and the
/// bottom for each further element, until the loop ends, the output reaches `pause_at`, or an
/// instruction needs the general loop.
#[inline(never)]
pub(super) fn run(
    out: &mut Out<'_>,
    frame: &mut Frame,
    prog: &Program,
    at: usize,
    bind: Bind,
    steps: &mut u64,
    pause_at: usize,
) -> Result<Exit, Error> {
    if whole::first(out, frame, prog, at, bind, steps, pause_at) {
        return Ok(Exit::Go);
    }
    general(out, frame, prog, at, bind, steps, pause_at)
}

/// [`run`] one instruction at a time, or in batches of whole iterations of outputs alone.
#[inline(never)]
fn general(
    out: &mut Out<'_>,
    frame: &mut Frame,
    prog: &Program,
    at: usize,
    bind: Bind,
    steps: &mut u64,
    pause_at: usize,
) -> Result<Exit, Error> {
    let Some(Instr {
        op: Op::ForNext {
            body,
            plain: Some(plain),
            ..
        },
        text: bottom,
    }) = prog.ops.get(at)
    else {
        return Ok(Exit::Go);
    };
    let body = *body;
    let mut left = *steps;
    let Frame {
        locals,
        assigns,
        loops,
        pc,
        ..
    } = frame;
    let locals: &mut [Value] = locals;
    let assigns: &[Option<Value>] = assigns;
    let Some(state) = loops.last_mut() else {
        *pc = at + 1;
        return Ok(Exit::Go);
    };
    let decoded: &[Step] = &plain.steps;
    let Some(ops) = prog.ops.get(body..at).filter(|o| o.len() == decoded.len()) else {
        // Not the body it was decoded from (cannot happen): one ordinary advance.
        if state.advance(bind, locals) {
            *pc = body;
        } else {
            loops.pop();
            *pc = at + 1;
        }
        return Ok(Exit::Go);
    };
    // The element read in place from the loop's list, unless some path needs it bound.
    let by_ref = !plain.binds_item && matches!(state, Loop::Items { .. });
    let copy_below = out.copy_below();
    let value_copy_below = out.value_copy_below();
    // Every text copied (as `Out::text` copies those under `copy_below`) as one padded piece.
    let texts_copied = plain.longest <= SLOT && (plain.longest == 0 || plain.longest < copy_below);
    // An iteration writes at most this many bytes, besides strings longer than an integer.
    let iter_max = plain.text_bytes + plain.outputs * MAX_INT_LEN;
    let n_steps = decoded.len() as u64;
    // Iterations that run each instruction at most once may go without checks between them
    // (see `fast` below); a body of outputs alone, with short text, in whole batches.
    let fast = plain.forward && texts_copied;
    let batch = fast && plain.outputs_only && plain.longest <= NARROW;
    let bottom_piece: &Piece = &plain.bottom;
    let mut elems = match state {
        Loop::Items { items, next } if by_ref => Elems::Ref {
            k: *next,
            items,
            next,
        },
        state => Elems::Bound(state),
    };
    // The buffer, the position in it and the pause point in registers: short text and integers
    // are written here; anything else goes through `out` (the position handed back first, the
    // cursor taken again after).
    let mut base = out.list.len();
    let (mut buf, mut pos) = out.cursor();
    macro_rules! through_out {
        ($e:expr) => {{
            out.set_pos(pos);
            let r = $e;
            base = out.list.len();
            (buf, pos) = out.cursor();
            r
        }};
    }
    macro_rules! text {
        ($t:expr) => {{
            let t: &Bytes = $t;
            let n = t.len();
            if n < copy_below && n <= buf.len() - pos {
                copy_into(&mut buf[pos..pos + n], t);
                pos += n;
            } else if n > 0 {
                through_out!(out.text(t));
            }
        }};
    }
    // A text of up to `SLOT` bytes as its one fixed-size copy when there is room for it.
    macro_rules! piece_text {
        ($p:expr, $t:expr) => {{
            let p: &Piece = $p;
            if p.len < copy_below && SLOT <= buf.len() - pos {
                buf[pos..pos + SLOT].copy_from_slice(&p.bytes);
                pos += p.len;
            } else {
                text!($t)
            }
        }};
    }
    // A piece known to be copied with room for it: padded (`SLOT` bytes of room) or exact.
    macro_rules! put {
        ($p:expr, $pad:expr) => {{
            let p: &Piece = $p;
            if $pad {
                buf[pos..pos + SLOT].copy_from_slice(&p.bytes);
            } else {
                copy_into(&mut buf[pos..pos + p.len], &p.bytes[..p.len]);
            }
            pos += p.len;
        }};
    }
    // The value of step `$j`'s output for element `$item`.
    macro_rules! value {
        ($st:expr, $j:expr, $item:expr) => {{
            let st: &Step = $st;
            match &st.src {
                Src::Item if by_ref => Some($item),
                Src::Field(name) if by_ref => match $item {
                    Value::Map(m) => FieldKey::decoded(name).get(m),
                    _ => None,
                },
                _ => code_at(ops, $j).and_then(|code| lookup_in(locals, assigns, code)),
            }
        }};
    }
    // One iteration's steps from the first, without checks between them: the caller made sure
    // of the steps for all of them and the room (and distance to the pause point) for
    // `iter_max` bytes and `$slack` more, which only strings longer than an integer take.
    // Stops at the bottom (`j` the body's length) or before the first step that needs more
    // (`j` that step, not charged, nothing of it written).
    macro_rules! fast_iteration {
        ($item:expr, $slack:expr, $pad:expr) => {{
            let mut slack: usize = $slack;
            let mut j = 0;
            while let Some(st) = decoded.get(j) {
                let mut next = j + 1;
                match st.kind {
                    Kind::Output { escape } => match value!(st, j, $item) {
                        Some(Value::Int(i)) => {
                            put!(&st.text, $pad);
                            pos += write_int(&mut buf[pos..pos + MAX_INT_LEN], *i);
                        }
                        Some(Value::Str(s))
                            if s.len() < value_copy_below
                                && s.len().saturating_sub(MAX_INT_LEN) <= slack
                                && (!escape || clean(s.bytes())) =>
                        {
                            let n = s.len();
                            slack -= n.saturating_sub(MAX_INT_LEN);
                            put!(&st.text, $pad);
                            copy_into(&mut buf[pos..pos + n], s.bytes());
                            pos += n;
                        }
                        _ => break,
                    },
                    Kind::Branch {
                        test,
                        jump_when,
                        target,
                    } => {
                        let Some(truthy) = decide(test, locals, assigns, ops, j) else {
                            break;
                        };
                        put!(&st.text, $pad);
                        if truthy == jump_when {
                            next = target;
                        }
                    }
                    Kind::Text => put!(&st.text, $pad),
                    Kind::Jump(target) => {
                        put!(&st.text, $pad);
                        next = target;
                    }
                }
                left -= 1;
                j = next;
            }
            if j >= decoded.len() {
                put!(bottom_piece, $pad);
                left -= 1;
            }
            j
        }};
    }
    let mut done = false;
    let result = 'iter: loop {
        // Whole iterations at once while nothing can interrupt them: as many as the steps,
        // the buffer's room and the distance to the pause point allow, each of integers and
        // short text only (the first that is not stops the run, uncommitted, and goes the
        // careful way below).
        if let (true, Elems::Ref { items, k, .. }) = (batch, &mut elems) {
            let items: &[Value] = items;
            let per_iter = n_steps + 1;
            let room = (buf.len() - pos)
                .saturating_sub(NARROW)
                .min(pause_at.saturating_sub(base + pos + 1));
            let n = (left / per_iter)
                .min((room / iter_max) as u64)
                .min(items.len().saturating_sub(*k) as u64);
            let mut ran = 0;
            if let [st] = decoded
                && bind.index.is_none()
                && !matches!(st.src, Src::Path)
            {
                // One output of the element itself (`<td><%= x %></td>`): the same run with
                // the step's decoding hoisted out of the loop.
                let key = match &st.src {
                    Src::Field(name) => Some(FieldKey::decoded(name)),
                    _ => None,
                };
                let mut text = [0; NARROW];
                text.copy_from_slice(&st.text.bytes[..NARROW]);
                let mut tail = [0; NARROW];
                tail.copy_from_slice(&bottom_piece.bytes[..NARROW]);
                let (text_len, tail_len) = (st.text.len, bottom_piece.len);
                let n = n as usize;
                let from = *k;
                for item in items.iter().skip(from).take(n) {
                    let found = match (key, item) {
                        (None, item) => Some(item),
                        (Some(key), Value::Map(m)) => key.get(m),
                        _ => None,
                    };
                    let Some(Value::Int(i)) = found else {
                        break;
                    };
                    buf[pos..pos + NARROW].copy_from_slice(&text);
                    let at = pos + text_len;
                    let at = at + write_int(&mut buf[at..at + MAX_INT_LEN], *i);
                    buf[at..at + NARROW].copy_from_slice(&tail);
                    pos = at + tail_len;
                    ran += 1;
                }
                *k = from + ran as usize;
            }
            'run: while ran < n {
                let item = &items[*k];
                if let Some(slot) = bind.index.and_then(|s| locals.get_mut(s)) {
                    set_int(slot, *k as i64);
                }
                let mut at = pos;
                for (j, st) in decoded.iter().enumerate() {
                    let Some(Value::Int(i)) = value!(st, j, item) else {
                        break 'run;
                    };
                    buf[at..at + NARROW].copy_from_slice(&st.text.bytes[..NARROW]);
                    at += st.text.len;
                    at += write_int(&mut buf[at..at + MAX_INT_LEN], *i);
                }
                buf[at..at + NARROW].copy_from_slice(&bottom_piece.bytes[..NARROW]);
                pos = at + bottom_piece.len;
                *k += 1;
                ran += 1;
            }
            left -= ran * per_iter;
        }
        // The loop's advance: the next element, bound to its variable or held by reference.
        let item: &Value = match &mut elems {
            Elems::Ref { items, k, .. } => {
                let items: &[Value] = items;
                let Some(v) = items.get(*k) else {
                    done = true;
                    *pc = at + 1;
                    break 'iter Ok(Exit::Go);
                };
                if let Some(slot) = bind.index.and_then(|s| locals.get_mut(s)) {
                    set_int(slot, *k as i64);
                }
                *k += 1;
                v
            }
            Elems::Bound(state) => {
                if !state.advance(bind, locals) {
                    done = true;
                    *pc = at + 1;
                    break 'iter Ok(Exit::Go);
                }
                &Value::Nil
            }
        };
        if base + pos >= pause_at {
            *pc = body;
            break 'iter Ok(Exit::Pause);
        }
        let mut j = 0;
        if fast && left > n_steps {
            // Steps for the whole iteration: no step can run out. With room for `iter_max`
            // bytes before the buffer's end and the pause point, none can fill the buffer or
            // reach the pause point either: each instruction is written without checks, its
            // text as one padded copy when the buffer has `SLOT` bytes more.
            let room = buf.len() - pos;
            let to_pause = pause_at - (base + pos) - 1;
            if room >= iter_max + SLOT && to_pause >= iter_max {
                j = fast_iteration!(item, (room - SLOT).min(to_pause) - iter_max, true);
            } else if room >= iter_max && to_pause >= iter_max {
                j = fast_iteration!(item, room.min(to_pause) - iter_max, false);
            }
            if j >= decoded.len() {
                continue;
            }
        }
        while let Some(st) = decoded.get(j) {
            let mut next = j + 1;
            let ins = &ops[j];
            match st.kind {
                Kind::Output { escape } => {
                    // Before the step is charged: a path that does not resolve is left to the
                    // general loop, which reports it.
                    let Some(v) = value!(st, j, item) else {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    };
                    if left == 0 {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    }
                    left -= 1;
                    piece_text!(&st.text, &ins.text);
                    match v {
                        Value::Int(i) if MAX_INT_LEN <= buf.len() - pos => {
                            pos += write_int(&mut buf[pos..pos + MAX_INT_LEN], *i);
                        }
                        // A short string that escaping leaves as it is: copied, as `emit`
                        // would copy it.
                        Value::Str(s)
                            if s.len() < value_copy_below
                                && s.len() <= buf.len() - pos
                                && (!escape || clean(s.bytes())) =>
                        {
                            let n = s.len();
                            copy_into(&mut buf[pos..pos + n], s.bytes());
                            pos += n;
                        }
                        v => {
                            if let Err(m) = through_out!(emit(out, v, escape)) {
                                *pc = body + next;
                                let span = code_at(ops, j).map(|c| c.span).unwrap_or_default();
                                break 'iter Err(prog.error(ErrorKind::TypeMismatch, span, m));
                            }
                        }
                    }
                }
                Kind::Branch {
                    test,
                    jump_when,
                    target,
                } => {
                    // A condition `fast_cond` cannot decide is left to the general loop, which
                    // evaluates it (and charges its steps).
                    let Some(truthy) = decide(test, locals, assigns, ops, j) else {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    };
                    if left == 0 {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    }
                    left -= 1;
                    piece_text!(&st.text, &ins.text);
                    if truthy == jump_when {
                        next = target;
                    }
                }
                Kind::Text | Kind::Jump(_) => {
                    if left == 0 {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    }
                    left -= 1;
                    piece_text!(&st.text, &ins.text);
                    if let Kind::Jump(target) = st.kind {
                        next = target;
                    }
                }
            }
            if base + pos >= pause_at {
                *pc = body + next;
                break 'iter Ok(Exit::Pause);
            }
            j = next;
        }
        if left == 0 {
            *pc = at;
            break 'iter Ok(Exit::Go);
        }
        left -= 1;
        piece_text!(bottom_piece, bottom);
    };
    out.set_pos(pos);
    // Held by reference: the loop's position, and the element in its variable, as binding
    // each one would have left them (unless the loop is done: nothing reads the variable of a
    // loop after it, the compiler gives no other variable its slot).
    if let Elems::Ref { items, next, k } = elems {
        *next = k;
        if let (false, Some(slot), Some(v)) = (
            done,
            bind.item.and_then(|s| locals.get_mut(s)),
            k.checked_sub(1).and_then(|i| items.get(i)),
        ) {
            match v {
                Value::Int(i) => set_int(slot, *i),
                v => *slot = v.clone(),
            }
        }
    }
    if done {
        loops.pop();
    }
    *steps = left;
    result
}

/// The code of the body's instruction `j`: an output's value or a branch's condition.
#[inline(always)]
fn code_at(ops: &[Instr], j: usize) -> Option<&Code> {
    match &ops.get(j)?.op {
        Op::Output { code, .. } => Some(code),
        Op::Branch { cond, .. } => Some(cond),
        _ => None,
    }
}

/// A branch's condition decided without `eval`: `None` when `fast_cond` would give `None`.
#[inline(always)]
fn decide<S: Slot>(
    test: Test,
    locals: &[Value],
    assigns: &[S],
    ops: &[Instr],
    j: usize,
) -> Option<bool> {
    match test {
        Test::SlotInt { slot, op, k } => match locals.get(slot) {
            Some(Value::Int(x)) => int_cmp(op, *x, k),
            _ => None,
        },
        Test::Cond => fast_cond(locals, assigns, code_at(ops, j)?),
    }
}

/// The loop's elements: read in place from its list (the element's variable written only when
/// the loop stops here), or bound one by one by the loop's own advance.
enum Elems<'s> {
    Ref {
        items: &'s List,
        next: &'s mut usize,
        /// Position of the next element.
        k: usize,
    },
    Bound(&'s mut Loop),
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::program::NO_PLAIN;
    use crate::{Assigns, Engine, Limits, Value};

    /// The template compiled with plain loops run here (`plain`) or one instruction at a time.
    fn engine(
        source: &str,
        plain: bool,
        max_steps: u64,
        (copy_below, value_copy_below): (usize, usize),
    ) -> Engine {
        NO_PLAIN.with(|c| c.set(!plain));
        let e = Engine::from_source("t", source);
        NO_PLAIN.with(|c| c.set(false));
        e.unwrap()
            .with_limits(Limits {
                max_steps,
                ..Limits::default()
            })
            .with_copy_below(copy_below)
            .with_value_copy_below(value_copy_below)
    }

    /// Two renders' bytes or errors (the second with its buffer sized by the first, so that
    /// loops run into its end), and a stream's chunks and errors.
    type Outcome = ([Result<Vec<u8>, String>; 2], Vec<Result<Vec<u8>, String>>);

    fn outcome(e: &Engine, a: &Assigns, chunk: usize) -> Outcome {
        let whole = [(); 2].map(|()| {
            e.render("t", a)
                .map(|l| l.to_vec())
                .map_err(|e| e.to_string())
        });
        let chunks = e
            .stream("t", a.clone(), chunk)
            .unwrap()
            .map(|c| c.map(|l| l.to_vec()).map_err(|e| e.to_string()))
            .collect();
        (whole, chunks)
    }

    fn item(kind: u8, i: i64) -> Value {
        match (kind, i % 4) {
            (0, _) | (3, 0) => Value::Int(i * 37 - 50),
            (1, _) | (3, 1) => Value::from(match i % 4 {
                0 => "a&b<",
                1 => "plain",
                2 => "a clean string longer than an integer",
                _ => "a string longer than an integer & dirty",
            }),
            (2, _) | (3, 2) => Value::map([("name", Value::from("n")), ("n", Value::Int(i))]),
            _ => Value::map([("n", Value::Int(i))]),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn plain_loops_render_as_one_instruction_at_a_time(
            outputs in proptest::collection::vec(
                (r"[a-z<>/]{0,20}|[a-z]{30,40}", 0usize..6, 0u8..4, 0usize..4, r"[a-z<]{0,6}"),
                1..4,
            ),
            bottom in r"[a-z<>/]{0,20}|[a-z]{30,40}",
            generator in 0usize..3,
            kind in 0u8..4,
            n in 0i64..30,
            max_steps in prop_oneof![Just(1_000_000u64), 1u64..200],
            chunk in prop_oneof![1usize..100, 100usize..600],
            copy_below in prop_oneof![Just(256usize), Just(0), Just(6), Just(20)],
            value_copy_below in prop_oneof![Just(4096usize), Just(0), Just(6), Just(30)],
        ) {
            let (head, vars, conds) = match generator {
                0 => (
                    "x <- @items",
                    &["x", "x.n", "@n", "x.name"][..],
                    &["x", "@n > 3", "x.n == 2", "x == 5"][..],
                ),
                1 => ("x <- 1..@n", &["x", "@n", "x"][..], &["x == 1", "x > @n", "x != 3"][..]),
                _ => (
                    "{x, i} <- Enum.with_index(@items)",
                    &["x", "i", "x.n", "@n", "x.name"][..],
                    &["i == 0", "i > 2", "x.n <= i", "x"][..],
                ),
            };
            // Each piece: an output, or an `if` (with or without `else`) on a condition that
            // the plain loop decides itself or leaves to the general loop.
            let body: String = outputs
                .iter()
                .map(|(text, v, shape, c, other)| {
                    let (v, c) = (vars[v % vars.len()], conds[c % conds.len()]);
                    match shape {
                        0 | 1 => format!("{text}<%= {v} %>"),
                        2 => format!("{text}<%= if {c} do %>{other}<% end %>"),
                        _ => format!("{text}<%= if {c} do %><%= {v} %><% else %>{other}<% end %>"),
                    }
                })
                .collect();
            let source = format!("[<%= for {head} do %>{body}{bottom}<% end %>]");
            let mut a = Assigns::new();
            a.insert("n", n);
            a.insert("items", Value::list((0..n).map(|i| item(kind, i))));
            let below = (copy_below, value_copy_below);
            let plain = outcome(&engine(&source, true, max_steps, below), &a, chunk);
            let slow = outcome(&engine(&source, false, max_steps, below), &a, chunk);
            prop_assert_eq!(plain, slow, "{}", source);
        }
    }

    #[test]
    fn a_loop_with_an_if_is_plain() {
        let source = r#"<%= for {t, i} <- Enum.with_index(@t) do %><li class="<%= if i == 0 do %>c<% end %>"><%= t.name %></li><% end %>"#;
        let program =
            crate::compile::compile("t", source, crate::compile::Options::default()).unwrap();
        assert!(
            program
                .ops
                .iter()
                .any(|i| matches!(i.op, crate::program::Op::ForNext { plain: Some(_), .. }))
        );
    }

    #[test]
    fn a_cell_loop_is_plain() {
        let source = "<%= for r <- @t do %><%= for c <- r do %><td><%= c %></td><% end %><% end %>";
        let program =
            crate::compile::compile("t", source, crate::compile::Options::default()).unwrap();
        let plain: Vec<bool> = program
            .ops
            .iter()
            .filter_map(|i| match i.op {
                crate::program::Op::ForNext { ref plain, .. } => Some(plain.is_some()),
                _ => None,
            })
            .collect();
        assert_eq!(plain, [true, false], "the cells' loop, not the rows'");
    }
}
