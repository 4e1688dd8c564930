//! Shared test helpers: a server on its own thread and runtime, raw-socket clients, a test router.
#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use galleon_http::{
    Body, IoList, Request, Response, Router, ServeSummary, Server, ServerConfig, StatusCode,
    TraceStore, sync_handler,
};

/// Time any single test read may wait before the test fails instead of hanging.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A server running on its own thread until dropped or stopped.
pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<ServeSummary>>,
}

impl TestServer {
    pub fn start(router: Router, config: ServerConfig) -> TestServer {
        Self::start_with(router, config, None)
    }

    /// A server whose runtime has only `n` blocking threads.
    pub fn start_with_blocking_threads(
        router: Router,
        config: ServerConfig,
        n: usize,
    ) -> TestServer {
        Self::start_on(router, config, None, n)
    }

    /// Starts a server that records traces and serves them at the trace route.
    pub fn start_traced(router: Router, config: ServerConfig) -> TestServer {
        let traces = TraceStore::new();
        Self::start_with(traces.mount(router), config, Some(traces))
    }

    fn start_with(router: Router, config: ServerConfig, traces: Option<TraceStore>) -> TestServer {
        Self::start_on(router, config, traces, 512)
    }

    /// Starts a server that reports to `observer`.
    pub fn start_observed(
        router: Router,
        config: ServerConfig,
        observer: Arc<dyn galleon_http::Observer>,
    ) -> TestServer {
        Self::start_full(router, config, None, 512, Some(observer), None)
    }

    /// Starts a server whose streamed chunks are jobs of `pool` (under its policy).
    pub fn start_offloaded(
        router: Router,
        config: ServerConfig,
        pool: galleon_offload::Pool,
    ) -> TestServer {
        Self::start_full(router, config, None, 512, None, Some(pool))
    }

    fn start_on(
        router: Router,
        config: ServerConfig,
        traces: Option<TraceStore>,
        blocking_threads: usize,
    ) -> TestServer {
        Self::start_full(router, config, traces, blocking_threads, None, None)
    }

    fn start_full(
        router: Router,
        config: ServerConfig,
        traces: Option<TraceStore>,
        blocking_threads: usize,
        observer: Option<Arc<dyn galleon_http::Observer>>,
        pool: Option<galleon_offload::Pool>,
    ) -> TestServer {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .max_blocking_threads(blocking_threads)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(l.local_addr().unwrap()).unwrap();
                let server = Server::new(router, config);
                let server = match traces {
                    Some(t) => server.with_traces(t),
                    None => server,
                };
                let server = match observer {
                    Some(o) => server.with_observer(o),
                    None => server,
                };
                let server = match pool {
                    Some(p) => server.with_offload(p),
                    None => server,
                };
                server
                    .serve(l, async move {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap()
            })
        });
        let addr = addr_rx.recv().unwrap();
        TestServer {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Begins shutdown without waiting for it.
    pub fn begin_stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    /// Shuts down and waits; returns the server's summary.
    pub fn stop(mut self) -> ServeSummary {
        self.begin_stop();
        self.thread.take().unwrap().join().unwrap()
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        s
    }

    /// Sends `bytes` on a fresh connection and reads until the server closes it.
    pub fn raw(&self, bytes: &[u8]) -> String {
        let mut s = self.connect();
        s.write_all(bytes).unwrap();
        read_to_close(&mut s)
    }

    /// Asserts the server still answers a plain GET.
    pub fn assert_alive(&self) {
        let r = self.raw(b"GET /hello HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n"),
            "server stopped answering: {r:?}"
        );
        assert!(r.ends_with("\r\n\r\nhello"), "{r:?}");
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.begin_stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads until EOF (or a reset), returning what arrived as lossy text.
pub fn read_to_close(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match galleon_client::read_some(s, &mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("read failed after {} bytes: {e}", out.len()),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Status code of the first response in `raw`.
pub fn status_of(raw: &str) -> u16 {
    raw.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Counters shared between a test and its router.
#[derive(Default)]
pub struct Probes {
    /// Chunks the `/stream` iterator has produced.
    pub chunks: AtomicUsize,
    /// Set when the `/sse` stream has been dropped.
    pub sse_dropped: AtomicBool,
    /// Requests `/slow` has finished.
    pub slow_done: AtomicUsize,
}

/// Size of each `/stream` chunk.
pub const STREAM_CHUNK: usize = 64 * 1024;

static TEXT_1K: [u8; 1000] = [b'x'; 1000];

struct DropFlag(Arc<Probes>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.sse_dropped.store(true, Ordering::SeqCst);
    }
}

/// The router most tests use.
pub fn test_router(probes: Arc<Probes>, file: Option<std::path::PathBuf>) -> Router {
    let p1 = probes.clone();
    let p2 = probes.clone();
    let p3 = probes.clone();
    Router::new()
        .get("/hello", |_r: Request| async {
            Response::text(StatusCode::OK, "hello")
        })
        .post("/echo", |r: Request| async move {
            let n = r.body().len().to_string();
            Response::text(StatusCode::OK, IoList::from(r.body().clone())).with_header("x-len", n)
        })
        .get("/big", |r: Request| async move {
            // `n` segments of 1000 bytes, each referenced.
            let n: usize = r
                .query_pairs()
                .find(|(k, _)| k == "n")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(10);
            let mut l = IoList::new();
            for _ in 0..n {
                l.push_static(&TEXT_1K);
            }
            Response::html(l)
        })
        .get("/stream", move |r: Request| {
            let probes = p1.clone();
            async move {
                let n: usize = r
                    .query_pairs()
                    .find(|(k, _)| k == "n")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(3);
                let it = (0..n).map(move |_| {
                    probes.chunks.fetch_add(1, Ordering::SeqCst);
                    let mut l = IoList::new();
                    l.push_bytes(Bytes::from(vec![b'd'; STREAM_CHUNK]));
                    Ok::<_, std::io::Error>(l)
                });
                Response::html(Body::iter(it))
            }
        })
        .get("/sse", move |_r: Request| {
            let probes = p2.clone();
            async move {
                let guard = DropFlag(probes);
                let first = futures::stream::once(async {
                    Ok::<_, galleon_http::BoxError>(IoList::from("data: hello\n\n"))
                });
                let never = futures::stream::pending();
                let s =
                    futures::StreamExt::map(futures::StreamExt::chain(first, never), move |x| {
                        let _keep = &guard;
                        x
                    });
                Response::new(StatusCode::OK, Body::stream(s))
                    .with_header("content-type", "text/event-stream")
            }
        })
        .get("/slow", move |_r: Request| {
            let probes = p3.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(700)).await;
                probes.slow_done.fetch_add(1, Ordering::SeqCst);
                Response::text(StatusCode::OK, "slow done")
            }
        })
        .get("/panic", |_r: Request| async {
            if std::hint::black_box(true) {
                panic!("handler bug");
            }
            Response::not_found()
        })
        .get(
            "/sync",
            sync_handler(|r: Request| {
                Response::text(StatusCode::OK, format!("sync {}", r.query()))
            }),
        )
        .get(
            "/sync-panic",
            sync_handler(|_r: Request| {
                if std::hint::black_box(true) {
                    panic!("sync handler bug");
                }
                Response::not_found()
            }),
        )
        .get("/file", move |_r: Request| {
            let file = file.clone();
            async move {
                let Some(path) = file else {
                    return Response::not_found();
                };
                let f = std::fs::File::open(&path).unwrap();
                let len = f.metadata().unwrap().len();
                Response::new(StatusCode::OK, Body::file(f, len))
            }
        })
}

/// Waits up to `limit` for `cond`.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}
