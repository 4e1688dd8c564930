//! A bounded fuzz pass: arbitrary strings, and strings stitched from template fragments, are
//! compiled and rendered (whole and streamed) under small limits. Whatever the input, the result
//! is output or an error: never a panic, never a hang.

use galleon_template::{Assigns, Engine, Limits, Value};
use proptest::prelude::*;

/// Pieces that make parsers and renderers work: tags, keywords, operators, literals, unicode.
const FRAGMENTS: &[&str] = &[
    "<%=",
    "<%",
    "%>",
    "<%#",
    "<%%",
    " do ",
    " end ",
    "<% end %>",
    "<% else %>",
    "for ",
    "x",
    "i",
    " <- ",
    "1..",
    "@n",
    "@xs",
    "@m",
    "@s",
    "if ",
    "unless ",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ".",
    "..",
    "\"",
    "\"str\"",
    "\\",
    "#{",
    "'",
    "0",
    "9_223_372_036_854_775_807",
    "-",
    "+",
    "*",
    "/",
    "<>",
    "==",
    "<",
    ">=",
    "and",
    "or",
    "not ",
    "!",
    "&&",
    "||",
    "nil",
    "true",
    "length(",
    "upcase(",
    "raw(",
    "render(\"p.eex\", a: ",
    "render(\"self.eex\")",
    "Enum.with_index(",
    "String.",
    "key: ",
    "x.y",
    "[0]",
    "é",
    "\n",
    " ",
    "<td>",
    "text",
    "1.5e3",
    "_",
    "fn ",
    " -> ",
    "&(",
    "&1",
    "&2",
    "& ",
    "&String.upcase/1",
    "Enum.map(",
    "Enum.sort(",
    "Enum.reduce(",
    "Enum.group_by(",
    "assigns[:",
    "assigns",
    "%{",
    "=>",
    ":erlang.float_to_binary(",
    "decimals: ",
    "for(",
    ", do: ",
    "trim: ",
    " when ",
    ":desc",
    "1..-1",
];

fn fragments() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..24).prop_map(|v| v.concat())
}

fn assigns() -> Assigns {
    let mut a = Assigns::new();
    a.insert("n", 3i64);
    a.insert("xs", vec![Value::Int(1), Value::str("<b>"), Value::Nil]);
    a.insert("m", Value::map([("y", Value::Int(2))]));
    a.insert("s", "Tom & Jerry");
    a
}

/// Small enough that a pathological input fails fast, large enough for real work.
const FUZZ_LIMITS: Limits = Limits {
    max_steps: 20_000,
    max_output: 1 << 16,
    max_depth: 8,
    max_memory: 1 << 20,
};

fn check(source: &str) {
    let engine = Engine::from_sources([("self.eex", source), ("p.eex", "[<%= @a %>]")]);
    let Ok(engine) = engine else { return };
    let engine = engine.with_limits(FUZZ_LIMITS);
    let whole = engine.render("self.eex", &assigns());
    let mut streamed = Vec::new();
    let mut stream_err = None;
    for chunk in engine.stream("self.eex", assigns(), 7).unwrap() {
        match chunk {
            Ok(c) => streamed.extend(c.to_vec()),
            Err(e) => stream_err = Some(e),
        }
    }
    if let Ok(whole) = whole {
        // Streaming renders the same bytes (its step budget is per chunk, so it may go further
        // than `render`, never less far).
        assert!(stream_err.is_none(), "{source:?}: {stream_err:?}");
        assert_eq!(whole.to_vec(), streamed, "{source:?}");
    }
    if let Some(e) = stream_err {
        // Errors format without panicking, with a location when they have one.
        let text = e.to_string();
        if let Some(loc) = e.location() {
            assert!(text.starts_with(&format!("{}:{}:{}: ", loc.name(), loc.line(), loc.column())));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC{0,64}") {
        check(&s);
        check(&format!("<%= {s} %>"));
    }

    #[test]
    fn fragment_soup_never_panics(s in fragments()) {
        check(&s);
    }
}
