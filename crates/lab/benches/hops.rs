//! The hop round trip: galleon's pool beside `tokio::task::spawn_blocking` and rayon + a tokio
//! oneshot, from a task on a tokio multi-thread runtime (as a request handler would submit), a
//! trivial job, one at a time (seed 001's "many operations back-to-back, concurrency 1").
//! Rounds interleave the contenders (order rotated each round); the table gives medians of the
//! per-round percentiles. Then galleon's two one-way hops, as numbers and as seed 001's
//! linear-bucket histograms, and the CPU its idle pool threads use.
//!
//! `cargo bench -p galleon-lab --features peers --bench hops` (`ROUNDS`, `N` to change the
//! run's size; the defaults take well under a minute).

use galleon_offload::{Config, Kind, LinearBuckets, Policy, Pool, new_histogram};
use hdrhistogram::Histogram;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The BEAM's dirty-CPU round trip on this machine class (quoted, seed side; not measured here).
const BEAM_DIRTY_CPU_ROUND_TRIP_US: f64 = 2.0;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mech {
    /// One of the galleon pools below, by index.
    Galleon(usize),
    SpawnBlocking,
    Rayon,
}

/// galleon's pools: (row name, pool-thread spin, awaiting-side spin, thread name).
const POOLS: [(&str, u64, u64, &str); 3] = [
    (
        "galleon pool (default: spin 20us/10us)",
        20,
        10,
        "galleon-offload",
    ),
    (
        "galleon pool, awaiting side parks",
        20,
        0,
        "galleon-noawait",
    ),
    ("galleon pool, no spinning at all", 0, 0, "galleon-nospin"),
];

const MECHS: [Mech; 5] = [
    Mech::Galleon(0),
    Mech::Galleon(1),
    Mech::Galleon(2),
    Mech::SpawnBlocking,
    Mech::Rayon,
];

impl Mech {
    fn name(self) -> &'static str {
        match self {
            Mech::Galleon(i) => POOLS[i].0,
            Mech::SpawnBlocking => "tokio::task::spawn_blocking",
            Mech::Rayon => "rayon::spawn + tokio oneshot",
        }
    }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// CPU time (ns) used so far by this process's threads whose name starts with `prefix`
/// (Linux: `/proc/self/task/*/schedstat`, else `stat`'s ticks).
fn threads_cpu_ns(prefix: &str) -> Option<u64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = entry.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(&prefix[..prefix.len().min(15)]) {
            continue;
        }
        if let Ok(s) = std::fs::read_to_string(dir.join("schedstat")) {
            total += s.split_whitespace().next()?.parse::<u64>().ok()?;
        } else {
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 2..];
            let f: Vec<&str> = after.split_whitespace().collect();
            let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            total += ticks * 10_000_000;
        }
    }
    Some(total)
}

async fn round_trips(mech: Mech, n: usize, pools: &[(Pool, Kind)]) -> Histogram<u64> {
    let mut h = new_histogram();
    for i in 0..n {
        let t = Instant::now();
        let v = match mech {
            Mech::Galleon(p) => {
                let (pool, kind) = &pools[p];
                pool.run(kind, None, move || black_box(i) ^ 1)
                    .await
                    .unwrap()
            }
            Mech::SpawnBlocking => tokio::task::spawn_blocking(move || black_box(i) ^ 1)
                .await
                .unwrap(),
            Mech::Rayon => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                rayon::spawn(move || {
                    let _ = tx.send(black_box(i) ^ 1);
                });
                rx.await.unwrap()
            }
        };
        h.saturating_record(t.elapsed().as_nanos() as u64);
        black_box(v);
    }
    h
}

/// FNV-1a over `data`: a job whose cost grows with its size, like seed 001's secretbox.
fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The adaptive policy on a job whose cost grows with its size: where each size ran, the
/// estimates, and the switch point, from the hop this run measured.
fn adaptive_sweep(rt: &tokio::runtime::Runtime) {
    let pool = Pool::new(Config {
        thread_name: "galleon-adapt".into(),
        ..Config::default()
    })
    .unwrap();
    let kind = pool.kind("fnv");
    let data = std::sync::Arc::new(vec![7u8; 1 << 20]);
    let sizes = [64usize, 1024, 8 << 10, 64 << 10, 1 << 20];
    let rows = {
        let (pool, kind) = (pool.clone(), kind.clone());
        rt.block_on(async move {
            tokio::spawn(async move {
                let mut rows = Vec::new();
                for &size in &sizes {
                    let jobs = if size >= 1 << 20 { 100 } else { 1000 };
                    let before = kind.snapshot();
                    for _ in 0..jobs {
                        let d = data.clone();
                        let h = pool
                            .run(&kind, Some(size as u64), move || fnv(&d[..size]))
                            .await
                            .unwrap();
                        black_box(h);
                    }
                    let after = kind.snapshot();
                    rows.push((
                        size,
                        after.inline - before.inline,
                        after.offloaded - before.offloaded,
                        kind.estimated_cost(Some(size as u64)),
                        kind.estimated_hop(Some(size as u64)),
                    ));
                }
                rows
            })
            .await
            .unwrap()
        })
    };
    println!();
    println!("adaptive (max overhead 10%, budget 1 ms), FNV-1a over N bytes, from a tokio task:");
    println!(
        "{:>10} {:>12} {:>11} {:>8} {:>10}",
        "bytes", "est. cost us", "est. hop us", "inline", "offloaded"
    );
    for (size, inline, offloaded, cost, hop) in rows {
        println!(
            "{:>10} {:>12.2} {:>11.2} {:>8} {:>10}",
            size,
            cost.map_or(f64::NAN, |c| c.as_secs_f64() * 1e6),
            hop.as_secs_f64() * 1e6,
            inline,
            offloaded
        );
    }
    println!(
        "switch point: {}",
        match kind.switch_point() {
            Some(u64::MAX) => "none (everything measured runs inline)".to_owned(),
            Some(n) => format!("{n} bytes (offloaded from this size up)"),
            None => "unknown".to_owned(),
        }
    );
    pool.join();
}

fn main() {
    let rounds = env("ROUNDS", 9);
    let n = env("N", 20_000);
    let verbose = env("VERBOSE", 0) != 0;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let pools: Vec<(Pool, Kind)> = POOLS
        .iter()
        .map(|&(_, spin, await_spin, name)| {
            let pool = Pool::new(Config {
                policy: Policy::Offload,
                spin: Duration::from_micros(spin),
                await_spin: Duration::from_micros(await_spin),
                thread_name: name.into(),
                ..Config::default()
            })
            .unwrap();
            let kind = pool.kind("hop");
            (pool, kind)
        })
        .collect();
    let (pool, kind) = pools[0].clone();
    // Start rayon's pool before measuring.
    rayon::join(|| (), || ());

    let run = {
        let (pools, kind) = (pools.clone(), kind.clone());
        async move {
            let mut p50: Vec<Vec<f64>> = vec![Vec::new(); MECHS.len()];
            let mut p99: Vec<Vec<f64>> = vec![Vec::new(); MECHS.len()];
            let mut one_way: [Vec<f64>; 4] = Default::default();
            let mut all: Option<galleon_offload::KindHistograms> = None;
            // Warm-up, not counted.
            for &m in &MECHS {
                round_trips(m, n / 10, &pools).await;
            }
            for r in 0..rounds {
                kind.reset_histograms();
                for j in 0..MECHS.len() {
                    let idx = (j + r) % MECHS.len();
                    let h = round_trips(MECHS[idx], n, &pools).await;
                    p50[idx].push(us(h.value_at_quantile(0.5)));
                    p99[idx].push(us(h.value_at_quantile(0.99)));
                }
                let hs = kind.histograms();
                one_way[0].push(us(hs.to_pool.value_at_quantile(0.5)));
                one_way[1].push(us(hs.to_pool.value_at_quantile(0.99)));
                one_way[2].push(us(hs.back.value_at_quantile(0.5)));
                one_way[3].push(us(hs.back.value_at_quantile(0.99)));
                if verbose {
                    let row: Vec<String> = p50.iter().map(|v| format!("{:.2}", v[r])).collect();
                    eprintln!("round {r}: p50 us {}", row.join(" "));
                }
                match &mut all {
                    None => all = Some(hs),
                    Some(a) => {
                        a.to_pool.add(&hs.to_pool).unwrap();
                        a.back.add(&hs.back).unwrap();
                    }
                }
            }
            (p50, p99, one_way, all)
        }
    };
    let wall = Instant::now();
    let (p50, p99, one_way, all) = rt.block_on(async { tokio::spawn(run).await.unwrap() });
    let took = wall.elapsed();

    let p50: Vec<f64> = p50.into_iter().map(median).collect();
    let p99: Vec<f64> = p99.into_iter().map(median).collect();
    let sb = p50[3];
    println!(
        "hop round trip: a tokio task submits a trivial job, another thread runs it, the task awaits the result"
    );
    println!(
        "{} rounds x {} round trips per contender, interleaved; medians of per-round percentiles; {} pool threads, {} tokio workers",
        rounds,
        n,
        pool.threads(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "{:<40} {:>9} {:>9} {:>16}",
        "round trip", "p50 us", "p99 us", "p50 / spawn_bl."
    );
    for (i, m) in MECHS.iter().enumerate() {
        println!(
            "{:<40} {:>9.2} {:>9.2} {:>16.2}",
            m.name(),
            p50[i],
            p99[i],
            p50[i] / sb
        );
    }
    println!(
        "{:<40} {:>9} {:>9} {:>16.2}",
        "BEAM dirty-CPU (seed side, quoted)",
        format!("~{BEAM_DIRTY_CPU_ROUND_TRIP_US:.1}"),
        "-",
        BEAM_DIRTY_CPU_ROUND_TRIP_US / sb
    );
    println!();
    println!(
        "{:<40} {:>9} {:>9}",
        "galleon one-way hops", "p50 us", "p99 us"
    );
    let ow: Vec<f64> = one_way.into_iter().map(median).collect();
    println!(
        "{:<40} {:>9.2} {:>9.2}",
        "to the pool (submit -> job starts)", ow[0], ow[1]
    );
    println!(
        "{:<40} {:>9.2} {:>9.2}",
        "back (job ends -> task resumes)", ow[2], ow[3]
    );
    println!();
    println!(
        "target: galleon p50 <= spawn_blocking / 2 ({:.2} us) and < BEAM ~{BEAM_DIRTY_CPU_ROUND_TRIP_US} us: {}",
        sb / 2.0,
        if p50[0] <= sb / 2.0 && p50[0] < BEAM_DIRTY_CPU_ROUND_TRIP_US {
            "met"
        } else {
            "MISSED"
        }
    );

    if let Some(hs) = all {
        for (title, h) in [
            ("galleon, hop to the pool (nanos), all rounds", &hs.to_pool),
            ("galleon, hop back (nanos), all rounds", &hs.back),
        ] {
            println!();
            println!("{title}:");
            print!("{}", LinearBuckets::fit_between(h, 0.005, 0.85).render(h));
        }
    }

    adaptive_sweep(&rt);

    // Idle: after a burst, pool threads spin at most `spin`, then park.
    std::thread::sleep(Duration::from_millis(50));
    let before = threads_cpu_ns("galleon-");
    let idle = Duration::from_millis(500);
    std::thread::sleep(idle);
    let after = threads_cpu_ns("galleon-");
    println!();
    match (before, after) {
        (Some(b), Some(a)) => println!(
            "idle: the {} pool threads used {:.3} ms CPU in {} ms; default pool parked {}/{}",
            pools.len() * pool.threads(),
            (a - b) as f64 / 1e6,
            idle.as_millis(),
            pool.snapshot().parked,
            pool.threads()
        ),
        _ => println!(
            "idle: no /proc/self/task here; parked {}",
            pool.snapshot().parked
        ),
    }
    println!("measured in {:.1} s", took.as_secs_f64());
    for (p, _) in &pools {
        p.join();
    }
}
