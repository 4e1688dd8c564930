//! The CPU pool of `galleon serve` (seed 001's dirty schedulers, `galleon-offload`): its config,
//! the routes of the seed's jobs, and the loopback-only endpoint with the pool's histograms.
//!
//! | route | what |
//! |---|---|
//! | `GET /seal?bytes=N` | seals N bytes with XChaCha20-Poly1305 (libsodium's secretbox case), kind `seal` sized by N |
//! | `GET /hash?cost=N` | an Argon2id hash of N passes over 8 MiB (a job of many milliseconds), kind `hash` |
//! | `GET /_galleon/offload` | the pool and every kind as JSON (counts, hop and run histograms, estimates); loopback peers only |
//!
//! `/seal` and `/hash` are public and a client can flood them: each answers at most
//! `--max-heavy-requests` requests at once (503 with `retry-after` past it), and their jobs hold
//! at most `--heavy-threads` pool threads (one fewer than the pool by default), so page renders
//! and stream chunks always find a thread within one of their own jobs; the pool takes its kinds'
//! jobs in turn.
//!
//! Page renders (kind `render:/NAME`, see `pages.rs`) and streamed chunks (`stream-chunk`) use the
//! same pool. Under the adaptive policy a chunk runs where the model puts it (a template's
//! chunks: inline, on the bulk writer that writes the stream), and always on the pool when streams
//! are written on the request workers (`--bulk-writers 0`). `galleon hops` prints the endpoint's
//! histograms the way the seed printed DTrace's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use galleon_http::{Guard, Request, Response, Router, StatusCode};
use galleon_offload::{Config, Kind, OffloadError, Policy, Pool, Priority};

use crate::work::{self, WorkLimits};

/// The path of the pool's statistics.
pub const STATS_PATH: &str = "/_galleon/offload";

/// Default `--offload-queue`: jobs waiting for a pool thread at most (callers then wait).
pub const DEFAULT_QUEUE: usize = 1024;

/// Default `--offload-nice`: the pool below the request workers (see `bench/README.md`,
/// head-of-line).
pub const DEFAULT_NICE: i32 = 10;

/// Default `--offload-priority`: the normal class at `--offload-nice`. `idle` (`SCHED_IDLE`)
/// lets a waking request worker preempt a pool thread at once, but it starves offloaded work
/// whenever other normal-class threads keep the cores busy (a build beside the server all but
/// stopped `/seal` under `--offload offload`), and on a shared machine it did not lower the
/// light routes' p99 under load below nice 10's (`bench/results/offload.txt`). It is for
/// machines galleon has to itself.
pub const DEFAULT_PRIORITY: Priority = Priority::Normal;

/// Default `--max-heavy-requests`: 0, [`HEAVY_REQUESTS_PER_THREAD`] per pool thread, at most a
/// quarter of `--offload-queue` (so `/seal` and `/hash` together leave half the queue to the rest).
pub const DEFAULT_HEAVY_REQUESTS: usize = 0;

/// The default bound's requests per pool thread. Requests past the thread cap wait in their
/// kind's lane, costing an idle connection each; refused ones come straight back, and clients
/// that loop on a 503 cost the server more CPU than ones that wait (64 clients looping
/// `/hash` against a bound of 4 took page renders to 2.4-4.5x their p50; admitted, to ~1x:
/// bench/results/heavy-flood.txt). Far below the pool's default queue of 1,024, so the heavy
/// kinds cannot fill it.
pub const HEAVY_REQUESTS_PER_THREAD: usize = 64;

/// Default `--heavy-threads`: 0, one fewer than the pool's threads (at least one).
pub const DEFAULT_HEAVY_THREADS: usize = 0;

/// Largest `--max-heavy-requests`.
const MAX_HEAVY_REQUESTS: usize = 1 << 16;

/// Largest `--offload-queue` and `--offload-threads`.
const MAX_QUEUE: usize = 1 << 20;
const MAX_THREADS: usize = 1024;

/// The CPU pool and the seed jobs' bounds (`galleon serve`'s `--offload*`, `--max-seal-bytes`,
/// `--max-hash-cost`); `Default` is the flags' defaults.
#[derive(Debug, Clone)]
pub struct OffloadConfig {
    /// Where CPU work (page renders, stream chunks, /seal, /hash) runs.
    pub policy: Policy,
    /// Pool threads (0: one per core).
    pub threads: usize,
    /// The pool threads' scheduling class.
    pub priority: Priority,
    /// The pool threads' nice value under [`Priority::Normal`] (0 to 19).
    pub nice: i32,
    /// Jobs waiting for a pool thread at most.
    pub queue: usize,
    /// Most bytes one /seal request seals.
    pub max_seal_bytes: usize,
    /// Most Argon2id passes one /hash request runs.
    pub max_hash_cost: u32,
    /// Most /seal requests, and most /hash requests, in flight at once (0: 64 per pool thread,
    /// at most a quarter of `queue`); more are answered 503 with `retry-after`.
    pub heavy_requests: usize,
    /// Most pool threads the /seal jobs, and the /hash jobs, hold at once (0: one fewer than the
    /// pool's threads, at least one).
    pub heavy_threads: usize,
}

impl Default for OffloadConfig {
    fn default() -> OffloadConfig {
        OffloadConfig {
            policy: Policy::default(),
            threads: 0,
            priority: DEFAULT_PRIORITY,
            nice: DEFAULT_NICE,
            queue: DEFAULT_QUEUE,
            max_seal_bytes: work::DEFAULT_MAX_SEAL_BYTES,
            max_hash_cost: work::DEFAULT_MAX_HASH_COST,
            heavy_requests: DEFAULT_HEAVY_REQUESTS,
            heavy_threads: DEFAULT_HEAVY_THREADS,
        }
    }
}

/// Builds the pool `args` describes; range errors name `galleon serve`'s flag. `bulk_writers` is
/// the server's `--bulk-writers`: where streamed pages are written, which decides where their
/// chunks may be computed.
pub fn pool(args: &OffloadConfig, bulk_writers: usize) -> anyhow::Result<(Pool, WorkLimits)> {
    anyhow::ensure!(
        args.threads <= MAX_THREADS,
        "--offload-threads {}: expected 0 (one per core) to {MAX_THREADS}",
        args.threads
    );
    anyhow::ensure!(
        (0..=19).contains(&args.nice),
        "--offload-nice {}: expected 0 to 19",
        args.nice
    );
    anyhow::ensure!(
        (1..=MAX_QUEUE).contains(&args.queue),
        "--offload-queue {}: expected 1 to {MAX_QUEUE}",
        args.queue
    );
    anyhow::ensure!(
        (1..=work::MAX_SEAL_BYTES).contains(&args.max_seal_bytes),
        "--max-seal-bytes {}: expected 1 to {}",
        args.max_seal_bytes,
        work::MAX_SEAL_BYTES
    );
    anyhow::ensure!(
        (1..=work::MAX_HASH_COST).contains(&args.max_hash_cost),
        "--max-hash-cost {}: expected 1 to {}",
        args.max_hash_cost,
        work::MAX_HASH_COST
    );
    anyhow::ensure!(
        args.heavy_requests <= MAX_HEAVY_REQUESTS,
        "--max-heavy-requests {}: expected 0 (64 per pool thread) to {MAX_HEAVY_REQUESTS}",
        args.heavy_requests
    );
    let pool = Pool::new(Config {
        threads: args.threads,
        queue_capacity: args.queue,
        policy: args.policy,
        nice: args.nice,
        priority: args.priority,
        ..Config::default()
    })?;
    let threads = pool.threads();
    anyhow::ensure!(
        args.heavy_threads <= threads,
        "--heavy-threads {}: expected 0 (one fewer than the pool's) to the pool's {threads} threads",
        args.heavy_threads
    );
    let heavy_threads = match args.heavy_threads {
        0 => threads.saturating_sub(1).max(1),
        n => n,
    };
    for name in [SEAL_KIND, HASH_KIND] {
        pool.kind(name).set_max_threads(heavy_threads);
    }
    if bulk_writers == 0 && matches!(args.policy, Policy::Adaptive { .. }) {
        // Streams written on the request workers: their chunks leave the workers whatever they
        // cost. With readers slow the pool is parked between chunks, and its measured hop makes
        // the model keep them inline, where they delay light requests
        // (bench/results/slow_readers.txt). On the bulk writers (the default) the model decides:
        // a chunk computed inline there delays other downloads, not small requests, and a hop
        // per chunk cost /doom half its speed (bench/results/http.txt).
        pool.kind(galleon_http::STREAM_CHUNK_KIND)
            .set_policy(Policy::Offload);
    }
    let limits = WorkLimits {
        max_seal_bytes: args.max_seal_bytes,
        max_hash_cost: args.max_hash_cost,
        max_in_flight: match args.heavy_requests {
            0 => (HEAVY_REQUESTS_PER_THREAD * threads)
                .min(args.queue / 4)
                .max(1),
            n => n,
        },
    };
    Ok((pool, limits))
}

/// The answer to a job the pool could not run: a panic is the server's fault (500, logged); a
/// pool shut down means the server is stopping, a full queue that it is busy (503 both).
pub fn failed(kind: &Kind, e: OffloadError) -> Response {
    match e {
        OffloadError::ShutDown => Response::error(StatusCode(503), "the server is stopping"),
        OffloadError::QueueFull => Response::error(StatusCode(503), "the server is busy"),
        OffloadError::Panicked(msg) => {
            tracing::error!(kind = kind.name(), panic = %msg, "offloaded job panicked");
            Response::error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
        }
    }
}

/// The kind of the `/seal` jobs.
pub const SEAL_KIND: &str = "seal";

/// The kind of the `/hash` jobs.
pub const HASH_KIND: &str = "hash";

/// A permit to run one request of a route bounded to `max_in_flight` at once, or the 503 to
/// answer instead.
fn admit(slots: &Arc<Semaphore>, route: &str) -> Result<OwnedSemaphorePermit, Response> {
    slots.clone().try_acquire_owned().map_err(|_| {
        Response::error(
            StatusCode(503),
            format!("too many {route} requests at once (--max-heavy-requests); retry shortly"),
        )
        .with_header("retry-after", "1")
    })
}

/// Adds `/seal`, `/hash` and the statistics endpoint to `router`.
/// `/_galleon/offload` answers whom `diagnostics` lets in (loopback peers by default).
pub fn mount(router: Router, pool: &Pool, limits: WorkLimits, diagnostics: &Guard) -> Router {
    let diagnostics = diagnostics.clone();
    let slots = || Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
    let seal = (
        pool.clone(),
        pool.kind(SEAL_KIND),
        Arc::new(AtomicU64::new(0)),
    );
    let seal_slots = slots();
    let hash = (pool.clone(), pool.kind(HASH_KIND), slots());
    let stats = pool.clone();
    router
        .get("/seal", move |req: Request| {
            let (pool, kind, counter) = seal.clone();
            let slots = seal_slots.clone();
            async move {
                let bytes = match work::seal_bytes(
                    req.query_value("bytes").as_deref(),
                    limits.max_seal_bytes,
                ) {
                    Ok(n) => n,
                    Err(msg) => return Response::error(StatusCode::BAD_REQUEST, &msg),
                };
                let _permit = match admit(&slots, "/seal") {
                    Ok(p) => p,
                    Err(busy) => return busy,
                };
                let nonce = counter.fetch_add(1, Ordering::Relaxed);
                let job = move || work::seal(bytes, nonce);
                match pool.run(&kind, Some(bytes as u64), job).await {
                    Ok(sealed) => json(&serde_json::json!({
                        "bytes": bytes,
                        "tag": work::hex(&sealed[sealed.len() - 16..]),
                    })),
                    Err(e) => failed(&kind, e),
                }
            }
        })
        .get("/hash", move |req: Request| {
            let (pool, kind, slots) = hash.clone();
            async move {
                let cost =
                    match work::hash_cost(req.query_value("cost").as_deref(), limits.max_hash_cost)
                    {
                        Ok(n) => n,
                        Err(msg) => return Response::error(StatusCode::BAD_REQUEST, &msg),
                    };
                let _permit = match admit(&slots, "/hash") {
                    Ok(p) => p,
                    Err(busy) => return busy,
                };
                match pool
                    .run(&kind, Some(u64::from(cost)), move || work::hash(cost))
                    .await
                {
                    Ok(h) => json(&serde_json::json!({ "cost": cost, "hash": work::hex(&h) })),
                    Err(e) => failed(&kind, e),
                }
            }
        })
        .get(STATS_PATH, move |req: Request| {
            let pool = stats.clone();
            let refused = diagnostics.check(&req);
            async move {
                if let Some(refusal) = refused {
                    return refusal;
                }
                json(&pool.snapshot())
            }
        })
}

fn json(value: &impl serde::Serialize) -> Response {
    match serde_json::to_string(value) {
        Ok(body) => {
            Response::new(StatusCode::OK, body).with_header("content-type", "application/json")
        }
        Err(_) => Response::error(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use galleon_http::Method;

    fn get(target: &str, peer: &str) -> Request {
        Request::new(Method::Get, target, &[], Bytes::new()).with_peer(peer.parse().unwrap())
    }

    #[tokio::test]
    async fn the_jobs_answer_and_the_statistics_are_for_loopback_only() {
        let pool = Pool::new(Config {
            threads: 1,
            ..Config::default()
        })
        .unwrap();
        let router = mount(
            Router::new(),
            &pool,
            WorkLimits::default(),
            &Guard::default(),
        );
        let local = "127.0.0.1:5000";
        let r = router.handle(get("/seal?bytes=1000", local)).await;
        assert_eq!(r.status().0, 200);
        let r = router.handle(get("/seal?bytes=99999999999", local)).await;
        assert_eq!(r.status().0, 400);
        let r = router.handle(get("/hash?cost=0", local)).await;
        assert_eq!(r.status().0, 400);
        let r = router.handle(get(STATS_PATH, "192.0.2.7:5000")).await;
        assert_eq!(r.status().0, 403);
        let r = router.handle(get(STATS_PATH, local)).await;
        assert_eq!(r.status().0, 200);
        let body = r.body().as_full().expect("a whole body").to_vec();
        let stats: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let seal = stats["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == "seal")
            .expect("the seal kind");
        assert_eq!(
            seal["inline"].as_u64().unwrap() + seal["offloaded"].as_u64().unwrap(),
            1
        );
    }

    #[tokio::test]
    async fn past_the_bound_a_heavy_request_is_answered_503_with_retry_after() {
        let pool = Pool::new(Config {
            threads: 1,
            policy: Policy::Offload,
            ..Config::default()
        })
        .unwrap();
        let limits = WorkLimits {
            max_in_flight: 1,
            ..WorkLimits::default()
        };
        let router = Arc::new(mount(Router::new(), &pool, limits, &Guard::default()));
        // Hold the only pool thread so the first /hash stays in flight, queued.
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let blocker = pool.kind("blocker");
        let held = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.run(&blocker, None, move || gate.recv()).await })
        };
        let first = {
            let router = router.clone();
            tokio::spawn(async move { router.handle(get("/hash?cost=1", "127.0.0.1:1")).await })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while pool.snapshot().queued < 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the first /hash never queued"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let busy = router.handle(get("/hash?cost=1", "127.0.0.1:2")).await;
        assert_eq!(busy.status().0, 503);
        let retry = busy
            .headers()
            .find(|(n, _)| n.eq_ignore_ascii_case("retry-after"));
        assert_eq!(retry, Some(("retry-after", "1")));
        // /seal has its own bound: it is admitted (and queued) while /hash is full.
        let seal = {
            let router = router.clone();
            tokio::spawn(async move { router.handle(get("/seal?bytes=10", "127.0.0.1:3")).await })
        };
        while pool.snapshot().queued < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the /seal never queued"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        drop(open);
        assert!(held.await.unwrap().is_ok());
        assert_eq!(first.await.unwrap().status().0, 200);
        assert_eq!(seal.await.unwrap().status().0, 200);
        // The permit came back with the answer.
        let again = router.handle(get("/hash?cost=1", "127.0.0.1:4")).await;
        assert_eq!(again.status().0, 200);
    }

    #[test]
    fn the_heavy_kinds_leave_one_thread_to_the_rest_by_default() {
        let config = |threads, heavy_threads| OffloadConfig {
            threads,
            heavy_threads,
            ..OffloadConfig::default()
        };
        let (pool, limits) = super::pool(&config(3, 0), 1).unwrap();
        assert_eq!(pool.kind(HASH_KIND).max_threads(), 2);
        assert_eq!(pool.kind(SEAL_KIND).max_threads(), 2);
        assert_eq!(limits.max_in_flight, 192, "64 per thread");
        let small_queue = OffloadConfig {
            queue: 40,
            ..config(3, 0)
        };
        let (_, limits) = super::pool(&small_queue, 1).unwrap();
        assert_eq!(limits.max_in_flight, 10, "a quarter of the queue");
        let (pool, _) = super::pool(&config(1, 0), 1).unwrap();
        assert_eq!(pool.kind(HASH_KIND).max_threads(), 1);
        let (pool, _) = super::pool(&config(2, 2), 1).unwrap();
        assert_eq!(pool.kind(HASH_KIND).max_threads(), 2);
        let err = super::pool(&config(2, 3), 1).unwrap_err().to_string();
        assert!(err.contains("--heavy-threads 3"), "{err}");
    }
}
