//! What the compiler produces and the VM runs: a [`Program`] of instructions over one shared
//! static text, the [`Catalog`] of a set of programs, and the limits and settings of a render.
//! Below both `compile` and `vm`, so neither reaches into the other.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use galleon_iolist::IoList;

mod names;
mod plain;
mod straight;

pub(crate) use names::Names;
#[cfg(test)]
pub(crate) use plain::NO_PLAIN;
pub(crate) use plain::{FieldName, Kind, NARROW, Piece, PlainBody, SLOT, Src, Step, Test};
pub(crate) use straight::Straight;

use crate::ast::{BinOp, Span, UnOp};
use crate::builtins::Builtin;
use crate::error::{Error, ErrorKind, Location};
use crate::function::Function;
use crate::value::{Str, Value};

/// A compiled template.
#[derive(Debug)]
pub(crate) struct Program {
    /// The template's name (its `/`-separated path under the engine's root).
    pub(crate) name: String,
    /// The source, kept to locate render errors.
    pub(crate) source: Arc<str>,
    /// Every byte of static text, in one allocation; [`Instr::text`] segments are slices of it.
    pub(crate) text: Bytes,
    /// The code.
    pub(crate) ops: Vec<Instr>,
    /// Names of the `@assigns` used, indexed by [`CodeKind::Assign`]; when the template reads
    /// `assigns` whole, linking adds the names the partials it calls read (transitively).
    pub(crate) assigns: Vec<String>,
    /// Whether the template reads `assigns` whole ([`CodeKind::AllAssigns`]).
    pub(crate) all_assigns: bool,
    /// Number of local variable slots a frame needs.
    pub(crate) locals: usize,
    /// Partials called, by resolved name, with the span of the call; indexed by the partial
    /// number in [`Op::Call`] and [`CodeKind::Partial`].
    pub(crate) partials: Vec<(String, Span)>,
    /// For each partial, the index of its program in the engine (filled in when linking).
    pub(crate) links: Vec<usize>,
    /// The size of the last whole render, to allocate the next one's list at once.
    pub(crate) size_hint: SizeHint,
    /// Whether a whole render may run without the VM's frames (`vm/straight.rs`).
    pub(crate) straight: Straight,
    /// Compiled for live pages ([`Mark`]s around every dynamic): the statics of each block,
    /// indexed by block number (0 is the template itself).
    pub(crate) live: Option<Arc<[Vec<String>]>>,
}

/// Segments and bytes of a template's last render. Renders on other threads may race to update
/// it; any of their values is a fine hint.
#[derive(Debug, Default)]
pub(crate) struct SizeHint {
    segments: AtomicUsize,
    bytes: AtomicUsize,
}

/// Largest hint kept, in segments or bytes: a huge page once should not make every later render
/// of the template allocate that much up front. A guess: 1 MiB covers ordinary pages.
const MAX_SIZE_HINT: usize = 1 << 20;

impl SizeHint {
    /// An empty list with room for as many segments as the last render had; none when it was a
    /// list of copies only (recorded as 0), which keeps no table (its scratch is its segment).
    pub(crate) fn list(&self) -> IoList {
        match self.segments.load(Ordering::Relaxed) {
            0 => IoList::new(),
            n => IoList::with_capacity(n, 0),
        }
    }

    /// [`SizeHint::list`] made in `page` (empty): room for the segments, if any.
    pub(crate) fn prepare(&self, page: &mut IoList) {
        match self.segments.load(Ordering::Relaxed) {
            0 => {}
            n => *page = IoList::with_capacity(n, 0),
        }
    }

    /// Bytes of the last render.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Remembers the size of a finished render.
    ///
    /// Stores only what changed: every render of a page records its size, and a store to a line
    /// the other worker threads read on each render of the same page would bounce it between
    /// their caches for nothing.
    pub(crate) fn record(&self, list: &IoList) {
        // Every byte in the scratch buffer: copies only, no segment table needed.
        let segments = if list.scratch_len() == list.len() {
            0
        } else {
            list.segment_count().min(MAX_SIZE_HINT)
        };
        if self.segments.load(Ordering::Relaxed) != segments {
            self.segments.store(segments, Ordering::Relaxed);
        }
        let bytes = list.len().min(MAX_SIZE_HINT);
        if self.bytes.load(Ordering::Relaxed) != bytes {
            self.bytes.store(bytes, Ordering::Relaxed);
        }
    }
}

impl Program {
    /// An error of `kind` located at `span` of this template.
    pub(crate) fn error(&self, kind: ErrorKind, span: Span, message: impl Into<String>) -> Error {
        Error::new(kind, message).at(Location::new(&self.name, &self.source, span))
    }
}

/// Gives each program that reads `assigns` whole the names of the assigns its partials read,
/// transitively (to be passed on): `assigns` holds the given assigns of those names. A render's
/// assigns are asked for by name (`Engine::render_with`), so no render enumerates them.
pub(crate) fn widen_all_assigns(programs: &mut [Program]) {
    let mut extra = Vec::new();
    for (start, p) in programs.iter().enumerate() {
        if !p.all_assigns {
            continue;
        }
        let mut seen = vec![false; programs.len()];
        let mut stack = vec![start];
        let mut names: Vec<String> = Vec::new();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            for name in &programs[i].assigns {
                if !p.assigns.contains(name) && !names.contains(name) {
                    names.push(name.clone());
                }
            }
            stack.extend(programs[i].links.iter().filter(|&&t| t < programs.len()));
        }
        extra.push((start, names));
    }
    for (i, names) in extra {
        programs[i].assigns.extend(names);
    }
}

/// One instruction: static text to output first (often empty), then an op. Text rides on the
/// op after it so that `<td><%= x %>` is one dispatch, not two.
#[derive(Debug)]
pub(crate) struct Instr {
    /// A slice of [`Program::text`].
    pub(crate) text: Bytes,
    pub(crate) op: Op,
}

/// What an instruction does after its text.
#[derive(Debug)]
pub(crate) enum Op {
    /// Nothing more (text before a jump target, or at the end).
    Text,
    /// Evaluate and output, escaped or not.
    Output { code: Code, escape: bool },
    /// Evaluate, discard.
    Exec(Code),
    /// Jump to `target` when the truthiness of `cond` equals `jump_when`.
    Branch {
        cond: Code,
        jump_when: bool,
        target: usize,
    },
    /// Jump.
    Jump(usize),
    /// Start a loop: evaluate the generator, push its state and bind the first element (and its
    /// index), falling through into the body; when there is none, jump to `exit`.
    ForInit {
        generator: Generator,
        bind: Bind,
        exit: usize,
    },
    /// The bottom of a loop: bind the next element and jump back to `body`, or pop the loop and
    /// fall through. `repeat` is set when the whole body is this instruction's static text;
    /// `plain` holds the body decoded when it is plain (it then runs in `vm/plain.rs`).
    ForNext {
        bind: Bind,
        body: usize,
        repeat: Option<Repeat>,
        plain: Option<Box<PlainBody>>,
    },
    /// Evaluate and store in variable slot `slot` (`<% x = expr %>`, a `case` subject).
    Set { slot: usize, code: Code },
    /// Match the value in slot `slot` against `pattern`, binding its variables; on failure
    /// jump to `fail`, or with no `fail` stop the render with a match error at `span`.
    Match {
        pattern: PatCode,
        slot: usize,
        fail: Option<usize>,
        span: Span,
    },
    /// Stop the render: no clause of the `case` or `cond` at `span` matched the value in slot
    /// `slot` (`None` for a `cond`); `with`: the clauses were a `with`'s `else`.
    NoClause {
        slot: Option<usize>,
        span: Span,
        with: bool,
    },
    /// Render partial number `partial` with the given assigns, in place (streamable).
    Call {
        partial: usize,
        args: PartialArgs,
        span: Span,
    },
    /// Live pages only: where a dynamic, block, comprehension or row starts or ends, recorded
    /// with the output's length when the live render's own frame runs it.
    Mark(Mark),
}

/// The structure of a live render, as marks in its code (`live.rs` builds the tree from them).
#[derive(Debug)]
pub(crate) enum Mark {
    /// A dynamic of the current block starts. When none of the assigns `reads` (indices into
    /// [`Program::assigns`]) changed, the VM records it unchanged and jumps to `skip`, just
    /// past its [`Mark::End`]; `skip` is `usize::MAX` for a dynamic that is always evaluated.
    Dyn { reads: Box<[u16]>, skip: usize },
    /// A branch of an `if`, `case` or `cond`: block number `.0`'s dynamics follow.
    Block(u32),
    /// A `for` whose body is block number `.0`: its rows follow.
    Comp(u32),
    /// One element of the innermost comprehension.
    Row,
    /// The innermost dynamic, block, comprehension or row ends.
    End,
}

/// A loop whose body is static text only: every iteration outputs the same bytes, so the render
/// outputs the remaining iterations as references to `block`, the body repeated back to back,
/// instead of one segment per iteration. `/blah?iters=1000` becomes 13 segments of up to 32 KiB
/// (79 bodies each) rather than 1,000 of 410 bytes: the render skips the iterations, and the
/// `writev` hands the kernel a few large iovecs from one block that stays in cache.
#[derive(Debug)]
pub(crate) struct Repeat {
    /// The body, `block.len() / unit` times over; a slice of [`Program::text`], so pinned.
    pub(crate) block: Bytes,
    /// The body's length.
    pub(crate) unit: usize,
}

/// Target size of a [`Repeat`] block: 32 KiB stays within a core's L1 data cache (48 KiB
/// here), so the kernel copies every block from cache. Bodies longer than half of it are not
/// repeated: they already make large segments.
pub(crate) const REPEAT_BLOCK: usize = 32 * 1024;

/// Where a loop puts its element and index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bind {
    pub(crate) item: Option<usize>,
    pub(crate) index: Option<usize>,
}

/// What a `for` iterates.
#[derive(Debug)]
pub(crate) enum Generator {
    /// `first..last` (or `first..last//step`, the step last), counted without building a
    /// list; without a step it counts down when `first > last`, as Elixir does.
    Range(Code, Code, Option<Box<Code>>),
    /// A list value.
    Items(Code),
}

/// A compiled pattern: variables resolved to slots.
#[derive(Debug)]
pub(crate) enum PatCode {
    /// `_`: anything.
    Any,
    /// A variable: anything, stored in the slot.
    Bind(usize),
    /// Equal (`===`) to this value.
    Lit(Value),
    /// Equal (`===`) to the value in this slot.
    Pin(usize),
    /// A tuple of exactly these.
    Tuple(Vec<PatCode>),
    /// A list of exactly these.
    List(Vec<PatCode>),
    /// A map with at least these keys, their values matching.
    Map(Vec<(Str, PatCode)>),
}

/// A compiled anonymous function: its clauses, tried in order (parameters bind function slots,
/// apart from the frame's variable slots), the slots they end below, and its arity.
#[derive(Debug)]
pub(crate) struct FnCode {
    pub(crate) clauses: Vec<FnClauseCode>,
    pub(crate) slots_end: usize,
    pub(crate) arity: usize,
    /// The whole `fn` (or capture), where a parameter mismatch is reported.
    pub(crate) span: Span,
    /// The `else` clauses of a `with` (read as a `case`): none matching is a `with` error.
    pub(crate) with_else: bool,
}

/// One clause: parameter patterns, a guard, the body.
#[derive(Debug)]
pub(crate) struct FnClauseCode {
    pub(crate) params: Vec<PatCode>,
    pub(crate) guard: Option<Code>,
    pub(crate) body: Code,
}

/// Where a `fn` block's clause body starts, and the function slots (its parameters'
/// variables) copied into frame slots, where its instructions read them.
#[derive(Debug)]
pub(crate) struct BlockCode {
    pub(crate) start: usize,
    pub(crate) moves: Vec<(usize, usize)>,
}

/// A jump target past every instruction: the frame ends there (how a `fn` block's body
/// returns to the expression that called it).
pub(crate) const RETURN: usize = usize::MAX;

/// A compiled `for` comprehension: its variables bind function slots, as a `fn`'s parameters.
#[derive(Debug)]
pub(crate) struct ForCode {
    pub(crate) qualifiers: Vec<QualCode>,
    pub(crate) slots_end: usize,
    pub(crate) body: Code,
}

/// A generator (its pattern and enumerable) or a filter of a comprehension.
#[derive(Debug)]
pub(crate) enum QualCode {
    Gen(PatCode, Code),
    Filter(Code),
}

/// A compiled expression.
#[derive(Debug)]
pub(crate) struct Code {
    pub(crate) kind: CodeKind,
    pub(crate) span: Span,
}

impl Code {
    /// True for a path (`x`, `@x`, `x.key`, a literal): what the VM reads where it lives,
    /// without `eval`.
    pub(crate) fn is_path(&self) -> bool {
        match &self.kind {
            CodeKind::Lit(_) | CodeKind::Local(_) | CodeKind::Assign(_) => true,
            CodeKind::Field(inner, _) => inner.is_path(),
            _ => false,
        }
    }
}

/// Compiled expression forms: names resolved to slots and functions to variants.
#[derive(Debug)]
pub(crate) enum CodeKind {
    Lit(Value),
    Local(usize),
    Assign(usize),
    /// `assigns[:name]`: the assign, or nil when not given.
    AssignOrNil(usize),
    Field(Box<Code>, Str),
    Index(Box<Code>, Box<Code>),
    Unary(UnOp, Box<Code>),
    Binary(BinOp, Box<Code>, Box<Code>),
    List(Vec<Code>),
    Tuple(Vec<Code>),
    Map(Vec<(Code, Code)>),
    /// `"a#{b}"`: each part through `to_string`, joined.
    Interp(Vec<Code>),
    /// One-line `if`: condition, negated, then, else.
    If(Box<Code>, bool, Box<Code>, Option<Box<Code>>),
    /// `first..last` where a list is wanted (an `Enum` function's argument): built, one step
    /// per element.
    RangeList(Box<Code>, Box<Code>),
    /// `x in first..last`, without building the range.
    InRange(Box<Code>, Box<Code>, Box<Code>),
    /// A built-in function (`Enum.join`, `String.length`...).
    Builtin(Builtin, Vec<Code>),
    /// A built-in that takes a function (`Enum.map(xs, fn x -> ... end)`): the VM calls it
    /// (`vm/higher.rs`). Told apart at compile time, so that other built-ins pay no check.
    HigherOrder(Builtin, Vec<Code>),
    /// `case subject do ... end` inside one expression: the clauses as a one-parameter
    /// function's, applied to the subject (`vm/higher.rs`).
    Case(Box<Code>, Box<FnCode>),
    /// An anonymous function: only an argument of a built-in that takes one (`Enum.map`).
    Fn(Box<FnCode>),
    /// A parameter of an anonymous function, by its slot among the render's function slots.
    FnLocal(usize),
    /// `for x <- xs, filter, do: body`: a list.
    For(Box<ForCode>),
    /// The body of a `fn` block's clause: instructions of the program from `start`, run in a
    /// copy of the frame, their output the value (`vm/block.rs`).
    Block(Box<BlockCode>),
    /// A function registered from Rust, by its index in the catalog's functions.
    Native(usize, Vec<Code>),
    Raw(Box<Code>),
    Partial {
        partial: usize,
        args: PartialArgs,
    },
    /// Phoenix's `assigns` as a value: a map of the frame's assigns that were given.
    AllAssigns,
}

/// The assigns a partial is called with.
#[derive(Debug)]
pub(crate) enum PartialArgs {
    /// `render("x.html", key: value)`: each assign by name.
    Keywords(Vec<(Str, Code)>),
    /// `render("x.html", assigns)`, `render("x.html", Map.put(...))`: a map (or a keyword
    /// list) computed at render time, its keys the partial's assigns.
    Value(Box<Code>),
}

/// Default [`Limits::max_steps`]: 100 million instructions and expression nodes: one to two
/// seconds of CPU on the development machine, far above any page (the 100x100 big table takes
/// about 20 thousand), far below "forever".
pub const DEFAULT_MAX_STEPS: u64 = 100_000_000;

/// Default [`Limits::max_memory`]: 64 MiB of values built per render. Ordinary pages build a
/// few kilobytes of values (strings joined, lists filtered, maps grouped) and far under a
/// megabyte even for the 100x100 big table's kind of data; 64 MiB is the size the old cap on
/// one `String.duplicate` already allowed, and a server rendering on, say, 8 threads at once
/// then holds at most half a gigabyte of template values, where one unbounded render reached
/// 3.5 GB. Output is bounded apart ([`Limits::max_output`], streaming).
pub const DEFAULT_MAX_MEMORY: usize = 64 << 20;

/// Default [`Limits::max_output`]: 1 GiB. A page bigger than that should be streamed
/// (`Engine::stream` has no output limit; its memory is bounded by the chunk size).
pub const DEFAULT_MAX_OUTPUT: usize = 1 << 30;

/// Default [`Limits::max_depth`]: partials nested 64 deep. A guess: real sites nest a few levels;
/// this stops a partial that renders itself.
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// Default `Engine::copy_below`, in bytes: static text and values shorter than this are
/// copied into the render's buffers; longer ones are referenced. The BEAM's
/// `ERL_SMALL_IO_BIN_LIMIT` is 256; the `copy_below` group of `cargo bench -p galleon-lab
/// --bench render` found every threshold from 16 up equal within noise, so galleon keeps the
/// BEAM's value, which stays below the 301-byte Doom and 410-byte Blah blocks (these must be
/// referenced). Figures: `bench/results/`.
pub const DEFAULT_COPY_BELOW: usize = 256;

/// Default `Engine::value_copy_below`, in bytes: strings and safe HTML from assigns shorter than
/// this are copied into the render's buffer instead of referenced. A reference to a value costs a
/// reference count on the value's own cache line, a segment, and (under 4 KiB, the write
/// policy's `coalesce_below`) a copy at write time anyway; `galleon bench cache` measured the copy
/// cheaper at every string length up to 4 KiB and every working-set size.
pub const DEFAULT_VALUE_COPY_BELOW: usize = 4096;

/// Bounds on one render, so that no template runs forever or eats memory silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Ops executed plus expression nodes evaluated (plus one per 64 bytes of string built).
    /// For `Engine::render` the budget covers the whole render; for `Engine::stream` it is
    /// refilled for each chunk, so an endless stream is fine but a loop that outputs nothing is not.
    pub max_steps: u64,
    /// Most bytes `Engine::render` (and a partial called inside an expression) may produce.
    pub max_output: usize,
    /// Deepest nesting of partials.
    pub max_depth: usize,
    /// Most bytes of values (strings, lists, tuples, maps, ranges made lists) a render may
    /// build, counted as they are built, before the allocation when its size is known (a
    /// `String.duplicate` of 1 GB fails without allocating it), never credited back when they
    /// are freed; refilled for each chunk of `Engine::stream`, as steps are. Approximate: a list
    /// costs its length times the size of a `Value`, a map entry about 80 bytes. Output is not
    /// counted here (`max_output`).
    pub max_memory: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_steps: DEFAULT_MAX_STEPS,
            max_output: DEFAULT_MAX_OUTPUT,
            max_depth: DEFAULT_MAX_DEPTH,
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

/// Per-engine render settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) limits: Limits,
    pub(crate) copy_below: usize,
    pub(crate) value_copy_below: usize,
}

/// Every compiled template, by index and by name.
#[derive(Debug)]
pub(crate) struct Catalog {
    /// Unique per catalog in this process (see `TemplateId`).
    pub(crate) serial: u64,
    pub(crate) programs: Vec<Program>,
    pub(crate) by_name: BTreeMap<String, usize>,
    /// The same names, for the lookup of every render by name.
    pub(crate) names: Names,
    /// Functions registered from Rust, indexed by [`CodeKind::Native`].
    pub(crate) functions: Arc<[Function]>,
}
