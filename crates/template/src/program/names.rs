//! Template names to their index in a catalog: what every render by name looks up first.

use std::collections::BTreeMap;

/// A name-to-index table: open addressing on a hash of the name's length and its first and last
/// eight bytes (two loads, no loop over the name), each hit checked against the name itself.
/// The `BTreeMap` it is built from stays the catalog's sorted listing; searching it costs a
/// `memcmp` call per node visited, which showed in profiles of small pages.
#[derive(Debug)]
pub(crate) struct Names {
    /// `(hash, index)` per slot; `index` is `usize::MAX` in an empty slot.
    slots: Box<[(u64, usize)]>,
    /// The names, by index, for the check of a hit.
    names: Box<[Box<[u8]>]>,
}

/// Marks an empty slot.
const EMPTY: usize = usize::MAX;

impl Names {
    /// The table of `by_name`: every name maps to the index the map gives it.
    pub(crate) fn new(by_name: &BTreeMap<String, usize>) -> Names {
        let size = (by_name.len() * 2).next_power_of_two().max(4);
        let mut slots = vec![(0, EMPTY); size].into_boxed_slice();
        let count = by_name.values().map(|&i| i + 1).max().unwrap_or(0);
        let mut names = vec![Box::<[u8]>::default(); count];
        for (name, &index) in by_name {
            let h = hash(name.as_bytes());
            let mut at = slot(h, size);
            while slots[at].1 != EMPTY {
                at = (at + 1) & (size - 1);
            }
            slots[at] = (h, index);
            names[index] = name.as_bytes().into();
        }
        Names {
            slots,
            names: names.into_boxed_slice(),
        }
    }

    /// The index of `name`.
    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<usize> {
        let name = name.as_bytes();
        let h = hash(name);
        let size = self.slots.len();
        let mut at = slot(h, size);
        loop {
            let (sh, index) = *self.slots.get(at)?;
            if index == EMPTY {
                return None;
            }
            if sh == h && self.names.get(index).is_some_and(|n| same(n, name)) {
                return Some(index);
            }
            at = (at + 1) & (size - 1);
        }
    }
}

/// The slot a hash starts probing at, in a table of `size` (a power of two) slots.
#[inline(always)]
fn slot(h: u64, size: usize) -> usize {
    (h >> 40) as usize & (size - 1)
}

/// The first and last eight bytes of `s` (overlapping from 8 to 15 bytes; a shorter `s` as
/// one word of its bytes, the other zero).
#[inline(always)]
fn ends(s: &[u8]) -> (u64, u64) {
    match (s.first_chunk::<8>(), s.last_chunk::<8>()) {
        (Some(a), Some(b)) => (u64::from_le_bytes(*a), u64::from_le_bytes(*b)),
        _ => (crate::value::word8(s), 0),
    }
}

#[inline(always)]
fn hash(s: &[u8]) -> u64 {
    let (a, b) = ends(s);
    (a ^ b.rotate_left(29) ^ (s.len() as u64).rotate_left(53)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// `a == b`, names of up to 16 bytes by their end words (which then cover every byte).
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && if a.len() <= 16 {
            ends(a) == ends(b)
        } else {
            a == b
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_name_and_nothing_else() {
        let names = [
            "",
            "a",
            "ab",
            "abc",
            "teams.html.eex",
            "teams.html.eeX",
            "big-table.html.eex",
            "pages/blah.html.eex",
            "pages/blah.html.eey",
            "12345678",
            "123456789",
            "1234567812345678",
            "1234567812345679",
        ];
        for n in 0..=names.len() {
            let by_name: BTreeMap<String, usize> = names[..n]
                .iter()
                .enumerate()
                .map(|(i, s)| ((*s).to_owned(), i))
                .collect();
            let table = Names::new(&by_name);
            for (i, s) in names.iter().enumerate() {
                assert_eq!(table.get(s), by_name.get(*s).copied(), "{s:?} among {n}");
                assert_eq!(table.get(s).is_some(), i < n);
            }
            assert_eq!(table.get("missing"), None);
        }
    }
}
