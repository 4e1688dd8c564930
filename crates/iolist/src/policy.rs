//! `WritePolicy` (when to copy, how many iovecs per call) and `WriteStats` (what a write did).
//!
//! The presets (`default`, `flatten`, `vectored`) and `WritePolicy`'s `FromStr`: the one parser for
//! the CLI's `--write-policy` and the server's per-request policy header.

use std::fmt;
use std::ops::AddAssign;
use std::str::FromStr;

/// Most iovecs one `writev` accepts on Linux (`IOV_MAX`, `UIO_MAXIOV` in the kernel). Rust's std
/// silently truncates a longer slice list to this many and returns a short count.
pub const IOV_MAX: usize = 1024;

/// Default `coalesce_below`, in bytes: runs of adjacent segments shorter than this are copied
/// into one buffer. Chosen by `cargo bench -p galleon-iolist` (table and sweep 1 in
/// `bench/README.md`): over loopback TCP, with the writer's buffer reused, copying segments up to
/// 2 KiB cost less sender CPU than an iovec each, and from 4 KiB the two were equal within
/// noise, so larger segments stay referenced.
pub const DEFAULT_COALESCE_BELOW: usize = 4096;

/// Default `max_iov`: iovecs per `writev`, here the most Linux takes. Chosen by the same
/// benchmark (sweep 2): with 410-byte segments 1024 iovecs a call cost clearly less sender CPU
/// than 256 or 64, and with larger segments bigger batches were never worse beyond noise; a
/// lower cap only splits a gathered write that the kernel would have taken whole.
pub const DEFAULT_MAX_IOV: usize = IOV_MAX;

/// How an [`IoList`](crate::IoList) is turned into write calls.
///
/// Two knobs, both data, both adjustable at run time:
/// - `coalesce_below`: a run of two or more adjacent segments each shorter than this many bytes
///   is copied into one buffer and sent as one iovec. A lone short segment between two long ones
///   is not copied (copying it would not save an iovec).
/// - `max_iov`: at most this many iovecs go to one `writev` (clamped to `1..=IOV_MAX`).
///
/// [`WritePolicy::flatten`] and [`WritePolicy::vectored`] are the two extremes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct WritePolicy {
    /// Segments shorter than this many bytes are coalesced with their short neighbours.
    pub coalesce_below: usize,
    /// Most iovecs handed to one write call.
    pub max_iov: usize,
}

impl WritePolicy {
    /// Copy everything into one buffer and write it with plain `write` calls: what a server that
    /// concatenates its response does.
    pub const fn flatten() -> Self {
        WritePolicy {
            coalesce_below: usize::MAX,
            max_iov: IOV_MAX,
        }
    }

    /// Never copy: every segment is its own iovec, up to `IOV_MAX` per call.
    pub const fn vectored() -> Self {
        WritePolicy {
            coalesce_below: 0,
            max_iov: IOV_MAX,
        }
    }

    /// A policy with the given knobs.
    pub const fn new(coalesce_below: usize, max_iov: usize) -> Self {
        WritePolicy {
            coalesce_below,
            max_iov,
        }
    }

    /// `max_iov` clamped into `1..=IOV_MAX`.
    pub fn iov_limit(&self) -> usize {
        self.max_iov.clamp(1, IOV_MAX)
    }
}

impl Default for WritePolicy {
    fn default() -> Self {
        WritePolicy {
            coalesce_below: DEFAULT_COALESCE_BELOW,
            max_iov: DEFAULT_MAX_IOV,
        }
    }
}

impl fmt::Debug for WritePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::flatten() {
            return f.write_str("WritePolicy::flatten()");
        }
        if *self == Self::vectored() {
            return f.write_str("WritePolicy::vectored()");
        }
        f.debug_struct("WritePolicy")
            .field("coalesce_below", &self.coalesce_below)
            .field("max_iov", &self.max_iov)
            .finish()
    }
}

/// What one or more writes did. Add them up with `+=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Write system calls made (each `write_vectored` call counts once, short or not).
    pub syscalls: u64,
    /// iovecs handed to those calls, summed over calls (a resumed call counts its iovecs again).
    pub iovecs: u64,
    /// Calls that wrote less than they were given.
    pub short_writes: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Bytes sent straight from the list's segments, without a copy by the writer.
    pub bytes_referenced: u64,
    /// Bytes the writer copied into its coalescing buffer before sending.
    pub bytes_copied: u64,
}

impl AddAssign for WriteStats {
    fn add_assign(&mut self, o: Self) {
        self.syscalls += o.syscalls;
        self.iovecs += o.iovecs;
        self.short_writes += o.short_writes;
        self.bytes += o.bytes;
        self.bytes_referenced += o.bytes_referenced;
        self.bytes_copied += o.bytes_copied;
    }
}

/// A name [`WritePolicy::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown write policy `{}` (default, flatten, vectored)",
            self.0
        )
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for WritePolicy {
    type Err = UnknownPolicy;

    /// Parses a preset's name: `default`, `flatten` or `vectored`. The one parser for the CLI's
    /// `--write-policy` and the server's per-request policy header.
    ///
    /// # Examples
    /// ```
    /// use galleon_iolist::WritePolicy;
    ///
    /// assert_eq!("flatten".parse::<WritePolicy>(), Ok(WritePolicy::flatten()));
    /// assert!("fast".parse::<WritePolicy>().unwrap_err().to_string().contains("default, flatten, vectored"));
    /// ```
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "default" => Ok(Self::default()),
            "flatten" => Ok(Self::flatten()),
            "vectored" => Ok(Self::vectored()),
            _ => Err(UnknownPolicy(name.to_owned())),
        }
    }
}
