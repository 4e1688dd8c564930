//! Templates as deep as the parser allows compile into Rust, render on a small stack and agree
//! with the runtime engine; one level deeper is a build error (`tests/ui/too_deep.rs`).

use galleon_template::compiled::Template;
use galleon_template::{Assigns, Engine};
use galleon_template_derive::Template;
use serde::Serialize;

/// `@b` 64 times with `&&`, as a condition: a tree 64 levels high, the most the parser
/// accepts.
const ANDS: &str = "<%= if @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b do %>true<% else %>false<% end %>";
/// 63 `!` before `@b`: also 64 levels.
const BANGS: &str = "<%= !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!@b %>";
/// `@n` added 64 times: not native (arithmetic), so rendered by the runtime engine.
const SUM: &str = "<%= @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n %>";

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= if @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b && @b do %>true<% else %>false<% end %>",
    native
)]
struct Ands {
    b: bool,
}

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!@b %>",
    native
)]
struct Bangs {
    b: bool,
}

#[derive(Template, Serialize, Clone)]
#[template(
    source = "<%= @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n + @n %>"
)]
struct Sum {
    n: i64,
}

/// Renders `t` and, with the engine, `source` with `t`'s fields, on a thread with a 256 KiB
/// stack when optimized, 1 MiB otherwise (unoptimized frames are several times larger; see
/// galleon-template's `tests/depth.rs`).
fn on_small_stack<T>(t: T, source: &'static str) -> (String, String)
where
    T: Template + Serialize + Send + 'static,
{
    let stack = if cfg!(debug_assertions) { 1024 } else { 256 } * 1024;
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            let got = String::from_utf8(t.render().unwrap().to_vec()).unwrap();
            let engine = Engine::from_source("t", source).unwrap();
            let assigns = Assigns::from_serialize(&t).unwrap();
            let want = engine.render("t", &assigns).unwrap().to_vec();
            (got, String::from_utf8(want).unwrap())
        })
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn the_deepest_expressions_compile_and_render_on_a_small_stack() {
    for b in [true, false] {
        let (got, want) = on_small_stack(Ands { b }, ANDS);
        assert_eq!(
            (got.as_str(), want.as_str()),
            (b.to_string().as_str(), b.to_string().as_str())
        );
        let (got, want) = on_small_stack(Bangs { b }, BANGS);
        let not = (!b).to_string();
        assert_eq!((got.as_str(), want.as_str()), (not.as_str(), not.as_str()));
    }
    let (got, want) = on_small_stack(Sum { n: 2 }, SUM);
    assert_eq!((got.as_str(), want.as_str()), ("128", "128"));
}
