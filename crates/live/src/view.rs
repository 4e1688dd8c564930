//! A live view in Rust: the [`LiveView`] trait (mount, events, params, messages) and the
//! [`Socket`] its assigns live in. Setting an assign to a new value marks it changed, and the
//! next render evaluates and sends only the parts of the template that read changed assigns.

use std::any::Any;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use galleon_template::{Assigns, Value};
use serde_json::Value as Json;

/// Why a view's handler failed: the view crashes (the client gets `phx_error` and rejoins, as
/// with LiveView); the message is logged, never sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewError(pub String);

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ViewError {}

impl From<&str> for ViewError {
    fn from(s: &str) -> ViewError {
        ViewError(s.to_owned())
    }
}

impl From<String> for ViewError {
    fn from(s: String) -> ViewError {
        ViewError(s)
    }
}

/// A message for [`LiveView::handle_info`]: any value, sent to a view from outside its client
/// (an event-store append, a timer tick, another view's news). Cloning is a reference count,
/// so one broadcast reaches every subscribed view without copying the value.
#[derive(Clone)]
pub struct Info(Arc<dyn Any + Send + Sync>);

impl Info {
    /// Wraps `value`.
    pub fn new<T: Any + Send + Sync>(value: T) -> Info {
        Info(Arc::new(value))
    }

    /// The value, if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl fmt::Debug for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Info(..)")
    }
}

/// A page that stays live. One value per connected client, made by the route's factory; its
/// template is rendered with the socket's assigns after every handler.
///
/// # Examples
///
/// ```
/// use galleon_live::{LiveView, Socket, ViewError};
/// use serde_json::Value;
///
/// struct Counter;
///
/// impl LiveView for Counter {
///     fn mount(&mut self, _params: &Value, _session: &Value, s: &mut Socket) -> Result<(), ViewError> {
///         s.assign("count", 0);
///         Ok(())
///     }
///     fn handle_event(&mut self, event: &str, _value: &Value, s: &mut Socket) -> Result<(), ViewError> {
///         match event {
///             "inc" => s.update_int("count", |n| n + 1),
///             other => return Err(format!("unknown event {other}").into()),
///         }
///         Ok(())
///     }
/// }
/// ```
pub trait LiveView: Send + 'static {
    /// Sets the first assigns, from the URL's query (`params`, a JSON object of strings) and
    /// the signed session the page was rendered with. Runs for the first (HTTP) render and
    /// again when the client joins over the socket.
    fn mount(
        &mut self,
        params: &Json,
        session: &Json,
        socket: &mut Socket,
    ) -> Result<(), ViewError>;

    /// A client event: `phx-click` (`value` holds the element's `phx-value-*`, and `value`,
    /// the element's `value` attribute), `phx-change` and `phx-submit` (the form decoded, with
    /// the form's `phx-value-*`: `{"user": {"name": ..}}`; a change also names the field that
    /// changed, `"_target": ["user", "name"]`), `phx-keyup` (`key`, `value`).
    fn handle_event(
        &mut self,
        event: &str,
        value: &Json,
        socket: &mut Socket,
    ) -> Result<(), ViewError>;

    /// After mount and after each `live_patch`: the URL's query as a JSON object, and the URL.
    fn handle_params(
        &mut self,
        params: &Json,
        url: &str,
        socket: &mut Socket,
    ) -> Result<(), ViewError> {
        let _ = (params, url, socket);
        Ok(())
    }

    /// A message sent to this view from outside the client (see [`Info`]).
    fn handle_info(&mut self, info: Info, socket: &mut Socket) -> Result<(), ViewError> {
        let _ = (info, socket);
        Ok(())
    }
}

/// Where a handler asked the client to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Navigation {
    /// `push_patch`: same view, new URL; `handle_params` runs, the page is diffed.
    Patch(String),
    /// `push_navigate`: another live page, without a full reload.
    Navigate(String),
    /// A full page load.
    Redirect(String),
}

/// A view's assigns and what changed since the client's last render.
#[derive(Debug, Default)]
pub struct Socket {
    assigns: Assigns,
    changed: BTreeSet<String>,
    title: Option<String>,
    title_changed: bool,
    navigation: Option<Navigation>,
    connected: bool,
    subscriptions: Vec<String>,
    broadcasts: Vec<(String, Info)>,
}

impl Socket {
    /// An empty socket; `connected` is false for the first (HTTP) render.
    pub fn new(connected: bool) -> Socket {
        Socket {
            connected,
            ..Socket::default()
        }
    }

    /// Whether the client is connected over the socket (false during the HTTP render).
    pub fn connected(&self) -> bool {
        self.connected
    }

    /// Sets assign `name`; marked changed only when the value differs.
    pub fn assign(&mut self, name: &str, value: impl Into<Value>) -> &mut Socket {
        let value = value.into();
        if self.assigns.get(name) != Some(&value) {
            self.assigns.insert(name, value);
            self.changed.insert(name.to_owned());
        }
        self
    }

    /// Assign `name`, if set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.assigns.get(name)
    }

    /// Assign `name` as an integer (0 when unset or not an integer).
    pub fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            Some(Value::Int(i)) => *i,
            _ => 0,
        }
    }

    /// Sets integer assign `name` to `f` of its value.
    pub fn update_int(&mut self, name: &str, f: impl FnOnce(i64) -> i64) {
        let v = f(self.int(name));
        self.assign(name, v);
    }

    /// Whether assign `name` changed since the last render sent.
    pub fn changed(&self, name: &str) -> bool {
        self.changed.contains(name)
    }

    /// The page's `<title>`, sent with the next diff when it changes.
    pub fn page_title(&mut self, title: &str) {
        if self.title.as_deref() != Some(title) {
            self.title = Some(title.to_owned());
            self.title_changed = true;
        }
    }

    /// Subscribes this view to broadcasts on `topic` (see `Live::broadcast`): each reaches
    /// [`LiveView::handle_info`]. Only a connected view subscribes; during the HTTP render it
    /// does nothing. Subscriptions end when the view does.
    pub fn subscribe(&mut self, topic: &str) {
        if self.connected && !self.subscriptions.iter().any(|t| t == topic) {
            self.subscriptions.push(topic.to_owned());
        }
    }

    /// Sends `info` to every view subscribed to `topic` (this one too, if subscribed) once the
    /// handler returns, as `Live::broadcast` does: how one client's event updates every
    /// other client's page. Does nothing during the HTTP render.
    pub fn broadcast(&mut self, topic: &str, info: Info) {
        if self.connected {
            self.broadcasts.push((topic.to_owned(), info));
        }
    }

    /// Asks the client to patch its URL to `to` (same view).
    pub fn push_patch(&mut self, to: &str) {
        self.navigation = Some(Navigation::Patch(to.to_owned()));
    }

    /// Asks the client to go to another live page `to`.
    pub fn push_navigate(&mut self, to: &str) {
        self.navigation = Some(Navigation::Navigate(to.to_owned()));
    }

    /// Asks the client to load `to` in full.
    pub fn redirect(&mut self, to: &str) {
        self.navigation = Some(Navigation::Redirect(to.to_owned()));
    }

    pub(crate) fn assigns(&self) -> &Assigns {
        &self.assigns
    }

    /// The changed names and the title, if changed, taken for a render.
    pub(crate) fn take_changes(&mut self) -> (BTreeSet<String>, Option<String>) {
        let title = std::mem::take(&mut self.title_changed)
            .then(|| self.title.clone())
            .flatten();
        (std::mem::take(&mut self.changed), title)
    }

    pub(crate) fn take_navigation(&mut self) -> Option<Navigation> {
        self.navigation.take()
    }

    /// Broadcasts asked for since the last call.
    pub(crate) fn take_broadcasts(&mut self) -> Vec<(String, Info)> {
        std::mem::take(&mut self.broadcasts)
    }

    /// Topics subscribed since the last call.
    pub(crate) fn take_subscriptions(&mut self) -> Vec<String> {
        std::mem::take(&mut self.subscriptions)
    }
}
