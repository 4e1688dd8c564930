//! Whether a program can render whole without the VM's frames (`vm/straight.rs`): every
//! instruction outside its loops is text, an output of a path, a branch on a path or on a
//! comparison of two, or a forward jump, and every loop iterates an assign's list with a plain
//! body that runs in whole iterations. Ordinary pages (a title, a list of records) are of this
//! shape; partials, `case`, assignments and function calls are not.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use super::plain::{NARROW, PlainBody, SLOT};
use super::{Code, CodeKind, Generator, Instr, Op};

/// Renders in a row that had to go back to the VM after which a program stays on the VM: a
/// page whose data the frame-less render keeps meeting something it does not handle (a value
/// to report as an error, a dirty or long string in a loop) would otherwise be rendered twice
/// over every time, while one odd render among good ones costs one retry.
const MISSES: u8 = 8;

/// A program's eligibility for the frame-less whole render.
#[derive(Debug, Default)]
pub(crate) struct Straight {
    /// The program has the shape (decided when compiling).
    shape: bool,
    /// Renders in a row that went back to the VM (a value, a size or a limit the frame-less
    /// render does not handle), up to [`MISSES`].
    misses: AtomicU8,
    /// The last render that may stream ([`Engine::render_or_stream`]) passed its bound: the
    /// next one goes to the VM at once, which can stream it, instead of rendering the bound's
    /// worth twice. A render by the VM that ends whole clears it.
    ///
    /// [`Engine::render_or_stream`]: crate::Engine::render_or_stream
    long: AtomicBool,
}

impl Straight {
    /// The eligibility of a program whose final instructions are `ops`.
    pub(crate) fn of(ops: &[Instr]) -> Straight {
        Straight {
            shape: shape(ops),
            misses: AtomicU8::new(0),
            long: AtomicBool::new(false),
        }
    }

    /// True while the frame-less render is worth trying.
    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        self.shape && self.misses.load(Ordering::Relaxed) < MISSES
    }

    /// A frame-less render finished: the count of misses in a row starts again. (Only stored
    /// when it changes: every render of a page passes here.)
    #[inline(always)]
    pub(crate) fn hit(&self) {
        if self.misses.load(Ordering::Relaxed) != 0 {
            self.misses.store(0, Ordering::Relaxed);
        }
    }

    /// A frame-less render went back to the VM; after [`MISSES`] in a row, every later render
    /// of the program goes to the VM at once.
    #[cold]
    pub(crate) fn missed(&self) {
        let m = self.misses.load(Ordering::Relaxed);
        self.misses
            .store(m.saturating_add(1).min(MISSES), Ordering::Relaxed);
    }

    /// True while a render that may stream should try the frame-less render first: enabled,
    /// and the last such render did not pass its bound.
    #[inline(always)]
    pub(crate) fn enabled_for_bounded(&self) -> bool {
        self.enabled() && !self.long.load(Ordering::Relaxed)
    }

    /// Whether the last render that may stream passed its bound (stored only when it changes).
    #[inline(always)]
    pub(crate) fn set_long(&self, long: bool) {
        if self.long.load(Ordering::Relaxed) != long {
            self.long.store(long, Ordering::Relaxed);
        }
    }

    /// Sends every later render of the program to the VM (tests compare the two).
    #[cfg(test)]
    pub(crate) fn disable(&self) {
        self.misses.store(MISSES, Ordering::Relaxed);
    }
}

/// True when `ops` are of the straight shape (see the module docs).
fn shape(ops: &[Instr]) -> bool {
    let mut i = 0;
    while let Some(ins) = ops.get(i) {
        match &ins.op {
            Op::Text => {}
            Op::Output { code, .. } if code.is_path() => {}
            Op::Branch { cond, target, .. } if *target > i && simple_cond(cond) => {}
            Op::Jump(target) if *target > i => {}
            Op::ForInit {
                generator:
                    Generator::Items(Code {
                        kind: CodeKind::Assign(_),
                        ..
                    }),
                exit,
                ..
            } => {
                let Some(Instr {
                    op:
                        Op::ForNext {
                            body,
                            repeat: None,
                            plain: Some(plain),
                            ..
                        },
                    ..
                }) = exit.checked_sub(1).and_then(|at| ops.get(at))
                else {
                    return false;
                };
                if *body != i + 1 || !whole(plain) {
                    return false;
                }
                // The body is the plain loop's; the frame-less render goes on after the loop.
                i = *exit;
                continue;
            }
            _ => return false,
        }
        i += 1;
    }
    true
}

/// A condition the VM decides without `eval` (`fast_cond`): a path, or a comparison of two.
fn simple_cond(cond: &Code) -> bool {
    match &cond.kind {
        CodeKind::Binary(_, a, b) => a.is_path() && b.is_path(),
        _ => cond.is_path(),
    }
}

/// A plain body that runs in whole iterations over elements read in place (whatever the copy
/// threshold, which the render checks), and not a batch of outputs alone, which the VM runs
/// faster in batches of its own.
fn whole(plain: &PlainBody) -> bool {
    let batch = plain.outputs_only && plain.longest <= NARROW;
    plain.forward && plain.longest <= SLOT && !plain.binds_item && !batch
}
