//! `Templates::builder()`: trim, registered functions, `value_copy_below`, the whole-body bound
//! (the workspace's one constant), `render_in_layout`, and load errors that print their caret
//! message in `Debug` as in `Display`.

use std::pin::Pin;

use axum::response::IntoResponse;
use bytes::Bytes;
use galleon_axum::{Assigns, Engine, Page, Templates, Value};
use galleon_template::Str;
use http_body::Body as _;

/// A whole page's frames, as hyper would take them.
fn frames(page: Page) -> Vec<Bytes> {
    let mut body = page.into_body();
    assert!(!body.is_streaming());
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut out = Vec::new();
    while let std::task::Poll::Ready(Some(frame)) = Pin::new(&mut body).poll_frame(&mut cx) {
        out.push(frame.unwrap().into_data().unwrap());
    }
    out
}

fn text(page: Page) -> String {
    String::from_utf8(frames(page).concat()).unwrap()
}

const LIST: &str = "<ul>\n  <%= for x <- @xs do %>\n    <li><%= x %></li>\n  <% end %>\n</ul>\n";

#[test]
fn trim_is_eex_trim_and_off_by_default() {
    let mut a = Assigns::new();
    a.insert("xs", vec!["a", "b"]);
    let off = Templates::builder()
        .from_source("l.html.eex", LIST)
        .unwrap();
    let on = Templates::builder()
        .trim(true)
        .from_source("l.html.eex", LIST)
        .unwrap();
    let engine = |trim| {
        let e = Engine::builder()
            .trim(trim)
            .from_source("l.html.eex", LIST)
            .unwrap();
        String::from_utf8(e.render("l.html.eex", &a).unwrap().to_vec()).unwrap()
    };
    let (off, on) = (
        text(off.render("l.html.eex", &a).unwrap()),
        text(on.render("l.html.eex", &a).unwrap()),
    );
    assert_eq!(off, engine(false));
    assert_eq!(on, engine(true));
    assert_eq!(
        off,
        "<ul>\n  \n    <li>a</li>\n  \n    <li>b</li>\n  \n</ul>\n"
    );
    // Phoenix's `.html.eex` output: the indentation before the tags goes, one line break is
    // left on each side of them.
    assert_eq!(on, "<ul>\n\n    <li>a</li>\n\n    <li>b</li>\n\n</ul>\n");
    // `Templates::load` keeps the engine's default: no trim.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("l.html.eex"), LIST).unwrap();
    let loaded = Templates::load(dir.path()).unwrap();
    assert_eq!(text(loaded.render("l.html.eex", &a).unwrap()), off);
    let loaded = Templates::builder().trim(true).load(dir.path()).unwrap();
    assert_eq!(text(loaded.render("l.html.eex", &a).unwrap()), on);
}

#[test]
fn a_registered_function_is_called_and_its_errors_are_located() {
    let t = Templates::builder()
        .function("shout", |s: String| s.to_uppercase())
        .function("cents", |c: i64| -> Result<String, String> {
            if c < 0 {
                Err(format!("{c} is negative"))
            } else {
                Ok(format!("${}.{:02}", c / 100, c % 100))
            }
        })
        .from_source(
            "f.html.eex",
            "<b><%= shout(@name) %></b> <%= cents(@price) %>",
        )
        .unwrap();
    let mut a = Assigns::new();
    a.insert("name", "tom & jerry");
    a.insert("price", 1999);
    assert_eq!(
        text(t.render("f.html.eex", &a).unwrap()),
        "<b>TOM &amp; JERRY</b> $19.99"
    );
    a.insert("price", -1);
    let err = t.render("f.html.eex", &a).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("f.html.eex:1:32: cents/1: -1 is negative"),
        "{err}"
    );
    assert_eq!(err.into_response().status(), 500);
}

#[test]
fn value_copy_below_decides_whether_a_long_value_is_referenced() {
    let value = Bytes::from(vec![b'v'; 8192]);
    let inside = |f: &Bytes| {
        let start = value.as_ptr() as usize;
        (start..start + value.len()).contains(&(f.as_ptr() as usize))
    };
    let source = "<p><%= @v %></p>";
    let page = |t: &Templates| {
        let v = Value::from(Str::from_utf8(value.clone()).unwrap());
        t.render_with("v.html.eex", |_| Some(v.clone())).unwrap()
    };
    // The default (4 KiB): the 8 KiB value is referenced, sent as a frame of its own bytes.
    let default = Templates::builder()
        .from_source("v.html.eex", source)
        .unwrap();
    assert_eq!(
        default.engine().value_copy_below(),
        galleon_template::DEFAULT_VALUE_COPY_BELOW
    );
    let sent = frames(page(&default));
    assert!(sent.iter().any(inside), "referenced");
    assert_eq!(sent.concat().len(), 8192 + 7);
    // Above its length: copied into the render's buffer.
    let copying = Templates::builder()
        .value_copy_below(16 * 1024)
        .from_source("v.html.eex", source)
        .unwrap();
    assert_eq!(copying.engine().value_copy_below(), 16 * 1024);
    let sent = frames(page(&copying));
    assert!(!sent.iter().any(inside), "copied");
    assert_eq!(sent.concat(), frames(page(&default)).concat());
    // The static-text threshold and the limits pass through as well.
    let t = Templates::builder()
        .copy_below(64)
        .limits(galleon_template::Limits {
            max_steps: 1000,
            ..Default::default()
        })
        .from_source("v.html.eex", source)
        .unwrap();
    assert_eq!(t.engine().copy_below(), 64);
    assert_eq!(t.engine().limits().max_steps, 1000);
}

#[test]
fn the_full_body_bound_is_the_workspaces_one_constant() {
    // One constant: galleon-template's, which galleon-site's `--full-body-max` default is too.
    assert_eq!(
        galleon_axum::DEFAULT_FULL_BODY_MAX,
        galleon_template::DEFAULT_FULL_BODY_MAX
    );
    assert_eq!(galleon_template::DEFAULT_FULL_BODY_MAX, 4 * 1024 * 1024);
    let kib = "k".repeat(1024);
    let source = format!("<%= for _ <- 1..@n do %>{kib}<% end %>");
    let n = |n: i64| move |name: &str| (name == "n").then_some(Value::Int(n));
    let t = Templates::builder().from_source("t", &source).unwrap();
    assert_eq!(t.full_body_max(), galleon_template::DEFAULT_FULL_BODY_MAX);
    let plain = Templates::new(Engine::from_source("t", &source).unwrap());
    assert_eq!(
        plain.full_body_max(),
        galleon_template::DEFAULT_FULL_BODY_MAX
    );
    // Exactly the bound: whole, with its length; one KiB more: streamed.
    let whole = t.render_with("t", n(4096)).unwrap();
    assert_eq!(whole.body().len(), Some(4 * 1024 * 1024));
    assert!(t.render_with("t", n(4097)).unwrap().body().is_streaming());
    // Set by the builder, or on the templates, as before.
    let small = Templates::builder()
        .full_body_max(2048)
        .chunk_bytes(1024)
        .from_source("t", &source)
        .unwrap();
    assert_eq!((small.full_body_max(), small.chunk_bytes()), (2048, 1024));
    assert_eq!(
        small.render_with("t", n(2)).unwrap().body().len(),
        Some(2048)
    );
    assert!(small.render_with("t", n(3)).unwrap().body().is_streaming());
    let plain = plain.with_full_body_max(2048);
    assert!(plain.render_with("t", n(3)).unwrap().body().is_streaming());
}

#[test]
fn render_in_layout_is_the_engines_in_one_call() {
    let sources = [
        (
            "layout.html.eex",
            "<title><%= @title %></title><main><%= @inner_content %></main>",
        ),
        (
            "index.html.eex",
            "<%= for i <- 1..@n do %><p><%= @title %> <%= i %></p><% end %>",
        ),
    ];
    let engine = Engine::from_sources(sources).unwrap();
    let t = Templates::new(engine.clone());
    let mut a = Assigns::new();
    a.insert("title", "Tom & Jerry");
    a.insert("n", 3);
    let want = engine
        .render_in_layout("index.html.eex", "layout.html.eex", &a)
        .unwrap()
        .to_vec();
    let page = t
        .render_in_layout("index.html.eex", "layout.html.eex", &a)
        .unwrap();
    assert_eq!(page.body().len(), Some(want.len() as u64));
    assert_eq!(frames(page).concat(), want);
    assert!(String::from_utf8(want).unwrap().starts_with(
        "<title>Tom &amp; Jerry</title><main><p>Tom &amp; Jerry 1</p><p>Tom &amp; Jerry 2</p>"
    ));
    // Past the whole-body bound the layout streams, as `render` does.
    let small = Templates::builder()
        .full_body_max(100)
        .from_sources(sources)
        .unwrap();
    a.insert("n", 1000);
    let page = small
        .render_in_layout("index.html.eex", "layout.html.eex", &a)
        .unwrap();
    assert!(page.body().is_streaming());
    // A missing layout or page is a render error, a 500 that names nothing.
    for (page, layout) in [
        ("index.html.eex", "nope.html.eex"),
        ("nope.html.eex", "layout.html.eex"),
    ] {
        let err = t.render_in_layout(page, layout, &a).unwrap_err();
        assert!(err.error().is_not_found(), "{err}");
        let r = err.into_response();
        assert_eq!(r.status(), 500);
    }
}

#[test]
fn a_load_error_prints_its_caret_message_in_debug_and_display() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("pages")).unwrap();
    std::fs::write(dir.path().join("pages/ok.html.eex"), "fine").unwrap();
    std::fs::write(
        dir.path().join("pages/bad.html.eex"),
        "<h1>Hi</h1>\n<p><%= @price * %></p>\n",
    )
    .unwrap();
    let caret = format!("\n  | {}^", " ".repeat(16));
    for err in [
        Templates::load(dir.path()).unwrap_err(),
        Templates::builder()
            .trim(true)
            .load(dir.path())
            .unwrap_err(),
        Templates::builder()
            .watch(dir.path(), std::time::Duration::from_secs(60))
            .unwrap_err(),
    ] {
        let display = err.to_string();
        assert!(
            display.starts_with("pages/bad.html.eex:2:"),
            "located: {display}"
        );
        assert!(display.contains("2 | <p><%= @price * %></p>"), "{display}");
        assert!(display.ends_with(&caret), "{display}");
        assert!(err.template_error().unwrap().is_parse());
        // `fn main() -> Result<(), Box<dyn Error>>` prints the error with `Debug`.
        let boxed: Box<dyn std::error::Error> = err.into();
        for debug in [format!("{boxed:?}"), format!("{boxed:#?}")] {
            assert_eq!(debug, display);
            for field in [
                "kind",
                "message",
                "location",
                "Error {",
                "Syntax",
                "line_text",
            ] {
                assert!(!debug.contains(field), "{field:?} in {debug}");
            }
        }
    }
    // A directory that is not there: the path, and the OS error as the source.
    let missing = Templates::load(dir.path().join("nope")).unwrap_err();
    assert!(missing.to_string().contains("nope"), "{missing}");
    assert_eq!(format!("{missing:?}"), missing.to_string());
    assert!(std::error::Error::source(&missing).is_some());
}
