//! Regexes at the public surface: compile errors located at the sigil, and every regex function
//! held to the render's step and memory budgets whatever the input.

use galleon_template::{Assigns, Engine, Error, ErrorKind, Limits, Value};

fn render_with(src: &str, assigns: &Assigns, limits: Limits) -> Result<String, Error> {
    let engine = Engine::from_source("t.eex", src)?.with_limits(limits);
    let page = engine.render("t.eex", assigns)?;
    Ok(String::from_utf8(page.to_vec()).unwrap())
}

fn big(n: usize) -> Assigns {
    let mut a = Assigns::new();
    a.insert("s", "ab".repeat(n / 2));
    a
}

#[test]
fn bad_patterns_are_located_compile_errors() {
    for (src, col, says) in [
        ("<%= Regex.match?(~r/(a/, @s) %>", 18, "unclosed group"),
        (
            "<%= @s =~ ~r/(a)\\1/ %>",
            11,
            "backreferences are not supported",
        ),
        ("<%= @s =~ ~r/a(?=b)/ %>", 11, "look-around"),
        ("<%= @s =~ ~r/a/z %>", 11, "invalid regex modifier `z`"),
        ("<%= @s =~ ~r/a/f %>", 11, "firstline"),
        ("<%= @s =~ ~r/((a{100}){100}){100}/ %>", 11, "regex too big"),
        ("<%= @s =~ ~r/abc %>", 11, "unterminated sigil"),
        ("<%= ~q(a) %>", 5, "the sigil ~q is not supported"),
        ("<%= ~w(a b)c %>", 5, "charlists are not supported"),
    ] {
        let e = Engine::from_source("t.eex", src).expect_err(src);
        let loc = e.location().expect("located");
        assert_eq!((loc.line(), loc.column()), (1, col), "{src}: {e}");
        assert!(e.message().contains(says), "{src}: {e}");
    }
}

#[test]
fn an_interpolated_pattern_fails_where_it_is_compiled() {
    let mut a = Assigns::new();
    a.insert("p", "(");
    let e = render_with("<%= \"x\" =~ ~r/#{@p}/ %>", &a, Limits::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TypeMismatch, "{e}");
    assert!(e.message().contains("invalid regex"), "{e}");
    a.insert("p", "x");
    assert_eq!(
        render_with("<%= \"x\" =~ ~r/#{@p}/ %>", &a, Limits::default()).unwrap(),
        "true"
    );
}

#[test]
fn empty_matches_on_a_long_string_hit_the_memory_limit() {
    let limits = Limits {
        max_memory: 1 << 20,
        max_steps: u64::MAX,
        ..Limits::default()
    };
    let a = big(1_000_000);
    for src in [
        "<%= length(Regex.scan(~r//, @s)) %>",
        "<%= length(Regex.split(~r//, @s)) %>",
        "<%= byte_size(String.replace(@s, ~r//, \"0123456789\")) %>",
        "<%= byte_size(Regex.replace(~r/a/, @s, \"0123456789\")) %>",
    ] {
        let e = render_with(src, &a, limits).expect_err(src);
        assert_eq!(e.kind(), ErrorKind::Limit, "{src}: {e}");
        assert!(e.message().contains("memory limit"), "{src}: {e}");
    }
}

#[test]
fn scanning_costs_steps_by_the_byte() {
    let limits = Limits {
        max_steps: 10_000,
        ..Limits::default()
    };
    // 100 scans of 64 KiB: 100 * 1,024 steps, past the limit, though nothing matches.
    let a = big(64 * 1024);
    let e = render_with(
        "<%= for _ <- 1..100 do %><%= @s =~ ~r/z/ %><% end %>",
        &a,
        limits,
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
    assert!(e.message().contains("step"), "{e}");
}

#[test]
fn a_regex_is_a_value_but_not_output() {
    let mut a = Assigns::new();
    a.insert("s", Value::str("2024-05-01"));
    let ok = render_with(
        "<% re = ~r/(\\d+)-(\\d+)/ %><%= inspect(re) %> <%= Enum.join(Regex.run(re, @s), \",\") %>",
        &a,
        Limits::default(),
    )
    .unwrap();
    assert_eq!(ok, "~r/(\\d+)-(\\d+)/ 2024-05,2024,05");
    let e = render_with("<% re = ~r/a/ %><%= re %>", &a, Limits::default()).unwrap_err();
    assert!(e.message().contains("cannot output a regex"), "{e}");
}
