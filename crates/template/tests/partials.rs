//! Partials called with a map of assigns (`render "form.html", Map.put(assigns, :action, ...)`),
//! `assigns` as a value, and the `.eex` lookup, through every render entry point.

use galleon_template::{Assigns, Engine, ErrorKind, Limits, Value};

/// A phx.gen.html-shaped page and its form partial.
fn gen_pages() -> Engine {
    Engine::from_sources([
        (
            "posts/new.html.eex",
            "<h1>New</h1><%= render \"form.html\", Map.put(assigns, :action, \"/posts\") %>",
        ),
        (
            "posts/form.html.eex",
            "<form action=\"<%= @action %>\"><%= render \"field.html\", Map.merge(assigns, %{name: \"title\"}) %></form>",
        ),
        (
            "posts/field.html.eex",
            "<input name=\"<%= @name %>\" value=\"<%= @post.title %>\">",
        ),
    ])
    .unwrap()
}

fn post_assigns() -> Assigns {
    let mut a = Assigns::new();
    a.insert("post", Value::map([("title", Value::str("A & B"))]));
    a
}

const GEN_PAGE: &str =
    "<h1>New</h1><form action=\"/posts\"><input name=\"title\" value=\"A &amp; B\"></form>";

#[test]
fn assigns_reach_partials_two_levels_down_from_every_entry_point() {
    let engine = gen_pages();
    let a = post_assigns();
    let whole = engine.render("posts/new.html.eex", &a).unwrap().to_vec();
    assert_eq!(String::from_utf8(whole).unwrap(), GEN_PAGE);
    // Assigns asked for by name: `assigns` holds the names the partials read.
    let asked = engine
        .render_with("posts/new.html.eex", |k| a.get(k).cloned())
        .unwrap()
        .to_vec();
    assert_eq!(String::from_utf8(asked).unwrap(), GEN_PAGE);
    let mut streamed = Vec::new();
    for chunk in engine.stream("posts/new.html.eex", a, 8).unwrap() {
        streamed.extend_from_slice(&chunk.unwrap().to_vec());
    }
    assert_eq!(String::from_utf8(streamed).unwrap(), GEN_PAGE);
}

#[test]
fn load_file_finds_form_html_as_form_html_eex() {
    let dir = std::env::temp_dir().join(format!("galleon-partials-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("edit.html.eex"),
        "<%= render \"form.html\", Map.put(assigns, :action, \"/p/1\") %>",
    )
    .unwrap();
    std::fs::write(
        dir.join("form.html.eex"),
        "<form action=\"<%= @action %>\"></form>",
    )
    .unwrap();
    let engine = Engine::load_file(dir.join("edit.html.eex"));
    let loaded = Engine::load(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    for engine in [engine.unwrap(), loaded.unwrap()] {
        let page = engine.render("edit.html.eex", &Assigns::new()).unwrap();
        assert_eq!(&page.to_vec()[..], b"<form action=\"/p/1\"></form>");
    }
}

#[test]
fn a_partial_passing_assigns_to_itself_stops_at_the_depth_limit() {
    let engine =
        Engine::from_sources([("self.html.eex", "x<%= render \"self.html\", assigns %>")]).unwrap();
    let err = engine.render("self.html.eex", &Assigns::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Limit);
    let msg = err.to_string();
    assert!(
        msg.starts_with("self.html.eex:1:6: partials nested more than 64 deep"),
        "{msg}"
    );
}

#[test]
fn assigns_that_are_not_a_map_are_a_located_error() {
    let engine = Engine::from_sources([
        ("p.html.eex", "ab\n<%= render \"q.html.eex\", @n %>"),
        ("q.html.eex", "q"),
    ])
    .unwrap();
    let mut a = Assigns::new();
    a.insert("n", 3);
    let err = engine.render("p.html.eex", &a).unwrap_err();
    assert_eq!(
        err.to_string().lines().next().unwrap(),
        "p.html.eex:2:26: the assigns of `render` must be a map or a keyword list, not the integer 3"
    );
}

#[test]
fn a_missing_partial_is_a_located_load_error() {
    let err = Engine::from_sources([("p.html.eex", "\n  <%= render \"nope.html\", assigns %>")])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(
        err.to_string()
            .starts_with("p.html.eex:2:7: no template named `nope.html`")
    );
}

#[test]
fn map_put_in_a_reduce_is_charged_to_the_memory_budget() {
    // Each `Map.put` copies the map: the copies add up, and the budget stops them.
    let engine = Engine::from_source(
        "m.html.eex",
        "<%= map_size(Enum.reduce(1..@n, %{}, fn i, acc -> Map.put(acc, \"k#{i}\", i) end)) %>",
    )
    .unwrap()
    .with_limits(Limits {
        max_memory: 1 << 20,
        ..Limits::default()
    });
    let mut a = Assigns::new();
    a.insert("n", 100);
    let page = engine.render("m.html.eex", &a).unwrap();
    assert_eq!(&page.to_vec()[..], b"100");
    a.insert("n", 100_000);
    let err = engine.render("m.html.eex", &a).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Limit);
    assert!(err.to_string().starts_with("m.html.eex:1:"), "{err}");
}

#[test]
fn map_update_runs_its_function_and_locates_its_errors() {
    let engine = Engine::from_source(
        "u.html.eex",
        "<%= Map.update(@m, :n, 0, &(&1 + 1)).n %>|<%= Map.update(@m, :s, 0, &(&1 + 1)).s %>",
    )
    .unwrap();
    let mut a = Assigns::new();
    a.insert(
        "m",
        Value::map([("n", Value::Int(1)), ("s", Value::str("x"))]),
    );
    let err = engine.render("u.html.eex", &a).unwrap_err();
    assert!(err.to_string().contains("`+` cannot combine"), "{err}");
    a.insert("m", Value::map([("n", Value::Int(1))]));
    let page = engine.render("u.html.eex", &a).unwrap();
    assert_eq!(&page.to_vec()[..], b"2|0");
}

#[test]
fn a_layout_passes_its_assigns_with_the_page_to_a_header_partial() {
    let engine = Engine::from_sources([
        (
            "layout.html.eex",
            "<%= render \"header.html\", assigns %><main><%= @inner_content %></main>",
        ),
        ("header.html.eex", "<header><%= @title %></header>"),
        ("page.html.eex", "<p><%= @title %></p>"),
    ])
    .unwrap();
    let mut a = Assigns::new();
    a.insert("title", "T<1>");
    let page = engine
        .render_in_layout("page.html.eex", "layout.html.eex", &a)
        .unwrap();
    assert_eq!(
        &page.to_vec()[..],
        b"<header>T&lt;1&gt;</header><main><p>T&lt;1&gt;</p></main>"
    );
}
