//! `cargo run -p galleon-example-http`: the app on http://127.0.0.1:3001/. The event store's
//! tokens come from `EVENTS_READ_TOKEN`, `EVENTS_APPEND_TOKEN` and `EVENTS_ADMIN_TOKEN`: with
//! none set the API is open; once any is set, a role without one takes the admin token only
//! (`Access::open` would open a role explicitly). The first line printed says which.

use std::time::Duration;

use galleon_eventstore::Store;
use galleon_eventstore_http::Access;
use galleon_http::{Server, ServerConfig, shutdown_signal};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all("data")?;
    let store = Store::open("sqlite:data/events.db").await?;
    let access = Access {
        read: std::env::var("EVENTS_READ_TOKEN").ok(),
        append: std::env::var("EVENTS_APPEND_TOKEN").ok(),
        admin: std::env::var("EVENTS_ADMIN_TOKEN").ok(),
        ..Access::default()
    };
    access.validate()?;
    println!("event-store API: {}", access.describe());
    let templates = concat!(env!("CARGO_MANIFEST_DIR"), "/templates");
    let app = galleon_example_http::app(
        templates.as_ref(),
        Duration::from_millis(500),
        store,
        access,
    )?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3001").await?;
    println!("serving http://{}/", listener.local_addr()?);
    // The server ends its event streams at shutdown (Ctrl-C, SIGTERM).
    Server::new(app.router, ServerConfig::default())
        .with_observer(app.stats)
        .serve(listener, shutdown_signal())
        .await?;
    Ok(())
}
