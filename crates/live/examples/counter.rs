//! A live counter on galleon-http: `cargo run -p galleon-live --example counter`, then open
//! http://127.0.0.1:4000/ and click. The README shows this file.
use galleon_http::{Router, Server, ServerConfig, shutdown_signal};
use galleon_live::{Live, LiveView, Socket, ViewError};
use galleon_template::Engine;
use serde_json::Value;

struct Counter;

impl LiveView for Counter {
    fn mount(&mut self, _: &Value, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("count", 0);
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, _: &Value, s: &mut Socket) -> Result<(), ViewError> {
        match ev {
            "inc" => s.update_int("count", |n| n + 1),
            _ => return Err(format!("no event {ev}").into()),
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let t = r#"<h1><%= @count %></h1><button phx-click="inc">+1</button>"#;
    let engine = Engine::builder().live(true).from_source("counter", t)?;
    let live = Live::builder(&engine).view("/", "counter", || Counter);
    let router = live.build()?.mount(Router::new()); // the page, /live/websocket, /live/assets/
    let listener = tokio::net::TcpListener::bind("127.0.0.1:4000").await?;
    let server = Server::new(router, ServerConfig::default());
    server.serve(listener, shutdown_signal()).await?;
    Ok(())
}
