//! Every template shared by the runtime and compiled paths, rendered both ways with the same
//! data and compared byte for byte; whole and streamed in chunks of several sizes.

use galleon_template::compiled::{Raw, Template};
use galleon_template::{Assigns, Engine, Value};
use galleon_template_derive::Template;
use serde::{Deserialize, Serialize};

/// The compiled render, checked against the streamed forms: chunks of `n` bytes concatenate
/// to the same page, and `render_or_stream` too.
fn compiled<T: Template + Clone>(t: &T) -> Vec<u8> {
    let whole = t.render().unwrap().to_vec();
    for n in [1, 7, 100, 4096] {
        let mut streamed = Vec::new();
        for chunk in t.clone().stream(n) {
            streamed.extend_from_slice(&chunk.unwrap().to_vec());
        }
        assert_eq!(
            String::from_utf8_lossy(&streamed),
            String::from_utf8_lossy(&whole),
            "streamed in chunks of {n}"
        );
    }
    match t.clone().render_or_stream(50, 16).unwrap() {
        galleon_template::compiled::Rendered::Whole(w) => {
            assert!(whole.len() <= 50 + 4096, "whole means short");
            assert_eq!(w.to_vec(), whole);
        }
        galleon_template::compiled::Rendered::Streaming { first, rest } => {
            let mut page = first.to_vec();
            for chunk in rest {
                page.extend_from_slice(&chunk.unwrap().to_vec());
            }
            assert_eq!(page, whole);
        }
    }
    whole
}

fn site() -> Engine {
    Engine::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../../site")).unwrap()
}

fn site_data(page: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../site/data/{page}.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn same(compiled_bytes: Vec<u8>, runtime: Vec<u8>) {
    assert_eq!(
        String::from_utf8_lossy(&compiled_bytes),
        String::from_utf8_lossy(&runtime)
    );
}

#[derive(Template, Serialize, Clone)]
#[template(path = "../../site/pages/blah.html.eex")]
struct Blah {
    iters: i64,
}

#[derive(Template, Serialize, Clone)]
#[template(path = "../../site/pages/blah-split.html.eex")]
struct BlahSplit {
    iters: i64,
}

#[derive(Template, Serialize, Clone)]
#[template(path = "../../site/pages/doom.html.eex")]
struct Doom {
    iters: i64,
}

#[derive(Template, Serialize, Deserialize, Clone)]
#[template(path = "../../site/pages/big-table.html.eex")]
struct SiteBigTable {
    table: Vec<Vec<i64>>,
}

#[derive(Serialize, Deserialize, Clone)]
struct Team {
    name: String,
    score: i64,
}

#[derive(Template, Serialize, Deserialize, Clone)]
#[template(path = "../../site/pages/teams.html.eex")]
struct SiteTeams {
    year: i64,
    teams: Vec<Team>,
}

#[derive(Template, Serialize, Clone)]
#[template(path = "../../site/pages/static-strings.html.eex")]
struct StaticStrings {
    strings: Vec<String>,
}

#[derive(Template, Clone)]
#[template(path = "../../site/pages/dynamic-strings.html.eex")]
struct DynamicStrings {
    strings: Vec<Raw<String>>,
}

#[derive(Template, Clone)]
#[template(path = "../../site/layout.html.eex")]
struct Layout {
    inner_content: galleon_template::compiled::IoList,
}

#[test]
fn site_pages_render_the_same_bytes() {
    let engine = site();
    for iters in [0, 1, 3, 1000] {
        let mut a = Assigns::new();
        a.insert("iters", iters);
        let run = |page: &str| {
            engine
                .render(&format!("pages/{page}.html.eex"), &a)
                .unwrap()
                .to_vec()
        };
        same(compiled(&Blah { iters }), run("blah"));
        same(compiled(&BlahSplit { iters }), run("blah-split"));
        same(compiled(&Doom { iters }), run("doom"));
    }

    let json = site_data("big-table");
    let t: SiteBigTable = serde_json::from_str(&json).unwrap();
    let a = Assigns::from_json(serde_json::from_str(&json).unwrap()).unwrap();
    same(
        compiled(&t),
        engine
            .render("pages/big-table.html.eex", &a)
            .unwrap()
            .to_vec(),
    );

    let json = site_data("teams");
    let t: SiteTeams = serde_json::from_str(&json).unwrap();
    let a = Assigns::from_json(serde_json::from_str(&json).unwrap()).unwrap();
    same(
        compiled(&t),
        engine.render("pages/teams.html.eex", &a).unwrap().to_vec(),
    );

    let strings: Vec<String> = ["ABC", "Tom & Jerry", "<x>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut a = Assigns::new();
    a.insert("strings", strings.clone());
    same(
        compiled(&StaticStrings {
            strings: strings.clone(),
        }),
        engine
            .render("pages/static-strings.html.eex", &a)
            .unwrap()
            .to_vec(),
    );
    // The site passes its pool strings as safe HTML: not escaped.
    let mut a = Assigns::new();
    a.insert(
        "strings",
        Value::list(
            strings
                .iter()
                .map(|s| Value::safe(galleon_template::compiled::IoList::from(s.clone()))),
        ),
    );
    same(
        compiled(&DynamicStrings {
            strings: strings.iter().cloned().map(Raw).collect(),
        }),
        engine
            .render("pages/dynamic-strings.html.eex", &a)
            .unwrap()
            .to_vec(),
    );

    let mut inner = galleon_template::compiled::IoList::new();
    inner.push_static(b"<h1>x & y</h1>");
    let mut a = Assigns::new();
    a.insert("inner_content", Value::safe(inner.clone()));
    same(
        compiled(&Layout {
            inner_content: inner,
        }),
        engine.render("layout.html.eex", &a).unwrap().to_vec(),
    );
}

/// The benchmarks' templates (crates/lab/benches/common/mod.rs).
const BENCH_BIG_TABLE: &str = include_str!("../../lab/benches/templates/big-table.html.eex");

const BENCH_TEAMS: &str = include_str!("../../lab/benches/templates/teams.html.eex");

#[derive(Template, Serialize, Clone)]
#[template(path = "../lab/benches/templates/big-table.html.eex")]
struct BenchBigTable {
    table: Vec<Vec<usize>>,
}

#[derive(Template, Serialize, Clone)]
#[template(path = "../lab/benches/templates/teams.html.eex")]
struct BenchTeams {
    year: u16,
    teams: Vec<Team>,
}

/// Renders `source` with the runtime engine, the assigns from `t` through serde.
fn runtime<T: Serialize>(source: &str, t: &T) -> Vec<u8> {
    let engine = Engine::from_source("t", source).unwrap();
    engine
        .render("t", &Assigns::from_serialize(t).unwrap())
        .unwrap()
        .to_vec()
}

#[test]
fn bench_templates_render_the_same_bytes() {
    let t = BenchBigTable {
        table: (0..100).map(|_| (0..100).collect()).collect(),
    };
    same(compiled(&t), runtime(BENCH_BIG_TABLE, &t));
    let t = BenchTeams {
        year: 2015,
        teams: [("Jiangsu", 43), ("Beijing", 27), ("<G>", 22)]
            .iter()
            .map(|&(n, s)| Team {
                name: n.into(),
                score: s,
            })
            .collect(),
    };
    same(compiled(&t), runtime(BENCH_TEAMS, &t));
}
