//! A live mount served for the browser tests from plain (blocking) test code: a tokio runtime
//! owned by the handle serves `live` on 127.0.0.1 (on a chosen port, to restart in place),
//! beside `/plain`, an ordinary page to redirect to; and what the tests ask of such pages.

use std::net::SocketAddr;
use std::time::Duration;

use galleon_http::{Response, Router, Server, ServerConfig, sync_handler};
use galleon_live::{Live, Page};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use super::serve::WAIT;
use super::webdriver::Browser;

/// The body of `/plain`.
pub const PLAIN: &str = "<!DOCTYPE html><html><head><title>plain</title></head>\
    <body><p id=\"plain\">a plain page</p></body></html>";

/// A server running on its own runtime until stopped or dropped.
pub struct BrowserServer {
    pub addr: SocketAddr,
    rt: Runtime,
    stop: Option<oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<()>>,
}

impl BrowserServer {
    /// Serves `live` on a free port.
    pub fn start(live: &Live) -> BrowserServer {
        BrowserServer::start_on(live, 0)
    }

    /// Serves `live` on `port` (0: a free one). A port just given up by a stopped server is
    /// bound again, retried for up to [`WAIT`] while the old socket lets go.
    pub fn start_on(live: &Live, port: u16) -> BrowserServer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let listener = rt.block_on(async {
            let start = tokio::time::Instant::now();
            loop {
                match TcpListener::bind(("127.0.0.1", port)).await {
                    Ok(l) => break l,
                    Err(e) if start.elapsed() > WAIT => panic!("binding 127.0.0.1:{port}: {e}"),
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
        let addr = listener.local_addr().unwrap();
        let router = live
            .mount(Router::new())
            .get("/plain", sync_handler(|_| Response::html(PLAIN)));
        let (stop, stopped) = oneshot::channel::<()>();
        let mut config = ServerConfig::default();
        config.shutdown_grace = Duration::from_secs(5);
        let done = rt.spawn(async move {
            Server::new(router, config)
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        BrowserServer {
            addr,
            rt,
            stop: Some(stop),
            done: Some(done),
        }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Runs `f` to completion on the server's runtime (a second client's socket, say).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Shuts the server down (its sockets closed with 1001) and waits until it has, so its
    /// port is free again.
    pub fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let done = self.done.take().unwrap();
        self.rt.block_on(async {
            tokio::time::timeout(WAIT, done)
                .await
                .expect("the server stops")
                .unwrap();
        });
        self.rt.shutdown_timeout(Duration::from_secs(5));
    }
}

/// The default layout's document, plus a script that records every frame the client sends
/// (`window.__sent`) and an empty favicon (so no 404 reaches the console).
pub fn recording_layout(p: &Page<'_>) -> String {
    let record = "<link rel=\"icon\" href=\"data:,\"><script>window.__sent=[];\
        (function(){var send=WebSocket.prototype.send;WebSocket.prototype.send=function(d){\
        window.__sent.push(String(d));return send.call(this,d);};})();</script>";
    let head = format!("{record}{}", p.head);
    galleon_live::default_layout(&Page { head: &head, ..*p })
}

/// The frames the client sent so far on this page, decoded, whose event is `event`.
pub fn sent(b: &Browser, event: &str) -> Vec<Value> {
    let all = b.execute("return window.__sent || [];", vec![]);
    all.as_array()
        .unwrap()
        .iter()
        .filter_map(|f| serde_json::from_str::<Value>(f.as_str()?).ok())
        .filter(|m| m[3] == event)
        .collect()
}

/// Waits until the live container carries `phx-connected` (the client joined).
pub fn wait_connected(b: &Browser) {
    b.wait_until("the view to connect", WAIT, |b| {
        b.execute(
            "var m = document.querySelector('[data-phx-main]');\
             return !!m && m.classList.contains('phx-connected');",
            vec![],
        ) == json!(true)
    });
}

/// Fails on any SEVERE console entry and on the client's asset version warning.
pub fn assert_clean_console(b: &Browser) {
    let logs = b.console_logs();
    let bad: Vec<&String> = logs
        .iter()
        .filter(|l| l.starts_with("SEVERE") || l.contains("version mismatch"))
        .collect();
    assert!(bad.is_empty(), "console errors: {bad:#?}\nall: {logs:#?}");
}
