//! [`Reloader`]: a [`Shared`] value kept equal to what a file says, when the file says it well.
//!
//! `Reloader::reload` and `reload_if_changed` (size, modification time and inode, then a hash of
//! the contents) run one at a time; a refused file (unreadable, over `DEFAULT_MAX_BYTES`,
//! malformed, invalid) is logged with its located error and the previous version keeps serving.

use std::error::Error;
use std::fmt;
use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use crate::shared::Shared;

/// Largest file a [`Reloader`] reads by default: 256 MiB. A state file is held in memory twice
/// while it is parsed (its bytes and the new value), so a runaway file must not be read whole.
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// A file modified this recently (before the previous check) is hashed again even when its size
/// and time look unchanged: file systems keep times at a granularity (a few milliseconds on some),
/// so two writes within one tick can leave the same size and time (git's "racily clean" files).
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The error a parse function returns: its `Display` is the whole located message, naming the
/// file (`rules.json:12:7: expected ...`, `rules.json: rule 17, field "tier": ...`).
pub type ParseError = Box<dyn Error + Send + Sync>;

/// What a [`Reloader`] calls to turn a file's bytes into a value, or a located error.
type ParseFn<T> = dyn Fn(&Path, &[u8]) -> Result<T, ParseError> + Send + Sync;

/// Why a load or reload was refused. The value that was serving goes on serving.
#[derive(Debug)]
pub enum ReloadError {
    /// The file could not be read, or is larger than the limit.
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The file was read but its contents were refused by the parse function.
    Invalid {
        /// The file.
        path: PathBuf,
        /// The parse function's located error.
        source: ParseError,
    },
}

impl fmt::Display for ReloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReloadError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            // The parse function's message is already located and names the file.
            ReloadError::Invalid { source, .. } => write!(f, "{source}"),
        }
    }
}

impl Error for ReloadError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ReloadError::Read { source, .. } => Some(source),
            ReloadError::Invalid { source, .. } => Some(&**source),
        }
    }
}

/// What was last seen of the file, to tell a change from a re-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

#[derive(Debug, Default)]
struct Seen {
    /// The stamp and content hash of the last file read (whether it was accepted or not).
    stamp: Option<Stamp>,
    hash: Option<u64>,
    /// When the stamp was last compared: a file modified after this (minus [`RACY_WINDOW`]) is
    /// hashed again.
    checked: Option<SystemTime>,
    /// The file could not be read at the last check (logged once, not at every poll).
    unreadable: bool,
}

/// A [`Shared`] value loaded from a file: parsed and checked by the caller's function, swapped in
/// only when that succeeds.
///
/// On a refused file (unreadable, malformed, invalid) the previous version keeps serving and the
/// located error is logged with `tracing` (and returned): nothing lost, nothing mixed. Reloads
/// are serialised, so the file read last is the version that ends up published.
/// Cloning gives another handle to the same reloader.
///
/// # Examples
///
/// ```
/// use galleon_state::Reloader;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("limit.txt");
/// std::fs::write(&path, "10")?;
/// let parse = |path: &std::path::Path, bytes: &[u8]| -> Result<u32, galleon_state::ParseError> {
///     let text = std::str::from_utf8(bytes)?;
///     text.trim()
///         .parse()
///         .map_err(|e| format!("{}:1:1: {e}", path.display()).into())
/// };
/// let limit = Reloader::load(&path, parse)?;
/// assert_eq!(**limit.shared().snapshot(), 10);
///
/// std::fs::write(&path, "twenty")?;
/// assert!(limit.reload().is_err()); // logged; 10 still serves
/// assert_eq!(**limit.shared().snapshot(), 10);
///
/// std::fs::write(&path, "20")?;
/// assert_eq!(limit.reload()?, 2);
/// assert_eq!(**limit.shared().snapshot(), 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Reloader<T> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    shared: Shared<T>,
    path: PathBuf,
    max_bytes: u64,
    parse: Box<ParseFn<T>>,
    /// Held for the whole of a reload: one at a time, in order.
    seen: Mutex<Seen>,
}

impl<T> Clone for Reloader<T> {
    fn clone(&self) -> Self {
        Reloader {
            inner: self.inner.clone(),
        }
    }
}

impl<T> fmt::Debug for Reloader<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloader")
            .field("path", &self.inner.path)
            .field("version", &self.inner.shared.version())
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> Reloader<T> {
    /// Reads `path` and parses it with `parse` as version 1 (files up to [`DEFAULT_MAX_BYTES`]).
    /// Fails, without logging, when the first version cannot be had: there is nothing to keep.
    pub fn load<F>(path: impl Into<PathBuf>, parse: F) -> Result<Reloader<T>, ReloadError>
    where
        F: Fn(&Path, &[u8]) -> Result<T, ParseError> + Send + Sync + 'static,
    {
        Reloader::load_limited(path, DEFAULT_MAX_BYTES, parse)
    }

    /// [`Reloader::load`] refusing files larger than `max_bytes`, now and at every reload.
    pub fn load_limited<F>(
        path: impl Into<PathBuf>,
        max_bytes: u64,
        parse: F,
    ) -> Result<Reloader<T>, ReloadError>
    where
        F: Fn(&Path, &[u8]) -> Result<T, ParseError> + Send + Sync + 'static,
    {
        let path = path.into();
        let mut seen = Seen::default();
        let (bytes, stamp) = read_limited(&path, max_bytes)?;
        let value = parse(&path, &bytes).map_err(|source| ReloadError::Invalid {
            path: path.clone(),
            source,
        })?;
        seen.stamp = Some(stamp);
        seen.hash = Some(hash(&bytes));
        seen.checked = Some(SystemTime::now());
        Ok(Reloader {
            inner: Arc::new(Inner {
                shared: Shared::new(value),
                path,
                max_bytes,
                parse: Box::new(parse),
                seen: Mutex::new(seen),
            }),
        })
    }

    /// The cell readers take snapshots of.
    pub fn shared(&self) -> &Shared<T> {
        &self.inner.shared
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Reads and parses the file now, whether or not it changed, and publishes it: the new
    /// version's number. On an error the previous version stays, and the error is logged and
    /// returned.
    pub fn reload(&self) -> Result<u64, ReloadError> {
        let mut seen = self.lock();
        self.read_and_swap(&mut seen)
    }

    /// Reloads when the file's contents changed since it was last read (size, modification time
    /// and inode first; a hash of the contents when those changed or are too recent to trust).
    /// `Ok(None)`: unchanged. A changed file that is refused is logged once and not read again
    /// until it changes again.
    pub fn reload_if_changed(&self) -> Result<Option<u64>, ReloadError> {
        let mut seen = self.lock();
        let now = SystemTime::now();
        let stamp = match stamp_of(&self.inner.path) {
            Ok(s) => s,
            Err(source) => {
                // Often a moment inside a rename; say so once, try again at the next poll.
                if !seen.unreadable {
                    tracing::warn!(
                        path = %self.inner.path.display(),
                        error = %source,
                        "state file unreadable; keeping version {}",
                        self.inner.shared.version()
                    );
                }
                seen.unreadable = true;
                return Err(ReloadError::Read {
                    path: self.inner.path.clone(),
                    source,
                });
            }
        };
        let racy = match (stamp.modified, seen.checked) {
            (Some(m), Some(c)) => m + RACY_WINDOW >= c,
            _ => true,
        };
        let was_unreadable = std::mem::take(&mut seen.unreadable);
        seen.checked = Some(now);
        if seen.stamp == Some(stamp) && !racy && !was_unreadable {
            return Ok(None);
        }
        let (bytes, stamp) = match read_limited(&self.inner.path, self.inner.max_bytes) {
            Ok(read) => read,
            Err(e) => return Err(self.refused(e)),
        };
        let h = hash(&bytes);
        if seen.hash == Some(h) {
            seen.stamp = Some(stamp);
            return Ok(None);
        }
        self.parse_and_swap(&mut seen, &bytes, stamp).map(Some)
    }

    fn lock(&self) -> MutexGuard<'_, Seen> {
        // A panic in a parse function poisons nothing we rely on: `Seen` is only a cache.
        self.inner
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn read_and_swap(&self, seen: &mut Seen) -> Result<u64, ReloadError> {
        seen.checked = Some(SystemTime::now());
        seen.unreadable = false;
        match read_limited(&self.inner.path, self.inner.max_bytes) {
            Ok((bytes, stamp)) => self.parse_and_swap(seen, &bytes, stamp),
            Err(e) => Err(self.refused(e)),
        }
    }

    fn parse_and_swap(
        &self,
        seen: &mut Seen,
        bytes: &[u8],
        stamp: Stamp,
    ) -> Result<u64, ReloadError> {
        seen.stamp = Some(stamp);
        seen.hash = Some(hash(bytes));
        match (self.inner.parse)(&self.inner.path, bytes) {
            Ok(value) => {
                let version = self.inner.shared.store(value);
                tracing::info!(path = %self.inner.path.display(), version, "state reloaded");
                Ok(version)
            }
            Err(source) => Err(self.refused(ReloadError::Invalid {
                path: self.inner.path.clone(),
                source,
            })),
        }
    }

    /// Logs a refused reload (the located error, and which version keeps serving).
    fn refused(&self, e: ReloadError) -> ReloadError {
        tracing::error!(
            "reload refused: {e}; keeping version {}",
            self.inner.shared.version()
        );
        e
    }
}

/// The file's bytes (at most `max` of them) and its stamp, taken from the open file so the two
/// belong together.
fn read_limited(path: &Path, max: u64) -> Result<(Vec<u8>, Stamp), ReloadError> {
    let err = |source| ReloadError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(err)?;
    let meta = file.metadata().map_err(err)?;
    if meta.len() > max {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} bytes, more than the limit of {max}", meta.len()),
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // One byte past the limit tells a file that grew since `metadata` from one that fits.
    file.take(max + 1).read_to_end(&mut bytes).map_err(err)?;
    if bytes.len() as u64 > max {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("more than the limit of {max} bytes"),
        )));
    }
    Ok((bytes, stamp(&meta)))
}

fn stamp_of(path: &Path) -> std::io::Result<Stamp> {
    std::fs::metadata(path).map(|m| stamp(&m))
}

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(meta);
    #[cfg(not(unix))]
    let inode = 0;
    Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        inode,
    }
}

/// A hash of the contents (SipHash with fixed keys: stable within the process, which is all a
/// change check needs).
fn hash(bytes: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_number(path: &Path, bytes: &[u8]) -> Result<u64, ParseError> {
        let text = std::str::from_utf8(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        text.trim()
            .parse()
            .map_err(|e| format!("{}:1:1: {e}", path.display()).into())
    }

    #[test]
    fn a_first_load_that_fails_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        let missing = Reloader::load(&path, parse_number).unwrap_err();
        assert!(matches!(missing, ReloadError::Read { .. }), "{missing}");
        std::fs::write(&path, "x").unwrap();
        let bad = Reloader::load(&path, parse_number).unwrap_err();
        assert!(bad.to_string().contains(":1:1: invalid digit"), "{bad}");
    }

    #[test]
    fn a_refused_file_keeps_the_old_version_and_a_good_one_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        let r = Reloader::load(&path, parse_number).unwrap();
        std::fs::write(&path, "oops").unwrap();
        let e = r.reload().unwrap_err();
        assert!(matches!(e, ReloadError::Invalid { .. }));
        assert_eq!((r.shared().version(), **r.shared().snapshot()), (1, 1));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(r.reload(), Err(ReloadError::Read { .. })));
        assert_eq!(**r.shared().snapshot(), 1);
        std::fs::write(&path, "2").unwrap();
        assert_eq!(r.reload().unwrap(), 2);
        assert_eq!(**r.shared().snapshot(), 2);
    }

    #[test]
    fn files_over_the_limit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "12345").unwrap();
        let e = Reloader::load_limited(&path, 4, parse_number).unwrap_err();
        assert!(e.to_string().contains("more than the limit of 4"), "{e}");
        std::fs::write(&path, "1234").unwrap();
        assert_eq!(
            **Reloader::load_limited(&path, 4, parse_number)
                .unwrap()
                .shared()
                .snapshot(),
            1234
        );
    }

    #[test]
    fn only_a_change_of_contents_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        let r = Reloader::load(&path, parse_number).unwrap();
        // Same size, written within the same instant: caught by the hash, not the stamp.
        assert_eq!(r.reload_if_changed().unwrap(), None);
        std::fs::write(&path, "2").unwrap();
        assert_eq!(r.reload_if_changed().unwrap(), Some(2));
        assert_eq!(r.reload_if_changed().unwrap(), None);
        // Rewritten with the same bytes: nothing to publish.
        std::fs::write(&path, "2").unwrap();
        assert_eq!(r.reload_if_changed().unwrap(), None);
        // A refused change is reported once, then left alone until the file changes again.
        std::fs::write(&path, "z").unwrap();
        assert!(r.reload_if_changed().is_err());
        assert_eq!(r.reload_if_changed().unwrap(), None);
        assert_eq!(**r.shared().snapshot(), 2);
        // A file replaced by rename is a change too.
        let tmp = dir.path().join("n.tmp");
        std::fs::write(&tmp, "3").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_eq!(r.reload_if_changed().unwrap(), Some(3));
        assert_eq!(**r.shared().snapshot(), 3);
    }

    #[test]
    fn a_vanished_file_is_an_error_until_it_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        let r = Reloader::load(&path, parse_number).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(r.reload_if_changed().is_err());
        assert!(r.reload_if_changed().is_err());
        std::fs::write(&path, "1").unwrap();
        // Same contents as the serving version: nothing to publish.
        assert_eq!(r.reload_if_changed().unwrap(), None);
        std::fs::write(&path, "5").unwrap();
        assert_eq!(r.reload_if_changed().unwrap(), Some(2));
    }
}
