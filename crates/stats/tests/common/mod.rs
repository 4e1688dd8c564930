//! Shared helpers: a galleon-http server in-process on 127.0.0.1:0 with [`Stats`] as its
//! observer and the diagnostics mounted, a Prometheus scrape reader, an HTML nesting check,
//! and the headless-Chromium lookup.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use galleon_client::Client;
use galleon_http::{Request, Response, Router, ServeSummary, Server, ServerConfig};
use galleon_offload::Pool;
use galleon_stats::{Diagnostics, Stats, StatsConfig};

/// Longest any read of a test may wait before the test fails instead of hanging.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The page `/blah` answers: as in `galleon serve`, rendered as a job of kind `render:/blah`.
pub const BLAH: &str = "<p>blah</p>";

/// The app's own routes: `/blah` (through the pool), `/users/{id}`.
pub fn app(pool: &Pool) -> Router {
    let pool = pool.clone();
    Router::new()
        .get("/blah", move |_req: Request| {
            let pool = pool.clone();
            async move {
                let kind = pool.kind("render:/blah");
                match pool.run(&kind, Some(BLAH.len() as u64), || BLAH).await {
                    Ok(page) => Response::html(page),
                    Err(e) => Response::error(galleon_http::StatusCode(500), e),
                }
            }
        })
        .get("/users/{id}", |req: Request| async move {
            Response::html(format!("user {}", req.param("id").unwrap_or("")))
        })
}

/// A pool for the tests: two threads.
pub fn pool() -> Pool {
    Pool::new(galleon_offload::Config {
        threads: 2,
        ..galleon_offload::Config::default()
    })
    .unwrap()
}

/// A galleon-http server running on its own thread and runtime until stopped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<ServeSummary>>,
}

impl TestServer {
    /// The app's routes and the diagnostics `diagnostics` builds from the stats of `config`.
    pub fn start(
        config: StatsConfig,
        pool: &Pool,
        diagnostics: impl FnOnce(Diagnostics) -> Diagnostics,
    ) -> TestServer {
        let stats = Arc::new(Stats::new(config));
        let router = galleon_stats::mount(app(pool), diagnostics(Diagnostics::new(&stats)));
        let observer = stats.clone();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(l.local_addr().unwrap()).unwrap();
                Server::new(router, ServerConfig::default())
                    .with_observer(observer)
                    .serve(l, async move {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap()
            })
        });
        TestServer {
            addr: addr_rx.recv().unwrap(),
            stats,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The defaults: recording, no access log, the pool shown.
    pub fn with_pool(pool: &Pool) -> TestServer {
        let p = pool.clone();
        TestServer::start(StatsConfig::default(), pool, move |d| d.pool(p))
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr, TIMEOUT).unwrap()
    }

    /// Shuts down and waits for every connection to end: every exchange is reported then.
    pub fn stop(mut self) -> ServeSummary {
        let _ = self.stop.take().unwrap().send(());
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// `GET path`, which must answer 200; its body.
pub fn get_ok(c: &mut Client, path: &str) -> Vec<u8> {
    let r = c.get(path, &[]).unwrap();
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.body
}

/// `text` parsed as Prometheus's text format (failing the test if it does not parse).
pub fn scrape(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("/metrics does not parse: {e}\n{text}"))
}

/// The samples of one metric family by their labels (sorted `k=v` pairs joined by `,`); a
/// histogram's value is its count (the +Inf bucket).
pub fn samples(scrape: &prometheus_parse::Scrape, metric: &str) -> HashMap<String, f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .map(|s| {
            let mut labels: Vec<String> =
                s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.sort();
            let v = match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                prometheus_parse::Value::Histogram(h) => {
                    h.iter().map(|b| b.count).fold(0.0, f64::max)
                }
                prometheus_parse::Value::Summary(_) => f64::NAN,
            };
            (labels.join(","), v)
        })
        .collect()
}

/// Checks that every element of `html` is closed in order (void elements excepted) and that no
/// text holds a bare `<`: what an unescaped label or a broken template would break.
pub fn assert_well_nested(html: &str) {
    const VOID: [&str; 5] = ["meta", "link", "br", "img", "input"];
    let mut open: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        let len = rest[i..]
            .find('>')
            .unwrap_or_else(|| panic!("unclosed tag at {:?}", &rest[i..]));
        let tag = &rest[i + 1..i + len];
        rest = &rest[i + len + 1..];
        if tag.starts_with('!') {
            continue;
        }
        if let Some(closing) = tag.strip_prefix('/') {
            let top = open.pop();
            assert_eq!(top.as_deref(), Some(closing), "</{closing}> closes {top:?}");
            continue;
        }
        let name = tag.split([' ', '\n', '/']).next().unwrap_or("");
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "a bare `<` in text: <{tag}>"
        );
        if !VOID.contains(&name) {
            open.push(name.to_owned());
        }
    }
    assert!(open.is_empty(), "unclosed: {open:?}");
}

/// Every chart's `data-total` on a page, in order.
pub fn chart_totals(html: &str) -> Vec<u64> {
    html.split("class=\"hist\" data-total=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
        .collect()
}

/// Headless Chromium, if installed; without it a test says loudly that it skipped, and fails if
/// `GALLEON_REQUIRE_CHROMIUM` is set (`.ci/run` installs it and sets that).
pub fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("GALLEON_REQUIRE_CHROMIUM").is_none(),
            "GALLEON_REQUIRE_CHROMIUM is set but no chromium is installed"
        );
        eprintln!("\n*** SKIPPED: the /_galleon browser test, no chromium installed ***\n");
    }
    found
}
