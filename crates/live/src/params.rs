//! Form payloads as the client sends them (`phx-change`, `phx-submit`: the form serialized as
//! `application/x-www-form-urlencoded`) and query strings, decoded into JSON objects the way
//! Plug decodes them: `user[name]=a` is `{"user": {"name": "a"}}`, `tags[]=a&tags[]=b` is
//! `{"tags": ["a", "b"]}`; a later value of the same key wins.

use serde_json::{Map, Value};

/// Keys nested deeper than this are kept whole as one flat key (as Plug bounds its depth).
const MAX_DEPTH: usize = 16;

/// Decodes `a=1&b[c]=2` into a JSON object of strings.
///
/// # Examples
///
/// ```
/// let v = galleon_live::decode_form("user%5Bname%5D=Ada+L&user[tags][]=a&user[tags][]=b&x=1");
/// assert_eq!(v, serde_json::json!({"user": {"name": "Ada L", "tags": ["a", "b"]}, "x": "1"}));
/// ```
pub fn decode_form(s: &str) -> Value {
    let mut root = Map::new();
    for pair in s.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = unescape(k);
        let value = Value::String(unescape(v));
        let path = split_key(&key);
        insert(&mut root, &path, value);
    }
    Value::Object(root)
}

/// A form field's name as the path of keys its value decodes under, as Plug's
/// `decode_merge_target` gives `_target`: `user[name]` is `["user", "name"]`, `tags[]` is
/// `["tags"]`.
pub(crate) fn key_path(name: &str) -> Value {
    let parts = split_key(name).into_iter().filter(|p| !p.is_empty());
    Value::Array(parts.map(|p| Value::String(p.to_owned())).collect())
}

/// `a[b][]` as `["a", "b", ""]`; a malformed or too deep key is one flat part.
fn split_key(key: &str) -> Vec<&str> {
    let Some(open) = key.find('[') else {
        return vec![key];
    };
    let mut parts = vec![&key[..open]];
    let mut rest = &key[open..];
    while let Some(r) = rest.strip_prefix('[') {
        let Some(close) = r.find(']') else {
            return vec![key];
        };
        parts.push(&r[..close]);
        rest = &r[close + 1..];
    }
    if !rest.is_empty() || parts[0].is_empty() || parts.len() > MAX_DEPTH {
        return vec![key];
    }
    parts
}

fn insert(map: &mut Map<String, Value>, path: &[&str], value: Value) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    match rest.first() {
        None => {
            map.insert((*first).to_owned(), value);
        }
        Some(&"") => {
            // `k[]`: appended to a list (`k[][x]` is not decoded further).
            let slot = map
                .entry((*first).to_owned())
                .or_insert_with(|| Value::Array(Vec::new()));
            if !slot.is_array() {
                *slot = Value::Array(Vec::new());
            }
            if let Value::Array(a) = slot {
                a.push(value);
            }
        }
        Some(_) => {
            let slot = map
                .entry((*first).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Value::Object(m) = slot {
                insert(m, rest, value);
            }
        }
    }
}

/// Percent-decoding with `+` as a space; invalid escapes are kept as written, invalid UTF-8
/// replaced.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plug_shapes() {
        assert_eq!(decode_form(""), json!({}));
        assert_eq!(decode_form("a"), json!({"a": ""}));
        assert_eq!(decode_form("a=1&a=2"), json!({"a": "2"}));
        assert_eq!(decode_form("a[]=1&a[]=2"), json!({"a": ["1", "2"]}));
        assert_eq!(
            decode_form("u[n]=x&u[e]=y"),
            json!({"u": {"n": "x", "e": "y"}})
        );
        assert_eq!(
            decode_form("_target[]=u&_target[]=n"),
            json!({"_target": ["u", "n"]})
        );
    }

    #[test]
    fn targets_are_key_paths() {
        assert_eq!(key_path("user[name]"), json!(["user", "name"]));
        assert_eq!(key_path("tags[]"), json!(["tags"]));
        assert_eq!(key_path("q"), json!(["q"]));
        assert_eq!(key_path("a[b"), json!(["a[b"]));
    }

    #[test]
    fn escapes_and_bad_input() {
        assert_eq!(decode_form("q=%E2%9C%93+ok"), json!({"q": "✓ ok"}));
        assert_eq!(
            decode_form("q=100%&r=%zz&s=%4"),
            json!({"q": "100%", "r": "%zz", "s": "%4"})
        );
        assert_eq!(decode_form("q=%ff"), json!({"q": "\u{fffd}"}));
        // Malformed keys stay whole, never panic.
        assert_eq!(decode_form("a[b=1"), json!({"a[b": "1"}));
        assert_eq!(decode_form("[x]=1"), json!({"[x]": "1"}));
        assert_eq!(decode_form("a[b]c=1"), json!({"a[b]c": "1"}));
        let deep = format!("a{}=1", "[b]".repeat(40));
        assert_eq!(decode_form(&deep).as_object().unwrap().len(), 1);
        // A key first a string then a map: the later shape wins.
        assert_eq!(decode_form("a=1&a[b]=2"), json!({"a": {"b": "2"}}));
    }
}
