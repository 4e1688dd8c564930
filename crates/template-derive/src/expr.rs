//! Expressions compiled natively: assigns (fields), variables, `a.key` on typed values,
//! literals, comparisons, `!`/`not`, and `and`/`or`/`&&`/`||` as conditions. Anything else is
//! [`NotNative`], naming the expression: the whole template then renders through the runtime
//! engine.

use galleon_template::Value;
use galleon_template::syntax::{BinOp, Expr, ExprKind, UnOp};
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;

use crate::attrs::Kind;
use crate::names::var_ident;
use crate::not_native::{NotNative, R};
use crate::stmt::Gen;

/// The assign `e` reads: `@name` and Phoenix's `assigns.name` (`false`), or `assigns[:name]`
/// (`true`: nil when not given).
pub(crate) fn assign_read(e: &Expr) -> Option<(&str, bool)> {
    let is_assigns = |m: &Expr| matches!(&m.kind, ExprKind::Var(n) if n == "assigns");
    match &e.kind {
        ExprKind::Assign(name) => Some((name, false)),
        ExprKind::Field(m, key) if is_assigns(m) => Some((key, false)),
        ExprKind::Index(m, key) if is_assigns(m) => match &key.kind {
            ExprKind::Lit(Value::Atom(k) | Value::Str(k)) => Some((k.as_str(), true)),
            _ => None,
        },
        _ => None,
    }
}

/// A field or key name as a Rust identifier (raw when it is a keyword); `None` when it cannot
/// be one (`admin?`, `self`).
pub(crate) fn member(name: &str) -> Option<Ident> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    if matches!(name, "self" | "Self" | "super" | "crate" | "_") {
        return None;
    }
    if syn::parse_str::<Ident>(name).is_ok() {
        Some(Ident::new(name, Span::call_site()))
    } else {
        Some(Ident::new_raw(name, Span::call_site()))
    }
}

impl Gen<'_> {
    /// `result?`, the error located at `e`.
    pub(crate) fn located(&self, e: &Expr, result: TokenStream) -> TokenStream {
        let (s, t) = (e.span.start, e.span.end);
        quote! {
            (#result).map_err(|e| ::galleon_template::compiled::locate(e, __NAME, __SOURCE, #s, #t))?
        }
    }

    /// A Rust expression for `e`'s value (a place or a temporary), and its kind.
    pub(crate) fn value(&mut self, e: &Expr) -> R<(TokenStream, Kind)> {
        // `assigns` is Phoenix's map unless a template variable has that name.
        if let Some((name, optional)) = assign_read(e)
            && (matches!(e.kind, ExprKind::Assign(_)) || self.lookup("assigns").is_none())
        {
            return match self.fields.get(name) {
                Some(field) => {
                    let m = member(name).ok_or_else(|| NotNative::expr(e))?;
                    Ok((quote! { self.#m }, field.kind))
                }
                // A typed nil: renders nothing, compares and tests as nil.
                None if optional => Ok((
                    quote! { ::core::option::Option::<&'static str>::None },
                    Kind::Typed,
                )),
                None => Err(NotNative::expr(e)),
            };
        }
        Ok(match &e.kind {
            ExprKind::Lit(v) => (literal(v).ok_or_else(|| NotNative::expr(e))?, Kind::Typed),
            ExprKind::Var(name) => {
                let kind = self.lookup(name).ok_or_else(|| NotNative::expr(e))?;
                let v = var_ident(name);
                (quote! { #v }, kind)
            }
            ExprKind::Field(x, key) => {
                let (x, kind) = self.value(x)?;
                if kind != Kind::Typed {
                    return Err(NotNative::new(
                        e.span,
                        format!("`.{key}` on a `Value` or a map"),
                    ));
                }
                let m = member(key).ok_or_else(|| {
                    NotNative::new(e.span, format!("the key `{key}`, not a Rust field name"))
                })?;
                // Through `Option`s: `None` is `nil`, whose keys are the engine's error.
                let base = self.located(
                    e,
                    quote! {{
                        use ::galleon_template::compiled::{BaseAny as _, BaseOption as _};
                        (&&::galleon_template::compiled::Probe(&(#x))).__base(#key)
                    }},
                );
                (quote! { (#base).#m }, Kind::Typed)
            }
            ExprKind::Binary(
                op @ (BinOp::Eq
                | BinOp::Ne
                | BinOp::StrictEq
                | BinOp::StrictNe
                | BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge),
                a,
                b,
            ) => (self.comparison(e, *op, a, b)?, Kind::Typed),
            ExprKind::Unary(UnOp::Bang | UnOp::Not, _) => (self.cond(e)?, Kind::Typed),
            _ => return Err(NotNative::expr(e)),
        })
    }

    /// `ToScalar::scalar(&(x))` of `e`'s value.
    pub(crate) fn scalar(&mut self, e: &Expr) -> R<TokenStream> {
        let (v, _) = self.value(e)?;
        Ok(quote! { ::galleon_template::compiled::ToScalar::scalar(&(#v)) })
    }

    fn comparison(&mut self, e: &Expr, op: BinOp, a: &Expr, b: &Expr) -> R<TokenStream> {
        let (a, b) = (self.scalar(a)?, self.scalar(b)?);
        let c = quote! { ::galleon_template::compiled };
        Ok(match op {
            BinOp::Eq => quote! { #c::eq(#a, #b) },
            BinOp::Ne => quote! { !#c::eq(#a, #b) },
            BinOp::StrictEq => quote! { #c::strict_eq(#a, #b) },
            BinOp::StrictNe => quote! { !#c::strict_eq(#a, #b) },
            _ => {
                let sym = op.symbol();
                self.located(e, quote! { #c::compare(#sym, #a, #b) })
            }
        })
    }

    /// A Rust `bool` expression: `e`'s truthiness, as `if`, `unless` and `for` filters test it.
    pub(crate) fn cond(&mut self, e: &Expr) -> R<TokenStream> {
        let c = quote! { ::galleon_template::compiled };
        Ok(match &e.kind {
            ExprKind::Unary(UnOp::Bang, x) => {
                let x = self.cond(x)?;
                quote! { !(#x) }
            }
            ExprKind::Unary(UnOp::Not, x) => {
                let x = self.scalar(x)?;
                let b = self.located(e, quote! { #c::strict_bool("not", #x) });
                quote! { !(#b) }
            }
            ExprKind::Binary(BinOp::AndAlso, a, b) => {
                let (a, b) = (self.cond(a)?, self.cond(b)?);
                quote! { ((#a) && (#b)) }
            }
            ExprKind::Binary(BinOp::OrElse, a, b) => {
                let (a, b) = (self.cond(a)?, self.cond(b)?);
                quote! { ((#a) || (#b)) }
            }
            // Strict on the left only: `true and 5` is 5, as in Elixir.
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                let x = self.scalar(a)?;
                let sym = op.symbol();
                let a = self.located(e, quote! { #c::strict_bool(#sym, #x) });
                let b = self.cond(b)?;
                if *op == BinOp::And {
                    quote! { ((#a) && (#b)) }
                } else {
                    quote! { ((#a) || (#b)) }
                }
            }
            ExprKind::Binary(
                op @ (BinOp::Eq
                | BinOp::Ne
                | BinOp::StrictEq
                | BinOp::StrictNe
                | BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge),
                a,
                b,
            ) => self.comparison(e, *op, a, b)?,
            _ => {
                // Scalars by their value, `Option`s of anything else by `None`, the rest true.
                let (v, _) = self.value(e)?;
                quote! {{
                    use ::galleon_template::compiled::{TruthyAny as _, TruthyOption as _, TruthyScalar as _};
                    (&&&::galleon_template::compiled::Probe(&(#v))).__truthy()
                }}
            }
        })
    }
}

/// A scalar literal as a Rust expression of a type with the same output and comparisons; `None`
/// for the others (atoms, lists...).
fn literal(v: &Value) -> Option<TokenStream> {
    Some(match v {
        Value::Nil => quote! { ::galleon_template::compiled::Scalar::Nil },
        Value::Bool(b) => quote! { #b },
        Value::Int(i64::MIN) => quote! { i64::MIN },
        Value::Int(i) if *i < 0 => {
            let l = Literal::i64_suffixed(-*i);
            quote! { (-#l) }
        }
        Value::Int(i) => {
            let l = Literal::i64_suffixed(*i);
            quote! { #l }
        }
        Value::Float(x) if x.is_finite() && x.is_sign_negative() => {
            let l = Literal::f64_suffixed(-*x);
            quote! { (-#l) }
        }
        Value::Float(x) if x.is_finite() => {
            let l = Literal::f64_suffixed(*x);
            quote! { #l }
        }
        Value::Str(s) => {
            let s = s.as_str();
            quote! { #s }
        }
        _ => return None,
    })
}
