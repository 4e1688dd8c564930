//! # galleon-template
//!
//! EEx-style templates (Elixir's syntax, Phoenix's escaping) compiled once and rendered to a
//! [`galleon_iolist::IoList`]: static text is never copied, only referenced, so two renders of a
//! template hand `writev` the same addresses, and a render can pause after any number of bytes
//! and resume, so a 30 GB page streams in constant memory.
//!
//! - [`Engine`] holds the compiled templates (load a directory with [`Engine::load`], one file
//!   with [`Engine::load_file`], or sources with [`Engine::from_source`]). It is cheap to clone
//!   and share: everything sits behind one `Arc`.
//! - [`Assigns`] are a render's `@name` values, from Rust ([`Assigns::insert`]) or JSON
//!   ([`Assigns::from_json`]); each is a [`Value`]. Strings are shared [`bytes::Bytes`], so a long
//!   assign that needs no escaping is referenced in the output, not copied.
//! - [`Engine::render`] returns the whole page as one `IoList`; [`Engine::stream`] returns a
//!   [`RenderStream`], an iterator of `IoList` chunks of about the size asked.
//! - [`Error`] says what went wrong and where: `name:line:column: message`, the source line and
//!   a caret. No input makes the parser or the renderer panic, and [`Limits`] bound every render.
//!
//! ```
//! use galleon_template::{Assigns, Engine};
//!
//! let engine = Engine::from_source(
//!     "list.html.eex",
//!     "<ul><%= for x <- @items do %><li><%= x %></li><% end %></ul>",
//! )?;
//! let mut assigns = Assigns::new();
//! assigns.insert("items", vec!["a", "Tom & Jerry"]);
//! let page = engine.render("list.html.eex", &assigns)?;
//! assert_eq!(&page.to_bytes()[..], b"<ul><li>a</li><li>Tom &amp; Jerry</li></ul>");
//!
//! let err = engine.render("list.html.eex", &Assigns::new()).unwrap_err();
//! assert_eq!(err.to_string(), "\
//! list.html.eex:1:18: unknown assign @items
//!   |
//! 1 | <ul><%= for x <- @items do %><li><%= x %></li><% end %></ul>
//!   |                  ^^^^^^");
//! # Ok::<(), galleon_template::Error>(())
//! ```
//!
//! ## The language
//! Text; `<%= expr %>` (output, HTML-escaped: `& < > " '`); `<% expr %>` (evaluated, not
//! output); `<%# comment %>`; `<%%` for a literal `<%`. Blocks: `<%= for x <- list do %>...<% end %>`,
//! `for i <- 1..@n` (counted, no list is built), `for {x, i} <- Enum.with_index(list)`,
//! `<%= if cond do %>...<% else %>...<% end %>`, `unless`. Expressions: `@assign`, loop
//! variables, `a.key` (a missing key is an error), `a[0]` / `a["key"]` (missing is `nil`),
//! integers (`100_000_000`), floats, strings (`"\n"` escapes, no interpolation), `true`, `false`,
//! `nil`, lists `[a, b]`, `== != < <= > >=`, strict `and or not`, truthy `&& || !`, `+ - * /`
//! (`/` gives a float, as in Elixir), `<>`; functions `length`, `upcase`, `downcase` (also as
//! `Enum.count`, `String.upcase`, `String.downcase`), `raw(expr)` (no escaping), and
//! `render("partial.html.eex", key: value)`, looked up relative to the calling template's
//! directory, with exactly the given assigns. [`Engine::render_in_layout`] renders a page inside a
//! layout as `@inner_content`.
//!
//! Deliberate differences from Elixir: `a..b` with `a > b` is empty (Elixir counts down);
//! `nil` renders as nothing and lists cannot be output directly; a block must open with `<%=`.
//!
//! ## Performance model
//! Compiling turns a template into a flat list of instructions with jumps. Each instruction
//! carries the static text that precedes it, sliced from one [`bytes::Bytes`] per template, so
//! `<td><%= x %>` is one dispatch and the Template of Doom's loop is one instruction per
//! iteration. Constant output (`<%= "" %>`) is folded into the text, so the seed's two Blah
//! templates compile to the same program. Rendering walks the instructions once:
//! - a static piece or a string value at least [`Engine::copy_below`] bytes long
//!   ([`DEFAULT_COPY_BELOW`] = 256, like the BEAM's `ERL_SMALL_IO_BIN_LIMIT`) costs one
//!   reference-count increment and one segment: two renders hand out the same addresses;
//! - shorter pieces, numbers and entities are copied into a buffer of a few kilobytes that
//!   becomes one segment when full (moved into the list, not copied again), so a 100x100 table is
//!   a few dozen segments, not 30,000;
//! - each instruction and each expression node evaluated costs one step of [`Limits::max_steps`];
//!   variables and `a.b` paths are read in place, without cloning;
//! - streaming keeps only the frames (program counter, loop positions, variables) between chunks:
//!   memory is O(chunk size + template), whatever the output size. `galleon render` streams the
//!   30 GB Template of Doom in under 4 MB of resident memory.
//!
//! `cargo bench -p galleon-template` times the big-table and teams renders and the copy
//! threshold; `cargo bench -p galleon-template --features peers` puts tera 2, minijinja and
//! sailfish in the same groups.

#![forbid(unsafe_code)]

mod ast;
mod compile;
mod engine;
mod error;
mod lexer;
mod parser;
mod program;
mod scalar;
mod span;
mod value;
mod vm;

pub use engine::{
    DEFAULT_COPY_BELOW, DEFAULT_MAX_DEPTH, DEFAULT_MAX_OUTPUT, DEFAULT_MAX_STEPS, Engine, Limits,
    RenderStream, Rendered, TemplateId, TemplateRef,
};
pub use error::{Error, ErrorKind, Location};
pub use value::{Assigns, Map, Str, Value};
