//! `cache`: where hardware caching matters for a page of strings (seed 002, issue 20), one factor
//! at a time, in one run:
//! - in process ([`super::cache_model`]): responses of 32 KiB of strings picked at random from a
//!   set sized for L1, L2, L3 or far beyond L3 (read from sysfs), of 16 to 4096-byte strings,
//!   copied by the writer (user-space reads) or referenced (the kernel reads them in `writev`),
//!   with or without a per-string reference count, written to a loopback socket whose far end
//!   discards; sender CPU per response and responses per second, interleaved rounds, medians;
//!   and the random picks alone;
//! - the same configurations in a child under callgrind's cache simulation (hardware counters
//!   are not readable on the VMs this runs on): D1 and LL misses per response, user space only;
//! - over HTTP ([`super::cache_http`]): the seed's `/static` against `/dynamic`, on galleon and
//!   on the BEAM peer.
//!
//! The suite prints its own tables ([`super::cache_tables`]; the matrix does not fit one line per
//! benchmark).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::cache_http::{self, Peer, Server};
use super::cache_model::{
    self, Config, LENGTHS, MAX_SET_BYTES, PAGE_BYTES, ProbeSpec, Renderer, Sink, Strings, picks_for,
};
use super::cache_tables::{Misses, SET_NAMES, Tables, bench_name, key};
use crate::bench::measure::{Collector, Ctx, rotation};

/// Where Linux describes the first CPU's caches.
const SYSFS_CACHES: &str = "/sys/devices/system/cpu/cpu0/cache";
/// Most responses of one timed measurement.
const MAX_RESPONSES: u64 = 200_000;
/// How long the callgrind child may run.
const PROBE_TIMEOUT: Duration = Duration::from_secs(480);
/// The functions after which callgrind dumps: the end of a configuration's setup, and of its
/// measured renders.
const PROBE_MARK: &str = "*galleon_cache_probe_mark*";
const PROBE_FN: &str = "*galleon_cache_probe_measured*";

/// The machine's data caches, in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caches {
    /// Level 1 data cache, per core.
    pub(crate) l1d: usize,
    /// Level 2, per core.
    pub(crate) l2: usize,
    /// Level 3 (last level), shared.
    pub(crate) l3: usize,
    /// Where the sizes came from, or which were assumed.
    pub(crate) source: String,
}

impl Caches {
    /// Reads `DIR/index*/{level,type,size}`; a level it does not find is assumed (32 KiB, 1 MiB,
    /// 32 MiB) and said so in [`Caches::source`].
    pub(crate) fn read(dir: &Path) -> Caches {
        let (mut l1d, mut l2, mut l3) = (None, None, None);
        for i in 0..16 {
            let d = dir.join(format!("index{i}"));
            let get = |f: &str| std::fs::read_to_string(d.join(f)).ok();
            let (Some(level), Some(kind), Some(size)) = (get("level"), get("type"), get("size"))
            else {
                continue;
            };
            let size = parse_size(&size);
            match (level.trim(), kind.trim()) {
                ("1", "Data") => l1d = l1d.or(size),
                ("2", "Unified" | "Data") => l2 = l2.or(size),
                ("3", "Unified" | "Data") => l3 = l3.or(size),
                _ => {}
            }
        }
        let mut assumed = Vec::new();
        let mut or = |v: Option<usize>, name: &str, d: usize| {
            v.unwrap_or_else(|| {
                assumed.push(name.to_owned());
                d
            })
        };
        let (l1d, l2, l3) = (
            or(l1d, "L1d", 32 << 10),
            or(l2, "L2", 1 << 20),
            or(l3, "L3", 32 << 20),
        );
        let source = if assumed.is_empty() {
            dir.display().to_string()
        } else {
            format!(
                "{} ({} not found there: assumed)",
                dir.display(),
                assumed.join(", ")
            )
        };
        Caches {
            l1d,
            l2,
            l3,
            source,
        }
    }

    /// One line: the sizes and where they came from.
    pub(crate) fn describe(&self) -> String {
        format!(
            "caches: L1d {} per core, L2 {} per core, L3 {} shared (from {})",
            size_name(self.l1d),
            size_name(self.l2),
            size_name(self.l3),
            self.source
        )
    }
}

/// `48K`, `2048K`, `1M`, `107520K`, or plain bytes, in bytes.
pub(crate) fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .ok()?
        .checked_mul(mult)
        .filter(|&v| v > 0)
}

/// A size for people: `48 KiB`, `2 MiB`, `52.5 MiB`.
pub(crate) fn size_name(b: usize) -> String {
    let (v, unit) = if b >= 1 << 30 {
        (b as f64 / (1u64 << 30) as f64, "GiB")
    } else if b >= 1 << 20 {
        (b as f64 / (1u64 << 20) as f64, "MiB")
    } else if b >= 1 << 10 {
        (b as f64 / 1024.0, "KiB")
    } else {
        (b as f64, "B")
    };
    if (v - v.round()).abs() < 0.05 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// The four working sets, in bytes: half of L1d, half of L2, half of L3, four times L3 (at most
/// [`MAX_SET_BYTES`]); each at least the longest string. `--quick` shrinks the last two by 16.
pub(crate) fn sets(c: &Caches, quick: bool) -> [usize; 4] {
    let shrink = if quick { 16 } else { 1 };
    let longest = LENGTHS[LENGTHS.len() - 1];
    [
        c.l1d / 2,
        c.l2 / 2,
        c.l3 / 2 / shrink,
        (c.l3.saturating_mul(4) / shrink).min(MAX_SET_BYTES),
    ]
    .map(|b| b.max(longest))
}

/// Data references and misses in one callgrind output file: its `events:` line names the
/// columns of its `totals:` (or `summary:`) line.
pub(crate) fn parse_callgrind(text: &str) -> anyhow::Result<(f64, f64, f64)> {
    let events: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("events:"))
        .context("no events: line (was --cache-sim=yes given?)")?
        .split_whitespace()
        .collect();
    let totals = text
        .lines()
        .find_map(|l| l.strip_prefix("totals:"))
        .or_else(|| text.lines().find_map(|l| l.strip_prefix("summary:")))
        .context("no totals: or summary: line")?;
    let values: Vec<f64> = totals
        .split_whitespace()
        .map(|v| v.parse::<f64>().context("a total that is not a number"))
        .collect::<anyhow::Result<_>>()?;
    let get = |name: &str| -> anyhow::Result<f64> {
        let i = events
            .iter()
            .position(|e| *e == name)
            .with_context(|| format!("no {name} event"))?;
        // Trailing zero columns may be left out.
        Ok(values.get(i).copied().unwrap_or(0.0))
    };
    Ok((
        get("Dr")? + get("Dw")?,
        get("D1mr")? + get("D1mw")?,
        get("DLmr")? + get("DLmw")?,
    ))
}

/// The dump files callgrind wrote as `BASE.N`, in dump order.
pub(crate) fn dump_files(dir: &Path, base: &str) -> Vec<PathBuf> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| {
                let p = e.ok()?.path();
                let n = p
                    .file_name()?
                    .to_str()?
                    .strip_prefix(base)?
                    .strip_prefix('.')?
                    .parse()
                    .ok()?;
                Some((n, p))
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// Runs the probe child under callgrind; misses per response of each configuration, in order.
fn callgrind(ctx: &Ctx, spec: &ProbeSpec, configs: &[Config]) -> anyhow::Result<Vec<Misses>> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let dir = tempfile::tempdir().context("a directory for callgrind's output")?;
    let log = dir.path().join("valgrind.log");
    let mut child = Command::new("valgrind")
        .args(["--tool=callgrind", "--cache-sim=yes"])
        .arg(format!("--dump-after={PROBE_MARK}"))
        .arg(format!("--dump-after={PROBE_FN}"))
        .arg(format!(
            "--callgrind-out-file={}",
            dir.path().join("cg.out").display()
        ))
        .arg(format!("--log-file={}", log.display()))
        .arg(&exe)
        .args(["bench", "--cache-probe", &spec.to_arg()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting valgrind")?;
    let start = Instant::now();
    let mut done = 0;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > PROBE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the callgrind child took over {PROBE_TIMEOUT:?}");
        }
        let n = dump_files(dir.path(), "cg.out").len() / 2;
        while done < n.min(configs.len()) {
            ctx.step(&format!("callgrind: {}", bench_name(&configs[done])));
            done += 1;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if !status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        bail!(
            "the callgrind child failed ({status}): {}",
            tail.join(" | ")
        );
    }
    // Two dumps per configuration (its setup, then its measured renders), then perhaps the one
    // callgrind writes at exit: the measured ones are the even-numbered.
    let mut files: Vec<PathBuf> = dump_files(dir.path(), "cg.out")
        .into_iter()
        .skip(1)
        .step_by(2)
        .collect();
    files.truncate(configs.len());
    if files.len() != configs.len() {
        bail!(
            "callgrind wrote {} dumps for {} configurations",
            files.len(),
            configs.len()
        );
    }
    while done < configs.len() {
        ctx.step("callgrind");
        done += 1;
    }
    let n = spec.measured as f64;
    files
        .iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            let (refs, d1, ll) =
                parse_callgrind(&text).with_context(|| format!("parsing {}", f.display()))?;
            Ok(Misses {
                refs: refs / n,
                d1: d1 / n,
                ll: ll / n,
            })
        })
        .collect()
}

/// `valgrind` on the PATH.
fn have_valgrind() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs the in-process matrix and the picks alone.
fn matrix(ctx: &Ctx, t: &mut Tables, out: &mut Collector, caches: &Caches) -> anyhow::Result<()> {
    let rounds = ctx.rounds(7);
    let dur = ctx.pick(Duration::from_millis(50), Duration::from_millis(5));
    let configs = cache_model::configs(&t.sets);
    let largest = t.sets.iter().copied().max().unwrap_or(0);
    let strings = Strings::new(largest, largest / LENGTHS[0])?;
    let mut sink = Sink::new()?;
    let mut r = Renderer::new(0x2545_f491);
    for c in &configs {
        out.declare(&format!("{}: cpu", bench_name(c)), "cpu us/resp", true);
        out.declare(&format!("{}: rate", bench_name(c)), "resp/s", false);
    }
    let n = configs.len() + LENGTHS.len();
    let mut sum = 0u64;
    // Round 0 warms up and is not kept.
    for round in 0..=rounds {
        for i in rotation(round, n) {
            if let Some(c) = configs.get(i) {
                if c.set_bytes <= caches.l3 {
                    sum = sum.wrapping_add(strings.touch(c));
                }
                let m = cache_model::measure(&mut r, &strings, c, &mut sink, dur, MAX_RESPONSES)?;
                if round > 0 {
                    let name = bench_name(c);
                    out.push(&format!("{name}: cpu"), "cpu us/resp", true, m.cpu_us());
                    out.push(&format!("{name}: rate"), "resp/s", false, m.per_sec());
                    t.cpu.entry(key(c)).or_default().push(m.cpu_us());
                    t.rps.entry(key(c)).or_default().push(m.per_sec());
                }
                ctx.step(&bench_name(c));
            } else {
                let len = LENGTHS[i - configs.len()];
                let strings_in_set = t.sets[1] / len;
                let ns = cache_model::measure_picks(&mut r, strings_in_set, picks_for(len), dur);
                if round > 0 {
                    let name = format!("pick only, {} picks ({len} B strings)", picks_for(len));
                    out.push(&name, "ns/resp", true, ns);
                    t.pick.entry(len).or_default().push(ns);
                }
                ctx.step(&format!("pick only, {len} B strings"));
            }
        }
    }
    std::hint::black_box(sum);
    if strings.outstanding() != 0 {
        bail!("reference counts left over after the measurements");
    }
    Ok(())
}

/// Runs the HTTP rows: galleon's and the BEAM's static and dynamic pages, interleaved.
fn http(ctx: &Ctx, t: &mut Tables, out: &mut Collector) -> anyhow::Result<()> {
    let rounds = ctx.rounds(5);
    let dur = ctx.pick(Duration::from_secs(2), Duration::from_millis(300));
    let conns = ctx.pick(16, 4);
    let galleon = Server::galleon(&ctx.site, &[])?;
    let ref_values = Server::galleon(&ctx.site, &["--value-copy-below", "64"])?;
    let beam = match Server::beam(&ctx.site) {
        Ok(b) => Some(b),
        Err(e) => {
            let reason = format!("{e:#}");
            for (_, name, _, _) in beam_targets() {
                out.skip(name, &reason);
            }
            t.http_note = Some(format!("BEAM rows skipped: {reason}"));
            None
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let targets: Vec<_> = cache_http::TARGETS
        .iter()
        .filter(|t| t.0 != Peer::Beam || beam.is_some())
        .collect();
    for (_, name, _, _) in &targets {
        out.declare(&format!("{name} req/s"), "req/s", false);
        out.declare(&format!("{name} server CPU"), "cpu us/req", true);
        t.http.push(((*name).to_owned(), Vec::new(), Vec::new()));
    }
    for round in 0..=rounds {
        for i in rotation(round, targets.len()) {
            let (peer, name, path, min_len) = *targets[i];
            let server = match peer {
                Peer::Galleon => &galleon,
                Peer::GalleonRefValues => &ref_values,
                Peer::Beam => beam.as_ref().context("no BEAM peer")?,
            };
            let d = if round == 0 { dur / 2 } else { dur };
            let cpu = server.cpu_secs()?;
            let (rps, n) = rt
                .block_on(cache_http::load(server.addr, path, min_len, conns, d))
                .with_context(|| format!("{name} at {}", server.addr))?;
            let cpu = server.cpu_secs()? - cpu;
            if n == 0 {
                bail!("{name}: no response within {d:?}");
            }
            if round > 0 {
                let cpu_us = cpu * 1e6 / n as f64;
                out.push(&format!("{name} req/s"), "req/s", false, rps);
                out.push(&format!("{name} server CPU"), "cpu us/req", true, cpu_us);
                if let Some(row) = t.http.iter_mut().find(|r| r.0 == name) {
                    row.1.push(rps);
                    row.2.push(cpu_us);
                }
            }
            ctx.step(name);
        }
    }
    Ok(())
}

/// The BEAM's rows of [`cache_http::TARGETS`].
fn beam_targets() -> impl Iterator<Item = &'static (Peer, &'static str, &'static str, usize)> {
    cache_http::TARGETS.iter().filter(|t| t.0 == Peer::Beam)
}

/// Runs the suite.
pub(super) fn run(ctx: &Ctx, out: &mut Collector) -> anyhow::Result<()> {
    let caches = Caches::read(Path::new(SYSFS_CACHES));
    let sets = sets(&caches, ctx.quick);
    let configs = cache_model::configs(&sets);
    let mut t = Tables {
        sets: sets.to_vec(),
        ..Tables::default()
    };
    let header = format!(
        "{}\nsets: {}; {} KiB of strings per response",
        caches.describe(),
        SET_NAMES
            .iter()
            .zip(sets)
            .map(|(n, b)| format!("{n} {}", size_name(b)))
            .collect::<Vec<_>>()
            .join(", "),
        PAGE_BYTES / 1024
    );
    ctx.bar.suspend(|| println!("\n{header}"));
    let steps = (ctx.rounds(7) + 1) * (configs.len() + LENGTHS.len())
        + configs.len()
        + (ctx.rounds(5) + 1) * cache_http::TARGETS.len();
    ctx.start(steps, "building the string sets");
    matrix(ctx, &mut t, out, &caches)?;

    if have_valgrind() {
        let spec = ProbeSpec {
            sets: sets.to_vec(),
            warm: ctx.pick(10, 2),
            measured: ctx.pick(30, 3),
            touch_below: caches.l3,
        };
        ctx.bar.set_message("starting the callgrind child");
        let misses = callgrind(ctx, &spec, &configs)?;
        for (c, m) in configs.iter().zip(misses) {
            let name = bench_name(c);
            out.push(&format!("{name}: D1 misses"), "D1 misses/resp", true, m.d1);
            out.push(&format!("{name}: LL misses"), "LL misses/resp", true, m.ll);
            t.misses.insert(key(c), m);
        }
    } else {
        let reason = "valgrind not found (Debian: apt-get install valgrind)";
        out.skip("cache misses (callgrind)", reason);
        t.misses_note = Some(reason.to_owned());
        for _ in &configs {
            ctx.step("no valgrind");
        }
    }

    http(ctx, &mut t, out)?;
    let tables = format!(
        "\n{}\n{}\n{}\n{}",
        t.cpu_table(),
        t.rps_table(),
        t.misses_table(),
        t.http_table()
    );
    ctx.bar.suspend(|| print!("{tables}"));
    Ok(())
}

/// `galleon bench --cache-probe SPEC`: the child the suite runs under callgrind.
pub(crate) fn probe(spec: &str) -> anyhow::Result<()> {
    cache_model::probe(&ProbeSpec::parse(spec)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_size("2048K"), Some(2 << 20));
        assert_eq!(parse_size("107520K"), Some(105 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        for bad in ["", "K", "0K", "12Q", "-4K", "99999999999999999999G"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
        assert_eq!(size_name(48 << 10), "48 KiB");
        assert_eq!(size_name(107520 << 10), "105 MiB");
        assert_eq!(size_name(55_050_240), "52.5 MiB");
    }

    #[test]
    fn caches_are_read_from_sysfs_and_missing_ones_are_said_to_be_assumed() {
        let dir = tempfile::tempdir().unwrap();
        for (i, (level, kind, size)) in [
            ("1", "Data", "48K"),
            ("1", "Instruction", "32K"),
            ("2", "Unified", "2048K"),
            ("3", "Unified", "107520K"),
        ]
        .iter()
        .enumerate()
        {
            let d = dir.path().join(format!("index{i}"));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        let c = Caches::read(dir.path());
        assert_eq!((c.l1d, c.l2, c.l3), (48 << 10, 2 << 20, 105 << 20));
        assert!(!c.source.contains("assumed"), "{}", c.source);
        assert!(c.describe().contains("L1d 48 KiB"), "{}", c.describe());
        let none = Caches::read(&dir.path().join("nothing"));
        assert_eq!((none.l1d, none.l2, none.l3), (32 << 10, 1 << 20, 32 << 20));
        assert!(
            none.source.contains("L1d, L2, L3 not found"),
            "{}",
            none.source
        );
    }

    #[test]
    fn the_sets_sit_inside_each_cache_and_the_last_far_beyond() {
        let c = Caches {
            l1d: 48 << 10,
            l2: 2 << 20,
            l3: 105 << 20,
            source: String::new(),
        };
        let s = sets(&c, false);
        assert_eq!(s, [24 << 10, 1 << 20, 105 << 19, 420 << 20]);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        let q = sets(&c, true);
        assert!(q[2] < s[2] && q[3] < s[3] && q[0] == s[0]);
        // A huge L3 is capped; tiny caches still hold the longest string.
        let big = Caches {
            l3: 1 << 30,
            l1d: 1024,
            ..c
        };
        assert_eq!(sets(&big, false)[3], MAX_SET_BYTES);
        assert_eq!(sets(&big, false)[0], 4096);
    }

    #[test]
    fn callgrind_totals_are_read_by_event_name() {
        let text = "version: 1\ncreator: callgrind\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\n\
                    fn=x\n1 2 3\ntotals: 1000 300 100 5 40 10 5 7 3\n";
        assert_eq!(parse_callgrind(text).unwrap(), (400.0, 50.0, 10.0));
        let summary = "events: Ir Dr Dw D1mr D1mw DLmr DLmw\nsummary: 10 6 4 2\n";
        assert_eq!(parse_callgrind(summary).unwrap(), (10.0, 2.0, 0.0));
        assert!(parse_callgrind("events: Ir\ntotals: 5\n").is_err());
        assert!(parse_callgrind("totals: 5\n").is_err());
        assert!(parse_callgrind("events: Ir Dr Dw D1mr D1mw DLmr DLmw\n").is_err());
        assert!(parse_callgrind("events: Dr Dw D1mr D1mw DLmr DLmw\ntotals: 1 x\n").is_err());
    }

    #[test]
    fn dump_files_come_in_dump_order() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "cg.out.10",
            "cg.out.2",
            "cg.out.1",
            "cg.out",
            "other.3",
            "cg.out.x",
        ] {
            std::fs::write(dir.path().join(n), "").unwrap();
        }
        let names: Vec<String> = dump_files(dir.path(), "cg.out")
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["cg.out.1", "cg.out.2", "cg.out.10"]);
    }
}
