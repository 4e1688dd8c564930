//! The first paint: a live view rendered over HTTP inside its layout, with the signed session
//! token the client joins with, the CSRF token its socket opens with, and the scripts that
//! connect it. Also the small bootstrap script served beside the vendored clients.

use std::sync::Arc;

use galleon_http::{Request, Response, StatusCode};
use serde_json::Value as Json;

use crate::running::Running;
use crate::shared::{CSRF_SALT, SESSION_SALT, Shared, now_unix_s};

/// What a layout places on a live page. The strings are HTML, ready to insert as they are.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The page's title, escaped (the view's `page_title`, or empty).
    pub title: &'a str,
    /// `<meta name="csrf-token" ...>`: the socket's CSRF token, read by the bootstrap script.
    pub csrf_meta: &'a str,
    /// The live container (`<div id="phx-..." data-phx-main data-phx-session=...>`) holding the
    /// view's server-rendered HTML.
    pub view: &'a str,
    /// The `<script>` tags of the clients and of the bootstrap that connects them.
    pub scripts: &'a str,
    /// The extra `<head>` HTML the mount was built with (stylesheets).
    pub head: &'a str,
}

/// Lays out a live page: [`Page`] to the whole document.
pub type Layout = Arc<dyn Fn(&Page<'_>) -> String + Send + Sync>;

/// The layout used unless another is given: a minimal HTML5 document.
///
/// # Examples
///
/// ```
/// let page = galleon_live::Page { title: "Hi", csrf_meta: "", view: "<div>v</div>",
///     scripts: "", head: "" };
/// let html = galleon_live::default_layout(&page);
/// assert!(html.starts_with("<!DOCTYPE html>"));
/// assert!(html.contains("<title>Hi</title>") && html.contains("<div>v</div>"));
/// ```
pub fn default_layout(p: &Page<'_>) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n{}\n\
         <title>{}</title>\n{}</head>\n<body>\n{}\n{}\n</body>\n</html>\n",
        p.csrf_meta, p.title, p.head, p.view, p.scripts
    )
}

/// The bootstrap script for a mount at `prefix`: connects the client's `LiveSocket` with the
/// page's CSRF token.
pub(crate) fn app_js(prefix: &str) -> String {
    let prefix = Json::String(prefix.to_owned());
    format!(
        "(function(){{var m=document.querySelector(\"meta[name='csrf-token']\");\
         var s=new LiveView.LiveSocket({prefix},Phoenix.Socket,\
         {{params:{{_csrf_token:m?m.getAttribute(\"content\"):\"\"}}}});\
         s.connect();window.liveSocket=s;}})();\n"
    )
}

/// The live page for `req`'s path, mounted with `session`: 404 when no view lives there, 500
/// (logged, nothing of it shown) when the view fails to mount or render.
pub(crate) fn render(shared: &Shared, layout: &Layout, req: &Request, session: Json) -> Response {
    let Some(route) = shared.routes.get(req.path()) else {
        return Response::not_found();
    };
    // The URL as the client will send it on join, so `handle_params` sees the same both times.
    let url = match req.header_str("host") {
        Some(host) => format!("http://{}{}", host.trim(), req.target()),
        None => req.target().to_owned(),
    };
    let mounted = Running::mount(
        (route.factory)(),
        route.template.clone(),
        &url,
        &session,
        false,
    )
    .and_then(|mut r| r.html());
    let (html, title) = match mounted {
        Ok(ok) => ok,
        Err(e) => {
            tracing::error!(path = req.path(), error = %e, "live page failed to render");
            return Response::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page failed to render",
            );
        }
    };
    shared
        .counters
        .page_renders
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let now = now_unix_s();
    let payload = serde_json::json!({ "s": session }).to_string();
    let token = shared.signer.sign(SESSION_SALT, payload.as_bytes(), now);
    let csrf = shared.signer.sign(CSRF_SALT, b"", now);
    // Tokens are base64url and `.`: nothing in them needs escaping in an attribute.
    let view = format!(
        "<div id=\"{}\" data-phx-main data-phx-session=\"{token}\" data-phx-static=\"\">{html}</div>",
        shared.view_id()
    );
    let csrf_meta = format!("<meta name=\"csrf-token\" content=\"{csrf}\">");
    let p = &shared.prefix;
    let scripts = format!(
        "<script defer src=\"{p}/assets/phoenix.min.js\"></script>\n\
         <script defer src=\"{p}/assets/phoenix_live_view.min.js\"></script>\n\
         <script defer src=\"{p}/assets/app.js\"></script>"
    );
    let title = escape(title.as_deref().unwrap_or(""));
    let page = Page {
        title: &title,
        csrf_meta: &csrf_meta,
        view: &view,
        scripts: &scripts,
        head: &shared.head,
    };
    Response::html(layout(&page)).with_header("cache-control", "private, no-store")
}

/// HTML-escapes `s` for text and attributes, as the templates do (`& < > " '`).
fn escape(s: &str) -> String {
    let mut out = galleon_iolist::IoList::new();
    galleon_iolist::escape_html_copy_into(&mut out, s.as_bytes());
    // Escaping replaces ASCII bytes with ASCII entities: UTF-8 stays UTF-8.
    String::from_utf8(out.to_vec()).unwrap_or_default()
}
