//! Runtime support of compiled templates: what `#[derive(Template)]` (crate
//! `galleon-template-derive`) generates code against.
//!
//! A derived template is Rust code: its static text is byte-string literals in the binary's
//! read-only data, copied into the output buffer when short ([`Out::copy`], a fixed-size copy
//! once inlined) and referenced as `&'static` segments when at least the copy threshold long;
//! values are written by their [`Render`] impl (integers in place, strings escaped by a scan
//! that references long clean runs of shared strings). Output is byte for byte what the runtime
//! [`Engine`] renders from the same template and the same data (converted with
//! [`Value::from_serialize`](crate::Value::from_serialize)).
//!
//! Templates using a shape the derive does not compile natively render through the runtime
//! engine instead (see the derive's docs): same bytes, the engine's speed.

mod ops;
mod out;
mod probe;
mod render;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use galleon_iolist::IoList;

pub use ops::{
    Counted, Iterate, Scalar, ToScalar, Truthy, compare, eq, iter_from, range, range_from,
    range_len, strict_bool, strict_eq,
};
pub use out::{BUF_BYTES, Out, Writer};
#[doc(hidden)]
pub use probe::{BaseAny, BaseOption, Probe, TruthyAny, TruthyOption, TruthyScalar};
pub use render::{Raw, Render};

use crate::engine::{Engine, RenderStream};
use crate::error::{Error, ErrorKind, Location};
use crate::span::Span;
use crate::value::{Assigns, Value};

/// A template compiled into Rust by `#[derive(Template)]`: the struct's fields are its assigns.
///
/// # Examples
/// (Not compiled here, where the derive is not a dependency; the derive crate's docs run the
/// same kind of example.)
/// ```ignore
/// use galleon_template::compiled::Template;
/// use galleon_template_derive::Template;
///
/// #[derive(Template)]
/// #[template(source = "<ul><%= for x <- @items do %><li><%= x %></li><% end %></ul>")]
/// struct List {
///     items: Vec<String>,
/// }
///
/// let page = List { items: vec!["a & b".into()] }.render()?;
/// assert_eq!(page.to_vec(), b"<ul><li>a &amp; b</li></ul>");
/// # Ok::<(), galleon_template::Error>(())
/// ```
pub trait Template {
    /// Renders the whole page into one list.
    // Always in the caller (the template's code, `__run`, need not be): not inlined, the list
    // is returned and then copied out of the `Result` by a 136-byte `memcpy` reading the
    // stores just made (bench/results/templates.txt). For the same reason the list is made as
    // the `Result` itself (`finish_ok`), from the buffer's parts in registers.
    #[inline(always)]
    fn render(&self) -> Result<IoList, Error> {
        if let Some(r) = self.__engine_render() {
            return r;
        }
        let hint = Self::__size_hint();
        let mut out = Out::new(Self::COPY_BELOW, hint.load(Ordering::Relaxed));
        self.__run::<false>(&mut out, &mut [], usize::MAX)?;
        hint.store(out.len(), Ordering::Relaxed);
        out.finish_ok()
    }

    /// Renders the page as chunks of about `chunk_bytes` each (a chunk ends after the loop
    /// iteration that reached the size; 0 is taken as 1). Memory is bounded by the chunk size,
    /// not by the output, as with [`Engine::stream`].
    fn stream(self, chunk_bytes: usize) -> Stream<Self>
    where
        Self: Sized,
    {
        Stream::new(self, chunk_bytes)
    }

    /// Renders the page whole if it ends within about `max_whole` bytes; otherwise hands back
    /// what was rendered so far and a [`Stream`] continuing from there (nothing is rendered
    /// twice), like [`Engine::render_or_stream`].
    fn render_or_stream(self, max_whole: usize, chunk_bytes: usize) -> Result<Rendered<Self>, Error>
    where
        Self: Sized,
    {
        match self.__engine_render_or_stream(max_whole, chunk_bytes) {
            None => {}
            Some(Err(e)) => return Err(e),
            Some(Ok(crate::engine::Rendered::Whole(list))) => return Ok(Rendered::Whole(list)),
            Some(Ok(crate::engine::Rendered::Streaming { first, rest })) => {
                let mut stream = Stream::new(self, chunk_bytes);
                stream.started = true;
                stream.engine = Some(*rest);
                return Ok(Rendered::Streaming {
                    first,
                    rest: Box::new(stream),
                });
            }
        }
        let mut stream = Stream::new(self, max_whole.saturating_add(1));
        let first = match stream.next() {
            Some(first) => first?,
            None => IoList::new(),
        };
        if stream.done() {
            return Ok(Rendered::Whole(first));
        }
        stream.chunk_bytes = chunk_bytes.max(1);
        Ok(Rendered::Streaming {
            first,
            rest: Box::new(stream),
        })
    }

    /// Pieces shorter than this many bytes are copied, longer ones referenced.
    #[doc(hidden)]
    const COPY_BELOW: usize;

    /// Resume slots of the generated code (loop positions).
    #[doc(hidden)]
    const SLOTS: usize;

    /// Runs the generated code: with `PAUSE`, stops after the loop iteration at which the
    /// output reached `limit` bytes, saving its position in `state` (`Ok(false)`), and
    /// resumes from `state`; `Ok(true)` once the template ended.
    #[doc(hidden)]
    fn __run<const PAUSE: bool>(
        &self,
        out: &mut Out,
        state: &mut [usize],
        limit: usize,
    ) -> Result<bool, Error>;

    /// The size of the last render, to size the next one's first buffer.
    #[doc(hidden)]
    fn __size_hint() -> &'static AtomicUsize;

    /// Templates rendered by the runtime engine: the whole render.
    #[doc(hidden)]
    fn __engine_render(&self) -> Option<Result<IoList, Error>> {
        None
    }

    /// Templates rendered by the runtime engine: whole, or the start and a stream.
    #[doc(hidden)]
    fn __engine_render_or_stream(
        &self,
        _max_whole: usize,
        _chunk_bytes: usize,
    ) -> Option<Result<crate::engine::Rendered, Error>> {
        None
    }

    /// Templates rendered by the runtime engine: a stream of chunks.
    #[doc(hidden)]
    fn __engine_stream(&self, _chunk_bytes: usize) -> Option<Result<RenderStream, Error>> {
        None
    }
}

/// What [`Template::render_or_stream`] produced.
#[derive(Debug)]
pub enum Rendered<T> {
    /// The whole output.
    Whole(IoList),
    /// The output so far, and the rest as a stream.
    Streaming {
        /// The first part (a little over the bound: renders pause between loop iterations).
        first: IoList,
        /// The rest of the output (boxed: the whole case, every ordinary page, stays small).
        rest: Box<Stream<T>>,
    },
}

/// A compiled render in progress, handing out its output in chunks: an iterator of `IoList`s.
/// Holds the template and its loop positions between chunks. After an error it ends.
#[derive(Debug)]
pub struct Stream<T> {
    template: T,
    state: Vec<usize>,
    chunk_bytes: usize,
    engine: Option<RenderStream>,
    started: bool,
    done: bool,
}

impl<T: Template> Stream<T> {
    fn new(template: T, chunk_bytes: usize) -> Stream<T> {
        Stream {
            state: vec![0; T::SLOTS],
            template,
            chunk_bytes: chunk_bytes.max(1),
            engine: None,
            started: false,
            done: false,
        }
    }

    /// True once the whole template was handed out.
    pub fn done(&self) -> bool {
        self.done
    }
}

impl<T: Template> Iterator for Stream<T> {
    type Item = Result<IoList, Error>;

    fn next(&mut self) -> Option<Result<IoList, Error>> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            match self.template.__engine_stream(self.chunk_bytes) {
                Some(Ok(s)) => self.engine = Some(s),
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {}
            }
        }
        if let Some(engine) = &mut self.engine {
            let next = engine.next();
            if next.is_none() {
                self.done = true;
            }
            return next;
        }
        let mut out = Out::new(T::COPY_BELOW, self.chunk_bytes.min(BUF_BYTES));
        match self
            .template
            .__run::<true>(&mut out, &mut self.state, self.chunk_bytes)
        {
            Ok(finished) => {
                self.done = finished;
                (!finished || !out.is_empty()).then(|| Ok(out.finish()))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Locates an error of generated code at byte span `start..end` of template `name` (whose
/// source is `source`), unless it is already located.
#[doc(hidden)]
#[cold]
pub fn locate(e: Error, name: &str, source: &str, start: usize, end: usize) -> Error {
    if e.location().is_some() {
        return e;
    }
    e.at(Location::new(name, source, Span::new(start, end)))
}

/// An error of a kind the engine reports, for code around compiled templates that checks
/// values itself (a page refusing a query value of the wrong shape), so that callers handle
/// both paths' errors alike.
pub fn error(kind: ErrorKind, message: impl Into<String>) -> Error {
    Error::new(kind, message)
}

/// A syntax error at byte span `start..end` of a template, formatted like the engine's
/// (for the derive's compile-time errors).
#[doc(hidden)]
pub fn syntax_error(message: &str, name: &str, source: &str, start: usize, end: usize) -> Error {
    Error::new(ErrorKind::Syntax, message).at(Location::new(name, source, Span::new(start, end)))
}

/// The runtime engine of a template the derive does not compile natively: compiled once from
/// the sources embedded in the binary, on first use.
#[doc(hidden)]
#[derive(Debug)]
pub struct Fallback {
    engine: OnceLock<Result<Engine, String>>,
}

impl Fallback {
    /// Not yet compiled.
    pub const fn new() -> Fallback {
        Fallback {
            engine: OnceLock::new(),
        }
    }

    /// The engine: the template and its partials (`sources`), with `trim` and `copy_below`.
    pub fn engine(
        &self,
        sources: &[(&str, &str)],
        trim: bool,
        copy_below: usize,
    ) -> Result<&Engine, Error> {
        self.engine
            .get_or_init(|| {
                Engine::builder()
                    .trim(trim)
                    .from_sources(sources.iter().copied())
                    .map(|e| e.with_copy_below(copy_below))
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| Error::new(ErrorKind::Syntax, e.clone()))
    }
}

impl Default for Fallback {
    fn default() -> Fallback {
        Fallback::new()
    }
}

/// A field as an assign of a fallback render: any `serde::Serialize` value (converted with
/// [`Value::from_serialize`]), or a [`Value`] (cloned as it is: atoms and safe HTML stay so).
pub trait ToAssign {
    /// The field's value.
    fn to_assign(&self) -> Result<Value, Error>;
}

impl<T: serde::Serialize + ?Sized> ToAssign for T {
    fn to_assign(&self) -> Result<Value, Error> {
        Value::from_serialize(self)
    }
}

impl ToAssign for Value {
    fn to_assign(&self) -> Result<Value, Error> {
        Ok(self.clone())
    }
}

/// Converts field `name` for a fallback render (`@name`), naming the field in an error.
#[doc(hidden)]
pub fn assign<T: ToAssign + ?Sized>(
    assigns: &mut Assigns,
    name: &str,
    value: &T,
) -> Result<(), Error> {
    let v = value
        .to_assign()
        .map_err(|e| Error::data(format!("field `{name}`: {}", e.message())))?;
    assigns.insert(name, v);
    Ok(())
}
