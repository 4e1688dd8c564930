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
//!   Nesting is bounded at parse time: blocks, each expression's tree (parentheses, calls,
//!   and chains such as `a + b + c` or `x |> f |> g` alike) and strings nested in `#{...}` at most
//!   64 levels each, past which the template is a located syntax error; so compiling a
//!   template, and rendering's walk over it, fit a small thread stack (`tests/depth.rs`: 256 KiB
//!   in an optimized build). Values built while rendering are bounded too: an `Enum.reduce`
//!   (the one construct that feeds a value back into itself as often as the data says) whose
//!   accumulator nests deeper than [`MAX_VALUE_DEPTH`] (1,000) fails with a located limit
//!   error, so no render overflows a 2 MiB thread dropping, comparing or printing a value.
//! - Memory: each render may build [`Limits::max_memory`] bytes of values ([`DEFAULT_MAX_MEMORY`]
//!   = 64 MiB; strings, lists, tuples, maps, ranges made lists), charged where they are built
//!   and before the allocation when its size is known (`String.duplicate(s, n)`, `a <> b`,
//!   `1..n` as a list), so a count from a query cannot allocate gigabytes; past it the render
//!   fails with [`ErrorKind::Limit`], as for steps. Functions registered from Rust are charged
//!   their result after they return.
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
//! EEx with Phoenix's escaping, and the Elixir expressions templates use, with Elixir's
//! semantics. `cargo test -p galleon-template --test eex_conformance` renders a corpus of 601
//! templates (`tests/eex_corpus/`) with galleon and with real EEx (Elixir 1.14, an engine
//! reproducing Phoenix.HTML's) and compares the bytes, each also with `trim: true`; the
//! differences left are listed below.
//!
//! - **Tags**: text; `<%= expr %>` (output, HTML-escaped: `& < > " '` as `&amp; &lt; &gt;
//!   &quot; &#39;`); `<% expr %>` (evaluated, not output); `<%# comment %>` and
//!   `<%!-- comment --%>` (which may contain `%>`); `<%%` for a literal `<%`; `# comment` to
//!   the end of a line inside a tag.
//! - **Blocks**: `<%= for x <- list do %>...<% end %>` with filters and several generators
//!   (`for x <- xs, x > 1, y <- ys do`), any pattern (`for {k, v} <- map` walks a map's pairs
//!   in key order; elements that do not match are skipped), `for i <- 1..@n` (counted, no list
//!   built; as in Elixir it counts down when `@n` is below 1, so write `1..@n//1` for a loop
//!   that may run no iteration, counted too), `for {x, i} <- Enum.with_index(list)` (no tuple built);
//!   `<%= if cond do %>...<% else %>...<% end %>`, `unless`;
//!   `<%= case expr do %><% {:ok, x} when x > 1 -> %>...<% _ -> %>...<% end %>` (no clause
//!   matching is an error, as in Elixir); `<%= cond do %><% a -> %>...<% true -> %>...<% end %>`.
//!   `<%= with {:ok, u} when u.active <- fetch(@x), %{name: n} <- u do %>...<% else
//!   {:error, r} -> %>...<% _ -> %>...<% end %>` (the first `else` clause in the `else` tag, as
//!   EEx wants; none matching is an error, as Elixir's `WithClauseError`); a `fn` whose body
//!   is template text, passed to the functions taking one: `<%= Enum.map(@items, fn item ->
//!   %><li><%= item.name %></li><% end) %>` (clauses and guards in `<% x when ... -> %>` tags;
//!   each call's value is the body's output, safe HTML, so a list of it outputs as Phoenix
//!   does, and `Enum.map_join` fails on it as in Elixir); `for ..., into: x do` (`into: ""`
//!   fails on a body, as Elixir's does; `into: []` is the plain loop); and a generator binding
//!   through `=`: `for %{id: id} = row <- @rows` (elements not matching are skipped), in the
//!   one-line `for` too. A block opened with `<%` instead of `<%=` outputs nothing, as in EEx
//!   (a `fn` block's call is evaluated, so `<% rows = Enum.map(...) %>` binds `rows`). Inside one tag,
//!   `if`, `unless` and `case` take `do ... end` with expressions for branches, as Phoenix
//!   pages write them in attributes: `<%= if @active do "on" else "off" end %>`, and
//!   `<%= case @status do "paid" -> "green"; _ -> "grey" end %>` (clauses separated by `;` or
//!   line breaks, so one tag may spread over lines; each body is one expression), and `with`:
//!   `<%= with %{email: e} <- @user, [_, d] <- String.split(e, "@") do d else _ -> "-" end %>`
//!   (`pattern [when guard] <- value`, `pattern = value` and bare clauses; without `else` the first value
//!   not matching is the result, as in Elixir). A match as
//!   the condition, the generators' flash idiom: `<%= if info = @flash[:info] do %><%= info
//!   %><% end %>` binds `info` in both branches, the first taken when it is truthy (a variable
//!   only: another pattern is a located error, where Elixir raises when it does not match).
//! - **Variables**: `<% x = expr %>` (also `<% {a, b} = expr %>`; a failed match is an error);
//!   visible to the end of the enclosing block. Patterns: variables, `_`, literals, atoms,
//!   `^pinned`, tuples, lists, maps (`%{status: "paid", total: t}`: at least these keys).
//! - **Values**: `@assign` (also Phoenix's `assigns.name`, and `assigns[:name]`, nil when not
//!   given), `assigns` itself (a map of the assigns, to pass to a partial), variables, `nil`,
//!   `true`, `false`, integers (`1_000`, `0xFF`, `0o17`, `0b101`; 64-bit), floats (printed as
//!   Elixir prints them: `1000.0` is `1.0e3`, and from 2^53 up always with an exponent:
//!   `9.007199254740992e15`),
//!   strings with Elixir's escapes (`\n \t \s \e \xHH \uHHHH \u{H...}`) and
//!   `"#{interpolation}"` (each part through `to_string`), atoms (`:ok`, `:"a b"`), lists
//!   `[a, b]`, keyword lists `[class: "btn", id: 1]` (a list of `{:key, value}` tuples, as
//!   in Elixir: `opts[:class]` and `Keyword.get(opts, :class, default)` read them, and a
//!   built-in taking options takes them as a list too: `:erlang.float_to_binary(x, opts)`),
//!   tuples `{a, b}`, maps `%{"k" => v, k: v}`.
//! - **Sigils**: `~r/pattern/mods` (also `~r{...}`, `~r(...)`, `~r[...]`, `~r"..."`, `~r|...|`,
//!   `~r<...>`, `~r'...'` and `~R`), a [`Regex`] value, compiled when the template is (a bad
//!   pattern is a located compile error; one with `#{...}` compiles at render time, charged),
//!   escapes as Elixir reads them (`\/` for the delimiter, `\n` and `\t` decoded, `\d` left to
//!   the regex), modifiers `i m s x u U`; `~s(...)`, `~S(...)`; `~w(a b c)` (with `s` or `a`:
//!   `~w(a b)a` is `[:a, :b]`) and `~W`. Regex functions: `Regex.match?/run/scan/replace/split/
//!   named_captures/source/compile!` (`run` with `capture: :first | :all_but_first`, `replace`
//!   with `\\1`, `\\g{1}`, `\\0` in the replacement and `global: false`, or a function of the
//!   whole match and its groups returning a string or a list of strings, `split` with
//!   `parts:` and `trim:`), `String.replace/3,4` (`global: false` too), `String.split/2,3` and
//!   `String.match?` with a regex, `string =~ regex` and `string =~ string`; `inspect` prints
//!   `~r/a+/i`; a regex cannot be output or interpolated, as in Phoenix. Empty matches follow
//!   PCRE (`String.replace("abc", ~r//, "-")` is `"-a-b-c-"`). Matching is linear in the input
//!   (the `regex` crate); each call costs a step per 64 bytes of input scanned, its results are
//!   charged to the memory budget, and a pattern's compiled form is held to 1 MiB.
//! - **Operators**: `a.key` (a missing key is an error), `a[:key]` / `a["key"]` (missing is
//!   `nil`), `+ - * /` (`/` always gives a float), `== != === !==` (`1 == 1.0`, `1 !== 1.0`),
//!   `< <= > >=`, strict `and or not`, truthy `&& || !`, `<>`, `++`, `in` / `not in` (a list,
//!   a map or a range `a..b`), the pipe `x |> f(y)`, one-line `if c, do: a, else: b`;
//!   stepped ranges `first..last//step` as Elixir enumerates them (`0..10//5` is 0, 5, 10;
//!   `3..1//-1` counts down; a zero step is an error), wherever a list goes (`for`, `in`,
//!   `Enum` functions), listed and charged to the memory budget.
//! - **Functions**: `to_string`, `inspect` (as Elixir 1.14 prints values, for debug panels),
//!   `length`, `div`, `rem`, `abs`, `round`, `trunc`, `max`, `min`,
//!   `hd`, `tl`, `elem`, `is_nil` and the other `is_*` guards, `map_size`, `tuple_size`,
//!   `byte_size`; `Enum.count/join/at/reverse/sum/min/max/sort/uniq/take/drop/empty?/member?/
//!   with_index/to_list/concat/zip/chunk_every/slice/frequencies/intersperse/split/into` (a
//!   range may be the enumerable: `Enum.sum(1..10)`; `with_index` takes an offset, `slice` an
//!   index and a count or a range, `into` a map or a list, `chunk_every` a step and a leftover
//!   (`:discard` or a list to pad with)), and with a function (`find` with a default too)
//!   `Enum.map/filter/reject/find/find_index/any?/all?/count/flat_map/sort_by/sort/reduce/
//!   map_join/map_intersperse/min_by/max_by/uniq_by/take_while/drop_while/group_by/each/
//!   split_with`;
//!   `String.length/upcase/downcase/capitalize/trim/trim_leading/
//!   trim_trailing/split/replace/contains?/starts_with?/ends_with?/duplicate/pad_leading/
//!   pad_trailing/reverse/slice/first/last/at/to_integer/graphemes/codepoints` (`slice` with a range too;
//!   `trim`, `trim_leading` and `trim_trailing` with a string to strip the repeats of too;
//!   `to_integer` with a base too; `split` with `trim: true` and `parts: n`; `split`, `contains?`, `starts_with?` and
//!   `ends_with?` with a list of patterns too; `replace` with an empty pattern puts the
//!   replacement around each code point; `capitalize` titlecases, so `ǆ` is `ǅ` and `ß` `Ss`);
//!   `Integer.to_string/1,2` (a base from 2 to 36), `Integer.parse/digits`;
//!   `Float.round/floor/ceil/to_string` (the first three with a precision too), `Float.parse`;
//!   `:erlang.float_to_binary(x, decimals: n)` (also with `:compact`: `[{:decimals, 4},
//!   :compact]`; prices, rounded as the Erlang VM rounds them: `0.075` with 2 decimals is
//!   `0.08`, though the float is a little below 0.075); `Map.get/has_key?/keys/values/new/put/
//!   put_new/merge/delete/drop/take/update/fetch/to_list` (`new` with a function too, `update`
//!   takes one; `fetch` gives `{:ok, v}` or `:error`); `Keyword.get/put/merge/delete/has_key?/
//!   fetch/keys`;
//!   `List.first/last/flatten/duplicate`; `get_in(data, [keys])` (maps and keyword lists);
//!   `raw(x)` and `Phoenix.HTML.raw(x)` (no escaping); functions
//!   registered from Rust ([`EngineBuilder::function`]); and
//!   partials as phx.gen.html writes them: `render("row.html.eex", key: value)`,
//!   `render "form.html", Map.put(assigns, :action, @path)`, `render "row.html",
//!   Map.merge(assigns, %{row: row})` (the second argument any map or keyword list, whose keys
//!   are the partial's assigns, exactly those), looked up relative to the calling template's
//!   directory by the name given, then with `.eex` appended (Phoenix's `"form.html"` is the
//!   file `form.html.eex`). [`Engine::render_in_layout`] renders a page
//!   inside a layout as `@inner_content`. Calls may leave out the parentheses as in Elixir
//!   (`raw @html`, `String.upcase @name`, `Enum.join @xs, ", "`): the arguments are whole
//!   expressions up to a line break (`length @xs > 0` is `length(@xs > 0)`); `x -1` stays a
//!   subtraction. The pipe
//!   takes a bare name too (`@xs |> length`).
//! - **Anonymous functions**, as the argument of those `Enum` functions: `fn x -> x * 2 end`,
//!   `fn {k, v}, acc -> ... end`, several clauses with guards (`fn 0 -> "none"; n when n > 9
//!   -> "many"; n -> n end`, or a clause per line), each body one expression; captures
//!   `&(&1 * 2)`, `& &1.name` and
//!   `&String.upcase/1` (built-in or registered functions). They close over variables and
//!   assigns, and their calls spend the render's steps; they are not values otherwise (no
//!   `f.(x)`, no function in a variable). The one-line `for x <- xs, filter, do: body` is a
//!   list, like `Enum.map` (elements not matching a generator's pattern are skipped); with
//!   `into:` it is collected as `Enum.into` does: `for x <- @xs, into: "", do: "<li>#{x}</li>"`
//!   joins strings (only strings, as in Elixir), `into: %{}` builds a map.
//! - **Output**: `nil` outputs nothing, atoms their name, floats as above; a list outputs its
//!   strings, safe HTML and bytes (integers 0 to 255) in order, as Phoenix does; a map or a
//!   tuple cannot be output.
//! - **Options** ([`Engine::builder`]): `trim(true)` is EEx's `trim: true`, which Phoenix uses
//!   for `.html.eex`: around each tag and comment, blanks and line breaks before it shrink to
//!   one line break (if there was one), the same after it, and whitespace at the very start
//!   (before a first tag) and end goes entirely.
//! - **Assigns from Rust**: [`Assigns::from_serialize`] takes any `serde::Serialize` value, so
//!   an application passes its own structs; [`Value::from_serialize`] for one value.
//!
//! ## Differences from EEx
//! Deliberate, each pinned by a case of the conformance corpus:
//! - **Integers are 64-bit.** A literal past `i64` is a located syntax error and overflow a
//!   located render error, where Elixir has big integers: a page silently computing with
//!   20-digit numbers is rarer than one that should have failed. JSON integers above `i64`
//!   become floats.
//! - **Comparing different types is an error** (`1 < "a"`), not Erlang's term order: in a
//!   template it is almost always a bug (a number that arrived as a string). `==` across
//!   types is fine (false), and `Enum.sort`/`max`/`min` do use the term order.
//! - **`String.length` and the other `String` positions count code points**, not grapheme
//!   clusters: `"e\u0301"` is 2, not 1, and `String.graphemes` splits it in two. The same for
//!   precomposed text, which is most text.
//! - **A block opened with `<%` is not evaluated at all.** EEx evaluates it and drops its
//!   output, so an error inside still fails there; galleon checks its syntax and skips it.
//! - **`%>` inside a string literal does not end the tag** (`<%= "%>" %>` works); EEx ends the
//!   tag at the first `%>`, making such a template an error.
//! - **`list[i]` reads element `i`**, where Elixir's `Access` rejects integer keys on lists
//!   (galleon keeps it; `Enum.at` is the portable spelling).
//! - **`length` also counts a string's code points and a map's entries**; Elixir's `length`
//!   takes lists only.
//! - **An empty tag (`<%= %>`) and single-quoted charlists (`'abc'`) are errors**: both are
//!   typos far more often than intended (EEx outputs nothing, and the bytes of the charlist).
//! - Maps have string keys: `m.key`, `m[:key]` and `m["key"]` all find the key `"key"` (an
//!   Elixir map has atom or string keys, not both), and a map literal's atom keys become
//!   strings. `for {k, v} <- map`, `Map.keys` and `Map.to_list` give string keys. So `Enum.group_by` and
//!   `Enum.frequencies` take string or atom keys only (an integer key is an error: as a string
//!   it would change the key's type and the map's order). `inspect` prints every map with atom
//!   keys (`%{a: 1, "b c": 2}`), as a Phoenix page's assigns and structs have them, so a map
//!   written `%{"a" => 1}` prints as `%{a: 1}`; and in key order even past 32 keys, where
//!   Elixir prints a large map in hash order.
//! - **`assigns` as a value holds the assigns the template and the partials it calls read**
//!   (by `@name`, `assigns.name` or `assigns[:name]`, transitively), not every assign given: a
//!   render asks for its assigns by name ([`Engine::render_with`]), so none enumerates them.
//!   Passing `assigns` on to partials works as in Phoenix; `Map.keys(assigns)` or
//!   `inspect(assigns)` show only those names.
//! - **Regexes match in linear time** (the `regex` crate), so PCRE's backreferences (`\1` in
//!   the pattern) and look-around (`(?=`, `(?<!`) are a located compile error; so is the `f`
//!   (firstline) modifier. Patterns always match code points (as with `u`): without `u`, Elixir
//!   matches bytes and its `\w`, `\d`, `\b` and `i` see ASCII only, so results differ on
//!   non-ASCII text. After an empty match PCRE first retries a non-empty one at the same place,
//!   which the crate cannot ask for: a pattern matching both there (`~r/a*?/`) may differ.
//! - Not supported (a located error): functions as values outside the arguments of the
//!   functions above, ranges outside `for`, `in` and `Enum` arguments, `Keyword` functions
//!   other than those above, `Map.from_struct`, big integers, sigils other than `~r`, `~s`
//!   and `~w`, options with `Regex.replace`'s function, `try`, structs; functions of
//!   Phoenix.HTML other than `raw` (`link`, `content_tag`: register them with
//!   [`EngineBuilder::function`]). A call of an unknown function is a located error that
//!   names the nearest known function when one is close (`Enum.jion`: did you mean
//!   `Enum.join/2`?).
//!
//! ## Performance model
//! Compiling turns a template into a flat list of instructions with jumps. Each instruction
//! carries the static text that precedes it, sliced from one [`bytes::Bytes`] per template, so
//! `<td><%= x %>` is one dispatch and the Template of Doom's loop is one instruction per
//! iteration. Constant output (`<%= "" %>`) is folded into the text, so the seed's two Blah
//! templates compile to the same program. Rendering walks the instructions once:
//! - a static piece at least [`Engine::copy_below`] bytes long ([`DEFAULT_COPY_BELOW`] = 256,
//!   like the BEAM's `ERL_SMALL_IO_BIN_LIMIT`) costs one segment and no reference count (the
//!   template's text is pinned once per render): two renders hand out the same addresses;
//! - a string or safe HTML value is copied below [`Engine::value_copy_below`]
//!   ([`DEFAULT_VALUE_COPY_BELOW`] = 4 KiB), referenced (one reference count, one segment) from
//!   there up: a short value's count costs more than its copy (`galleon bench cache`);
//! - shorter pieces, numbers and entities are copied into a buffer of a few kilobytes that
//!   becomes one segment when full (moved into the list, not copied again), so a 100x100 table is
//!   a few dozen segments, not 30,000;
//! - each instruction and each expression node evaluated costs one step of [`Limits::max_steps`];
//!   variables and `a.b` paths are read in place, without cloning;
//! - a loop whose body only outputs text, variables, fields and assigns (the big table's cells)
//!   runs as a native Rust loop (`vm/plain.rs`), integers written in place, with the same steps,
//!   errors and pause points as the general interpreter, to which it hands back anything else;
//! - `acc <> s` on a function parameter that holds the only reference to its string (the
//!   accumulator of `Enum.reduce(words, "", fn w, acc -> acc <> w end)`) appends into the
//!   string's own buffer, grown by doubling, as the BEAM's binary append does: 100,000 words in
//!   about 20 ms where copying took 1.8 s (`cargo bench -p galleon-template --bench append`);
//!   values stay immutable (a shared string is copied) and the growth is charged to
//!   [`Limits::max_memory`] as it happens. `acc ++ tail` likewise extends a list the parameter
//!   alone holds ([`List`] is a view of a shared buffer, so the parameter keeps seeing the
//!   shorter list): 100,000 one-element appends in about 30 ms, where the BEAM copies the list
//!   each time (32 s). `Map.put(acc, k, v)` in a reduce still copies the map each time (each
//!   copy charged): prefer `Map.new` or `Enum.into`;
//! - streaming keeps only the frames (program counter, loop positions, variables) between chunks:
//!   memory is O(chunk size + template), whatever the output size. `galleon render` streams the
//!   30 GB Template of Doom in under 4 MB of resident memory.
//!
//! `cargo bench -p galleon-lab --bench render` times the big-table and teams renders and the copy
//! threshold; `cargo bench -p galleon-lab --features peers` puts tera 2, minijinja,
//! askama and sailfish in the same groups. For templates fixed at build time,
//! `galleon-template-derive` compiles the same language to Rust ([`compiled`]).

#![forbid(unsafe_code)]

// Public through `syntax` (for the derive), documented by variant, not by field.
#[allow(missing_docs)]
mod ast;
mod budget;
mod builtins;
mod compile;
pub mod compiled;
mod engine;
mod error;
mod float;
mod function;
mod lexer;
mod list;
mod live;
mod ops;
mod parser;
mod program;
mod regexp;
mod scalar;
#[allow(missing_docs)]
mod span;
mod strlit;
mod value;
mod vm;

/// The parser and syntax tree, for `galleon-template-derive` (which compiles templates with the
/// same parser at build time). Not a stable API.
#[doc(hidden)]
pub mod syntax {
    pub use crate::ast::{
        BinOp, BlockClause, Clause, Expr, ExprKind, FnClause, Node, Pattern, Qualifier, UnOp,
    };
    pub use crate::parser::parse;
    pub use crate::span::{Span, SyntaxError};
}

pub use budget::MAX_VALUE_DEPTH;
pub use engine::{
    DEFAULT_COPY_BELOW, DEFAULT_FULL_BODY_MAX, DEFAULT_MAX_DEPTH, DEFAULT_MAX_MEMORY,
    DEFAULT_MAX_OUTPUT, DEFAULT_MAX_STEPS, DEFAULT_VALUE_COPY_BELOW, Engine, EngineBuilder, Limits,
    RenderStream, Rendered, TemplateId, TemplateRef,
};
pub use error::{Error, ErrorKind, Location};
pub use function::{FromValue, IntoFunction, IntoResult};
pub use list::List;
pub use live::{Changed, LiveRender, LiveTemplate};
pub use regexp::Regex;
pub use value::{Assigns, Map, Str, Value};
