//! A rule set: parsed and checked from `rules.json`, indexed at load, matched by intersecting
//! sorted id lists, answered with each rule's JSON serialised once at load.
//!
//! The file:
//!
//! ```json
//! {"revision": "seed-3",
//!  "fields": [{"name": "id", "type": "integer"}, {"name": "country", "type": "string"}, ...],
//!  "rules": [
//!   {"id": 1, "country": "NL", ...},
//!   ...
//! ]}
//! ```
//!
//! Field types are `string`, `integer` (i64), `number` (f64) and `boolean`; every rule has every
//! field, nothing else, each of its declared type. Field names are 1 to 64 of `a-z 0-9 _`, not
//! starting with `_` (those names are the query's options).
//!
//! **Matching.** A query is pairs `field=value`; a rule matches when, for every pair, its field
//! equals the value (so a field given twice with two values matches nothing). No pairs: every
//! rule. The value is read as the field's type: a `string` as is (percent-decoded, `+` a space),
//! an `integer` as a decimal i64 (`+`/`-` sign allowed, nothing else), a `number` as an f64 (`1`,
//! `1.0` and `1e0` are equal), a `boolean` as `true` or `false` only. A value that does not read
//! as its field's type, or a field that does not exist, is the client's error (400), never an
//! empty match, so a typo is not mistaken for "no rule".
//!
//! **Why this is fast.** Each field has a map from value to the ascending list of the rules that
//! have it, and for a common value (one rule in 32 or more) also a bitset. A match looks up each
//! pair's list and starts from the shortest: when even that one is common, the bitsets are ANDed
//! (5,000 rules are 79 words); otherwise its ids are kept when every other value has them (a bit
//! test, or a binary search that only moves forward). The cost follows the size of the smallest
//! list, not the 5,000 rules x 27 fields a scan reads.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use bytes::Bytes;
use galleon_http::IoList;
use serde_json::Value as Json;
use serde_json::value::RawValue;

/// Most fields a rule set may declare.
pub(crate) const MAX_FIELDS: usize = 64;

/// Longest field name.
const MAX_FIELD_NAME: usize = 64;

/// Longest revision label.
const MAX_REVISION: usize = 256;

/// A field's declared type, which is also how a query value for it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldType {
    String,
    Integer,
    Number,
    Boolean,
}

impl FieldType {
    fn parse(s: &str) -> Option<FieldType> {
        Some(match s {
            "string" => FieldType::String,
            "integer" => FieldType::Integer,
            "number" => FieldType::Number,
            "boolean" => FieldType::Boolean,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Integer => "integer",
            FieldType::Number => "number",
            FieldType::Boolean => "boolean",
        }
    }
}

/// One declared field.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub(crate) name: Box<str>,
    pub(crate) ty: FieldType,
}

/// A field's value in a rule, and the key of the index: equal keys are equal values. A number is
/// kept as its bits (with `-0` made `0`; JSON has no NaN), so it can be hashed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Str(Box<str>),
    Int(i64),
    Num(u64),
    Bool(bool),
}

impl Key {
    fn number(f: f64) -> Key {
        Key::Num(if f == 0.0 { 0 } else { f.to_bits() })
    }

    /// `text` read as a value of type `ty`: the query's coercion rule (module docs).
    pub(crate) fn read(ty: FieldType, text: &str) -> Option<Key> {
        match ty {
            FieldType::String => Some(Key::Str(text.into())),
            FieldType::Integer => text.parse().ok().map(Key::Int),
            FieldType::Number => text
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(Key::number),
            FieldType::Boolean => match text {
                "true" => Some(Key::Bool(true)),
                "false" => Some(Key::Bool(false)),
                _ => None,
            },
        }
    }

    fn of_json(ty: FieldType, v: &Json) -> Option<Key> {
        match ty {
            FieldType::String => v.as_str().map(|s| Key::Str(s.into())),
            FieldType::Integer => v.as_i64().map(Key::Int),
            FieldType::Number => v.as_f64().map(Key::number),
            FieldType::Boolean => v.as_bool().map(Key::Bool),
        }
    }

    fn to_json(&self) -> Json {
        match self {
            Key::Str(s) => Json::from(&**s),
            Key::Int(i) => Json::from(*i),
            Key::Num(bits) => Json::from(f64::from_bits(*bits)),
            Key::Bool(b) => Json::from(*b),
        }
    }
}

/// What a rule set may hold: the limits of `--rules-max-rules` (and the file's size, checked
/// before parsing by the reloader).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SetLimits {
    pub(crate) max_rules: usize,
}

/// A loaded rule set: the rules, their JSON, and one index per field.
#[derive(Debug)]
pub(crate) struct RuleSet {
    revision: Box<str>,
    fields: Vec<Field>,
    by_name: HashMap<Box<str>, usize>,
    /// Row-major: rule `r`'s field `f` is `values[r * fields.len() + f]`.
    values: Vec<Key>,
    /// Every rule as a JSON object, in field order, serialised once at load into one allocation;
    /// `spans[r]` is rule `r`'s range in it. A response pins the allocation once and refers to
    /// its rules' ranges: no copy and no reference-count traffic per rule, on a count every
    /// worker would otherwise share.
    json: Bytes,
    spans: Vec<(u32, u32)>,
    /// `revision` as a JSON string.
    revision_json: Bytes,
    /// Per field: value -> the rules that have it.
    index: Vec<HashMap<Key, Posting>>,
}

/// Why a query was refused (400).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MatchError {
    UnknownField(String),
    BadValue {
        field: String,
        ty: FieldType,
        value: String,
    },
}

impl std::fmt::Display for MatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatchError::UnknownField(name) => write!(f, "unknown field `{name}`"),
            MatchError::BadValue { field, ty, value } => {
                write!(f, "field `{field}` is {} and `{value}` is not one", a(*ty))
            }
        }
    }
}

fn a(ty: FieldType) -> &'static str {
    match ty {
        FieldType::Integer => "an integer",
        FieldType::String => "a string",
        FieldType::Number => "a number",
        FieldType::Boolean => "a boolean (true or false)",
    }
}

/// A query made of keys: one `(field, key)` per pair, checked against the set's fields.
#[derive(Debug, Default)]
pub(crate) struct Query {
    terms: Vec<(usize, Key)>,
}

impl RuleSet {
    /// Parses and checks `bytes` (the file at `path`); the error is located: `path:line:col:` for
    /// JSON syntax, and also the rule's index and field for a rule that breaks the schema.
    pub(crate) fn parse(path: &Path, bytes: &[u8], limits: SetLimits) -> Result<RuleSet, String> {
        let p = path.display();
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let (l, c) = line_col(bytes, e.valid_up_to());
            format!("{p}:{l}:{c}: not UTF-8")
        })?;
        let at = |raw: &RawValue| {
            let offset = raw.get().as_ptr() as usize - text.as_ptr() as usize;
            line_col(bytes, offset)
        };
        let top: HashMap<String, &RawValue> =
            serde_json::from_str(text).map_err(|e| json_error(&p, &e))?;
        let get = |name: &str| {
            top.get(name)
                .copied()
                .ok_or_else(|| format!("{p}:1:1: the top-level object has no `{name}`"))
        };
        if let Some(extra) = top
            .keys()
            .find(|k| !["revision", "fields", "rules"].contains(&k.as_str()))
        {
            let (l, c) = at(top[extra]);
            return Err(format!("{p}:{l}:{c}: unknown top-level key `{extra}`"));
        }
        let raw = get("revision")?;
        let revision: String = serde_json::from_str(raw.get())
            .ok()
            .filter(|r: &String| !r.is_empty() && r.len() <= MAX_REVISION)
            .ok_or_else(|| {
                let (l, c) = at(raw);
                format!("{p}:{l}:{c}: `revision` must be a string of 1 to {MAX_REVISION} bytes")
            })?;
        let raw = get("fields")?;
        let fields = parse_fields(raw.get()).map_err(|m| {
            let (l, c) = at(raw);
            format!("{p}:{l}:{c}: fields: {m}")
        })?;
        let by_name: HashMap<Box<str>, usize> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name.clone(), i))
            .collect();
        let raw = get("rules")?;
        let rules: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|_| {
            let (l, c) = at(raw);
            format!("{p}:{l}:{c}: `rules` must be an array of objects")
        })?;
        if rules.len() > limits.max_rules {
            let (l, c) = at(raw);
            return Err(format!(
                "{p}:{l}:{c}: {} rules, more than the limit of {} (--rules-max-rules)",
                rules.len(),
                limits.max_rules
            ));
        }
        let mut values = Vec::with_capacity(rules.len() * fields.len());
        for (i, raw) in rules.iter().enumerate() {
            let located = |m: String| {
                let (l, c) = at(raw);
                format!("{p}:{l}:{c}: rules[{i}]{m}")
            };
            let obj: serde_json::Map<String, Json> =
                serde_json::from_str(raw.get()).map_err(|_| located(": not an object".into()))?;
            if let Some(k) = obj.keys().find(|k| !by_name.contains_key(k.as_str())) {
                return Err(located(format!(", field `{k}`: not a declared field")));
            }
            for f in &fields {
                let v = obj
                    .get(&*f.name)
                    .ok_or_else(|| located(format!(", field `{}`: missing", f.name)))?;
                let key = Key::of_json(f.ty, v).ok_or_else(|| {
                    located(format!(
                        ", field `{}`: expected {}, got {}",
                        f.name,
                        a(f.ty),
                        shown(v)
                    ))
                })?;
                values.push(key);
            }
        }
        Ok(RuleSet::build(revision.into(), fields, by_name, values))
    }

    fn build(
        revision: Box<str>,
        fields: Vec<Field>,
        by_name: HashMap<Box<str>, usize>,
        values: Vec<Key>,
    ) -> RuleSet {
        let width = fields.len().max(1);
        let count = if fields.is_empty() {
            0
        } else {
            values.len() / width
        };
        let mut lists: Vec<HashMap<Key, Vec<u32>>> = vec![HashMap::new(); fields.len()];
        let mut text = String::with_capacity(count * 32 * width);
        let mut spans = Vec::with_capacity(count);
        for (r, row) in values.chunks(width).enumerate().take(count) {
            let start = text.len();
            text.push('{');
            for (f, (field, key)) in fields.iter().zip(row).enumerate() {
                if f > 0 {
                    text.push(',');
                }
                let _ = write!(text, "{}:{}", Json::from(&*field.name), key.to_json());
                lists[f].entry(key.clone()).or_default().push(r as u32);
            }
            text.push('}');
            spans.push((start as u32, (text.len() - start) as u32));
        }
        let index = lists
            .into_iter()
            .map(|m| {
                m.into_iter()
                    .map(|(k, ids)| (k, Posting::new(ids, count)))
                    .collect()
            })
            .collect();
        RuleSet {
            revision_json: Bytes::from(Json::from(&*revision).to_string()),
            revision,
            fields,
            by_name,
            values,
            json: Bytes::from(text),
            spans,
            index,
        }
    }

    /// A copy sharing nothing with `self`: every string, every rule's JSON, every index list
    /// allocated anew. What an Elixir Agent's reader gets (`--rules-mode copy`, and each worker's
    /// copy in `--rules-mode pool`); `Bytes::clone` would only count a reference.
    pub(crate) fn deep_clone(&self) -> RuleSet {
        RuleSet {
            revision: self.revision.clone(),
            fields: self.fields.clone(),
            by_name: self.by_name.clone(),
            values: self.values.clone(),
            json: Bytes::copy_from_slice(&self.json),
            spans: self.spans.clone(),
            revision_json: Bytes::copy_from_slice(&self.revision_json),
            index: self.index.clone(),
        }
    }

    pub(crate) fn revision(&self) -> &str {
        &self.revision
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Rule `r`'s JSON text.
    pub(crate) fn rule_json(&self, r: usize) -> &[u8] {
        let (start, len) = self.spans[r];
        &self.json[start as usize..(start + len) as usize]
    }

    pub(crate) fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// Reads `(field, value)` pairs into a query (module docs: the coercion rules).
    pub(crate) fn query<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Query, MatchError> {
        let mut terms = Vec::new();
        for (name, value) in pairs {
            let f = *self
                .by_name
                .get(name)
                .ok_or_else(|| MatchError::UnknownField(name.to_owned()))?;
            let ty = self.fields[f].ty;
            let key = Key::read(ty, value).ok_or_else(|| MatchError::BadValue {
                field: name.to_owned(),
                ty,
                value: value.to_owned(),
            })?;
            terms.push((f, key));
        }
        Ok(Query { terms })
    }

    /// The rules (by number, ascending) matching `q`, by the indexes.
    pub(crate) fn matches(&self, q: &Query) -> Vec<u32> {
        if q.terms.is_empty() {
            return (0..self.len() as u32).collect();
        }
        let mut lists: Vec<&Posting> = Vec::with_capacity(q.terms.len());
        for (f, key) in &q.terms {
            match self.index[*f].get(key) {
                Some(p) => lists.push(p),
                None => return Vec::new(),
            }
        }
        lists.sort_unstable_by_key(|p| p.ids.len());
        let (first, rest) = (lists[0], &lists[1..]);
        if let Some(bits) = &first.bits {
            // The shortest list is dense, so all are: AND the bitsets, a word at a time.
            let mut acc = bits.to_vec();
            for p in rest {
                for (a, b) in acc.iter_mut().zip(p.bits.iter().flat_map(|b| b.iter())) {
                    *a &= b;
                }
            }
            return ids_of(&acc);
        }
        let mut out = first.ids.clone();
        for p in rest {
            match &p.bits {
                Some(bits) => out.retain(|&id| has(bits, id)),
                None => {
                    let mut rest: &[u32] = &p.ids;
                    out.retain(|id| {
                        // Both ascending: search only past the last hit.
                        let at = rest.partition_point(|x| x < id);
                        rest = &rest[at..];
                        rest.first() == Some(id)
                    });
                }
            }
            if out.is_empty() {
                break;
            }
        }
        out
    }

    /// The rules matching `q` by reading every rule: the baseline the indexes are measured
    /// against (`galleon rules-bench`), and the tests' oracle.
    pub(crate) fn matches_by_scan(&self, q: &Query) -> Vec<u32> {
        let width = self.fields.len().max(1);
        (0..self.len())
            .filter(|&r| {
                let row = &self.values[r * width..(r + 1) * width];
                q.terms.iter().all(|(f, k)| &row[*f] == k)
            })
            .map(|r| r as u32)
            .collect()
    }

    /// The response body for matches `ids`: `{"revision":..,"count":N,"rules":[..]}` listing the
    /// first `limit`. The rules are references to their JSON made at load (no copy per request).
    pub(crate) fn to_json(&self, ids: &[u32], limit: usize) -> IoList {
        let shown = &ids[..ids.len().min(limit)];
        let mut out = IoList::with_capacity(2 * shown.len() + 4, 64);
        out.pin(&self.json);
        out.push_static(b"{\"revision\":");
        out.push_shared(&self.revision_json);
        out.push_copy_with(|buf| {
            buf.push(b",\"count\":");
            buf.push(ids.len().to_string().as_bytes());
            buf.push(b",\"rules\":[");
        });
        for (i, &id) in shown.iter().enumerate() {
            if i > 0 {
                out.push_static(b",");
            }
            let (start, len) = self.spans[id as usize];
            out.push_shared_range(&self.json, start as usize..(start + len) as usize);
        }
        out.push_static(b"]}\n");
        out
    }
}

/// The rules having one value of one field: ascending rule numbers, and for a value common
/// enough (at least one rule in [`DENSE`]) also a bitset, so a rule is tested in one load and
/// two common values are intersected 64 rules per instruction. The bitset is never larger than
/// the list (one bit per rule of the set against 32 per listed rule).
#[derive(Debug, Clone)]
struct Posting {
    ids: Vec<u32>,
    bits: Option<Box<[u64]>>,
}

/// A value held by at least one rule in this many gets a bitset.
const DENSE: usize = 32;

impl Posting {
    fn new(ids: Vec<u32>, rules: usize) -> Posting {
        let bits = (ids.len() * DENSE >= rules).then(|| {
            let mut b = vec![0u64; rules.div_ceil(64)].into_boxed_slice();
            for &id in &ids {
                b[id as usize / 64] |= 1 << (id % 64);
            }
            b
        });
        Posting { ids, bits }
    }
}

fn has(bits: &[u64], id: u32) -> bool {
    bits[id as usize / 64] & (1 << (id % 64)) != 0
}

/// The numbers of the set bits, ascending.
fn ids_of(bits: &[u64]) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, &word) in bits.iter().enumerate() {
        let mut word = word;
        while word != 0 {
            out.push((w * 64) as u32 + word.trailing_zeros());
            word &= word - 1;
        }
    }
    out
}

fn parse_fields(text: &str) -> Result<Vec<Field>, String> {
    let decls: Vec<HashMap<String, String>> = serde_json::from_str(text)
        .map_err(|_| "expected an array of {\"name\": ..., \"type\": ...}".to_owned())?;
    if decls.is_empty() || decls.len() > MAX_FIELDS {
        return Err(format!(
            "{} fields declared; expected 1 to {MAX_FIELDS}",
            decls.len()
        ));
    }
    let mut fields: Vec<Field> = Vec::with_capacity(decls.len());
    for (i, d) in decls.iter().enumerate() {
        let (Some(name), Some(ty), 2) = (d.get("name"), d.get("type"), d.len()) else {
            return Err(format!("[{i}]: expected exactly `name` and `type`"));
        };
        let ok = !name.is_empty()
            && name.len() <= MAX_FIELD_NAME
            && !name.starts_with('_')
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            return Err(format!(
                "[{i}]: name `{name}`: expected 1 to {MAX_FIELD_NAME} of a-z 0-9 _, not starting with _"
            ));
        }
        if fields.iter().any(|f| &*f.name == name) {
            return Err(format!("[{i}]: `{name}` declared twice"));
        }
        let ty = FieldType::parse(ty).ok_or_else(|| {
            format!("[{i}]: type `{ty}`: expected string, integer, number or boolean")
        })?;
        fields.push(Field {
            name: name.as_str().into(),
            ty,
        });
    }
    Ok(fields)
}

/// A JSON value for an error message: its kind and, when short, itself.
fn shown(v: &Json) -> String {
    let kind = match v {
        Json::Null => return "null".into(),
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => return "an array".into(),
        Json::Object(_) => return "an object".into(),
    };
    let text = v.to_string();
    if text.len() <= 40 {
        format!("{kind} ({text})")
    } else {
        kind.into()
    }
}

/// 1-based line and column (in bytes) of `offset`.
fn line_col(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = offset
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1)
        + 1;
    (line, col)
}

/// `path:line:col: message` for a JSON syntax error (serde's own " at line L column C" dropped).
fn json_error(path: &std::path::Display<'_>, e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let msg = msg.split(" at line ").next().unwrap_or(&msg);
    format!("{path}:{}:{}: {msg}", e.line(), e.column())
}

#[cfg(test)]
#[path = "set_tests.rs"]
mod tests;
