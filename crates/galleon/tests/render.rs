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
