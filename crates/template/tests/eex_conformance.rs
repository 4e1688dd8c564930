//! Differential test against real EEx: every case of `tests/eex_corpus/*.cases` is rendered by
//! galleon and by Elixir's own EEx (with an engine that reproduces Phoenix.HTML's escaping,
//! `tests/eex_corpus/runner.exs`), and the bytes are compared.
//!
//! One `elixir` process renders the whole corpus (the VM takes about half a second to start).
//! When `elixir` is not on `PATH` the test says so loudly on stderr and passes: install Debian's
//! `elixir` package to run it (`.ci/run` does).
//!
//! A case file holds cases back to back:
//!
//! ```text
//! === name [ok|error] [trim]
//! @assigns {"json": "object"}        (optional)
//! template text, up to the next `=== ` line (its last newline is not part of it)
//! --- partial form.html.eex          (optional, repeated: a partial the template may render)
//! the partial's text, up to the next `--- partial ` or `=== ` line (last newline dropped)
//! ```
//!
//! A case's template is `<name>.html.eex`; its partials sit beside it, under the names given,
//! compiled with the same options. Elixir renders `render(name, assigns)` as a Phoenix view does:
//! the partial named `name` (or `name <> ".eex"`), compiled with the same engine, rendered with
//! `Map.new(assigns)` as its assigns, the result safe iodata (`runner.exs`).
//!
//! `ok`/`error` is what the case expects of EEx; the test checks EEx agrees (so the corpus
//! stays honest), then that galleon produced the same bytes, or also failed, with its error
//! located (`name:line:col`). Mismatches must be listed in [`KNOWN_DIFFERENCES`], each
//! documented in the crate docs ("Differences from EEx"), and at least 95% of the cases must be
//! identical. Every case without the `trim` flag is rendered a second time with `trim: true` by
//! both engines and held to the same rules (the known differences apply to both renderings).
//! `GALLEON_EEX_VERBOSE=1` prints every case's outputs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use galleon_template::{Assigns, Engine};

/// Cases where galleon deliberately differs from EEx, with the reason (each also documented in
/// the crate docs under "Differences from EEx").
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    (
        "regex_backreference",
        "regexes match in linear time (the `regex` crate): a backreference or look-around is a located error, where PCRE supports them",
    ),
    (
        "group_by_integer_keys",
        "maps have string keys: `Enum.group_by`/`frequencies` keys must be strings or atoms",
    ),
    (
        "int_bigger_than_i64",
        "integers are 64-bit: a literal past i64 is a located error, not a big integer",
    ),
    (
        "int_overflow_is_error",
        "integers are 64-bit: overflow is a located error, not a big integer",
    ),
    (
        "string_length_graphemes",
        "String.length counts code points, not grapheme clusters",
    ),
    (
        "string_graphemes_combining",
        "String.graphemes splits into code points, not grapheme clusters",
    ),
    (
        "compare_across_types",
        "comparing values of different types (1 < \"a\") is an error, not Erlang's term order",
    ),
    (
        "exec_block_errors_skipped",
        "a block opened with `<%` is not evaluated at all (EEx evaluates it and drops the output)",
    ),
    (
        "string_with_close_tag",
        "`%>` inside a string literal does not close the tag (EEx ends the tag there: an error)",
    ),
    (
        "index_list",
        "`list[i]` reads element i (Elixir's Access rejects integer keys: use Enum.at)",
    ),
    (
        "empty_tag",
        "an empty tag is an error (EEx outputs nothing)",
    ),
    (
        "charlist",
        "single-quoted charlists are an error (EEx outputs them as bytes)",
    ),
    (
        "inspect_string_keyed_map",
        "maps have string keys: inspect prints every map with atom keys (%{a: 1}), as Phoenix's assigns have",
    ),
    (
        "assigns_holds_names_read",
        "`assigns` as a value holds the assigns the template and its partials read, not every one given",
    ),
    (
        "kernel_length_string",
        "`length` also counts a string's code points and a map's entries (Elixir: lists only)",
    ),
];

/// The share of cases that must be byte-identical.
const MIN_IDENTICAL: f64 = 0.95;

#[derive(Debug, Clone)]
struct Case {
    file: String,
    name: String,
    expect_ok: bool,
    trim: bool,
    assigns: serde_json::Value,
    template: String,
    /// Partials the template may render: `(name, source)`.
    partials: Vec<(String, String)>,
}

/// The line that starts a partial of a case.
const PARTIAL: &str = "--- partial ";

/// Text up to the next case or partial, without its last newline.
fn section<'t>(lines: &mut std::iter::Peekable<impl Iterator<Item = &'t str>>) -> String {
    let mut text = String::new();
    while lines
        .peek()
        .is_some_and(|l| !l.starts_with("=== ") && !l.starts_with(PARTIAL))
    {
        text.push_str(lines.next().unwrap_or_default());
    }
    if text.ends_with('\n') {
        text.pop();
    }
    text
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/eex_corpus")
}

fn parse_cases(file: &str, text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut lines = text.split_inclusive('\n').peekable();
    // Anything before the first case is a comment.
    while lines.peek().is_some_and(|l| !l.starts_with("=== ")) {
        lines.next();
    }
    while let Some(header) = lines.next() {
        let mut words = header.trim_start_matches("=== ").split_whitespace();
        let name = words.next().expect("case name").to_owned();
        let mut expect_ok = true;
        let mut trim = false;
        for w in words {
            match w {
                "ok" => expect_ok = true,
                "error" => expect_ok = false,
                "trim" => trim = true,
                other => panic!("{file}: case {name}: unknown flag {other:?}"),
            }
        }
        let mut assigns = serde_json::json!({});
        if let Some(l) = lines.peek()
            && let Some(json) = l.strip_prefix("@assigns ")
        {
            assigns = serde_json::from_str(json)
                .unwrap_or_else(|e| panic!("{file}: case {name}: bad assigns: {e}"));
            lines.next();
        }
        let template = section(&mut lines);
        let mut partials = Vec::new();
        while let Some(l) = lines.next_if(|l| l.starts_with(PARTIAL)) {
            let partial = l[PARTIAL.len()..].trim().to_owned();
            assert!(
                !partial.is_empty(),
                "{file}: case {name}: a partial needs a name"
            );
            partials.push((partial, section(&mut lines)));
        }
        cases.push(Case {
            file: file.to_owned(),
            name,
            expect_ok,
            trim,
            assigns,
            template,
            partials,
        });
    }
    cases
}

/// Cases built in code: sizes no one writes by hand.
fn generated_cases() -> Vec<Case> {
    let table: Vec<Vec<i64>> = (0..100)
        .map(|r| (0..100).map(|c| r * 100 + c).collect())
        .collect();
    let names: Vec<String> = (0..2000).map(|i| format!("<n{i}> & 'q' \"é\"")).collect();
    let case = |name: &str, assigns: serde_json::Value, template: &str| Case {
        file: "generated".to_owned(),
        name: name.to_owned(),
        expect_ok: true,
        trim: false,
        assigns,
        template: template.to_owned(),
        partials: Vec::new(),
    };
    vec![
        case(
            "gen_big_table_100x100",
            serde_json::json!({ "table": table }),
            "<table>\n<%= for row <- @table do %><tr><%= for col <- row do %><td><%= col %></td><% end %></tr>\n<% end %></table>",
        ),
        case(
            "gen_2000_escaped_strings",
            serde_json::json!({ "names": names }),
            "<%= for {n, i} <- Enum.with_index(@names) do %><li id=\"<%= i %>\"><%= n %></li><% end %>",
        ),
        case(
            "gen_range_50000",
            serde_json::json!({ "n": 50000 }),
            "<%= for i <- 1..@n do %><%= rem(i, 7) %>,<% end %>",
        ),
        case(
            "gen_static_loop_20000",
            serde_json::json!({ "n": 20000 }),
            "<%= for _ <- 1..@n do %><p class=\"static\">the same text every time</p>\n<% end %>",
        ),
    ]
}

fn load_corpus() -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cases"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        cases.extend(parse_cases(&name, &std::fs::read_to_string(&f).unwrap()));
    }
    cases.extend(generated_cases());
    let mut seen = BTreeMap::new();
    for c in &cases {
        if let Some(other) = seen.insert(c.name.clone(), c.file.clone()) {
            panic!("case {} is defined in {} and {}", c.name, other, c.file);
        }
    }
    cases
}

/// A JSON value as an Elixir literal: objects become maps with atom keys (what `@user.name`
/// reads in a Phoenix app), floats keep every digit.
fn elixir_term(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value as J;
    match v {
        J::Null => out.push_str("nil"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                write!(out, "{i}").unwrap();
            } else if let Some(u) = n.as_u64() {
                write!(out, "{u}").unwrap();
            } else {
                let s = format!("{:e}", n.as_f64().unwrap());
                let (mantissa, exp) = s.split_once('e').unwrap();
                let dot = if mantissa.contains('.') { "" } else { ".0" };
                write!(out, "{mantissa}{dot}e{exp}").unwrap();
            }
        }
        J::String(s) => elixir_string(s, out),
        J::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                elixir_term(item, out);
            }
            out.push(']');
        }
        J::Object(map) => {
            out.push_str("%{");
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push(':');
                elixir_string(k, out);
                out.push_str(" => ");
                elixir_term(item, out);
            }
            out.push('}');
        }
    }
}

fn elixir_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => write!(out, "\\u{{{:x}}}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn field(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes.len().to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(bytes);
}

/// What EEx (or galleon) did with a case.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Ok(Vec<u8>),
    Error(String),
}

/// Renders every case with real EEx in one `elixir` process; `None` when there is no `elixir`.
fn run_elixir(cases: &[Case]) -> Option<Vec<Outcome>> {
    let probe = Command::new("elixir").arg("--version").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let mut input = Vec::new();
    for c in cases {
        field(&mut input, c.name.as_bytes());
        field(&mut input, if c.trim { b"trim" } else { b"" });
        let mut term = String::new();
        elixir_term(&c.assigns, &mut term);
        field(&mut input, term.as_bytes());
        field(&mut input, c.template.as_bytes());
        let mut partials = Vec::new();
        for (name, source) in &c.partials {
            field(&mut partials, name.as_bytes());
            field(&mut partials, source.as_bytes());
        }
        field(&mut input, &partials);
    }
    let tmp = std::env::temp_dir();
    let path = tmp.join(format!("galleon-eex-cases-{}.bin", std::process::id()));
    let results = tmp.join(format!("galleon-eex-results-{}.bin", std::process::id()));
    std::fs::write(&path, &input).unwrap();
    let output = Command::new("elixir")
        .arg(corpus_dir().join("runner.exs"))
        .arg(&path)
        .arg(&results)
        .output()
        .expect("run elixir");
    let _ = std::fs::remove_file(&path);
    assert!(
        output.status.success(),
        "elixir failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = std::fs::read(&results).expect("elixir's results");
    let _ = std::fs::remove_file(&results);
    let mut rest = &stdout[..];
    let mut outcomes = Vec::new();
    while !rest.is_empty() {
        let colon = rest.iter().position(|&b| b == b':').unwrap();
        let status = std::str::from_utf8(&rest[..colon]).unwrap().to_owned();
        rest = &rest[colon + 1..];
        let colon = rest.iter().position(|&b| b == b':').unwrap();
        let len: usize = std::str::from_utf8(&rest[..colon])
            .unwrap()
            .parse()
            .unwrap();
        let bytes = rest[colon + 1..colon + 1 + len].to_vec();
        rest = &rest[colon + 1 + len..];
        outcomes.push(match status.as_str() {
            "ok" => Outcome::Ok(bytes),
            _ => Outcome::Error(String::from_utf8_lossy(&bytes).into_owned()),
        });
    }
    assert_eq!(outcomes.len(), cases.len(), "elixir answered every case");
    Some(outcomes)
}

/// Renders a case with galleon. An error must be located (`name:line:col`).
fn run_galleon(c: &Case) -> Outcome {
    let name = format!("{}.html.eex", c.name);
    let result = Engine::builder()
        .trim(c.trim)
        .from_sources(
            std::iter::once((name.as_str(), c.template.as_str()))
                .chain(c.partials.iter().map(|(n, s)| (n.as_str(), s.as_str()))),
        )
        .and_then(|e| {
            let assigns = Assigns::from_json(c.assigns.clone())?;
            e.render(&name, &assigns)
        });
    match result {
        Ok(list) => Outcome::Ok(list.to_vec()),
        Err(e) => {
            let located = e.line().is_some() && e.column().is_some();
            Outcome::Error(if located {
                e.to_string()
            } else {
                format!("UNLOCATED: {e}")
            })
        }
    }
}

fn show(o: &Outcome) -> String {
    match o {
        Outcome::Ok(b) => {
            let s = String::from_utf8_lossy(b);
            if s.chars().count() > 300 {
                let head: String = s.chars().take(300).collect();
                format!("ok ({} bytes) {head:?}...", b.len())
            } else {
                format!("ok {s:?}")
            }
        }
        Outcome::Error(e) => format!("error: {}", e.lines().next().unwrap_or_default()),
    }
}

/// How one rendering of a case compared: the case, which mode, and both outcomes.
struct Compared<'a> {
    case: &'a Case,
    /// The case without a `trim` flag, rendered again with `trim: true`.
    retrimmed: bool,
    ours: &'a Outcome,
    theirs: &'a Outcome,
}

#[test]
fn eex_corpus_matches_real_eex() {
    let cases = load_corpus();
    assert!(cases.len() >= 150, "corpus has {} cases", cases.len());
    // Every case without the `trim` flag is also rendered with `trim: true`, by both engines,
    // so each page is checked both ways.
    let retrimmed: Vec<Case> = cases
        .iter()
        .filter(|c| !c.trim)
        .map(|c| Case {
            trim: true,
            ..c.clone()
        })
        .collect();
    let all: Vec<Case> = cases.iter().chain(&retrimmed).cloned().collect();
    // galleon runs on every case, with or without elixir: no case may panic.
    let ours: Vec<Outcome> = all.iter().map(run_galleon).collect();
    let Some(theirs) = run_elixir(&all) else {
        eprintln!();
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        eprintln!("!! SKIPPED: the EEx conformance corpus was NOT compared with real Elixir:   !!");
        eprintln!(
            "!! `elixir` is not on PATH. Install it (Debian: apt-get install elixir).     !!"
        );
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        return;
    };
    let verbose = std::env::var("GALLEON_EEX_VERBOSE").is_ok_and(|v| v == "1");
    let mut report = String::new();
    let mut corpus_errors = Vec::new();
    let (mut identical, mut identical_retrimmed) = (0usize, 0usize);
    let mut mismatched = Vec::new();
    for (i, ((c, ours), theirs)) in all.iter().zip(&ours).zip(&theirs).enumerate() {
        let retrimmed = i >= cases.len();
        // The expectation is written for the case as flagged; trimming does not change it.
        if !retrimmed && matches!(theirs, Outcome::Ok(_)) != c.expect_ok {
            corpus_errors.push(format!(
                "{} ({}): the corpus expects {}, EEx gave {}",
                c.name,
                c.file,
                if c.expect_ok { "ok" } else { "error" },
                show(theirs)
            ));
        }
        let same = match (ours, theirs) {
            (Outcome::Ok(a), Outcome::Ok(b)) => a == b,
            (Outcome::Error(e), Outcome::Error(_)) => !e.starts_with("UNLOCATED"),
            _ => false,
        };
        let mode = if retrimmed { " (retrimmed)" } else { "" };
        if verbose {
            writeln!(
                report,
                "{} {}{mode}\n  eex:     {}\n  galleon: {}",
                if same { "same" } else { "DIFF" },
                c.name,
                show(theirs),
                show(ours)
            )
            .unwrap();
        }
        match (same, retrimmed) {
            (true, false) => identical += 1,
            (true, true) => identical_retrimmed += 1,
            (false, _) => mismatched.push(Compared {
                case: c,
                retrimmed,
                ours,
                theirs,
            }),
        }
    }
    let share = identical as f64 / cases.len() as f64;
    let share_retrimmed = identical_retrimmed as f64 / retrimmed.len().max(1) as f64;
    eprintln!(
        "EEx conformance: {identical}/{} cases identical ({:.1}%); \
         also with trim: true: {identical_retrimmed}/{} identical ({:.1}%)",
        cases.len(),
        share * 100.0,
        retrimmed.len(),
        share_retrimmed * 100.0
    );
    if verbose {
        eprintln!("{report}");
    }
    let mut unexpected = Vec::new();
    for m in &mismatched {
        let c = m.case;
        let known = KNOWN_DIFFERENCES.iter().find(|(n, _)| *n == c.name);
        let mode = if m.retrimmed { " retrimmed" } else { "" };
        eprintln!(
            "  {} {}{mode} ({}):\n    eex:     {}\n    galleon: {}",
            if known.is_some() {
                "known"
            } else {
                "UNEXPECTED"
            },
            c.name,
            known.map_or(c.file.as_str(), |k| k.1),
            show(m.theirs),
            show(m.ours)
        );
        if known.is_none() {
            unexpected.push(format!("{}{mode}", c.name));
        }
    }
    for (name, _) in KNOWN_DIFFERENCES {
        assert!(
            cases.iter().any(|c| c.name == *name),
            "known difference {name} has no case"
        );
    }
    assert!(corpus_errors.is_empty(), "{}", corpus_errors.join("\n"));
    assert!(
        unexpected.is_empty(),
        "cases differing from EEx that are not known differences: {unexpected:?}"
    );
    assert!(
        share >= MIN_IDENTICAL && share_retrimmed >= MIN_IDENTICAL,
        "only {:.1}% identical ({:.1}% with trim: true)",
        share * 100.0,
        share_retrimmed * 100.0
    );
}

#[test]
fn corpus_parses_and_galleon_never_panics() {
    let cases = load_corpus();
    for c in &cases {
        let _ = run_galleon(c);
    }
    let mut term = String::new();
    elixir_term(
        &serde_json::json!({"a": [1, 2.5, 1e300, "x\"#{y}\n"], "b": null}),
        &mut term,
    );
    assert_eq!(
        term,
        r#"%{:"a" => [1, 2.5e0, 1.0e300, "x\"\#{y}\u{a}"], :"b" => nil}"#
    );
}

/// Every case of the corpus rendered live (`EngineBuilder::live`) gives the page, or the
/// error, the ordinary render gives: the marks a live compile adds change nothing but the
/// split into statics and dynamics.
#[test]
fn every_corpus_case_renders_live_as_it_renders_whole() {
    use galleon_template::Changed;
    let cases = load_corpus();
    let mut compared = 0;
    for c in &cases {
        let name = format!("{}.html.eex", c.name);
        let sources = || {
            std::iter::once((name.clone(), c.template.clone())).chain(c.partials.iter().cloned())
        };
        let Ok(live) = Engine::builder()
            .trim(c.trim)
            .live(true)
            .from_sources(sources())
        else {
            continue;
        };
        let Ok(assigns) = Assigns::from_json(c.assigns.clone()) else {
            continue;
        };
        let t = live.live(&name).unwrap();
        let got = t
            .render(|n| assigns.get(n).cloned(), Changed::All, None)
            .map(|r| t.to_html(&r).into_bytes());
        let expected = match run_galleon(c) {
            Outcome::Ok(page) => Ok(page),
            Outcome::Error(e) => Err(e),
        };
        match (expected, got) {
            // Invalid UTF-8 output is shown lossily in a live page (it crosses as JSON).
            (Ok(page), Ok(html)) => {
                assert_eq!(
                    String::from_utf8_lossy(&page),
                    String::from_utf8_lossy(&html),
                    "{}",
                    c.name
                )
            }
            (Err(a), Err(b)) => assert_eq!(a, b.to_string(), "{}", c.name),
            (a, b) => panic!("{}: whole {a:?}, live {b:?}", c.name),
        }
        compared += 1;
    }
    assert!(compared > 500, "only {compared} cases compared");
}
