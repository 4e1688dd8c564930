//! Renders called inside an expression: a partial (`render("row.html.eex", ...)` as a value)
//! and the body of a `fn` block's clause (`Enum.map(@items, fn item -> %>...<% end)`), each by
//! a VM of its own whose output becomes the value, safe HTML.

use galleon_iolist::IoList;
use smallvec::SmallVec;

use super::eval::Eval;
use super::frame::Frame;
use crate::ast::Span;
use crate::budget;
use crate::error::{Error, ErrorKind};
use crate::program::BlockCode;
use crate::value::Value;

impl Eval<'_> {
    /// Runs `frame` to its end (a partial's, or a `fn` block's body returning): its output as
    /// safe HTML, within the output limit and the memory left (the output is a value).
    /// Out of line, as the other rare forms: `eval`'s frame, which recursion multiplies, stays
    /// small.
    #[inline(never)]
    pub(super) fn nested(&mut self, frame: Frame, span: Span) -> Result<Value, Error> {
        let mut html = IoList::new();
        let max = self.config.limits.max_output;
        let room = usize::try_from(budget::left()).unwrap_or(usize::MAX);
        let done = (self.partial)(
            self.catalog,
            self.config,
            frame,
            self.steps,
            self.depth,
            &mut html,
            max.min(room).saturating_add(1),
        );
        if !done? {
            if room < max {
                return Err(self.memory_limit(span));
            }
            return Err(self.err(
                ErrorKind::Limit,
                span,
                format!("output exceeds the limit of {max} bytes"),
            ));
        }
        Ok(Value::safe(html))
    }

    /// A `fn` block's clause body: its instructions, in a copy of this frame's variables and
    /// assigns with the clause's parameters moved in. Nested as deep as partials may be.
    #[inline(never)]
    pub(super) fn block(&mut self, b: &BlockCode, span: Span) -> Result<Value, Error> {
        if self.depth >= self.config.limits.max_depth {
            return Err(self.err(
                ErrorKind::Limit,
                span,
                format!(
                    "functions and partials nested more than {} deep",
                    self.config.limits.max_depth
                ),
            ));
        }
        let mut locals = self.frame.locals.clone();
        for &(from, to) in &b.moves {
            if let (Some(v), Some(slot)) = (self.fn_locals.get(from), locals.get_mut(to)) {
                *slot = v.clone();
            }
        }
        let frame = Frame {
            prog: self.frame.prog,
            pc: b.start,
            locals,
            assigns: self.frame.assigns.clone(),
            loops: SmallVec::new(),
        };
        self.nested(frame, span)
    }
}
