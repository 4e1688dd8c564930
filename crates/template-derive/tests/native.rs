//! The language shapes compiled natively, and those rendered through the engine, each against
//! the runtime engine given the same data (the struct through `Assigns::from_serialize`).

use galleon_template::compiled::{IoList, Raw, Rendered, Template};
use galleon_template::{Assigns, Engine, ErrorKind, Value};
use galleon_template_derive::Template;
use serde::Serialize;

/// Renders `t` compiled (whole, and streamed in 1-byte and 5-byte chunks) and with the engine
/// from `source`; both must agree.
fn check<T: Template + Serialize + Clone>(source: &str, t: &T) -> Vec<u8> {
    let engine = Engine::from_source("t", source).unwrap();
    let want = engine
        .render("t", &Assigns::from_serialize(t).unwrap())
        .unwrap()
        .to_vec();
    let got = t.render().unwrap().to_vec();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
    for n in [1, 5] {
        let streamed: Vec<u8> = t
            .clone()
            .stream(n)
            .flat_map(|c| c.unwrap().to_vec())
            .collect();
        assert_eq!(streamed, want, "chunks of {n}");
    }
    let page = match t.clone().render_or_stream(10, 4).unwrap() {
        Rendered::Whole(list) => list.to_vec(),
        Rendered::Streaming { first, rest } => {
            let mut page = first.to_vec();
            assert!(!rest.done());
            rest.for_each(|c| page.extend_from_slice(&c.unwrap().to_vec()));
            page
        }
    };
    assert_eq!(page, want, "render_or_stream");
    got
}

#[derive(Serialize, Clone)]
struct User {
    name: String,
    age: u32,
    admin: bool,
    nick: Option<String>,
}

fn users() -> Vec<User> {
    vec![
        User {
            name: "Ann <ann@x>".into(),
            age: 41,
            admin: true,
            nick: None,
        },
        User {
            name: "Bob & 'Co'".into(),
            age: 7,
            admin: false,
            nick: Some("\"bobby\"".into()),
        },
        User {
            name: "Cy".into(),
            age: 1000,
            admin: false,
            nick: Some(String::new()),
        },
    ]
}

const CONDITIONS: &str = "<%= for u <- @users, u.age > 5 do %>\
[<%= u.name %>|<%= u.nick %>|<%= u.age >= 41 %>|<%= u.admin == true %>\
<%= if u.admin and u.age < 100 do %> admin<% else %> user<% end %>\
<%= unless u.nick do %> no-nick<% end %>\
<%= if !u.nick || u.nick == \"\" do %> blank<% end %>\
<%= if not (u.name != \"Cy\") do %> cy<% end %>\
<%= if u.age === 7 or u.age !== 7.0 do %> n<% end %>]\n<% end %>";

#[derive(Template, Serialize, Clone)]
#[template(source = "<%= for u <- @users, u.age > 5 do %>\
[<%= u.name %>|<%= u.nick %>|<%= u.age >= 41 %>|<%= u.admin == true %>\
<%= if u.admin and u.age < 100 do %> admin<% else %> user<% end %>\
<%= unless u.nick do %> no-nick<% end %>\
<%= if !u.nick || u.nick == \"\" do %> blank<% end %>\
<%= if not (u.name != \"Cy\") do %> cy<% end %>\
<%= if u.age === 7 or u.age !== 7.0 do %> n<% end %>]\n<% end %>")]
struct Conditions {
    users: Vec<User>,
}

#[test]
fn conditions_filters_and_comparisons() {
    let out = check(CONDITIONS, &Conditions { users: users() });
    assert!(out.starts_with(b"[Ann &lt;ann@x&gt;||true|true admin no-nick blank n]"));
    const _: () = assert!(<Conditions as Template>::SLOTS > 0, "compiled natively");
}

const SCALARS: &str = "<%= @i %> <%= @neg %> <%= @big %> <%= @f %> <%= @g %> <%= @t %> \
<%= @none %>|<%= @c %> <%= @s %> <%= raw(@s) %> <%= Phoenix.HTML.raw(@s) %> <%= nil %>\
<%= 1.0e3 %> <%= \"a&b\" %> <%= raw(\"<b>\") %> <%= -7 %>\
<% x = @i %><%= x %> <%= y = @s %> <%= y %><% _ = @t %><% @i %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= @i %> <%= @neg %> <%= @big %> <%= @f %> <%= @g %> <%= @t %> \
<%= @none %>|<%= @c %> <%= @s %> <%= raw(@s) %> <%= Phoenix.HTML.raw(@s) %> <%= nil %>\
<%= 1.0e3 %> <%= \"a&b\" %> <%= raw(\"<b>\") %> <%= -7 %>\
<% x = @i %><%= x %> <%= y = @s %> <%= y %><% _ = @t %><% @i %>"
)]
struct Scalars {
    i: i64,
    neg: i32,
    big: u64,
    f: f64,
    g: f32,
    t: bool,
    none: Option<i64>,
    c: char,
    s: String,
}

#[test]
fn scalars_print_as_the_engine_prints_them() {
    let out = check(
        SCALARS,
        &Scalars {
            i: 1234,
            neg: -56,
            big: 9_007_199_254_740_993,
            f: 1000.0,
            g: 0.1,
            t: true,
            none: None,
            c: '<',
            s: "<i>it's</i>".into(),
        },
    );
    assert!(out.starts_with(b"1234 -56 9007199254740993 1.0e3"));
}

const LOOPS: &str = "<%= for i <- @from..@to do %><%= for {row, j} <- Enum.with_index(@rows) do %>\
<%= for c <- row do %><%= i %>.<%= j %>.<%= c %>;<% end %><% end %>|<% end %>\
<%= for _ <- 1..0 do %>never<% end %><%= for {_, k} <- Enum.with_index(@rows) do %><%= k %><% end %>\
<%= for r <- @rows, r != [] do %>*<% end %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= for i <- @from..@to do %><%= for {row, j} <- Enum.with_index(@rows) do %>\
<%= for c <- row do %><%= i %>.<%= j %>.<%= c %>;<% end %><% end %>|<% end %>\
<%= for _ <- 1..0 do %>never<% end %><%= for {_, k} <- Enum.with_index(@rows) do %><%= k %><% end %>\
<%= for r <- @rows, r != [] do %>*<% end %>"
)]
struct Loops {
    from: i64,
    to: i64,
    rows: Vec<Vec<u8>>,
}

#[test]
fn nested_loops_resume_mid_row() {
    let t = Loops {
        from: -1,
        to: 2,
        rows: vec![vec![1, 2, 3], vec![], vec![40]],
    };
    let out = check(LOOPS, &t);
    assert!(out.starts_with(b"-1.0.1;-1.0.2;-1.0.3;-1.2.40;|0.0.1;"));
}

#[test]
fn descending_ranges_count_down_as_in_elixir() {
    let t = Loops {
        from: 2,
        to: -1,
        rows: vec![vec![7]],
    };
    let out = check(LOOPS, &t);
    assert!(
        out.starts_with(b"2.0.7;|1.0.7;|0.0.7;|-1.0.7;|nevernever0*"),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

/// A loop over a range whose body is static text only: repeated into one static block.
#[derive(Template, Clone)]
#[template(
    source = "<%= for _ <- 1..@n do %>0123456789012345678901234567890123456789<% end %>",
    copy_below = 32
)]
struct Long {
    n: i64,
}

/// Long static pieces between values.
#[derive(Template, Clone)]
#[template(
    source = "<%= for x <- @xs do %><%= x %>0123456789012345678901234567890123456789<% end %>",
    copy_below = 32
)]
struct Pieces {
    xs: Vec<u8>,
}

#[test]
fn long_statics_are_static_segments() {
    let page = Long { n: 3 }.render().unwrap();
    let again = Long { n: 3 }.render().unwrap();
    let segs: Vec<_> = page.segments_with_kind().collect();
    assert_eq!(segs.len(), 1, "one prefix of the repeated block");
    assert_eq!(segs[0].0, galleon_iolist::SegmentKind::Static);
    assert_eq!(segs[0].1.len(), 120);
    assert_eq!(
        again.segments().next().unwrap().as_ptr(),
        segs[0].1.as_ptr()
    );

    let page = Pieces { xs: vec![1, 2, 3] }.render().unwrap();
    let statics: Vec<&[u8]> = page
        .segments_with_kind()
        .filter(|(k, _)| *k == galleon_iolist::SegmentKind::Static)
        .map(|(_, s)| s)
        .collect();
    assert_eq!(statics.len(), 3);
    assert!(
        statics.iter().all(|s| s.as_ptr() == statics[0].as_ptr()),
        "one literal, shared"
    );
    assert_eq!(page.len(), 3 * 41);
}

#[test]
fn streams_pause_at_the_chunk_size() {
    let chunks: Vec<IoList> = Long { n: 1000 }.stream(400).map(Result::unwrap).collect();
    assert_eq!(chunks.len(), 100);
    assert!(chunks.iter().all(|c| c.len() == 400));
    // 401 bytes is 11 iterations: a chunk ends with the iteration that reached the size.
    let chunks: Vec<IoList> = Long { n: 1000 }.stream(401).map(Result::unwrap).collect();
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c.len() == 440));
    let total: usize = chunks.iter().map(IoList::len).sum();
    assert_eq!(total, 40_000);
}

#[derive(Template, Clone)]
#[template(source = "<%= @v %>|<%= for x <- @xs do %><%= x %>,<% end %>|<%= @h %>")]
struct Dynamic {
    v: Value,
    xs: Vec<Value>,
    h: Raw<&'static str>,
}

#[test]
fn values_render_natively() {
    let t = Dynamic {
        v: Value::list([Value::str("a<"), Value::Int(66)]),
        xs: vec![
            Value::Nil,
            Value::Float(2.5),
            Value::atom("ok"),
            Value::Bool(false),
        ],
        h: Raw("<br>"),
    };
    assert_eq!(
        t.render().unwrap().to_vec(),
        b"a&lt;B|,2.5,ok,false,|<br>".to_vec()
    );
    let t = Dynamic {
        v: Value::map([("k", Value::Int(1))]),
        ..t
    };
    let e = t.render().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TypeMismatch);
    assert_eq!((e.line(), e.column()), (Some(1), Some(5)));
}

#[derive(Template, Serialize, Clone)]
#[template(source = "<%= for x <- @xs do %><%= if x < @limit do %><%= x %><% end %><% end %>")]
struct Mismatch {
    xs: Vec<String>,
    limit: i64,
}

#[test]
fn type_errors_are_located_like_the_engines() {
    let t = Mismatch {
        xs: vec!["a".into()],
        limit: 3,
    };
    let e = t.render().unwrap_err();
    let engine = Engine::from_source(
        "Mismatch.html.eex",
        "<%= for x <- @xs do %><%= if x < @limit do %><%= x %><% end %><% end %>",
    )
    .unwrap();
    let want = engine
        .render("Mismatch.html.eex", &Assigns::from_serialize(&t).unwrap())
        .unwrap_err();
    assert_eq!(e.to_string(), want.to_string());
}

// An `Option` of a struct: `if` tests it as `nil`, `.key` reads through it, and a key of `None`
// is the engine's error at the same place.

#[derive(Serialize, Clone)]
struct Account {
    email: String,
    team: Option<Team>,
}

#[derive(Serialize, Clone)]
struct Team {
    name: String,
}

const OPTIONAL: &str = "<%= if @user do %>hi <%= @user.email %><%= if @user.team do %> of \
<%= @user.team.name %><% end %><% else %>guest<% end %>|<%= if @users do %>some<% end %>|\
<%= for u <- @users do %><%= if u do %><%= u.email %><% else %>-<% end %>,<% end %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= if @user do %>hi <%= @user.email %><%= if @user.team do %> of \
<%= @user.team.name %><% end %><% else %>guest<% end %>|<%= if @users do %>some<% end %>|\
<%= for u <- @users do %><%= if u do %><%= u.email %><% else %>-<% end %>,<% end %>"
)]
struct Optional {
    user: Option<Account>,
    users: Vec<Option<Account>>,
}

#[derive(Template, Serialize, Clone)]
#[template(source = "<p><%= @user.team.name %></p>")]
struct NilKey {
    user: Option<Account>,
}

#[test]
fn options_of_structs_are_nil_or_their_value() {
    let ann = Account {
        email: "ann@x".into(),
        team: Some(Team { name: "A&B".into() }),
    };
    let bob = Account {
        email: "bob@x".into(),
        team: None,
    };
    let t = Optional {
        user: Some(ann.clone()),
        users: vec![Some(bob.clone()), None, Some(ann)],
    };
    assert_eq!(
        check(OPTIONAL, &t),
        b"hi ann@x of A&amp;B|some|bob@x,-,ann@x,"
    );
    let t = Optional {
        user: None,
        users: Vec::new(),
    };
    // An empty list is true, as in Elixir.
    assert_eq!(check(OPTIONAL, &t), b"guest|some|");
    for user in [None, Some(bob)] {
        let t = NilKey { user };
        let e = t.render().unwrap_err();
        let engine =
            Engine::from_source("NilKey.html.eex", "<p><%= @user.team.name %></p>").unwrap();
        let want = engine
            .render("NilKey.html.eex", &Assigns::from_serialize(&t).unwrap())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TypeMismatch);
        assert_eq!(e.to_string(), want.to_string());
    }
}

// One-line `if` and calls without parentheses, as Phoenix templates write them.

const ONE_LINE: &str = "<%= if @ok, do: \"yes\", else: \"no\" %>|<%= unless @ok, do: raw(@h) %>|\
<%= if !@ok, do: @h, else: raw @h %>|<%= raw @h %>|<%= if @n > 1, do: @n %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= if @ok, do: \"yes\", else: \"no\" %>|<%= unless @ok, do: raw(@h) %>|\
<%= if !@ok, do: @h, else: raw @h %>|<%= raw @h %>|<%= if @n > 1, do: @n %>"
)]
struct OneLine {
    ok: bool,
    h: String,
    n: i64,
}

#[derive(Template)]
#[template(source = "<p><%= if @ok, do: @v %></p>")]
struct OneLineError {
    ok: bool,
    v: Value,
}

#[test]
fn one_line_ifs_and_calls_without_parentheses() {
    const _: () = assert!(<OneLine as Template>::SLOTS > 0, "compiled natively");
    let t = OneLine {
        ok: true,
        h: "<b>".into(),
        n: 2,
    };
    assert_eq!(check(ONE_LINE, &t), b"yes||<b>|<b>|2");
    let t = OneLine {
        ok: false,
        n: 1,
        ..t
    };
    assert_eq!(check(ONE_LINE, &t), b"no|<b>|&lt;b&gt;|<b>|");
    // An output error in a branch is located at the tag's expression, as the engine's.
    let v = Value::map([("k", Value::Int(1))]);
    let e = OneLineError {
        ok: true,
        v: v.clone(),
    }
    .render()
    .unwrap_err();
    let engine =
        Engine::from_source("OneLineError.html.eex", "<p><%= if @ok, do: @v %></p>").unwrap();
    let mut a = Assigns::new();
    a.insert("ok", true);
    a.insert("v", v);
    let want = engine.render("OneLineError.html.eex", &a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TypeMismatch);
    assert_eq!(e.to_string(), want.to_string());
}

// Phoenix's `assigns[:name]` (nil without such a field) and `assigns.name`, and `||` / `&&`
// in an output, as layouts write `<%= assigns[:page_title] || "App" %>`.

const LAYOUT: &str = "<title><%= assigns[:page_title] || \"App\" %></title>\
<%= assigns[:nope] %>|<%= assigns.n %>|<%= @n > 1 && \"many\" %>|<%= @flag || @n %>";

#[derive(Template, Serialize, Clone)]
#[template(source = "<title><%= assigns[:page_title] || \"App\" %></title>\
<%= assigns[:nope] %>|<%= assigns.n %>|<%= @n > 1 && \"many\" %>|<%= @flag || @n %>")]
struct Layout {
    page_title: Option<String>,
    n: i64,
    flag: bool,
}

#[test]
fn assigns_map_reads_and_or_outputs() {
    const _: () = assert!(<Layout as Template>::SLOTS > 0, "compiled natively");
    let t = Layout {
        page_title: Some("<Shop>".into()),
        n: 2,
        flag: false,
    };
    assert_eq!(check(LAYOUT, &t), b"<title>&lt;Shop&gt;</title>|2|many|2");
    let t = Layout {
        page_title: None,
        n: 1,
        flag: true,
    };
    assert_eq!(check(LAYOUT, &t), b"<title>App</title>|1|false|true");
}

// `Enum.with_index(list, 1)`, numbered from the offset, natively.

const NUMBERED: &str =
    "<%= for {u, i} <- Enum.with_index(@users, 1) do %><%= i %>. <%= u.name %>\n<% end %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= for {u, i} <- Enum.with_index(@users, 1) do %><%= i %>. <%= u.name %>\n<% end %>"
)]
struct Numbered {
    users: Vec<User>,
}

#[test]
fn with_index_offset_compiles_natively() {
    const _: () = assert!(<Numbered as Template>::SLOTS > 0, "compiled natively");
    let out = check(NUMBERED, &Numbered { users: users() });
    assert!(
        out.starts_with(b"1. Ann &lt;ann@x&gt;\n2. Bob"),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

// Shapes rendered through the engine: same bytes.

const FALLBACK: &str = "<%= case @n do %><% 1 -> %>one<% x when x > 1 -> %>many <%= x * 2 %><% end %>\
<%= cond do %><% @n > 5 -> %>big<% true -> %>small<% end %>\
<%= String.upcase(@s) %> <%= length(@xs) %> <%= \"#{@n}!\" %> <%= @n + 1 %>\
<%= for {a, b} <- @pairs do %><%= a %>=<%= b %>;<% end %><%= Enum.map_join(@xs, \",\", fn x -> x * @n end) %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= case @n do %><% 1 -> %>one<% x when x > 1 -> %>many <%= x * 2 %><% end %>\
<%= cond do %><% @n > 5 -> %>big<% true -> %>small<% end %>\
<%= String.upcase(@s) %> <%= length(@xs) %> <%= \"#{@n}!\" %> <%= @n + 1 %>\
<%= for {a, b} <- @pairs do %><%= a %>=<%= b %>;<% end %><%= Enum.map_join(@xs, \",\", fn x -> x * @n end) %>"
)]
struct Fallback {
    n: i64,
    s: String,
    xs: Vec<i32>,
    pairs: Vec<(String, i64)>,
}

#[test]
fn other_shapes_render_through_the_engine() {
    let out = check(
        FALLBACK,
        &Fallback {
            n: 3,
            s: "a&b".into(),
            xs: vec![1, 2],
            pairs: vec![("k".into(), 1), ("<".into(), 2)],
        },
    );
    // Serde makes tuples lists, which `{a, b}` does not match: skipped, by both.
    assert_eq!(out, b"many 6smallA&amp;B 2 3! 43,6".to_vec());
    const _: () = assert!(<Fallback as Template>::SLOTS == 0, "through the engine");
}

/// Blocks over several tags (a `fn` whose body is template text, `with` with `else` clauses,
/// `into:`, a generator binding through `=`) render through the engine.
const BLOCKS: &str = "<ul><%= Enum.map(@users, fn u -> %><li><%= u.name %><%= @sep %></li><% end) %></ul>\
<%= with %{name: n} when n != \"\" <- @first do %>first: <%= n %><% else _ -> %>none<% end %>\
<%= for x <- @tags, into: [] do %>[<%= x %>]<% end %>\
<%= for %{name: n} = _u <- @users do %><%= n %>.<% end %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<ul><%= Enum.map(@users, fn u -> %><li><%= u.name %><%= @sep %></li><% end) %></ul>\
<%= with %{name: n} when n != \"\" <- @first do %>first: <%= n %><% else _ -> %>none<% end %>\
<%= for x <- @tags, into: [] do %>[<%= x %>]<% end %>\
<%= for %{name: n} = _u <- @users do %><%= n %>.<% end %>"
)]
struct Blocks {
    users: Vec<Named>,
    first: Named,
    sep: String,
    tags: Vec<String>,
}

#[derive(Serialize, Clone)]
struct Named {
    name: String,
}

#[test]
fn blocks_across_tags_render_through_the_engine() {
    let named = |n: &str| Named { name: n.into() };
    let out = check(
        BLOCKS,
        &Blocks {
            users: vec![named("Ann"), named("B&B")],
            first: named("Ann"),
            sep: ";".into(),
            tags: vec!["a".into(), "<b>".into()],
        },
    );
    assert_eq!(
        String::from_utf8_lossy(&out),
        "<ul><li>Ann;</li><li>B&amp;B;</li></ul>first: Ann[a][&lt;b&gt;]Ann.B&amp;B."
    );
    const _: () = assert!(<Blocks as Template>::SLOTS == 0, "through the engine");
}

/// Partials next to a template file are embedded and found by the engine.
#[derive(Template, Clone)]
#[template(path = "../template/tests/inputs/partial.eex")]
struct Partial {
    users: Value,
}

#[derive(Template, Clone)]
#[template(path = "../template/tests/inputs/access.eex")]
struct Access {
    user: Value,
    none: Value,
}

#[test]
fn engine_inputs_with_partials_and_maps() {
    let inputs = concat!(env!("CARGO_MANIFEST_DIR"), "/../template/tests/inputs");
    let json = |name: &str| {
        let text = std::fs::read_to_string(format!("{inputs}/{name}.json")).unwrap();
        Assigns::from_json(serde_json::from_str(&text).unwrap()).unwrap()
    };
    let a = json("partial");
    let engine = Engine::load_file(format!("{inputs}/partial.eex")).unwrap();
    let t = Partial {
        users: a.get("users").unwrap().clone(),
    };
    assert_eq!(
        t.render().unwrap().to_vec(),
        engine.render("partial.eex", &a).unwrap().to_vec()
    );
    let a = json("access");
    let t = Access {
        user: a.get("user").unwrap().clone(),
        none: a.get("none").unwrap().clone(),
    };
    let engine = Engine::load_file(format!("{inputs}/access.eex")).unwrap();
    let streamed: Vec<u8> = t
        .clone()
        .stream(3)
        .flat_map(|c| c.unwrap().to_vec())
        .collect();
    let want = engine.render("access.eex", &a).unwrap().to_vec();
    assert_eq!(t.render().unwrap().to_vec(), want);
    assert_eq!(streamed, want);
}

const NESTED_REPEAT: &str =
    "<%= for i <- 1..@n do %>(<%= i %>:<%= for _ <- 1..@m do %>ab<% end %>)<% end %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= for i <- 1..@n do %>(<%= i %>:<%= for _ <- 1..@m do %>ab<% end %>)<% end %>"
)]
struct NestedRepeat {
    n: i64,
    m: i64,
}

#[test]
fn repeated_blocks_inside_loops_resume_in_place() {
    let out = check(NESTED_REPEAT, &NestedRepeat { n: 4, m: 3 });
    assert!(out.starts_with(b"(1:ababab)(2:"));
    check(NESTED_REPEAT, &NestedRepeat { n: 3, m: 20_000 });
    check(NESTED_REPEAT, &NestedRepeat { n: 2, m: 0 });
}

// The helpers of Phoenix pages (issue 36) through `#[derive(Template)]`: calls on fields render
// through the engine, constant calls are rendered at build time; both as the engine renders.

const HELPERS: &str = "<%= :erlang.float_to_binary(@price, decimals: 2) %>|\
<%= Enum.intersperse(@tags, \", \") %>|<%= Enum.map_intersperse(@tags, \"/\", &String.upcase/1) %>|\
<%= inspect(@tags) %>|<%= Integer.to_string(@n, 16) %>|<%= Integer.digits(@n) |> Enum.join(\",\") %>|\
<%= String.starts_with?(@path, [\"/x\", \"/admin\"]) %>|<%= Enum.each(@tags, & &1) %>|\
<%= inspect({:ok, 1.0e3}) %>|<%= String.graphemes(\"abc\") |> Enum.join(\" \") %>";

#[derive(Template, Serialize, Clone)]
#[template(source = "<%= :erlang.float_to_binary(@price, decimals: 2) %>|\
<%= Enum.intersperse(@tags, \", \") %>|<%= Enum.map_intersperse(@tags, \"/\", &String.upcase/1) %>|\
<%= inspect(@tags) %>|<%= Integer.to_string(@n, 16) %>|<%= Integer.digits(@n) |> Enum.join(\",\") %>|\
<%= String.starts_with?(@path, [\"/x\", \"/admin\"]) %>|<%= Enum.each(@tags, & &1) %>|\
<%= inspect({:ok, 1.0e3}) %>|<%= String.graphemes(\"abc\") |> Enum.join(\" \") %>")]
struct Helpers {
    price: f64,
    tags: Vec<String>,
    n: i64,
    path: String,
}

#[test]
fn phoenix_helpers_render_through_the_derive() {
    let out = check(
        HELPERS,
        &Helpers {
            price: 0.075,
            tags: vec!["a&b".into(), "c".into()],
            n: 255,
            path: "/admin/users".into(),
        },
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "0.08|a&amp;b, c|A&amp;B/C|[&quot;a&amp;b&quot;, &quot;c&quot;]|FF|2,5,5|true|ok|\
         {:ok, 1000.0}|a b c"
    );
}

// Syntax Phoenix 1.4-1.6 pages use (issue 36): keyword lists, and `if`/`case` with
// `do ... end` inside one tag; natively where the derive types them, else through the engine.

const SYNTAX: &str = "<% opts = [class: \"btn\", decimals: 2] %><b class=\"<%= opts[:class] %>\">\
<%= :erlang.float_to_binary(@price, [decimals: Keyword.get(opts, :decimals)]) %></b>|\
<%= if @admin do \"admin\" else \"user\" end %>|<%= unless @admin do \"guest\" end %>|\
<span class=\"<%= case @status do\n  \"paid\" -> \"green\"\n  _ -> \"grey\"\nend %>\"></span>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<% opts = [class: \"btn\", decimals: 2] %><b class=\"<%= opts[:class] %>\">\
<%= :erlang.float_to_binary(@price, [decimals: Keyword.get(opts, :decimals)]) %></b>|\
<%= if @admin do \"admin\" else \"user\" end %>|<%= unless @admin do \"guest\" end %>|\
<span class=\"<%= case @status do\n  \"paid\" -> \"green\"\n  _ -> \"grey\"\nend %>\"></span>"
)]
struct Syntax {
    price: f64,
    admin: bool,
    status: String,
}

#[test]
fn phoenix_syntax_renders_through_the_derive() {
    let page = |admin: bool, status: &str| {
        let t = Syntax {
            price: 1.115,
            admin,
            status: status.into(),
        };
        String::from_utf8(check(SYNTAX, &t)).unwrap()
    };
    assert_eq!(
        page(true, "paid"),
        "<b class=\"btn\">1.12</b>|admin||<span class=\"green\"></span>"
    );
    assert_eq!(
        page(false, "new"),
        "<b class=\"btn\">1.12</b>|user|guest|<span class=\"grey\"></span>"
    );
}

// `if name = value do` (the generators' flash idiom): `name` bound in the branches.

const BOUND_IF: &str = "<%= if user = @user do %>Hi <%= user %><% else %>Hi guest<% end %>|\
<%= if n = @count, do: n * 2, else: 0 %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= if user = @user do %>Hi <%= user %><% else %>Hi guest<% end %>|\
<%= if n = @count, do: n * 2, else: 0 %>"
)]
struct BoundIf {
    user: Option<String>,
    count: Option<i64>,
}

#[test]
fn a_match_as_if_condition_renders_through_the_derive() {
    let out = check(
        BOUND_IF,
        &BoundIf {
            user: Some("Ada & co".into()),
            count: Some(4),
        },
    );
    assert_eq!(String::from_utf8(out).unwrap(), "Hi Ada &amp; co|8");
    let out = check(
        BOUND_IF,
        &BoundIf {
            user: None,
            count: None,
        },
    );
    assert_eq!(String::from_utf8(out).unwrap(), "Hi guest|0");
}

// `for ..., into: "", do: ...`: the bodies joined, through the engine.

const FOR_INTO: &str = "<ul><%= raw(for x <- @xs, into: \"\", do: \"<li>#{x}</li>\") %></ul>";

#[derive(Template, Serialize, Clone)]
#[template(source = "<ul><%= raw(for x <- @xs, into: \"\", do: \"<li>#{x}</li>\") %></ul>")]
struct ForInto {
    xs: Vec<String>,
}

#[test]
fn for_into_a_string_renders_through_the_derive() {
    let out = check(
        FOR_INTO,
        &ForInto {
            xs: vec!["a".into(), "b".into()],
        },
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "<ul><li>a</li><li>b</li></ul>"
    );
}

// `first..last//step` (a list, through the engine): pagination offsets, a countdown.

const STEPPED: &str = "<%= for o <- 0..(@total - 1)//@per do %><%= o %>,<% end %>|\
<%= for i <- @n..1//-1 do %><%= i %><% end %>";

#[derive(Template, Serialize, Clone)]
#[template(source = "<%= for o <- 0..(@total - 1)//@per do %><%= o %>,<% end %>|\
<%= for i <- @n..1//-1 do %><%= i %><% end %>")]
struct Stepped {
    total: i64,
    per: i64,
    n: i64,
}

#[test]
fn stepped_ranges_render_through_the_derive() {
    let out = check(
        STEPPED,
        &Stepped {
            total: 25,
            per: 10,
            n: 3,
        },
    );
    assert_eq!(String::from_utf8(out).unwrap(), "0,10,20,|321");
    let out = check(
        STEPPED,
        &Stepped {
            total: 0,
            per: 10,
            n: 0,
        },
    );
    assert_eq!(String::from_utf8(out).unwrap(), "|");
}

// `with ... do ... else ... end` inside one tag, through the engine.

const WITH: &str = "<%= with %{email: e} <- @user, [_, d] <- String.split(e, \"@\") do d \
else _ -> \"none\" end %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= with %{email: e} <- @user, [_, d] <- String.split(e, \"@\") do d \
else _ -> \"none\" end %>"
)]
struct With {
    user: std::collections::BTreeMap<String, String>,
}

#[test]
fn with_renders_through_the_derive() {
    let mut user = std::collections::BTreeMap::new();
    let out = check(WITH, &With { user: user.clone() });
    assert_eq!(String::from_utf8(out).unwrap(), "none");
    user.insert("email".to_owned(), "ada@example.com".to_owned());
    let out = check(WITH, &With { user });
    assert_eq!(String::from_utf8(out).unwrap(), "example.com");
}
