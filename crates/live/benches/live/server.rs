//! The bench's server: a counter and a 300-row list served by galleon-live on 127.0.0.1, in a
//! child process (the bench binary re-run with `LIVE_BENCH_SERVER=1`), so that its CPU time and
//! its RSS are its own. It prints `PORT <n>`, serves until its stdin closes (the parent gone)
//! or `CHILD_LIFE` passed, and adds two routes for the parent: `/bench/broadcast` (calls
//! `Live::broadcast`) and `/bench/stats` (`Live::stats` as JSON).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use galleon_http::{Request, Response, Router, Server, ServerConfig, StatusCode, sync_handler};
use galleon_live::{Info, Limits, Live, LiveView, Socket, ViewError};
use galleon_template::{Engine, Value};
use serde_json::Value as Json;

/// The longest a child lives, whatever its parent does.
const CHILD_LIFE: Duration = Duration::from_secs(1200);

/// Rows of the list view.
pub(crate) const ROWS: usize = 300;

/// The counter: one dynamic, as LiveView's counter example.
const COUNTER: &str = r#"<button phx-click="inc">Clicks: <%= @count %></button>"#;

/// The list: a `for` over 300 rows of three dynamics each (galleon-template's own 300-row case).
const LIST: &str = r#"<table><%= for row <- @rows do %>
<tr><td class="id"><%= row.id %></td><td><%= row.name %></td><td><%= row.status %></td></tr><% end %>
</table>"#;

/// Allocations of under this many bytes are counted by exact size, the rest as one.
const SIZES: usize = 32 * 1024;

/// The allocator: the system's, and in a child run with `LIVE_BENCH_HEAP=1` the live
/// allocations by size, so part 3 can say what an idle view's bytes are.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: [AtomicI64; SIZES + 1] = [const { AtomicI64::new(0) }; SIZES + 1];
static BIG_BYTES: AtomicI64 = AtomicI64::new(0);

fn count(size: usize, by: i64) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE[size.min(SIZES)].fetch_add(by, Ordering::Relaxed);
        if size >= SIZES {
            BIG_BYTES.fetch_add(by * size as i64, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is passed to `System` unchanged; the counting touches only atomics.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `/bench/heap`: the live allocations as `[[size, count], ...]` (sizes with a non-zero
/// count; `SIZES` stands for every size from it up) and the bytes of those from `SIZES` up.
fn heap() -> String {
    let sizes: Vec<[i64; 2]> = LIVE
        .iter()
        .enumerate()
        .map(|(s, n)| [s as i64, n.load(Ordering::Relaxed)])
        .filter(|[_, n]| *n != 0)
        .collect();
    serde_json::json!({"sizes": sizes, "big_bytes": BIG_BYTES.load(Ordering::Relaxed)}).to_string()
}

/// A broadcast to the counters: the broadcaster's clock (ns since the epoch), shown as the
/// count, so each client reads from its diff when the broadcast left.
struct Stamp(i64);

/// A broadcast to the lists: flip row `i`'s status.
struct Bump(usize);

struct Counter;

impl LiveView for Counter {
    fn mount(&mut self, _: &Json, _: &Json, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("count", 0);
        s.subscribe("news");
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, _: &Json, s: &mut Socket) -> Result<(), ViewError> {
        match ev {
            "inc" => s.update_int("count", |n| n + 1),
            _ => return Err(format!("unknown event {ev}").into()),
        }
        Ok(())
    }
    fn handle_info(&mut self, info: Info, s: &mut Socket) -> Result<(), ViewError> {
        if let Some(Stamp(t)) = info.downcast_ref::<Stamp>() {
            s.assign("count", *t);
        }
        Ok(())
    }
}

/// The list view: rows of maps, one flipped per event or broadcast.
struct Rows {
    rows: Vec<Value>,
    shipped: Vec<bool>,
}

fn row(i: usize, shipped: bool) -> Value {
    Value::map([
        ("id", Value::Int(i as i64)),
        ("name", Value::from(format!("order-{i}"))),
        (
            "status",
            Value::from(if shipped { "shipped" } else { "pending" }),
        ),
    ])
}

impl Rows {
    fn new() -> Rows {
        Rows {
            rows: (0..ROWS).map(|i| row(i, false)).collect(),
            shipped: vec![false; ROWS],
        }
    }

    fn bump(&mut self, i: usize, s: &mut Socket) {
        let i = i % ROWS;
        self.shipped[i] = !self.shipped[i];
        self.rows[i] = row(i, self.shipped[i]);
        s.assign("rows", Value::list(self.rows.iter().cloned()));
    }
}

impl LiveView for Rows {
    fn mount(&mut self, _: &Json, _: &Json, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("rows", Value::list(self.rows.iter().cloned()));
        s.subscribe("list");
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, v: &Json, s: &mut Socket) -> Result<(), ViewError> {
        let i = v["i"].as_str().and_then(|i| i.parse().ok());
        match (ev, i) {
            ("bump", Some(i)) => self.bump(i, s),
            _ => return Err(format!("bad event {ev} {v}").into()),
        }
        Ok(())
    }
    fn handle_info(&mut self, info: Info, s: &mut Socket) -> Result<(), ViewError> {
        if let Some(Bump(i)) = info.downcast_ref::<Bump>() {
            self.bump(*i, s);
        }
        Ok(())
    }
}

/// Nanoseconds since the epoch: one clock for both processes.
pub(crate) fn now_ns() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

fn build() -> Live {
    let engine = Engine::builder()
        .live(true)
        .from_sources([("counter", COUNTER), ("list", LIST)])
        .expect("the bench templates compile");
    let limits = Limits {
        max_connections: 20_000,
        events_per_second: 1_000_000,
        event_burst: 1_000_000,
        join_timeout: Duration::from_secs(120),
        idle_timeout: Duration::from_secs(900),
        ..Limits::default()
    };
    Live::builder(&engine)
        .view("/counter", "counter", || Counter)
        .view("/list", "list", Rows::new)
        .limits(limits)
        .build()
        .expect("the bench views build")
}

/// `GET /bench/broadcast?topic=news|list|none&n=K`: K broadcasts in a row; answers
/// `<ns before the first> <views handed to, summed>`.
fn broadcast(live: &Live, next_row: &AtomicUsize, req: &Request) -> Response {
    let topic = req.query_value("topic").unwrap_or_default().into_owned();
    let n: usize = req
        .query_value("n")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
        .min(10_000);
    let t0 = now_ns();
    let mut handed = 0;
    for _ in 0..n {
        let info = if topic == "list" {
            Info::new(Bump(next_row.fetch_add(1, Ordering::Relaxed)))
        } else {
            Info::new(Stamp(now_ns()))
        };
        handed += live.broadcast(&topic, info);
    }
    Response::new(StatusCode::OK, format!("{t0} {handed}"))
}

/// The child's main: serve until stdin closes.
pub(crate) fn run() {
    if std::env::var_os("LIVE_BENCH_HEAP").is_some() {
        COUNTING.store(true, Ordering::Relaxed);
    }
    let workers = std::env::var("LIVE_BENCH_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(1);
    std::thread::spawn(|| {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin();
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        std::process::exit(0);
    });
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_LIFE);
        eprintln!("live bench server: {CHILD_LIFE:?} passed, exiting");
        std::process::exit(2);
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let live = build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("an address").port();
        let next_row = Arc::new(AtomicUsize::new(0));
        let (l1, l2) = (live.clone(), live.clone());
        let router = live
            .mount(Router::new())
            .get(
                "/bench/broadcast",
                sync_handler(move |req: Request| broadcast(&l1, &next_row, &req)),
            )
            .get(
                "/bench/heap",
                sync_handler(|_: Request| Response::new(StatusCode::OK, heap())),
            )
            .get(
                "/bench/stats",
                sync_handler(move |_: Request| {
                    let stats = serde_json::to_string(&l2.stats()).unwrap_or_default();
                    Response::new(StatusCode::OK, stats)
                }),
            );
        let mut config = ServerConfig::default();
        config.limits.max_connections = 20_000;
        config.bulk_writers = 0;
        println!("PORT {port}");
        let _ = std::io::stdout().flush();
        Server::new(router, config)
            .serve(listener, std::future::pending::<()>())
            .await
            .expect("the server runs");
    });
}
