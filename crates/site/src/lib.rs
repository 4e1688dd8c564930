//! galleon's example site, the reference app of the workspace: every `pages/NAME.html.eex` of a
//! site directory at `/NAME` (runtime engine) and the same pages compiled with
//! `#[derive(Template)]` at `/compiled/NAME`, static files at `/static/...`, the seed jobs
//! (`/seal`, `/hash`) through the offload pool, the rules example (`/rules/match`) and
//! TechEmpower's Fortunes (`/fortunes`, on SQLite or PostgreSQL). It is
//! built from the public APIs of the library crates only, and opened with one call,
//! [`Site::open`], which returns its router; `galleon serve` adds the event store, the
//! statistics, the listener and signals on top.
//!
//! # Examples
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! // Inside a tokio runtime (the SIGHUP reload is a task on it).
//! let site = galleon_site::Site::open(galleon_site::SiteConfig::default())?;
//! let req = galleon_http::Request::new(galleon_http::Method::Get, "/blah?iters=3", &[], Default::default());
//! assert_eq!(site.router.handle(req).await.status().0, 200);
//! # Ok(()) }
//! ```

pub mod assign;
pub mod coalesce;
pub mod compiled_pages;
pub mod fortunes;
mod json_text;
pub mod live_events;
pub mod live_pages;
pub mod offload;
pub mod pages;
pub mod rules;
mod site;
pub mod static_files;
pub mod store_figures;
pub mod templates;
pub mod whole;
pub mod work;

pub use site::{Guards, Site, SiteConfig};
