//! Static text: byte-string literals, copied when short and referenced when long; and constant
//! expressions folded into static text at build time by the runtime engine itself.

use galleon_template::syntax::{Expr, ExprKind};
use galleon_template::{Assigns, Engine};
use proc_macro2::{Literal, TokenStream};
use quote::quote;

/// Code writing `bytes`: a constant-size copy into the buffer below `copy_below` bytes, a
/// `&'static` segment (the literal in the binary's read-only data) from there on.
pub(crate) fn emit(bytes: &[u8], copy_below: usize) -> TokenStream {
    if bytes.is_empty() {
        return TokenStream::new();
    }
    let lit = Literal::byte_string(bytes);
    if bytes.len() >= copy_below {
        quote! { __out.push_static(#lit); }
    } else {
        quote! { __out.copy(#lit); }
    }
}

/// Bytes of the block a static-only loop body is repeated into (the engine's `REPEAT_BLOCK`).
const REPEAT_BLOCK: usize = 32 * 1024;

/// A `for` over a range whose body is static text `unit` alone: the text repeated into one
/// static block at build time, output a prefix of the block at a time (so a loop of short
/// bodies is a few large segments, not one per iteration). `range` evaluates to the range from
/// the resume point; `slot` is the loop's state slot; `saves` saves the enclosing positions.
pub(crate) fn repeat(
    unit: &[u8],
    slot: usize,
    range: &TokenStream,
    saves: &TokenStream,
    copy_below: usize,
) -> TokenStream {
    let copies = (REPEAT_BLOCK / unit.len()).max(1);
    let block = Literal::byte_string(&unit.repeat(copies));
    let (len, copies) = (unit.len(), copies as u64);
    let s = quote::format_ident!("__s{}", slot);
    let i = quote::format_ident!("__i{}", slot);
    quote! {
        let #s: usize = if PAUSE { ::core::mem::take(&mut __st[#slot]) } else { 0 };
        let mut #i: usize = #s;
        let mut __left: u64 = ::galleon_template::compiled::range_len(&#range);
        while __left > 0 {
            let mut __k = __left.min(#copies);
            if PAUSE {
                // No further than the iteration reaching the limit, where a loop run one
                // iteration at a time would pause.
                let __to = __limit.saturating_sub(__out.len()).div_ceil(#len).max(1) as u64;
                __k = __k.min(__to);
            }
            let __bytes: &'static [u8] = #block;
            let __piece = &__bytes[..__k as usize * #len];
            if __piece.len() >= #copy_below {
                __out.push_static(__piece);
            } else {
                __out.copy(__piece);
            }
            __left -= __k;
            #i += __k as usize;
            if PAUSE && __out.len() >= __limit {
                __st[#slot] = #i;
                #saves
                return ::core::result::Result::Ok(false);
            }
        }
    }
}

/// True when `e` reads no assign and no variable (and calls no partial): its value is the same
/// on every render.
pub(crate) fn is_closed(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Lit(_) => true,
        // A function's parameters are variables: not folded (the template renders through the
        // engine, where the call runs).
        ExprKind::Assign(_)
        | ExprKind::Var(_)
        | ExprKind::Fn(_)
        | ExprKind::FnBlock(_)
        | ExprKind::For { .. }
        | ExprKind::Case { .. } => false,
        ExprKind::Field(x, _) | ExprKind::Unary(_, x) => is_closed(x),
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Range(a, b) => {
            is_closed(a) && is_closed(b)
        }
        ExprKind::List(xs) | ExprKind::Tuple(xs) | ExprKind::Interp(xs) => xs.iter().all(is_closed),
        ExprKind::Map(kvs) => kvs.iter().all(|(k, v)| is_closed(k) && is_closed(v)),
        ExprKind::If {
            cond,
            then,
            otherwise,
            ..
        } => is_closed(cond) && is_closed(then) && otherwise.as_deref().is_none_or(is_closed),
        ExprKind::Call {
            name, args, kwargs, ..
        } => {
            name != "render"
                && args.iter().all(is_closed)
                && kwargs.iter().all(|(_, _, v)| is_closed(v))
        }
    }
}

/// The output of `<%= e %>` (`output`) or the evaluation of `<% e %>` for a closed `e`,
/// computed now by the runtime engine; `None` when it fails (left to run time, where it fails
/// the same way).
pub(crate) fn fold(source: &str, e: &Expr, output: bool) -> Option<Vec<u8>> {
    let text = source.get(e.span.start..e.span.end)?;
    let tag = if output { "<%=" } else { "<%" };
    let engine = Engine::from_source("const", &format!("{tag} {text} %>")).ok()?;
    Some(engine.render("const", &Assigns::new()).ok()?.to_vec())
}
