//! The `cache` suite's tables: what a run measured, per configuration, laid out as the four
//! tables the suite prints (CPU per response, responses per second, callgrind's misses, HTTP),
//! and the benchmark names the run is saved under.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::cache_model::{Config, LENGTHS, PAGE_BYTES, Policy, picks_for};
use crate::bench::measure::median;

/// The set names, smallest first.
pub(crate) const SET_NAMES: [&str; 4] = ["L1-sized", "L2-sized", "L3-sized", "beyond L3"];

/// A configuration's key in the tables: set, length, policy, counts.
pub(crate) type Key = (usize, usize, Policy, bool);

/// The key of `c`.
pub(crate) fn key(c: &Config) -> Key {
    (c.set, c.len, c.policy, c.rc)
}

/// A configuration's benchmark name, stable across machines (sets by name, not size).
pub(crate) fn bench_name(c: &Config) -> String {
    format!(
        "{} set, {} B strings, {}{}",
        SET_NAMES.get(c.set).copied().unwrap_or("set"),
        c.len,
        c.policy.name(),
        if c.rc { " +rc" } else { "" }
    )
}

/// Misses per response from callgrind, for one configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Misses {
    /// Data reads and writes.
    pub(crate) refs: f64,
    /// D1 misses (read + write).
    pub(crate) d1: f64,
    /// Last-level misses (read + write).
    pub(crate) ll: f64,
}

/// What the tables are built from: each configuration's rounds and misses.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// The set sizes, in bytes.
    pub(crate) sets: Vec<usize>,
    pub(crate) cpu: HashMap<Key, Vec<f64>>,
    pub(crate) rps: HashMap<Key, Vec<f64>>,
    /// ns per response of the picks alone, by string length.
    pub(crate) pick: HashMap<usize, Vec<f64>>,
    pub(crate) misses: HashMap<Key, Misses>,
    /// Why there are no misses, if there are none.
    pub(crate) misses_note: Option<String>,
    /// HTTP rows: name, req/s rounds, CPU µs/req rounds.
    pub(crate) http: Vec<(String, Vec<f64>, Vec<f64>)>,
    pub(crate) http_note: Option<String>,
}

/// The median of `v`, or NaN.
fn med(v: Option<&Vec<f64>>) -> f64 {
    v.map_or(f64::NAN, |v| median(v))
}

/// A number for the tables: `-` when not measured.
fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "-".to_owned()
    }
}

impl Tables {
    /// Sender CPU per response, the four variants side by side, the pick alone, and each
    /// policy's cost relative to the same row with the L1-sized set.
    pub(crate) fn cpu_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "sender CPU µs per response ({} KiB of strings; median of rounds)",
            PAGE_BYTES / 1024
        );
        let _ = writeln!(
            s,
            "{:<10} {:>5} {:>5} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9} {:>8}",
            "set",
            "len",
            "picks",
            "copy",
            "copy+rc",
            "ref",
            "ref+rc",
            "pick",
            "copy÷L1",
            "ref÷L1",
            "ref÷copy"
        );
        for (set, name) in SET_NAMES.iter().enumerate().take(self.sets.len()) {
            for len in LENGTHS {
                let v = |p, rc| med(self.cpu.get(&(set, len, p, rc)));
                let l1 = |p| med(self.cpu.get(&(0, len, p, false)));
                let (c, cr, r, rr) = (
                    v(Policy::Copy, false),
                    v(Policy::Copy, true),
                    v(Policy::Ref, false),
                    v(Policy::Ref, true),
                );
                let pick = med(self.pick.get(&len)) / 1000.0;
                let _ = writeln!(
                    s,
                    "{:<10} {:>5} {:>5} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9} {:>8}",
                    name,
                    len,
                    picks_for(len),
                    num(c, 2),
                    num(cr, 2),
                    num(r, 2),
                    num(rr, 2),
                    num(pick, 2),
                    ratio(c / l1(Policy::Copy)),
                    ratio(r / l1(Policy::Ref)),
                    ratio(r / c)
                );
            }
        }
        s
    }

    /// Responses per second, the four variants.
    pub(crate) fn rps_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "responses per second (median of rounds)");
        let _ = writeln!(
            s,
            "{:<10} {:>5} {:>9} {:>9} {:>9} {:>9}",
            "set", "len", "copy", "copy+rc", "ref", "ref+rc"
        );
        for (set, name) in SET_NAMES.iter().enumerate().take(self.sets.len()) {
            for len in LENGTHS {
                let v = |p, rc| num(med(self.rps.get(&(set, len, p, rc))), 0);
                let _ = writeln!(
                    s,
                    "{:<10} {:>5} {:>9} {:>9} {:>9} {:>9}",
                    name,
                    len,
                    v(Policy::Copy, false),
                    v(Policy::Copy, true),
                    v(Policy::Ref, false),
                    v(Policy::Ref, true)
                );
            }
        }
        s
    }

    /// Callgrind's D1 misses per response (with the miss rate of data accesses) and LL misses
    /// per response, the four variants each.
    pub(crate) fn misses_table(&self) -> String {
        let mut s = String::new();
        if let Some(note) = &self.misses_note {
            let _ = writeln!(s, "cache misses: {note}");
            return s;
        }
        let _ = writeln!(
            s,
            "cache misses per response, callgrind's simulation (user space only: the kernel's \
             reads in writev are not simulated); D1 miss rate of data accesses in brackets"
        );
        let _ = writeln!(
            s,
            "{:<10} {:>5} {:>15} {:>15} {:>15} {:>15} {:>8} {:>8} {:>8} {:>8}",
            "set",
            "len",
            "D1 copy",
            "D1 copy+rc",
            "D1 ref",
            "D1 ref+rc",
            "LL copy",
            "+rc",
            "LL ref",
            "+rc"
        );
        for (set, name) in SET_NAMES.iter().enumerate().take(self.sets.len()) {
            for len in LENGTHS {
                let m = |p, rc| self.misses.get(&(set, len, p, rc));
                let d1 = |p, rc| miss_cell(m(p, rc), |m| m.d1);
                let ll = |p, rc| m(p, rc).map_or("-".to_owned(), |m| format!("{:.1}", m.ll));
                let _ = writeln!(
                    s,
                    "{:<10} {:>5} {:>15} {:>15} {:>15} {:>15} {:>8} {:>8} {:>8} {:>8}",
                    name,
                    len,
                    d1(Policy::Copy, false),
                    d1(Policy::Copy, true),
                    d1(Policy::Ref, false),
                    d1(Policy::Ref, true),
                    ll(Policy::Copy, false),
                    ll(Policy::Copy, true),
                    ll(Policy::Ref, false),
                    ll(Policy::Ref, true)
                );
            }
        }
        s
    }

    /// The HTTP rows, with static ÷ dynamic per server.
    pub(crate) fn http_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "HTTP, keep-alive load on 127.0.0.1 (median of rounds; server CPU from /proc)"
        );
        let _ = writeln!(
            s,
            "{:<46} {:>10} {:>12} {:>16}",
            "row", "req/s", "CPU µs/req", "req/s ÷ dynamic"
        );
        for (name, rps, cpu) in &self.http {
            let dynamic = self
                .http
                .iter()
                .find(|(n, _, _)| {
                    n.split(' ').next() == name.split(' ').next() && n.contains("/dynamic")
                })
                .map_or(f64::NAN, |(_, r, _)| median(r));
            let _ = writeln!(
                s,
                "{:<46} {:>10} {:>12} {:>16}",
                name,
                num(median(rps), 0),
                num(median(cpu), 1),
                ratio(median(rps) / dynamic)
            );
        }
        if let Some(note) = &self.http_note {
            let _ = writeln!(s, "{note}");
        }
        s
    }
}

/// `1.23x`, or `-`.
fn ratio(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}x")
    } else {
        "-".to_owned()
    }
}

/// `123.4 (5.6%)`: a miss count per response and its rate, or `-`.
fn miss_cell(m: Option<&Misses>, f: impl Fn(&Misses) -> f64) -> String {
    match m {
        Some(m) if m.refs > 0.0 => format!("{:.1} ({:.1}%)", f(m), f(m) * 100.0 / m.refs),
        _ => "-".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::suites::cache_model;

    #[test]
    fn tables_show_each_row_its_ratios_and_dashes_where_nothing_was_measured() {
        let mut t = Tables {
            sets: vec![1 << 14, 1 << 19],
            ..Tables::default()
        };
        t.cpu
            .insert((0, 65, Policy::Copy, false), vec![2.0, 2.0, 9.0]);
        t.cpu.insert((1, 65, Policy::Copy, false), vec![5.0]);
        t.cpu.insert((1, 65, Policy::Ref, false), vec![10.0]);
        t.pick.insert(65, vec![1500.0]);
        let cpu = t.cpu_table();
        assert_eq!(cpu.lines().count(), 2 + 2 * LENGTHS.len(), "{cpu}");
        let row = cpu
            .lines()
            .find(|l| l.starts_with("L2-sized") && l.contains(" 65 "))
            .unwrap();
        // copy 5.00, L1 copy 2.00 (the median): 2.50x; ref ÷ copy 2.00x; pick 1.50 µs.
        assert!(row.contains("5.00") && row.contains("2.50x"), "{row}");
        assert!(row.contains("2.00x") && row.contains("1.50"), "{row}");
        assert!(
            cpu.lines()
                .any(|l| l.starts_with("L1-sized") && l.contains(" 16 ") && l.contains(" - "))
        );
        t.misses.insert(
            (1, 65, Policy::Copy, false),
            Misses {
                refs: 1000.0,
                d1: 50.0,
                ll: 5.0,
            },
        );
        let m = t.misses_table();
        assert!(m.contains("50.0 (5.0%)") && m.contains(" 5.0 "), "{m}");
        t.misses_note = Some("valgrind not found".into());
        assert!(t.misses_table().contains("valgrind not found"));
        t.http = vec![
            ("beam /static?count=500".into(), vec![2100.0], vec![400.0]),
            ("beam /dynamic?count=500".into(), vec![2000.0], vec![420.0]),
            (
                "galleon /static-strings?count=500".into(),
                vec![16000.0],
                vec![50.0],
            ),
            (
                "galleon /dynamic-strings?count=500".into(),
                vec![10000.0],
                vec![80.0],
            ),
        ];
        let h = t.http_table();
        assert!(h.contains("1.05x") && h.contains("1.60x"), "{h}");
        assert!(t.rps_table().lines().count() == 2 + 2 * LENGTHS.len());
    }

    #[test]
    fn benchmark_names_name_the_set_not_its_size() {
        let c = cache_model::configs(&[1 << 14, 1 << 20, 1 << 25, 1 << 28]);
        assert_eq!(bench_name(&c[0]), "L1-sized set, 16 B strings, copy");
        assert_eq!(
            bench_name(&c[c.len() - 1]),
            "beyond L3 set, 4096 B strings, ref +rc"
        );
        let mut names: Vec<String> = c.iter().map(bench_name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), c.len());
    }
}
