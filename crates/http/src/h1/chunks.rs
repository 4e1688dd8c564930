//! An iterator body's chunks, computed where they cost least: with an offload pool, each chunk
//! where the pool's policy for the `stream-chunk` kind puts it (inline, in the task that writes
//! the stream, or on a pool thread, then one chunk ahead of the socket); without one, on tokio's
//! blocking pool, one chunk ahead.
//!
//! Inline is the common case: a chunk of a template render costs about half a microsecond
//! (`/doom`'s 256 KiB), a hop to a pool thread and back 30-50 us, so a chunk that went to the
//! pool every time made the stream wait on wake-ups, not work (0.52x a raw sender's speed,
//! `bench/results/http.txt`). Streams are written on the bulk writers, threads apart from the
//! request workers, so a chunk computed inline there delays other downloads, not small requests.

use futures::StreamExt;
use galleon_iolist::IoList;
use galleon_offload::{Kind, Pool};

use crate::response::{BoxError, ChunkIter, ChunkStream};

/// The pool a server computes stream chunks on, and the kind they are measured as.
#[derive(Debug, Clone)]
pub(crate) struct ChunkPool {
    pool: Pool,
    kind: Kind,
}

impl ChunkPool {
    /// Chunks of streamed bodies go to `pool` as jobs of kind [`STREAM_CHUNK_KIND`].
    pub(crate) fn new(pool: Pool) -> ChunkPool {
        let kind = pool.kind(STREAM_CHUNK_KIND);
        ChunkPool { pool, kind }
    }
}

/// The offload kind of a streamed body's chunks (the name in the pool's statistics).
pub const STREAM_CHUNK_KIND: &str = "stream-chunk";

/// One chunk computed (`None`: the body ended), and the iterator to compute the next from.
type Step = (Option<Result<IoList, BoxError>>, ChunkIter);

/// A chunk, and whether it was computed on another thread (then the next one starts at once,
/// ahead of the socket, since it will most likely go there too).
type Computed = Result<(Step, bool), BoxError>;

fn step(mut it: ChunkIter) -> Step {
    let item = it.next();
    (item, it)
}

/// Where the next chunk comes from.
enum State {
    /// Computed when the connection asks for it, where the policy says.
    OnDemand(ChunkIter),
    /// Started when the chunk before it was handed over, so computing it overlaps that write.
    Ahead(tokio::task::JoinHandle<Computed>),
}

/// Computes the next chunk of `it` where `pool`'s policy for the chunk kind says: on this
/// thread, now, or on a pool thread. Without a pool, on tokio's blocking pool.
async fn compute(mut it: ChunkIter, pool: Option<ChunkPool>) -> Computed {
    let Some(p) = pool else {
        return match tokio::task::spawn_blocking(move || step(it)).await {
            Ok(s) => Ok((s, true)),
            Err(e) => Err(BoxError::from(e)),
        };
    };
    if let Some(here) = p.pool.try_inline(&p.kind, None, || it.next()) {
        return match here {
            Ok(item) => Ok(((item, it), false)),
            Err(e) => Err(BoxError::from(e)),
        };
    }
    match p.pool.offload(&p.kind, None, move || step(it)).await {
        Ok(s) => Ok((s, true)),
        Err(e) => Err(BoxError::from(e)),
    }
}

/// Runs a chunk iterator for a connection, one chunk at a time. A chunk the policy keeps inline
/// is computed in the connection's task when the connection asks for it; a chunk that went to
/// another thread is followed at once by the next one (decided again), so a costly render
/// overlaps the write of the chunk before and a slow reader holds at most one finished chunk
/// beyond the one being written, never a thread. When the connection drops the stream, at most
/// the chunk in progress is computed for nobody. A chunk that panics ends the body with an
/// error, so the response is cut, not completed.
pub(crate) fn offload_iter(it: ChunkIter, pool: Option<&ChunkPool>) -> ChunkStream {
    let pool = pool.cloned();
    futures::stream::unfold(Some((State::OnDemand(it), pool)), |state| async move {
        let (state, pool) = state?;
        let computed = match state {
            State::OnDemand(it) => compute(it, pool.clone()).await,
            State::Ahead(h) => h.await.unwrap_or_else(|e| Err(BoxError::from(e))),
        };
        match computed {
            Ok(((Some(Ok(chunk)), it), elsewhere)) => {
                let next = if elsewhere {
                    State::Ahead(tokio::spawn(compute(it, pool.clone())))
                } else {
                    State::OnDemand(it)
                };
                Some((Ok(chunk), Some((next, pool))))
            }
            Ok(((Some(Err(e)), _), _)) | Err(e) => Some((Err(e), None)),
            Ok(((None, _), _)) => None,
        }
    })
    .boxed()
}
#[cfg(test)]
mod tests {
    use super::*;
    use galleon_offload::{Config, Policy};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    fn one_thread(policy: Policy) -> Pool {
        Pool::new(Config {
            threads: 1,
            policy,
            ..Config::default()
        })
        .unwrap()
    }

    fn counting(n: usize) -> ChunkIter {
        Box::new((0..n).map(|i| Ok(IoList::from(format!("{i},")))))
    }

    async fn collect(mut s: ChunkStream) -> Result<String, String> {
        let mut out = String::new();
        while let Some(c) = s.next().await {
            let c = c.map_err(|e| e.to_string())?;
            out.push_str(std::str::from_utf8(&c.to_vec()).unwrap());
        }
        Ok(out)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chunks_come_in_order_on_the_pool_and_on_the_blocking_pool() {
        let pool = one_thread(Policy::Offload);
        let chunks = ChunkPool::new(pool.clone());
        let want: String = (0..50).map(|i| format!("{i},")).collect();
        assert_eq!(
            collect(offload_iter(counting(50), Some(&chunks)))
                .await
                .unwrap(),
            want
        );
        assert_eq!(
            collect(offload_iter(counting(50), None)).await.unwrap(),
            want
        );
        let kinds = pool.snapshot().kinds;
        let kind = kinds.iter().find(|k| k.name == STREAM_CHUNK_KIND).unwrap();
        // 50 chunks and the end, each computed on the pool.
        assert_eq!(kind.offloaded, 51);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_chunk_ends_the_body_with_an_error_and_the_pool_goes_on() {
        let pool = one_thread(Policy::Offload);
        let chunks = ChunkPool::new(pool.clone());
        let it: ChunkIter = Box::new((0..3).map(|i| {
            assert!(i < 2, "chunk {i} broke");
            Ok(IoList::from("x"))
        }));
        let e = collect(offload_iter(it, Some(&chunks))).await.unwrap_err();
        assert!(e.contains("chunk 2 broke"), "{e}");
        assert_eq!(
            collect(offload_iter(counting(2), Some(&chunks)))
                .await
                .unwrap(),
            "0,1,"
        );
    }

    /// An iterator that counts how many chunks were pulled and names the threads it ran on.
    fn watched(n: usize, pulled: Arc<AtomicUsize>, threads: Arc<Mutex<Vec<String>>>) -> ChunkIter {
        Box::new((0..n).map(move |i| {
            pulled.fetch_add(1, Ordering::SeqCst);
            let name = std::thread::current().name().unwrap_or("").to_owned();
            threads.lock().unwrap().push(name);
            Ok(IoList::from(format!("{i},")))
        }))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_inline_chunk_is_computed_when_asked_for_in_the_connections_task() {
        // The policy keeps chunks inline: each one is computed when the connection asks for it,
        // on the thread polling the stream (no task, no pool thread), and none ahead of it.
        let pool = one_thread(Policy::Inline);
        let chunks = ChunkPool::new(pool.clone());
        let pulled = Arc::new(AtomicUsize::new(0));
        let threads = Arc::new(Mutex::new(Vec::new()));
        let mut s = offload_iter(watched(5, pulled.clone(), threads.clone()), Some(&chunks));
        for i in 0..5 {
            let c = s.next().await.unwrap().unwrap();
            assert_eq!(c.to_vec(), format!("{i},").into_bytes());
            // Given time, nothing is computed before it is asked for.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            assert_eq!(pulled.load(Ordering::SeqCst), i + 1, "chunk {i}");
        }
        assert!(s.next().await.is_none());
        let names = threads.lock().unwrap().clone();
        assert!(
            names.iter().all(|n| !n.starts_with("galleon-offload")),
            "{names:?}"
        );
        let kinds = pool.snapshot().kinds;
        let kind = kinds.iter().find(|k| k.name == STREAM_CHUNK_KIND).unwrap();
        assert_eq!((kind.inline, kind.offloaded), (6, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_offloaded_chunk_is_followed_by_the_next_one_ahead_of_the_socket() {
        let pool = one_thread(Policy::Offload);
        let chunks = ChunkPool::new(pool.clone());
        let pulled = Arc::new(AtomicUsize::new(0));
        let threads = Arc::new(Mutex::new(Vec::new()));
        let mut s = offload_iter(watched(5, pulled.clone(), threads.clone()), Some(&chunks));
        assert_eq!(s.next().await.unwrap().unwrap().to_vec(), b"0,");
        // The second chunk is computed while the first is being written.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while pulled.load(Ordering::SeqCst) < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "no chunk computed ahead"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        // One ahead, not more.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(pulled.load(Ordering::SeqCst), 2);
        let rest = collect(s).await.unwrap();
        assert_eq!(rest, "1,2,3,4,");
        let names = threads.lock().unwrap().clone();
        assert!(
            names.iter().all(|n| n.starts_with("galleon-offload")),
            "{names:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_chunk_that_panics_inline_ends_the_body_with_an_error() {
        let pool = one_thread(Policy::Inline);
        let chunks = ChunkPool::new(pool);
        let it: ChunkIter = Box::new((0..3).map(|i| {
            assert!(i < 1, "chunk {i} broke");
            Ok(IoList::from("x"))
        }));
        let e = collect(offload_iter(it, Some(&chunks))).await.unwrap_err();
        assert!(e.contains("chunk 1 broke"), "{e}");
    }
}
