//! The engine: loads and compiles templates once, links partials, and starts renders.
//!
//! Renders: `render`/`render_with` (whole), `stream`/`stream_with` (chunks), `render_or_stream`
//! (whole up to a bound, else what was rendered plus a `RenderStream` continuing from there) and
//! `render_in_layout`. Programs of the straight shape are first rendered without the VM
//! (`vm/straight.rs`); a render that gives up is done again by the VM. `EngineBuilder` sets `trim`
//! and registered functions. A template is named by string or by a `TemplateId`, looked up once and
//! checked against the engine's catalog by its serial number.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use galleon_iolist::IoList;
use smallvec::SmallVec;

use crate::compile::{Options, compile};
use crate::error::{Error, ErrorKind, Location};
use crate::function::{Function, IntoFunction};
use crate::program::{Catalog, Config, Names, Program};
pub use crate::program::{
    DEFAULT_COPY_BELOW, DEFAULT_MAX_DEPTH, DEFAULT_MAX_MEMORY, DEFAULT_MAX_OUTPUT,
    DEFAULT_MAX_STEPS, DEFAULT_VALUE_COPY_BELOW, Limits,
};
use crate::value::{Assigns, Value};
use crate::vm::{Programs, Slot, Vm, render_straight};

/// A set of compiled templates, ready to render. Cheap to clone and to share across threads:
/// the programs sit behind one `Arc`.
///
/// # Examples
/// ```
/// use galleon_template::{Assigns, Engine};
///
/// let engine = Engine::from_source(
///     "list.html.eex",
///     "<ul><%= for item <- @items do %><li><%= item %></li><% end %></ul>",
/// )
/// .unwrap();
/// let mut assigns = Assigns::new();
/// assigns.insert("items", vec!["a & b", "c"]);
/// let page = engine.render("list.html.eex", &assigns).unwrap();
/// assert_eq!(page.to_vec(), b"<ul><li>a &amp; b</li><li>c</li></ul>");
///
/// // The same page in chunks of about 16 bytes, for output too big to hold.
/// let chunks: Vec<_> = engine.stream("list.html.eex", assigns, 16).unwrap().collect();
/// assert!(chunks.len() > 1);
/// ```
#[derive(Clone)]
pub struct Engine {
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) config: Config,
}

/// A template looked up once by [`Engine::id`], for callers that render the same template on
/// every request: rendering by id skips the name lookup (a string-keyed tree search that showed
/// in profiles of small pages). Valid for the engine that made it and its clones (which share
/// its templates); any other engine refuses it with a `NotFound` error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateId {
    index: usize,
    /// Serial number of the catalog the index belongs to (not its address, which a later engine
    /// could reuse once this one is dropped).
    catalog: u64,
}

/// Serial number of the next catalog compiled.
static NEXT_CATALOG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A template to render: its name (`&str`, `&String`) or a [`TemplateId`].
pub trait TemplateRef {
    /// The template's index in `engine`, or why there is none.
    #[doc(hidden)]
    fn index_in(&self, engine: &Engine) -> Result<usize, Error>;
}

impl TemplateRef for &str {
    fn index_in(&self, engine: &Engine) -> Result<usize, Error> {
        engine.index(self)
    }
}

impl TemplateRef for &String {
    fn index_in(&self, engine: &Engine) -> Result<usize, Error> {
        engine.index(self)
    }
}

impl TemplateRef for TemplateId {
    fn index_in(&self, engine: &Engine) -> Result<usize, Error> {
        if self.catalog == engine.catalog.serial && self.index < engine.catalog.programs.len() {
            Ok(self.index)
        } else {
            Err(Error::new(
                ErrorKind::NotFound,
                "template id from another engine".to_owned(),
            ))
        }
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field(
                "templates",
                &self.catalog.by_name.keys().collect::<Vec<_>>(),
            )
            .field("limits", &self.config.limits)
            .field("copy_below", &self.config.copy_below)
            .field("value_copy_below", &self.config.value_copy_below)
            .finish()
    }
}

/// Asks `assign` once for each name `prog` uses, in order, into `values` (filled where they lie:
/// a vector collected aside would be moved in whole), for the frame-less render and, should it
/// go back, the VM ([`kept`]).
#[inline(always)]
fn ask_each(
    prog: &Program,
    assign: &impl Fn(&str) -> Option<Value>,
    values: &mut SmallVec<[Option<Value>; 4]>,
) {
    values.reserve(prog.assigns.len());
    for name in &prog.assigns {
        values.push(assign(name));
    }
}

/// The values [`ask_each`] kept, asked for by name (the VM's way).
#[inline(always)]
fn kept<'a>(prog: &'a Program, values: &'a [Option<Value>]) -> impl Fn(&str) -> Option<Value> + 'a {
    move |name| {
        let at = prog.assigns.iter().position(|n| n == name)?;
        values.get(at)?.clone()
    }
}

impl Engine {
    /// Compiles every `*.eex` file under `dir`, recursively, and links their partials. Names are
    /// the `/`-separated paths relative to `dir`, such as `"pages/blah.html.eex"`. The first
    /// error (in name order) is returned, located. (With options or functions: [`Engine::builder`].)
    pub fn load(dir: impl AsRef<Path>) -> Result<Engine, Error> {
        Engine::builder().load(dir)
    }

    /// Compiles the template file at `path`, and the partials it calls (transitively), looked up
    /// relative to the file's directory. The file's name is its file name.
    pub fn load_file(path: impl AsRef<Path>) -> Result<Engine, Error> {
        Engine::builder().load_file(path)
    }

    /// One template from source. It cannot call partials (there are none to call).
    pub fn from_source(name: &str, source: &str) -> Result<Engine, Error> {
        Engine::builder().from_source(name, source)
    }

    /// Several templates from `(name, source)` pairs; partials are resolved among them.
    pub fn from_sources<N: AsRef<str>, S: AsRef<str>>(
        sources: impl IntoIterator<Item = (N, S)>,
    ) -> Result<Engine, Error> {
        Engine::builder().from_sources(sources)
    }

    /// Options that change how templates compile (EEx's `trim`, functions registered from
    /// Rust), then `load`, `load_file`, `from_source` or `from_sources`.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    fn link(mut programs: Vec<Program>, functions: Arc<[Function]>) -> Result<Engine, Error> {
        let by_name: BTreeMap<String, usize> = programs
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), i))
            .collect();
        for p in &mut programs {
            for (i, (name, span)) in p.partials.iter().enumerate() {
                // Phoenix's `render "form.html"` names the file `form.html.eex`.
                let found = by_name
                    .get(name)
                    .or_else(|| by_name.get(&format!("{name}.eex")));
                match found {
                    Some(&target) => p.links[i] = target,
                    None => {
                        return Err(Error::new(
                            ErrorKind::NotFound,
                            format!("no template named `{name}`"),
                        )
                        .at(Location::new(&p.name, &p.source, *span)));
                    }
                }
            }
        }
        crate::program::widen_all_assigns(&mut programs);
        Ok(Engine {
            catalog: Arc::new(Catalog {
                serial: NEXT_CATALOG.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                programs,
                names: Names::new(&by_name),
                by_name,
                functions,
            }),
            config: Config {
                limits: Limits::default(),
                copy_below: DEFAULT_COPY_BELOW,
                value_copy_below: DEFAULT_VALUE_COPY_BELOW,
            },
        })
    }

    /// The same templates under other limits.
    pub fn with_limits(mut self, limits: Limits) -> Engine {
        self.config.limits = limits;
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.config.limits
    }

    /// The same templates with another copy threshold (see [`DEFAULT_COPY_BELOW`]): pieces
    /// shorter than `bytes` are copied into the render's scratch buffer, longer ones referenced.
    /// 0 references everything; `usize::MAX` copies everything into one buffer.
    pub fn with_copy_below(mut self, bytes: usize) -> Engine {
        self.config.copy_below = bytes;
        self
    }

    /// The copy threshold in force.
    pub fn copy_below(&self) -> usize {
        self.config.copy_below
    }

    /// The same templates with another copy threshold for values (see
    /// [`DEFAULT_VALUE_COPY_BELOW`]): strings and safe HTML from assigns shorter than `bytes` are
    /// copied into the render's buffer, longer ones referenced. Static text keeps
    /// [`Engine::copy_below`].
    pub fn with_value_copy_below(mut self, bytes: usize) -> Engine {
        self.config.value_copy_below = bytes;
        self
    }

    /// The copy threshold for values in force.
    pub fn value_copy_below(&self) -> usize {
        self.config.value_copy_below
    }

    /// Template names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.catalog.by_name.keys().map(String::as_str)
    }

    /// True when a template is called `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.catalog.by_name.contains_key(name)
    }

    /// The static text of template `name`: one allocation, of which every static segment of its
    /// renders is a slice (constant output such as `<%= "" %>` included).
    pub fn static_text(&self, name: &str) -> Option<&bytes::Bytes> {
        let index = *self.catalog.by_name.get(name)?;
        Some(&self.catalog.programs[index].text)
    }

    /// Looks `name` up once, for rendering it by id (see [`TemplateId`]).
    pub fn id(&self, name: &str) -> Result<TemplateId, Error> {
        Ok(TemplateId {
            index: self.index(name)?,
            catalog: self.catalog.serial,
        })
    }

    pub(crate) fn index(&self, name: &str) -> Result<usize, Error> {
        self.catalog.names.get(name).ok_or_else(|| not_found(name))
    }

    /// Renders `name` whole into one list, within [`Limits::max_output`].
    #[inline]
    pub fn render(&self, name: &str, assigns: &Assigns) -> Result<IoList, Error> {
        // The list is made here, in the caller, and filled in place: a list built at the end
        // of the render and returned was copied by the caller at once (a 136-byte `memcpy`
        // whose wide loads read the narrow stores just made; see bench/results/templates.txt).
        let mut page = IoList::new();
        self.render_into(name, assigns, &mut page)?;
        Ok(page)
    }

    /// [`Engine::render`] into `page` (empty).
    fn render_into(&self, name: &str, assigns: &Assigns, page: &mut IoList) -> Result<(), Error> {
        let index = self.index(name)?;
        let prog = &self.catalog.programs[index];
        if prog.straight.enabled() {
            // Borrowed: no reference count taken on a list or string for the render.
            let mut values: SmallVec<[Option<&Value>; 4]> = SmallVec::new();
            values.reserve(prog.assigns.len());
            for name in &prog.assigns {
                values.push(assigns.get(name));
            }
            prog.size_hint.prepare(page);
            if self.render_straight(prog, &values, page) {
                return Ok(());
            }
        }
        // Whatever the frame-less render left is dropped.
        *page = self.render_vm(index, |key| assigns.get(key).cloned())?;
        Ok(())
    }

    /// Renders `name` whole like [`Engine::render`], asking `assign` for the value of each
    /// `@name` the template uses (`None`: not given), once per name, before the render starts.
    ///
    /// For callers whose assigns already live somewhere else (a query string, a row): nothing
    /// is copied into an [`Assigns`] map, and names the template never uses are never looked at.
    pub fn render_with(
        &self,
        template: impl TemplateRef,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Result<IoList, Error> {
        let index = template.index_in(self)?;
        let prog = &self.catalog.programs[index];
        if prog.straight.enabled() {
            let mut values = SmallVec::new();
            ask_each(prog, &assign, &mut values);
            let mut page = prog.size_hint.list();
            if self.render_straight(prog, &values, &mut page) {
                return Ok(page);
            }
            return self.render_vm(index, kept(prog, &values));
        }
        self.render_vm(index, assign)
    }

    /// A whole render of `prog` into `page` (empty) without the VM's frames (`vm/straight.rs`),
    /// with one value per name it uses; false when it gave up (counted: see `Straight`), `page`
    /// then holding part of the output.
    #[inline]
    fn render_straight<S: Slot>(&self, prog: &Program, values: &[S], page: &mut IoList) -> bool {
        let hint = &prog.size_hint;
        let pause_at = self.config.limits.max_output.saturating_add(1);
        if render_straight(prog, &self.config, values, hint.bytes(), page, pause_at) {
            hint.record(page);
            prog.straight.hit();
            return true;
        }
        prog.straight.missed();
        false
    }

    /// [`Engine::render_with`] of program `index` by the VM.
    fn render_vm(
        &self,
        index: usize,
        assign: impl Fn(&str) -> Option<Value>,
    ) -> Result<IoList, Error> {
        let hint = &self.catalog.programs[index].size_hint;
        let max = self.config.limits.max_output;
        // The page made where it is returned from, and the VM inside `Vm::whole`: neither is
        // moved (each move is a copy of a hundred bytes or more).
        let mut page = Ok(hint.list());
        if let Ok(out) = &mut page {
            match Vm::whole(
                &self.catalog,
                self.config,
                index,
                assign,
                hint.bytes(),
                out,
                max.saturating_add(1),
            ) {
                Ok(true) => hint.record(out),
                Ok(false) => page = Err(self.too_long(index, max)),
                Err(e) => page = Err(e),
            }
        }
        page
    }

    /// The same engine with every whole render run by the VM (tests compare the two).
    #[cfg(test)]
    pub(crate) fn vm_only(self) -> Engine {
        for p in &self.catalog.programs {
            p.straight.disable();
        }
        self
    }

    /// True when program `name` has the shape of a frame-less whole render.
    #[cfg(test)]
    pub(crate) fn straight(&self, name: &str) -> bool {
        self.index(name)
            .is_ok_and(|i| self.catalog.programs[i].straight.enabled())
    }

    /// True when the next render of `name` that may stream tries the frame-less render first.
    #[cfg(test)]
    pub(crate) fn straight_for_bounded(&self, name: &str) -> bool {
        self.index(name)
            .is_ok_and(|i| self.catalog.programs[i].straight.enabled_for_bounded())
    }

    /// The error of a whole render past `max` bytes.
    #[cold]
    #[inline(never)]
    fn too_long(&self, index: usize, max: usize) -> Error {
        Error::new(
            ErrorKind::Limit,
            format!(
                "{}: output exceeds the limit of {max} bytes (stream it instead)",
                self.catalog.programs[index].name
            ),
        )
    }

    /// Renders page `name`, then `layout` with the page as `@inner_content` (safe HTML, referenced,
    /// not copied) and the same other assigns.
    pub fn render_in_layout(
        &self,
        name: &str,
        layout: &str,
        assigns: &Assigns,
    ) -> Result<IoList, Error> {
        self.index(layout)?;
        let page = self.render(name, assigns)?;
        let mut with_page = assigns.clone();
        with_page.insert("inner_content", Value::safe(page));
        self.render(layout, &with_page)
    }

    /// Renders `name` as a sequence of chunks of about `chunk_bytes` each (a chunk ends after the
    /// op that reached the size; 0 is taken as 1). Memory is bounded by the chunk size and the
    /// template, not by the output: a 30 GB page streams in a few hundred kilobytes.
    pub fn stream(
        &self,
        name: &str,
        assigns: Assigns,
        chunk_bytes: usize,
    ) -> Result<RenderStream, Error> {
        self.stream_with(name, |key| assigns.get(key).cloned(), chunk_bytes)
    }

    /// Renders `template` whole if it ends within about `max_whole` bytes; otherwise hands back
    /// what it rendered so far and a [`RenderStream`] that continues from there, `chunk_bytes`
    /// at a time. Nothing is rendered twice: a server sends a short page with a length and a
    /// long one chunked, bounding what it holds per page, without knowing the length in advance.
    /// The whole part runs on one step budget (like [`Engine::render`]); the stream refills it
    /// per chunk (like [`Engine::stream`]).
    ///
    /// # Examples
    /// ```
    /// use galleon_template::{Engine, Rendered};
    ///
    /// let engine = Engine::from_source("t", "<%= for i <- 1..@n do %><%= i %>,<% end %>").unwrap();
    /// let n = |k: &str| (k == "n").then(|| 5.into());
    /// assert!(matches!(engine.render_or_stream("t", n, 100, 4).unwrap(), Rendered::Whole(_)));
    /// let n = |k: &str| (k == "n").then(|| 1000.into());
    /// match engine.render_or_stream("t", n, 100, 64).unwrap() {
    ///     Rendered::Streaming { first, rest } => {
    ///         let mut page = first.to_vec();
    ///         for chunk in rest {
    ///             page.extend_from_slice(&chunk.unwrap().to_vec());
    ///         }
    ///         assert!(page.starts_with(b"1,2,3,") && page.ends_with(b"999,1000,"));
    ///     }
    ///     Rendered::Whole(_) => unreachable!("longer than 100 bytes"),
    /// }
    /// ```
    pub fn render_or_stream(
        &self,
        template: impl TemplateRef,
        assign: impl Fn(&str) -> Option<Value>,
        max_whole: usize,
        chunk_bytes: usize,
    ) -> Result<Rendered, Error> {
        let index = template.index_in(self)?;
        let prog = &self.catalog.programs[index];
        if prog.straight.enabled_for_bounded() {
            let mut values = SmallVec::new();
            ask_each(prog, &assign, &mut values);
            let hint = &prog.size_hint;
            let mut page = hint.list();
            let pause_at = max_whole.saturating_add(1);
            if render_straight(
                prog,
                &self.config,
                &values,
                hint.bytes(),
                &mut page,
                pause_at,
            ) {
                hint.record(&page);
                prog.straight.hit();
                return Ok(Rendered::Whole(page));
            }
            drop(page);
            let rendered =
                self.vm_render_or_stream(index, kept(prog, &values), max_whole, chunk_bytes);
            if let Ok(Rendered::Streaming { .. }) = rendered {
                // Past the bound: not a miss, but the VM takes this page until it ends whole.
                prog.straight.set_long(true);
            } else {
                prog.straight.missed();
            }
            return rendered;
        }
        self.vm_render_or_stream(index, assign, max_whole, chunk_bytes)
    }

    /// [`Engine::render_or_stream`] by the VM.
    fn vm_render_or_stream(
        &self,
        index: usize,
        assign: impl Fn(&str) -> Option<Value>,
        max_whole: usize,
        chunk_bytes: usize,
    ) -> Result<Rendered, Error> {
        let prog = &self.catalog.programs[index];
        let mut out = prog.size_hint.list();
        let paused = Vm::whole_or_rest(
            &self.catalog,
            self.config,
            index,
            assign,
            prog.size_hint.bytes(),
            &mut out,
            max_whole.saturating_add(1),
        )?;
        let Some(mut vm) = paused else {
            prog.size_hint.record(&out);
            prog.straight.set_long(false);
            return Ok(Rendered::Whole(out));
        };
        vm.reserve(chunk_bytes);
        Ok(Rendered::Streaming {
            first: out,
            rest: Box::new(RenderStream {
                vm: Some(vm),
                max_steps: self.config.limits.max_steps,
                max_memory: self.config.limits.max_memory as u64,
                chunk_bytes: chunk_bytes.max(1),
                hint: (0, 0),
            }),
        })
    }

    /// Streams `name` like [`Engine::stream`], taking each assign the template uses from
    /// `assign` (asked once per name, before this returns; the stream keeps the values).
    pub fn stream_with(
        &self,
        template: impl TemplateRef,
        assign: impl Fn(&str) -> Option<Value>,
        chunk_bytes: usize,
    ) -> Result<RenderStream, Error> {
        let index = template.index_in(self)?;
        let mut vm = Vm::new(
            Programs::Owned(Arc::clone(&self.catalog)),
            self.config,
            index,
            assign,
        );
        vm.reserve(chunk_bytes);
        Ok(RenderStream {
            vm: Some(vm),
            max_steps: self.config.limits.max_steps,
            max_memory: self.config.limits.max_memory as u64,
            chunk_bytes: chunk_bytes.max(1),
            hint: (0, 0),
        })
    }
}

/// How an [`Engine`] is made when it needs more than its sources: EEx's `trim` option and
/// functions registered from Rust. Both change what the templates compile to, so they are
/// given before loading.
///
/// ```
/// use galleon_template::{Assigns, Engine};
///
/// let engine = Engine::builder()
///     .function("money", |cents: i64| format!("${}.{:02}", cents / 100, cents % 100))
///     .from_source("price.html.eex", "<b><%= money(@cents) %></b>")?;
/// let mut a = Assigns::new();
/// a.insert("cents", 1999i64);
/// assert_eq!(engine.render("price.html.eex", &a)?.to_vec(), b"<b>$19.99</b>");
///
/// // A wrong argument type is a render error located at the call.
/// a.insert("cents", "lots");
/// let err = engine.render("price.html.eex", &a).unwrap_err();
/// assert!(err.to_string().starts_with(
///     "price.html.eex:1:8: money/1: argument 1: expected an integer, not the string \"lots\""));
/// # Ok::<(), galleon_template::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct EngineBuilder {
    trim: bool,
    functions: Vec<Function>,
    live: bool,
}

impl EngineBuilder {
    /// EEx's `trim: true` (what Phoenix compiles `.html.eex` with): the indentation around tags
    /// and the whitespace before the first one go, and the line breaks around a tag shrink to
    /// one on each side; see the crate docs.
    pub fn trim(mut self, trim: bool) -> EngineBuilder {
        self.trim = trim;
        self
    }

    /// Compiles for live pages: [`Engine::live`] then splits a render into statics and
    /// dynamics (Phoenix LiveView's `Rendered`) and skips the dynamics whose assigns did not
    /// change. Such an engine renders as any other, a little slower (no frame-less renders, no
    /// plain loops).
    pub fn live(mut self, live: bool) -> EngineBuilder {
        self.live = live;
        self
    }

    /// Registers `f` as the template function `name` (a plain name like `money`, or dotted like
    /// `MyApp.money`), callable with as many arguments as `f` takes (up to four). Arguments are
    /// converted with [`crate::FromValue`] (`i64`, `f64`, `bool`, `String`, `Value`,
    /// `Option<T>`, `Vec<T>`); the result with [`crate::IntoResult`] (values, or a `Result`
    /// whose error becomes a render error at the call). A registered function shadows a
    /// built-in of the same name and arity. Registering the same name and arity again
    /// replaces it.
    pub fn function<Args>(mut self, name: &str, f: impl IntoFunction<Args>) -> EngineBuilder {
        let f = Function::new(name, f);
        self.functions
            .retain(|g| !(g.name == f.name && g.arity == f.arity));
        self.functions.push(f);
        self
    }

    fn options(&self) -> Options<'_> {
        Options {
            trim: self.trim,
            functions: &self.functions,
            live: self.live,
        }
    }

    /// [`Engine::load`] with these options.
    pub fn load(self, dir: impl AsRef<Path>) -> Result<Engine, Error> {
        let dir = dir.as_ref();
        let mut files = Vec::new();
        walk(dir, dir, &mut files)?;
        files.sort();
        let mut sources = Vec::with_capacity(files.len());
        for (name, path) in files {
            sources.push((name, read(&path)?));
        }
        self.from_sources(sources)
    }

    /// [`Engine::load_file`] with these options.
    pub fn load_file(self, path: impl AsRef<Path>) -> Result<Engine, Error> {
        let path = path.as_ref();
        let root = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Io,
                    format!("{}: not a template file", path.display()),
                )
            })?;
        let mut programs = Vec::new();
        let mut seen = BTreeMap::new();
        let mut queue = VecDeque::from([name]);
        while let Some(name) = queue.pop_front() {
            // `render "form.html"` for `form.html.eex`, as at linking.
            let eex = format!("{name}.eex");
            let name = match programs.is_empty() || root.join(&name).is_file() {
                false if root.join(&eex).is_file() => eex,
                _ => name,
            };
            let file = root.join(&name);
            if seen.contains_key(&name) || (!programs.is_empty() && !file.is_file()) {
                // Done, or left unresolved: linking reports it at the call.
                continue;
            }
            let program = compile(&name, &read(&file)?, self.options())?;
            queue.extend(program.partials.iter().map(|(p, _)| p.clone()));
            seen.insert(name, programs.len());
            programs.push(program);
        }
        Engine::link(programs, self.functions.into())
    }

    /// [`Engine::from_source`] with these options.
    pub fn from_source(self, name: &str, source: &str) -> Result<Engine, Error> {
        self.from_sources([(name, source)])
    }

    /// [`Engine::from_sources`] with these options.
    pub fn from_sources<N: AsRef<str>, S: AsRef<str>>(
        self,
        sources: impl IntoIterator<Item = (N, S)>,
    ) -> Result<Engine, Error> {
        let mut programs = Vec::new();
        for (name, source) in sources {
            programs.push(compile(name.as_ref(), source.as_ref(), self.options())?);
        }
        Engine::link(programs, self.functions.into())
    }
}

/// The usual `max_whole` of [`Engine::render_or_stream`] for a web server: a page that ends
/// within 4 MiB is sent whole, with `content-length`; a longer one is streamed (chunked). 4 MiB is
/// ten times the seed's largest page (410 KB), and small enough that 1000 concurrent whole
/// renders stay under 4 GiB. One value for every server of the workspace: `galleon serve`'s
/// `--full-body-max` default (`galleon-site`) and `galleon-axum`'s `Templates`.
pub const DEFAULT_FULL_BODY_MAX: usize = 4 * 1024 * 1024;

/// What [`Engine::render_or_stream`] produced.
#[derive(Debug)]
pub enum Rendered {
    /// The whole output: the template ended within the bound.
    Whole(IoList),
    /// The template went past the bound: the output so far, and the rest as a stream that
    /// continues from where the render paused.
    Streaming {
        /// The first part of the output (a little over the bound: a render pauses between ops).
        first: IoList,
        /// The rest of the output (boxed: the whole case, every ordinary page, stays small).
        rest: Box<RenderStream>,
    },
}

/// A render in progress, handing out its output in chunks: an iterator of `IoList`s. Owns
/// everything it needs (`Send + 'static`). After an error it ends.
#[derive(Debug)]
pub struct RenderStream {
    vm: Option<Vm<'static>>,
    max_steps: u64,
    /// `Limits::max_memory`, refilled for each chunk as the steps are.
    max_memory: u64,
    chunk_bytes: usize,
    /// Segments and scratch bytes of the last chunk, to size the next one.
    hint: (usize, usize),
}

impl Iterator for RenderStream {
    type Item = Result<IoList, Error>;

    fn next(&mut self) -> Option<Result<IoList, Error>> {
        let vm = self.vm.as_mut()?;
        vm.steps = self.max_steps;
        vm.memory = self.max_memory;
        let mut out = IoList::with_capacity(self.hint.0, self.hint.1);
        match vm.run(&mut out, self.chunk_bytes) {
            Ok(false) => {
                self.hint = (out.segment_count(), out.scratch_len());
                Some(Ok(out))
            }
            Ok(true) => {
                self.vm = None;
                (!out.is_empty()).then_some(Ok(out))
            }
            Err(e) => {
                self.vm = None;
                Some(Err(e))
            }
        }
    }
}

/// The error of a render by a name the engine does not hold (out of line: the lookup stays
/// small).
#[cold]
#[inline(never)]
fn not_found(name: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("no template named `{name}`"))
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", path.display())).with_source(e))
}

/// Collects `(name, path)` of every `*.eex` file under `dir`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), Error> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", dir.display())).with_source(e))?;
    for entry in entries {
        let entry = entry.map_err(|e| {
            Error::new(ErrorKind::Io, format!("{}: {e}", dir.display())).with_source(e)
        })?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| {
            Error::new(ErrorKind::Io, format!("{}: {e}", path.display())).with_source(e)
        })?;
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "eex") {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let name = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            out.push((name, path));
        }
    }
    Ok(())
}
