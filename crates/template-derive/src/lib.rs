//! # galleon-template-derive
//!
//! `#[derive(Template)]`: a galleon EEx template compiled into Rust at build time, with the
//! runtime engine's parser and error format (errors point at the template's line and column,
//! as a compile error). The struct's fields are the assigns: `@name` is field `name`.
//!
//! The generated code writes short static text into the output buffer with constant-size
//! copies, references static text of at least the copy threshold as `&'static` segments of the
//! binary's read-only data, writes integers in place and escapes strings with a scan (see
//! `galleon_template::compiled`). Its output is byte for byte the runtime engine's for the same
//! template and data.
//!
//! ## What compiles natively
//! Everything listed here becomes Rust:
//!
//! - **Tags**: text; `<%= e %>` (HTML-escaped) and `<%= raw(e) %>` (`Phoenix.HTML.raw`); `<% e %>`;
//!   `<% x = e %>` and `<%= x = e %>` (a variable or `_` on the left).
//! - **Blocks**: `if`/`unless` with `else`; `for x <- e` over a field or variable that implements
//!   `compiled::Iterate` (slices, `Vec`, arrays, `VecDeque`, by reference), over `a..b`
//!   (counted), and `for {x, i} <- Enum.with_index(e)` (or `(e, k)` with a literal integer `k`);
//!   the pattern a variable or `_` (a pair of them for `with_index`); one generator, then any
//!   filters.
//! - **Values**: `@field`, Phoenix's `assigns.name` (as `@name`) and `assigns[:name]` (`nil`
//!   without such a field); variables bound natively; `a.key` on a typed value (Rust field
//!   access: through an `Option`, `None` is `nil` and reading its key is the engine's error
//!   ``cannot read key `name` of nil``); the literals `nil`, `true`, `false`, integers, floats
//!   and strings.
//! - **Operators**: `== != === !== < <= > >=` (Elixir's rules, via `compiled::ToScalar`), `not`
//!   (strict) and `!`; `and or && ||` as conditions (`if`, `unless`, filters) and directly in an
//!   output tag, where `a || b` and `a && b` output the value Elixir gives them; the one-line
//!   `<%= if c, do: a, else: b %>` (and `unless`; `raw`, parentheses or not, in either branch).
//!   A condition tests a scalar by its value and an `Option` by `None`; any other value (a
//!   struct, a list) is true, as in Elixir.
//! - **Constants**: a `<%= %>` or `<% %>` tag whose expression reads no assign and no variable
//!   (and calls no partial) is rendered at build time by the engine and becomes static text, so
//!   `<%= String.upcase("ok") %>` is native (unless it fails at build time: it is then left to
//!   run time, where it fails the same way, compiled by the rules here).
//!
//! Output needs `compiled::Render` and comparisons `compiled::ToScalar` of the field types
//! (integers, floats, `bool`, strings, `Option`s and references of them, `Value`): a field type
//! without them is a type error at that use, not a fallback.
//!
//! ## What renders through the runtime engine
//! Anything else: `case` and `cond` blocks; function calls on assigns or variables
//! (`length(@items)`, `String.upcase(@name)`, `Enum.*`, `to_string`, pipes `|>`), except `raw`
//! in an output and `Enum.with_index` as a `for` generator; partials (`render`); arithmetic
//! (`+ - * /`, `-x`), `<>`, `++`, `in`; `[]` other than `assigns[:name]`; lists, tuples, maps,
//! atoms (`:ok`), string interpolation, ranges outside a `for` generator; anonymous functions,
//! `for ..., do:` expressions; `and or && ||` and the one-line `if` as values anywhere else (an
//! operand of `==`, `<% x = a || b %>`); patterns other than a variable (`<% {a, b} = e %>`,
//! `for {k, v} <- map`); several generators; `.key` and `for` on a field whose type mentions
//! `Value` or `Map`/`HashMap`/`BTreeMap` (also behind `&`, `Option`, `Box`, `Arc`, `Rc`); keys
//! that are not Rust identifiers.
//!
//! One such construct makes the whole template render through the runtime engine, compiled once
//! from the embedded sources. The output is the same either way, at the engine's speed, and the
//! fields the template reads are converted with `serde::Serialize` (or taken as they are when
//! they are a `galleon_template::Value`). A proc macro cannot emit a warning on stable Rust, so
//! the fallback is silent while the fields are `Serialize`; when one is not, the build error names
//! the construct that forced the fallback and where it is in the template, and points at the
//! field:
//!
//! ```text
//! error[E0277]: `length(@items)` (the function `length`) at page.html.eex:3:7 is not compiled
//!               natively, so this template renders through the runtime engine, which needs
//!               `Vec<Item>: serde::Serialize`
//!    |
//! 15 |     items: Vec<Item>,
//!    |            ^^^^^^^^^ read by the template: the runtime engine converts it with `serde::Serialize`
//! ```
//!
//! ## Refusing the runtime engine: `native`
//! `#[template(source = "...", native)]` (or with `path`) makes a template that does not compile
//! natively a build error, pointing at `native` and naming the construct with the template line
//! and a caret, so a page can insist on compiled speed and on fields that need no `Serialize`:
//!
//! ```compile_fail
//! use galleon_template_derive::Template;
//!
//! // error: `String.upcase(@name)` (the function `String.upcase`) at hello.html.eex:1:8 is not
//! // compiled natively, and `#[template(native)]` refuses the runtime engine
//! #[derive(Template)]
//! #[template(source = "<p><%= String.upcase(@name) %></p>", name = "hello.html.eex", native)]
//! struct Hello {
//!     name: String,
//! }
//! ```
//!
//! # Examples
//! ```
//! use galleon_template::compiled::Template;
//! use galleon_template_derive::Template;
//!
//! #[derive(Template)]
//! #[template(source = "<ul><%= for {x, i} <- Enum.with_index(@items) do %>\
//! <li<%= if i == 0 do %> class=\"first\"<% end %>><%= x %></li><% end %></ul>")]
//! struct List {
//!     items: Vec<String>,
//! }
//!
//! let page = List { items: vec!["a & b".into(), "c".into()] }.render()?;
//! assert_eq!(
//!     page.to_vec(),
//!     b"<ul><li class=\"first\">a &amp; b</li><li>c</li></ul>"
//! );
//! # Ok::<(), galleon_template::Error>(())
//! ```
//!
//! Options: `#[template(path = "templates/page.html.eex")]` (relative to the crate's
//! `Cargo.toml`; partials are looked up next to it) or `source = "..."` with an optional
//! `name = "..."` for errors; `trim = true` (EEx's trim); `copy_below = N` (the copy threshold,
//! default `galleon_template::DEFAULT_COPY_BELOW`); `native` (no runtime-engine fallback, see
//! above).

mod attrs;
mod expr;
mod fallback;
mod names;
mod not_native;
mod statics;
mod stmt;

use std::collections::BTreeSet;

use galleon_template::syntax::{self, Expr, ExprKind, Node, Qualifier};
use proc_macro::TokenStream;
use quote::quote;
use syn::{DeriveInput, parse_macro_input};

/// Derives `galleon_template::compiled::Template` from `#[template(path = "...")]` or
/// `#[template(source = "...")]`; see the crate docs.
#[proc_macro_derive(Template, attributes(template))]
pub fn derive_template(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => {
            let error = e.to_compile_error();
            let placeholder = placeholder_impl(&input);
            quote!(#error #placeholder).into()
        }
    }
}

/// Beside a template's compile error, an impl of the trait that is never run (the error stops
/// the build), so that the user sees that one error and not also "no method named `render`" at
/// every call site (thiserror and serde do the same).
fn placeholder_impl(input: &DeriveInput) -> proc_macro2::TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[allow(unused, clippy::all)]
        const _: () = {
            #[automatically_derived]
            impl #impl_generics ::galleon_template::compiled::Template for #ident #ty_generics #where_clause {
                const COPY_BELOW: usize = 0;
                const SLOTS: usize = 0;

                fn __run<const PAUSE: bool>(
                    &self,
                    _: &mut ::galleon_template::compiled::Out,
                    _: &mut [usize],
                    _: usize,
                ) -> ::core::result::Result<bool, ::galleon_template::Error> {
                    ::core::unreachable!("the template failed to compile")
                }

                fn __size_hint() -> &'static ::core::sync::atomic::AtomicUsize {
                    ::core::unreachable!("the template failed to compile")
                }
            }
        };
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let config = attrs::config(input)?;
    let fields = attrs::fields(input)?;
    config.check()?;
    let nodes = syntax::parse(&config.source, config.trim)
        .map_err(|e| config.error(&e.message, e.span.start, e.span.end))?;
    let mut assigns = BTreeSet::new();
    let mut first_unknown = None;
    walk_nodes(&nodes, &mut |e| match expr::assign_read(e) {
        Some((name, false)) => {
            if !fields.contains_key(name) && first_unknown.is_none() {
                first_unknown = Some((name.to_owned(), e.span));
            }
            assigns.insert(name.to_owned());
        }
        // `assigns[:name]`: nil without such a field.
        Some((name, true)) if fields.contains_key(name) => {
            assigns.insert(name.to_owned());
        }
        _ => {}
    });
    if let Some((name, span)) = first_unknown {
        return Err(config.error(
            &format!("unknown assign @{name} (no field `{name}` in the struct)"),
            span.start,
            span.end,
        ));
    }

    let mut g = stmt::Gen::new(&config.source, &fields, config.copy_below);
    let mut items = proc_macro2::TokenStream::new();
    let methods = match g.seq(&nodes) {
        Ok(body) => {
            let slots = g.slots;
            quote! {
                const SLOTS: usize = #slots;

                #[inline]
                fn __run<const PAUSE: bool>(
                    &self,
                    __out: &mut ::galleon_template::compiled::Out,
                    __st: &mut [usize],
                    __limit: usize,
                ) -> ::core::result::Result<bool, ::galleon_template::Error> {
                    // The buffer's position in locals for the whole run (put back on return).
                    let mut __w = __out.writer();
                    let __out = &mut __w;
                    #body
                    ::core::result::Result::Ok(true)
                }
            }
        }
        Err(why) => {
            if let Some(span) = config.native {
                return Err(syn::Error::new(
                    span,
                    why.refusal(&config.name, &config.source),
                ));
            }
            let assigns: Vec<String> = assigns.into_iter().collect();
            let (fallback_items, m) = fallback::methods(&config, &fields, &assigns, &why)?;
            items = fallback_items;
            quote! {
                const SLOTS: usize = 0;
                #m
            }
        }
    };

    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let name = &config.name;
    let source = match &config.file {
        Some(file) => {
            let file = file.to_string_lossy().into_owned();
            quote! { include_str!(#file) }
        }
        None => {
            let s = &config.source;
            quote! { #s }
        }
    };
    let copy_below = config.copy_below;
    Ok(quote! {
        #[allow(unused, non_upper_case_globals, clippy::all, clippy::pedantic)]
        const _: () = {
            const __NAME: &str = #name;
            const __SOURCE: &str = #source;

            #items

            #[automatically_derived]
            impl #impl_generics ::galleon_template::compiled::Template for #ident #ty_generics #where_clause {
                const COPY_BELOW: usize = #copy_below;

                fn __size_hint() -> &'static ::core::sync::atomic::AtomicUsize {
                    static HINT: ::core::sync::atomic::AtomicUsize =
                        ::core::sync::atomic::AtomicUsize::new(0);
                    &HINT
                }

                #methods
            }
        };
    })
}

/// Calls `f` on every expression of `nodes`, nested ones included.
fn walk_nodes(nodes: &[Node], f: &mut impl FnMut(&Expr)) {
    for node in nodes {
        match node {
            Node::Text(_) => {}
            Node::Output(e) | Node::Exec(e) => walk_expr(e, f),
            Node::Bind { value, .. } => walk_expr(value, f),
            Node::For { qualifiers, body } => {
                for q in qualifiers {
                    match q {
                        Qualifier::Gen(_, e) | Qualifier::Filter(e) => walk_expr(e, f),
                    }
                }
                walk_nodes(body, f);
            }
            Node::Case { subject, clauses } => {
                walk_expr(subject, f);
                for c in clauses {
                    if let Some(g) = &c.guard {
                        walk_expr(g, f);
                    }
                    walk_nodes(&c.body, f);
                }
            }
            Node::Cond { clauses } => {
                for (c, body) in clauses {
                    walk_expr(c, f);
                    walk_nodes(body, f);
                }
            }
            Node::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                walk_expr(cond, f);
                walk_nodes(then, f);
                walk_nodes(otherwise, f);
            }
        }
    }
}

fn walk_expr(e: &Expr, f: &mut impl FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Lit(_) | ExprKind::Assign(_) | ExprKind::Var(_) => {}
        ExprKind::Field(x, _) | ExprKind::Unary(_, x) => walk_expr(x, f),
        ExprKind::Case { subject, clauses } => {
            walk_expr(subject, f);
            for c in clauses {
                if let Some(g) = &c.guard {
                    walk_expr(g, f);
                }
                walk_expr(&c.body, f);
            }
        }
        ExprKind::Fn(clauses) => {
            for c in clauses {
                if let Some(g) = &c.guard {
                    walk_expr(g, f);
                }
                walk_expr(&c.body, f);
            }
        }
        // A `fn` spanning tags: its bodies are template nodes (their assigns are read too).
        ExprKind::FnBlock(clauses) => {
            for c in clauses {
                if let Some(g) = &c.guard {
                    walk_expr(g, f);
                }
                walk_nodes(&c.body, f);
            }
        }
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Range(a, b) => {
            walk_expr(a, f);
            walk_expr(b, f);
        }
        ExprKind::List(xs) | ExprKind::Tuple(xs) | ExprKind::Interp(xs) => {
            xs.iter().for_each(|x| walk_expr(x, f));
        }
        ExprKind::Map(kvs) => kvs.iter().for_each(|(k, v)| {
            walk_expr(k, f);
            walk_expr(v, f);
        }),
        ExprKind::If {
            cond,
            then,
            otherwise,
            ..
        } => {
            walk_expr(cond, f);
            walk_expr(then, f);
            if let Some(o) = otherwise {
                walk_expr(o, f);
            }
        }
        ExprKind::Call { args, kwargs, .. } => {
            args.iter().for_each(|x| walk_expr(x, f));
            kwargs.iter().for_each(|(_, _, v)| walk_expr(v, f));
        }
        ExprKind::For { qualifiers, body } => {
            for q in qualifiers {
                match q {
                    Qualifier::Gen(_, e) | Qualifier::Filter(e) => walk_expr(e, f),
                }
            }
            walk_expr(body, f);
        }
    }
}
