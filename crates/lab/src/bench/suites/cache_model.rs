//! The `cache` suite's model of the seed's string pages, with each factor a parameter: a set of
//! distinct strings (one backing allocation; smaller sets are its prefixes), a response that picks
//! a fixed number of bytes' worth of them at random into an I/O list and writes it, under a write
//! policy (copy everything in user space, or reference everything and let the kernel read the
//! strings in `writev`), with or without a per-string reference count touched per pick.
//!
//! Also what drives it: a loopback sink that discards, the timed loop, the pick alone, and the
//! probe a child runs under callgrind (one dump per configuration).

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use cpu_time::ThreadTime;
use galleon_iolist::{IoList, IoWriter, WritePolicy};

/// Bytes of strings in every response, whatever their length (32 KiB, about the seed's 36 KB
/// pages), so the two policies of a row and the rows of a set send the same amount.
pub(crate) const PAGE_BYTES: usize = 32 * 1024;

/// The string lengths measured: the seed's 65 and the others.
pub(crate) const LENGTHS: [usize; 5] = [16, 65, 256, 1024, 4096];

/// Words (8 bytes) of the per-string header that holds a string's reference count: 16 bytes a
/// string, like the count and pointer of a shared `Bytes` or `Arc` allocation.
const HEADER_WORDS: usize = 2;

/// Length of the letter pattern the strings are cut from: a prime, so neighbours differ.
const PATTERN: usize = 4093;

/// The response head every response starts with, copied under both policies.
const HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: 32768\r\n\r\n";

/// How long the sink may lag behind the sender at the end of a measurement.
const SINK_TIMEOUT: Duration = Duration::from_secs(30);

/// Who reads the strings' bytes on their way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Policy {
    /// The writer copies every segment into its buffer (user-space reads), one `write`.
    Copy,
    /// Every string is its own iovec: the kernel reads them in `writev`.
    Ref,
}

impl Policy {
    /// Its name in tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Policy::Copy => "copy",
            Policy::Ref => "ref",
        }
    }

    /// The I/O list write policy that does it.
    fn write_policy(self) -> WritePolicy {
        match self {
            Policy::Copy => WritePolicy::flatten(),
            Policy::Ref => WritePolicy::vectored(),
        }
    }
}

/// One configuration: which set, string length, policy, reference counts on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Config {
    /// Index of the set (0 = L1-sized ... 3 = far beyond L3).
    pub(crate) set: usize,
    /// Bytes of distinct strings in the set.
    pub(crate) set_bytes: usize,
    /// Bytes per string.
    pub(crate) len: usize,
    /// Copy or reference.
    pub(crate) policy: Policy,
    /// A per-string reference count incremented at the pick and decremented after the write.
    pub(crate) rc: bool,
}

impl Config {
    /// Distinct strings in the set (at least one).
    pub(crate) fn strings(&self) -> usize {
        (self.set_bytes / self.len.max(1)).max(1)
    }

    /// Strings per response: [`PAGE_BYTES`] worth.
    pub(crate) fn count(&self) -> usize {
        picks_for(self.len)
    }

    /// Bytes of one response: the head and the strings.
    #[cfg(test)]
    pub(crate) fn response_bytes(&self) -> usize {
        HEAD.len() + self.count() * self.len
    }
}

/// Strings of `len` bytes per response: [`PAGE_BYTES`] worth, rounded down, at least one.
pub(crate) fn picks_for(len: usize) -> usize {
    (PAGE_BYTES / len.max(1)).max(1)
}

/// Every configuration over `sets` (bytes each): set-major, then length, policy, counts.
pub(crate) fn configs(sets: &[usize]) -> Vec<Config> {
    let mut v = Vec::with_capacity(sets.len() * LENGTHS.len() * 4);
    for (set, &set_bytes) in sets.iter().enumerate() {
        for len in LENGTHS {
            for policy in [Policy::Copy, Policy::Ref] {
                for rc in [false, true] {
                    v.push(Config {
                        set,
                        set_bytes,
                        len,
                        policy,
                        rc,
                    });
                }
            }
        }
    }
    v
}

/// xorshift64*: the picks, the same generator as the site's string pages.
#[derive(Debug, Clone)]
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    /// The next value.
    #[inline]
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The strings: one backing allocation of letters, and a 16-byte header per string whose first
/// word is its reference count (touched only by configurations with counts on).
#[derive(Debug)]
pub(crate) struct Strings {
    backing: Bytes,
    counts: Vec<AtomicU64>,
}

impl Strings {
    /// `bytes` of strings and headers for `max_strings` strings, every page written once.
    pub(crate) fn new(bytes: usize, max_strings: usize) -> anyhow::Result<Strings> {
        if max_strings > u32::MAX as usize {
            bail!("{max_strings} strings: at most {} per set", u32::MAX);
        }
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let pattern: Vec<u8> = (0..PATTERN)
            .map(|_| b'A' + (rng.next() % 26) as u8)
            .collect();
        let mut v = Vec::new();
        v.try_reserve_exact(bytes)
            .with_context(|| format!("allocating {bytes} bytes of strings"))?;
        while v.len() < bytes {
            let k = (bytes - v.len()).min(PATTERN);
            v.extend_from_slice(&pattern[..k]);
        }
        let counts = (0..max_strings * HEADER_WORDS)
            .map(|_| AtomicU64::new(0))
            .collect();
        Ok(Strings {
            backing: Bytes::from(v),
            counts,
        })
    }

    /// Whether `c`'s set fits in these strings (and its headers, with counts on).
    pub(crate) fn fits(&self, c: &Config) -> bool {
        c.len > 0
            && c.strings() * c.len <= self.backing.len()
            && (!c.rc || c.strings() * HEADER_WORDS <= self.counts.len())
    }

    /// Reads one word per cache line of `c`'s set (and its headers): brings a set that fits in
    /// the caches into them before it is measured. Returns a sum so the reads stay.
    pub(crate) fn touch(&self, c: &Config) -> u64 {
        let bytes = &self.backing[..(c.strings() * c.len).min(self.backing.len())];
        let mut sum: u64 = bytes.iter().step_by(64).map(|&b| u64::from(b)).sum();
        if c.rc {
            let words = (c.strings() * HEADER_WORDS).min(self.counts.len());
            sum += self.counts[..words]
                .iter()
                .step_by(8)
                .map(|w| w.load(Ordering::Relaxed))
                .sum::<u64>();
        }
        sum
    }

    /// The sum of every reference count: 0 between responses.
    pub(crate) fn outstanding(&self) -> u64 {
        self.counts.iter().map(|w| w.load(Ordering::Relaxed)).sum()
    }
}

/// Builds and writes responses; its list, writers and pick buffer are reused.
#[derive(Debug)]
pub(crate) struct Renderer {
    list: IoList,
    picks: Vec<u32>,
    copy: IoWriter,
    reference: IoWriter,
    rng: XorShift,
}

impl Renderer {
    /// A renderer whose picks start from `seed`.
    pub(crate) fn new(seed: u64) -> Renderer {
        Renderer {
            list: IoList::new(),
            picks: Vec::new(),
            copy: IoWriter::new(Policy::Copy.write_policy()),
            reference: IoWriter::new(Policy::Ref.write_policy()),
            rng: XorShift(seed | 1),
        }
    }

    /// One response of `c` written to `w`: the head, then [`Config::count`] strings picked at
    /// random from the set, referenced from the pinned backing (no count traffic of their own);
    /// with counts on, each pick's header is incremented, and decremented after the write (as a
    /// cloned `Bytes` is dropped with its list). Returns the bytes written.
    #[inline]
    pub(crate) fn respond<W: Write + ?Sized>(
        &mut self,
        s: &Strings,
        c: &Config,
        w: &mut W,
    ) -> io::Result<usize> {
        if !s.fits(c) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the configuration's set is larger than the strings built",
            ));
        }
        let n = c.strings() as u64;
        let len = c.len;
        self.list.clear();
        self.list.push_copy(HEAD);
        self.list.pin(&s.backing);
        for _ in 0..c.count() {
            let i = (self.rng.next() % n) as usize;
            if c.rc {
                s.counts[i * HEADER_WORDS].fetch_add(1, Ordering::Relaxed);
                self.picks.push(i as u32);
            }
            self.list
                .push_shared_range(&s.backing, i * len..(i + 1) * len);
        }
        let writer = match c.policy {
            Policy::Copy => &mut self.copy,
            Policy::Ref => &mut self.reference,
        };
        let written = writer.write_all(w, &self.list);
        for &i in &self.picks {
            s.counts[i as usize * HEADER_WORDS].fetch_sub(1, Ordering::Release);
        }
        self.picks.clear();
        written.map(|()| self.list.len())
    }

    /// The picks of one response of `count` strings among `strings`, and nothing else (no list,
    /// no read of a string): the random index generation on its own. Returns their sum.
    #[inline]
    pub(crate) fn picks_only(&mut self, strings: usize, count: usize) -> u64 {
        let n = strings.max(1) as u64;
        let mut sum = 0u64;
        for _ in 0..count {
            sum = sum.wrapping_add(self.rng.next() % n);
        }
        sum
    }
}

/// A loopback connection whose far end (a thread) reads and discards, counting what it read.
#[derive(Debug)]
pub(crate) struct Sink {
    stream: TcpStream,
    read: Arc<AtomicU64>,
    failed: Arc<AtomicBool>,
    written: u64,
}

impl Sink {
    /// Connects to a new discarding reader on 127.0.0.1.
    pub(crate) fn new() -> anyhow::Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding a loopback sink")?;
        let addr = listener.local_addr()?;
        let read = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicBool::new(false));
        let (r, f) = (read.clone(), failed.clone());
        thread::Builder::new()
            .name("bench-cache-sink".into())
            .spawn(move || {
                let Ok((mut s, _)) = listener.accept() else {
                    f.store(true, Ordering::Release);
                    return;
                };
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => {
                            r.fetch_add(n as u64, Ordering::AcqRel);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            f.store(true, Ordering::Release);
                            return;
                        }
                    }
                }
            })?;
        let stream = TcpStream::connect(addr).context("connecting to the sink")?;
        stream.set_nodelay(true)?;
        Ok(Sink {
            stream,
            read,
            failed,
            written: 0,
        })
    }

    /// Waits until the reader has read everything written so far.
    fn drained(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + SINK_TIMEOUT;
        while self.read.load(Ordering::Acquire) < self.written {
            if self.failed.load(Ordering::Acquire) {
                bail!("the loopback sink failed");
            }
            if Instant::now() > deadline {
                bail!("the loopback sink did not read the bytes within {SINK_TIMEOUT:?}");
            }
            thread::yield_now();
        }
        Ok(())
    }
}

/// What one timed measurement saw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    /// Responses written (and read by the sink).
    pub(crate) responses: u64,
    /// Seconds from the first write until the sink had read the last byte.
    pub(crate) wall: f64,
    /// CPU seconds of the sending thread (user and kernel: the kernel's reads in `writev` count).
    pub(crate) cpu: f64,
}

impl Measured {
    /// Responses per second.
    pub(crate) fn per_sec(&self) -> f64 {
        self.responses as f64 / self.wall.max(1e-9)
    }

    /// Sender CPU microseconds per response.
    pub(crate) fn cpu_us(&self) -> f64 {
        self.cpu * 1e6 / self.responses.max(1) as f64
    }
}

/// Writes responses of `c` to `sink` until `dur` has passed or `max` were written.
pub(crate) fn measure(
    r: &mut Renderer,
    s: &Strings,
    c: &Config,
    sink: &mut Sink,
    dur: Duration,
    max: u64,
) -> anyhow::Result<Measured> {
    let start = Instant::now();
    let cpu = ThreadTime::now();
    let mut n = 0u64;
    while n < max.max(1) && (n == 0 || start.elapsed() < dur) {
        let bytes = r
            .respond(s, c, &mut sink.stream)
            .context("writing to the loopback sink")?;
        sink.written += bytes as u64;
        n += 1;
    }
    let cpu = cpu.elapsed().as_secs_f64();
    sink.drained()?;
    Ok(Measured {
        responses: n,
        wall: start.elapsed().as_secs_f64(),
        cpu,
    })
}

/// Nanoseconds per response of the picks alone ([`Renderer::picks_only`]) for `count` strings
/// among `strings`, timed on this thread's CPU clock for about `dur`.
pub(crate) fn measure_picks(r: &mut Renderer, strings: usize, count: usize, dur: Duration) -> f64 {
    let start = Instant::now();
    let cpu = ThreadTime::now();
    let mut n = 0u64;
    let mut sum = 0u64;
    while n < 10_000_000 && (n == 0 || start.elapsed() < dur) {
        for _ in 0..16 {
            sum = sum.wrapping_add(r.picks_only(strings, count));
        }
        n += 16;
    }
    std::hint::black_box(sum);
    cpu.elapsed().as_secs_f64() * 1e9 / n as f64
}

/// What the callgrind child is asked to do: the sets, the renders per configuration before and
/// during collection, and the largest set it brings into the caches first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeSpec {
    /// Bytes of each set, as in the parent.
    pub(crate) sets: Vec<usize>,
    /// Uncollected renders before each configuration's collected ones.
    pub(crate) warm: usize,
    /// Collected renders per configuration (one callgrind dump each).
    pub(crate) measured: usize,
    /// Sets up to this many bytes are read once before their configurations run.
    pub(crate) touch_below: usize,
}

/// Most sets, renders and bytes a probe spec may ask for.
const PROBE_MAX_SETS: usize = 8;
const PROBE_MAX_RENDERS: usize = 10_000;
/// Largest set of a probe (or of the suite): 1 GiB.
pub(crate) const MAX_SET_BYTES: usize = 1 << 30;

impl ProbeSpec {
    /// `sets=A,B,..;warm=W;n=N;touch=T`, as [`ProbeSpec::parse`] reads it.
    pub(crate) fn to_arg(&self) -> String {
        let sets: Vec<String> = self.sets.iter().map(|s| s.to_string()).collect();
        format!(
            "sets={};warm={};n={};touch={}",
            sets.join(","),
            self.warm,
            self.measured,
            self.touch_below
        )
    }

    /// Parses [`ProbeSpec::to_arg`]'s form; every field is required and bounded.
    pub(crate) fn parse(s: &str) -> anyhow::Result<ProbeSpec> {
        let (mut sets, mut warm, mut measured, mut touch) = (None, None, None, None);
        for part in s.split(';') {
            let (k, v) = part
                .split_once('=')
                .with_context(|| format!("probe spec: `{part}` is not key=value"))?;
            let num = |x: &str| -> anyhow::Result<usize> {
                x.trim()
                    .parse()
                    .with_context(|| format!("probe spec: `{x}` is not a number"))
            };
            match k.trim() {
                "sets" => sets = Some(v.split(',').map(num).collect::<anyhow::Result<Vec<_>>>()?),
                "warm" => warm = Some(num(v)?),
                "n" => measured = Some(num(v)?),
                "touch" => touch = Some(num(v)?),
                other => bail!("probe spec: unknown key `{other}`"),
            }
        }
        let spec = ProbeSpec {
            sets: sets.context("probe spec: no sets")?,
            warm: warm.context("probe spec: no warm")?,
            measured: measured.context("probe spec: no n")?,
            touch_below: touch.context("probe spec: no touch")?,
        };
        if spec.sets.is_empty() || spec.sets.len() > PROBE_MAX_SETS {
            bail!("probe spec: 1 to {PROBE_MAX_SETS} sets");
        }
        if let Some(bad) = spec.sets.iter().find(|&&b| b == 0 || b > MAX_SET_BYTES) {
            bail!("probe spec: set of {bad} bytes (1 to {MAX_SET_BYTES})");
        }
        if spec.measured == 0 || spec.measured > PROBE_MAX_RENDERS || spec.warm > PROBE_MAX_RENDERS
        {
            bail!("probe spec: n 1 to {PROBE_MAX_RENDERS}, warm at most {PROBE_MAX_RENDERS}");
        }
        Ok(spec)
    }
}

/// Runs under callgrind (the parent passes `--dump-after` for [`galleon_cache_probe_mark`] and
/// [`galleon_cache_probe_measured`], so dumps alternate: setup, measured, setup, ...): every
/// configuration of `spec`, in order, each warmed up and then rendered `spec.measured` times to
/// `/dev/null` in one call.
/// The kernel's part of a write is not simulated: callgrind sees user space only.
pub(crate) fn probe(spec: &ProbeSpec) -> anyhow::Result<()> {
    let largest = spec.sets.iter().copied().max().unwrap_or(0);
    let strings = Strings::new(largest, largest / LENGTHS[0])?;
    let mut out = File::options()
        .write(true)
        .open("/dev/null")
        .context("opening /dev/null")?;
    let mut r = Renderer::new(0x5151_2024);
    let mut sum = 0u64;
    for c in configs(&spec.sets) {
        if c.set_bytes <= spec.touch_below {
            sum = sum.wrapping_add(strings.touch(&c));
        }
        for _ in 0..spec.warm {
            r.respond(&strings, &c, &mut out)?;
        }
        sum = galleon_cache_probe_mark(sum);
        sum = sum.wrapping_add(galleon_cache_probe_measured(
            &mut r,
            &strings,
            &c,
            &mut out,
            spec.measured,
        )?);
    }
    std::hint::black_box(sum);
    Ok(())
}

/// Marks the end of a configuration's setup under callgrind (a `--dump-after` of its own, so
/// the next dump holds the measured renders only). Never inlined.
#[inline(never)]
fn galleon_cache_probe_mark(x: u64) -> u64 {
    std::hint::black_box(x)
}

/// The measured part of one configuration under callgrind: `n` responses. Its name is what the
/// parent's `--dump-after` pattern matches; never inlined.
#[inline(never)]
fn galleon_cache_probe_measured(
    r: &mut Renderer,
    s: &Strings,
    c: &Config,
    out: &mut File,
    n: usize,
) -> io::Result<u64> {
    let mut bytes = 0u64;
    for _ in 0..n {
        bytes += r.respond(s, c, out)? as u64;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_sends_the_same_bytes_under_both_policies_and_counts_return_to_zero() {
        let sets = [4096, 64 * 1024];
        let strings = Strings::new(64 * 1024, 64 * 1024 / 16).unwrap();
        let mut r = Renderer::new(7);
        let mut sizes = std::collections::HashMap::new();
        for c in configs(&sets) {
            let mut out = Vec::new();
            let n = r.respond(&strings, &c, &mut out).unwrap();
            assert_eq!(n, out.len());
            assert_eq!(n, c.response_bytes(), "{c:?}");
            assert!(out.starts_with(HEAD));
            assert!(out[HEAD.len()..].iter().all(u8::is_ascii_uppercase));
            assert_eq!(strings.outstanding(), 0, "{c:?}");
            // Same bytes for every policy and count setting of a set and length.
            let prev = sizes.insert((c.set, c.len), n);
            assert!(prev.is_none_or(|p| p == n), "{c:?}");
        }
        // Every length sends PAGE_BYTES within one string.
        for len in LENGTHS {
            let body = picks_for(len) * len;
            assert!(body <= PAGE_BYTES && PAGE_BYTES - body < len, "{len}");
        }
        assert_eq!(configs(&sets).len(), 2 * LENGTHS.len() * 4);
    }

    #[test]
    fn a_set_larger_than_the_strings_is_refused_not_read_out_of_bounds() {
        let strings = Strings::new(1024, 64).unwrap();
        let mut r = Renderer::new(1);
        let c = Config {
            set: 0,
            set_bytes: 4096,
            len: 16,
            policy: Policy::Copy,
            rc: false,
        };
        let err = r.respond(&strings, &c, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        // Fits in bytes, but 1024 / 16 = 64 strings need 64 headers: 32 were built.
        let strings = Strings::new(1024, 32).unwrap();
        let c = Config {
            set_bytes: 1024,
            rc: true,
            ..c
        };
        assert!(!strings.fits(&c));
        assert!(strings.fits(&Config { rc: false, ..c }));
    }

    #[test]
    fn probe_specs_round_trip_and_bad_ones_are_refused() {
        let spec = ProbeSpec {
            sets: vec![24576, 1 << 20],
            warm: 3,
            measured: 20,
            touch_below: 1 << 26,
        };
        assert_eq!(ProbeSpec::parse(&spec.to_arg()).unwrap(), spec);
        for bad in [
            "",
            "sets=1;warm=1;n=1",
            "sets=;warm=1;n=1;touch=0",
            "sets=1;warm=1;n=0;touch=0",
            "sets=1;warm=1;n=10001;touch=0",
            "sets=0;warm=1;n=1;touch=0",
            "sets=1073741825;warm=1;n=1;touch=0",
            "sets=1;warm=x;n=1;touch=0",
            "sets=1;warm=1;n=1;touch=0;extra=2",
        ] {
            assert!(ProbeSpec::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_pick_alone_stays_in_range() {
        let mut r = Renderer::new(3);
        // 100 picks among 1 string: all index 0.
        assert_eq!(r.picks_only(1, 100), 0);
        let s = r.picks_only(10, 1000);
        assert!(s > 0 && s < 9 * 1000, "{s}");
        assert!(measure_picks(&mut r, 10, 10, Duration::from_millis(1)) > 0.0);
    }

    #[test]
    fn a_measurement_waits_for_the_sink_and_counts_responses() {
        let strings = Strings::new(64 * 1024, 4096).unwrap();
        let mut r = Renderer::new(9);
        let mut sink = Sink::new().unwrap();
        let c = configs(&[64 * 1024])[3];
        let m = measure(&mut r, &strings, &c, &mut sink, Duration::from_secs(5), 20).unwrap();
        assert_eq!(m.responses, 20);
        assert_eq!(
            sink.read.load(Ordering::Acquire),
            20 * c.response_bytes() as u64
        );
        assert!(m.per_sec() > 0.0 && m.cpu_us() >= 0.0);
    }
}
