//! The JavaScript clients, vendored from the npm registry and embedded, so an application serves
//! them without copying files: `phoenix` 1.8.16 and `phoenix_live_view` 1.2.12, their built
//! (minified) files unchanged, under their MIT licences (`assets/LICENSE-*.md`).

/// `phoenix` 1.8.16's `priv/static/phoenix.min.js`: the channel client (`window.Phoenix`).
pub const PHOENIX_JS: &[u8] = include_bytes!("../assets/phoenix.min.js");

/// `phoenix_live_view` 1.2.12's `priv/static/phoenix_live_view.min.js` (`window.LiveView`).
pub const LIVE_VIEW_JS: &[u8] = include_bytes!("../assets/phoenix_live_view.min.js");

/// The version of `phoenix_live_view` vendored: the client warns when the join reply names
/// another.
pub const LIVE_VIEW_VERSION: &str = "1.2.12";

/// The embedded file named `name` (as served under the live mount's `assets/`), with its
/// content type; `None` for any other name.
///
/// # Examples
///
/// ```
/// let (body, ty) = galleon_live::assets::file("phoenix.min.js").unwrap();
/// assert!(body.starts_with(b"var Phoenix"));
/// assert_eq!(ty, "text/javascript; charset=utf-8");
/// assert!(galleon_live::assets::file("../Cargo.toml").is_none());
/// ```
pub fn file(name: &str) -> Option<(&'static [u8], &'static str)> {
    const JS: &str = "text/javascript; charset=utf-8";
    match name {
        "phoenix.min.js" => Some((PHOENIX_JS, JS)),
        "phoenix_live_view.min.js" => Some((LIVE_VIEW_JS, JS)),
        _ => None,
    }
}
