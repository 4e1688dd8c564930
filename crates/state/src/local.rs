//! A per-thread handle on a [`Shared`] value for the hottest read paths.
//!
//! `LocalCache`: a thread's reference to the current version (kept in a `thread_local!` by its
//! user), checked with one atomic load of the version counter per read; it holds the last version
//! until the thread's next read.

use std::sync::Arc;

use crate::shared::{Shared, Versioned};

/// One thread's reference to the current version of a [`Shared`] cell, checked with one atomic
/// load per read instead of a snapshot's (arc-swap's debt slot, about 95 instructions): for a
/// value read on every request of a server, kept in a `thread_local!`.
///
/// The cost: a thread keeps the version it last read alive until its next read, so an old
/// version may outlive a swap on an idle thread. Use [`Shared::snapshot`] where that matters.
///
/// # Examples
///
/// ```
/// use std::cell::RefCell;
/// use galleon_state::{LocalCache, Shared};
///
/// thread_local! {
///     static LOCAL: RefCell<LocalCache<String>> = const { RefCell::new(LocalCache::new()) };
/// }
///
/// let config = Shared::new(String::from("v1"));
/// let read = |c: &Shared<String>| LOCAL.with(|l| l.borrow_mut().get(c).value().clone());
/// assert_eq!(read(&config), "v1");
/// config.store(String::from("v2"));
/// assert_eq!(read(&config), "v2");
/// ```
#[derive(Debug)]
pub struct LocalCache<T> {
    /// The cell the copy is of (kept alive, so its identity cannot be reused) and the version.
    slot: Option<(Shared<T>, Arc<Versioned<T>>)>,
}

impl<T> Default for LocalCache<T> {
    fn default() -> Self {
        LocalCache::new()
    }
}

impl<T> LocalCache<T> {
    /// An empty cache; the first [`LocalCache::get`] fills it.
    pub const fn new() -> LocalCache<T> {
        LocalCache { slot: None }
    }

    /// The current version of `shared`: the cached one while no store has happened since (one
    /// atomic load), else a fresh one (a reference count). For the instant between a store's
    /// count and its swap it may return the version before; the next call sees the new one.
    pub fn get(&mut self, shared: &Shared<T>) -> &Arc<Versioned<T>> {
        let now = shared.version();
        let fresh =
            matches!(&self.slot, Some((cell, v)) if v.version() == now && cell.ptr_eq(shared));
        if !fresh {
            self.slot = Some((shared.clone(), shared.load_full()));
        }
        match &self.slot {
            Some((_, v)) => v,
            None => unreachable!("filled above"),
        }
    }

    /// Lets go of the cached version (and of the cell).
    pub fn clear(&mut self) {
        self.slot = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_stores_and_tells_cells_apart() {
        let a = Shared::new(1);
        let b = Shared::new(100);
        let mut cache = LocalCache::new();
        assert_eq!(*cache.get(&a).value(), 1);
        a.store(2);
        assert_eq!(*cache.get(&a).value(), 2);
        // Another cell at version 1, like `a` was: not mistaken for it.
        assert_eq!(*cache.get(&b).value(), 100);
        assert_eq!(*cache.get(&a).value(), 2);
    }

    #[test]
    fn a_cached_version_is_the_same_allocation_until_a_store() {
        let s = Shared::new(vec![0u8; 16]);
        let mut cache = LocalCache::new();
        let first = Arc::as_ptr(cache.get(&s));
        assert_eq!(Arc::as_ptr(cache.get(&s)), first, "re-read without a store");
        s.store(vec![1u8; 16]);
        assert_ne!(Arc::as_ptr(cache.get(&s)), first);
    }

    #[test]
    fn clearing_frees_the_old_version() {
        let s = Shared::new(Arc::new(()));
        let witness = Arc::downgrade(s.snapshot().value());
        let mut cache = LocalCache::new();
        cache.get(&s);
        s.store(Arc::new(()));
        assert!(witness.upgrade().is_some(), "held by the cache");
        cache.clear();
        assert!(witness.upgrade().is_none());
    }
}
