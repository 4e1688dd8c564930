//! `iolist`: what a gathered write costs the sender, per write policy. A ~400 KB and a ~4 KB
//! I/O list (a 120-byte head, then the seed's 410-byte Blah blocks, each at its own address)
//! are written again and again to a loopback TCP socket whose far end (a thread) discards, under
//! `flatten`, `vectored` and the default policy, their turns interleaved. The figure is the
//! sending thread's CPU time per KiB sent (steadier than wall time on a shared machine), as in
//! `cargo bench -p galleon-iolist`, whose sweeps this does not repeat.

use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use cpu_time::ThreadTime;
use galleon_iolist::{IoList, IoWriter, WritePolicy};

use crate::bench::measure::{Collector, Ctx, rotation};

/// A block of the seed's first Blah template: 410 bytes, referenced, not copied.
const BLOCK: usize = 410;
/// The response head before each body.
const HEAD_LEN: usize = 120;
/// How long the sink may take to report that it has read a measurement's bytes.
const SINK_TIMEOUT: Duration = Duration::from_secs(30);

/// `(name, policy)` of each contender.
fn policies() -> [(&'static str, WritePolicy); 3] {
    [
        ("flatten", WritePolicy::flatten()),
        ("vectored", WritePolicy::vectored()),
        ("default", WritePolicy::default()),
    ]
}

/// A body of `blocks` 410-byte blocks at distinct addresses, after a copied head.
fn body(blocks: usize) -> IoList {
    let backing = Bytes::from(
        (0..blocks * BLOCK)
            .map(|i| b'a' + (i % 26) as u8)
            .collect::<Vec<u8>>(),
    );
    let mut list = IoList::new();
    list.push_copy(&[b'h'; HEAD_LEN]);
    for i in 0..blocks {
        list.push_bytes(backing.slice(i * BLOCK..(i + 1) * BLOCK));
    }
    list
}

/// A loopback connection whose far end reads and discards, and says when it has seen the bytes
/// it was told to expect.
struct Sink {
    stream: TcpStream,
    want: mpsc::Sender<u64>,
    done: mpsc::Receiver<std::io::Result<()>>,
}

impl Sink {
    fn new() -> anyhow::Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding a loopback sink")?;
        let addr = listener.local_addr()?;
        let (want_tx, want_rx) = mpsc::channel::<u64>();
        let (done_tx, done_rx) = mpsc::channel();
        thread::Builder::new()
            .name("bench-sink".into())
            .spawn(move || {
                let Ok((mut s, _)) = listener.accept() else {
                    return;
                };
                let _ = s.set_read_timeout(Some(SINK_TIMEOUT));
                let mut buf = vec![0u8; 1 << 20];
                while let Ok(mut left) = want_rx.recv() {
                    let mut result = Ok(());
                    while left > 0 {
                        match galleon_client::read_some(&mut s, &mut buf) {
                            Ok(0) => {
                                result = Err(std::io::ErrorKind::UnexpectedEof.into());
                                break;
                            }
                            Ok(n) => left = left.saturating_sub(n as u64),
                            Err(e) => {
                                result = Err(e);
                                break;
                            }
                        }
                    }
                    let failed = result.is_err();
                    if done_tx.send(result).is_err() || failed {
                        return;
                    }
                }
            })?;
        let stream = TcpStream::connect(addr).context("connecting to the sink")?;
        stream.set_nodelay(true)?;
        Ok(Sink {
            stream,
            want: want_tx,
            done: done_rx,
        })
    }

    /// Writes `list` `times` times with `writer`; the sending thread's CPU time in ns per KiB.
    fn measure(
        &mut self,
        writer: &mut IoWriter,
        list: &IoList,
        times: usize,
    ) -> anyhow::Result<f64> {
        let bytes = (list.len() * times) as u64;
        self.want
            .send(bytes)
            .map_err(|_| anyhow::anyhow!("the loopback sink stopped"))?;
        let cpu = ThreadTime::now();
        for _ in 0..times {
            writer.write_all(&mut self.stream, list)?;
        }
        let spent = cpu.elapsed();
        match self.done.recv_timeout(SINK_TIMEOUT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!("the loopback sink failed: {e}"),
            Err(_) => bail!("the loopback sink did not read the bytes within {SINK_TIMEOUT:?}"),
        }
        Ok(spent.as_nanos() as f64 / (bytes as f64 / 1024.0))
    }
}

/// Runs the suite.
pub(super) fn run(ctx: &Ctx, out: &mut Collector) -> anyhow::Result<()> {
    let rounds = ctx.rounds(15);
    // Bytes per measurement: tens of milliseconds of sending.
    let per_measure = ctx.pick(48 << 20, 4 << 20);
    let bodies = [("400 KB", body(1000)), ("4 KB", body(10))];
    let policies = policies();
    let contenders: Vec<(usize, usize)> = (0..bodies.len())
        .flat_map(|b| (0..policies.len()).map(move |p| (b, p)))
        .collect();
    let mut sinks = contenders
        .iter()
        .map(|_| Sink::new())
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut writers: Vec<IoWriter> = contenders
        .iter()
        .map(|&(_, p)| IoWriter::new(policies[p].1))
        .collect();
    let name = |i: usize| {
        let (b, p) = contenders[i];
        format!("{} list, {} policy", bodies[b].0, policies[p].0)
    };
    for i in 0..contenders.len() {
        out.declare(&name(i), "cpu ns/KiB", true);
    }
    ctx.start((rounds + 1) * contenders.len(), "writing to loopback");
    // Round 0 warms up (buffers, the socket's window) and is not kept.
    for round in 0..=rounds {
        for i in rotation(round, contenders.len()) {
            let (b, p) = contenders[i];
            let (body_name, list) = &bodies[b];
            let times = (per_measure / list.len()).max(1);
            let v = sinks[i].measure(&mut writers[i], list, times)?;
            if round > 0 {
                out.push(&name(i), "cpu ns/KiB", true, v);
            }
            ctx.step(&format!("{body_name} {}", policies[p].0));
        }
    }
    Ok(())
}
