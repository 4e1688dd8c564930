//! `Page` and `RenderError`: a render, or its failure, as an axum response.

use std::fmt;
use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use crate::body::PageBody;
use crate::dev::DevError;

/// `content-type` of a [`Page`] unless set otherwise.
const HTML: &str = "text/html; charset=utf-8";

/// A rendered page: a status (200), a `content-type` (`text/html; charset=utf-8`) and a
/// [`PageBody`]. Returned by [`Templates`](crate::Templates)' renders, returned in turn by a
/// handler: `IntoResponse` makes it an axum response, whose `content-length` hyper takes from
/// the body's exact size when the page is whole.
///
/// # Examples
/// ```
/// use axum::response::IntoResponse;
/// use galleon_axum::{Assigns, Engine, Templates};
///
/// let templates = Templates::new(Engine::from_source("hi.html.eex", "<p>Hi, <%= @who %>!</p>")?);
/// let mut assigns = Assigns::new();
/// assigns.insert("who", "Tom & Jerry");
/// let page = templates.render("hi.html.eex", &assigns)?;
/// assert_eq!(page.body().len(), Some(27));
/// let response = page.with_status(http::StatusCode::CREATED).into_response();
/// assert_eq!(response.status(), 201);
/// assert_eq!(response.headers()["content-type"], "text/html; charset=utf-8");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Page {
    status: StatusCode,
    content_type: HeaderValue,
    body: PageBody,
    /// Rendered by the last good templates while the newest failed to compile, with the
    /// development page on: the error, for [`dev_error_page`](crate::dev_error_page).
    dev_error: Option<Arc<str>>,
}

impl Page {
    /// A `200` HTML page with this body.
    pub fn new(body: PageBody) -> Page {
        Page {
            status: StatusCode::OK,
            content_type: HeaderValue::from_static(HTML),
            body,
            dev_error: None,
        }
    }

    pub(crate) fn with_dev_error(mut self, error: Option<Arc<str>>) -> Page {
        self.dev_error = error;
        self
    }

    /// The same page with another status.
    pub fn with_status(mut self, status: StatusCode) -> Page {
        self.status = status;
        self
    }

    /// The same page with another `content-type` (a template can render JSON, CSS, text).
    pub fn with_content_type(mut self, content_type: HeaderValue) -> Page {
        self.content_type = content_type;
        self
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The body.
    pub fn body(&self) -> &PageBody {
        &self.body
    }

    /// The body alone.
    pub fn into_body(self) -> PageBody {
        self.body
    }

    /// The page as a plain `http` response, for a hyper service (no axum involved): the body
    /// stays a [`PageBody`], whose exact size hyper turns into `content-length`.
    pub fn into_http(self) -> http::Response<PageBody> {
        let mut r = http::Response::new(self.body);
        *r.status_mut() = self.status;
        r.headers_mut()
            .insert(header::CONTENT_TYPE, self.content_type);
        if let Some(error) = self.dev_error {
            r.extensions_mut().insert(DevError(error));
        }
        r
    }
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        self.into_http().map(axum::body::Body::new)
    }
}

/// A render that failed (a missing template, a limit, a value of the wrong type), as a
/// response: `500 Internal Server Error` with a one-line body that says nothing about the
/// template; the error itself (template name, line, column, the source line) is logged at
/// `error` level through `tracing` when the response is made. (The one exception is the opt-in
/// development page: a render by the last good templates of a watched directory whose newest
/// files do not compile shows that compile error to loopback peers; see
/// [`dev_error_page`](crate::dev_error_page).)
///
/// # Examples
/// ```
/// use axum::response::IntoResponse;
/// use galleon_axum::{Assigns, Engine, Templates};
///
/// let templates = Templates::new(Engine::from_source("sum.html.eex", "<%= @a + 1 %>")?);
/// let mut assigns = Assigns::new();
/// assigns.insert("a", "secret text");
/// let err = templates.render("sum.html.eex", &assigns).unwrap_err();
/// assert!(err.to_string().contains("sum.html.eex:1"));
/// let response = err.into_response();
/// assert_eq!(response.status(), 500);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RenderError {
    error: galleon_template::Error,
    /// As [`Page`]'s: the compile error of the newest templates, for the development page.
    dev_error: Option<Arc<str>>,
}

/// The body of a [`RenderError`]'s response.
pub(crate) const ERROR_BODY: &str = "internal server error\n";

impl RenderError {
    /// The template error.
    pub fn error(&self) -> &galleon_template::Error {
        &self.error
    }

    /// The template error, taken out.
    pub fn into_error(self) -> galleon_template::Error {
        self.error
    }

    pub(crate) fn with_dev_error(mut self, error: Option<Arc<str>>) -> RenderError {
        self.dev_error = error;
        self
    }
}

impl From<galleon_template::Error> for RenderError {
    fn from(error: galleon_template::Error) -> RenderError {
        RenderError {
            error,
            dev_error: None,
        }
    }
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for RenderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl IntoResponse for RenderError {
    fn into_response(self) -> Response {
        tracing::error!(error = %self.error, kind = ?self.error.kind(), "template render failed");
        let mut response = (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            ERROR_BODY,
        )
            .into_response();
        if let Some(error) = self.dev_error {
            response.extensions_mut().insert(DevError(error));
        }
        response
    }
}
