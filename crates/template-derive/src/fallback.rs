//! Templates using shapes the derive does not compile natively (`case`, `cond`, pattern
//! matching, arithmetic, functions, partials, `.key` or `for` on dynamic values...) render
//! through the runtime engine: compiled once from the sources embedded in the binary, the
//! fields converted with `Value::from_serialize` (so they must implement `serde::Serialize`).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::attrs::Config;
use crate::expr::member;

/// The `Template` methods of a template rendered by the engine: `assigns` are the fields the
/// template reads.
pub(crate) fn methods(config: &Config, assigns: &[String]) -> syn::Result<TokenStream> {
    let (trim, copy_below) = (config.trim, config.copy_below);
    let mut partials = Vec::new();
    for (name, path) in &config.partials {
        let path = path.to_string_lossy().into_owned();
        partials.push(quote! { (#name, include_str!(#path)) });
    }
    let mut inserts = Vec::new();
    for name in assigns {
        let m = member(name).map_err(|_| {
            syn::Error::new(config.span, format!("assign @{name} is not a field name"))
        })?;
        inserts.push(quote! {
            ::galleon_template::compiled::assign(&mut __assigns, #name, &self.#m)?;
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
    Ok(quote! {
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
    })
}
