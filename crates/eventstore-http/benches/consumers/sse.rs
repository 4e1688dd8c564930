//! Row 4 of the consumers bench: 200 SSE subscribers of `$all` writing to sockets, against a
//! floor of the same frames written by loops that do nothing else (see the bench's docs).

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::atomic::AtomicBool;

use bytes::{Buf as _, Bytes, BytesMut};
use futures::FutureExt as _;
use galleon_eventstore::{Direction, FrameSubscription};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// On-CPU time of the PostgreSQL server's processes (named `postgres`) alive now, seconds,
/// from `/proc/[pid]/task/*/schedstat`; `None` where there is no schedstat. A diagnostic: other
/// clients of the same server count too.
fn server_cpu_secs() -> Option<f64> {
    let mut ns = 0u64;
    for entry in std::fs::read_dir("/proc").ok()? {
        let dir = entry.ok()?.path();
        let is_pid = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid
            || std::fs::read_to_string(dir.join("comm")).map_or(true, |c| c.trim() != "postgres")
        {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
                ns += text
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Some(ns as f64 / 1e9)
}

/// CPU seconds so far of this process and of the PostgreSQL server (0 where unknown).
fn cpu_now() -> (f64, f64) {
    (
        sched_cpu_secs().unwrap_or(0.0),
        server_cpu_secs().unwrap_or(0.0),
    )
}

/// `n` connected loopback pairs: the server ends (to write to), and a task per client end
/// reading and discarding everything until EOF.
async fn socket_pairs(n: usize) -> (Vec<TcpStream>, Vec<JoinHandle<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let (mut servers, mut readers) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let mut client = client.expect("connecting to the bench's own listener");
        let (server, _) = accepted.expect("accept");
        server.set_nodelay(true).expect("nodelay");
        readers.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = client.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        }));
        servers.push(server);
    }
    (servers, readers)
}

/// A subscriber of `galleon serve`'s SSE path: waits for frames (`Store::subscribe_frames` with
/// `sse_frame`: formatted once per live batch, shared), takes the ones ready now (up to
/// [`SSE_BATCH_EVENTS`] / [`SSE_BATCH_BYTES`]), writes them in one gathered call; counts frames in
/// `delivered`. As `galleon serve`'s body (the frames pushed into an `IoList`, written under the
/// default `WritePolicy`), frames of [`COALESCE_BELOW`] bytes or more are written from the shared
/// bytes and only runs of shorter ones are copied.
async fn sse_subscriber(
    mut sub: FrameSubscription,
    mut socket: TcpStream,
    delivered: Arc<AtomicU64>,
) {
    let mut segments = VecDeque::new();
    let mut small = BytesMut::new();
    let mut last = None;
    loop {
        let mut item = sub.next().await;
        let (mut frames, mut bytes) = (0, 0);
        loop {
            let ready = match item {
                Some(Ok(f)) => f,
                Some(Err(e)) => panic!("SSE subscription failed: {e}"),
                None => panic!("SSE subscription ended"),
            };
            assert!(last < Some(ready.last_position), "positions out of order");
            last = Some(ready.last_position);
            frames += ready.events;
            bytes += ready.bytes.len();
            if ready.bytes.len() < COALESCE_BELOW {
                small.extend_from_slice(&ready.bytes);
            } else {
                if !small.is_empty() {
                    segments.push_back(small.split().freeze());
                }
                segments.push_back(ready.bytes);
            }
            if frames >= SSE_BATCH_EVENTS || bytes >= SSE_BATCH_BYTES {
                break;
            }
            match sub.next().now_or_never() {
                Some(next) => item = next,
                None => break,
            }
        }
        if !small.is_empty() {
            segments.push_back(small.split().freeze());
        }
        write_gathered(&mut socket, &mut segments).await;
        delivered.fetch_add(frames as u64, Ordering::Relaxed);
    }
}

/// Writes `segments` with `writev` calls of at most [`IOV_MAX`] slices, resuming short writes.
async fn write_gathered(socket: &mut TcpStream, segments: &mut VecDeque<Bytes>) {
    while !segments.is_empty() {
        let iov: Vec<IoSlice<'_>> = segments
            .iter()
            .take(IOV_MAX)
            .map(|b| IoSlice::new(b))
            .collect();
        let mut n = socket.write_vectored(&iov).await.expect("socket write");
        assert!(n > 0, "socket closed");
        while n > 0 {
            let front = segments.front_mut().expect("written bytes were queued");
            if n >= front.len() {
                n -= front.len();
                segments.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }
}

/// The floor: one task per socket writing the chunks (each a write of frames)
/// round and round for `window` after [`SETTLE`]; frames/s over the window. Returns the
/// sockets for the next round.
async fn floor_round(
    sockets: Vec<TcpStream>,
    chunks: Arc<Vec<(Bytes, u64)>>,
    window: Duration,
) -> (Round, Vec<TcpStream>) {
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = sockets
        .into_iter()
        .enumerate()
        .map(|(i, mut socket)| {
            let (stop, written, chunks) = (stop.clone(), written.clone(), chunks.clone());
            tokio::spawn(async move {
                let mut k = i;
                while !stop.load(Ordering::Relaxed) {
                    let (bytes, frames) = &chunks[k % chunks.len()];
                    socket.write_all(bytes).await.expect("floor socket write");
                    written.fetch_add(*frames, Ordering::Relaxed);
                    k += 1;
                }
                socket
            })
        })
        .collect();
    tokio::time::sleep(SETTLE).await;
    let (c0, t0, cpu0) = (written.load(Ordering::Relaxed), Instant::now(), cpu_now());
    tokio::time::sleep(window).await;
    let (c1, t1, cpu1) = (written.load(Ordering::Relaxed), Instant::now(), cpu_now());
    stop.store(true, Ordering::Relaxed);
    let mut sockets = Vec::with_capacity(tasks.len());
    for t in tasks {
        sockets.push(t.await.expect("floor task"));
    }
    let round = Round::new(c1 - c0, t1 - t0, cpu0, cpu1);
    (round, sockets)
}

/// One timed round of row 4: frames written, and the CPU it took.
#[derive(Clone, Copy)]
struct Round {
    frames: u64,
    secs: f64,
    /// CPU seconds of this process, and of the PostgreSQL server, over the round.
    own_cpu: f64,
    server_cpu: f64,
}

impl Round {
    fn new(frames: u64, elapsed: Duration, cpu0: (f64, f64), cpu1: (f64, f64)) -> Round {
        Round {
            frames,
            secs: elapsed.as_secs_f64(),
            own_cpu: cpu1.0 - cpu0.0,
            server_cpu: cpu1.1 - cpu0.1,
        }
    }

    fn rate(&self) -> f64 {
        self.frames as f64 / self.secs
    }
}

/// CPU per frame over `rounds`, ns: `(this process, PostgreSQL server)`.
fn cpu_per_frame(rounds: &[Round]) -> (f64, f64) {
    let frames = rounds.iter().map(|r| r.frames).sum::<u64>().max(1) as f64;
    (
        rounds.iter().map(|r| r.own_cpu).sum::<f64>() * 1e9 / frames,
        rounds.iter().map(|r| r.server_cpu).sum::<f64>() * 1e9 / frames,
    )
}

/// [`SSE_WRITERS`] tasks appending [`SSE_APPEND_EVENTS`]-event batches for `duration`, paced to
/// `rate` events/s together, counting events in `appended` as their appends return.
async fn paced_writers(store: &Store, rate: f64, duration: Duration, appended: Arc<AtomicU64>) {
    let period = Duration::from_secs_f64((SSE_WRITERS * SSE_APPEND_EVENTS) as f64 / rate)
        .max(Duration::from_micros(100));
    let deadline = Instant::now() + duration;
    let tasks: Vec<_> = (0..SSE_WRITERS)
        .map(|k| {
            let (store, appended) = (store.clone(), appended.clone());
            tokio::spawn(async move {
                let stream = format!("sse{k}-x");
                let mut tick = tokio::time::interval(period);
                let mut n = 0u64;
                loop {
                    tick.tick().await;
                    if Instant::now() >= deadline {
                        return;
                    }
                    let events = (0..SSE_APPEND_EVENTS)
                        .map(|i| small_event("Sent", 0, k, n + i as u64))
                        .collect();
                    store
                        .append(&stream, ExpectedVersion::Any, events)
                        .await
                        .expect("SSE row append");
                    n += SSE_APPEND_EVENTS as u64;
                    appended.fetch_add(SSE_APPEND_EVENTS as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("SSE row writer");
    }
}

pub(super) struct SseResult {
    pub(super) delivered: f64,
    pub(super) floor: f64,
    pub(super) floors: Vec<f64>,
    pub(super) delivered_rounds: Vec<f64>,
    pub(super) offered: f64,
    /// Of the subscriber rounds' windows.
    pub(super) counters: Counters,
    /// Deliveries/s the offered appends asked for, over the subscriber rounds' windows.
    pub(super) wanted: f64,
    /// Per event, ns, each timed alone over the sample: `RecordedEvent::clone` (the feed hands
    /// each event subscriber its own copy) and `sse_frame` (once per live event, shared by the
    /// frame subscribers).
    pub(super) clone_ns: f64,
    pub(super) frame_ns: f64,
    /// Mean size of the sample's frames.
    pub(super) frame_bytes: f64,
    /// CPU per frame, ns, `(this process, PostgreSQL server)`: in the floor rounds, and in the
    /// subscriber rounds (appends, reads, formatting and writes).
    pub(super) floor_cpu: (f64, f64),
    pub(super) delivered_cpu: (f64, f64),
}

pub(super) async fn sse_fanout(store: &Store, window: Duration) -> SseResult {
    // The floor's frames: events of the same shape as the writers', stored and read back.
    let per_write = env_num("GALLEON_BENCH_FLOOR_FRAMES", SSE_BATCH_EVENTS);
    let sample = (SSE_BATCH_EVENTS * 8).max(per_write * 2);
    let events = (0..sample)
        .map(|i| small_event("Sent", 0, 0, i as u64))
        .collect();
    store
        .append("ssefloor-x", ExpectedVersion::Any, events)
        .await
        .expect("floor sample append");
    let stored = store
        .read_stream("ssefloor-x", 0, sample, Direction::Forward)
        .await
        .expect("floor sample read");
    let chunks: Arc<Vec<(Bytes, u64)>> = Arc::new(
        stored
            .chunks(per_write)
            .map(|c| {
                let mut buf = Vec::new();
                for e in c {
                    buf.extend_from_slice(&sse_frame(e));
                }
                (Bytes::from(buf), c.len() as u64)
            })
            .collect(),
    );

    let (floor_sockets, floor_readers) = socket_pairs(SSE_SUBSCRIBERS).await;
    let (sub_sockets, sub_readers) = socket_pairs(SSE_SUBSCRIBERS).await;
    // Untimed writes through every socket first, so that the first timed round (which also sets
    // the offered append rate) does not pay alone for new connections' buffers growing.
    let mut warm = floor_sockets;
    warm.extend(sub_sockets);
    let (_, mut warm) = floor_round(warm, chunks.clone(), WARM_UP).await;
    let sub_sockets = warm.split_off(SSE_SUBSCRIBERS);
    let floor_sockets = warm;
    let head = store.head_position().await.expect("head");
    let delivered = Arc::new(AtomicU64::new(0));
    let subs: Vec<_> = sub_sockets
        .into_iter()
        .map(|socket| {
            tokio::spawn(sse_subscriber(
                store.subscribe_frames(head, EventFilter::all(), sse_frame),
                socket,
                delivered.clone(),
            ))
        })
        .collect();
    wait_live(store, SSE_SUBSCRIBERS).await;

    let mut floor_sockets = Some(floor_sockets);
    let (mut floors, mut rounds) = (Vec::new(), Vec::new());
    let appended = Arc::new(AtomicU64::new(0));
    let (mut offered, mut counters) = (Vec::new(), Counters::default());
    // Floor, subscribers, subscribers, floor: each side is early and late once.
    for phase in ["floor", "subs", "subs", "floor"] {
        eprintln!("{}: row 4 round: {phase}", store.backend_name());
        if phase == "floor" {
            let (round, s) =
                floor_round(floor_sockets.take().unwrap(), chunks.clone(), window).await;
            floor_sockets = Some(s);
            floors.push(round);
            continue;
        }
        let rate = SSE_OFFER * floors[0].rate() / SSE_SUBSCRIBERS as f64;
        let writers = {
            let (store, appended) = (store.clone(), appended.clone());
            tokio::spawn(
                async move { paced_writers(&store, rate, SETTLE + window, appended).await },
            )
        };
        tokio::time::sleep(SETTLE).await;
        let sample = || {
            (
                delivered.load(Ordering::Relaxed),
                appended.load(Ordering::Relaxed),
                store.fanout_stats(),
                Instant::now(),
                cpu_now(),
            )
        };
        let (d0, a0, s0, t0, cpu0) = sample();
        tokio::time::sleep(window).await;
        let (d1, a1, s1, t1, cpu1) = sample();
        writers.await.expect("SSE writers");
        let secs = (t1 - t0).as_secs_f64();
        rounds.push(Round::new(d1 - d0, t1 - t0, cpu0, cpu1));
        offered.push((a1 - a0) as f64 / secs);
        counters.add(Counters::between(s0, s1, t1 - t0));
        // Every subscriber gets every event before the next round starts.
        let want = appended.load(Ordering::Relaxed) * SSE_SUBSCRIBERS as u64;
        wait_until("the SSE subscribers to deliver every event", || {
            delivered.load(Ordering::Relaxed) == want
        })
        .await;
    }
    stop_subscribers(store, subs).await;
    drop(floor_sockets);
    for r in floor_readers.into_iter().chain(sub_readers) {
        tokio::time::timeout(WAIT, r)
            .await
            .expect("socket reader did not see EOF")
            .expect("socket reader");
    }
    // What each delivered event costs the subscriber path before the socket, timed alone.
    let reps = 40;
    let t = Instant::now();
    for _ in 0..reps {
        for e in &stored {
            std::hint::black_box(e.clone());
        }
    }
    let clone_ns = t.elapsed().as_nanos() as f64 / (reps * stored.len()) as f64;
    let t = Instant::now();
    for _ in 0..reps {
        for e in &stored {
            std::hint::black_box(sse_frame(e));
        }
    }
    let frame_ns = t.elapsed().as_nanos() as f64 / (reps * stored.len()) as f64;
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let rates = |xs: &[Round]| xs.iter().map(Round::rate).collect::<Vec<_>>();
    SseResult {
        delivered: mean(&rates(&rounds)),
        floor: mean(&rates(&floors)),
        floor_cpu: cpu_per_frame(&floors),
        delivered_cpu: cpu_per_frame(&rounds),
        floors: rates(&floors),
        delivered_rounds: rates(&rounds),
        offered: mean(&offered),
        counters,
        wanted: mean(&offered) * SSE_SUBSCRIBERS as f64,
        clone_ns,
        frame_ns,
        frame_bytes: chunks.iter().map(|(b, _)| b.len()).sum::<usize>() as f64
            / stored.len() as f64,
    }
}
