//! Inputs shared by the benchmarks: the template-benchmarks-rs "big-table" and "teams" templates
//! and data, in galleon's EEx and in Jinja syntax, and a loopback TCP sink.

#![allow(dead_code)]

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::thread;

use galleon_template::{Assigns, Engine, Value};

/// Rows and columns of the big table (template-benchmarks-rs uses 100).
pub(crate) const TABLE_SIZE: usize = 100;

/// The big table in EEx; renders byte for byte what [`BIG_TABLE_JINJA`] renders.
pub(crate) const BIG_TABLE_EEX: &str = include_str!("../templates/big-table.html.eex");

/// The big table as tera's own benchmark writes it (minijinja reads it too).
pub(crate) const BIG_TABLE_JINJA: &str = "
<table>
{% for row in table %}
<tr>{% for col in row %}<td>{{ col }}</td>{% endfor %}</tr>
{% endfor %}
</table>
";

/// Teams in EEx.
pub(crate) const TEAMS_EEX: &str = include_str!("../templates/teams.html.eex");

/// Teams as tera's own benchmark writes it.
pub(crate) const TEAMS_JINJA: &str = r#"
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
"#;

/// The teams of the teams benchmark.
pub(crate) const TEAMS: [(&str, i64); 4] = [
    ("Jiangsu", 43),
    ("Beijing", 27),
    ("Guangzhou", 22),
    ("Shandong", 12),
];

/// The big table's rows.
pub(crate) fn table() -> Vec<Vec<usize>> {
    (0..TABLE_SIZE).map(|_| (0..TABLE_SIZE).collect()).collect()
}

/// Galleon engine holding both templates.
pub(crate) fn engine() -> Engine {
    Engine::from_sources([
        ("big-table.html.eex", BIG_TABLE_EEX),
        ("teams.html.eex", TEAMS_EEX),
    ])
    .unwrap()
}

/// Assigns of the big table.
pub(crate) fn table_assigns() -> Assigns {
    let rows = table()
        .into_iter()
        .map(|r| Value::list(r.into_iter().map(|c| Value::Int(c as i64))));
    let mut a = Assigns::new();
    a.insert("table", Value::list(rows));
    a
}

/// Assigns of the teams page.
pub(crate) fn teams_assigns() -> Assigns {
    let teams = TEAMS.iter().map(|(name, score)| {
        Value::map([("name", Value::from(*name)), ("score", Value::Int(*score))])
    });
    let mut a = Assigns::new();
    a.insert("year", 2015i64);
    a.insert("teams", Value::list(teams));
    a
}

/// A connected loopback socket whose peer thread reads and discards everything.
pub(crate) fn loopback_sink() -> TcpStream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        let (mut peer, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        // Ends when the writer closes its side.
        while matches!(peer.read(&mut buf), Ok(n) if n > 0) {}
    });
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s
}
