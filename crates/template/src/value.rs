//! Values: what assigns hold and what expressions compute.
//!
//! `Value` and `Assigns` (from JSON, `Assigns::from_json`, or any `serde::Serialize`,
//! `Assigns::from_serialize`); strings are shared `Bytes`, so a long clean one is referenced.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use galleon_iolist::IoList;

use crate::error::Error;
use crate::list::List;

/// An immutable UTF-8 string backed by shared [`Bytes`]: cloning it, or putting it in an
/// [`IoList`], costs a reference-count increment, never a copy of its bytes.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Str(Bytes);

/// Byte order, as `[u8]` orders (so `Borrow<[u8]>` lookups agree). Keys of up to 8 bytes (most
/// map keys) compare as one big-endian integer and their lengths, in line: a `memcmp` call per
/// key of a small map cost more than the comparison itself.
impl Ord for Str {
    #[inline]
    fn cmp(&self, other: &Str) -> std::cmp::Ordering {
        let (a, b) = (&self.0[..], &other.0[..]);
        if a.len() <= 8 && b.len() <= 8 {
            // Zero padding orders a prefix first only through the length, as `[u8]` does.
            (prefix8(a), a.len()).cmp(&(prefix8(b), b.len()))
        } else {
            a.cmp(b)
        }
    }
}

/// The first bytes of `s` (at most 8) as a big-endian integer, zero-padded: two overlapping
/// loads for 4 to 8 bytes, no `memcpy` call.
#[inline(always)]
pub(crate) fn prefix8(s: &[u8]) -> u64 {
    if let Some(c) = s.first_chunk::<8>() {
        u64::from_be_bytes(*c)
    } else if let (Some(h), Some(l)) = (s.first_chunk::<4>(), s.last_chunk::<4>()) {
        let (hi, lo) = (
            u64::from(u32::from_be_bytes(*h)),
            u64::from(u32::from_be_bytes(*l)),
        );
        (hi << 32) | (lo << (64 - 8 * s.len()))
    } else {
        s.iter()
            .enumerate()
            .fold(0, |acc, (i, &b)| acc | (u64::from(b) << (56 - 8 * i)))
    }
}

/// Up to 8 bytes of `s` as one little-endian word: two overlapping 4-byte loads from 4 bytes up,
/// the first, middle and last byte below. Two strings of the same length up to 8 bytes are equal
/// exactly when their words are (the loads cover every byte). No byte swap, no shift by length:
/// cheaper than [`prefix8`] where only equality matters.
#[inline(always)]
pub(crate) fn word8(s: &[u8]) -> u64 {
    let n = s.len();
    if let (Some(h), Some(l)) = (s.first_chunk::<4>(), s.last_chunk::<4>()) {
        u64::from(u32::from_le_bytes(*h)) | u64::from(u32::from_le_bytes(*l)) << 32
    } else if n > 0 {
        u64::from(s[0]) | u64::from(s[n / 2]) << 8 | u64::from(s[n - 1]) << 16
    } else {
        0
    }
}

impl PartialOrd for Str {
    #[inline]
    fn partial_cmp(&self, other: &Str) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Str {
    /// Copies `s` into a new shared buffer.
    pub fn new(s: &str) -> Str {
        Str(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// `self <> tail` written into `self`'s own buffer when nothing else references it (the
    /// accumulator of `Enum.reduce(words, "", fn w, acc -> acc <> w end)`): the buffer grows
    /// by doubling, so repeated appends cost amortised linear time instead of a copy of the
    /// whole string each. Returns the appended string, `self` again (a view of the buffer's
    /// first `self.len()` bytes, which no later append overwrites: appends only write past the
    /// end, and only while the buffer is unique) and the bytes newly allocated (the grown
    /// buffer's capacity, 0 when it had room), for the memory budget. `Err(self)` when the
    /// buffer is shared (or static): the caller copies.
    pub(crate) fn append_unique(self, tail: &str) -> Result<(Str, Str, usize), Str> {
        let len = self.0.len();
        let mut buf = self.0.try_into_mut().map_err(Str)?;
        let before = buf.capacity();
        buf.reserve(tail.len());
        let grown = if buf.capacity() > before {
            buf.capacity()
        } else {
            0
        };
        buf.extend_from_slice(tail.as_bytes());
        let whole = buf.freeze();
        let prefix = whole.slice(..len);
        Ok((Str(whole), Str(prefix), grown))
    }

    /// Wraps a `'static` string without copying it.
    pub const fn from_static(s: &'static str) -> Str {
        Str(Bytes::from_static(s.as_bytes()))
    }

    /// Wraps shared bytes after checking that they are UTF-8.
    pub fn from_utf8(bytes: Bytes) -> Result<Str, std::str::Utf8Error> {
        std::str::from_utf8(&bytes)?;
        Ok(Str(bytes))
    }

    /// The string. (Checks UTF-8 again, in O(n): the type holds no `unsafe` shortcut.)
    pub fn as_str(&self) -> &str {
        // The constructors only admit UTF-8, so this never takes the fallback.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The bytes, shared.
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True for the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Borrow<[u8]> for Str {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Str {
        Str::new(s)
    }
}

impl From<String> for Str {
    fn from(s: String) -> Str {
        Str(Bytes::from(s))
    }
}

/// The map type of [`Value::Map`]: string keys in sorted order.
pub type Map = BTreeMap<Str, Value>;

/// A template value: what an assign holds and what an expression computes.
///
/// Cloning is cheap: strings, lists and maps are shared.
#[derive(Clone, Default, PartialEq)]
pub enum Value {
    /// `nil`; renders as nothing.
    #[default]
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// A 64-bit integer; arithmetic on it is checked.
    Int(i64),
    /// A float.
    Float(f64),
    /// A shared string; rendered escaped unless wrapped in `raw`.
    Str(Str),
    /// An atom (`:ok`): rendered as its name. `true`, `false` and `nil` are [`Value::Bool`]
    /// and [`Value::Nil`], never atoms.
    Atom(Str),
    /// A tuple (`{:ok, x}`, the `{key, value}` pairs of a map in a `for`).
    Tuple(Arc<[Value]>),
    /// A shared list.
    List(List),
    /// A shared map with string keys.
    Map(Arc<Map>),
    /// Already-escaped HTML (what `raw(...)` and `@inner_content` hold): rendered as is.
    Safe(Arc<IoList>),
    /// A compiled regular expression (`~r/.../i`); it cannot be output, as in Phoenix.
    Regex(Arc<crate::regexp::Regex>),
}

impl Value {
    /// A string value (copies `s` once).
    pub fn str(s: &str) -> Value {
        Value::Str(Str::new(s))
    }

    /// An atom.
    pub fn atom(name: &str) -> Value {
        Value::Atom(Str::new(name))
    }

    /// A list value.
    pub fn list(items: impl IntoIterator<Item = Value>) -> Value {
        Value::List(items.into_iter().collect())
    }

    /// A map value.
    pub fn map<K: Into<Str>>(entries: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Map(Arc::new(
            entries.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        ))
    }

    /// Pre-rendered HTML, output without escaping.
    pub fn safe(html: IoList) -> Value {
        Value::Safe(Arc::new(html))
    }

    /// Elixir's truthiness: everything but `nil` and `false` is true.
    pub fn is_truthy(&self) -> bool {
        !matches!(self, Value::Nil | Value::Bool(false))
    }

    /// The name of the value's type, as error messages say it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "boolean",
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Atom(_) => "atom",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Safe(_) => "safe html",
            Value::Regex(_) => "regex",
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("nil"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Atom(a) => write!(f, ":{a}"),
            Value::Tuple(t) => {
                let mut d = f.debug_tuple("");
                for v in t.iter() {
                    d.field(v);
                }
                d.finish()
            }
            Value::List(l) => f.debug_list().entries(l.iter()).finish(),
            Value::Map(m) => f.debug_map().entries(m.iter()).finish(),
            Value::Safe(h) => write!(f, "{{:safe, {} bytes}}", h.len()),
            Value::Regex(r) => write!(f, "{r:?}"),
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl From<i32> for Value {
    fn from(i: i32) -> Value {
        Value::Int(i.into())
    }
}

impl From<u32> for Value {
    fn from(i: u32) -> Value {
        Value::Int(i.into())
    }
}

/// Integer types that always fit an `i64`.
macro_rules! from_small_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(i: $t) -> Value {
                Value::Int(i.into())
            }
        }
    )*};
}
from_small_int!(i8, i16, u8, u16);

/// Counts and lengths (`len()`, sizes): an integer, or as JSON numbers do past `i64::MAX`, a float.
macro_rules! from_wide_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(i: $t) -> Value {
                i64::try_from(i).map_or(Value::Float(i as f64), Value::Int)
            }
        }
    )*};
}
from_wide_int!(u64, usize, i128, u128, isize);

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Float(x)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(Str::new(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(Str::from(s))
    }
}

impl From<Str> for Value {
    fn from(s: Str) -> Value {
        Value::Str(s)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Value {
        Value::List(v.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Nil, Into::into)
    }
}

impl From<serde_json::Value> for Value {
    /// JSON to a value: numbers that fit an `i64` become `Int`, other numbers `Float`.
    fn from(j: serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::Nil,
            J::Bool(b) => Value::Bool(b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::String(s) => Value::from(s),
            J::Array(a) => Value::List(a.into_iter().map(Value::from).collect()),
            J::Object(o) => Value::Map(Arc::new(
                o.into_iter()
                    .map(|(k, v)| (Str::from(k), v.into()))
                    .collect(),
            )),
        }
    }
}

impl Value {
    /// Any `serde::Serialize` value (a struct of your own, a map, a vector) as a template value:
    /// structs and maps become maps, sequences lists, through `serde_json`'s data model (so an
    /// integer above `i64::MAX` becomes a float, and map keys must be strings).
    pub fn from_serialize<T: serde::Serialize + ?Sized>(value: &T) -> Result<Value, Error> {
        serde_json::to_value(value)
            .map(Value::from)
            .map_err(|e| Error::data(format!("cannot convert to a template value: {e}")))
    }
}

/// The assigns of one render: the `@name` values. Cloning shares the map.
#[derive(Clone, Default, PartialEq)]
pub struct Assigns {
    map: Arc<Map>,
}

impl Assigns {
    /// No assigns.
    pub fn new() -> Assigns {
        Assigns::default()
    }

    /// Assigns from a JSON object (each key an assign). Anything but an object is a data error.
    pub fn from_json(json: serde_json::Value) -> Result<Assigns, Error> {
        match json {
            serde_json::Value::Object(o) => Ok(Assigns {
                map: Arc::new(
                    o.into_iter()
                        .map(|(k, v)| (Str::from(k), Value::from(v)))
                        .collect(),
                ),
            }),
            other => Err(Error::data(format!(
                "assigns must be a JSON object, not {}",
                json_type(&other)
            ))),
        }
    }

    /// Assigns from any `serde::Serialize` value that serializes as a map or struct: each field
    /// is an assign.
    ///
    /// ```
    /// #[derive(serde::Serialize)]
    /// struct Page<'a> { title: &'a str, visits: u32 }
    ///
    /// let a = galleon_template::Assigns::from_serialize(&Page { title: "Home", visits: 3 })?;
    /// assert_eq!(a.get("visits"), Some(&galleon_template::Value::Int(3)));
    /// # Ok::<(), galleon_template::Error>(())
    /// ```
    pub fn from_serialize<T: serde::Serialize + ?Sized>(value: &T) -> Result<Assigns, Error> {
        let json = serde_json::to_value(value)
            .map_err(|e| Error::data(format!("cannot convert to assigns: {e}")))?;
        Assigns::from_json(json)
    }

    /// Sets `@key` (copy-on-write if the map is shared).
    pub fn insert(&mut self, key: &str, value: impl Into<Value>) {
        Arc::make_mut(&mut self.map).insert(Str::new(key), value.into());
    }

    /// The value of `@key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&Value> {
        let key = key.as_bytes();
        // One or two assigns: read at the map's ends and compared in place by length and one
        // word, where the tree's search calls `memcmp` at every key it passes (a render looks
        // up each assign it uses).
        if self.map.len() <= 2 {
            let (k, v) = self.map.first_key_value()?;
            if same_key(k.bytes(), key) {
                return Some(v);
            }
            let (k, v) = self.map.last_key_value()?;
            return same_key(k.bytes(), key).then_some(v);
        }
        self.map.get(key)
    }

    /// Number of assigns.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The assigns in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// `a == b`, in one word-sized comparison up to 8 bytes.
#[inline(always)]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && if a.len() <= 8 {
            word8(a) == word8(b)
        } else {
            a == b
        }
}

impl fmt::Debug for Assigns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.map.iter()).finish()
    }
}

impl<K: Into<Str>, V: Into<Value>> FromIterator<(K, V)> for Assigns {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Assigns {
        Assigns {
            map: Arc::new(
                iter.into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
        }
    }
}

fn json_type(j: &serde_json::Value) -> &'static str {
    use serde_json::Value as J;
    match j {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Number(_) => "a number",
        J::String(_) => "a string",
        J::Array(_) => "an array",
        J::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A regex is one pointer (`Arc`), so adding it left `Value` the size of a string and a tag.
    #[test]
    fn value_stays_a_string_and_a_tag() {
        assert_eq!(size_of::<Value>(), size_of::<Str>() + 8);
    }

    #[test]
    fn append_unique_grows_in_place_and_keeps_the_prefix() {
        let (mut s, _, grown) = Str::from(String::from("ab")).append_unique("c").unwrap();
        assert!(grown > 0);
        let mut allocs = 0;
        for _ in 0..1000 {
            let before = s.as_str().as_ptr();
            let (whole, prefix, grown) = s.append_unique("xy").unwrap();
            assert_eq!(prefix.as_str(), &whole.as_str()[..whole.len() - 2]);
            if grown > 0 {
                allocs += 1;
            } else {
                assert_eq!(whole.as_str().as_ptr(), before, "appended in place");
            }
            drop(prefix);
            s = whole;
        }
        assert_eq!(s.len(), 2003);
        assert!(allocs < 20, "{allocs} reallocations: not doubling");
    }

    #[test]
    fn append_unique_refuses_a_shared_or_static_buffer() {
        let s = Str::from(String::from("ab"));
        let other = s.clone();
        let s = s.append_unique("c").unwrap_err();
        assert_eq!((s.as_str(), other.as_str()), ("ab", "ab"));
        assert!(Str::from_static("ab").append_unique("c").is_err());
        // The prefix handed back shares the buffer: the next append must copy.
        let (whole, prefix, _) = Str::from(String::from("ab")).append_unique("c").unwrap();
        let whole = whole.append_unique("d").unwrap_err();
        assert_eq!((whole.as_str(), prefix.as_str()), ("abc", "ab"));
    }

    #[test]
    fn json_numbers_become_ints_or_floats() {
        let v = Value::from(serde_json::json!([1, 1.5, 18446744073709551615u64, null]));
        assert_eq!(
            v,
            Value::list([
                Value::Int(1),
                Value::Float(1.5),
                Value::Float(18446744073709551615u64 as f64),
                Value::Nil
            ])
        );
    }

    #[test]
    fn rust_integers_become_ints_or_floats_as_json_numbers_do() {
        let mut a = Assigns::new();
        a.insert("len", vec![1, 2, 3].len());
        a.insert("small", 7u8);
        a.insert("big", u64::MAX);
        assert_eq!(a.get("len"), Some(&Value::Int(3)));
        assert_eq!(a.get("small"), Some(&Value::Int(7)));
        assert_eq!(
            a.get("big"),
            Some(&Value::from(serde_json::json!(u64::MAX)))
        );
        assert_eq!(Value::from(-5isize), Value::Int(-5));
    }

    #[test]
    fn assigns_from_json_must_be_an_object() {
        let e = Assigns::from_json(serde_json::json!([1])).unwrap_err();
        assert!(e.is_data());
        assert_eq!(e.to_string(), "assigns must be a JSON object, not an array");
        let a = Assigns::from_json(serde_json::json!({"n": 3})).unwrap();
        assert_eq!(a.get("n"), Some(&Value::Int(3)));
    }

    #[test]
    fn str_orders_as_its_bytes() {
        let words = [
            "",
            "a",
            "ab",
            "ab\0",
            "abc",
            "abcd",
            "abcde",
            "abcdefg",
            "abcdefgh",
            "abcdefghi",
            "b",
            "name",
            "score",
            "scor",
            "\u{ff}",
            "a\u{ff}b",
            "zzzzzzzz",
            "zzzzzzzzz",
        ];
        for a in words {
            for b in words {
                assert_eq!(
                    Str::from(a).cmp(&Str::from(b)),
                    a.as_bytes().cmp(b.as_bytes()),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn insert_is_copy_on_write() {
        let mut a = Assigns::new();
        a.insert("x", 1i64);
        let b = a.clone();
        a.insert("x", 2i64);
        assert_eq!(b.get("x"), Some(&Value::Int(1)));
        assert_eq!(a.get("x"), Some(&Value::Int(2)));
    }
}
