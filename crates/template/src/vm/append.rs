//! Appending to a function parameter in place (`acc <> w`, `acc ++ [w]` in `Enum.reduce`):
//! while the parameter holds the only reference to its buffer, the append writes into it, so
//! building a string or a list in a reduce is amortised linear, as the BEAM's binary append is.

use super::eval::{BYTES_PER_STEP, Eval};
use crate::ast::Span;
use crate::budget::ELEMENT_BYTES;
use crate::error::Error;
use crate::list::List;
use crate::value::Value;

impl Eval<'_> {
    /// `acc <> y` where `acc` is the function parameter in `slot`, appended in place when the
    /// parameter holds the only reference to its string (as `Enum.reduce` leaves its
    /// accumulator): amortised linear, like the BEAM's binary append, where copying would
    /// make a reduce quadratic. The parameter keeps its value (a view of the buffer's first
    /// bytes). `None` when the operands are not two strings or the buffer is shared: the
    /// caller evaluates `acc <> y` by copying (and reports a type error the usual way).
    pub(super) fn append_to_local(
        &mut self,
        slot: usize,
        y: &Value,
        span: Span,
    ) -> Result<Option<Value>, Error> {
        if let (Some(Value::List(_)), Value::List(tail)) = (self.fn_locals.get(slot), y) {
            return self.extend_local(slot, tail, span);
        }
        let (Some(Value::Str(acc)), Value::Str(tail)) = (self.fn_locals.get_mut(slot), y) else {
            return Ok(None);
        };
        let (whole, prefix, grown) = match std::mem::take(acc).append_unique(tail.as_str()) {
            Ok(done) => done,
            Err(back) => {
                *acc = back;
                return Ok(None);
            }
        };
        *acc = prefix;
        // Bytes written, plus the copy into a grown buffer; growth is charged as it happens.
        let copied = tail.len() + if grown > 0 { whole.len() } else { 0 };
        self.tick(span, (copied / BYTES_PER_STEP) as u64)?;
        self.alloc(span, grown.max(tail.len()))?;
        Ok(Some(Value::Str(whole)))
    }

    /// `acc ++ tail` as [`Eval::append_to_local`] does `acc <> tail`: in place while the
    /// parameter holds the only reference to its list's buffer, so a reduce building a list is
    /// amortised linear (the BEAM copies the left list each time).
    #[inline(never)]
    fn extend_local(
        &mut self,
        slot: usize,
        tail: &List,
        span: Span,
    ) -> Result<Option<Value>, Error> {
        let Some(Value::List(acc)) = self.fn_locals.get_mut(slot) else {
            return Ok(None);
        };
        let (whole, prefix, grown) = match std::mem::take(acc).append_unique(tail) {
            Ok(done) => done,
            Err(back) => {
                *acc = back;
                return Ok(None);
            }
        };
        *acc = prefix;
        // Elements written, plus the move into a grown buffer; growth is charged as it happens.
        let moved = tail.len() + if grown > 0 { whole.len() } else { 0 };
        self.tick(span, moved as u64)?;
        self.alloc(span, grown.max(tail.len().saturating_mul(ELEMENT_BYTES)))?;
        Ok(Some(Value::List(whole)))
    }
}
