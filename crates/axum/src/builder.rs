//! [`TemplatesBuilder`]: how [`Templates`] are compiled and served; [`LoadError`]: why they
//! could not be.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use galleon_iolist::WritePolicy;
use galleon_template::{Engine, EngineBuilder, IntoFunction, Limits};

use crate::reload::{self, Live};
use crate::templates::{DEFAULT_CHUNK_BYTES, DEFAULT_FULL_BODY_MAX, Parts, Templates};

/// Options for [`Templates`], given before the templates are compiled: the engine's (EEx's
/// `trim`, functions registered from Rust, copy thresholds, limits) with the names
/// [`EngineBuilder`] and [`Engine`] give them, and the server's (the write policy, the
/// whole-body bound, the chunk size, the development error page). Then
/// [`load`](TemplatesBuilder::load) a directory once, or [`watch`](TemplatesBuilder::watch) it.
///
/// # Examples
/// A development server: templates recompiled when a file changes, the compile error shown to
/// the developer's browser (loopback only; see [`dev_error_page`](crate::dev_error_page)).
/// ```no_run
/// use std::{net::SocketAddr, time::Duration};
/// use axum::{Router, extract::State, middleware, routing::get};
/// use galleon_axum::{Assigns, Page, RenderError, Templates};
///
/// async fn home(State(t): State<Templates>) -> Result<Page, RenderError> {
///     t.render_in_layout("home.html.eex", "layout.html.eex", &Assigns::new())
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let templates = Templates::builder()
///     .trim(true)
///     .dev_errors(cfg!(debug_assertions))
///     .watch("templates", Duration::from_millis(500))?;
/// let app = Router::new()
///     .route("/", get(home))
///     .layer(middleware::from_fn(galleon_axum::dev_error_page))
///     .with_state(templates);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TemplatesBuilder {
    engine: EngineOptions,
    policy: WritePolicy,
    full_body_max: usize,
    chunk_bytes: usize,
    dev_errors: bool,
}

impl Default for TemplatesBuilder {
    fn default() -> TemplatesBuilder {
        TemplatesBuilder {
            engine: EngineOptions::default(),
            policy: WritePolicy::default(),
            full_body_max: DEFAULT_FULL_BODY_MAX,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            dev_errors: false,
        }
    }
}

/// What the engine is compiled with: kept, so that a reload compiles the same way.
#[derive(Debug, Clone, Default)]
pub(crate) struct EngineOptions {
    builder: EngineBuilder,
    copy_below: Option<usize>,
    value_copy_below: Option<usize>,
    limits: Option<Limits>,
}

impl EngineOptions {
    /// Compiles every `*.eex` under `dir` with these options.
    pub(crate) fn load(&self, dir: &Path) -> Result<Engine, galleon_template::Error> {
        Ok(self.configure(self.builder.clone().load(dir)?))
    }

    fn configure(&self, mut engine: Engine) -> Engine {
        if let Some(bytes) = self.copy_below {
            engine = engine.with_copy_below(bytes);
        }
        if let Some(bytes) = self.value_copy_below {
            engine = engine.with_value_copy_below(bytes);
        }
        if let Some(limits) = self.limits {
            engine = engine.with_limits(limits);
        }
        engine
    }
}

impl TemplatesBuilder {
    /// EEx's `trim: true` (what Phoenix compiles `.html.eex` with): the indentation around tags
    /// and the whitespace before the first one go, and the line breaks around a tag shrink to
    /// one on each side ([`EngineBuilder::trim`]). Off by default.
    pub fn trim(mut self, trim: bool) -> TemplatesBuilder {
        self.engine.builder = self.engine.builder.trim(trim);
        self
    }

    /// Registers `f` as the template function `name`, callable from every template
    /// ([`EngineBuilder::function`]: typed arguments, up to four; an `Err` it returns is a
    /// render error located at the call).
    pub fn function<Args>(mut self, name: &str, f: impl IntoFunction<Args>) -> TemplatesBuilder {
        self.engine.builder = self.engine.builder.function(name, f);
        self
    }

    /// The copy threshold for static text ([`Engine::with_copy_below`]; default
    /// [`galleon_template::DEFAULT_COPY_BELOW`]).
    pub fn copy_below(mut self, bytes: usize) -> TemplatesBuilder {
        self.engine.copy_below = Some(bytes);
        self
    }

    /// The copy threshold for values ([`Engine::with_value_copy_below`]; default
    /// [`galleon_template::DEFAULT_VALUE_COPY_BELOW`]): strings and safe HTML from assigns
    /// shorter than `bytes` are copied into the render's buffer, longer ones referenced (and
    /// sent as references to the value's own bytes when at least the write policy's
    /// `coalesce_below`).
    pub fn value_copy_below(mut self, bytes: usize) -> TemplatesBuilder {
        self.engine.value_copy_below = Some(bytes);
        self
    }

    /// The bounds of every render ([`Engine::with_limits`]).
    pub fn limits(mut self, limits: Limits) -> TemplatesBuilder {
        self.engine.limits = Some(limits);
        self
    }

    /// The write policy frames are made under ([`Templates::with_policy`]).
    pub fn policy(mut self, policy: WritePolicy) -> TemplatesBuilder {
        self.policy = policy;
        self
    }

    /// Pages that end within `bytes` are sent whole with `content-length`, longer ones
    /// streamed ([`Templates::with_full_body_max`]; default [`DEFAULT_FULL_BODY_MAX`], the
    /// same constant as `galleon serve`'s `--full-body-max`).
    pub fn full_body_max(mut self, bytes: usize) -> TemplatesBuilder {
        self.full_body_max = bytes;
        self
    }

    /// Bytes rendered per chunk of a streamed page ([`Templates::with_chunk_bytes`]; default
    /// [`DEFAULT_CHUNK_BYTES`]).
    pub fn chunk_bytes(mut self, bytes: usize) -> TemplatesBuilder {
        self.chunk_bytes = bytes.max(1);
        self
    }

    /// The development error page (off by default; meant for development only). When on and
    /// the newest files of a [watched](TemplatesBuilder::watch) directory fail to compile,
    /// the pages rendered meanwhile (by the last good templates) carry the located error, and
    /// [`dev_error_page`](crate::dev_error_page), added as a middleware, shows it to loopback
    /// peers instead of the page; every other peer gets the page. Templates that are not
    /// watched never fail after loading, so it changes nothing for them.
    pub fn dev_errors(mut self, on: bool) -> TemplatesBuilder {
        self.dev_errors = on;
        self
    }

    pub(crate) fn parts(&self) -> Parts {
        Parts {
            policy: self.policy,
            full_body_max: self.full_body_max,
            chunk_bytes: self.chunk_bytes,
            dev_errors: self.dev_errors,
        }
    }

    /// Compiles every `*.eex` under `dir`, recursively ([`Engine::load`]: names are the
    /// `/`-separated paths relative to `dir`), once.
    pub fn load(self, dir: impl AsRef<Path>) -> Result<Templates, LoadError> {
        let engine = self.engine.load(dir.as_ref())?;
        Ok(Templates::fixed(engine, self.parts()))
    }

    /// One template from source, with these options ([`Engine::from_source`]).
    pub fn from_source(self, name: &str, source: &str) -> Result<Templates, LoadError> {
        self.from_sources([(name, source)])
    }

    /// Several templates from `(name, source)` pairs, with these options
    /// ([`Engine::from_sources`]).
    pub fn from_sources<N: AsRef<str>, S: AsRef<str>>(
        self,
        sources: impl IntoIterator<Item = (N, S)>,
    ) -> Result<Templates, LoadError> {
        let engine = self.engine.builder.clone().from_sources(sources)?;
        let engine = self.engine.configure(engine);
        Ok(Templates::fixed(engine, self.parts()))
    }

    /// Compiles every `*.eex` under `dir` as [`load`](TemplatesBuilder::load) does, then checks
    /// the files every `interval` ([`DEFAULT_POLL_INTERVAL`](crate::DEFAULT_POLL_INTERVAL) is 500 ms) on a
    /// thread of its own, and recompiles the whole directory when a file's name or contents
    /// changed. A set that compiles is swapped in atomically: each render uses one version from
    /// start to end. A set that fails keeps the last good one serving; the located error is
    /// logged (`tracing`, at `error`) once per change, given by [`Templates::reload_error`]
    /// and, with [`dev_errors`](TemplatesBuilder::dev_errors), shown to loopback peers.
    ///
    /// The first compile must succeed (there is nothing to keep yet). Dropping the last clone
    /// of the templates (the router's state with them) stops the thread and waits for it,
    /// through a check in progress. Render by name: the ids of one version
    /// ([`Engine::id`]) do not find the templates of the next.
    pub fn watch(self, dir: impl AsRef<Path>, interval: Duration) -> Result<Templates, LoadError> {
        let live = Arc::new(Live::load(dir.as_ref(), self.engine.clone())?);
        let watch = reload::start(live.clone(), interval).map_err(|e| LoadError {
            repr: Repr::Watch(e),
        })?;
        Ok(Templates::live(live, self.parts(), watch))
    }
}

/// Why templates could not be loaded: a template that does not compile (its located message:
/// `name:line:column: message`, the source line and a caret), a file that cannot be read, or
/// the watch thread that could not start.
///
/// `Debug` prints what `Display` does, so that `fn main() -> Result<(), Box<dyn Error>>`, which
/// reports an error with `Debug`, shows the caret message rather than a struct.
///
/// # Examples
/// ```
/// use galleon_axum::Templates;
///
/// let err = Templates::builder().from_source("x.html.eex", "<p><%= @a + %></p>").unwrap_err();
/// assert_eq!(err.to_string(), "\
/// x.html.eex:1:13: expected an expression
///   |
/// 1 | <p><%= @a + %></p>
///   |             ^");
/// assert_eq!(format!("{err:?}"), err.to_string());
/// ```
pub struct LoadError {
    repr: Repr,
}

enum Repr {
    Template(galleon_template::Error),
    Watch(std::io::Error),
}

impl LoadError {
    /// The template error (a compile or read error), if that is what it is.
    pub fn template_error(&self) -> Option<&galleon_template::Error> {
        match &self.repr {
            Repr::Template(e) => Some(e),
            Repr::Watch(_) => None,
        }
    }
}

impl From<galleon_template::Error> for LoadError {
    fn from(error: galleon_template::Error) -> LoadError {
        LoadError {
            repr: Repr::Template(error),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Template(e) => fmt::Display::fmt(e, f),
            Repr::Watch(e) => write!(f, "could not start the template watch thread: {e}"),
        }
    }
}

impl fmt::Debug for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for LoadError {
    /// The cause under the message (an I/O error), not the template error itself, whose text
    /// is this error's: a reporter printing the chain shows the message once.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.repr {
            Repr::Template(e) => std::error::Error::source(e),
            Repr::Watch(e) => Some(e),
        }
    }
}
