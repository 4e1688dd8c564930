//! The development error page: a compile error of the newest templates shown to the developer
//! (a loopback peer) in place of the page the last good templates rendered.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

/// A response extension: the page was rendered by the last good templates while the newest
/// failed to compile with this error (development page on). Never sent: the middleware takes it
/// off, and hyper does not write extensions.
#[derive(Debug, Clone)]
pub(crate) struct DevError(pub(crate) Arc<str>);

/// Warned about once: a page carried a compile error, but the request had no peer address.
static NO_PEER_WARNED: AtomicBool = AtomicBool::new(false);

/// The development error page, as an axum middleware: add it with
/// `.layer(axum::middleware::from_fn(galleon_axum::dev_error_page))` and serve the router with
/// `into_make_service_with_connect_info::<SocketAddr>()`.
///
/// When a response was rendered by templates made with
/// [`TemplatesBuilder::dev_errors`](crate::TemplatesBuilder::dev_errors) while the newest files
/// of their directory fail to compile, a loopback peer (`127.0.0.0/8`, `::1`, and `::1`'s
/// IPv4-mapped form) gets instead a `500` HTML page with the located error and its caret,
/// HTML-escaped: the template's name relative to the directory, its line and column, the source
/// line; no other path, no addresses. Every other peer gets the page of the last good
/// templates, as if nothing happened. Every other response passes through untouched.
///
/// The peer is axum's [`ConnectInfo<SocketAddr>`](axum::extract::ConnectInfo). Without it
/// (served with plain `axum::serve(listener, app)`, or behind a layer that does not pass it on)
/// the peer is taken as not loopback, the safe default: everyone gets the page, and a warning
/// says so once. Behind a reverse proxy on the same machine every peer is loopback: keep the
/// page off there (`dev_errors(false)`, the default).
///
/// A render that fails at request time is not a compile error: it stays a `500` that shows
/// nothing of the template ([`RenderError`](crate::RenderError)), the error in the log.
///
/// # Examples
/// ```
/// use std::net::SocketAddr;
/// use axum::{Router, extract::State, middleware, routing::get};
/// use galleon_axum::{Assigns, Page, RenderError, Templates};
///
/// async fn home(State(t): State<Templates>) -> Result<Page, RenderError> {
///     t.render("home.html.eex", &Assigns::new())
/// }
///
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("home.html.eex"), "<h1>Home</h1>")?;
/// let templates = Templates::builder()
///     .dev_errors(true)
///     .watch(dir.path(), std::time::Duration::from_millis(500))?;
/// let app: Router = Router::new()
///     .route("/", get(home))
///     .layer(middleware::from_fn(galleon_axum::dev_error_page))
///     .with_state(templates);
/// let _service = app.into_make_service_with_connect_info::<SocketAddr>();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub async fn dev_error_page(request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr);
    let mut response = next.run(request).await;
    let Some(DevError(error)) = response.extensions_mut().remove::<DevError>() else {
        return response;
    };
    match peer {
        Some(addr) if is_loopback(addr.ip()) => error_page(&error),
        Some(_) => response,
        None => {
            if !NO_PEER_WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "development error page: the request has no ConnectInfo<SocketAddr> (serve \
                     with into_make_service_with_connect_info::<SocketAddr>()); sending the page \
                     of the last good templates instead"
                );
            }
            response
        }
    }
}

/// Loopback, an IPv4 loopback address mapped into IPv6 included (a dual-stack listener).
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
    }
}

/// The page: the error (already free of file system paths) HTML-escaped in a `<pre>`.
fn error_page(error: &str) -> Response {
    let mut page = String::with_capacity(error.len() + 512);
    page.push_str(
        "<!doctype html>\n<meta charset=\"utf-8\">\n<title>Template error</title>\n\
         <h1>Template error</h1>\n\
         <p>The newest templates do not compile. The last good ones keep serving; this page \
         shows to loopback peers (other peers get what the last good ones render) until the \
         file is fixed.</p>\n<pre>",
    );
    escape_into(&mut page, error);
    page.push_str("</pre>\n");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        page,
    )
        .into_response()
}

/// Phoenix's escaping: `& < > " '`.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_peers_are_v4_v6_and_mapped() {
        for ip in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "192.0.2.7",
            "10.0.0.1",
            "::ffff:192.0.2.7",
            "2001:db8::1",
            "0.0.0.0",
        ] {
            assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn the_error_is_escaped() {
        let mut out = String::new();
        escape_into(&mut out, "<%= @a & 'b' \"c\" %>");
        assert_eq!(out, "&lt;%= @a &amp; &#39;b&#39; &quot;c&quot; %&gt;");
    }
}
