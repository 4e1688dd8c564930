//! `<>` on an accumulator appends in place (amortised linear) without changing what any value
//! holds, and the step and memory limits still stop a runaway append loop.

use galleon_template::{Assigns, Engine, Error, ErrorKind, Limits, Value};

fn render_with(src: &str, assigns: &Assigns, limits: Limits) -> Result<String, Error> {
    let engine = Engine::from_source("t.eex", src)?.with_limits(limits);
    let page = engine.render("t.eex", assigns)?;
    Ok(String::from_utf8(page.to_vec()).unwrap())
}

fn render(src: &str, assigns: &Assigns) -> String {
    render_with(src, assigns, Limits::default()).unwrap()
}

fn words(n: usize) -> Assigns {
    let mut a = Assigns::new();
    a.insert(
        "words",
        Value::list((0..n).map(|i| Value::str(&format!("w{i} ")))),
    );
    a
}

#[test]
fn binding_then_appending_leaves_the_binding() {
    let a = Assigns::new();
    assert_eq!(
        render(r#"<% a = "x" %><% b = a <> "y" %><%= a %>|<%= b %>"#, &a),
        "x|xy"
    );
    // `acc <> w` appended in place must leave `acc` as it was for the rest of the body.
    assert_eq!(
        render(
            r#"<%= Enum.reduce(["a", "b", "c", "d"], "", fn w, acc -> (acc <> w) <> acc end) %>"#,
            &a
        ),
        "abacabadabacaba"
    );
    assert_eq!(
        render(
            r#"<%= Enum.reduce(["a", "b"], "", fn w, acc -> {acc <> w, acc} |> elem(1) end) %>"#,
            &a
        ),
        ""
    );
}

#[test]
fn a_shared_accumulator_is_copied_not_changed() {
    let mut a = words(3);
    a.insert("start", "s");
    let src = r#"<% s = @start <> "-" %><%= Enum.reduce(@words, s, fn w, acc -> acc <> w end) %>|<%= s %>|<%= @start %>|<%= Enum.reduce(@words, @start, fn w, acc -> acc <> w end) %>|<%= @start %>"#;
    assert_eq!(render(src, &a), "s-w0 w1 w2 |s-|s|sw0 w1 w2 |s");
    // Every intermediate accumulator kept in a list: each keeps its own bytes.
    let src = r#"<%= Enum.reduce(@words, [""], fn w, acc -> [List.first(acc) <> w] ++ acc end) |> Enum.join(",") %>"#;
    assert_eq!(render(src, &a), "w0 w1 w2 ,w0 w1 ,w0 ,");
    // Two reduces from one starting string built in the template.
    let src = r#"<% s = "a" <> "b" %><% x = Enum.reduce(@words, s, fn w, acc -> acc <> w end) %><% y = Enum.reduce(["!"], s, fn w, acc -> acc <> w end) %><%= x %>|<%= y %>|<%= s %>"#;
    assert_eq!(render(src, &a), "abw0 w1 w2 |ab!|ab");
}

#[test]
fn append_in_reduce_and_in_a_comprehension() {
    let a = words(1000);
    let expected: String = (0..1000).map(|i| format!("w{i} ")).collect();
    assert_eq!(
        render(
            r#"<%= Enum.reduce(@words, "", fn w, acc -> acc <> w end) %>"#,
            &a
        ),
        expected
    );
    assert_eq!(
        render(
            r#"<%= Enum.reduce(@words, "", fn w, acc -> acc <> String.upcase(w) end) %>"#,
            &a
        ),
        expected.to_uppercase()
    );
    assert_eq!(
        render(
            r#"<%= for(w <- Enum.take(@words, 2), do: w <> "!") |> Enum.join() %>"#,
            &a
        ),
        "w0 !w1 !"
    );
    // Doubling on itself: the right side shares the buffer, so it is copied.
    assert_eq!(
        render(
            r#"<%= Enum.reduce(1..4, "ab", fn _, acc -> acc <> acc end) %>"#,
            &a
        ),
        "ab".repeat(16)
    );
}

#[test]
fn the_memory_limit_stops_an_appending_loop() {
    let limits = Limits {
        max_memory: 1 << 20,
        max_steps: u64::MAX,
        ..Limits::default()
    };
    let a = Assigns::new();
    for src in [
        r#"<%= Enum.reduce(1..10_000_000, "", fn _, acc -> acc <> "0123456789" end) %>"#,
        r#"<%= Enum.reduce(1..40, "x", fn _, acc -> acc <> acc end) %>"#,
    ] {
        let e = render_with(src, &a, limits).expect_err("within the memory limit");
        assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
        assert!(e.message().contains("memory limit"), "{}", e.message());
    }
    // Under the limit: about 500 KB of string, with its doublings, fits in 4 MiB.
    let limits = Limits {
        max_memory: 4 << 20,
        ..limits
    };
    let out = render_with(
        r#"<%= Enum.reduce(1..50_000, "", fn _, acc -> acc <> "0123456789" end) |> String.length() %>"#,
        &a,
        limits,
    )
    .unwrap();
    assert_eq!(out, "500000");
}

#[test]
fn the_step_limit_stops_an_appending_loop() {
    let limits = Limits {
        max_steps: 100_000,
        ..Limits::default()
    };
    let a = Assigns::new();
    let e = render_with(
        r#"<%= Enum.reduce(1..100_000_000, "", fn _, acc -> acc <> "x" end) %>"#,
        &a,
        limits,
    )
    .expect_err("within the step limit");
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
    assert!(e.message().contains("step"), "{}", e.message());
    // Long appends cost steps by the byte: 10 appends of 64 KiB exceed 10,000 steps.
    let mut big = Assigns::new();
    big.insert("s", "x".repeat(64 * 1024));
    let limits = Limits {
        max_steps: 10_000,
        ..Limits::default()
    };
    let e = render_with(
        r#"<%= Enum.reduce(1..10, "", fn _, acc -> acc <> @s end) |> String.length() %>"#,
        &big,
        limits,
    )
    .expect_err("within the step limit");
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
}
