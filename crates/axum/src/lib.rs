//! # galleon-axum
//!
//! galleon templates inside [axum](https://docs.rs/axum) (and plain hyper): a render goes out as
//! a few owned [`bytes::Bytes`] frames that reference the templates' compiled text instead of
//! copying it, with `content-length` when it is whole and chunked when it is long, its chunks
//! rendered off the async workers.
//!
//! - [`Templates`]: a shared [`Engine`] (cheap to clone: one reference count), usable as axum
//!   `State`. [`Templates::render`] renders whole up to a bound ([`DEFAULT_FULL_BODY_MAX`],
//!   4 MiB, the same constant as `galleon serve`'s) and streams past it;
//!   [`Templates::render_whole`] and [`Templates::stream`] force one or the other;
//!   [`Templates::render_in_layout`] renders a page inside a layout (as `@inner_content`).
//! - [`TemplatesBuilder`] ([`Templates::builder`]): EEx's `trim`, functions registered from
//!   Rust, the copy thresholds (`copy_below`, `value_copy_below`), limits, the write policy and
//!   the bounds; then [`load`](TemplatesBuilder::load) a directory, or
//!   [`watch`](TemplatesBuilder::watch) it: hot reload, polled, swapped in atomically, the last
//!   good templates kept when the newest do not compile.
//! - [`dev_error_page`]: an opt-in middleware ([`TemplatesBuilder::dev_errors`]) that shows a
//!   watched directory's compile error, located with its caret, to loopback peers only.
//! - [`LoadError`]: why templates did not load; its `Debug` is its `Display` (the caret
//!   message), so `?` in `main` prints the located error, not a struct.
//! - [`Page`]: what a handler returns; `IntoResponse` with `content-type: text/html;
//!   charset=utf-8`. Its body is a [`PageBody`], an [`http_body::Body`] a hyper service can
//!   also return directly ([`Page::into_http`]).
//! - [`Compiled`]: a template compiled into Rust (`#[derive(Template)]`, crate
//!   `galleon-template-derive`) as a handler's return value, with the same bodies.
//! - [`RenderError`]: a failed render as a response: `500`, the error logged through `tracing`
//!   (template name, line, source), and none of it in the body.
//! - `live` (module and cargo feature, off by default): a `galleon_live::Live` mount (Phoenix
//!   LiveView pages) served by axum routes, `live::live_routes(live)?` merged into the router.
//!
//! The five lines an axum user writes (a handler, the engine, the router, the listener, serve;
//! hot reload and the development page: [`TemplatesBuilder`]'s example):
//!
//! ```no_run
//! use axum::{Router, extract::State, routing::get};
//! use galleon_axum::{Page, RenderError, Templates};
//! use galleon_template::Assigns;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! async fn home(State(t): State<Templates>) -> Result<Page, RenderError> { t.render("home.html.eex", &Assigns::new()) }
//! let templates = Templates::load("templates")?;
//! let app = Router::new().route("/", get(home)).with_state(templates);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! ## Why frames, and how many
//! hyper's HTTP/1 writer queues at most 16 buffers per flush and passes at most 64 iovecs to one
//! `writev`; a body of 1,000 small frames costs dozens of `writev` calls, one flattened buffer
//! costs a copy of the page. [`galleon_iolist::to_frames`] applies galleon's write policy
//! instead: segments of at least 4 KiB (the policy's `coalesce_below`) are referenced, the runs
//! between them copied into one frame each, so the 410 KB Blah page is 13 frames (references to
//! its template's text, nothing copied), sent with its head in one `writev` of 14 iovecs.
//!
//! A whole render runs on the handler's task, like any other handler's work (the pages this
//! crate was measured with render in microseconds: 13 segments for 410 KB); run a costly one in
//! `spawn_blocking` yourself if you need to. Streamed chunks always render on tokio's blocking
//! pool, so this crate needs a tokio runtime.

#![forbid(unsafe_code)]

mod body;
mod builder;
pub mod compiled;
mod dev;
#[cfg(feature = "live")]
pub mod live;
mod page;
mod reload;
mod templates;

pub use body::{BodyError, PageBody};
pub use builder::{LoadError, TemplatesBuilder};
pub use compiled::Compiled;
pub use dev::dev_error_page;
#[cfg(feature = "live")]
pub use live::{LiveRoutesError, live_routes, live_routes_with_shutdown};
pub use page::{Page, RenderError};
pub use templates::{DEFAULT_CHUNK_BYTES, DEFAULT_FULL_BODY_MAX, Templates};

/// Default poll interval for [`TemplatesBuilder::watch`]: twice a second (`galleon-state`'s).
pub use galleon_state::DEFAULT_POLL_INTERVAL;

// What a handler needs to name, without a direct dependency on the template crate.
pub use galleon_template::{Assigns, Engine, TemplateId, Value};
