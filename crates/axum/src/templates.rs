//! `Templates`: a shared engine (or a hot-reloaded set of them) and how its renders become pages.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use galleon_iolist::{IoList, Owners, WritePolicy, to_frames};
use galleon_state::Watch;
use galleon_template::{Assigns, Engine, Rendered, TemplateRef, Value};

use crate::body::{Framer, PageBody};
use crate::builder::{LoadError, TemplatesBuilder};
use crate::page::{Page, RenderError};
use crate::reload::Live;

/// Default [`Templates::with_full_body_max`]: pages that end within 4 MiB are sent whole with
/// `content-length`, longer ones chunked. The workspace's one value, defined in
/// `galleon-template` and shared with `galleon serve`'s `--full-body-max`.
pub use galleon_template::DEFAULT_FULL_BODY_MAX;

/// Default [`Templates::with_chunk_bytes`]: 256 KiB per chunk of a streamed page (as
/// `galleon serve`'s `--chunk-bytes`).
pub const DEFAULT_CHUNK_BYTES: usize = 256 * 1024;

/// A compiled [`Engine`] shared by every handler: clone it into axum's `State` (a clone is one
/// reference count). It knows the allocations its renders reference (each template's static
/// text), so pages go out as references to them, not copies; the write policy (by default
/// galleon's: copy runs of pieces under 4 KiB, reference the rest) decides the frames.
///
/// Made by [`Templates::new`] (an engine), [`Templates::load`] (a directory) or
/// [`Templates::builder`] (EEx's `trim`, functions, thresholds, bounds, hot reload with
/// [`TemplatesBuilder::watch`]).
///
/// # Examples
/// Rendering in a handler, with the engine as the router's state:
/// ```
/// use axum::{Router, extract::{Query, State}, routing::get};
/// use galleon_axum::{Engine, Page, RenderError, Templates, Value};
/// use std::collections::HashMap;
///
/// async fn greet(
///     State(t): State<Templates>,
///     Query(q): Query<HashMap<String, String>>,
/// ) -> Result<Page, RenderError> {
///     t.render_with("greet.html.eex", |name| q.get(name).map(|v| Value::str(v)))
/// }
///
/// let engine = Engine::from_source("greet.html.eex", "<h1>Hello, <%= @name %></h1>")?;
/// let app: Router = Router::new().route("/greet", get(greet)).with_state(Templates::new(engine));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Templates {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    source: Source,
    policy: WritePolicy,
    full_body_max: usize,
    chunk_bytes: usize,
    /// Pages of a set whose newest files failed to compile carry the error, for
    /// [`dev_error_page`](crate::dev_error_page) to show to loopback peers.
    dev_errors: bool,
    /// The polling thread of a watched directory: stopped and joined when the last clone of
    /// these templates is dropped (it holds the [`Live`] set, not the templates).
    _watch: Option<Arc<Watch>>,
}

/// Where the templates come from.
#[derive(Clone)]
enum Source {
    /// One engine for the life of the templates: rendered with no indirection.
    Fixed(Set),
    /// A directory recompiled when it changes; each render takes the current set.
    Live(Arc<Live>),
}

/// One compiled version of the templates.
#[derive(Clone)]
pub(crate) struct Set {
    pub(crate) engine: Engine,
    /// The allocations the engine's renders reference (each template's static text).
    pub(crate) owners: Arc<Owners>,
    /// Why the newest files did not compile (`engine` is then the last good version), as the
    /// development error page shows it: located, with the caret, no path beyond the names.
    pub(crate) broken: Option<Arc<str>>,
}

impl Set {
    pub(crate) fn new(engine: Engine) -> Set {
        let owners = Owners::new(
            engine
                .names()
                .filter_map(|name| engine.static_text(name).cloned()),
        );
        Set {
            engine,
            owners: Arc::new(owners),
            broken: None,
        }
    }
}

impl fmt::Debug for Templates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        f.debug_struct("Templates")
            .field("engine", &self.engine())
            .field("policy", &inner.policy)
            .field("full_body_max", &inner.full_body_max)
            .field("chunk_bytes", &inner.chunk_bytes)
            .field("dev_errors", &inner.dev_errors)
            .field("watching", &self.is_watching())
            .finish()
    }
}

/// The bounds and options a builder hands to [`Templates::from_parts`].
pub(crate) struct Parts {
    pub(crate) policy: WritePolicy,
    pub(crate) full_body_max: usize,
    pub(crate) chunk_bytes: usize,
    pub(crate) dev_errors: bool,
}

impl Templates {
    /// Shares `engine`, with galleon's default write policy and bounds.
    pub fn new(engine: Engine) -> Templates {
        Templates::from_parts(
            Source::Fixed(Set::new(engine)),
            TemplatesBuilder::default().parts(),
            None,
        )
    }

    /// Compiles every `*.eex` under `dir` ([`Engine::load`]) and shares the engine. The error
    /// prints the located message with its caret, in `Display` and in `Debug` alike (what `?`
    /// in `main` shows). With options: [`Templates::builder`].
    pub fn load(dir: impl AsRef<Path>) -> Result<Templates, LoadError> {
        Templates::builder().load(dir)
    }

    /// Options (EEx's `trim`, registered functions, copy thresholds, limits, the write policy,
    /// the whole-body bound, the development error page), then `load` or `watch` a directory.
    ///
    /// # Examples
    /// ```
    /// use galleon_axum::{Assigns, Templates};
    ///
    /// let t = Templates::builder()
    ///     .trim(true)
    ///     .function("money", |cents: i64| format!("${}.{:02}", cents / 100, cents % 100))
    ///     .from_source("price.html.eex", "<p>\n  <%= money(@cents) %>\n</p>\n")?;
    /// let mut a = Assigns::new();
    /// a.insert("cents", 1999);
    /// // "<p>\n$19.99\n</p>\n": the indentation before the tag is trimmed (18 bytes without).
    /// assert_eq!(t.render("price.html.eex", &a)?.body().len(), Some(16));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder() -> TemplatesBuilder {
        TemplatesBuilder::default()
    }

    pub(crate) fn fixed(engine: Engine, parts: Parts) -> Templates {
        Templates::from_parts(Source::Fixed(Set::new(engine)), parts, None)
    }

    pub(crate) fn live(live: Arc<Live>, parts: Parts, watch: Watch) -> Templates {
        Templates::from_parts(Source::Live(live), parts, Some(Arc::new(watch)))
    }

    fn from_parts(source: Source, parts: Parts, watch: Option<Arc<Watch>>) -> Templates {
        Templates {
            inner: Arc::new(Inner {
                source,
                policy: parts.policy,
                full_body_max: parts.full_body_max,
                chunk_bytes: parts.chunk_bytes.max(1),
                dev_errors: parts.dev_errors,
                _watch: watch,
            }),
        }
    }

    /// With another write policy: its `coalesce_below` decides which segments are referenced
    /// and which are copied into merged frames ([`galleon_iolist::to_frames`]).
    pub fn with_policy(mut self, policy: WritePolicy) -> Templates {
        Arc::make_mut(&mut self.inner).policy = policy;
        self
    }

    /// [`Templates::render`] sends pages that end within `bytes` whole, with `content-length`,
    /// and streams longer ones.
    pub fn with_full_body_max(mut self, bytes: usize) -> Templates {
        Arc::make_mut(&mut self.inner).full_body_max = bytes;
        self
    }

    /// Bytes rendered per chunk of a streamed page (0 is taken as 1). A streaming response
    /// holds about two chunks: the one being sent and the one rendered ahead.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Templates {
        Arc::make_mut(&mut self.inner).chunk_bytes = bytes.max(1);
        self
    }

    /// The engine: for watched templates, the current version's (a clone: one reference count).
    /// Its [`TemplateId`](crate::TemplateId)s are valid for that version only; watched
    /// templates are best rendered by name.
    pub fn engine(&self) -> Engine {
        self.with_set(|set| set.engine.clone())
    }

    /// The write policy frames are made under.
    pub fn policy(&self) -> WritePolicy {
        self.inner.policy
    }

    /// The whole-body bound of [`Templates::render`] ([`DEFAULT_FULL_BODY_MAX`] unless set).
    pub fn full_body_max(&self) -> usize {
        self.inner.full_body_max
    }

    /// Bytes per chunk of a streamed page ([`DEFAULT_CHUNK_BYTES`] unless set).
    pub fn chunk_bytes(&self) -> usize {
        self.inner.chunk_bytes
    }

    /// True for templates made by [`TemplatesBuilder::watch`] (a thread polls their directory).
    pub fn is_watching(&self) -> bool {
        matches!(self.inner.source, Source::Live(_))
    }

    /// Why the newest files of a watched directory failed to compile, while the last good
    /// templates keep serving: the located message with its caret (template names relative to
    /// the directory). `None` when they compiled, and always for templates not watched.
    pub fn reload_error(&self) -> Option<Arc<str>> {
        self.with_set(|set| set.broken.clone())
    }

    /// Runs `f` with the current set (a snapshot of a watched one, held for `f`'s length).
    fn with_set<R>(&self, f: impl FnOnce(&Set) -> R) -> R {
        match &self.inner.source {
            Source::Fixed(set) => f(set),
            Source::Live(live) => f(&live.snapshot()),
        }
    }

    /// The page of a render by `set`, carrying `set`'s compile error when the development page
    /// is on.
    fn page_of(&self, set: &Set, body: PageBody) -> Page {
        Page::new(body).with_dev_error(self.dev_error(set))
    }

    fn failed(&self, set: &Set, error: galleon_template::Error) -> RenderError {
        RenderError::from(error).with_dev_error(self.dev_error(set))
    }

    fn dev_error(&self, set: &Set) -> Option<Arc<str>> {
        if self.inner.dev_errors {
            set.broken.clone()
        } else {
            None
        }
    }

    fn framer(&self, set: &Set) -> Framer {
        Framer {
            policy: self.inner.policy,
            owners: set.owners.clone(),
        }
    }

    /// Renders `template` with `assigns`: whole with `content-length` if it ends within the
    /// full-body bound ([`DEFAULT_FULL_BODY_MAX`]), else what was rendered so far followed by
    /// the rest streamed (chunked), rendered on the blocking pool a chunk at a time. Nothing is
    /// rendered twice.
    ///
    /// # Examples
    /// ```
    /// use galleon_axum::{Assigns, Engine, Templates};
    ///
    /// let t = Templates::new(Engine::from_source("t", "<%= for _ <- 1..@n do %>x<% end %>")?)
    ///     .with_full_body_max(100);
    /// let mut a = Assigns::new();
    /// a.insert("n", 10);
    /// assert_eq!(t.render("t", &a)?.body().len(), Some(10));
    /// a.insert("n", 1000);
    /// assert!(t.render("t", &a)?.body().is_streaming());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn render(
        &self,
        template: impl TemplateRef,
        assigns: &Assigns,
    ) -> Result<Page, RenderError> {
        self.render_with(template, |name| assigns.get(name).cloned())
    }

    /// Like [`Templates::render`], asking `assign` for the value of each `@name` the template
    /// uses (`None`: not given), once per name: assigns taken straight from a query string, a
    /// row or a struct, without building an [`Assigns`] map.
    pub fn render_with(
        &self,
        template: impl TemplateRef,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Result<Page, RenderError> {
        self.with_set(|set| self.render_by(set, template, assign))
    }

    fn render_by(
        &self,
        set: &Set,
        template: impl TemplateRef,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Result<Page, RenderError> {
        let inner = &*self.inner;
        let rendered = set
            .engine
            .render_or_stream(template, assign, inner.full_body_max, inner.chunk_bytes)
            .map_err(|e| self.failed(set, e))?;
        let body = match rendered {
            Rendered::Whole(list) => PageBody::whole(to_frames(&list, inner.policy, &set.owners)),
            Rendered::Streaming { first, rest } => PageBody::streaming(
                Some(to_frames(&first, inner.policy, &set.owners)),
                rest,
                self.framer(set),
            ),
        };
        Ok(self.page_of(set, body))
    }

    /// Renders `page`, then `layout` with the page as `@inner_content` (safe HTML, referenced,
    /// not copied) and the same other assigns, as [`Engine::render_in_layout`] does (same
    /// arguments, same bytes), in one call: the result is sent whole up to the full-body bound
    /// and streamed past it, like [`Templates::render`]'s. The page itself renders whole (it is
    /// needed before the layout's first byte), within the engine's `Limits::max_output`.
    ///
    /// # Examples
    /// ```
    /// use galleon_axum::{Assigns, Engine, Templates};
    ///
    /// let templates = Templates::new(Engine::from_sources([
    ///     ("layout.html.eex", "<title><%= @title %></title><main><%= @inner_content %></main>"),
    ///     ("index.html.eex", "<h1><%= @title %></h1>"),
    /// ])?);
    /// let mut assigns = Assigns::new();
    /// assigns.insert("title", "Home & away");
    /// let page = templates.render_in_layout("index.html.eex", "layout.html.eex", &assigns)?;
    /// // <title>Home &amp; away</title><main><h1>Home &amp; away</h1></main>
    /// assert_eq!(page.body().len(), Some(67));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn render_in_layout(
        &self,
        page: &str,
        layout: &str,
        assigns: &Assigns,
    ) -> Result<Page, RenderError> {
        self.with_set(|set| {
            let engine = &set.engine;
            let layout = engine.id(layout).map_err(|e| self.failed(set, e))?;
            let inner = Value::safe(
                engine
                    .render(page, assigns)
                    .map_err(|e| self.failed(set, e))?,
            );
            self.render_by(set, layout, |name| {
                if name == "inner_content" {
                    Some(inner.clone())
                } else {
                    assigns.get(name).cloned()
                }
            })
        })
    }

    /// Renders `template` whole, always with `content-length`, up to the engine's output limit
    /// (`Limits::max_output`; past it, an error).
    pub fn render_whole(
        &self,
        template: impl TemplateRef,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Result<Page, RenderError> {
        self.with_set(|set| {
            let list = set
                .engine
                .render_with(template, assign)
                .map_err(|e| self.failed(set, e))?;
            let body = PageBody::whole(to_frames(&list, self.inner.policy, &set.owners));
            Ok(self.page_of(set, body))
        })
    }

    /// Streams `template` chunked, whatever its length: every chunk, the first included,
    /// rendered on tokio's blocking pool, one ahead of the socket (see [`PageBody`]). Errors
    /// before the first byte (no such template) are returned here; later ones cut the body.
    ///
    /// # Examples
    /// ```
    /// use galleon_axum::{Assigns, Engine, Templates};
    ///
    /// let t = Templates::new(Engine::from_source("doom", "<%= for _ <- 1..@n do %>DOOM\n<% end %>")?)
    ///     .with_chunk_bytes(64 * 1024);
    /// let mut a = Assigns::new();
    /// a.insert("n", 100_000_000); // 500 MB, in chunks of 64 KiB
    /// assert!(t.stream("doom", a)?.body().is_streaming());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream(
        &self,
        template: impl TemplateRef,
        assigns: Assigns,
    ) -> Result<Page, RenderError> {
        self.stream_with(template, move |name| assigns.get(name).cloned())
    }

    /// Like [`Templates::stream`], asking `assign` for each `@name` (once, before it returns).
    pub fn stream_with(
        &self,
        template: impl TemplateRef,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Result<Page, RenderError> {
        self.with_set(|set| {
            let render = set
                .engine
                .stream_with(template, assign, self.inner.chunk_bytes)
                .map_err(|e| self.failed(set, e))?;
            let body = PageBody::streaming(None, Box::new(render), self.framer(set));
            Ok(self.page_of(set, body))
        })
    }

    /// A list rendered elsewhere (with this engine, or by hand) as a whole page: its segments
    /// inside this engine's templates referenced, the rest under the write policy.
    pub fn page(&self, list: &IoList) -> Page {
        self.with_set(|set| {
            let body = PageBody::whole(to_frames(list, self.inner.policy, &set.owners));
            self.page_of(set, body)
        })
    }
}
