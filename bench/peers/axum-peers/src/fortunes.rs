//! `axum-peers fortunes ADDR POSTGRES_URL [CONNECTIONS]`: TechEmpower's Fortunes served by axum +
//! askama + tokio-postgres, doing the work galleon's `/fortunes` does: a fixed set of
//! connections (default 1), each with `SELECT id, message FROM fortune` prepared once, taken in
//! turn (tokio-postgres pipelines the queries sharing one); every row read per request, messages
//! borrowed from the rows, the request's fortune added, sorted by message, rendered to a
//! `String`, sent with `server`, `date`, `content-type: text/html; charset=utf-8` and
//! `content-length`. The table must exist (galleon's `/fortunes` creates and seeds it).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tokio_postgres::{Client, NoTls, Statement};

struct Fortune<'a> {
    id: i32,
    message: &'a str,
}

#[derive(Template)]
#[template(path = "fortunes.askama.html")]
struct Page<'a> {
    fortunes: Vec<Fortune<'a>>,
}

struct Db {
    conns: Vec<(Client, Statement)>,
    next: AtomicUsize,
}

async fn fortunes(State(db): State<Arc<Db>>) -> Response {
    let (client, select) = &db.conns[db.next.fetch_add(1, Ordering::Relaxed) % db.conns.len()];
    let rows = match client.query(select, &[]).await {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("fortunes query failed: {e}");
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
    };
    let mut fortunes: Vec<Fortune<'_>> = rows
        .iter()
        .map(|r| Fortune {
            id: r.get(0),
            message: r.get(1),
        })
        .collect();
    fortunes.push(Fortune {
        id: 0,
        message: "Additional fortune added at request time.",
    });
    fortunes.sort_unstable_by(|a, b| a.message.cmp(b.message));
    match (Page { fortunes }).render() {
        Ok(page) => ([(header::SERVER, "axum")], Html(page)).into_response(),
        Err(e) => {
            eprintln!("render failed: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// The router of `/fortunes` on `n` connections to `url`.
pub async fn router(url: &str, n: usize) -> Result<Router, Box<dyn std::error::Error>> {
    let mut conns = Vec::new();
    for _ in 0..n.max(1) {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("postgres connection failed: {e}");
            }
        });
        let select = client.prepare("SELECT id, message FROM fortune").await?;
        conns.push((client, select));
    }
    let db = Arc::new(Db {
        conns,
        next: AtomicUsize::new(0),
    });
    Ok(Router::new()
        .route("/fortunes", get(fortunes))
        .with_state(db))
}
