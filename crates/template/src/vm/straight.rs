//! Whole renders without frames, for programs of the straight shape (`program/straight.rs`):
//! the VM's loop over the few kinds of instruction such a program has, with the variables in a
//! local array and the assigns in a slice, and its loops run by the plain loop's whole
//! iterations (`vm/plain/whole.rs`). No `Vm`, no frame, no loop state is built or dropped, which
//! is most of what an ordinary page cost beyond its output.
//!
//! Every instruction makes the calls on [`Out`] that the VM makes for it, charges the same step
//! and checks the same pause point, so the output is the VM's. Anything else (an instruction of
//! another kind, a path that does not resolve, a value that fails to output, an element the
//! whole iterations do not write, the step budget or the output limit reached, a buffer that
//! would have to be handed to the list to make room) gives up: the caller drops what was
//! written and renders with the VM, which produces the output or the error (and after several
//! such renders in a row, sends the program to the VM for good: `program/straight.rs`).

use galleon_iolist::IoList;
use smallvec::SmallVec;

use super::FIRST_BUF_SLACK;
use super::frame::{Slot, fast_cond, lookup_in};
use super::out::{FLUSH_AT, Out, emit};
use super::plain::{At, Body, run_whole};
use crate::program::{Bind, Code, CodeKind, Config, Generator, Instr, Op, Program, SLOT};
use crate::value::Value;

/// Renders `prog` whole into `list` (empty) with `assigns` (one per name the program uses),
/// the first buffer sized for about `bytes`: true when done, false when it gave up (`list`
/// then holds part of the render, to be dropped).
pub(crate) fn render<S: Slot>(
    prog: &Program,
    config: &Config,
    assigns: &[S],
    bytes: usize,
    list: &mut IoList,
    pause_at: usize,
) -> bool {
    let mut buf = Vec::new();
    let first_buf = bytes.saturating_add(FIRST_BUF_SLACK).clamp(64, FLUSH_AT);
    let mut out = Out::new(
        list,
        &mut buf,
        config.copy_below,
        config.value_copy_below,
        first_buf,
    );
    // As `Vm::run`: the text pinned at its first reference, if any.
    out.pin_later(&prog.text);
    let mut locals: SmallVec<[Value; 4]> = SmallVec::new();
    locals.resize_with(prog.locals, || Value::Nil);
    let done = run(
        prog,
        assigns,
        &mut locals,
        &mut out,
        config.limits.max_steps,
        pause_at,
    );
    if done {
        out.finish();
    }
    done
}

/// The program's instructions from the first, as the VM's loop runs them; false on giving up.
fn run<S: Slot>(
    prog: &Program,
    assigns: &[S],
    locals: &mut [Value],
    out: &mut Out<'_>,
    mut left: u64,
    pause_at: usize,
) -> bool {
    let mut pc = 0;
    while let Some(ins) = prog.ops.get(pc) {
        if left == 0 {
            return false;
        }
        left -= 1;
        pc += 1;
        if !ins.text.is_empty() {
            out.text(&ins.text);
        }
        match &ins.op {
            Op::Text => {}
            Op::Output { code, escape } => match lookup(locals, assigns, code) {
                Some(Value::Int(i)) => out.int(*i),
                Some(v) => {
                    if emit(out, v, *escape).is_err() {
                        return false;
                    }
                }
                None => return false,
            },
            Op::Branch {
                cond,
                jump_when,
                target,
            } => match fast_cond(locals, assigns, cond) {
                Some(truthy) => {
                    if truthy == *jump_when {
                        pc = *target;
                    }
                }
                None => return false,
            },
            Op::Jump(target) => pc = *target,
            Op::ForInit {
                generator:
                    Generator::Items(Code {
                        kind: CodeKind::Assign(a),
                        ..
                    }),
                bind,
                exit,
            } => {
                let Some(Value::List(items)) = assigns.get(*a).and_then(Slot::value) else {
                    return false;
                };
                let lp = Loop {
                    prog,
                    assigns,
                    items,
                    body: pc,
                    exit: *exit,
                    bind: *bind,
                };
                if !lp.run(out, locals, &mut left, pause_at) {
                    return false;
                }
                pc = *exit;
            }
            _ => return false,
        }
        if out.len() >= pause_at {
            return false;
        }
    }
    true
}

/// [`lookup_in`] with a variable or an assign (a page's usual output) read in line.
#[inline(always)]
fn lookup<'a, S: Slot>(locals: &'a [Value], assigns: &'a [S], code: &'a Code) -> Option<&'a Value> {
    match &code.kind {
        CodeKind::Local(s) => locals.get(*s),
        CodeKind::Assign(i) => assigns.get(*i)?.value(),
        _ => lookup_in(locals, assigns, code),
    }
}

/// A loop over an assign's list, from its `ForInit` (step charged, text output).
struct Loop<'a, S> {
    prog: &'a Program,
    assigns: &'a [S],
    items: &'a [Value],
    /// The first instruction of the body (the program counter after the `ForInit`).
    body: usize,
    exit: usize,
    bind: Bind,
}

impl<S: Slot> Loop<'_, S> {
    /// Every iteration, as `plain::run_assign` runs them when they all run whole; false on
    /// giving up.
    fn run(
        &self,
        out: &mut Out<'_>,
        locals: &mut [Value],
        left: &mut u64,
        pause_at: usize,
    ) -> bool {
        let Some(at) = self.exit.checked_sub(1) else {
            return false;
        };
        let Some(Instr {
            op:
                Op::ForNext {
                    body,
                    plain: Some(plain),
                    ..
                },
            ..
        }) = self.prog.ops.get(at)
        else {
            return false;
        };
        let Some(ops) = self.prog.ops.get(*body..at) else {
            return false;
        };
        // Texts copied, as the VM's whole iterations require.
        let copied = plain.longest == 0 || plain.longest < out.copy_below();
        if *body != self.body || ops.len() != plain.steps.len() || !copied {
            return false;
        }
        let whole = Body::new(
            plain,
            ops,
            self.assigns,
            self.bind.index,
            out.value_copy_below(),
        );
        let need = whole.iter_max + SLOT;
        let mut to = At {
            k: 0,
            pos: 0,
            left: *left,
        };
        let mut grown = false;
        loop {
            let base = out.list.len();
            let (buf, pos) = out.cursor();
            let limit = (buf.len().saturating_sub(SLOT)).min(pause_at.saturating_sub(base + 1));
            let from = to.k;
            to.pos = pos;
            run_whole(&whole, self.items, locals, buf, limit, &mut to);
            out.set_pos(to.pos);
            *left = to.left;
            if to.k >= self.items.len() {
                return true;
            }
            // Stopped short of the end. For want of room in a buffer not yet half of
            // `FLUSH_AT` full: more room, as a piece that did not fit would have got it (the
            // buffer grown, not handed to the list), and on. Otherwise, or when more room did
            // not help, give up.
            let progress = to.k > from;
            if buf_room(out) < need && to.pos < FLUSH_AT / 2 && (progress || !grown) {
                out.reserve(need);
                grown = true;
                continue;
            }
            return false;
        }
    }
}

/// Bytes of room left in the output's buffer.
#[inline(always)]
fn buf_room(out: &mut Out<'_>) -> usize {
    let (buf, pos) = out.cursor();
    buf.len() - pos
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::{Assigns, Engine, Limits, Rendered, Value};

    /// Templates of the straight shape: a page with a list of records (the teams page), a loop
    /// with a branch in its body, outputs of assigns alone, and a loop of one output between texts of 26 and 11 bytes.
    const SOURCES: [&str; 4] = [
        "<title><%= @year %></title>\n<ul>\n<%= for {t, i} <- Enum.with_index(@items) do %>\n  <li class=\"<%= if i == 0 do %>first<% end %>\"><b><%= t.name %></b>: <%= t.n %></li>\n<% end %></ul>\n",
        "<p><%= @title %></p><%= for x <- @items do %><%= if @year do %><i><%= x.name %></i><% else %><%= x.n %>;<% end %><% end %><%= if @year == 2015 do %>y<% end %>",
        "<%= @title %>-<%= @year %>-<%= @title %>",
        "<%= for x <- @items do %><tr><td>cell text</td><td><%= x.n %></td></tr>\n<% end %>",
    ];

    fn item(kind: u8, i: i64) -> Value {
        let name = match i % 5 {
            0 => "Jiangsu",
            1 => "a&b<c>",
            2 => "Guangzhou",
            3 => "a name longer than thirty bytes, clean all along",
            _ => "x",
        };
        match (kind, i % 7) {
            (0, _) | (1, 1..) => {
                Value::map([("name", Value::from(name)), ("n", Value::Int(i * 13 - 20))])
            }
            (1, _) => Value::map([("name", Value::Nil), ("n", Value::Int(i))]),
            (2, 3) => Value::map([("n", Value::Int(i))]),
            (2, 5) => Value::Int(i),
            (2, _) => Value::map([("name", Value::from(name)), ("n", Value::from(name))]),
            _ => Value::map([("name", Value::list([Value::Int(1)])), ("n", Value::Int(i))]),
        }
    }

    /// Two whole renders (the second with the first's size hint), bytes and segment count, or
    /// the error.
    fn renders(e: &Engine, a: &Assigns) -> Vec<Result<(Vec<u8>, usize), String>> {
        (0..2)
            .map(|_| {
                e.render("t", a)
                    .map(|l| (l.to_vec(), l.segment_count()))
                    .map_err(|e| e.to_string())
            })
            .collect()
    }

    /// A render that may stream: whole or not, the bytes, and a whole one's segment count.
    type Outcome = Result<(bool, Vec<u8>, usize), String>;

    /// Two renders that may stream past `max_whole` bytes, or the error.
    fn bounded(e: &Engine, a: &Assigns, max_whole: usize) -> Vec<Outcome> {
        (0..2)
            .map(
                |_| match e.render_or_stream("t", |k| a.get(k).cloned(), max_whole, 64) {
                    Ok(Rendered::Whole(l)) => Ok((true, l.to_vec(), l.segment_count())),
                    Ok(Rendered::Streaming { first, rest }) => {
                        let mut bytes = first.to_vec();
                        for chunk in rest {
                            match chunk {
                                Ok(c) => bytes.extend_from_slice(&c.to_vec()),
                                Err(e) => return Err(e.to_string()),
                            }
                        }
                        Ok((false, bytes, 0))
                    }
                    Err(e) => Err(e.to_string()),
                },
            )
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A render that may stream goes frame-less while the page ends within its bound, and
        /// gives the VM's bytes, segments, errors and whole-or-streamed outcome either way.
        #[test]
        fn bounded_straight_renders_as_the_vm(
            source in 0..SOURCES.len(),
            kind in 0u8..4,
            n in 0i64..40,
            max_whole in prop_oneof![Just(1usize << 30), 1usize..600],
            max_steps in prop_oneof![Just(1_000_000u64), 1u64..100],
        ) {
            let limits = Limits { max_steps, ..Limits::default() };
            let engine = || Engine::from_source("t", SOURCES[source]).unwrap().with_limits(limits);
            let straight = engine();
            let mut a = Assigns::new();
            a.insert("year", 2015);
            a.insert("title", "a <title>");
            a.insert("items", Value::list((0..n).map(|i| item(kind, i))));
            prop_assert_eq!(bounded(&straight, &a, max_whole), bounded(&engine().vm_only(), &a, max_whole));
        }

        /// A frame-less whole render gives the VM's bytes, segments and errors, whatever it
        /// meets (it hands over to the VM when it cannot go on).
        #[test]
        fn straight_renders_as_the_vm(
            source in 0..SOURCES.len(),
            kind in 0u8..4,
            n in 0i64..40,
            year in prop_oneof![Just(Value::Int(2015)), Just(Value::Nil), Just(Value::from("<y>"))],
            max_steps in prop_oneof![Just(1_000_000u64), 1u64..100],
            max_output in prop_oneof![Just(1usize << 30), 1usize..600],
            copy_below in prop_oneof![Just(256usize), Just(0), Just(20)],
            value_copy_below in prop_oneof![Just(4096usize), Just(0), Just(30)],
        ) {
            let limits = Limits { max_steps, max_output, ..Limits::default() };
            let engine = || {
                Engine::from_source("t", SOURCES[source])
                    .unwrap()
                    .with_limits(limits)
                    .with_copy_below(copy_below)
                    .with_value_copy_below(value_copy_below)
            };
            let straight = engine();
            prop_assert!(straight.straight("t"));
            let mut a = Assigns::new();
            a.insert("year", year);
            a.insert("title", "a <title>");
            a.insert("items", Value::list((0..n).map(|i| item(kind, i))));
            prop_assert_eq!(renders(&straight, &a), renders(&engine().vm_only(), &a));
        }
    }

    #[test]
    fn pages_with_partials_or_function_calls_are_not_straight() {
        for source in [
            "<%= for x <- Enum.reverse(@items) do %><%= x %><% end %>",
            "<%= String.upcase(@title) %>",
            "<% x = @title %><%= x %>",
            "<%= case @n do %><% 1 -> %>one<% _ -> %>other<% end %>",
        ] {
            let e = Engine::from_source("t", source).unwrap();
            assert!(!e.straight("t"), "{source}");
        }
        let e = Engine::from_source("t", SOURCES[0]).unwrap();
        assert!(e.straight("t"));
    }

    #[test]
    fn pages_past_the_bound_go_to_the_vm_without_counting_as_misses() {
        let e = Engine::from_source("t", SOURCES[3]).unwrap();
        let rows = |n: i64| {
            let mut a = Assigns::new();
            a.insert("items", Value::list((0..n).map(|i| item(0, i))));
            a
        };
        let (big, small) = (rows(100), rows(2));
        let expected = |a: &Assigns| e.render("t", a).unwrap().to_vec();
        assert!(e.straight_for_bounded("t"));
        for _ in 0..20 {
            // 100 rows of ~40 bytes: past a 1,000-byte bound, so streamed.
            let r = bounded(&e, &big, 1000);
            assert!(
                matches!(&r[..], [Ok((false, _, _)), Ok((false, _, _))]),
                "{r:?}"
            );
            assert_eq!(r[0].as_ref().unwrap().1, expected(&big));
            // The next one goes to the VM at once.
            assert!(!e.straight_for_bounded("t"));
        }
        // Twenty long pages in a row are no reason to leave the frame-less render for good:
        // a page that ends whole (by the VM) brings it back.
        assert!(e.straight("t"));
        let r = bounded(&e, &small, 1000);
        assert!(
            matches!(&r[..], [Ok((true, _, _)), Ok((true, _, _))]),
            "{r:?}"
        );
        assert_eq!(r[1].as_ref().unwrap().1, expected(&small));
        assert!(e.straight_for_bounded("t"));
    }

    #[test]
    fn renders_it_cannot_finish_in_a_row_send_the_program_to_the_vm() {
        let e = Engine::from_source("t", SOURCES[2]).unwrap();
        let mut bad = Assigns::new();
        bad.insert("title", Value::map([("k", Value::Int(1))]));
        let mut good = Assigns::new();
        good.insert("title", "t");
        good.insert("year", 1);
        // One odd render among good ones: the next good one is frame-less again.
        for _ in 0..20 {
            let err = e.render("t", &bad).unwrap_err().to_string();
            assert!(err.contains("cannot output a map"), "{err}");
            assert_eq!(e.render("t", &good).unwrap().to_vec(), b"t-1-t");
        }
        assert!(e.straight("t"));
        // Many in a row: the VM from then on, with the same output.
        for _ in 0..20 {
            assert!(e.render("t", &bad).is_err());
        }
        assert!(!e.straight("t"));
        assert_eq!(e.render("t", &good).unwrap().to_vec(), b"t-1-t");
    }
}
