//! The Rust names generated code gives template names, one rule for statements and expressions.

use proc_macro2::Ident;
use quote::format_ident;

/// The Rust identifier of template variable `name`.
pub(crate) fn var_ident(name: &str) -> Ident {
    format_ident!("v_{}", name)
}
