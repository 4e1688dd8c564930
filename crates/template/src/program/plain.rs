//! A plain loop's body (static text, outputs of paths, branches and jumps within it) decoded
//! once when compiling, for `vm/plain.rs` to run without dispatch. Steps refer to the body's
//! instructions by position: step `j` is `ops[body + j]`.

use crate::ast::BinOp;
use crate::value::{Str, Value, word8};

use super::{Bind, Code, CodeKind, Instr, Op};

/// Bytes of a [`Piece`]'s padded copy.
pub(crate) const SLOT: usize = 32;

/// Bytes of the copies of a batch of whole iterations (a body of outputs whose texts all fit):
/// half a [`Piece`], one move fewer per text than the whole slot.
pub(crate) const NARROW: usize = 16;

/// A static text of up to [`SLOT`] bytes, zero-padded: copied whole with one fixed-size move,
/// the position then advanced by its length. (`len` is `usize::MAX` for a longer text, which
/// goes the ordinary way, from its instruction.)
#[derive(Debug)]
pub(crate) struct Piece {
    pub(crate) bytes: [u8; SLOT],
    pub(crate) len: usize,
}

impl Piece {
    fn new(text: &[u8]) -> Piece {
        let mut bytes = [0; SLOT];
        match bytes.get_mut(..text.len()) {
            Some(b) => {
                b.copy_from_slice(text);
                Piece {
                    bytes,
                    len: text.len(),
                }
            }
            None => Piece {
                bytes,
                len: usize::MAX,
            },
        }
    }
}

/// A plain loop's body, decoded.
#[derive(Debug)]
pub(crate) struct PlainBody {
    /// One per instruction of the body.
    pub(crate) steps: Box<[Step]>,
    /// The text of the loop's bottom instruction.
    pub(crate) bottom: Piece,
    /// Some instruction reads the element's variable other than as `x` or `x.key` (a deeper
    /// path, a condition): each element must then be bound to it, not read in place.
    pub(crate) binds_item: bool,
    /// Every jump goes forward: an iteration runs each instruction at most once.
    pub(crate) forward: bool,
    /// Every instruction outputs a value (no text of its own, no branch).
    pub(crate) outputs_only: bool,
    /// Number of outputs.
    pub(crate) outputs: usize,
    /// Bytes of static text an iteration outputs at most: every step's and the bottom's.
    pub(crate) text_bytes: usize,
    /// Length of the longest non-empty text (0 when there is none).
    pub(crate) longest: usize,
}

/// One instruction of a plain loop's body: its text, then what it does.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) text: Piece,
    /// Where an output's value comes from (`Src::Item` for other kinds).
    pub(crate) src: Src,
    pub(crate) kind: Kind,
}

/// Where a plain loop's output takes its value from.
#[derive(Debug)]
pub(crate) enum Src {
    /// The loop's element.
    Item,
    /// A key of the loop's element.
    Field(FieldName),
    /// Any other path: the instruction's code, looked up in the frame.
    Path,
}

/// A field name with its in-line comparison key (see `vm::frame::FieldKey`).
#[derive(Debug)]
pub(crate) struct FieldName {
    pub(crate) key: Str,
    /// [`word8`] of the name.
    pub(crate) word: u64,
}

/// What a step does after its text. Targets are positions in the body (its length: the loop's
/// bottom).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Output {
        escape: bool,
    },
    Text,
    Jump(usize),
    Branch {
        test: Test,
        jump_when: bool,
        target: usize,
    },
}

/// A branch's condition: a variable compared with an integer constant (`i == 0`), read straight
/// from its slot, or anything else (the instruction's condition, through `fast_cond`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Test {
    SlotInt { slot: usize, op: BinOp, k: i64 },
    Cond,
}

/// True for a comparison operator.
fn comparison(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
    )
}

impl PlainBody {
    /// The body `ops[body..next]` of the loop whose bottom is at `next`, decoded; `None` unless
    /// it is plain: each instruction outputs a path, is text, or branches (on a path or a
    /// comparison of two) or jumps within the body. Texts must be final (set when compiling
    /// ends).
    pub(crate) fn decode(ops: &[Instr], body: usize, next: usize, bind: Bind) -> Option<PlainBody> {
        #[cfg(test)]
        if NO_PLAIN.with(std::cell::Cell::get) {
            return None;
        }
        let within = |t: usize| (body..=next).contains(&t);
        let reads_item = |code: &Code| bind.item.is_some() && root(code) == bind.item;
        let body_ops = ops.get(body..next).filter(|b| !b.is_empty())?;
        let bottom = ops.get(next)?;
        let mut steps = Vec::with_capacity(body_ops.len());
        let mut binds_item = false;
        let mut forward = true;
        for (j, ins) in body_ops.iter().enumerate() {
            let (src, kind) = match &ins.op {
                Op::Output { code, escape } if code.is_path() => {
                    let src = element_src(code, bind.item).unwrap_or_else(|| {
                        binds_item |= reads_item(code);
                        Src::Path
                    });
                    (src, Kind::Output { escape: *escape })
                }
                Op::Text => (Src::Item, Kind::Text),
                Op::Jump(t) if within(*t) => {
                    forward &= *t > body + j;
                    (Src::Item, Kind::Jump(t - body))
                }
                Op::Branch {
                    cond,
                    jump_when,
                    target,
                } if within(*target) => {
                    let simple = match &cond.kind {
                        CodeKind::Binary(op, a, b) if comparison(*op) => {
                            binds_item |= reads_item(a) || reads_item(b);
                            a.is_path() && b.is_path()
                        }
                        _ => cond.is_path(),
                    };
                    if !simple {
                        return None;
                    }
                    binds_item |= reads_item(cond);
                    forward &= *target > body + j;
                    let kind = Kind::Branch {
                        test: Test::new(cond),
                        jump_when: *jump_when,
                        target: target - body,
                    };
                    (Src::Item, kind)
                }
                _ => return None,
            };
            steps.push(Step {
                text: Piece::new(&ins.text),
                src,
                kind,
            });
        }
        let texts = body_ops.iter().chain([bottom]).map(|i| i.text.len());
        Some(PlainBody {
            outputs_only: steps.iter().all(|s| matches!(s.kind, Kind::Output { .. })),
            outputs: steps
                .iter()
                .filter(|s| matches!(s.kind, Kind::Output { .. }))
                .count(),
            text_bytes: texts.clone().sum(),
            longest: texts.max().unwrap_or(0),
            steps: steps.into_boxed_slice(),
            bottom: Piece::new(&bottom.text),
            binds_item,
            forward,
        })
    }
}

impl Test {
    fn new(cond: &Code) -> Test {
        if let CodeKind::Binary(op, a, b) = &cond.kind
            && let (CodeKind::Local(slot), CodeKind::Lit(Value::Int(k))) = (&a.kind, &b.kind)
            && comparison(*op)
        {
            return Test::SlotInt {
                slot: *slot,
                op: *op,
                k: *k,
            };
        }
        Test::Cond
    }
}

/// Where `code` reads the loop's element whose variable is in slot `item`: the element itself
/// (`x`) or one of its keys (`x.key`); `None` for any other path.
fn element_src(code: &Code, item: Option<usize>) -> Option<Src> {
    let item = item?;
    match &code.kind {
        CodeKind::Local(s) if *s == item => Some(Src::Item),
        CodeKind::Field(inner, key) if matches!(inner.kind, CodeKind::Local(s) if s == item) => {
            Some(Src::Field(FieldName {
                key: key.clone(),
                word: word8(key.bytes()),
            }))
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
thread_local! {
    /// Set by tests to compile plain loops as ordinary ones, to compare the two.
    pub(crate) static NO_PLAIN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
