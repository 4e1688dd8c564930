//! galleon's example site, the reference app of the workspace: every `pages/NAME.html.eex` of a
//! site directory at `/NAME` (runtime engine) and the same pages compiled with
//! `#[derive(Template)]` at `/compiled/NAME`, static files at `/static/...`, the seed jobs
//! (`/seal`, `/hash`) through the offload pool, and the rules example (`/rules/match`). It is
//! built from the public APIs of the library crates only; `galleon serve` adds nothing to it but
//! flags, the listener and signals.
//!
//! # Examples
//! ```no_run
//! use galleon_site::pages::{DEFAULT_FULL_BODY_MAX, DEFAULT_STREAM_CHUNK, SiteOptions};
//! # fn main() -> anyhow::Result<()> {
//! let options = SiteOptions {
//!     stream_chunk: DEFAULT_STREAM_CHUNK,
//!     full_body_max: DEFAULT_FULL_BODY_MAX,
//!     value_copy_below: 4096,
//!     limits: galleon_template::Limits::default(),
//!     watch: false,
//!     cpu: galleon_offload::Pool::new(galleon_offload::Config::default())?,
//! };
//! let (router, _templates) = galleon_site::pages::router("site".as_ref(), options)?;
//! # let _ = router; Ok(()) }
//! ```

pub mod assign;
pub mod compiled_pages;
pub mod offload;
pub mod pages;
pub mod rules;
pub mod static_files;
pub mod store_figures;
pub mod templates;
pub mod work;
