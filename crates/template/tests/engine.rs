//! The public surface: loading, sharing of static text by address, coalescing of small pieces,
//! streaming in bounded chunks, layouts, limits.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use galleon_iolist::{IoList, SegmentKind};
use galleon_template::{Assigns, DEFAULT_VALUE_COPY_BELOW, Engine, Limits, RenderStream, Value};

fn site() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site")
}

fn iters(n: i64) -> Assigns {
    let mut a = Assigns::new();
    a.insert("iters", n);
    a
}

/// The text between `do %>` and `<% end %>` of a one-loop template: what each iteration outputs.
fn loop_body(source: &str) -> &str {
    let start = source.find("do %>").unwrap() + "do %>".len();
    let end = source.rfind("<% end %>").unwrap();
    &source[start..end]
}

fn collect(stream: RenderStream) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut sizes = Vec::new();
    for chunk in stream {
        let chunk = chunk.unwrap();
        sizes.push(chunk.len());
        out.extend_from_slice(&chunk.to_vec());
    }
    (out, sizes)
}

#[test]
fn engine_is_send_sync_and_streams_are_send_static() {
    fn send_sync<T: Send + Sync + 'static>() {}
    fn send_static<T: Send + 'static>() {}
    send_sync::<Engine>();
    send_sync::<Assigns>();
    send_sync::<Value>();
    send_static::<RenderStream>();
    send_sync::<galleon_template::Error>();
}

#[test]
fn load_names_every_template_by_relative_path() {
    let engine = Engine::load(site()).unwrap();
    let names: Vec<&str> = engine.names().collect();
    for n in [
        "layout.html.eex",
        "pages/doom.html.eex",
        "pages/blah.html.eex",
        "pages/blah-split.html.eex",
    ] {
        assert!(names.contains(&n), "{n} not in {names:?}");
    }
    let err = engine
        .render("pages/nope.html.eex", &Assigns::new())
        .unwrap_err();
    assert!(err.is_not_found());
}

#[test]
fn doom_output_is_the_block_repeated_iters_times() {
    let engine = Engine::load(site()).unwrap();
    let source = std::fs::read_to_string(site().join("pages/doom.html.eex")).unwrap();
    let body = loop_body(&source);
    assert_eq!(
        body.len(),
        301,
        "a newline and 15 lines of `DOOM DOOM DOOM DOOM`"
    );
    // `1..0` is `[1, 0]`, as in Elixir: the seed's template written as Phoenix runs it.
    for (n, times) in [(0, 2), (1, 1), (2, 2), (7, 7), (1000, 1000)] {
        let whole = engine.render("pages/doom.html.eex", &iters(n)).unwrap();
        assert_eq!(
            whole.to_vec(),
            body.repeat(times).as_bytes(),
            "render n={n}"
        );
        let (streamed, _) = collect(
            engine
                .stream("pages/doom.html.eex", iters(n), 4096)
                .unwrap(),
        );
        assert_eq!(streamed, body.repeat(times).as_bytes(), "stream n={n}");
    }
}

#[test]
fn blah_and_blah_split_render_the_same_bytes_from_the_same_program() {
    let engine = Engine::load(site()).unwrap();
    let a = engine.render("pages/blah.html.eex", &iters(3)).unwrap();
    let b = engine
        .render("pages/blah-split.html.eex", &iters(3))
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 3 * 410, "the seed's 410-byte block");
    // `<%= "" %>` is folded away at compile time: the split template's static text is the same
    // single 410-byte block.
    assert_eq!(
        engine.static_text("pages/blah.html.eex"),
        engine.static_text("pages/blah-split.html.eex")
    );
    // One reference to the loop's repeated body: a loop whose body is static text outputs all
    // its iterations at once.
    assert_eq!(b.segment_count(), 1);
}

#[test]
fn two_renders_hand_out_the_same_addresses() {
    let engine = Engine::load(site()).unwrap();
    let one = engine.render("pages/doom.html.eex", &iters(3)).unwrap();
    let two = engine.render("pages/doom.html.eex", &iters(3)).unwrap();
    let text = engine.static_text("pages/doom.html.eex").unwrap();
    let addrs = |l: &IoList| -> Vec<(SegmentKind, usize, usize)> {
        l.segments_with_kind()
            .map(|(k, s)| (k, s.as_ptr() as usize, s.len()))
            .collect()
    };
    let a = addrs(&one);
    assert_eq!(a, addrs(&two));
    // The three iterations are one 903-byte reference to the loop's repeated body, which is
    // kept at the end of the same static text.
    assert_eq!(a.len(), 1);
    // The pieces are offsets into one pin of the template's text (one reference count per
    // render, not one per piece).
    assert!(format!("{one:?}").contains("pins: 1"), "{one:?}");
    let base = text.as_ptr() as usize;
    for (kind, ptr, len) in a {
        assert_eq!(kind, SegmentKind::Shared, "referenced, not copied");
        assert_eq!(len, 903);
        assert!(ptr >= base && ptr + len <= base + text.len());
    }
    assert_eq!(one.to_vec(), text[..301].repeat(3));
    // And across engines cloned from the same load.
    let clone = engine.clone();
    let three = clone.render("pages/doom.html.eex", &iters(3)).unwrap();
    assert_eq!(
        addrs(&three),
        addrs(&one),
        "a cloned engine shares the programs"
    );
}

fn big_table(n: i64) -> Assigns {
    let rows: Vec<Value> = (0..n)
        .map(|_| Value::list((0..n).map(Value::Int)))
        .collect();
    let mut a = Assigns::new();
    a.insert("table", Value::list(rows));
    a
}

#[test]
fn a_100x100_table_is_a_handful_of_segments() {
    let engine = Engine::load(site()).unwrap();
    let page = engine
        .render("pages/big-table.html.eex", &big_table(100))
        .unwrap();
    // Every piece is short (`<td>`, digits, `</td>`), so it is all copied, into buffers of a few
    // kilobytes that become whole segments: a few dozen segments instead of 30,000 (one per piece).
    assert_eq!(page.len(), 17 + 100 * (10 + 100 * 9 + 10 + 2 * 90));
    assert!(page.segment_count() <= 60, "{}", page.segment_count());
    let text = engine.static_text("pages/big-table.html.eex").unwrap();
    let text = text.as_ptr() as usize..text.as_ptr() as usize + text.len();
    for seg in page.segments() {
        assert!(
            seg.len() >= 1024 || page.segment_count() == 1,
            "{}",
            seg.len()
        );
        assert!(
            !text.contains(&(seg.as_ptr() as usize)),
            "static text was referenced"
        );
    }
    let referencing = engine.clone().with_copy_below(0);
    let page2 = referencing
        .render("pages/big-table.html.eex", &big_table(100))
        .unwrap();
    assert_eq!(page, page2);
    assert!(page2.segment_count() > 20_000, "{}", page2.segment_count());
}

#[test]
fn long_assigns_are_referenced_short_ones_copied() {
    let engine = Engine::from_source("t", "<p><%= @long %></p><%= @short %>").unwrap();
    assert_eq!(engine.value_copy_below(), DEFAULT_VALUE_COPY_BELOW);
    let long = "x".repeat(DEFAULT_VALUE_COPY_BELOW);
    let mut a = Assigns::new();
    a.insert("long", long.as_str());
    a.insert("short", "hi");
    let Some(Value::Str(s)) = a.get("long").cloned() else {
        unreachable!()
    };
    let page = engine.render("t", &a).unwrap();
    let segs: Vec<(SegmentKind, &[u8])> = page.segments_with_kind().collect();
    assert_eq!(segs.len(), 3);
    assert_eq!(segs[1].0, SegmentKind::Shared);
    assert_eq!(
        segs[1].1.as_ptr(),
        s.bytes().as_ptr(),
        "the assign's own bytes"
    );
    assert_eq!(segs[2], (SegmentKind::Scratch, &b"</p>hi"[..]));
}

#[test]
fn values_under_the_value_threshold_are_copied_whatever_the_static_threshold() {
    // 1,000-byte values, escaped, unescaped and safe HTML: copied by default (one scratch run, no
    // count on the value), referenced under a lower value threshold; same bytes either way.
    let engine = Engine::from_source("t", "<p><%= @s %><%= raw(@s) %><%= @html %></p>")
        .unwrap()
        .with_copy_below(64);
    let long = "y".repeat(1000);
    let html_bytes = bytes::Bytes::from("z".repeat(1000));
    let mut a = Assigns::new();
    a.insert("s", long.as_str());
    a.insert("html", Value::safe(IoList::from(html_bytes.clone())));
    let Some(Value::Str(s)) = a.get("s").cloned() else {
        unreachable!()
    };
    let values = [s.bytes().as_ptr(), html_bytes.as_ptr()];
    let pointing_at_values = |page: &IoList| {
        page.segments()
            .filter(|seg| values.contains(&seg.as_ptr()))
            .count()
    };
    let copied = engine.render("t", &a).unwrap();
    assert_eq!(copied.segment_count(), 1, "one buffer");
    assert_eq!(pointing_at_values(&copied), 0);
    let referencing = engine.with_value_copy_below(256);
    let referenced = referencing.render("t", &a).unwrap();
    assert_eq!(
        pointing_at_values(&referenced),
        3,
        "the string twice and the safe HTML referenced"
    );
    assert_eq!(copied.to_vec(), referenced.to_vec());
}

#[test]
fn stream_chunks_are_about_the_size_asked_and_join_to_the_render() {
    let engine = Engine::load(site()).unwrap();
    let whole = engine
        .render("pages/big-table.html.eex", &big_table(100))
        .unwrap()
        .to_vec();
    for chunk in [1, 100, 4096, 1 << 20] {
        let (joined, sizes) = collect(
            engine
                .stream("pages/big-table.html.eex", big_table(100), chunk)
                .unwrap(),
        );
        assert_eq!(joined, whole, "chunk {chunk}");
        // A chunk ends after the op that reached the size; no op here outputs more than 20 bytes.
        for s in &sizes[..sizes.len() - 1] {
            assert!(*s >= chunk && *s < chunk + 20, "chunk {chunk}: {s}");
        }
    }
}

#[test]
fn a_hundred_million_iterations_start_streaming_at_once() {
    // The range is counted, not built: the first chunks come without a 100M-element list.
    let engine = Engine::load(site()).unwrap();
    let mut stream = engine
        .stream("pages/doom.html.eex", iters(100_000_000), 64 * 1024)
        .unwrap();
    let mut total = 0;
    for _ in 0..100 {
        let chunk = stream.next().unwrap().unwrap();
        assert!(chunk.len() >= 64 * 1024 && chunk.len() < 64 * 1024 + 301);
        // A chunk references the static text: about 218 segments, no scratch bytes.
        assert_eq!(chunk.scratch_len(), 0);
        total += chunk.len();
    }
    assert!(total >= 100 * 64 * 1024);
    // ...which `render` (one list in memory) refuses past its output limit.
    let small = engine.clone().with_limits(Limits {
        max_output: 1 << 20,
        ..Limits::default()
    });
    let err = small
        .render("pages/doom.html.eex", &iters(100_000_000))
        .unwrap_err();
    assert!(err.is_limit());
    assert_eq!(
        err.to_string(),
        "pages/doom.html.eex: output exceeds the limit of 1048576 bytes (stream it instead)"
    );
}

#[test]
fn the_step_limit_stops_a_loop_that_outputs_nothing() {
    let engine = Engine::from_source("spin", "<%= for i <- 1..1_000_000_000_000 do %><% end %>")
        .unwrap()
        .with_limits(Limits {
            max_steps: 10_000,
            ..Limits::default()
        });
    let err = engine.render("spin", &Assigns::new()).unwrap_err();
    assert!(err.is_limit());
    // Streaming refills the budget per chunk, but a chunk that never fills still stops.
    let mut s = engine.stream("spin", Assigns::new(), 1024).unwrap();
    assert!(s.next().unwrap().unwrap_err().is_limit());
    assert!(s.next().is_none(), "a stream ends after its error");
    // A stream that does output goes on past the per-chunk budget.
    let engine = Engine::from_source("t", "<%= for i <- 1..100_000 do %>x<% end %>")
        .unwrap()
        .with_limits(Limits {
            max_steps: 10_000,
            ..Limits::default()
        });
    assert!(engine.render("t", &Assigns::new()).unwrap_err().is_limit());
    let (out, _) = collect(engine.stream("t", Assigns::new(), 1000).unwrap());
    assert_eq!(out.len(), 100_000);
}

#[test]
fn a_partial_that_renders_itself_hits_the_depth_limit() {
    let engine = Engine::from_sources([
        ("a.eex", "<%= render(\"b.eex\", n: 1) %>"),
        ("b.eex", "x<%= render(\"b.eex\", n: @n) %>"),
    ])
    .unwrap();
    let err = engine.render("a.eex", &Assigns::new()).unwrap_err();
    assert!(err.is_limit(), "{err}");
    assert!(
        err.to_string()
            .starts_with("b.eex:1:6: partials nested more than 64 deep")
    );
    // The same in expression position (rendered eagerly) is bounded too.
    let engine = Engine::from_sources([(
        "c.eex",
        "<%= if true do %><%= raw(render(\"c.eex\")) %><% end %>",
    )])
    .unwrap();
    assert!(
        engine
            .render("c.eex", &Assigns::new())
            .unwrap_err()
            .is_limit()
    );
    // Doubling partials are stopped by the step budget long before 2^64 calls.
    let engine =
        Engine::from_sources([("d.eex", "<%= render(\"d.eex\") %><%= render(\"d.eex\") %>")])
            .unwrap()
            .with_limits(Limits {
                max_steps: 100_000,
                ..Limits::default()
            });
    assert!(
        engine
            .render("d.eex", &Assigns::new())
            .unwrap_err()
            .is_limit()
    );
}

#[test]
fn layout_wraps_the_page_by_reference() {
    let engine = Engine::load(site()).unwrap();
    let page = engine.render("pages/blah.html.eex", &iters(1)).unwrap();
    let full = engine
        .render_in_layout("pages/blah.html.eex", "layout.html.eex", &iters(1))
        .unwrap();
    let full = String::from_utf8(full.to_vec()).unwrap();
    let page = String::from_utf8(page.to_vec()).unwrap();
    assert!(full.starts_with("<!DOCTYPE html>"));
    assert!(full.contains(&format!("<body>\n{page}\n</body>")), "{full}");
    let err = engine
        .render_in_layout("pages/blah.html.eex", "nope.html.eex", &iters(1))
        .unwrap_err();
    assert!(err.is_not_found());
}

#[test]
fn load_reports_the_first_broken_template_located() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("load_broken");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("pages")).unwrap();
    std::fs::write(
        dir.join("pages/ok.html.eex"),
        "<%= render(\"part.html.eex\", x: 1) %>",
    )
    .unwrap();
    std::fs::write(dir.join("pages/part.html.eex"), "[<%= @x %>]").unwrap();
    std::fs::write(dir.join("notes.txt"), "<%= not a template").unwrap();
    let engine = Engine::load(&dir).unwrap();
    assert_eq!(
        engine
            .render("pages/ok.html.eex", &Assigns::new())
            .unwrap()
            .to_vec(),
        b"[1]"
    );
    let single = Engine::load_file(dir.join("pages/ok.html.eex")).unwrap();
    assert_eq!(
        single.names().collect::<Vec<_>>(),
        ["ok.html.eex", "part.html.eex"]
    );
    std::fs::write(dir.join("pages/zz.html.eex"), "\n\n  <%= if @x do %>").unwrap();
    let err = Engine::load(&dir).unwrap_err();
    assert!(err.is_parse());
    assert_eq!(
        (err.name(), err.line(), err.column()),
        (Some("pages/zz.html.eex"), Some(3), Some(3))
    );
    let err = Engine::load(dir.join("missing")).unwrap_err();
    assert!(err.is_io());
}

#[test]
fn assigns_from_rust_and_json_agree() {
    let engine = Engine::from_source("t", "<%= @a %>/<%= @b.c %>/<%= length(@d) %>").unwrap();
    let json =
        Assigns::from_json(serde_json::json!({"a": "x", "b": {"c": 1}, "d": [1, 2]})).unwrap();
    let mut rust = Assigns::new();
    rust.insert("a", "x");
    rust.insert("b", Value::map([("c", Value::Int(1))]));
    rust.insert("d", vec![1i64, 2]);
    assert_eq!(json, rust);
    let shared: Arc<Assigns> = Arc::new(rust);
    assert_eq!(engine.render("t", &shared).unwrap().to_vec(), b"x/1/2");
}

#[test]
fn render_with_asks_for_each_used_assign_once() {
    let e = Engine::from_source(
        "t",
        "<%= @a %>-<%= @b %>-<%= @a %><%= for x <- @items do %>[<%= x %>]<% end %>",
    )
    .unwrap();
    let asked = std::sync::Mutex::new(Vec::new());
    let lookup = |name: &str| {
        asked.lock().unwrap().push(name.to_owned());
        match name {
            "a" => Some(Value::Int(1)),
            "b" => Some(Value::str("<b>")),
            "items" => Some(Value::list([Value::Int(7), Value::Int(8)])),
            _ => None,
        }
    };
    let out = e.render_with("t", lookup).unwrap();
    assert_eq!(out.to_vec(), b"1-&lt;b&gt;-1[7][8]");
    let mut names = asked.lock().unwrap().clone();
    names.sort();
    assert_eq!(names, ["a", "b", "items"], "each name once, no others");
    // The same as the map, whole and streamed.
    let map: Assigns = [
        ("a", Value::Int(1)),
        ("b", Value::str("<b>")),
        ("items", Value::list([Value::Int(7), Value::Int(8)])),
        ("unused", Value::Nil),
    ]
    .into_iter()
    .collect();
    assert_eq!(e.render("t", &map).unwrap(), out);
    let (streamed, _) = collect(e.stream_with("t", lookup, 4).unwrap());
    assert_eq!(streamed, out.to_vec());
    // A name the lookup does not know is the usual located error.
    let err = e
        .render_with("t", |n| (n != "b").then(|| Value::Int(0)))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("t:1:15: unknown assign @b\n"),
        "{err}"
    );
}

#[test]
fn a_template_id_renders_what_its_name_renders_in_clones_only() {
    let e = Engine::load(site()).unwrap();
    let name = "pages/blah.html.eex";
    let id = e.id(name).unwrap();
    let by_name = e.render_with(name, |_| Some(Value::Int(3))).unwrap();
    let by_id = e.render_with(id, |_| Some(Value::Int(3))).unwrap();
    assert_eq!(by_id.to_vec(), by_name.to_vec());
    // A clone with other limits shares the templates, so the id holds there too, limits and all.
    let capped = e.clone().with_limits(Limits {
        max_output: 100,
        ..e.limits()
    });
    let err = capped.render_with(id, |_| Some(Value::Int(3))).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("pages/blah.html.eex: output exceeds the limit of 100 bytes"),
        "{err}"
    );
    let (streamed, _) = collect(e.stream_with(id, |_| Some(Value::Int(3)), 100).unwrap());
    assert_eq!(streamed, by_name.to_vec());
    // Another engine, even one loaded from the same files, refuses it instead of rendering
    // whatever template sits at that index there.
    let other = Engine::load(site()).unwrap();
    let err = other.render_with(id, |_| None).unwrap_err();
    assert_eq!(err.kind(), galleon_template::ErrorKind::NotFound);
    assert!(e.id("pages/nope.html.eex").is_err());
    // Nor does an engine made after the id's engine is gone, though its templates may sit where
    // the old ones were.
    let gone = {
        let short = Engine::from_source("t", "a").unwrap();
        short.id("t").unwrap()
    };
    for _ in 0..10 {
        let fresh = Engine::from_source("t", "b").unwrap();
        assert!(fresh.render_with(gone, |_| None).is_err());
    }
}
