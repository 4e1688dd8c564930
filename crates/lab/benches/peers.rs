//! galleon against sailfish, askama, tera 2 and minijinja, in the same groups, on the
//! template-benchmarks-rs "big-table" (100x100 integers) and "teams" templates: render to bytes,
//! and render-and-send of the big table, of a 407 KB big table (370 rows) and of the site's
//! 410 KB Blah page over loopback TCP to a reader that discards.
//!
//! `cargo bench -p galleon-lab --features peers --bench peers`. Before timing, every row's
//! output is checked byte for byte against galleon's. At the end it prints each row's time as a
//! multiple of galleon's, from criterion's own estimates.
//!
//! Each group is a list of rows (a name and a closure): another engine, or another way of
//! rendering with galleon, is one more entry in that list. `galleon` is the runtime engine
//! (templates compiled when the program runs), `galleon-compiled` the same templates compiled
//! into Rust by `#[derive(Template)]` (`galleon-template-derive`).

use std::hint::black_box;
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use criterion::Criterion;
use galleon_iolist::{IoList, IoWriter, WritePolicy};
use galleon_template::compiled::Template as _;
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

#[derive(askama::Template)]
#[template(
    source = "
<table>
{% for row in table %}
<tr>{% for col in row %}<td>{{ col }}</td>{% endfor %}</tr>
{% endfor %}
</table>
",
    ext = "html"
)]
struct AskamaBigTable<'a> {
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

#[derive(askama::Template)]
#[template(
    source = r#"
<html>
  <head>
    <title>{{ year }}</title>
  </head>
  <body>
    <h1>CSL {{ year }}</h1>
    <ul>
    {% for team in teams %}
      <li class="{% if loop.index0 == 0 %}champion{% endif %}">
      <b>{{ team.name }}</b>: {{ team.score }}
      </li>
    {% endfor %}
    </ul>
  </body>
</html>
"#,
    ext = "html"
)]
struct AskamaTeams<'a> {
    year: i64,
    teams: &'a [Team],
}

/// galleon's compiled path: the same EEx source as `common::BIG_TABLE_EEX`, compiled into Rust
/// by `#[derive(Template)]` (the byte check below holds them to the same output).
#[derive(galleon_template_derive::Template)]
#[template(path = "benches/templates/big-table.html.eex")]
struct CompiledBigTable {
    table: Vec<Vec<usize>>,
}

/// `common::TEAMS_EEX`, compiled.
#[derive(galleon_template_derive::Template)]
#[template(path = "benches/templates/teams.html.eex")]
struct CompiledTeams {
    year: i64,
    teams: Vec<Team>,
}

/// The site's Blah page (`site/pages/blah.html.eex`, 410 KB at `iters = 1000`), compiled.
#[derive(galleon_template_derive::Template)]
#[template(path = "../../site/pages/blah.html.eex")]
struct CompiledBlah {
    iters: i64,
}

/// The same page in sailfish.
#[derive(TemplateSimple)]
#[template(source = r#"<% for _a in 1..=iters { %>
BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah
BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah
BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah

BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah
BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah
BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah
<% } %>"#)]
struct SailfishBlah {
    iters: i64,
}

/// Blah's EEx source (the site's page), for the runtime engine.
const BLAH_EEX: &str = include_str!("../../../site/pages/blah.html.eex");

/// Repeats of Blah's block: a 410 KB page, as `GET /blah?iters=1000` serves it.
const BLAH_ITERS: i64 = 1000;

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

/// A row of a render group: renders the page and copies it into the sink (cleared first).
type RenderRow<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;

/// A row of a render-and-send group: renders the page and writes it to the socket.
type SendRow<'a> = Box<dyn FnMut(&mut TcpStream) + 'a>;

/// The one copy every row of a render group pays: a galleon list's segments into the sink.
fn sink_list(sink: &mut Vec<u8>, page: &IoList) {
    sink.clear();
    for seg in page.segments() {
        sink.extend_from_slice(seg);
    }
}

/// The one copy every row of a render group pays: a string into the sink.
fn sink_str(sink: &mut Vec<u8>, page: &str) {
    sink.clear();
    sink.extend_from_slice(page.as_bytes());
}

fn big_table(c: &mut Criterion, p: &Peers) {
    let table = common::table();
    let assigns = common::table_assigns();
    let mut tctx = tera::Context::new();
    tctx.insert("table", &table);
    let mctx = minijinja::context! { table => minijinja::value::Serde(&table) };
    let tmpl = p.minijinja.get_template("big-table.html").unwrap();
    let compiled_table = CompiledBigTable {
        table: table.clone(),
    };

    // Every row: the render from data built once outside the loop (galleon's assigns, tera's
    // and minijinja's contexts, the Rust structs of sailfish and askama), to the engine's own
    // output (galleon an I/O list, the others a `String`), then one copy of the whole page into
    // the same reused `Vec<u8>`, and the drop of the engine's output.
    let rows: Vec<(&str, RenderRow<'_>)> = vec![
        (
            "galleon",
            Box::new(|sink| {
                let page = p.galleon.render("big-table.html.eex", &assigns).unwrap();
                sink_list(sink, &page);
            }),
        ),
        (
            "galleon-compiled",
            Box::new(|sink| sink_list(sink, &compiled_table.render().unwrap())),
        ),
        (
            "sailfish",
            Box::new(|sink| {
                let page = BigTable { table: &table }.render_once().unwrap();
                sink_str(sink, &page);
            }),
        ),
        (
            "askama",
            Box::new(|sink| {
                let page = askama::Template::render(&AskamaBigTable { table: &table }).unwrap();
                sink_str(sink, &page);
            }),
        ),
        (
            "tera",
            Box::new(|sink| sink_str(sink, &p.tera.render("big-table.html", &tctx).unwrap())),
        ),
        (
            "minijinja",
            Box::new(|sink| sink_str(sink, &tmpl.render(&mctx).unwrap())),
        ),
    ];
    render_group(c, "big-table", &rows);
    if only().is_some() {
        return;
    }

    // Every row: the same render, then all of the page written to a loopback socket whose
    // reader discards it: galleon hands its list to the vectored writer (no copy), the others
    // write their string.
    let mut sock = common::loopback_sink();
    let mut rows = table_send_rows(p, &assigns, &compiled_table, &table);
    rows.push((
        "tera",
        Box::new(|sock| {
            let page = p.tera.render("big-table.html", &tctx).unwrap();
            sock.write_all(page.as_bytes()).unwrap();
        }),
    ));
    rows.push((
        "minijinja",
        Box::new(|sock| {
            let page = tmpl.render(&mctx).unwrap();
            sock.write_all(page.as_bytes()).unwrap();
        }),
    ));
    send_group(c, "send-big-table", &mut rows, &mut sock);
}

fn teams_group(c: &mut Criterion, p: &Peers) {
    let teams = teams();
    let assigns = common::teams_assigns();
    let mut tctx = tera::Context::new();
    tctx.insert("year", &2015);
    tctx.insert("teams", &teams);
    let mctx = minijinja::context! { year => 2015, teams => minijinja::value::Serde(&teams) };
    let tmpl = p.minijinja.get_template("teams.html").unwrap();
    let compiled_teams = CompiledTeams {
        year: 2015,
        teams: self::teams(),
    };
    // Every row: as in the big-table group, the render from data built once to the engine's own
    // output, then one copy of the page into the same reused `Vec<u8>`.
    let rows: Vec<(&str, RenderRow<'_>)> = vec![
        (
            "galleon",
            Box::new(|sink| {
                let page = p.galleon.render("teams.html.eex", &assigns).unwrap();
                sink_list(sink, &page);
            }),
        ),
        (
            "galleon-compiled",
            Box::new(|sink| sink_list(sink, &compiled_teams.render().unwrap())),
        ),
        (
            "sailfish",
            Box::new(|sink| {
                let page = Teams {
                    year: 2015,
                    teams: &teams,
                }
                .render_once()
                .unwrap();
                sink_str(sink, &page);
            }),
        ),
        (
            "askama",
            Box::new(|sink| {
                let page = askama::Template::render(&AskamaTeams {
                    year: 2015,
                    teams: &teams,
                })
                .unwrap();
                sink_str(sink, &page);
            }),
        ),
        (
            "tera",
            Box::new(|sink| sink_str(sink, &p.tera.render("teams.html", &tctx).unwrap())),
        ),
        (
            "minijinja",
            Box::new(|sink| sink_str(sink, &tmpl.render(&mctx).unwrap())),
        ),
    ];
    render_group(c, "teams", &rows);
}

/// Render-and-send of a ~400 KB page: the runtime engine and the compiled path hand their list
/// to the vectored writer (default policy: the block's text referenced, not copied); sailfish
/// renders a `String` and writes it. Outputs are checked byte for byte first.
fn send_blah(c: &mut Criterion) {
    let engine = galleon_template::Engine::from_sources([("blah", BLAH_EEX)]).unwrap();
    let mut assigns = galleon_template::Assigns::new();
    assigns.insert("iters", galleon_template::Value::from(BLAH_ITERS));
    let compiled = CompiledBlah { iters: BLAH_ITERS };
    same_big_page(
        "send-blah-400k",
        &engine.render("blah", &assigns).unwrap().to_vec(),
        &[
            ("galleon-compiled", compiled.render().unwrap().to_vec()),
            (
                "sailfish",
                SailfishBlah { iters: BLAH_ITERS }
                    .render_once()
                    .unwrap()
                    .into_bytes(),
            ),
        ],
    );
    let mut sock = common::loopback_sink();
    let (mut w1, mut w2) = (
        IoWriter::new(WritePolicy::default()),
        IoWriter::new(WritePolicy::default()),
    );
    let mut rows: Vec<(&str, SendRow<'_>)> = vec![
        (
            "galleon",
            Box::new(|sock| {
                let page = engine.render("blah", &assigns).unwrap();
                w1.write_all(sock, &page).unwrap();
            }),
        ),
        (
            "galleon-compiled",
            Box::new(|sock| {
                let page = compiled.render().unwrap();
                w2.write_all(sock, &page).unwrap();
            }),
        ),
        (
            "sailfish",
            Box::new(|sock| {
                let page = SailfishBlah { iters: BLAH_ITERS }.render_once().unwrap();
                sock.write_all(page.as_bytes()).unwrap();
            }),
        ),
    ];
    send_group(c, "send-blah-400k", &mut rows, &mut sock);
}

/// Rows of the ~400 KB table: [`TABLE_400K_ROWS`] rows of the big table's 100 columns.
const TABLE_400K_ROWS: usize = 370;

/// Render-and-send of a ~400 KB page whose render matters: the big table's template with 370
/// rows (407 KB of `<td>` cells, every one a value), where the Blah page is one static block
/// repeated, so its row measures little but the kernel's copy. galleon's two paths hand their
/// list to the vectored writer (default policy); sailfish and askama render a `String` and
/// write it. Outputs are checked byte for byte first.
fn send_table_400k(c: &mut Criterion, p: &Peers) {
    let table: Vec<Vec<usize>> = (0..TABLE_400K_ROWS)
        .map(|_| (0..common::TABLE_SIZE).collect())
        .collect();
    let mut assigns = galleon_template::Assigns::new();
    assigns.insert(
        "table",
        galleon_template::Value::list(table.iter().map(|r| {
            galleon_template::Value::list(r.iter().map(|&c| galleon_template::Value::Int(c as i64)))
        })),
    );
    let compiled = CompiledBigTable {
        table: table.clone(),
    };
    same_big_page(
        "send-table-400k",
        &p.galleon
            .render("big-table.html.eex", &assigns)
            .unwrap()
            .to_vec(),
        &[
            ("galleon-compiled", compiled.render().unwrap().to_vec()),
            (
                "sailfish",
                BigTable { table: &table }
                    .render_once()
                    .unwrap()
                    .into_bytes(),
            ),
            (
                "askama",
                askama::Template::render(&AskamaBigTable { table: &table })
                    .unwrap()
                    .into_bytes(),
            ),
        ],
    );
    let mut sock = common::loopback_sink();
    let mut rows = table_send_rows(p, &assigns, &compiled, &table);
    send_group(c, "send-table-400k", &mut rows, &mut sock);
}

/// A ~400 KB send group's check before timing: galleon's page is over 400 KB and every other
/// row renders exactly its bytes.
fn same_big_page(group: &str, galleon: &[u8], others: &[(&str, Vec<u8>)]) {
    assert!(galleon.len() > 400_000, "{group}: {} bytes", galleon.len());
    for (name, page) in others {
        assert!(
            page == galleon,
            "{group}: {name} renders different bytes than galleon"
        );
    }
}

/// The render-and-send rows of a big table every group with one has: galleon's runtime engine
/// and compiled path handing their list to the vectored writer (default policy), sailfish and
/// askama writing their `String`.
fn table_send_rows<'a>(
    p: &'a Peers,
    assigns: &'a galleon_template::Assigns,
    compiled: &'a CompiledBigTable,
    table: &'a [Vec<usize>],
) -> Vec<(&'static str, SendRow<'a>)> {
    let mut runtime_writer = IoWriter::new(WritePolicy::default());
    let mut compiled_writer = IoWriter::new(WritePolicy::default());
    vec![
        (
            "galleon",
            Box::new(move |sock| {
                let page = p.galleon.render("big-table.html.eex", assigns).unwrap();
                runtime_writer.write_all(sock, &page).unwrap();
            }),
        ),
        (
            "galleon-compiled",
            Box::new(move |sock| {
                let page = compiled.render().unwrap();
                compiled_writer.write_all(sock, &page).unwrap();
            }),
        ),
        (
            "sailfish",
            Box::new(move |sock| {
                let page = BigTable { table }.render_once().unwrap();
                sock.write_all(page.as_bytes()).unwrap();
            }),
        ),
        (
            "askama",
            Box::new(move |sock| {
                let page = askama::Template::render(&AskamaBigTable { table }).unwrap();
                sock.write_all(page.as_bytes()).unwrap();
            }),
        ),
    ]
}

/// Times a render-and-send group: with criterion, or interleaved ([`ab_send`]) when `AB` is set
/// and `AB_GROUP` names it (`AB` set for another group: not at all).
fn send_group(
    c: &mut Criterion,
    group: &str,
    rows: &mut [(&str, SendRow<'_>)],
    sock: &mut TcpStream,
) {
    if let Some(rounds) = ab_rounds() {
        if std::env::var("AB_GROUP").is_ok_and(|g| g == group) {
            ab_send(group, rows, sock, rounds);
        }
        return;
    }
    let mut g = c.benchmark_group(group);
    for (name, f) in rows.iter_mut() {
        g.bench_function(*name, |b| b.iter(|| f(sock)));
    }
    g.finish();
}

/// [`ab`] for a render-and-send group (`AB_GROUP=send-big-table`, `send-blah-400k` or
/// `send-table-400k`): rounds of 200 sends per row, the rows' order rotating each round; each
/// row's minimum, 10th percentile and median per send, then every other row's per-round time as
/// a multiple of the first row's (galleon): the median and range over rounds, and in how many
/// rounds it was the faster. A send's time moves with the kernel and the reader thread by more
/// than the rows differ; within a round they move together.
fn ab_send(group: &str, rows: &mut [(&str, SendRow<'_>)], sock: &mut TcpStream, rounds: u32) {
    const BATCH: u32 = 200;
    let n = rows.len();
    let mut times = vec![Vec::new(); n];
    for r in 0..rounds as usize {
        for k in 0..n {
            let i = (k + r) % n;
            let f = &mut rows[i].1;
            let t = std::time::Instant::now();
            for _ in 0..BATCH {
                f(sock);
            }
            times[i].push(t.elapsed().as_nanos() as f64 / f64::from(BATCH));
        }
    }
    let pick = |v: &[f64], q: f64| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q) as usize]
    };
    for ((name, _), t) in rows.iter().zip(&times) {
        println!(
            "AB {group}/{name}: min {:.2} µs, p10 {:.2}, median {:.2}",
            pick(t, 0.0) / 1e3,
            pick(t, 0.1) / 1e3,
            pick(t, 0.5) / 1e3
        );
    }
    for (i, (name, _)) in rows.iter().enumerate().skip(1) {
        let ratios: Vec<f64> = times[i].iter().zip(&times[0]).map(|(a, b)| a / b).collect();
        let faster = ratios.iter().filter(|&&x| x < 1.0).count();
        println!(
            "AB {group}/{name} ÷ {}: median {:.3} (range {:.3}-{:.3}), faster in {faster} of {} rounds",
            rows[0].0,
            pick(&ratios, 0.5),
            pick(&ratios, 0.0),
            pick(&ratios, 1.0),
            ratios.len()
        );
    }
}

/// `CG=<group>/<row>:<n>` (say `CG=teams/sailfish:1000`): after the byte check, runs only that
/// render row `n` times, untimed, and exits; two values of `n` under `valgrind --tool=callgrind`
/// give its instructions per render by difference.
fn only() -> Option<(String, u32)> {
    let v = std::env::var("CG").ok()?;
    let (row, n) = v.split_once(':')?;
    Some((row.to_string(), n.parse().ok()?))
}

/// Checks that every row renders galleon's bytes, then times each.
fn render_group(c: &mut Criterion, group: &str, rows: &[(&str, RenderRow<'_>)]) {
    same_output(group, rows);
    if let Some((only, n)) = only() {
        let mut sink = Vec::new();
        for (name, f) in rows {
            if only == format!("{group}/{name}") {
                for _ in 0..n {
                    f(&mut sink);
                    black_box(&sink);
                }
                std::process::exit(0);
            }
        }
        return;
    }
    if let Some(rounds) = ab_rounds() {
        if std::env::var("AB_GROUP").is_ok_and(|g| g == group) {
            ab(group, rows, rounds);
        }
        return;
    }
    let mut g = c.benchmark_group(group);
    let mut sink = Vec::new();
    for (name, f) in rows {
        g.bench_function(*name, |b| {
            b.iter(|| {
                f(&mut sink);
                black_box(&sink);
            })
        });
    }
    g.finish();
}

/// `AB=<rounds> AB_GROUP=<group> [AB_ROWS=<row>,<row>]` (rounds at least 1; say `AB=2000
/// AB_GROUP=teams AB_ROWS=galleon-compiled,sailfish`): instead of criterion, after the byte
/// check, times the group's rows in rounds of 1,000 renders (10 for big-table), the rows
/// interleaved, and prints each row's minimum, 10th percentile and median per render: on a
/// shared machine a minimum over rounds moves less with other load than criterion's estimate.
/// The rows do what criterion times; only the clock around them differs. A render-and-send
/// group (`send-big-table`, `send-blah-400k`, `send-table-400k`) is timed the same way
/// ([`ab_send`]).
fn ab_rounds() -> Option<u32> {
    std::env::var("AB").ok()?.parse().ok()
}

fn ab(group: &str, rows: &[(&str, RenderRow<'_>)], rounds: u32) {
    let filter = std::env::var("AB_ROWS").unwrap_or_default();
    let rows: Vec<_> = rows
        .iter()
        .filter(|(n, _)| filter.is_empty() || filter.split(',').any(|x| x == *n))
        .collect();
    let mut sink = Vec::new();
    let batch = if group.starts_with("big") { 10 } else { 1000 };
    let mut times = vec![Vec::new(); rows.len()];
    for _ in 0..rounds {
        for (i, (_, f)) in rows.iter().enumerate() {
            let t = std::time::Instant::now();
            for _ in 0..batch {
                f(&mut sink);
                black_box(&sink);
            }
            times[i].push(t.elapsed().as_nanos() as f64 / f64::from(batch));
        }
    }
    for ((name, _), t) in rows.iter().zip(&mut times) {
        t.sort_by(f64::total_cmp);
        println!(
            "AB {group}/{name}: min {:.2} ns, p10 {:.2}, median {:.2}",
            t[0],
            t[t.len() / 10],
            t[t.len() / 2]
        );
    }
}

/// Every row must produce the same bytes as the first, or the comparison is meaningless.
fn same_output(group: &str, rows: &[(&str, RenderRow<'_>)]) {
    let mut reference = Vec::new();
    rows[0].1(&mut reference);
    for (name, f) in &rows[1..] {
        let mut theirs = Vec::new();
        f(&mut theirs);
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
                "{group}: {name} renders different bytes than {} from byte {at} ({} vs {} bytes): {:?} vs {:?}",
                rows[0].0,
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

/// Rows the ratio table lists, after galleon (its base); rows not run print `-`.
const COLUMNS: [&str; 5] = [
    "galleon-compiled",
    "sailfish",
    "askama",
    "tera",
    "minijinja",
];

fn print_ratios() {
    println!("\nTime relative to galleon (criterion means; > 1.00 means slower than galleon):");
    let mut head = format!("{:<16} {:>12}", "group", "galleon");
    for name in COLUMNS {
        head.push_str(&format!(" {name:>16}"));
    }
    println!("{head}");
    for group in [
        "big-table",
        "teams",
        "send-big-table",
        "send-blah-400k",
        "send-table-400k",
    ] {
        let Some(base) = mean_ns(group, "galleon") else {
            continue;
        };
        let mut line = format!("{group:<16} {:>9.1} µs", base / 1000.0);
        for name in COLUMNS {
            match mean_ns(group, name) {
                Some(t) => line.push_str(&format!(" {:>15.2}x", t / base)),
                None => line.push_str(&format!(" {:>16}", "-")),
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
    if let Some((row, _)) = only() {
        panic!("CG: no render row {row}");
    }
    send_blah(&mut c);
    send_table_400k(&mut c, &p);
    if ab_rounds().is_some() {
        return;
    }
    c.final_summary();
    print_ratios();
}
