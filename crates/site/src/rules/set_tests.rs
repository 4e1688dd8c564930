//! Tests of `set.rs`: parsing and its located errors, coercion, index vs scan.

use super::*;

const LIMITS: SetLimits = SetLimits { max_rules: 100_000 };

fn parse(text: &str) -> Result<RuleSet, String> {
    RuleSet::parse(Path::new("r.json"), text.as_bytes(), LIMITS)
}

const SMALL: &str = r#"{"revision": "t1",
 "fields": [{"name": "id", "type": "integer"}, {"name": "cc", "type": "string"},
            {"name": "w", "type": "number"}, {"name": "on", "type": "boolean"}],
 "rules": [
  {"id": 1, "cc": "NL", "w": 0.5, "on": true},
  {"id": 2, "cc": "BE", "w": 1, "on": false},
  {"id": 3, "cc": "NL", "w": 1.0, "on": false}
 ]}"#;

fn ids(set: &RuleSet, pairs: &[(&str, &str)]) -> Vec<u32> {
    let q = set.query(pairs.iter().copied()).unwrap();
    let by_index = set.matches(&q);
    assert_eq!(by_index, set.matches_by_scan(&q), "index and scan disagree");
    by_index
}

#[test]
fn equality_on_every_pair_with_coercion_to_the_fields_type() {
    let set = parse(SMALL).unwrap();
    assert_eq!(set.len(), 3);
    assert_eq!(ids(&set, &[]), [0, 1, 2]);
    assert_eq!(ids(&set, &[("cc", "NL")]), [0, 2]);
    assert_eq!(ids(&set, &[("cc", "NL"), ("on", "false")]), [2]);
    assert_eq!(ids(&set, &[("w", "1")]), [1, 2]);
    assert_eq!(ids(&set, &[("w", "1e0"), ("id", "+2")]), [1]);
    assert_eq!(ids(&set, &[("cc", "NL"), ("cc", "BE")]), Vec::<u32>::new());
    assert_eq!(ids(&set, &[("cc", "nl")]), Vec::<u32>::new());
    assert_eq!(ids(&set, &[("id", "99")]), Vec::<u32>::new());
}

#[test]
fn unknown_fields_and_values_of_the_wrong_type_are_errors() {
    let set = parse(SMALL).unwrap();
    let err = |pairs: &[(&str, &str)]| set.query(pairs.iter().copied()).unwrap_err().to_string();
    assert_eq!(err(&[("nope", "1")]), "unknown field `nope`");
    assert_eq!(
        err(&[("id", "1.5")]),
        "field `id` is an integer and `1.5` is not one"
    );
    assert!(err(&[("on", "1")]).contains("boolean"));
    assert!(err(&[("w", "inf")]).contains("number"));
    assert!(err(&[("w", "")]).contains("number"));
}

#[test]
fn responses_list_the_rules_json_made_at_load() {
    let set = parse(SMALL).unwrap();
    let q = set.query([("cc", "NL")]).unwrap();
    let body = set.to_json(&set.matches(&q), 1).to_vec();
    assert_eq!(
        String::from_utf8(body).unwrap(),
        "{\"revision\":\"t1\",\"count\":2,\"rules\":[{\"id\":1,\"cc\":\"NL\",\"w\":0.5,\"on\":true}]}\n"
    );
    let copy = set.deep_clone();
    assert_eq!(
        copy.to_json(&copy.matches(&q), 10).to_vec(),
        set.to_json(&set.matches(&q), 10).to_vec()
    );
    let v: Json = serde_json::from_slice(&set.to_json(&[0, 1, 2], 10).to_vec()).unwrap();
    assert_eq!(v["rules"][1]["w"], 1.0);
}

#[test]
fn syntax_errors_are_located_by_line_and_column() {
    let bad = SMALL.replace("\"w\": 0.5,", "\"w\": 0.5");
    let e = parse(&bad).err().unwrap();
    assert!(e.starts_with("r.json:5:"), "{e}");
    let e = parse("{\"revision\": \"x\",\n \"fields\": [}")
        .err()
        .unwrap();
    assert!(e.starts_with("r.json:2:"), "{e}");
    let e = RuleSet::parse(Path::new("r.json"), b"{\"a\n\xff\"}", LIMITS)
        .err()
        .unwrap();
    assert_eq!(e, "r.json:2:1: not UTF-8");
}

#[test]
fn schema_errors_name_the_rule_and_the_field() {
    let cases = [
        (
            SMALL.replace("\"id\": 2,", "\"id\": \"2\","),
            "r.json:6:3: rules[1], field `id`: expected an integer, got a string (\"2\")",
        ),
        (
            SMALL.replace("\"on\": false}\n ]", "\"on\": false, \"x\": 1}\n ]"),
            "r.json:7:3: rules[2], field `x`: not a declared field",
        ),
        (
            SMALL.replace("\"cc\": \"BE\", ", ""),
            "r.json:6:3: rules[1], field `cc`: missing",
        ),
        (
            SMALL.replace(
                "{\"id\": 3, \"cc\": \"NL\", \"w\": 1.0, \"on\": false}",
                "[]",
            ),
            "r.json:7:3: rules[2]: not an object",
        ),
        (
            SMALL.replace("\"type\": \"boolean\"", "\"type\": \"bool\""),
            "r.json:2:12: fields: [3]: type `bool`: expected string, integer, number or boolean",
        ),
        (
            SMALL.replace("\"name\": \"w\"", "\"name\": \"cc\""),
            "r.json:2:12: fields: [2]: `cc` declared twice",
        ),
        (
            SMALL.replace("\"name\": \"w\"", "\"name\": \"_w\""),
            "r.json:2:12: fields: [2]: name `_w`: expected 1 to 64 of a-z 0-9 _, not starting with _",
        ),
        (
            SMALL.replace("\"revision\": \"t1\"", "\"revision\": 7"),
            "r.json:1:14: `revision` must be a string of 1 to 256 bytes",
        ),
        (
            SMALL.replace(
                "\"revision\": \"t1\",",
                "\"revision\": \"t1\", \"extra\": 1,",
            ),
            "r.json:1:29: unknown top-level key `extra`",
        ),
        (
            SMALL.replace("\"revision\": \"t1\",", ""),
            "r.json:1:1: the top-level object has no `revision`",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse(&text).err().as_deref(), Some(want));
    }
    let e = RuleSet::parse(
        Path::new("r.json"),
        SMALL.as_bytes(),
        SetLimits { max_rules: 2 },
    )
    .err()
    .unwrap();
    assert!(e.contains("3 rules, more than the limit of 2"), "{e}");
}

#[test]
fn the_generated_set_loads_and_its_index_agrees_with_a_scan() {
    let text = crate::rules::generate::generate(7, 400, "g7");
    let set = parse(&text).unwrap();
    assert_eq!(
        (set.len(), set.fields().len(), set.revision()),
        (400, 27, "g7")
    );
    let fields = [
        "country",
        "channel",
        "tier",
        "active",
        "price_cap",
        "weight",
        "promo_code",
        "note",
    ];
    for r in (0..400).step_by(37) {
        let row: serde_json::Map<String, Json> = serde_json::from_slice(set.rule_json(r)).unwrap();
        for n in 1..=3 {
            let values: Vec<(String, String)> = fields
                .iter()
                .skip(r % 5)
                .take(n)
                .map(|&f| {
                    let v = &row[f];
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    (f.to_owned(), text)
                })
                .collect();
            let pairs: Vec<(&str, &str)> = values
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            let found = ids(&set, &pairs);
            assert!(
                found.contains(&(r as u32)),
                "rule {r} not found by {pairs:?}"
            );
        }
    }
}
