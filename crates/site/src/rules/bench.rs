//! `galleon rules-bench`: what one match costs, measured in-process without HTTP: the number the
//! issue compares with the BEAM's 140 us (`persistent_term` read + match over 5,000 rules), beside
//! a scan of every rule (what the indexes save) and a deep copy of the set (what `--rules-mode
//! copy` pays per request).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value as Json;

use super::set::{RuleSet, SetLimits};

/// Arguments of `galleon rules-bench` (the binary owns the flags).
#[derive(Debug, Clone)]
pub struct Args {
    /// The rules file.
    pub file: PathBuf,
    /// Rounds over the query mix (256 queries each) for the indexed match.
    pub rounds: u32,
}

/// The query mix: four shapes, values taken from rules spread over the set so every query
/// matches at least one rule.
const SHAPES: &[&[&str]] = &[
    &["country", "channel", "tier"],
    &["product"],
    &["category", "active", "device"],
    &["currency", "segment", "new_customer", "min_age"],
];

const QUERIES: usize = 256;

/// `galleon rules-bench`: times the match and the deep copy and prints them.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=1_000_000).contains(&args.rounds),
        "--rounds {}: expected 1 to 1000000",
        args.rounds
    );
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let limits = SetLimits {
        max_rules: super::DEFAULT_MAX_RULES,
    };
    let t = Instant::now();
    let set = RuleSet::parse(&args.file, &bytes, limits).map_err(anyhow::Error::msg)?;
    let load = t.elapsed();
    anyhow::ensure!(set.len() > 0, "{}: no rules", args.file.display());
    let mut texts: Vec<Vec<(String, String)>> = Vec::with_capacity(QUERIES);
    for k in 0..QUERIES {
        let r = (k * 7919) % set.len();
        let row: serde_json::Map<String, Json> = serde_json::from_slice(set.rule_json(r))?;
        let shape = SHAPES[k % SHAPES.len()];
        let mut pairs = Vec::new();
        for &f in shape {
            if let Some(v) = row.get(f) {
                let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                pairs.push((f.to_owned(), text));
            }
        }
        texts.push(pairs);
    }
    let mut found = 0usize;
    for q in &texts {
        let query = set.query(pairs_of(q)).map_err(|e| anyhow::anyhow!("{e}"))?;
        let m = set.matches(&query);
        anyhow::ensure!(m == set.matches_by_scan(&query), "index and scan disagree");
        found += m.len();
    }

    let time = |n: u32, f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        t.elapsed() / n
    };
    let per_round = |d: Duration| d.as_secs_f64() * 1e6 / QUERIES as f64;
    let index = per_round(time(args.rounds, &mut || {
        for q in &texts {
            if let Ok(query) = set.query(pairs_of(q)) {
                black_box(set.matches(&query));
            }
        }
    }));
    let with_json = per_round(time(args.rounds, &mut || {
        for q in &texts {
            if let Ok(query) = set.query(pairs_of(q)) {
                black_box(set.to_json(&set.matches(&query), super::DEFAULT_MAX_RESULTS));
            }
        }
    }));
    let scan_rounds = (args.rounds / 40).max(1);
    let scan = per_round(time(scan_rounds, &mut || {
        for q in &texts {
            if let Ok(query) = set.query(pairs_of(q)) {
                black_box(set.matches_by_scan(&query));
            }
        }
    }));
    let copies = 20;
    let copy = time(copies, &mut || {
        black_box(set.deep_clone());
    });
    println!(
        "rules: {} x {} fields, {:.2} MB file, parsed and indexed in {:.1} ms",
        set.len(),
        set.fields().len(),
        bytes.len() as f64 / 1e6,
        load.as_secs_f64() * 1e3
    );
    println!(
        "query mix: {QUERIES} queries of 1-4 fields ({:.1} matching rules each on average)",
        found as f64 / QUERIES as f64
    );
    println!(
        "per match, indexed (read the query + intersect): {index:.3} us ({}x faster than the BEAM's 140 us)",
        (140.0 / index).round()
    );
    println!("per match + JSON body (references to the rules' JSON): {with_json:.3} us");
    println!("per match, scanning every rule instead: {scan:.1} us");
    println!(
        "deep copy of the whole set (--rules-mode copy, per request): {:.2} ms",
        copy.as_secs_f64() * 1e3
    );
    Ok(())
}

fn pairs_of(q: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    q.iter().map(|(a, b)| (a.as_str(), b.as_str()))
}
