//! `galleon render` end to end, through the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn galleon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_galleon"))
        .args(args)
        .output()
        .expect("run galleon")
}

fn site(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../site")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// A fresh directory for this test's files.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("render_cli")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn doom_to_stdout_is_the_block_repeated() {
    let source = std::fs::read_to_string(site("pages/doom.html.eex")).unwrap();
    let body = &source[source.find("do %>").unwrap() + 5..source.rfind("<% end %>").unwrap()];
    let out = galleon(&[
        "render",
        &site("pages/doom.html.eex"),
        "--assign",
        "iters=1000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, body.repeat(1000).as_bytes());
    assert!(
        out.stderr.is_empty(),
        "no progress bar when stderr is not a terminal"
    );
}

#[test]
fn data_file_assigns_and_output_file() {
    let dir = scratch("data_file");
    std::fs::write(
        dir.join("page.html.eex"),
        "<h1><%= @title %></h1><%= render(\"item.html.eex\", n: @n) %>",
    )
    .unwrap();
    std::fs::write(dir.join("item.html.eex"), "<p><%= @n + 1 %></p>").unwrap();
    std::fs::write(dir.join("data.json"), r#"{"title": "A & B", "n": 1}"#).unwrap();
    let page = dir.join("page.html.eex");
    let data = dir.join("data.json");
    let out_file = dir.join("out.html");
    let out = galleon(&[
        "render",
        page.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        // JSON when it parses: 41 is a number.
        "--assign",
        "n=41",
        "-o",
        out_file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(&out_file).unwrap(),
        "<h1>A &amp; B</h1><p>42</p>"
    );
    // Not JSON: a string. `"41"` + 1 is then a located type error.
    let out = galleon(&[
        "render",
        page.to_str().unwrap(),
        "--assign",
        "title=x",
        "--assign",
        "n=\"41\"",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("item.html.eex:1:8: `+` cannot combine the string \"41\" and the integer 1"),
        "{stderr}"
    );
    let out = galleon(&[
        "render",
        page.to_str().unwrap(),
        "--assign",
        "title=plain words",
        "--assign",
        "n=0",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "<h1>plain words</h1><p>1</p>"
    );
}

#[test]
fn syntax_error_exits_non_zero_with_file_line_column_and_caret() {
    let dir = scratch("syntax");
    let page = dir.join("bad.html.eex");
    std::fs::write(
        &page,
        "<ul>\n  <%= for x <- @xs do %>\n    <li><%= x %></li>\n</ul>\n",
    )
    .unwrap();
    let out = galleon(&["render", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: bad.html.eex:2:3: `for` block is never closed with `<% end %>`\n  |\n2 |   <%= for x <- @xs do %>\n  |   ^^^^^^^^^^^^^^^^^^^^^^\n"
    );
}

#[test]
fn bad_json_data_is_an_error() {
    let dir = scratch("bad_json");
    let data = dir.join("data.json");
    std::fs::write(&data, "{\"iters\": 3,,}").unwrap();
    let out = galleon(&[
        "render",
        &site("pages/doom.html.eex"),
        "--data",
        data.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("data.json: invalid JSON"),
        "{stderr}"
    );
    std::fs::write(&data, "[1, 2]").unwrap();
    let out = galleon(&[
        "render",
        &site("pages/doom.html.eex"),
        "--data",
        data.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("assigns must be a JSON object, not an array"),
        "{stderr}"
    );
}

#[test]
fn missing_assign_and_missing_file_are_errors() {
    let out = galleon(&["render", &site("pages/doom.html.eex")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: doom.html.eex:1:17: unknown assign @iters"),
        "{stderr}"
    );
    let out = galleon(&["render", "/nonexistent/x.html.eex"]);
    assert_eq!(out.status.code(), Some(1));
    let out = galleon(&[
        "render",
        &site("pages/doom.html.eex"),
        "--assign",
        "noequals",
    ]);
    assert_eq!(out.status.code(), Some(2), "clap usage error");
}

#[test]
fn a_closed_pipe_is_not_a_failure() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_galleon"))
        .args([
            "render",
            &site("pages/doom.html.eex"),
            "--assign",
            "iters=100000000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 4096];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(&first[..5], b"\nDOOM");
}

#[test]
fn layout_wraps_the_page_escaped_once() {
    // Page and layout in different directories, each with its own `part.html.eex`: each file's
    // partials resolve in its own directory.
    let dir = scratch("layout");
    std::fs::create_dir_all(dir.join("pages")).unwrap();
    std::fs::create_dir_all(dir.join("layouts")).unwrap();
    std::fs::write(
        dir.join("pages/page.html.eex"),
        "<p><%= @title %></p><%= render(\"part.html.eex\", x: \"<b>\") %>",
    )
    .unwrap();
    std::fs::write(dir.join("pages/part.html.eex"), "<i><%= @x %></i>").unwrap();
    std::fs::write(
        dir.join("layouts/app.html.eex"),
        "<title><%= @title %></title>\n<main>\n  <%= @inner_content %>\n</main>\n<%= render(\"part.html.eex\") %>",
    )
    .unwrap();
    std::fs::write(dir.join("layouts/part.html.eex"), "<footer>'</footer>").unwrap();
    let page = dir.join("pages/page.html.eex");
    let layout = dir.join("layouts/app.html.eex");
    let render = |extra: &[&str]| {
        let mut args = vec![
            "render",
            page.to_str().unwrap(),
            "--layout",
            layout.to_str().unwrap(),
            "--assign",
            "title=A & B",
        ];
        args.extend_from_slice(extra);
        let out = galleon(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // The page's `&` and `<b>` are escaped by the page, and not again by the layout.
    let expected = "<title>A &amp; B</title>\n<main>\n  <p>A &amp; B</p><i>&lt;b&gt;</i>\n</main>\n<footer>'</footer>";
    assert_eq!(render(&[]), expected);
    // The layout streams: chunk by chunk, the same bytes.
    assert_eq!(render(&["--chunk-bytes", "1"]), expected);
    // `--trim` applies to the layout too.
    assert_eq!(
        render(&["--trim"]),
        "<title>A &amp; B</title>\n<main>\n<p>A &amp; B</p><i>&lt;b&gt;</i>\n</main>\n<footer>'</footer>"
    );

    // The site's own layout, around one block of Blah.
    let layout = std::fs::read_to_string(site("layout.html.eex")).unwrap();
    let blah = std::fs::read_to_string(site("pages/blah.html.eex")).unwrap();
    let block = &blah[blah.find("do %>").unwrap() + 5..blah.rfind("<% end %>").unwrap()];
    let out = galleon(&[
        "render",
        &site("pages/blah.html.eex"),
        "--layout",
        &site("layout.html.eex"),
        "-a",
        "iters=1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        layout.replace("<%= @inner_content %>", block)
    );
}

#[test]
fn trim_changes_whitespace_as_eex_does() {
    let dir = scratch("trim");
    let page = dir.join("page.html.eex");
    std::fs::write(
        &page,
        "\n  <%= @title %>\n<ul>\n  <%= for x <- @xs do %>\n    <li><%= x %></li>\n  <% end %>\n</ul>\n<%= if true do %>\n  yes\n<% end %>\n  <%# comment %>  \n<p>end</p>\n\n",
    )
    .unwrap();
    let render = |extra: &[&str]| {
        let mut args = vec![
            "render",
            page.to_str().unwrap(),
            "-a",
            "title=T",
            "-a",
            r#"xs=["a","b"]"#,
        ];
        args.extend_from_slice(extra);
        let out = galleon(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // Both expected outputs are what Elixir 1.14's `EEx.eval_file(path, assigns, trim: t)`
    // returns. Trim drops the indentation around tags and the whitespace before the first one;
    // a tag alone on its line keeps one line break on each side (so `<%= if true do %>` after
    // `</ul>` still leaves one blank line, as in EEx).
    assert_eq!(
        render(&[]),
        "\n  T\n<ul>\n  \n    <li>a</li>\n  \n    <li>b</li>\n  \n</ul>\n\n  yes\n\n    \n<p>end</p>\n\n"
    );
    assert_eq!(
        render(&["--trim"]),
        "T\n<ul>\n\n    <li>a</li>\n\n    <li>b</li>\n\n</ul>\n\n  yes\n\n\n<p>end</p>\n\n"
    );
}

#[test]
fn layout_errors_name_the_file_or_the_location() {
    let dir = scratch("layout_errors");
    let page = dir.join("page.html.eex");
    std::fs::write(&page, "<p>hi</p>").unwrap();
    let page = page.to_str().unwrap();
    let run = |layout: &Path| {
        let out = galleon(&["render", page, "--layout", layout.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        String::from_utf8(out.stderr).unwrap()
    };

    let missing = dir.join("nope.html.eex");
    let stderr = run(&missing);
    assert!(
        stderr.starts_with(&format!(
            "error: {}: No such file or directory",
            missing.display()
        )) && stderr.lines().count() == 1,
        "{stderr}"
    );

    let bad = dir.join("bad.html.eex");
    std::fs::write(&bad, "<main>\n  <%= if @x do %>\n</main>\n").unwrap();
    assert_eq!(
        run(&bad),
        "error: bad.html.eex:2:3: `if` block is never closed with `<% end %>`\n  |\n2 |   <%= if @x do %>\n  |   ^^^^^^^^^^^^^^^\n"
    );

    // A render error in the layout is located in the layout.
    std::fs::write(
        &bad,
        "<main>\n<%= @inner_content %><%= @missing %>\n</main>\n",
    )
    .unwrap();
    assert_eq!(
        run(&bad),
        "error: bad.html.eex:2:26: unknown assign @missing\n  |\n2 | <%= @inner_content %><%= @missing %>\n  |                          ^^^^^^^^\n"
    );
}
