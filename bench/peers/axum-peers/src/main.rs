//! `axum-peers fortunes ADDR POSTGRES_URL [CONNECTIONS]`: TechEmpower's Fortunes (`fortunes.rs`).
//!
//! `axum-peers askama|minijinja ADDR SITE_DIR`: galleon's `/blah?iters=N` and `/big-table`
//! served by axum with askama or minijinja, byte-identical to galleon's (bench/axum.sh checks
//! that first), with the same headers as axum + galleon (`content-type: text/html;
//! charset=utf-8`, `content-length`, `date`) and TCP_NODELAY. Each request renders its page to a
//! `String` and returns `Html(String)`: what an axum user of either engine writes. The big
//! table's data is parsed once at start (galleon's example holds it as template values too).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::serve::{Listener, ListenerExt};

mod fortunes;

#[derive(Template)]
#[template(path = "blah.askama.html")]
struct Blah {
    iters: i64,
}

// askama drops a template file's last newline (EEx keeps it), so this file ends with two.
#[derive(Template)]
#[template(path = "big-table.askama.html")]
struct BigTable<'a> {
    table: &'a [Vec<i64>],
}

struct Site {
    table: Vec<Vec<i64>>,
    jinja: minijinja::Environment<'static>,
    jinja_table: minijinja::Value,
}

type Shared = State<Arc<Site>>;
type Params = Query<HashMap<String, String>>;

fn iters(q: &HashMap<String, String>) -> Result<i64, Response> {
    q.get("iters")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| (StatusCode::BAD_REQUEST, "iters").into_response())
}

fn done(r: Result<String, impl std::fmt::Display>) -> Response {
    match r {
        Ok(page) => Html(page).into_response(),
        Err(e) => {
            eprintln!("render failed: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn askama_blah(Query(q): Params) -> Response {
    match iters(&q) {
        Ok(iters) => done(Blah { iters }.render()),
        Err(r) => r,
    }
}

async fn askama_table(State(site): Shared) -> Response {
    done(BigTable { table: &site.table }.render())
}

async fn jinja_blah(State(site): Shared, Query(q): Params) -> Response {
    match iters(&q) {
        Ok(iters) => done(
            site.jinja
                .get_template("blah.html")
                .and_then(|t| t.render(minijinja::context! { iters })),
        ),
        Err(r) => r,
    }
}

async fn jinja_table(State(site): Shared) -> Response {
    done(
        site.jinja
            .get_template("big-table.html")
            .and_then(|t| t.render(minijinja::context! { table => site.jinja_table.clone() })),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("fortunes") {
        let (Some(addr), Some(url)) = (args.get(2), args.get(3)) else {
            return Err("usage: axum-peers fortunes ADDR POSTGRES_URL [CONNECTIONS]".into());
        };
        let n = match args.get(4) {
            Some(n) => n.parse()?,
            None => 1,
        };
        return serve(addr, fortunes::router(url, n).await?).await;
    }
    let [_, engine, addr, site_dir] = &args[..] else {
        return Err("usage: axum-peers askama|minijinja ADDR SITE_DIR".into());
    };
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        PathBuf::from(site_dir).join("data/big-table.json"),
    )?)?;
    let table: Vec<Vec<i64>> = serde_json::from_value(data["table"].clone())?;
    let mut jinja = minijinja::Environment::new();
    // EEx keeps a template's last newline; minijinja drops it unless told.
    jinja.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()?,
    );
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("templates");
    jinja.add_template_owned(
        "blah.html",
        std::fs::read_to_string(dir.join("blah.jinja.html"))?,
    )?;
    jinja.add_template_owned(
        "big-table.html",
        std::fs::read_to_string(dir.join("big-table.jinja.html"))?,
    )?;
    let site = Arc::new(Site {
        jinja_table: minijinja::Value::from(minijinja::value::Serde(&table)),
        table,
        jinja,
    });
    let app = match engine.as_str() {
        "askama" => Router::new()
            .route("/blah", get(askama_blah))
            .route("/big-table", get(askama_table)),
        "minijinja" => Router::new()
            .route("/blah", get(jinja_blah))
            .route("/big-table", get(jinja_table)),
        other => return Err(format!("unknown engine {other}").into()),
    }
    .with_state(site);
    serve(addr, app).await
}

/// Serves `app` on `addr` with TCP_NODELAY, printing the address.
async fn serve(addr: &str, app: Router) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(addr).await?.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
