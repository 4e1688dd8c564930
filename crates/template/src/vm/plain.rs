//! Loops whose body is plain output (`<td><%= col %></td>`: static text and paths, nothing
//! that branches) run here as a native loop over their instructions: no dispatch, the step
//! budget and the loop's variables in registers. Every instruction is still charged its step
//! and followed by the pause check, in the same order as one at a time, so output, step
//! accounting and pause points are those of the general loop in `vm/mod.rs`.

use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use super::frame::{FieldKey, Frame, Loop, fast_cond, int_cmp, lookup_in, set_int};
use super::out::{MAX_INT_LEN, Out, clean, copy_into, emit, write_int};
use crate::ast::BinOp;
use crate::error::{Error, ErrorKind};
use crate::program::{Bind, Code, CodeKind, Instr, Op, Program};
use crate::value::Value;

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
    let Some(Instr {
        op: Op::ForNext { body, .. },
        text: bottom,
    }) = prog.ops.get(at)
    else {
        return Ok(Exit::Go);
    };
    let body = *body;
    let Some(ops) = prog.ops.get(body..at) else {
        return Ok(Exit::Go);
    };
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
    // The body decoded once: each instruction's text and what it does (an output: where its
    // value comes from).
    let mut decoded: SmallVec<[Step<'_>; 4]> = SmallVec::with_capacity(ops.len());
    let mut by_ref = matches!(state, Loop::Items { .. });
    // Any path through the element's variable other than `x` or `x.key` reads the slot itself.
    let reads_item = |code: &Code| bind.item.is_some() && root(code) == bind.item;
    for ins in ops {
        let (src, kind) = match &ins.op {
            Op::Output { code, escape } => {
                let src = element_src(code, bind.item).unwrap_or_else(|| {
                    by_ref &= !reads_item(code);
                    Src::Path(code)
                });
                let escape = *escape;
                (src, Kind::Output { code, escape })
            }
            Op::Text => (Src::Item, Kind::Text),
            Op::Jump(target) if (body..=at).contains(target) => {
                (Src::Item, Kind::Jump(target - body))
            }
            Op::Branch {
                cond,
                jump_when,
                target,
            } if (body..=at).contains(target) => {
                by_ref &= !reads_item(cond)
                    && !matches!(&cond.kind, CodeKind::Binary(_, a, b) if reads_item(a) || reads_item(b));
                let (jump_when, target) = (*jump_when, target - body);
                let test = Test::new(cond);
                (
                    Src::Item,
                    Kind::Branch {
                        test,
                        jump_when,
                        target,
                    },
                )
            }
            _ => {
                // Not plain after all (the compiler marks only plain bodies): one ordinary
                // advance.
                if state.advance(bind, locals) {
                    *pc = body;
                } else {
                    loops.pop();
                    *pc = at + 1;
                }
                return Ok(Exit::Go);
            }
        };
        decoded.push(Step {
            text: &ins.text,
            small: Small::new(&ins.text),
            src,
            kind,
        });
    }
    if !by_ref {
        // Bound one by one: every output reads the frame.
        for st in &mut decoded {
            if let Kind::Output { code, .. } = st.kind {
                st.src = Src::Path(code);
            }
        }
    }
    let decoded: &[Step<'_>] = &decoded;
    let bottom_small = Small::new(bottom);
    // A whole iteration of integers and short text writes at most this many bytes (each text
    // as its 16-byte copy): with that much room left before the buffer's end and the pause
    // point, and the steps for every instruction, it needs no check between instructions.
    // Only for a body of outputs alone (no branch, no text of its own).
    let fast = decoded
        .iter()
        .all(|st| st.small.len < out.copy_below() && matches!(st.kind, Kind::Output { .. }))
        && bottom_small.len < out.copy_below();
    let iter_bytes = (decoded.len() + 1) * SMALL + decoded.len() * MAX_INT_LEN;
    let iter_steps = decoded.len() as u64;
    let mut elems = match state {
        Loop::Items { items, next } if by_ref => Elems::Ref {
            k: *next,
            items,
            next,
        },
        state => Elems::Bound(state),
    };
    let copy_below = out.copy_below();
    let value_copy_below = out.value_copy_below();
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
    // A text of up to `SMALL` bytes as its one fixed-size copy when there is room for it.
    macro_rules! small_text {
        ($s:expr, $t:expr) => {{
            let s: &Small = $s;
            if s.len < copy_below && SMALL <= buf.len() - pos {
                buf[pos..pos + SMALL].copy_from_slice(&s.bytes);
                pos += s.len;
            } else {
                text!($t)
            }
        }};
    }
    let mut done = false;
    let result = 'iter: loop {
        // Whole iterations at once while nothing can interrupt them: as many as the steps,
        // the buffer's room and the distance to the pause point allow, each of integers and
        // short text only (the first that is not stops the run, uncommitted, and goes the
        // careful way below).
        if let (true, Elems::Ref { items, k, .. }) = (fast, &mut elems) {
            let items: &[Value] = items;
            let per_iter = iter_steps + 1;
            let room = (buf.len() - pos).min(pause_at.saturating_sub(base + pos + 1));
            let n = (left / per_iter)
                .min((room / iter_bytes) as u64)
                .min(items.len().saturating_sub(*k) as u64);
            let mut ran = 0;
            if let [st] = decoded
                && bind.index.is_none()
                && !matches!(st.src, Src::Path(_))
            {
                // One output of the element itself (`<td><%= x %></td>`): the same run with
                // the step's decoding hoisted out of the loop.
                let (src, text, text_len) = (st.src, st.small.bytes, st.small.len);
                let (tail, tail_len) = (bottom_small.bytes, bottom_small.len);
                let n = n as usize;
                let from = *k;
                for item in items.iter().skip(from).take(n) {
                    let found = match src {
                        Src::Field(key) => match item {
                            Value::Map(m) => key.get(m),
                            _ => None,
                        },
                        _ => Some(item),
                    };
                    let Some(Value::Int(i)) = found else {
                        break;
                    };
                    buf[pos..pos + SMALL].copy_from_slice(&text);
                    let at = pos + text_len;
                    let at = at + write_int(&mut buf[at..at + MAX_INT_LEN], *i);
                    buf[at..at + SMALL].copy_from_slice(&tail);
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
                for st in decoded {
                    let found = match st.src {
                        Src::Item => Some(item),
                        Src::Field(key) => match item {
                            Value::Map(m) => key.get(m),
                            _ => None,
                        },
                        Src::Path(code) => lookup_in(locals, assigns, code),
                    };
                    let Some(Value::Int(i)) = found else {
                        break 'run;
                    };
                    buf[at..at + SMALL].copy_from_slice(&st.small.bytes);
                    at += st.small.len;
                    at += write_int(&mut buf[at..at + MAX_INT_LEN], *i);
                }
                buf[at..at + SMALL].copy_from_slice(&bottom_small.bytes);
                pos = at + bottom_small.len;
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
        let mut first = 0;
        if fast
            && left > iter_steps
            && buf.len() - pos >= iter_bytes
            && base + pos + iter_bytes < pause_at
        {
            // No step can run out, no buffer fill up, no pause fall due: integers and short
            // text are written without checks until a value that is not an integer.
            for st in decoded {
                let found = match st.src {
                    Src::Item => Some(item),
                    Src::Field(key) => match item {
                        Value::Map(m) => key.get(m),
                        _ => None,
                    },
                    Src::Path(code) => lookup_in(locals, assigns, code),
                };
                let Some(Value::Int(i)) = found else {
                    break;
                };
                buf[pos..pos + SMALL].copy_from_slice(&st.small.bytes);
                pos += st.small.len;
                pos += write_int(&mut buf[pos..pos + MAX_INT_LEN], *i);
                first += 1;
            }
            left -= first as u64;
            if first == decoded.len() {
                buf[pos..pos + SMALL].copy_from_slice(&bottom_small.bytes);
                pos += bottom_small.len;
                left -= 1;
                continue;
            }
        }
        let mut j = first;
        while let Some(st) = decoded.get(j) {
            let mut next = j + 1;
            match st.kind {
                Kind::Output { code, escape } => {
                    // Before the step is charged: a path that does not resolve is left to the
                    // general loop, which reports it.
                    let found = match st.src {
                        Src::Item => Some(item),
                        Src::Field(key) => match item {
                            Value::Map(m) => key.get(m),
                            _ => None,
                        },
                        Src::Path(code) => lookup_in(locals, assigns, code),
                    };
                    let Some(v) = found else {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    };
                    if left == 0 {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    }
                    left -= 1;
                    small_text!(&st.small, st.text);
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
                                break 'iter Err(prog.error(ErrorKind::TypeMismatch, code.span, m));
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
                    let Some(truthy) = test.decide(locals, assigns) else {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    };
                    if left == 0 {
                        *pc = body + j;
                        break 'iter Ok(Exit::Go);
                    }
                    left -= 1;
                    small_text!(&st.small, st.text);
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
                    small_text!(&st.small, st.text);
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
        small_text!(&bottom_small, bottom);
    };
    out.set_pos(pos);
    // Held by reference: the loop's position, and the element in its variable, as binding
    // each one would have left them.
    if let Elems::Ref { items, next, k } = elems {
        *next = k;
        if let (Some(slot), Some(v)) = (
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

/// Where a plain loop's output takes its value from.
#[derive(Clone, Copy)]
enum Src<'p> {
    /// The loop's element.
    Item,
    /// A key of the loop's element.
    Field(FieldKey<'p>),
    /// Any other path, looked up in the frame.
    Path(&'p Code),
}

/// Bytes of a [`Small`] copy.
const SMALL: usize = 16;

/// A static text of up to [`SMALL`] bytes, padded: copied whole with one fixed-size move, the
/// position then advanced by its length. (`len` is `usize::MAX` for a longer text.)
struct Small {
    bytes: [u8; SMALL],
    len: usize,
}

impl Small {
    fn new(text: &[u8]) -> Small {
        let mut bytes = [0; SMALL];
        match bytes.get_mut(..text.len()) {
            Some(b) => {
                b.copy_from_slice(text);
                Small {
                    bytes,
                    len: text.len(),
                }
            }
            None => Small {
                bytes,
                len: usize::MAX,
            },
        }
    }
}

/// One instruction of a plain loop's body, decoded.
struct Step<'p> {
    text: &'p Bytes,
    small: Small,
    /// Where an output's value comes from (unused by other kinds).
    src: Src<'p>,
    kind: Kind<'p>,
}

/// What a plain loop's instruction does after its text. Jump targets are positions in the
/// body (its length: the loop's bottom).
#[derive(Clone, Copy)]
enum Kind<'p> {
    Output {
        code: &'p Code,
        escape: bool,
    },
    Text,
    Jump(usize),
    Branch {
        test: Test<'p>,
        jump_when: bool,
        target: usize,
    },
}

/// A branch's condition, decoded: a variable compared with an integer constant (`i == 0`) read
/// straight from its slot, anything else through `fast_cond`. Either way `None` when
/// `fast_cond` would give `None`.
#[derive(Clone, Copy)]
enum Test<'p> {
    SlotInt { slot: usize, op: BinOp, k: i64 },
    Cond(&'p Code),
}

impl<'p> Test<'p> {
    fn new(cond: &'p Code) -> Test<'p> {
        if let CodeKind::Binary(op, a, b) = &cond.kind
            && let (CodeKind::Local(slot), CodeKind::Lit(Value::Int(k))) = (&a.kind, &b.kind)
            && int_cmp(*op, 0, 0).is_some()
        {
            return Test::SlotInt {
                slot: *slot,
                op: *op,
                k: *k,
            };
        }
        Test::Cond(cond)
    }

    #[inline(always)]
    fn decide(&self, locals: &[Value], assigns: &[Option<Value>]) -> Option<bool> {
        match *self {
            Test::SlotInt { slot, op, k } => match locals.get(slot) {
                Some(Value::Int(x)) => int_cmp(op, *x, k),
                _ => None,
            },
            Test::Cond(c) => fast_cond(locals, assigns, c),
        }
    }
}

/// The loop's elements: read in place from its list (the element's variable written only when
/// the loop stops here), or bound one by one by the loop's own advance.
enum Elems<'s> {
    Ref {
        items: &'s Arc<[Value]>,
        next: &'s mut usize,
        /// Position of the next element.
        k: usize,
    },
    Bound(&'s mut Loop),
}

/// Where `code` reads the loop's element whose variable is in slot `item`: the element itself
/// (`x`) or one of its keys (`x.key`); `None` for any other path.
fn element_src(code: &Code, item: Option<usize>) -> Option<Src<'_>> {
    let item = item?;
    match &code.kind {
        CodeKind::Local(s) if *s == item => Some(Src::Item),
        CodeKind::Field(inner, key) if matches!(inner.kind, CodeKind::Local(s) if s == item) => {
            Some(Src::Field(FieldKey::new(key)))
        }
        _ => None,
    }
}

/// The variable slot a path starts from (`x` in `x.a.b`).
fn root(code: &Code) -> Option<usize> {
    match &code.kind {
        CodeKind::Local(s) => Some(*s),
        CodeKind::Field(inner, _) => root(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::program::NO_PLAIN;
    use crate::{Assigns, Engine, Limits, Value};

    /// The template compiled with plain loops run here (`plain`) or one instruction at a time.
    fn engine(source: &str, plain: bool, max_steps: u64, copy_below: usize) -> Engine {
        NO_PLAIN.with(|c| c.set(!plain));
        let e = Engine::from_source("t", source);
        NO_PLAIN.with(|c| c.set(false));
        e.unwrap()
            .with_limits(Limits {
                max_steps,
                ..Limits::default()
            })
            .with_copy_below(copy_below)
            .with_value_copy_below(copy_below)
    }

    /// A render's bytes or error, and a stream's chunks and errors.
    type Outcome = (Result<Vec<u8>, String>, Vec<Result<Vec<u8>, String>>);

    fn outcome(e: &Engine, a: &Assigns, chunk: usize) -> Outcome {
        let whole = e
            .render("t", a)
            .map(|l| l.to_vec())
            .map_err(|e| e.to_string());
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
            (1, _) | (3, 1) => Value::from(if i % 2 == 0 { "a&b<" } else { "plain" }),
            (2, _) | (3, 2) => Value::map([("name", Value::from("n")), ("n", Value::Int(i))]),
            _ => Value::map([("n", Value::Int(i))]),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn plain_loops_render_as_one_instruction_at_a_time(
            outputs in proptest::collection::vec(
                (r"[a-z<>/]{0,20}", 0usize..6, 0u8..4, 0usize..4, r"[a-z<]{0,6}"),
                1..4,
            ),
            bottom in r"[a-z<>/]{0,20}",
            generator in 0usize..3,
            kind in 0u8..4,
            n in 0i64..30,
            max_steps in prop_oneof![Just(1_000_000u64), 1u64..200],
            chunk in 1usize..100,
            copy_below in prop_oneof![Just(256usize), Just(0), Just(6)],
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
            let plain = outcome(&engine(&source, true, max_steps, copy_below), &a, chunk);
            let slow = outcome(&engine(&source, false, max_steps, copy_below), &a, chunk);
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
                .any(|i| matches!(i.op, crate::program::Op::ForNext { plain: true, .. }))
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
                crate::program::Op::ForNext { plain, .. } => Some(plain),
                _ => None,
            })
            .collect();
        assert_eq!(plain, [true, false], "the cells' loop, not the rows'");
    }
}
