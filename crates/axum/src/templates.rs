//! `Templates`: a shared engine and how its renders become pages.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use galleon_iolist::{IoList, Owners, WritePolicy};
use galleon_template::{Assigns, Engine, Rendered, TemplateRef, Value};

use crate::body::{Framer, PageBody};
use crate::page::{Page, RenderError};

/// Default [`Templates::with_full_body_max`]: pages that end within 4 MiB are sent whole with
/// `content-length`, longer ones chunked (the same bound as `galleon serve`'s
/// `--full-body-max`: ten times the seed's largest page).
pub const DEFAULT_FULL_BODY_MAX: usize = 4 * 1024 * 1024;

/// Default [`Templates::with_chunk_bytes`]: 256 KiB per chunk of a streamed page (as
/// `galleon serve`'s `--chunk-bytes`).
pub const DEFAULT_CHUNK_BYTES: usize = 256 * 1024;

/// A compiled [`Engine`] shared by every handler: clone it into axum's `State` (a clone is one
/// reference count). It knows the allocations its renders reference (each template's static
/// text), so pages go out as references to them, not copies; the write policy (by default
/// galleon's: copy runs of pieces under 4 KiB, reference the rest) decides the frames.
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
    engine: Engine,
    framer: Framer,
    full_body_max: usize,
    chunk_bytes: usize,
}

impl fmt::Debug for Templates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Templates")
            .field("engine", &self.inner.engine)
            .field("policy", &self.inner.framer.policy)
            .field("full_body_max", &self.inner.full_body_max)
            .field("chunk_bytes", &self.inner.chunk_bytes)
            .finish()
    }
}

impl Templates {
    /// Shares `engine`, with galleon's default write policy and bounds.
    pub fn new(engine: Engine) -> Templates {
        let owners = Owners::new(
            engine
                .names()
                .filter_map(|name| engine.static_text(name).cloned()),
        );
        Templates {
            inner: Arc::new(Inner {
                engine,
                framer: Framer {
                    policy: WritePolicy::default(),
                    owners: Arc::new(owners),
                },
                full_body_max: DEFAULT_FULL_BODY_MAX,
                chunk_bytes: DEFAULT_CHUNK_BYTES,
            }),
        }
    }

    /// Compiles every `*.eex` under `dir` ([`Engine::load`]) and shares the engine.
    pub fn load(dir: impl AsRef<Path>) -> Result<Templates, galleon_template::Error> {
        Ok(Templates::new(Engine::load(dir)?))
    }

    /// With another write policy: its `coalesce_below` decides which segments are referenced
    /// and which are copied into merged frames ([`galleon_iolist::to_frames`]).
    pub fn with_policy(mut self, policy: WritePolicy) -> Templates {
        Arc::make_mut(&mut self.inner).framer.policy = policy;
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

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The write policy frames are made under.
    pub fn policy(&self) -> WritePolicy {
        self.inner.framer.policy
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
        let inner = &*self.inner;
        let rendered = inner.engine.render_or_stream(
            template,
            assign,
            inner.full_body_max,
            inner.chunk_bytes,
        )?;
        Ok(Page::new(match rendered {
            Rendered::Whole(list) => PageBody::whole(inner.framer.frames(&list)),
            Rendered::Streaming { first, rest } => PageBody::streaming(
                Some(inner.framer.frames(&first)),
                rest,
                inner.framer.clone(),
            ),
        }))
    }

    /// Renders `template` whole, always with `content-length`, up to the engine's output limit
    /// (`Limits::max_output`; past it, an error).
    pub fn render_whole(
        &self,
        template: impl TemplateRef,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Result<Page, RenderError> {
        let list = self.inner.engine.render_with(template, assign)?;
        Ok(self.page(&list))
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
        let inner = &*self.inner;
        let render = inner
            .engine
            .stream_with(template, assign, inner.chunk_bytes)?;
        Ok(Page::new(PageBody::streaming(
            None,
            Box::new(render),
            inner.framer.clone(),
        )))
    }

    /// A list rendered elsewhere (with this engine, or by hand) as a whole page: its segments
    /// inside this engine's templates referenced, the rest under the write policy.
    pub fn page(&self, list: &IoList) -> Page {
        Page::new(PageBody::whole(self.inner.framer.frames(list)))
    }
}
