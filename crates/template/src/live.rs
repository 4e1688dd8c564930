//! Live renders: a template compiled with [`EngineBuilder::live`] rendered as Phoenix LiveView's
//! `LiveRender` tree (each block's statics apart from its dynamics, a `for` as a comprehension
//! whose rows share their statics), and the JSON diff between two renders that the
//! `phoenix_live_view` client merges: statics only where the client lacks them, only the
//! dynamics that changed, only the rows that changed.
//!
//! A dynamic at the top of the template whose assigns did not change is not evaluated at all
//! (the compiler knows which assigns each reads); its previous value is kept.
//!
//! [`EngineBuilder::live`]: crate::EngineBuilder::live

use std::fmt::Write as _;
use std::sync::Arc;

use galleon_iolist::IoList;

use crate::engine::Engine;
use crate::error::{Error, ErrorKind};
use crate::program::{Catalog, Config};
use crate::value::Value;
use crate::vm::{Recorded, Vm};

/// A template of a live engine, ready to render as a [`LiveRender`] tree. Cheap to clone.
///
/// # Examples
///
/// ```
/// use galleon_template::{Changed, Engine, Value};
///
/// let engine = Engine::builder()
///     .live(true)
///     .from_source("counter", "<p>Count: <%= @count %></p><b><%= @label %></b>")
///     .unwrap();
/// let t = engine.live("counter").unwrap();
/// let assigns = |count: i64| move |name: &str| match name {
///     "count" => Some(Value::Int(count)),
///     "label" => Some(Value::from("clicks")),
///     _ => None,
/// };
/// let first = t.render(assigns(0), Changed::All, None).unwrap();
/// assert_eq!(t.to_html(&first), "<p>Count: 0</p><b>clicks</b>");
/// let mut json = String::new();
/// t.diff(None, &first, &mut json);
/// assert_eq!(json, r#"{"0":"0","1":"clicks","s":["<p>Count: ","</p><b>","</b>"]}"#);
///
/// // Only `count` changed: `@label` is not evaluated, and only the count is sent.
/// let next = t.render(assigns(1), Changed::Only(&|n| n == "count"), Some(&first)).unwrap();
/// json.clear();
/// t.diff(Some(&first), &next, &mut json);
/// assert_eq!(json, r#"{"0":"1"}"#);
/// ```
#[derive(Debug, Clone)]
pub struct LiveTemplate {
    catalog: Arc<Catalog>,
    config: Config,
    index: usize,
    blocks: Arc<[Vec<String>]>,
}

/// Which assigns changed since the render a client holds.
#[derive(Clone, Copy)]
pub enum Changed<'a> {
    /// Every assign (a first render, or after a reload).
    All,
    /// Those the function says changed.
    Only(&'a dyn Fn(&str) -> bool),
}

impl std::fmt::Debug for Changed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Changed::All => "Changed::All",
            Changed::Only(_) => "Changed::Only(..)",
        })
    }
}

/// The old row that new row `i` equals, if it moved: looked for where the last move put rows
/// (`shift`) and one place either side, so an insertion or a removal anywhere costs a number
/// per later row instead of its values, in time linear in the rows.
fn moved_from(old: &[Vec<Dynamic>], row: &[Dynamic], i: usize, shift: isize) -> Option<usize> {
    let at = |d: isize| usize::try_from(i as isize - d).ok().filter(|&j| j != i);
    [at(shift), at(1), at(-1)]
        .into_iter()
        .flatten()
        .find(|&j| old.get(j).is_some_and(|r| r[..] == *row))
}

/// One render of a [`LiveTemplate`]: the values of every dynamic, by block.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRender {
    block: u32,
    dyns: Vec<Dynamic>,
}

/// The value of one dynamic.
#[derive(Debug, Clone, PartialEq)]
enum Dynamic {
    /// Output text (already escaped).
    Text(Arc<str>),
    /// A branch of an `if`, `case` or `cond`, with its own statics.
    Block(Arc<LiveRender>),
    /// A `for`: one row of dynamics per element, sharing the body block's statics.
    Comp(Arc<Comp>),
}

#[derive(Debug, PartialEq)]
struct Comp {
    block: u32,
    rows: Vec<Vec<Dynamic>>,
}

impl Engine {
    /// Template `name` for live renders; the engine must be built with
    /// [`EngineBuilder::live`](crate::EngineBuilder::live).
    pub fn live(&self, name: &str) -> Result<LiveTemplate, Error> {
        let index = self.index(name)?;
        let blocks = self.catalog.programs[index].live.clone().ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("`{name}` was not compiled for live renders (EngineBuilder::live)"),
            )
        })?;
        Ok(LiveTemplate {
            catalog: Arc::clone(&self.catalog),
            config: self.config,
            index,
            blocks,
        })
    }
}

impl LiveTemplate {
    /// The names of the assigns the template reads.
    pub fn assigns(&self) -> &[String] {
        &self.catalog.programs[self.index].assigns
    }

    /// The template's name.
    pub fn name(&self) -> &str {
        &self.catalog.programs[self.index].name
    }

    /// Renders with the assigns `assign` gives. Dynamics at the top of the template whose
    /// assigns did not change (by `changed`) are not evaluated: their values are taken from
    /// `previous`, which must be this template's last render (with no previous render,
    /// everything is evaluated).
    pub fn render(
        &self,
        assign: impl Fn(&str) -> Option<Value>,
        changed: Changed<'_>,
        previous: Option<&LiveRender>,
    ) -> Result<LiveRender, Error> {
        let prog = &self.catalog.programs[self.index];
        let changed = match (changed, previous) {
            (Changed::Only(f), Some(_)) => Some(prog.assigns.iter().map(|n| f(n)).collect()),
            _ => None,
        };
        let mut out = IoList::new();
        let marks = Vm::live(
            &self.catalog,
            self.config,
            self.index,
            assign,
            changed,
            &mut out,
        )?;
        let bytes = out.to_vec();
        let mut p = Parse {
            marks: &marks,
            at: 0,
            bytes: &bytes,
        };
        let dyns = p
            .dynamics(previous.map(|r| &r.dyns[..]), true)
            .ok_or_else(|| Error::new(ErrorKind::Data, "live render: marks out of order"))?;
        Ok(LiveRender { block: 0, dyns })
    }

    /// The page as HTML: every block's statics around its dynamics.
    pub fn to_html(&self, r: &LiveRender) -> String {
        let mut s = String::new();
        self.html_block(r.block, &r.dyns, &mut s);
        s
    }

    fn html_block(&self, block: u32, dyns: &[Dynamic], s: &mut String) {
        let statics = &self.blocks[block as usize];
        for (i, st) in statics.iter().enumerate() {
            s.push_str(st);
            match dyns.get(i) {
                Some(Dynamic::Text(t)) => s.push_str(t),
                Some(Dynamic::Block(b)) => self.html_block(b.block, &b.dyns, s),
                Some(Dynamic::Comp(c)) => {
                    for row in &c.rows {
                        self.html_block(c.block, row, s);
                    }
                }
                None => {}
            }
        }
    }

    /// Appends to `out` the JSON diff that takes a client holding `old` to `new` (the whole
    /// render, statics included, when `old` is `None`): `{}` when nothing changed. Returns
    /// whether anything did.
    pub fn diff(&self, old: Option<&LiveRender>, new: &LiveRender, out: &mut String) -> bool {
        match old {
            Some(o) if o.block == new.block => {
                let start = out.len();
                out.push('{');
                let any = self.diff_dyns(&o.dyns, &new.dyns, out);
                out.push('}');
                if !any {
                    out.truncate(start);
                    out.push_str("{}");
                }
                any
            }
            _ => {
                self.full_block(new.block, &new.dyns, out);
                true
            }
        }
    }

    /// The changed dynamics of a block as `"i":diff` members; whether there were any.
    fn diff_dyns(&self, old: &[Dynamic], new: &[Dynamic], out: &mut String) -> bool {
        let mut any = false;
        for (i, d) in new.iter().enumerate() {
            let before = out.len();
            if any {
                out.push(',');
            }
            let _ = write!(out, "\"{i}\":");
            if self.diff_dyn(old.get(i), d, out) {
                any = true;
            } else {
                out.truncate(before);
            }
        }
        any
    }

    /// One dynamic's diff; false (and whatever was written is to be dropped) when unchanged.
    fn diff_dyn(&self, old: Option<&Dynamic>, new: &Dynamic, out: &mut String) -> bool {
        match (old, new) {
            (Some(Dynamic::Text(a)), Dynamic::Text(b)) if a == b => false,
            (Some(Dynamic::Block(a)), Dynamic::Block(b)) if a.block == b.block => {
                if Arc::ptr_eq(a, b) {
                    return false;
                }
                out.push('{');
                let any = self.diff_dyns(&a.dyns, &b.dyns, out);
                out.push('}');
                any
            }
            (Some(Dynamic::Comp(a)), Dynamic::Comp(b)) if a.block == b.block => {
                if Arc::ptr_eq(a, b) {
                    return false;
                }
                out.push_str("{\"k\":{");
                let (mut any, mut moved) = (false, false);
                // How far rows moved at the last move found: after an insertion or a removal
                // every later row is that far from its old place.
                let mut shift = 0isize;
                for (i, row) in b.rows.iter().enumerate() {
                    if a.rows.get(i) == Some(row) {
                        continue;
                    }
                    let before = out.len();
                    if any {
                        out.push(',');
                    }
                    let _ = write!(out, "\"{i}\":");
                    let changed = if let Some(j) = moved_from(&a.rows, row, i, shift) {
                        // The client copies the old row `j` here (`km` says moves follow).
                        let _ = write!(out, "{j}");
                        shift = i as isize - j as isize;
                        moved = true;
                        true
                    } else {
                        match a.rows.get(i) {
                            Some(old_row) => {
                                out.push('{');
                                let c = self.diff_dyns(old_row, row, out);
                                out.push('}');
                                c
                            }
                            None => {
                                self.full_row(row, out);
                                true
                            }
                        }
                    };
                    if changed {
                        any = true;
                    } else {
                        out.truncate(before);
                    }
                }
                if !any && a.rows.len() == b.rows.len() {
                    return false;
                }
                if any {
                    out.push(',');
                }
                if moved {
                    out.push_str("\"km\":1,");
                }
                let _ = write!(out, "\"kc\":{}}}}}", b.rows.len());
                true
            }
            (_, d) => {
                self.full_dyn(d, out);
                true
            }
        }
    }

    fn full_dyn(&self, d: &Dynamic, out: &mut String) {
        match d {
            Dynamic::Text(t) => json_str(t, out),
            Dynamic::Block(b) => self.full_block(b.block, &b.dyns, out),
            Dynamic::Comp(c) => {
                out.push_str("{\"k\":{");
                for (i, row) in c.rows.iter().enumerate() {
                    let _ = write!(out, "\"{i}\":");
                    self.full_row(row, out);
                    out.push(',');
                }
                let _ = write!(out, "\"kc\":{}}},\"s\":", c.rows.len());
                self.statics(c.block, out);
                out.push('}');
            }
        }
    }

    /// A row's dynamics, whole: `{"0":...,"1":...}`.
    fn full_row(&self, row: &[Dynamic], out: &mut String) {
        out.push('{');
        for (i, d) in row.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "\"{i}\":");
            self.full_dyn(d, out);
        }
        out.push('}');
    }

    fn full_block(&self, block: u32, dyns: &[Dynamic], out: &mut String) {
        out.push('{');
        for (i, d) in dyns.iter().enumerate() {
            let _ = write!(out, "\"{i}\":");
            self.full_dyn(d, out);
            out.push(',');
        }
        out.push_str("\"s\":");
        self.statics(block, out);
        out.push('}');
    }

    fn statics(&self, block: u32, out: &mut String) {
        out.push('[');
        for (i, s) in self.blocks[block as usize].iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json_str(s, out);
        }
        out.push(']');
    }
}

impl LiveRender {
    /// Bytes of dynamic text the render holds (what a client's copy of it costs the server).
    pub fn text_bytes(&self) -> usize {
        fn dyns(d: &[Dynamic]) -> usize {
            d.iter()
                .map(|d| match d {
                    Dynamic::Text(t) => t.len(),
                    Dynamic::Block(b) => dyns(&b.dyns),
                    Dynamic::Comp(c) => c.rows.iter().map(|r| dyns(r)).sum(),
                })
                .sum()
        }
        dyns(&self.dyns)
    }
}

/// Reads the marks of a live render back into dynamics.
struct Parse<'a> {
    marks: &'a [(Recorded, usize)],
    at: usize,
    bytes: &'a [u8],
}

impl Parse<'_> {
    fn next(&mut self) -> Option<(Recorded, usize)> {
        let m = self.marks.get(self.at).copied();
        self.at += 1;
        m
    }

    /// The dynamics of a block (or row) up to its `End` (for the template itself, `root`, the
    /// end of the marks); unchanged ones are taken from `previous`.
    fn dynamics(&mut self, previous: Option<&[Dynamic]>, root: bool) -> Option<Vec<Dynamic>> {
        let mut dyns = Vec::new();
        loop {
            match self.next() {
                None if root => return Some(dyns),
                None => return None,
                Some((Recorded::End, _)) if !root => return Some(dyns),
                Some((Recorded::Dyn, start)) => dyns.push(self.dynamic(start)?),
                Some((Recorded::Unchanged, _)) => {
                    dyns.push(previous?.get(dyns.len())?.clone());
                }
                Some(_) => return None,
            }
        }
    }

    /// A dynamic whose `Dyn` mark was at output length `start`, up to its `End`.
    fn dynamic(&mut self, start: usize) -> Option<Dynamic> {
        match self.next()? {
            (Recorded::End, end) => {
                let text = String::from_utf8_lossy(self.bytes.get(start..end)?);
                Some(Dynamic::Text(Arc::from(text.as_ref())))
            }
            (Recorded::Block(block), _) => {
                let dyns = self.dynamics(None, false)?;
                matches!(self.next()?, (Recorded::End, _))
                    .then(|| Dynamic::Block(Arc::new(LiveRender { block, dyns })))
            }
            (Recorded::Comp(block), _) => {
                let mut rows = Vec::new();
                loop {
                    match self.next()? {
                        (Recorded::Row, _) => rows.push(self.dynamics(None, false)?),
                        (Recorded::End, _) => break,
                        _ => return None,
                    }
                }
                matches!(self.next()?, (Recorded::End, _))
                    .then(|| Dynamic::Comp(Arc::new(Comp { block, rows })))
            }
            _ => None,
        }
    }
}

/// `s` as a JSON string.
fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
