//! `offload`: the hop round trip, from a task on a two-worker tokio runtime (where a request
//! handler submits) to another thread and back, for a trivial job, one at a time: a
//! `galleon-offload` pool (its kind set to always offload, the default spin settings) beside
//! `tokio::task::spawn_blocking`, their turns interleaved. Two figures each: the median and the
//! 99th percentile hop of each round (the benchmark is the median over rounds). The full
//! comparison (rayon, spin settings, one-way hops) is `cargo bench -p galleon-offload`.

use std::hint::black_box;
use std::time::Instant;

use anyhow::Context;
use galleon_offload::{Config, Policy, Pool};

use crate::bench::measure::{Collector, Ctx, rotation};

/// The contenders, in table order.
const MECHS: [&str; 2] = ["galleon-offload pool", "tokio spawn_blocking"];

/// The `q` quantile (0..=1) of sorted `v`.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i.min(v.len() - 1)]
}

/// Runs the suite.
pub(super) fn run(ctx: &Ctx, out: &mut Collector) -> anyhow::Result<()> {
    let rounds = ctx.rounds(21);
    let hops = ctx.pick(4_000, 300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let pool = Pool::new(Config {
        policy: Policy::Offload,
        thread_name: "bench-offload".to_owned(),
        ..Config::default()
    })
    .context("starting the offload pool")?;
    let kind = pool.kind("bench-hop");
    for m in MECHS {
        out.declare(&format!("{m} round trip p50"), "us", true);
        out.declare(&format!("{m} round trip p99"), "us", true);
    }
    ctx.start((rounds + 1) * MECHS.len(), "hops");
    // Round 0 warms up (threads started, the pool's estimates) and is not kept.
    for round in 0..=rounds {
        for m in rotation(round, MECHS.len()) {
            let (pool, kind) = (pool.clone(), kind.clone());
            let times = rt.block_on(async move {
                tokio::spawn(async move {
                    let mut times = Vec::with_capacity(hops);
                    for i in 0..hops {
                        let t = Instant::now();
                        let v = if m == 0 {
                            pool.run(&kind, None, move || black_box(i) ^ 1)
                                .await
                                .map_err(|e| anyhow::anyhow!("offload: {e}"))?
                        } else {
                            tokio::task::spawn_blocking(move || black_box(i) ^ 1)
                                .await
                                .context("spawn_blocking")?
                        };
                        times.push(t.elapsed().as_secs_f64() * 1e6);
                        black_box(v);
                    }
                    anyhow::Ok(times)
                })
                .await
                .context("the hop task panicked")?
            });
            let mut times = times?;
            times.sort_by(f64::total_cmp);
            if round > 0 {
                let name = MECHS[m];
                out.push(
                    &format!("{name} round trip p50"),
                    "us",
                    true,
                    quantile(&times, 0.5),
                );
                out.push(
                    &format!("{name} round trip p99"),
                    "us",
                    true,
                    quantile(&times, 0.99),
                );
            }
            ctx.step(MECHS[m]);
        }
    }
    pool.shutdown();
    pool.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_of_sorted_values() {
        let v: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 51.0);
        assert_eq!(quantile(&v, 0.99), 100.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}
