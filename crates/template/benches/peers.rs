//! galleon against tera 2, minijinja and sailfish, in the same groups, on the
//! template-benchmarks-rs "big-table" (100x100 integers) and "teams" templates: render to bytes,
//! and render-and-send of the big table over loopback TCP to a reader that discards.
//!
//! `cargo bench -p galleon-template --features peers --bench peers`. At the end it prints each
//! peer's time as a multiple of galleon's, from criterion's own estimates.

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};

use criterion::Criterion;
use galleon_iolist::{IoWriter, WritePolicy};
use sailfish::TemplateSimple;
use serde::Serialize;

mod common;

#[derive(TemplateSimple)]
#[template(source = "
<table>
<% for row in table { %>
<tr><% for col in row { %><td><%= *col %></td><% } %></tr>
<% } %>
</table>
")]
struct BigTable<'a> {
    table: &'a [Vec<usize>],
}

#[derive(TemplateSimple)]
#[template(source = r#"
<html>
  <head>
    <title><%= year %></title>
  </head>
  <body>
    <h1>CSL <%= year %></h1>
    <ul>
    <% for (i, team) in teams.iter().enumerate() { %>
      <li class="<% if i == 0 { %>champion<% } %>">
      <b><%= team.name %></b>: <%= team.score %>
      </li>
    <% } %>
    </ul>
  </body>
</html>
"#)]
struct Teams<'a> {
    year: i64,
    teams: &'a [Team],
}

#[derive(Serialize)]
struct Team {
    name: String,
    score: i64,
}

fn teams() -> Vec<Team> {
    common::TEAMS
        .iter()
        .map(|(n, s)| Team {
            name: (*n).to_owned(),
            score: *s,
        })
        .collect()
}

struct Peers {
    galleon: galleon_template::Engine,
    tera: tera::Tera,
    minijinja: minijinja::Environment<'static>,
}

fn peers() -> Peers {
    let mut tera = tera::Tera::default();
    tera.add_raw_templates(vec![
        ("big-table.html", common::BIG_TABLE_JINJA),
        ("teams.html", common::TEAMS_JINJA),
    ])
    .unwrap();
    let mut minijinja = minijinja::Environment::new();
    // Jinja drops a template's last newline by default; tera and galleon keep it.
    minijinja.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()
            .unwrap(),
    );
    minijinja
        .add_template("big-table.html", common::BIG_TABLE_JINJA)
        .unwrap();
    minijinja
        .add_template("teams.html", common::TEAMS_JINJA)
        .unwrap();
    Peers {
        galleon: common::engine(),
        tera,
        minijinja,
    }
}

const ENGINES: [&str; 4] = ["galleon", "tera", "minijinja", "sailfish"];

fn big_table(c: &mut Criterion, p: &Peers) {
    let table = common::table();
    let assigns = common::table_assigns();
    let mut tctx = tera::Context::new();
    tctx.insert("table", &table);
    let mctx = minijinja::context! { table => minijinja::value::Serde(&table) };
    let tmpl = p.minijinja.get_template("big-table.html").unwrap();

    let render: [Box<dyn Fn() -> Vec<u8> + '_>; 4] = [
        Box::new(|| {
            p.galleon
                .render("big-table.html.eex", &assigns)
                .unwrap()
                .to_vec()
        }),
        Box::new(|| p.tera.render("big-table.html", &tctx).unwrap().into_bytes()),
        Box::new(|| tmpl.render(&mctx).unwrap().into_bytes()),
        Box::new(|| {
            BigTable { table: &table }
                .render_once()
                .unwrap()
                .into_bytes()
        }),
    ];
    same_output("big-table", &render);
    let mut g = c.benchmark_group("big-table");
    for (name, f) in ENGINES.iter().zip(&render) {
        g.bench_function(*name, |b| b.iter(|| black_box(f())));
    }
    g.finish();

    // Render and send: galleon hands its list to the vectored writer; the others write their
    // string.
    let mut g = c.benchmark_group("send-big-table");
    let mut sock = common::loopback_sink();
    let mut writer = IoWriter::new(WritePolicy::default());
    g.bench_function("galleon", |b| {
        b.iter(|| {
            let page = p.galleon.render("big-table.html.eex", &assigns).unwrap();
            writer.write_all(&mut sock, &page).unwrap();
        })
    });
    g.bench_function("tera", |b| {
        b.iter(|| {
            let page = p.tera.render("big-table.html", &tctx).unwrap();
            sock.write_all(page.as_bytes()).unwrap();
        })
    });
    g.bench_function("minijinja", |b| {
        b.iter(|| {
            let page = tmpl.render(&mctx).unwrap();
            sock.write_all(page.as_bytes()).unwrap();
        })
    });
    g.bench_function("sailfish", |b| {
        b.iter(|| {
            let page = BigTable { table: &table }.render_once().unwrap();
            sock.write_all(page.as_bytes()).unwrap();
        })
    });
    g.finish();
}

fn teams_group(c: &mut Criterion, p: &Peers) {
    let teams = teams();
    let assigns = common::teams_assigns();
    let mut tctx = tera::Context::new();
    tctx.insert("year", &2015);
    tctx.insert("teams", &teams);
    let mctx = minijinja::context! { year => 2015, teams => minijinja::value::Serde(&teams) };
    let tmpl = p.minijinja.get_template("teams.html").unwrap();
    let render: [Box<dyn Fn() -> Vec<u8> + '_>; 4] = [
        Box::new(|| {
            p.galleon
                .render("teams.html.eex", &assigns)
                .unwrap()
                .to_vec()
        }),
        Box::new(|| p.tera.render("teams.html", &tctx).unwrap().into_bytes()),
        Box::new(|| tmpl.render(&mctx).unwrap().into_bytes()),
        Box::new(|| {
            Teams {
                year: 2015,
                teams: &teams,
            }
            .render_once()
            .unwrap()
            .into_bytes()
        }),
    ];
    same_output("teams", &render);
    let mut g = c.benchmark_group("teams");
    for (name, f) in ENGINES.iter().zip(&render) {
        g.bench_function(*name, |b| b.iter(|| black_box(f())));
    }
    g.finish();
}

/// Every engine must produce the same bytes, or the comparison is meaningless.
fn same_output(group: &str, render: &[Box<dyn Fn() -> Vec<u8> + '_>; 4]) {
    let reference = render[0]();
    for (name, f) in ENGINES.iter().zip(render).skip(1) {
        let theirs = f();
        if theirs != reference {
            let at = theirs
                .iter()
                .zip(&reference)
                .position(|(a, b)| a != b)
                .unwrap_or(theirs.len().min(reference.len()));
            let near = |v: &[u8]| {
                String::from_utf8_lossy(&v[at.saturating_sub(20)..(at + 40).min(v.len())])
                    .into_owned()
            };
            panic!(
                "{group}: {name} renders different bytes than galleon from byte {at} ({} vs {} bytes): {:?} vs {:?}",
                theirs.len(),
                reference.len(),
                near(&theirs),
                near(&reference)
            );
        }
    }
}

fn criterion_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("criterion")
}

/// Criterion's mean estimate for `group/name`, in nanoseconds.
fn mean_ns(group: &str, name: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(name)
        .join("new/estimates.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

fn print_ratios() {
    println!("\nTime relative to galleon (criterion means; > 1.00 means slower than galleon):");
    println!(
        "{:<16} {:>12} {:>9} {:>9} {:>9}",
        "group", "galleon", "tera", "minijinja", "sailfish"
    );
    for group in ["big-table", "teams", "send-big-table"] {
        let Some(base) = mean_ns(group, "galleon") else {
            continue;
        };
        let mut line = format!("{group:<16} {:>9.1} µs", base / 1000.0);
        for name in &ENGINES[1..] {
            match mean_ns(group, name) {
                Some(t) => line.push_str(&format!(" {:>8.2}x", t / base)),
                None => line.push_str(&format!(" {:>9}", "-")),
            }
        }
        println!("{line}");
    }
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&criterion_dir())
        .configure_from_args();
    let p = peers();
    big_table(&mut c, &p);
    teams_group(&mut c, &p);
    c.final_summary();
    print_ratios();
}
