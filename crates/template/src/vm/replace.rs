//! `Regex.replace(re, s, fn whole, group1, ... -> ... end)`: the VM calls the function on each
//! match, with the whole match and as many groups as it takes (`""` for one that did not take
//! part), as Elixir does; with a replacement string it is the plain built-in.

use super::eval::{BYTES_PER_STEP, Eval};
use crate::ast::Span;
use crate::builtins::{self, Builtin};
use crate::error::{Error, ErrorKind};
use crate::ops::describe;
use crate::program::FnCode;
use crate::value::{Str, Value};

impl<'a> Eval<'a> {
    /// `Regex.replace/3,4` on evaluated `values` (regex, string, options), `f` the function
    /// argument if one was given.
    pub(super) fn regex_replace(
        &mut self,
        f: Option<&'a FnCode>,
        values: Vec<Value>,
        span: Span,
    ) -> Result<Value, Error> {
        let scanned = builtins::scanned(Builtin::RegexReplace, &values) / BYTES_PER_STEP;
        self.tick(span, scanned as u64)?;
        let Some(f) = f else {
            return builtins::call(Builtin::RegexReplace, values).map_err(|m| self.failed(span, m));
        };
        let (Some(Value::Regex(r)), Some(Value::Str(s))) = (values.first(), values.get(1)) else {
            let got = values
                .first()
                .map_or_else(|| "nothing".to_owned(), describe);
            return Err(self.failed(span, format!("expected a regex and a string, not {got}")));
        };
        let opts = values.get(2).cloned().unwrap_or_default();
        let global = !matches!(
            builtins::option(&opts, "global").map_err(|m| self.failed(span, m))?,
            Some(Value::Bool(false))
        );
        let s = s.as_str();
        let mut out = String::new();
        let mut last = 0;
        for caps in r.matches(s) {
            let Some(whole) = caps.get(0) else { break };
            let args: Vec<Value> = (0..f.arity)
                .map(|i| Value::from(caps.get(i).map_or("", |m| m.as_str())))
                .collect();
            let bytes = args.iter().map(crate::budget::shallow_size).sum();
            self.alloc(span, bytes)?;
            let refs: Vec<&Value> = args.iter().collect();
            let with = match self.apply(f, &refs)? {
                Value::Str(t) => t,
                // iodata: strings in a list, as Elixir's `IO.iodata_to_binary` joins them.
                list @ Value::List(_) => crate::ops::to_string(&list)
                    .map(Str::from)
                    .map_err(|m| self.failed(f.span, m))?,
                other => {
                    return Err(self.err(
                        ErrorKind::TypeMismatch,
                        f.span,
                        format!(
                            "the replacement function must return a string or a list of strings, not {}",
                            describe(&other)
                        ),
                    ));
                }
            };
            self.alloc(span, whole.start() - last + with.len())?;
            out.push_str(&s[last..whole.start()]);
            out.push_str(with.as_str());
            last = whole.end();
            if !global {
                break;
            }
        }
        self.alloc(span, s.len() - last)?;
        out.push_str(&s[last..]);
        Ok(Value::from(out))
    }
}
