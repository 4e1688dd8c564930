//! `galleon gen-rules`: the example rule set, reproducibly: the same seed, count and revision give
//! the same bytes. 27 fields like the seed's rule structs: 15 strings (country, channel, product,
//! a free-text note ...), 5 integers, 2 numbers and 5 booleans, one rule per line.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value as Json;

/// Arguments of `galleon gen-rules` (the binary owns the flags).
#[derive(Debug, Clone)]
pub struct Args {
    /// Seed of the generator: another seed, other rules.
    pub seed: u64,
    /// Number of rules.
    pub count: usize,
    /// The `revision` label every rule carries; `None`: `seed-SEED`.
    pub revision: Option<String>,
    /// Write here instead of stdout (through a temporary file renamed into place).
    pub output: Option<PathBuf>,
}

/// Most rules `gen-rules` makes: the default `--rules-max-rules`.
pub const MAX_COUNT: usize = 100_000;

const COUNTRIES: &[&str] = &[
    "NL", "BE", "DE", "FR", "ES", "IT", "PT", "GB", "IE", "DK", "SE", "NO", "FI", "PL", "CZ", "AT",
    "CH", "US", "CA", "JP",
];
const REGIONS: &[&str] = &[
    "north", "south", "east", "west", "central", "islands", "metro", "rural",
];
const CURRENCIES: &[&str] = &[
    "EUR", "GBP", "USD", "CHF", "DKK", "SEK", "NOK", "PLN", "CZK", "JPY",
];
const CHANNELS: &[&str] = &["web", "app", "store", "phone", "partner"];
const SEGMENTS: &[&str] = &[
    "consumer",
    "business",
    "student",
    "senior",
    "family",
    "enterprise",
];
const CATEGORIES: &[&str] = &[
    "books", "music", "games", "garden", "kitchen", "sports", "toys", "tools", "fashion", "beauty",
    "health", "travel",
];
const LANGUAGES: &[&str] = &["nl", "en", "de", "fr", "es", "it", "pt", "da", "sv", "pl"];
const DEVICES: &[&str] = &["desktop", "mobile", "tablet", "tv"];
const PAYMENTS: &[&str] = &["card", "ideal", "paypal", "invoice", "transfer", "voucher"];
const WORDS: &[&str] = &[
    "applies",
    "to",
    "orders",
    "over",
    "the",
    "threshold",
    "when",
    "shipped",
    "from",
    "local",
    "stock",
    "except",
    "during",
    "holiday",
    "sales",
    "and",
    "returns",
    "within",
    "thirty",
    "days",
    "bundle",
    "discount",
    "first",
    "purchase",
    "only",
    "loyalty",
    "members",
    "weekend",
];

/// The declared fields, in order.
const FIELDS: &[(&str, &str)] = &[
    ("id", "integer"),
    ("revision", "string"),
    ("name", "string"),
    ("country", "string"),
    ("region", "string"),
    ("currency", "string"),
    ("channel", "string"),
    ("segment", "string"),
    ("product", "string"),
    ("category", "string"),
    ("brand", "string"),
    ("language", "string"),
    ("device", "string"),
    ("payment", "string"),
    ("promo_code", "string"),
    ("tier", "integer"),
    ("priority", "integer"),
    ("min_age", "integer"),
    ("max_items", "integer"),
    ("price_cap", "number"),
    ("weight", "number"),
    ("active", "boolean"),
    ("new_customer", "boolean"),
    ("vip_only", "boolean"),
    ("stackable", "boolean"),
    ("weekend", "boolean"),
    ("note", "string"),
];

/// xorshift64*: small, fast, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The rule file for `seed`, `count` rules, labelled `revision`.
pub fn generate(seed: u64, count: usize, revision: &str) -> String {
    // Mixed so that nearby seeds give unrelated rules; never zero (xorshift's fixed point).
    let mut rng = Rng((seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1);
    let mut out = String::with_capacity(count * 700 + 4096);
    out.push_str("{\"revision\": ");
    out.push_str(&Json::from(revision).to_string());
    out.push_str(",\n \"fields\": [\n");
    for (i, (name, ty)) in FIELDS.iter().enumerate() {
        let sep = if i + 1 < FIELDS.len() { "," } else { "" };
        out.push_str(&format!(
            "  {{\"name\": \"{name}\", \"type\": \"{ty}\"}}{sep}\n"
        ));
    }
    out.push_str(" ],\n \"rules\": [\n");
    for i in 0..count {
        let note: Vec<&str> = (0..6 + rng.below(8)).map(|_| rng.pick(WORDS)).collect();
        let values: [Json; 27] = [
            Json::from(i as u64 + 1),
            Json::from(revision),
            Json::from(format!("rule-{:05}", i + 1)),
            Json::from(rng.pick(COUNTRIES)),
            Json::from(rng.pick(REGIONS)),
            Json::from(rng.pick(CURRENCIES)),
            Json::from(rng.pick(CHANNELS)),
            Json::from(rng.pick(SEGMENTS)),
            Json::from(format!("P-{:04}", rng.below(400))),
            Json::from(rng.pick(CATEGORIES)),
            Json::from(format!("brand-{:02}", rng.below(40))),
            Json::from(rng.pick(LANGUAGES)),
            Json::from(rng.pick(DEVICES)),
            Json::from(rng.pick(PAYMENTS)),
            Json::from(if rng.chance(30) {
                format!("SAVE{:03}", rng.below(1000))
            } else {
                String::new()
            }),
            Json::from(1 + rng.below(5)),
            Json::from(rng.below(100)),
            Json::from(18 + rng.below(53)),
            Json::from(1 + rng.below(50)),
            // Cents: exact in decimal and read back to the same f64.
            Json::from((rng.below(99_000) + 999) as f64 / 100.0),
            Json::from(rng.below(21) as f64 / 20.0),
            Json::from(rng.chance(80)),
            Json::from(rng.chance(25)),
            Json::from(rng.chance(10)),
            Json::from(rng.chance(50)),
            Json::from(rng.chance(30)),
            Json::from(note.join(" ")),
        ];
        out.push_str("  {");
        for (f, ((name, _), v)) in FIELDS.iter().zip(values.iter()).enumerate() {
            if f > 0 {
                out.push_str(", ");
            }
            out.push('"');
            out.push_str(name);
            out.push_str("\": ");
            out.push_str(&v.to_string());
        }
        out.push_str(if i + 1 < count { "},\n" } else { "}\n" });
    }
    out.push_str(" ]}\n");
    out
}

/// `galleon gen-rules`: writes the generated set to the file or stdout.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.count <= MAX_COUNT,
        "--count {}: at most {MAX_COUNT}",
        args.count
    );
    let revision = args
        .revision
        .unwrap_or_else(|| format!("seed-{}", args.seed));
    anyhow::ensure!(
        !revision.is_empty() && revision.len() <= 256,
        "--revision: 1 to 256 bytes"
    );
    let text = generate(args.seed, args.count, &revision);
    match args.output {
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
        Some(path) => {
            let mut tmp = path.clone().into_os_string();
            tmp.push(format!(".tmp{}", std::process::id()));
            let tmp = PathBuf::from(tmp);
            std::fs::write(&tmp, &text).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, &path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_arguments_give_the_same_bytes_and_other_seeds_other_rules() {
        let a = generate(3, 50, "r");
        assert_eq!(a, generate(3, 50, "r"));
        assert_ne!(a, generate(4, 50, "r"));
        assert_eq!(FIELDS.len(), 27);
        let v: Json = serde_json::from_str(&a).unwrap();
        assert_eq!(v["rules"].as_array().unwrap().len(), 50);
        assert_eq!(v["rules"][49]["id"], 50);
        // One rule per line: line numbers in errors point at rules.
        assert_eq!(a.lines().count(), 50 + 27 + 5);
    }
}
