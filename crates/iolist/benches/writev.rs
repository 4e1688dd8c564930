//! `cargo bench -p galleon-iolist`: what the write policy costs over a real loopback socket.
//!
//! A ~400 KB and a ~4 KB response body, made of segments of one size (16 B to 16 KiB) that point
//! either at one shared literal or at distinct addresses, preceded by a 120-byte head, are sent
//! over a loopback TCP connection to a reader thread that discards them, under `flatten`,
//! `vectored` and the default policy. Each row is the median of several repetitions of the same
//! work in the same run; sender CPU time (per KiB sent) is steadier than throughput on a shared
//! 2-core machine, so the verdict column compares CPU time.
//!
//! Then two sweeps show why the defaults are what they are: `coalesce_below` at fixed `max_iov`,
//! and `max_iov` at `coalesce_below = 0`.
//!
//! `GALLEON_BENCH_REPS=N` sets the repetitions (default 9).

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cpu_time::ThreadTime;
use galleon_iolist::{IoList, IoWriter, WritePolicy, WriteStats};

/// Segment sizes from the issue: around the BEAM's 64- and 256-byte limits, the seed's 205/410
/// byte Blah blocks, and page-sized pieces.
const SEGMENT_SIZES: [usize; 9] = [16, 64, 205, 256, 410, 1024, 2048, 4096, 16384];

/// Bytes sent per repetition, so each repetition lasts tens of milliseconds.
const BYTES_PER_REP: usize = 48 * 1024 * 1024;

/// `max_iov` held fixed while sweeping `coalesce_below`.
const SWEEP_MAX_IOV: usize = 1024;

/// Size of the head that precedes each body, like an HTTP response head.
const HEAD_LEN: usize = 120;

#[derive(Clone, Copy, PartialEq)]
enum Addrs {
    /// Every segment is the same literal.
    Shared,
    /// Every segment has its own address.
    Distinct,
}

struct Body {
    list: IoList,
    // Keeps the distinct-address backing store alive.
    _backing: Option<Bytes>,
}

fn body(total: usize, seg: usize, addrs: Addrs) -> Body {
    let n = total.div_ceil(seg);
    let seg = seg.min(total);
    let mut list = IoList::new();
    list.push_copy(&[b'h'; HEAD_LEN]);
    match addrs {
        Addrs::Shared => {
            let lit: &'static [u8] = Box::leak(vec![b'x'; seg].into_boxed_slice());
            for _ in 0..n {
                list.push_static(lit);
            }
            Body {
                list,
                _backing: None,
            }
        }
        Addrs::Distinct => {
            let backing = Bytes::from((0..n * seg).map(|i| (i % 251) as u8).collect::<Vec<_>>());
            for i in 0..n {
                list.push_bytes(backing.slice(i * seg..(i + 1) * seg));
            }
            Body {
                list,
                _backing: Some(backing),
            }
        }
    }
}

/// A loopback connection whose far end discards and reports when it has seen `n` bytes.
struct Sink {
    stream: TcpStream,
    want: mpsc::Sender<u64>,
    done: mpsc::Receiver<()>,
}

impl Sink {
    fn new() -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let (want_tx, want_rx) = mpsc::channel::<u64>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut buf = vec![0u8; 1 << 20];
            while let Ok(mut left) = want_rx.recv() {
                while left > 0 {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => left = left.saturating_sub(n as u64),
                    }
                }
                if done_tx.send(()).is_err() {
                    return;
                }
            }
        });
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Sink {
            stream,
            want: want_tx,
            done: done_rx,
        }
    }
}

#[derive(Clone, Copy)]
struct Sample {
    mb_s: f64,
    cpu_ns_per_kib: f64,
    stats: WriteStats,
    responses: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Measures every policy on the same body, interleaving their repetitions (rep 1: A B C,
/// rep 2: B C A, ...) so that a burst of noise on the shared machine hits them all alike.
fn measure(list: &IoList, policies: &[WritePolicy], reps: usize) -> Vec<Sample> {
    let per_rep = (BYTES_PER_REP / list.len()).max(1);
    let bytes = (per_rep * list.len()) as u64;
    let mut sinks: Vec<Sink> = policies.iter().map(|_| Sink::new()).collect();
    let mut writers: Vec<IoWriter> = policies.iter().map(|p| IoWriter::new(*p)).collect();
    let mut mbs = vec![Vec::new(); policies.len()];
    let mut cpus = vec![Vec::new(); policies.len()];
    // Repetition 0 warms up and is not counted.
    for rep in 0..=reps {
        for k in 0..policies.len() {
            let i = (rep + k) % policies.len();
            let sink = &mut sinks[i];
            sink.want.send(bytes).expect("sink alive");
            let t0 = Instant::now();
            let c0 = ThreadTime::now();
            for _ in 0..per_rep {
                writers[i].write_all(&mut sink.stream, list).expect("write");
            }
            let cpu = c0.elapsed();
            sink.done
                .recv_timeout(Duration::from_secs(60))
                .expect("sink done");
            let wall = t0.elapsed();
            if rep > 0 {
                mbs[i].push(bytes as f64 / wall.as_secs_f64() / 1e6);
                cpus[i].push(cpu.as_nanos() as f64 / (bytes as f64 / 1024.0));
            }
        }
    }
    let responses = (per_rep * (reps + 1)) as u64;
    writers
        .iter_mut()
        .zip(mbs.into_iter().zip(cpus))
        .map(|(w, (m, c))| Sample {
            mb_s: median(m),
            cpu_ns_per_kib: median(c),
            stats: w.take_stats(),
            responses,
        })
        .collect()
}

fn policy_name(p: WritePolicy) -> String {
    if p == WritePolicy::flatten() {
        "flatten".into()
    } else if p == WritePolicy::vectored() {
        "vectored".into()
    } else if p == WritePolicy::default() {
        "default".into()
    } else {
        format!("c{}/m{}", p.coalesce_below, p.max_iov)
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument other than flags is not supported here.
    let reps: usize = std::env::var("GALLEON_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let policies = [
        WritePolicy::flatten(),
        WritePolicy::vectored(),
        WritePolicy::default(),
    ];
    println!(
        "galleon-iolist writev benchmark: loopback TCP, {reps} reps/row (median), default = {:?}",
        WritePolicy::default()
    );
    println!(
        "{:>5} {:>6} {:>8} {:>9} {:>9} {:>11} {:>10} {:>10} {:>11}",
        "body",
        "seg",
        "addrs",
        "policy",
        "MB/s",
        "cpu ns/KiB",
        "calls/resp",
        "iov/resp",
        "copied/resp"
    );
    let mut verdicts = Vec::new();
    for (label, total) in [("400K", 400 * 1024), ("4K", 4 * 1024)] {
        for addrs in [Addrs::Shared, Addrs::Distinct] {
            for seg in SEGMENT_SIZES {
                let b = body(total, seg, addrs);
                let row = measure(&b.list, &policies, reps);
                for (p, s) in policies.iter().zip(&row) {
                    let p = *p;
                    let r = s.responses as f64;
                    println!(
                        "{:>5} {:>6} {:>8} {:>9} {:>9.0} {:>11.1} {:>10.2} {:>10.1} {:>11.0}",
                        label,
                        seg,
                        if addrs == Addrs::Shared {
                            "shared"
                        } else {
                            "distinct"
                        },
                        policy_name(p),
                        s.mb_s,
                        s.cpu_ns_per_kib,
                        s.stats.syscalls as f64 / r,
                        s.stats.iovecs as f64 / r,
                        s.stats.bytes_copied as f64 / r,
                    );
                }
                let best_cpu = row[0].cpu_ns_per_kib.min(row[1].cpu_ns_per_kib);
                let best_mbs = row[0].mb_s.max(row[1].mb_s);
                verdicts.push((
                    label,
                    seg,
                    addrs,
                    row[2].cpu_ns_per_kib / best_cpu,
                    row[2].mb_s / best_mbs,
                ));
            }
        }
    }
    println!();
    println!("default vs the better of flatten and vectored (cpu: lower is better; MB/s: higher)");
    println!(
        "{:>5} {:>6} {:>8} {:>14} {:>14}",
        "body", "seg", "addrs", "cpu ratio", "MB/s ratio"
    );
    for (label, seg, addrs, cpu, mbs) in &verdicts {
        println!(
            "{:>5} {:>6} {:>8} {:>14.2} {:>14.2}",
            label,
            seg,
            if *addrs == Addrs::Shared {
                "shared"
            } else {
                "distinct"
            },
            cpu,
            mbs
        );
    }

    let thresholds = [0usize, 256, 512, 1024, 2048, 4096, usize::MAX];
    for (label, total) in [("400K", 400 * 1024), ("4K", 4 * 1024)] {
        println!();
        println!(
            "sweep 1: coalesce_below at max_iov={SWEEP_MAX_IOV} (cpu ns/KiB, {label} body, distinct addresses)"
        );
        print!("{:>6}", "seg");
        for t in thresholds {
            if t == usize::MAX {
                print!(" {:>8}", "all");
            } else {
                print!(" {t:>8}");
            }
        }
        println!();
        for seg in [64, 256, 410, 1024, 2048, 4096] {
            let b = body(total, seg, Addrs::Distinct);
            print!("{seg:>6}");
            let ps: Vec<WritePolicy> = thresholds
                .iter()
                .map(|&t| WritePolicy::new(t, SWEEP_MAX_IOV))
                .collect();
            for s in measure(&b.list, &ps, reps) {
                print!(" {:>8.1}", s.cpu_ns_per_kib);
            }
            println!();
        }
    }

    println!();
    println!("sweep 2: max_iov at coalesce_below=0 (cpu ns/KiB, 400K body, distinct addresses)");
    let iovs = [16usize, 64, 256, 1024];
    print!("{:>6}", "seg");
    for m in iovs {
        print!(" {m:>8}");
    }
    println!();
    for seg in [410, 1024, 4096, 16384] {
        let b = body(400 * 1024, seg, Addrs::Distinct);
        print!("{seg:>6}");
        let ps: Vec<WritePolicy> = iovs.iter().map(|&m| WritePolicy::new(0, m)).collect();
        for s in measure(&b.list, &ps, reps) {
            print!(" {:>8.1}", s.cpu_ns_per_kib);
        }
        println!();
    }
}
