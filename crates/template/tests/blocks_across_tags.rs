//! `fn` and `with` blocks over several tags (`Enum.map(@items, fn item -> %>...<% end)`):
//! streamed like whole renders, bounded by the render's limits, errors located. Their output
//! against real EEx is in `tests/eex_corpus/10_blocks_across_tags.cases`.

use galleon_template::{Assigns, Engine, ErrorKind, Limits};

fn assigns(json: &str) -> Assigns {
    Assigns::from_json(serde_json::from_str(json).unwrap()).unwrap()
}

fn render_err(source: &str, json: &str) -> String {
    let engine = Engine::from_source("t.html.eex", source);
    match engine {
        Err(e) => e.to_string(),
        Ok(engine) => engine
            .render("t.html.eex", &assigns(json))
            .unwrap_err()
            .to_string(),
    }
}

#[test]
fn fn_block_streams_as_it_renders_whole() {
    let source = "<ul><%= Enum.map(@xs, fn x -> %><li><%= x %></li><% end) %></ul>";
    let engine = Engine::from_source("t", source).unwrap();
    let a = assigns(r#"{"xs": ["a", "b & c", "d"]}"#);
    let whole = engine.render("t", &a).unwrap().to_vec();
    assert_eq!(
        String::from_utf8_lossy(&whole),
        "<ul><li>a</li><li>b &amp; c</li><li>d</li></ul>"
    );
    for n in [1, 3, 7] {
        let streamed: Vec<u8> = engine
            .stream("t", a.clone(), n)
            .unwrap()
            .flat_map(|c| c.unwrap().to_vec())
            .collect();
        assert_eq!(streamed, whole, "chunks of {n}");
    }
}

#[test]
fn fn_block_spends_the_render_budgets() {
    let source = "<%= Enum.map(1..1000, fn x -> %><%= x %><% end) %>";
    let engine = Engine::from_source("t", source)
        .unwrap()
        .with_limits(Limits {
            max_steps: 500,
            ..Limits::default()
        });
    let err = engine.render("t", &Assigns::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Limit, "{err}");
    let engine = Engine::from_source("t", source)
        .unwrap()
        .with_limits(Limits {
            max_output: 100,
            ..Limits::default()
        });
    let err = engine.render("t", &Assigns::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Limit, "{err}");
}

#[test]
fn fn_block_nesting_is_bounded_like_partials() {
    let source = "<%= Enum.map([1], fn a -> %><%= Enum.map([2], fn b -> %><%= a %><%= b %><% end) %><% end) %>";
    let engine = Engine::from_source("t", source).unwrap();
    assert_eq!(engine.render("t", &Assigns::new()).unwrap().to_vec(), b"12");
    let engine = engine.with_limits(Limits {
        max_depth: 1,
        ..Limits::default()
    });
    let err = engine.render("t", &Assigns::new()).unwrap_err();
    assert!(err.to_string().contains("nested more than 1 deep"), "{err}");
}

#[test]
fn errors_are_located() {
    let err = render_err(
        "<%= Enum.map(@xs, fn 1 -> %>one<% end) %>",
        r#"{"xs": [2]}"#,
    );
    assert!(
        err.starts_with(
            "t.html.eex:1:19: no function clause matching in anonymous fn/1: the integer 2"
        ),
        "{err}"
    );
    let err = render_err(
        "<%= with {:ok, n} <- @r do %><%= n %><% else {:error, :a} -> %>a<% end %>",
        r#"{"r": 5}"#,
    );
    assert!(
        err.starts_with("t.html.eex:1:38: no `with` clause matches the integer 5"),
        "{err}"
    );
    // The same in one tag.
    let err = render_err(
        "<%= with {:ok, n} <- @r do n else {:error, :a} -> \"a\" end %>",
        r#"{"r": 5}"#,
    );
    assert!(
        err.contains("no `with` clause matches the integer 5"),
        "{err}"
    );
    let err = render_err("<p>\n<%= Enum.map(@xs, fn x -> %>\n<%= x %>", "{}");
    assert!(
        err.starts_with("t.html.eex:2:1: `fn` block is never closed with `<% end) %>`"),
        "{err}"
    );
    let err = render_err(
        "<%= Enum.map(@xs, fn x -> Enum.map(x, fn y -> %><%= y %><% end) end) %>",
        r#"{"xs": []}"#,
    );
    assert!(err.contains("not inside another function"), "{err}");
    let err = render_err("<%= String.upcase(fn x -> %><% end) %>", "{}");
    assert!(err.contains("a function can only be passed"), "{err}");
}
