//! Built-in functions: the parts of `Kernel`, `Enum`, `String`, `Integer`, `Float`, `Map` and
//! `List` that templates use, with Elixir's semantics, resolved by name and arity at compile
//! time ([`lookup`]) and run on evaluated arguments ([`call`]). Pure functions of values: they
//! know nothing of frames or output.

pub(crate) use re::scanned;

pub(crate) mod collections;
mod floats;
mod inspect;
mod integer;
pub(crate) mod maps;
mod re;
mod table;
mod text;
mod titlecase;

use crate::float::{MAX_DECIMALS, float_string, float_to_decimals};
use crate::ops::{describe, to_string};
use crate::value::Value;
use floats::{Rounding, compacted, float_options, round_half_up, round_toward};
use table::TABLE;

/// A built-in function. `name/arity` in Elixir's spelling is [`Builtin::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub(crate) enum Builtin {
    ToString,
    Length,
    Div,
    Rem,
    Abs,
    Round,
    Trunc,
    Max,
    Min,
    Hd,
    Tl,
    Elem,
    IsNil,
    IsBinary,
    IsInteger,
    IsFloat,
    IsNumber,
    IsList,
    IsMap,
    IsAtom,
    IsBoolean,
    IsTuple,
    MapSize,
    TupleSize,
    ByteSize,
    Upcase,
    Downcase,
    EnumCount,
    EnumJoin,
    EnumAt,
    EnumReverse,
    EnumSum,
    EnumMin,
    EnumMax,
    EnumSort,
    EnumUniq,
    EnumTake,
    EnumDrop,
    EnumEmpty,
    EnumMember,
    EnumWithIndex,
    EnumToList,
    EnumConcat,
    EnumZip,
    EnumChunkEvery,
    EnumSlice,
    /// `:erlang.float_to_binary(x, decimals: n)`.
    FloatToBinary,
    /// `Enum.slice(xs, first..last)`, compiled to three arguments.
    EnumSliceRange,
    StringLength,
    StringCapitalize,
    StringTrim,
    StringTrimLeading,
    StringTrimTrailing,
    StringSplit,
    StringReplace,
    StringContains,
    StringStartsWith,
    StringEndsWith,
    StringDuplicate,
    StringPadLeading,
    StringPadTrailing,
    StringReverse,
    StringSlice,
    /// `String.slice(s, first..last)`, compiled to three arguments.
    StringSliceRange,
    StringFirst,
    StringLast,
    StringAt,
    StringToInteger,
    IntegerParse,
    FloatRound,
    FloatFloor,
    FloatCeil,
    MapGet,
    /// `Keyword.get(opts, :key)` and `Keyword.get(opts, :key, default)`.
    KeywordGet,
    /// `first..last//step`, listed (the parser's name for it is `..//`).
    RangeStep,
    MapHasKey,
    MapKeys,
    MapValues,
    ListFirst,
    ListLast,
    ListFlatten,
    /// `String.graphemes/1` (code points: see the crate docs).
    StringGraphemes,
    StringCodepoints,
    ListDuplicate,
    EnumSplitWith,
    FloatParse,
    GetIn,
    /// `inspect/1`, as Elixir prints values.
    Inspect,
    /// `Integer.to_string(n, base)`.
    IntegerToStringBase,
    /// `Integer.digits(n)` and `Integer.digits(n, base)`.
    IntegerDigits,
    EnumIntersperse,
    EnumSplit,
    EnumInto,
    /// `Map.new(enumerable)` of `{key, value}` pairs.
    MapNew,
    // Taking a function (run by the VM, which calls it: [`Builtin::function_arg`]).
    EnumMap,
    EnumFilter,
    EnumReject,
    EnumFind,
    EnumFindIndex,
    EnumAnyBy,
    EnumAllBy,
    EnumCountBy,
    EnumFlatMap,
    EnumSortBy,
    EnumSortWith,
    EnumReduce,
    EnumMapJoin,
    EnumMinBy,
    EnumMaxBy,
    EnumUniqBy,
    EnumTakeWhile,
    EnumDropWhile,
    EnumGroupBy,
    EnumFrequencies,
    EnumMapIntersperse,
    EnumEach,
    /// `Map.new(enumerable, fn x -> {key, value} end)`.
    MapNewBy,
    /// `Map.update(map, key, default, fn v -> ... end)` (run by the VM: it calls the function).
    MapUpdate,
    // `Map` and `Keyword` functions that build (`maps.rs`).
    MapPut,
    MapPutNew,
    MapMerge,
    MapDelete,
    MapDrop,
    MapTake,
    MapFetch,
    MapToList,
    KeywordPut,
    KeywordMerge,
    KeywordDelete,
    KeywordHasKey,
    KeywordFetch,
    KeywordKeys,
    /// `Regex.compile!/1,2`, what `~r/.../` compiles to (run at compile time when literal).
    RegexCompile,
    RegexMatch,
    RegexRun,
    RegexScan,
    RegexReplace,
    RegexSplit,
    RegexNamedCaptures,
    RegexSource,
    StringMatch,
    /// `string =~ regex` and `string =~ string`.
    MatchOp,
}

/// The arity of a function argument that may take any number of parameters: `Regex.replace`
/// passes the whole match and as many groups as the function takes, as Elixir does.
pub(crate) const ANY_ARITY: usize = usize::MAX;

/// Where a built-in takes a function, and of how many arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FunctionArg {
    /// The argument's position.
    pub(crate) position: usize,
    /// The function's arity ([`ANY_ARITY`]: whatever the function takes).
    pub(crate) arity: usize,
    /// Whether a value may stand there instead: `:asc` or `:desc` (`Enum.sort/2`), a
    /// replacement string (`Regex.replace`).
    pub(crate) or_order: bool,
}

/// The built-in called `name` with `arity` arguments.
pub(crate) fn lookup(name: &str, arity: usize) -> Option<Builtin> {
    TABLE
        .iter()
        .find(|(n, arities, _)| *n == name && arities.contains(&arity))
        .map(|(_, _, b)| *b)
}

/// Every built-in's name with the arities it takes (a name may appear more than once).
pub(crate) fn names() -> impl Iterator<Item = (&'static str, &'static [usize])> {
    TABLE.iter().map(|(n, arities, _)| (*n, *arities))
}

/// True when some built-in is called `name` (with another arity).
pub(crate) fn exists(name: &str) -> bool {
    TABLE.iter().any(|(n, _, _)| *n == name)
}

impl Builtin {
    /// The name it is called by (the first, when several spell it).
    pub(crate) fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|(_, _, b)| *b == self)
            .map_or("?", |(n, _, _)| n)
    }

    /// Whether the result is a part of the arguments (an element, a map's value, the
    /// accumulator), never a value built: not charged to the memory budget again.
    pub(crate) fn selects(self) -> bool {
        use Builtin as B;
        matches!(
            self,
            B::Hd
                | B::Elem
                | B::Max
                | B::Min
                | B::EnumAt
                | B::EnumMin
                | B::EnumMax
                | B::MapGet
                | B::KeywordGet
                | B::ListFirst
                | B::ListLast
                | B::EnumFind
                | B::EnumMinBy
                | B::EnumMaxBy
                | B::EnumReduce
        )
    }

    /// Whether the built-in charges its whole result to the memory budget before building it.
    pub(crate) fn charges_itself(self) -> bool {
        use Builtin as B;
        matches!(
            self,
            B::StringDuplicate
                | B::StringPadLeading
                | B::StringPadTrailing
                | B::StringReplace
                | B::RegexReplace
                | B::Inspect
                | B::RangeStep
                | B::EnumChunkEvery
                | B::ListDuplicate
        ) || maps::handles(self)
    }

    /// Where this built-in, called with `arity` arguments, takes a function; `None` for the
    /// built-ins that take values only.
    pub(crate) fn function_arg(self, arity: usize) -> Option<FunctionArg> {
        use Builtin as B;
        let (position, fn_arity) = match self {
            B::EnumMap
            | B::EnumFilter
            | B::EnumReject
            | B::EnumFindIndex
            | B::EnumAnyBy
            | B::EnumAllBy
            | B::EnumCountBy
            | B::EnumFlatMap
            | B::EnumSortBy
            | B::EnumMinBy
            | B::EnumMaxBy
            | B::EnumUniqBy
            | B::EnumTakeWhile
            | B::EnumDropWhile
            | B::EnumGroupBy
            | B::EnumEach
            | B::EnumSplitWith
            | B::MapNewBy => (1, 1),
            B::MapUpdate => (3, 1),
            B::EnumMapIntersperse => (2, 1),
            // `Enum.find(xs, default, fn)`: the function comes last.
            B::EnumMapJoin | B::EnumFind => (arity - 1, 1),
            B::EnumSortWith => (1, 2),
            B::EnumReduce => (2, 2),
            B::RegexReplace => (2, ANY_ARITY),
            _ => return None,
        };
        Some(FunctionArg {
            position,
            arity: fn_arity,
            or_order: matches!(self, B::EnumSortWith | B::RegexReplace),
        })
    }

    /// Whether the last argument may be written as keyword options (`String.split(s, ",",
    /// trim: true)`): the compiler passes them as a keyword list, as Elixir does.
    pub(crate) fn takes_options(self) -> bool {
        matches!(
            self,
            Builtin::StringSplit
                | Builtin::FloatToBinary
                | Builtin::StringReplace
                | Builtin::RegexRun
                | Builtin::RegexReplace
                | Builtin::RegexSplit
        )
    }

    /// Whether the second argument is a range the compiler passes as its two bounds
    /// (`Enum.slice(xs, 1..-1)`).
    pub(crate) fn takes_range_bounds(self) -> bool {
        matches!(self, Builtin::EnumSliceRange | Builtin::StringSliceRange)
    }

    /// Whether the first argument may be a range (`Enum.sum(1..10)`, `Map.new(1..3, ...)`): the
    /// compiler builds it.
    pub(crate) fn takes_enumerable(self) -> bool {
        TABLE
            .iter()
            .any(|(n, _, b)| *b == self && (n.starts_with("Enum.") || *n == "Map.new"))
    }
}

/// What a built-in failed with: a message, blamed on the call.
pub(crate) type Failure = String;

/// Runs `b` on `args` (as many as [`lookup`] allowed).
pub(crate) fn call(b: Builtin, args: Vec<Value>) -> Result<Value, Failure> {
    use Builtin as B;
    if re::handles(b, &args) {
        return re::call(b, args);
    }
    let mut args = args.into_iter();
    let mut arg = || args.next().unwrap_or_default();
    let a = arg();
    Ok(match b {
        B::EnumSliceRange | B::StringSliceRange => {
            // Elixir's rule: negative bounds count from the end (the first at least 0), and
            // the slice is empty when the first is past the last or past the end.
            let (first, last) = (arg(), arg());
            let (Value::Int(first), Value::Int(last)) = (&first, &last) else {
                return Err(expected("integer range bounds", &first));
            };
            let len = if b == B::EnumSliceRange {
                collections::elements(&a)?.len()
            } else {
                match &a {
                    Value::Str(s) => s.as_str().chars().count(),
                    other => return Err(expected("a string", other)),
                }
            } as i64;
            let start = if *first < 0 {
                (first + len).max(0)
            } else {
                *first
            };
            let end = if *last < 0 {
                last + len
            } else {
                (*last).min(len - 1)
            };
            let count = end.saturating_sub(start).saturating_add(1).max(0);
            let base = if b == B::EnumSliceRange {
                B::EnumSlice
            } else {
                B::StringSlice
            };
            return call(base, vec![a, Value::Int(start), Value::Int(count)]);
        }
        B::ToString => Value::from(to_string(&a)?),
        B::Length => match &a {
            Value::List(l) => Value::Int(l.len() as i64),
            Value::Map(m) => Value::Int(m.len() as i64),
            Value::Str(s) => Value::Int(s.as_str().chars().count() as i64),
            other => return Err(expected("a list", other)),
        },
        B::Div | B::Rem => {
            let d = arg();
            match (&a, &d) {
                (Value::Int(_), Value::Int(0)) => {
                    return Err(
                        "bad argument in arithmetic expression: division by zero".to_owned()
                    );
                }
                (Value::Int(x), Value::Int(y)) => Value::Int(if b == B::Div {
                    x.checked_div(*y).ok_or("integer overflow")?
                } else {
                    x.checked_rem(*y).unwrap_or(0)
                }),
                _ => {
                    return Err(format!(
                        "expects two integers, not {} and {}",
                        describe(&a),
                        describe(&d)
                    ));
                }
            }
        }
        B::Abs => match a {
            Value::Int(i) => Value::Int(i.checked_abs().ok_or("integer overflow")?),
            Value::Float(x) => Value::Float(x.abs()),
            other => return Err(expected("a number", &other)),
        },
        B::Round | B::Trunc => match a {
            Value::Int(i) => Value::Int(i),
            Value::Float(x) => {
                let r = if b == B::Round { x.round() } else { x.trunc() };
                float_to_int(r)?
            }
            other => return Err(expected("a number", &other)),
        },
        B::Max | B::Min => {
            let c = arg();
            let ord = collections::compare(&a, &c)?;
            let first = if b == B::Max {
                ord.is_ge()
            } else {
                ord.is_le()
            };
            if first { a } else { c }
        }
        B::Hd | B::Tl => match &a {
            Value::List(l) if !l.is_empty() => {
                if b == B::Hd {
                    l[0].clone()
                } else {
                    Value::list(l[1..].iter().cloned())
                }
            }
            other => return Err(expected("a non-empty list", other)),
        },
        B::Elem => match (&a, arg()) {
            (Value::Tuple(t), Value::Int(i)) => usize::try_from(i)
                .ok()
                .and_then(|i| t.get(i).cloned())
                .ok_or_else(|| format!("index {i} out of range"))?,
            (other, _) => return Err(expected("a tuple and an integer index", other)),
        },
        B::IsNil => Value::Bool(matches!(a, Value::Nil)),
        B::IsBinary => Value::Bool(matches!(a, Value::Str(_))),
        B::IsInteger => Value::Bool(matches!(a, Value::Int(_))),
        B::IsFloat => Value::Bool(matches!(a, Value::Float(_))),
        B::IsNumber => Value::Bool(matches!(a, Value::Int(_) | Value::Float(_))),
        B::IsList => Value::Bool(matches!(a, Value::List(_))),
        B::IsMap => Value::Bool(matches!(a, Value::Map(_))),
        B::IsAtom => Value::Bool(matches!(a, Value::Atom(_) | Value::Bool(_) | Value::Nil)),
        B::IsBoolean => Value::Bool(matches!(a, Value::Bool(_))),
        B::IsTuple => Value::Bool(matches!(a, Value::Tuple(_))),
        B::MapSize => match &a {
            Value::Map(m) => Value::Int(m.len() as i64),
            other => return Err(expected("a map", other)),
        },
        B::TupleSize => match &a {
            Value::Tuple(t) => Value::Int(t.len() as i64),
            other => return Err(expected("a tuple", other)),
        },
        B::ByteSize => match &a {
            Value::Str(s) => Value::Int(s.len() as i64),
            other => return Err(expected("a string", other)),
        },
        B::FloatToBinary => {
            let Value::Float(x) = a else {
                return Err(expected("a float", &a));
            };
            let opts = arg();
            let (decimals, compact) = float_options(&opts)?;
            match decimals {
                Some(Value::Int(d)) if (0..=MAX_DECIMALS as i64).contains(d) => {
                    match float_to_decimals(x, *d as usize) {
                        Some(text) if compact => Value::from(compacted(text)),
                        Some(text) => Value::from(text),
                        None => {
                            return Err(format!(
                                "{} with {d} decimals is longer than 255 bytes, which \
                                 Erlang's float_to_binary refuses (badarg)",
                                float_string(x)
                            ));
                        }
                    }
                }
                Some(other) => return Err(expected("decimals: 0 to 253", other)),
                None => return Err("expects the option decimals: N".to_owned()),
            }
        }
        B::FloatRound | B::FloatFloor | B::FloatCeil => {
            let Value::Float(x) = a else {
                return Err(expected("a float", &a));
            };
            let digits = match arg() {
                Value::Nil => 0,
                Value::Int(d) if (0..=15).contains(&d) => d as i32,
                other => return Err(expected("a precision from 0 to 15", &other)),
            };
            let r = match b {
                B::FloatRound => round_half_up(x, digits),
                B::FloatFloor if digits > 0 => round_toward(x, digits, Rounding::Floor),
                B::FloatCeil if digits > 0 => round_toward(x, digits, Rounding::Ceil),
                B::FloatFloor => x.floor(),
                _ => x.ceil(),
            };
            // Elixir 1.14: a zero result is 0.0, whatever the sign, except that a zero given
            // with a precision comes back as is (`Float.round(-0.4)` is 0.0, `Float.round(-0.0,
            // 2)` is -0.0); `floor`/`ceil` without a precision keep `:math`'s sign.
            let zero_is_positive = b == B::FloatRound || digits > 0;
            Value::Float(
                if r == 0.0 && zero_is_positive && !(digits > 0 && x == 0.0) {
                    0.0
                } else {
                    r
                },
            )
        }
        B::ListDuplicate => {
            let Value::Int(n) = arg() else {
                return Err("List.duplicate takes a count: a non-negative integer".to_owned());
            };
            let n = usize::try_from(n)
                .map_err(|_| "List.duplicate takes a count: a non-negative integer".to_owned())?;
            crate::budget::charge_str(n.saturating_mul(crate::budget::ELEMENT_BYTES))?;
            Value::list(std::iter::repeat_n(a, n))
        }
        B::FloatParse => {
            let Value::Str(s) = &a else {
                return Err(expected("a string", &a));
            };
            float_parse(s.as_str())
        }
        B::GetIn => get_in(a, &arg())?,
        B::IntegerParse => {
            let Value::Str(s) = &a else {
                return Err(expected("a string", &a));
            };
            let t = s.as_str();
            let sign = usize::from(t.starts_with(['-', '+']));
            let digits = t[sign..].bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                Value::atom("error")
            } else {
                let n: i64 = t[..sign + digits]
                    .parse()
                    .map_err(|_| "integer does not fit in 64 bits".to_owned())?;
                Value::Tuple(vec![Value::Int(n), Value::from(&t[sign + digits..])].into())
            }
        }
        B::EnumChunkEvery => {
            let (count, step, leftover) = (arg(), arg(), arg());
            collections::chunk_every(&a, &count, &step, &leftover)?
        }
        B::Inspect => Value::from(inspect::inspect(&a)?),
        B::IntegerToStringBase | B::IntegerDigits => integer::call(b, a, arg())?,
        _ if text::handles(b) => text::call(b, a, arg(), arg())?,
        _ if maps::handles(b) => maps::call(b, a, arg(), arg())?,
        _ => collections::call(b, a, arg(), arg())?,
    })
}

/// Option `key` of a keyword list (`[trim: true]`, as the compiler passes `trim: true`); nil
/// gives none.
pub(crate) fn option<'v>(opts: &'v Value, key: &str) -> Result<Option<&'v Value>, Failure> {
    let Value::List(items) = opts else {
        return match opts {
            Value::Nil => Ok(None),
            other => Err(expected("keyword options", other)),
        };
    };
    for item in items.iter() {
        match item {
            Value::Tuple(t)
                if t.len() == 2 && matches!(&t[0], Value::Atom(k) if k.as_str() == key) =>
            {
                return Ok(Some(&t[1]));
            }
            Value::Tuple(t) if t.len() == 2 && matches!(&t[0], Value::Atom(_)) => {}
            other => return Err(expected("keyword options", other)),
        }
    }
    Ok(None)
}

/// `Float.parse`: the longest prefix that reads as a float (`"3.5kg"` is `{3.5, "kg"}`, `"7"`
/// is `{7.0, ""}`, with an exponent `1.5e3`), else `:error`, as Elixir reads it.
fn float_parse(t: &str) -> Value {
    let b = t.as_bytes();
    let digits = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let sign = usize::from(t.starts_with(['-', '+']));
    let int = digits(sign);
    if int == 0 {
        return Value::atom("error");
    }
    let mut end = sign + int;
    if b.get(end) == Some(&b'.') && digits(end + 1) > 0 {
        end += 1 + digits(end + 1);
    }
    if matches!(b.get(end), Some(b'e' | b'E')) {
        let s = usize::from(matches!(b.get(end + 1), Some(b'-' | b'+')));
        let e = digits(end + 1 + s);
        if e > 0 {
            end += 1 + s + e;
        }
    }
    match t[..end].parse::<f64>() {
        Ok(x) if x.is_finite() => {
            Value::Tuple(vec![Value::Float(x), Value::from(&t[end..])].into())
        }
        _ => Value::atom("error"),
    }
}

/// `get_in(data, [k1, k2])`: each key read as `data[k]` reads it (a map's string or atom key,
/// a keyword list's atom key), `nil` once a key is missing or the data is `nil`.
fn get_in(data: Value, keys: &Value) -> Result<Value, Failure> {
    let Value::List(keys) = keys else {
        return Err(expected("a list of keys", keys));
    };
    let mut v = data;
    for k in keys.iter() {
        v = match (&v, k) {
            (Value::Nil, _) => return Ok(Value::Nil),
            (Value::Map(m), Value::Str(s) | Value::Atom(s)) => {
                m.get(&s.bytes()[..]).cloned().unwrap_or_default()
            }
            (Value::Map(_), _) => Value::Nil,
            (Value::List(items), Value::Atom(_)) => collections::keyword_find(items, k)
                .cloned()
                .unwrap_or_default(),
            (other, _) => {
                return Err(format!(
                    "get_in cannot read the key {} of {}",
                    describe(k),
                    describe(other)
                ));
            }
        };
    }
    Ok(v)
}

fn float_to_int(x: f64) -> Result<Value, Failure> {
    if x.is_finite() && x.abs() < 9.2e18 {
        Ok(Value::Int(x as i64))
    } else {
        Err(format!(
            "{} does not fit in a 64-bit integer",
            float_string(x)
        ))
    }
}

/// "expected a list, not the integer 1".
pub(crate) fn expected(what: &str, got: &Value) -> Failure {
    format!("expected {what}, not {}", describe(got))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_round_rounds_the_exact_value_half_up() {
        assert_eq!(round_half_up(2.675, 2), 2.67);
        assert_eq!(round_half_up(0.125, 2), 0.13);
        assert_eq!(round_half_up(-1.5, 0), -2.0);
        assert_eq!(round_half_up(9.999, 2), 10.0);
        assert_eq!(round_half_up(1.23456, 3), 1.235);
    }

    /// Regression: extreme range bounds overflowed the count arithmetic (a panic in debug).
    #[test]
    fn slices_by_range_take_any_bounds() {
        let xs = Value::list([1, 2, 3].map(Value::Int));
        for (first, last, want) in [
            (i64::MAX, i64::MIN, 0),
            (i64::MIN, i64::MAX, 3),
            (i64::MIN, i64::MIN, 0),
            (1, -1, 2),
        ] {
            let got = call(
                Builtin::EnumSliceRange,
                vec![xs.clone(), Value::Int(first), Value::Int(last)],
            )
            .unwrap();
            assert!(
                matches!(&got, Value::List(l) if l.len() == want),
                "{first}..{last}: {got:?}"
            );
            let got = call(
                Builtin::StringSliceRange,
                vec![Value::str("abc"), Value::Int(first), Value::Int(last)],
            )
            .unwrap();
            assert!(
                matches!(&got, Value::Str(s) if s.len() == want),
                "{first}..{last}: {got:?}"
            );
        }
    }

    #[test]
    fn every_name_resolves() {
        for (name, arities, b) in TABLE {
            for &n in *arities {
                assert_eq!(lookup(name, n), Some(*b));
            }
        }
        assert_eq!(lookup("Enum.join", 3), None);
    }
}
