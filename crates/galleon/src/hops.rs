//! `galleon hops`: the CPU pool's measurements from a running `galleon serve` (its loopback-only
//! `/_galleon/offload`), printed as seed 001 printed DTrace's: per job kind, the hop to the pool,
//! the hop back and the run time as linear-bucket histograms (`value | @@@@ count`).

use std::io::Write as _;
use std::time::Duration;

use anyhow::{Context, bail};
use galleon_client::Client;
use galleon_offload::hdrhistogram::Histogram;
use galleon_offload::{LinearBuckets, new_histogram};
use serde_json::Value;

/// How long `galleon hops` waits for the server.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments of `galleon hops`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The server's address (it answers loopback peers only).
    #[arg(long, default_value = "127.0.0.1:4000", value_name = "HOST:PORT")]
    addr: String,
    /// Only the kinds whose name contains this (e.g. `seal`, `render:/blah`).
    #[arg(long, value_name = "TEXT")]
    kind: Option<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let mut client = Client::connect(args.addr.as_str(), IO_TIMEOUT)
        .with_context(|| format!("connecting to {}", args.addr))?;
    let resp = client
        .get(galleon_site::offload::STATS_PATH, &[])
        .context("fetching the pool's statistics")?;
    if resp.status != 200 {
        bail!(
            "{} answered {}: {} (is it a `galleon serve`, asked from its own machine?)",
            galleon_site::offload::STATS_PATH,
            resp.status,
            resp.text().trim()
        );
    }
    let stats: Value = serde_json::from_slice(&resp.body).context("reading the statistics")?;
    let text = render(&stats, args.kind.as_deref());
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

/// The report of a pool snapshot (`Pool::snapshot` as JSON), kinds filtered by `only`.
fn render(stats: &Value, only: Option<&str>) -> String {
    let mut out = format!(
        "pool: {} threads, policy {}, queue {}/{}, busy {}, parked {}, priority {}, hop estimate {}\n",
        stats["threads"],
        stats["policy"].as_str().unwrap_or("?"),
        stats["queued"],
        stats["queue_capacity"],
        stats["busy"],
        stats["parked"],
        stats["priority"].as_str().unwrap_or("?"),
        stats["hop_estimate_ns"]
            .as_f64()
            .map_or("none yet".to_owned(), |ns| format!("{:.2} us", ns / 1000.0)),
    );
    let kinds = stats["kinds"].as_array().map_or(&[][..], Vec::as_slice);
    for kind in kinds {
        let name = kind["name"].as_str().unwrap_or("?");
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        out.push_str(&format!(
            "\nkind {name}: policy {}, inline {}, offloaded {}, panicked {}, switches at size {}\n",
            kind["policy"].as_str().unwrap_or("?"),
            kind["inline"],
            kind["offloaded"],
            kind["panicked"],
            match kind["switch_point"].as_u64() {
                None => "(not adaptive, or nothing measured yet)".to_owned(),
                Some(0) => "0 (every size goes to the pool)".to_owned(),
                Some(u64::MAX) => "never (every size seen runs inline)".to_owned(),
                Some(s) => s.to_string(),
            },
        ));
        for (field, what) in [
            ("to_pool", "hop to the pool"),
            ("waited", "of which queued for a free thread"),
            ("back", "hop back"),
            ("run", "run time"),
        ] {
            let h = &kind[field];
            let count = h["count"].as_u64().unwrap_or(0);
            if count == 0 {
                continue;
            }
            out.push_str(&format!(
                "{what} (nanos): p50 {} p99 {} max {}, {count} samples\n",
                h["p50"], h["p99"], h["max"]
            ));
            let hist = histogram(&h["recorded"]);
            out.push_str(&LinearBuckets::fit(&hist).render(&hist));
        }
    }
    out
}

/// A histogram rebuilt from a summary's `[value, count]` pairs.
fn histogram(recorded: &Value) -> Histogram<u64> {
    let mut h = new_histogram();
    for pair in recorded.as_array().map_or(&[][..], Vec::as_slice) {
        if let (Some(v), Some(n)) = (pair[0].as_u64(), pair[1].as_u64()) {
            h.saturating_record_n(v.max(1), n);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_prints_as_linear_bucket_histograms() {
        let stats = serde_json::json!({
            "threads": 2, "policy": "adaptive:0.1:1000us", "queued": 0, "queue_capacity": 1024,
            "busy": 0, "parked": 2, "priority": "idle", "hop_estimate_ns": 1500.0,
            "kinds": [
                {"name": "seal", "policy": "adaptive:0.1:1000us", "inline": 3, "offloaded": 2,
                 "panicked": 0, "switch_point": 8192,
                 "to_pool": {"count": 2, "p50": 700, "p99": 900, "max": 900,
                             "recorded": [[700, 1], [900, 1]]},
                 "waited": {"count": 1, "p50": 300, "p99": 300, "max": 300,
                            "recorded": [[300, 1]]},
                 "back": {"count": 0, "recorded": []},
                 "run": {"count": 5, "p50": 5000, "p99": 9000, "max": 9000,
                         "recorded": [[5000, 4], [9000, 1]]}},
                {"name": "hash", "policy": "offload", "inline": 0, "offloaded": 0,
                 "panicked": 0, "switch_point": null,
                 "to_pool": {"count": 0}, "back": {"count": 0}, "run": {"count": 0}}
            ]
        });
        let text = render(&stats, None);
        assert!(
            text.starts_with("pool: 2 threads, policy adaptive:0.1:1000us"),
            "{text}"
        );
        assert!(
            text.contains("parked 2, priority idle, hop estimate 1.50 us"),
            "{text}"
        );
        assert!(
            text.contains("of which queued for a free thread (nanos): p50 300 p99 300"),
            "{text}"
        );
        assert!(text.contains("kind seal: policy adaptive:0.1:1000us, inline 3, offloaded 2"));
        assert!(text.contains("switches at size 8192"), "{text}");
        assert!(
            text.contains("hop to the pool (nanos): p50 700 p99 900"),
            "{text}"
        );
        assert!(
            text.contains("value  ------------- Distribution ------------- count"),
            "{text}"
        );
        // The run time's four 5000s fill 4/5 of the 40-character bar, the one 9000 a fifth.
        let rows: Vec<&str> = text.lines().filter(|l| l.contains(" |@")).collect();
        assert!(
            rows.iter()
                .any(|l| l.ends_with(" 4") && l.matches('@').count() == 32),
            "{text}"
        );
        assert!(
            rows.iter()
                .any(|l| l.ends_with(" 1") && l.matches('@').count() == 8),
            "{text}"
        );
        assert!(
            rows.iter()
                .any(|l| l.ends_with(" 1") && l.matches('@').count() == 20),
            "{text}"
        );
        assert!(
            !text.contains("hop back"),
            "an empty histogram is left out: {text}"
        );
        assert!(text.contains("kind hash: policy offload"), "{text}");
        let only = render(&stats, Some("hash"));
        assert!(
            !only.contains("kind seal") && only.contains("kind hash"),
            "{only}"
        );
    }
}
