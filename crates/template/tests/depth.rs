//! Deep input is a located syntax error, never a stack overflow, on any thread.
//!
//! Each shape is compiled and, where it compiles, rendered (whole and streamed) on a thread with
//! a small stack. The shapes of the report (a long sum, pipes, `and`s, nested interpolation) are
//! refused without deep recursion, so they run on [`SMALL`] (256 KiB, an eighth of the 2 MiB a
//! reload or watch thread gets) in every build. Before the depth limit applied to the trees the
//! parser builds in loops and to strings nested in interpolations, each of them aborted the test
//! process with a stack overflow, on 256 KiB and on 2 MiB alike.
//!
//! Templates at the limit, and shapes the parser refuses only once it has recursed that deep
//! (parentheses, brackets), run on [`STACK`]: 256 KiB in an optimized build too, where a level
//! costs about 2 KB of stack; an unoptimized build's frames are several times larger (about 8 KB a
//! level to parse, 9 KB to compile and 13 KB to render an expression, measured; the deepest
//! accepted template, blocks and `fn` bodies, took 1088 KiB to compile), so there it is
//! 1.5 MiB, within a reload thread's 2 MiB.

use galleon_template::syntax::{Node, parse};
use galleon_template::{Assigns, Engine, Error, Str, Value};

/// The deepest nesting accepted (`MAX_NESTING` in `src/parser/mod.rs`).
const LIMIT: usize = 64;

/// The stack of the tests of the report's shapes.
const SMALL: usize = 256 * 1024;

/// The stack of the other tests: [`SMALL`] when optimized, 1.5 MiB otherwise.
const STACK: usize = if cfg!(debug_assertions) {
    3 * 512 * 1024
} else {
    SMALL
};

/// Runs `f` on a thread with a stack of `size` bytes.
fn on_stack<T: Send + 'static>(size: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .name("small-stack".into())
        .stack_size(size)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// Compiles `src` and renders it with `assigns`, whole and streamed, on a `stack`-byte stack.
fn compile_render(src: String, assigns: Assigns, stack: usize) -> Result<String, Error> {
    on_stack(stack, move || {
        let engine = Engine::from_source("deep.eex", &src)?;
        let page = engine.render("deep.eex", &assigns)?;
        let streamed: Vec<u8> = engine
            .stream("deep.eex", assigns.clone(), 64)?
            .map(|chunk| chunk.map(|c| c.to_vec()))
            .collect::<Result<Vec<_>, _>>()?
            .concat();
        assert_eq!(page.to_vec(), streamed);
        Ok(String::from_utf8(page.to_vec()).unwrap())
    })
}

fn render_with(src: String, assigns: Assigns) -> Result<String, Error> {
    compile_render(src, assigns, STACK)
}

fn render(src: String) -> Result<String, Error> {
    render_with(src, Assigns::new())
}

/// The 1-based column of the `nth` (0-based) occurrence of `needle` in one-line `src`.
fn column_of(src: &str, needle: &str, nth: usize) -> usize {
    src.match_indices(needle)
        .nth(nth)
        .expect("no such occurrence")
        .0
        + 1
}

/// Asserts that `err` is the depth error at line 1, `column`.
#[track_caller]
fn assert_depth_error(err: Error, column: usize) {
    assert!(err.is_parse(), "not a syntax error: {}", err.message());
    assert!(
        err.message().contains(&format!(
            "nested too deeply (more than {LIMIT} levels); split it up"
        )),
        "{}",
        err.message()
    );
    assert_eq!((err.line(), err.column()), (Some(1), Some(column)));
}

/// Asserts that `src` fails to compile (on [`STACK`]) with the depth error at line 1, `column`.
#[track_caller]
fn assert_too_deep(src: String, column: usize) {
    assert_depth_error(
        render(src).expect_err("an over-deep template compiled"),
        column,
    );
}

/// [`assert_too_deep`] on [`SMALL`], in every build.
#[track_caller]
fn assert_too_deep_on_small(src: String, column: usize) {
    let err =
        compile_render(src, Assigns::new(), SMALL).expect_err("an over-deep template compiled");
    assert_depth_error(err, column);
}

/// `<%= first sep first sep ... %>` with `n` terms.
fn chain(first: &str, sep: &str, n: usize) -> String {
    format!("<%= {} %>", vec![first; n].join(sep))
}

#[test]
fn a_sum_of_2000_terms_is_too_deep() {
    let src = chain("1", " + ", 2000);
    // The 64th `+` makes the tree 65 levels high.
    let column = column_of(&src, "+", LIMIT - 1);
    assert_too_deep_on_small(src, column);
}

#[test]
fn sums_up_to_the_limit_render() {
    assert_eq!(render(chain("1", " + ", 50)).unwrap(), "50");
    assert_eq!(render(chain("1", " + ", LIMIT)).unwrap(), LIMIT.to_string());
    let err = render(chain("1", " + ", LIMIT + 1)).unwrap_err();
    assert!(err.is_parse(), "{}", err.message());
}

#[test]
fn seven_hundred_pipes_are_too_deep() {
    let src = format!("<%= -1{} %>", " |> abs".repeat(700));
    let column = column_of(&src, "|>", LIMIT - 1);
    assert_too_deep_on_small(src, column);
}

#[test]
fn pipes_up_to_the_limit_render() {
    let src = format!("<%= -1{} %>", " |> abs".repeat(LIMIT - 1));
    assert_eq!(render(src).unwrap(), "1");
    let src = format!("<%= @xs{} %>", " |> Enum.reverse()".repeat(LIMIT - 1));
    let mut assigns = Assigns::new();
    assigns.insert("xs", vec!["a", "b"]);
    assert_eq!(render_with(src, assigns).unwrap(), "ba");
}

#[test]
fn twenty_thousand_ands_are_too_deep() {
    let src = chain("true", " and ", 20_000);
    let column = column_of(&src, "and", LIMIT - 1);
    assert_too_deep_on_small(src, column);
}

#[test]
fn ands_and_ors_up_to_the_limit_render() {
    assert_eq!(render(chain("true", " and ", LIMIT)).unwrap(), "true");
    assert_eq!(render(chain("false", " || ", LIMIT)).unwrap(), "false");
    assert_eq!(render(chain("2", " * ", 20)).unwrap(), "1048576");
    let src = chain("x", " == ", LIMIT + 1);
    let column = column_of(&src, "==", LIMIT - 1);
    assert_too_deep(src, column);
}

/// `"#{"#{ ... 1 ... }"}"`: `n` strings, each interpolating the next.
fn nested_interpolation(n: usize) -> String {
    format!("<%= {}1{} %>", "\"#{".repeat(n), "}\"".repeat(n))
}

#[test]
fn five_thousand_nested_interpolations_are_too_deep() {
    let src = nested_interpolation(5000);
    // The lexer refuses the 65th `#{`, before anything is parsed.
    let column = column_of(&src, "#{", LIMIT);
    assert_too_deep_on_small(src, column);
}

#[test]
fn nested_interpolations_under_the_limit_render() {
    assert_eq!(render(nested_interpolation(30)).unwrap(), "1");
    // As deep as the lexer goes, the parser refuses: each level is a level of the tree too.
    let err = render(nested_interpolation(LIMIT)).unwrap_err();
    assert!(err.is_parse(), "{}", err.message());
    assert!(
        err.message().contains("nested too deeply"),
        "{}",
        err.message()
    );
}

#[test]
fn deep_parentheses_are_too_deep() {
    let src = format!("<%= {}1{} %>", "(".repeat(10_000), ")".repeat(10_000));
    let column = column_of(&src, "(", LIMIT);
    assert_too_deep(src, column);
    let src = format!("<%= {}1{} %>", "(".repeat(LIMIT - 1), ")".repeat(LIMIT - 1));
    assert_eq!(render(src).unwrap(), "1");
}

#[test]
fn deep_lists_tuples_and_maps_are_too_deep() {
    let src = format!("<%= {}1{} %>", "[".repeat(10_000), "]".repeat(10_000));
    assert_too_deep(src, 5 + LIMIT);
    let src = format!("<%= {}1{} %>", "{".repeat(10_000), "}".repeat(10_000));
    assert_too_deep(src, 5 + LIMIT);
    let src = format!("<%= {}1{} %>", "%{a: ".repeat(10_000), "}".repeat(10_000));
    let column = column_of(&src, "%{", LIMIT);
    assert_too_deep(src, column);
    let src = format!("<%= {}\"a\"{} %>", "[".repeat(40), "]".repeat(40));
    assert_eq!(render(src).unwrap(), "a");
    let src = format!(
        "<%= {}1{}{} %>",
        "%{a: ".repeat(30),
        "}".repeat(30),
        ".a".repeat(30)
    );
    assert_eq!(render(src).unwrap(), "1");
}

#[test]
fn long_field_and_index_chains_are_too_deep() {
    let src = format!("<%= @m{} %>", ".a".repeat(10_000));
    // `@m` is one level, each `.a` another: the 64th `a` is the 65th level.
    let column = column_of(&src, "a", LIMIT - 1);
    assert_too_deep(src, column);
    let src = format!("<%= @m{} %>", "[:a]".repeat(10_000));
    let column = column_of(&src, "]", LIMIT - 1);
    assert_too_deep(src, column);
    let mut m = Value::from("x");
    for _ in 0..(LIMIT - 1) {
        let mut map = galleon_template::Map::new();
        map.insert(Str::new("a"), m);
        m = Value::Map(map.into());
    }
    let mut assigns = Assigns::new();
    assigns.insert("m", m.clone());
    let src = format!("<%= @m{} %>", ".a".repeat(LIMIT - 1));
    assert_eq!(render_with(src, assigns).unwrap(), "x");
    let mut assigns = Assigns::new();
    assigns.insert("m", m);
    let src = format!("<%= @m{} %>", "[:a]".repeat(LIMIT - 1));
    assert_eq!(render_with(src, assigns).unwrap(), "x");
}

#[test]
fn long_prefix_and_right_associative_chains_are_too_deep() {
    let src = format!("<%= {}true %>", "!".repeat(10_000));
    assert_too_deep(src, 5 + LIMIT);
    let src = format!("<%= {}true %>", "not ".repeat(10_000));
    let column = column_of(&src, "not", LIMIT);
    assert_too_deep(src, column);
    let src = chain("\"a\"", " <> ", 10_000);
    let column = column_of(&src, "\"a\"", LIMIT);
    assert_too_deep(src, column);
    // `[1]` is two levels: the parser reaches its limit inside the 64th.
    let src = chain("[1]", " ++ ", 10_000);
    let column = column_of(&src, "1", LIMIT - 1);
    assert_too_deep(src, column);
    assert_eq!(
        render(format!("<%= {}true %>", "!!".repeat(31))).unwrap(),
        "true"
    );
    assert_eq!(render(chain("\"a\"", " <> ", 60)).unwrap(), "a".repeat(60));
}

#[test]
fn deep_blocks_are_too_deep() {
    let src = "<%= if true do %>".repeat(10_000);
    let err = render(src).unwrap_err();
    assert!(err.is_parse(), "{}", err.message());
    assert!(
        err.message().contains("nested too deeply"),
        "{}",
        err.message()
    );
    assert_eq!(err.column(), Some(1 + 17 * LIMIT));
}

/// The deepest template accepted: blocks as deep as allowed, expressions as high as allowed
/// inside, one of them calling a function on each element of the loop.
#[test]
fn the_deepest_accepted_template_compiles_and_renders_on_a_small_stack() {
    let sum = vec!["x"; LIMIT].join(" + ");
    // `Enum.sum(Enum.map([x], fn y -> body end))`: the body is 3 levels below the top.
    let mut body = vec!["0"; LIMIT - 3];
    body[0] = "y";
    let body = body.join(" + ");
    let mut src = "<%= for x <- @xs do %>".to_owned();
    src.push_str(&"<%= if x > 0 do %>".repeat(LIMIT - 2));
    src.push_str(&format!(
        "<%= if true do %><%= {sum} %>:<%= Enum.sum(Enum.map([x], fn y -> {body} end)) %><% end %>"
    ));
    src.push_str(&"<% end %>".repeat(LIMIT - 1));
    let mut assigns = Assigns::new();
    assigns.insert("xs", vec![1i64, 2]);
    let expected = format!("{LIMIT}:1{}:2", 2 * LIMIT);
    assert_eq!(render_with(src.clone(), assigns).unwrap(), expected);
    // One block more is refused.
    let deeper = format!("<%= if true do %>{src}<% end %>");
    let err = render(deeper).unwrap_err();
    assert!(
        err.message().contains("nested too deeply"),
        "{}",
        err.message()
    );
}

/// The syntax tree of the deepest accepted expression can be printed and dropped on a small
/// stack (the derive walks the same tree).
#[test]
fn the_deepest_tree_prints_and_drops_on_a_small_stack() {
    on_stack(STACK, || {
        let src = chain("1", " + ", LIMIT);
        let nodes = parse(&src, false).unwrap();
        assert!(matches!(nodes.as_slice(), [Node::Output(_)]));
        let printed = format!("{nodes:?}");
        assert_eq!(printed.matches("Binary").count(), LIMIT - 1);
        drop(nodes);
        for src in [
            chain("1", " + ", 2000),
            chain("true", " and ", 20_000),
            nested_interpolation(5000),
        ] {
            let err = parse(&src, false).unwrap_err();
            assert!(err.message.contains("nested too deeply"), "{}", err.message);
        }
    });
}
