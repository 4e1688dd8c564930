//! Templates using shapes the derive does not compile natively (`case`, `cond`, pattern
//! matching, arithmetic, functions, partials, `.key` or `for` on dynamic values...) render
//! through the runtime engine: compiled once from the sources embedded in the binary, the
//! fields converted with `Value::from_serialize` (so they must implement `serde::Serialize`).
//!
//! Each field the template reads is converted through a trait generated for the template,
//! implemented for every `compiled::ToAssign` type (`serde::Serialize` ones and `Value`). Its
//! `#[diagnostic::on_unimplemented]` text names the construct that forced the fallback and where
//! it is, and `#[diagnostic::do_not_recommend]` on its impl makes rustc report that trait (with
//! that text, at the field's type) rather than the bare `Item: serde::Serialize` deep inside the
//! impl's bounds.

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

use crate::attrs::{Config, Field};
use crate::expr::member;
use crate::not_native::NotNative;

/// A template rendered by the engine: the items it needs beside the impl (the conversion trait)
/// and the `Template` methods. `assigns` are the fields the template reads; `why` is the
/// construct that forced the fallback.
pub(crate) fn methods(
    config: &Config,
    fields: &BTreeMap<String, Field>,
    assigns: &[String],
    why: &NotNative,
) -> syn::Result<(TokenStream, TokenStream)> {
    let (trim, copy_below) = (config.trim, config.copy_below);
    let mut partials = Vec::new();
    for (name, path) in &config.partials {
        let path = path.to_string_lossy().into_owned();
        partials.push(quote! { (#name, include_str!(#path)) });
    }
    let [message, label, derive, rewrite, native] =
        why.serialize_diagnostic(&config.name, &config.source);
    let items = quote! {
        #[diagnostic::on_unimplemented(
            message = #message,
            label = #label,
            note = #derive,
            note = #rewrite,
            note = #native,
        )]
        trait SerializeForRuntimeEngine {
            fn __assign(
                &self,
                assigns: &mut ::galleon_template::Assigns,
                name: &str,
            ) -> ::core::result::Result<(), ::galleon_template::Error>;
        }

        #[diagnostic::do_not_recommend]
        impl<T: ::galleon_template::compiled::ToAssign + ?::core::marker::Sized>
            SerializeForRuntimeEngine for T
        {
            #[inline]
            fn __assign(
                &self,
                assigns: &mut ::galleon_template::Assigns,
                name: &str,
            ) -> ::core::result::Result<(), ::galleon_template::Error> {
                ::galleon_template::compiled::assign(assigns, name, self)
            }
        }
    };
    let mut inserts = Vec::new();
    for name in assigns {
        let m = member(name).ok_or_else(|| {
            syn::Error::new(config.span, format!("assign @{name} is not a field name"))
        })?;
        let field = fields
            .get(name)
            .ok_or_else(|| syn::Error::new(config.span, format!("unknown assign @{name}")))?;
        // The call spanned at the field's type: a type that is not `Serialize` is reported
        // there, once per field.
        let ty = &field.ty;
        let convert = quote_spanned!(field.span=> <#ty as SerializeForRuntimeEngine>::__assign);
        inserts.push(quote! {
            #convert(&self.#m, &mut __assigns, #name)?;
        });
    }
    let fb = format_ident!("__FALLBACK");
    let prelude = quote! {
        static #fb: ::galleon_template::compiled::Fallback =
            ::galleon_template::compiled::Fallback::new();
        let __engine = #fb.engine(&[(__NAME, __SOURCE), #(#partials),*], #trim, #copy_below)?;
        let mut __assigns = ::galleon_template::Assigns::new();
        #(#inserts)*
    };
    let methods = quote! {
        fn __run<const PAUSE: bool>(
            &self,
            __out: &mut ::galleon_template::compiled::Out,
            __st: &mut [usize],
            __limit: usize,
        ) -> ::core::result::Result<bool, ::galleon_template::Error> {
            if let ::core::option::Option::Some(r) = self.__engine_render() {
                __out.push_list(r?);
            }
            ::core::result::Result::Ok(true)
        }

        fn __engine_render(
            &self,
        ) -> ::core::option::Option<
            ::core::result::Result<::galleon_template::compiled::IoList, ::galleon_template::Error>,
        > {
            let r = (|| {
                #prelude
                __engine.render(__NAME, &__assigns)
            })();
            ::core::option::Option::Some(r)
        }

        fn __engine_render_or_stream(
            &self,
            __max_whole: usize,
            __chunk: usize,
        ) -> ::core::option::Option<
            ::core::result::Result<::galleon_template::Rendered, ::galleon_template::Error>,
        > {
            let r = (|| {
                #prelude
                __engine.render_or_stream(
                    __NAME,
                    |k: &str| __assigns.get(k).cloned(),
                    __max_whole,
                    __chunk,
                )
            })();
            ::core::option::Option::Some(r)
        }

        fn __engine_stream(
            &self,
            __chunk: usize,
        ) -> ::core::option::Option<
            ::core::result::Result<::galleon_template::RenderStream, ::galleon_template::Error>,
        > {
            let r = (|| {
                #prelude
                __engine.stream(__NAME, __assigns, __chunk)
            })();
            ::core::option::Option::Some(r)
        }
    };
    Ok((items, methods))
}
