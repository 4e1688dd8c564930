//! galleon's example site served by axum: `cargo run -p galleon-axum --example site --
//! [ADDR] [SITE_DIR]` (defaults: `127.0.0.1:3000`, the workspace's `site/`). Prints
//! `listening on ADDR` once it accepts connections. `bench/axum.sh` runs it beside axum +
//! askama and axum + minijinja serving the same bytes.

mod app;

use std::path::PathBuf;

use axum::serve::{Listener, ListenerExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    let dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../site"));
    let app = app::router(&dir)?;
    // TCP_NODELAY, as galleon and every peer of the benchmarks set it.
    let listener = tokio::net::TcpListener::bind(&addr).await?.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("TCP_NODELAY: {e}");
        }
    });
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
