//! An iterator body's chunks computed off the connection's task, one chunk ahead of the socket:
//! on the server's offload pool when it has one (the CPU pool of `galleon-offload`, under its
//! policy for the `stream-chunk` kind), else on tokio's blocking pool.

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

/// One chunk computed, and the iterator to compute the next from.
type Step = (Option<Result<IoList, BoxError>>, ChunkIter);

/// A chunk being computed: resolves to the chunk and the iterator.
type Computing = tokio::task::JoinHandle<Result<Step, BoxError>>;

fn step(mut it: ChunkIter) -> Step {
    let item = it.next();
    (item, it)
}

/// Starts computing the next chunk of `it` at once (not when first polled), so computing
/// overlaps the write of the chunk before.
fn compute_next(it: ChunkIter, pool: Option<&ChunkPool>) -> Computing {
    match pool {
        Some(p) => {
            let p = p.clone();
            tokio::spawn(async move {
                p.pool
                    .run(&p.kind, None, move || step(it))
                    .await
                    .map_err(BoxError::from)
            })
        }
        None => tokio::task::spawn_blocking(move || Ok(step(it))),
    }
}

/// Runs a chunk iterator off the connection's task, one chunk at a time: the next chunk starts
/// computing when the current one is handed to the connection, so computing overlaps the write,
/// and no thread ever waits for the socket. A slow reader holds at most one finished chunk in
/// memory, never a thread (while a thread that waited for the socket per stream let a few
/// hundred slow readers take the whole blocking pool, and with it static files and SQLite
/// reads). When the connection drops the stream, at most the chunk in progress is computed for
/// nobody. A chunk that panics ends the body with an error, so the response is cut, not
/// completed.
pub(crate) fn offload_iter(it: ChunkIter, pool: Option<&ChunkPool>) -> ChunkStream {
    let pool = pool.cloned();
    futures::stream::unfold(
        Some((compute_next(it, pool.as_ref()), pool)),
        |state| async move {
            let (computing, pool) = state?;
            match computing.await {
                Ok(Ok((Some(Ok(chunk)), it))) => {
                    let next = compute_next(it, pool.as_ref());
                    Some((Ok(chunk), Some((next, pool))))
                }
                Ok(Ok((Some(Err(e)), _))) => Some((Err(e), None)),
                Ok(Ok((None, _))) => None,
                Ok(Err(e)) => Some((Err(e), None)),
                Err(e) => Some((Err(BoxError::from(e)), None)),
            }
        },
    )
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use galleon_offload::{Config, Policy};

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
        let pool = Pool::new(Config {
            threads: 1,
            policy: Policy::Offload,
            ..Config::default()
        })
        .unwrap();
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
        let pool = Pool::new(Config {
            threads: 1,
            policy: Policy::Offload,
            ..Config::default()
        })
        .unwrap();
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
}
