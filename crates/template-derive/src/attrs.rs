//! The `#[template(...)]` attribute, the template's sources (with its partials), and the
//! struct's fields (the assigns).
//!
//! Options: `path` or `source`, `name`, `trim`, `copy_below`, `native`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use galleon_template::Engine;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Expr, ExprLit, Fields, Lit, LitStr, Meta, Type};

/// Default copy threshold: `galleon_template::DEFAULT_COPY_BELOW`.
const DEFAULT_COPY_BELOW: usize = galleon_template::DEFAULT_COPY_BELOW;

/// Everything `#[template(...)]` says, with the sources loaded.
pub(crate) struct Config {
    /// The template's name in errors: its file name, or `name = "..."` for inline sources.
    pub(crate) name: String,
    pub(crate) source: String,
    /// The file, for `include_str!` (rebuilds when it changes); `None` for inline sources.
    pub(crate) file: Option<PathBuf>,
    /// Partials called (transitively), by name, with their files.
    pub(crate) partials: Vec<(String, PathBuf)>,
    pub(crate) trim: bool,
    pub(crate) copy_below: usize,
    /// `native`: a template that is not compiled natively is a build error, not a render
    /// through the runtime engine. Its span, where that error points.
    pub(crate) native: Option<proc_macro2::Span>,
    /// Where compile errors point: the `path`/`source` literal.
    pub(crate) span: proc_macro2::Span,
}

/// How a field's values are reached: typed Rust values (field access, loops over slices), or a
/// dynamic [`galleon_template::Value`]-like type (output and comparisons only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Typed,
    Dynamic,
}

/// A field of the struct: an assign.
pub(crate) struct Field {
    pub(crate) kind: Kind,
    /// The field's type, as written: a fallback converts the field as this type.
    pub(crate) ty: Type,
    /// Where the type is, where an error about it points (a fallback's `Serialize`).
    pub(crate) span: proc_macro2::Span,
}

/// The struct's named fields, by assign name.
pub(crate) fn fields(input: &DeriveInput) -> syn::Result<BTreeMap<String, Field>> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            input.ident.span(),
            "#[derive(Template)] needs a struct whose fields are the assigns",
        ));
    };
    let mut out = BTreeMap::new();
    match &data.fields {
        Fields::Named(named) => {
            for f in &named.named {
                let Some(ident) = &f.ident else { continue };
                let name = ident.to_string();
                let name = name.strip_prefix("r#").unwrap_or(&name).to_owned();
                let field = Field {
                    kind: kind_of(&f.ty),
                    ty: f.ty.clone(),
                    span: f.ty.span(),
                };
                out.insert(name, field);
            }
        }
        Fields::Unit => {}
        Fields::Unnamed(u) => {
            return Err(syn::Error::new(
                u.span(),
                "#[derive(Template)] needs named fields (`@name` is field `name`)",
            ));
        }
    }
    Ok(out)
}

/// Dynamic values (`Value`, maps), possibly behind a reference, `Option`, `Box`, `Arc` or `Rc`:
/// `.key` and `for` on them go through the runtime engine. Anything else is typed (a `Vec` of
/// values is typed: a loop over it is native, its elements are output natively).
fn kind_of(ty: &Type) -> Kind {
    match ty {
        Type::Reference(r) => kind_of(&r.elem),
        Type::Paren(p) => kind_of(&p.elem),
        Type::Group(g) => kind_of(&g.elem),
        Type::Path(p) => {
            let Some(last) = p.path.segments.last() else {
                return Kind::Typed;
            };
            match last.ident.to_string().as_str() {
                "Value" | "Map" | "HashMap" | "BTreeMap" => Kind::Dynamic,
                "Option" | "Box" | "Arc" | "Rc" => match &last.arguments {
                    syn::PathArguments::AngleBracketed(args) => args
                        .args
                        .iter()
                        .find_map(|a| match a {
                            syn::GenericArgument::Type(t) => Some(kind_of(t)),
                            _ => None,
                        })
                        .unwrap_or(Kind::Typed),
                    _ => Kind::Typed,
                },
                _ => Kind::Typed,
            }
        }
        _ => Kind::Typed,
    }
}

/// Reads `#[template(path = "...")]` or `#[template(source = "...")]` and the options
/// `name = "..."`, `trim = true`, `copy_below = N`, `native`.
pub(crate) fn config(input: &DeriveInput) -> syn::Result<Config> {
    let mut path: Option<LitStr> = None;
    let mut source: Option<LitStr> = None;
    let mut name: Option<String> = None;
    let mut trim = false;
    let mut copy_below = DEFAULT_COPY_BELOW;
    let mut native = None;
    let mut found = false;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("template")) {
        found = true;
        let list = attr.parse_args_with(
            syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated,
        )?;
        for meta in list {
            if let Meta::Path(p) = &meta
                && p.is_ident("native")
            {
                native = Some(p.span());
                continue;
            }
            let Meta::NameValue(nv) = &meta else {
                return Err(syn::Error::new(
                    meta.span(),
                    "expected `key = value` or `native`",
                ));
            };
            let key = nv
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            let lit = match &nv.value {
                Expr::Lit(ExprLit { lit, .. }) => lit,
                other => return Err(syn::Error::new(other.span(), "expected a literal")),
            };
            match (key.as_str(), lit) {
                ("path", Lit::Str(s)) => path = Some(s.clone()),
                ("source", Lit::Str(s)) => source = Some(s.clone()),
                ("name", Lit::Str(s)) => name = Some(s.value()),
                ("trim", Lit::Bool(b)) => trim = b.value,
                ("copy_below", Lit::Int(n)) => copy_below = n.base10_parse()?,
                _ => {
                    return Err(syn::Error::new(
                        nv.span(),
                        "expected `path = \"...\"`, `source = \"...\"`, `name = \"...\"`, \
                         `trim = bool`, `copy_below = N` or `native`",
                    ));
                }
            }
        }
    }
    if !found {
        return Err(syn::Error::new(
            input.ident.span(),
            "#[derive(Template)] needs #[template(path = \"...\")] or #[template(source = \"...\")]",
        ));
    }
    match (path, source) {
        (Some(p), None) => Ok(Config {
            native,
            ..load_file(&p, trim, copy_below)?
        }),
        (None, Some(s)) => Ok(Config {
            name: name.unwrap_or_else(|| format!("{}.html.eex", input.ident)),
            source: s.value(),
            file: None,
            partials: Vec::new(),
            trim,
            copy_below,
            native,
            span: s.span(),
        }),
        _ => Err(syn::Error::new(
            input.ident.span(),
            "give exactly one of `path = \"...\"` and `source = \"...\"`",
        )),
    }
}

/// A template file, relative to the user crate's `CARGO_MANIFEST_DIR`, and its partials.
fn load_file(lit: &LitStr, trim: bool, copy_below: usize) -> syn::Result<Config> {
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_default();
    let file = root.join(lit.value());
    let source = std::fs::read_to_string(&file).map_err(|e| {
        syn::Error::new(
            lit.span(),
            format!(
                "cannot read template `{}` (relative to the crate's Cargo.toml): {e}",
                lit.value()
            ),
        )
    })?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = file.parent().unwrap_or(Path::new(".")).to_owned();
    // The engine loads the partials the template calls, transitively; an error (syntax, or a
    // partial that does not exist) is reported by `check`.
    let partials = match Engine::builder().trim(trim).load_file(&file) {
        Ok(engine) => engine
            .names()
            .filter(|n| *n != name)
            .map(|n| (n.to_owned(), dir.join(n)))
            .collect(),
        Err(_) => Vec::new(),
    };
    Ok(Config {
        name,
        source,
        file: Some(file),
        partials,
        trim,
        copy_below,
        native: None,
        span: lit.span(),
    })
}

impl Config {
    /// Compiles the template (and partials) with the runtime engine: the same parser, the
    /// same checks (unknown variables and functions, missing partials), the same errors.
    pub(crate) fn check(&self) -> syn::Result<()> {
        let result = match &self.file {
            Some(file) => Engine::builder()
                .trim(self.trim)
                .load_file(file)
                .map(|_| ()),
            None => Engine::builder()
                .trim(self.trim)
                .from_source(&self.name, &self.source)
                .map(|_| ()),
        };
        result.map_err(|e| syn::Error::new(self.span, e.to_string()))
    }

    /// An error at byte span `start..end` of the template, in the engine's format.
    pub(crate) fn error(&self, message: &str, start: usize, end: usize) -> syn::Error {
        let e =
            galleon_template::compiled::syntax_error(message, &self.name, &self.source, start, end);
        syn::Error::new(self.span, e.to_string())
    }
}
