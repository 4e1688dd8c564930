//! A quick timing check without criterion: the big-table and teams renders, compiled (derive)
//! against sailfish (render to a `String`) and the runtime engine, outputs compared first. The
//! engines' rounds are interleaved (the machine is shared and noisy); each figure is the median
//! round's time per render. `cargo bench -p galleon-lab --features peers --bench compiled`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use galleon_template::compiled::Template as _;
use galleon_template::{Assigns, Engine, Value};
use galleon_template_derive::Template;

const BIG_TABLE: &str = include_str!("templates/big-table.html.eex");

const TEAMS: &str = include_str!("templates/teams.html.eex");

#[derive(Template)]
#[template(path = "benches/templates/big-table.html.eex")]
struct BigTable {
    table: Vec<Vec<usize>>,
}

struct Team {
    name: String,
    score: u8,
}

#[derive(Template)]
#[template(path = "benches/templates/teams.html.eex")]
struct Teams {
    year: u16,
    teams: Vec<Team>,
}

#[derive(sailfish::TemplateSimple)]
#[template(source = "
<table>
<% for row in table { %>
<tr><% for col in row { %><td><%= *col %></td><% } %></tr>
<% } %>
</table>
")]
struct SailfishBigTable<'a> {
    table: &'a [Vec<usize>],
}

#[derive(sailfish::TemplateSimple)]
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
struct SailfishTeams<'a> {
    year: u16,
    teams: &'a [Team],
}

/// Median time per call of each of `fs`, over 21 interleaved rounds of `n[i]` calls.
fn time<const N: usize>(n: [u32; N], fs: &mut [&mut dyn FnMut(); N]) -> [Duration; N] {
    let mut rounds: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::new());
    for _ in 0..21 {
        for (i, f) in fs.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..n[i] {
                f();
            }
            rounds[i].push(t.elapsed() / n[i]);
        }
    }
    rounds.map(|mut r| {
        r.sort();
        r[r.len() / 2]
    })
}

/// The big-table timing round.
fn big_table_times(big: &BigTable, sailfish: &dyn Fn() -> String, engine: &Engine, a: &Assigns) {
    let [compiled, sail, runtime] = time(
        [200, 200, 20],
        &mut [
            &mut || {
                black_box(black_box(big).render().unwrap());
            },
            &mut || {
                black_box(sailfish());
            },
            &mut || {
                black_box(engine.render("big", black_box(a)).unwrap());
            },
        ],
    );
    println!(
        "big-table  compiled {compiled:>10.2?}  sailfish {sail:>10.2?}  runtime {runtime:>10.2?}"
    );
}

/// `CG=<case>:<n>` runs only `case` (`compiled-big`, `sailfish-big`, `compiled-teams`,
/// `sailfish-teams`) `n` times after the checks: two values of `n` under callgrind give the
/// instructions per render by difference.
fn only() -> Option<(String, u32)> {
    let v = std::env::var("CG").ok()?;
    let (case, n) = v.split_once(':')?;
    Some((case.to_string(), n.parse().ok()?))
}

fn main() {
    let only = only();
    let run = |case: &str, f: &mut dyn FnMut()| match &only {
        Some((c, n)) if c == case => {
            for _ in 0..*n {
                f();
            }
            true
        }
        _ => false,
    };
    let table: Vec<Vec<usize>> = (0..100).map(|_| (0..100).collect()).collect();
    let big = BigTable {
        table: table.clone(),
    };
    let engine = Engine::from_sources([("big", BIG_TABLE), ("teams", TEAMS)]).unwrap();
    let mut a = Assigns::new();
    a.insert(
        "table",
        Value::list(
            table
                .iter()
                .map(|r| Value::list(r.iter().map(|&c| Value::Int(c as i64)))),
        ),
    );
    assert_eq!(
        big.render().unwrap().to_vec(),
        engine.render("big", &a).unwrap().to_vec()
    );
    let sailfish = || {
        sailfish::TemplateSimple::render_once(SailfishBigTable {
            table: black_box(&table),
        })
        .unwrap()
    };
    assert_eq!(sailfish().as_bytes(), big.render().unwrap().to_vec());
    if run("compiled-big", &mut || {
        black_box(black_box(&big).render().unwrap());
    }) || run("sailfish-big", &mut || {
        black_box(sailfish());
    }) {
        return;
    }
    if only.is_none() {
        big_table_times(&big, &sailfish, &engine, &a);
    }

    let data = [
        ("Jiangsu", 43),
        ("Beijing", 27),
        ("Guangzhou", 22),
        ("Shandong", 12),
    ];
    let teams = Teams {
        year: 2015,
        teams: data
            .iter()
            .map(|&(name, score)| Team {
                name: name.into(),
                score,
            })
            .collect(),
    };
    let mut a = Assigns::new();
    a.insert("year", 2015i64);
    a.insert(
        "teams",
        Value::list(data.iter().map(|&(name, score)| {
            Value::map([
                ("name", Value::from(name)),
                ("score", Value::Int(score.into())),
            ])
        })),
    );
    assert_eq!(
        teams.render().unwrap().to_vec(),
        engine.render("teams", &a).unwrap().to_vec()
    );
    let sailfish = || {
        sailfish::TemplateSimple::render_once(SailfishTeams {
            year: 2015,
            teams: black_box(&teams.teams),
        })
        .unwrap()
    };
    assert_eq!(sailfish().as_bytes(), teams.render().unwrap().to_vec());
    if run("compiled-teams", &mut || {
        black_box(black_box(&teams).render().unwrap());
    }) || run("sailfish-teams", &mut || {
        black_box(sailfish());
    }) || only.is_some()
    {
        return;
    }
    let [compiled, sail, runtime] = time(
        [50_000, 50_000, 5_000],
        &mut [
            &mut || {
                black_box(black_box(&teams).render().unwrap());
            },
            &mut || {
                black_box(sailfish());
            },
            &mut || {
                black_box(engine.render("teams", black_box(&a)).unwrap());
            },
        ],
    );
    println!(
        "teams      compiled {compiled:>10.2?}  sailfish {sail:>10.2?}  runtime {runtime:>10.2?}"
    );
}
