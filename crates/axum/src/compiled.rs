//! Compiled templates (`#[derive(Template)]` from `galleon-template-derive`) as axum responses:
//! the same bodies as [`Templates`](crate::Templates) makes (frames referencing the static text,
//! whole up to a bound, streamed past it), without an engine.

use std::sync::{Arc, OnceLock};

use axum::response::{IntoResponse, Response};
use galleon_iolist::{Owners, WritePolicy};
use galleon_template::compiled::{Rendered, Template};

use crate::body::{Framer, PageBody};
use crate::page::{Page, RenderError};
use crate::templates::{DEFAULT_CHUNK_BYTES, DEFAULT_FULL_BODY_MAX};

/// A compiled template as a handler's return value: rendered as [`page`] renders it, a render
/// error answered as [`RenderError`] answers it (a 500 that shows nothing of the template).
///
/// # Examples
/// ```
/// use axum::{Router, routing::get};
/// use galleon_axum::Compiled;
/// use galleon_template_derive::Template;
///
/// #[derive(Template)]
/// #[template(source = "<h1>Hello, <%= @name %></h1>")]
/// struct Hello {
///     name: String,
/// }
///
/// async fn hello() -> Compiled<Hello> {
///     Compiled(Hello { name: "<axum>".into() })
/// }
/// let app: Router = Router::new().route("/", get(hello));
///
/// let page = galleon_axum::compiled::page(Hello { name: "<axum>".into() })?;
/// assert_eq!(page.body().len(), Some(28)); // <h1>Hello, &lt;axum&gt;</h1>
/// # Ok::<(), galleon_axum::RenderError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Compiled<T>(pub T);

impl<T: Template + Send + 'static> IntoResponse for Compiled<T> {
    fn into_response(self) -> Response {
        match page(self.0) {
            Ok(page) => page.into_response(),
            Err(e) => e.into_response(),
        }
    }
}

/// Renders a compiled template as a [`Page`]: whole with `content-length` if it ends within
/// [`DEFAULT_FULL_BODY_MAX`], else what was rendered so far followed by the rest streamed
/// (chunked, [`DEFAULT_CHUNK_BYTES`] a chunk, each rendered on tokio's blocking pool). Nothing is
/// rendered twice.
pub fn page<T: Template + Send + 'static>(template: T) -> Result<Page, RenderError> {
    page_with(template, DEFAULT_FULL_BODY_MAX, DEFAULT_CHUNK_BYTES)
}

/// Like [`page`] with the whole-body bound and the chunk size given.
pub fn page_with<T: Template + Send + 'static>(
    template: T,
    full_body_max: usize,
    chunk_bytes: usize,
) -> Result<Page, RenderError> {
    let framer = framer();
    Ok(Page::new(
        match template.render_or_stream(full_body_max, chunk_bytes)? {
            Rendered::Whole(list) => PageBody::whole(framer.frames(&list)),
            Rendered::Streaming { first, rest } => {
                PageBody::streaming(Some(framer.frames(&first)), rest, framer.clone())
            }
        },
    ))
}

/// The default write policy; no owners: a compiled template's text is `&'static` (referenced
/// as such) and its buffers belong to the render.
fn framer() -> &'static Framer {
    static FRAMER: OnceLock<Framer> = OnceLock::new();
    FRAMER.get_or_init(|| Framer {
        policy: WritePolicy::default(),
        owners: Arc::new(Owners::default()),
    })
}
