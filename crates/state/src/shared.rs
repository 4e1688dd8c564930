//! [`Shared`]: one value read by every request, replaced whole by a writer.
//!
//! `Shared::snapshot` takes no lock and copies nothing; `Shared::store` is one pointer swap; each
//! value is `Versioned`, its number in the same allocation.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::{ArcSwap, Guard};

/// One published value and the version number it was published under.
///
/// The number travels with the value, in the same allocation, so a reader that sees the value
/// sees its own version: there is no window in which the counter and the value disagree.
#[derive(Debug)]
pub struct Versioned<T> {
    version: u64,
    value: T,
}

impl<T> Versioned<T> {
    /// The version this value was published under: 1 for the first, one more for each swap.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The value.
    pub fn value(&self) -> &T {
        &self.value
    }
}

impl<T> Deref for Versioned<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

/// A value read by many threads without a lock or a copy, replaced atomically by a writer.
///
/// Built on [`arc_swap::ArcSwap`]: [`Shared::snapshot`] costs a few atomic operations on a slot
/// of the reading thread's own (no reference count that every core writes to, which is what an
/// `Arc` clone per request would be), and [`Shared::store`] publishes a new version with one
/// pointer swap. A reader keeps the version it took for as long as it holds the snapshot, even
/// across any number of swaps; the old version is freed when its last reader lets go.
///
/// This is the answer to the Elixir Agent of seed 003, whose state was copied into every
/// reader: here a reader gets a pointer.
///
/// Cloning a `Shared` gives another handle to the same cell.
///
/// # Examples
///
/// ```
/// use galleon_state::Shared;
///
/// let rules = Shared::new(vec!["a", "b"]);
/// let before = rules.snapshot();
/// assert_eq!(before.version(), 1);
///
/// let v = rules.store(vec!["c"]);
/// assert_eq!(v, 2);
/// // The reader that started before the swap still sees its version, whole.
/// assert_eq!(**before, ["a", "b"]);
/// // New readers see the new one.
/// assert_eq!(**rules.snapshot(), ["c"]);
/// ```
pub struct Shared<T> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    current: ArcSwap<Versioned<T>>,
    /// The last version number handed out; bumped under no lock by [`Shared::store`].
    counter: AtomicU64,
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            inner: self.inner.clone(),
        }
    }
}

impl<T> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl<T> Shared<T> {
    /// A cell holding `value` as version 1.
    pub fn new(value: T) -> Shared<T> {
        Shared {
            inner: Arc::new(Inner {
                current: ArcSwap::from_pointee(Versioned { version: 1, value }),
                counter: AtomicU64::new(1),
            }),
        }
    }

    /// The current version, for the length of one request: no lock, no copy.
    ///
    /// Meant to be held briefly (a handler's call). Holding many snapshots at once on one thread
    /// is allowed but slower; to keep a version for long, use [`Shared::load_full`].
    pub fn snapshot(&self) -> Snapshot<T> {
        Snapshot(self.inner.current.load())
    }

    /// The current version as an owned `Arc`, to keep as long as one likes (one reference count
    /// increment).
    pub fn load_full(&self) -> Arc<Versioned<T>> {
        self.inner.current.load_full()
    }

    /// Publishes `value` as the next version and returns its number. Readers that already hold a
    /// snapshot keep theirs; every snapshot taken after this returns sees `value` (or a later
    /// one). Concurrent stores are each published whole, the later swap winning.
    pub fn store(&self, value: T) -> u64 {
        let version = self.inner.counter.fetch_add(1, Ordering::AcqRel) + 1;
        self.inner
            .current
            .store(Arc::new(Versioned { version, value }));
        version
    }

    /// The number of the last version handed out by [`Shared::store`] (or 1). One atomic load:
    /// cheap enough to check on every request whether a private copy is stale. It may run one
    /// ahead of [`Shared::snapshot`] for the instant between a store's count and its swap.
    pub fn version(&self) -> u64 {
        self.inner.counter.load(Ordering::Acquire)
    }

    /// Whether two handles share one cell (to key per-thread copies by cell).
    pub fn ptr_eq(&self, other: &Shared<T>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// An identity of the cell, stable while any handle to it lives.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }
}

/// A reader's view of one version of a [`Shared`] value: dereferences to [`Versioned`], so
/// `snap.version()` and `snap.value()` (or `**snap`) come from the same version.
pub struct Snapshot<T>(Guard<Arc<Versioned<T>>>);

impl<T> Deref for Snapshot<T> {
    type Target = Versioned<T>;

    fn deref(&self) -> &Versioned<T> {
        &self.0
    }
}

impl<T: fmt::Debug> fmt::Debug for Snapshot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Snapshot").field(&**self.0).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_count_up_and_travel_with_the_value() {
        let s = Shared::new(10);
        assert_eq!(s.version(), 1);
        assert_eq!(s.store(11), 2);
        assert_eq!(s.store(12), 3);
        let snap = s.snapshot();
        assert_eq!((snap.version(), **snap), (3, 12));
        assert_eq!(s.load_full().version(), 3);
    }

    #[test]
    fn a_held_snapshot_survives_swaps_and_the_old_value_is_freed_after() {
        let s = Shared::new(Arc::new("old"));
        let witness = Arc::downgrade(&s.snapshot().value().clone());
        let held = s.load_full();
        for i in 0..100 {
            s.store(Arc::new(if i % 2 == 0 { "x" } else { "y" }));
        }
        assert_eq!(**held.value(), "old");
        assert!(witness.upgrade().is_some());
        drop(held);
        assert!(witness.upgrade().is_none(), "the old version was not freed");
    }

    #[test]
    fn readers_on_many_threads_always_see_a_whole_version() {
        // Each version is a vector whose every element equals its version number: a torn or
        // mixed read would show two different numbers.
        let s = Shared::new(vec![1u64; 64]);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let s = s.clone();
                scope.spawn(move || {
                    for _ in 0..20_000 {
                        let snap = s.snapshot();
                        let v = snap.version();
                        assert!(snap.iter().all(|&x| x == v), "mixed version");
                    }
                });
            }
            let writer = s.clone();
            scope.spawn(move || {
                for _ in 0..2_000 {
                    let next = writer.version() + 1;
                    // Only this thread stores, so the version it gets is the one it predicted.
                    assert_eq!(writer.store(vec![next; 64]), next);
                }
            });
        });
        assert_eq!(s.version(), 2_001);
    }

    #[test]
    fn handles_share_one_cell() {
        let a = Shared::new(());
        let b = a.clone();
        assert!(a.ptr_eq(&b));
        assert_eq!(a.id(), b.id());
        assert!(!a.ptr_eq(&Shared::new(())));
    }
}
