//! `cargo run -p galleon-example-axum`: the app on http://127.0.0.1:3000/. The event store's
//! tokens come from `EVENTS_READ_TOKEN`, `EVENTS_APPEND_TOKEN` and `EVENTS_ADMIN_TOKEN`: with
//! none set the API is open; once any is set, a role without one takes the admin token only
//! (`Access::open` would open a role explicitly). The first line printed says which.

use std::net::SocketAddr;
use std::time::Duration;

use galleon_eventstore::Store;
use galleon_eventstore_http::Access;

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
    let (app, api) = galleon_example_axum::app(
        templates.as_ref(),
        Duration::from_millis(500),
        store,
        access,
    )?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("serving http://{}/", listener.local_addr()?);
    // ConnectInfo: the stats pages and the error page answer loopback peers only.
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            api.shutdown();
        })
        .await?;
    Ok(())
}
