//! Where a job runs: [`Policy`] and its parser for a CLI flag.
//!
//! `Policy::Inline`, `Policy::Offload`, `Policy::Adaptive { max_overhead, latency_budget }` (10%, 1
//! ms by default).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The default bound on hop ÷ job cost under [`Policy::Adaptive`]: seed 001's 10%.
pub const DEFAULT_MAX_OVERHEAD: f64 = 0.10;
/// The default latency budget under [`Policy::Adaptive`]: a job estimated longer never runs
/// inline (seed 001: a native call should not hold a scheduler for more than ~1 ms).
pub const DEFAULT_LATENCY_BUDGET: Duration = Duration::from_millis(1);

/// Where the jobs of a kind run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// Always on the caller's thread (the tokio worker), inside the future's `poll`.
    Inline,
    /// Always on a pool thread.
    Offload,
    /// By measured cost: inline while the hop is more than `max_overhead` of the job's estimated
    /// cost, on the pool otherwise, and never inline when the estimate is over `latency_budget`.
    Adaptive {
        /// The largest hop ÷ cost worth paying to leave the worker (default 0.10).
        max_overhead: f64,
        /// No job estimated longer than this runs inline (default 1 ms).
        latency_budget: Duration,
    },
}

impl Policy {
    /// `Adaptive` with the defaults: 10% overhead, 1 ms budget.
    pub const fn adaptive() -> Policy {
        Policy::Adaptive {
            max_overhead: DEFAULT_MAX_OVERHEAD,
            latency_budget: DEFAULT_LATENCY_BUDGET,
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy::adaptive()
    }
}

impl fmt::Display for Policy {
    /// The form [`FromStr`] reads back: `inline`, `offload`, `adaptive:0.1:1000us`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Inline => f.write_str("inline"),
            Policy::Offload => f.write_str("offload"),
            Policy::Adaptive {
                max_overhead,
                latency_budget,
            } => write!(
                f,
                "adaptive:{max_overhead}:{}us",
                latency_budget.as_micros()
            ),
        }
    }
}

/// Why a policy string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad offload policy {0:?}: expected inline, offload, adaptive, adaptive:OVERHEAD or adaptive:OVERHEAD:BUDGET (e.g. adaptive:0.1:1ms)"
)]
pub struct ParsePolicyError(String);

impl FromStr for Policy {
    type Err = ParsePolicyError;

    /// `inline`, `offload`, `adaptive` (defaults), `adaptive:0.1` (max overhead, a fraction in
    /// (0, 10]), `adaptive:0.1:1ms` (and a latency budget in `ns`, `us`, `ms` or `s`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParsePolicyError(s.to_owned());
        let lower = s.trim().to_ascii_lowercase();
        let mut parts = lower.split(':');
        let policy = match parts.next().ok_or_else(bad)? {
            "inline" => Policy::Inline,
            "offload" => Policy::Offload,
            "adaptive" => {
                let max_overhead = match parts.next() {
                    None => DEFAULT_MAX_OVERHEAD,
                    Some(x) => x
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite() && *x > 0.0 && *x <= 10.0)
                        .ok_or_else(bad)?,
                };
                let latency_budget = match parts.next() {
                    None => DEFAULT_LATENCY_BUDGET,
                    Some(x) => parse_duration(x).ok_or_else(bad)?,
                };
                Policy::Adaptive {
                    max_overhead,
                    latency_budget,
                }
            }
            _ => return Err(bad()),
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(policy)
    }
}

/// `250ns`, `20us`, `1ms`, `2s` (an integer and a unit).
fn parse_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let d = match unit {
        "ns" => Duration::from_nanos(n),
        "us" | "µs" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        _ => return None,
    };
    (!d.is_zero()).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_cli_forms() {
        assert_eq!("inline".parse::<Policy>().unwrap(), Policy::Inline);
        assert_eq!("Offload".parse::<Policy>().unwrap(), Policy::Offload);
        assert_eq!("adaptive".parse::<Policy>().unwrap(), Policy::adaptive());
        assert_eq!(
            "adaptive:0.25".parse::<Policy>().unwrap(),
            Policy::Adaptive {
                max_overhead: 0.25,
                latency_budget: DEFAULT_LATENCY_BUDGET
            }
        );
        assert_eq!(
            "adaptive:0.1:500us".parse::<Policy>().unwrap(),
            Policy::Adaptive {
                max_overhead: 0.1,
                latency_budget: Duration::from_micros(500)
            }
        );
        for bad in [
            "",
            "fast",
            "adaptive:",
            "adaptive:0",
            "adaptive:-1",
            "adaptive:nan",
            "adaptive:0.1:1",
            "adaptive:0.1:0ms",
            "adaptive:0.1:1ms:x",
            "inline:0.1",
        ] {
            assert!(bad.parse::<Policy>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn display_round_trips() {
        for p in [
            Policy::Inline,
            Policy::Offload,
            Policy::adaptive(),
            "adaptive:0.3:20ms".parse().unwrap(),
        ] {
            assert_eq!(p.to_string().parse::<Policy>().unwrap(), p);
        }
    }
}
