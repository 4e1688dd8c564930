//! Live renders: the page a live render gives is the page an ordinary render gives; the JSON
//! diffs, merged the way the `phoenix_live_view` 1.2 client merges them (`rendered.js`, ported
//! below), rebuild that page after every change; statics cross once; one changed row of a long
//! list sends one row; a dynamic whose assigns did not change is not evaluated.

use std::cell::Cell;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use galleon_template::{Assigns, Changed, Engine, LiveRender, LiveTemplate, Value};
use serde_json::{Map, Value as Json};

/// `Rendered.mergeDiff` of the client (`mergeKeyed` with its moves), for diffs without
/// components.
fn merge(target: &mut Json, source: Json) {
    if source.get("s").is_some() {
        *target = source;
    } else {
        do_merge(target, source);
    }
}

fn do_merge(target: &mut Json, source: Json) {
    let Json::Object(src) = source else {
        panic!("a diff that is not an object")
    };
    if let Some(Json::Object(keyed)) = src.get("k") {
        let t = target.as_object_mut().unwrap();
        let tk = t
            .entry("k")
            .or_insert_with(|| Json::Object(Map::new()))
            .as_object_mut()
            .unwrap();
        // With `km`, moves copy rows of the tree as it was before this diff.
        let before = keyed.get("km").is_some().then(|| tk.clone());
        for (i, entry) in keyed {
            if i == "kc" || i == "km" {
                continue;
            }
            let old_row = |j: &Json| {
                let before = before.as_ref().expect("a move without km");
                before[&j.as_u64().expect("a row index").to_string()].clone()
            };
            match entry {
                Json::Number(_) => {
                    tk.insert(i.clone(), old_row(entry));
                }
                Json::Array(pair) => {
                    let mut row = old_row(&pair[0]);
                    do_merge(&mut row, pair[1].clone());
                    tk.insert(i.clone(), row);
                }
                _ => {
                    let row = tk
                        .entry(i.clone())
                        .or_insert_with(|| Json::Object(Map::new()));
                    do_merge(row, entry.clone());
                }
            }
        }
        let old = tk.get("kc").and_then(Json::as_u64).unwrap_or(0);
        let new = keyed["kc"].as_u64().expect("kc");
        for i in new..old {
            tk.remove(&i.to_string());
        }
        tk.insert("kc".into(), Json::from(new));
        return;
    }
    let t = target.as_object_mut().unwrap();
    for (key, val) in src {
        match t.get_mut(&key) {
            Some(tv) if val.is_object() && val.get("s").is_none() && tv.is_object() => {
                do_merge(tv, val)
            }
            _ => {
                t.insert(key, val);
            }
        }
    }
}

/// `Rendered.toOutputBuffer`: the HTML the client builds from its tree.
fn client_html(r: &Json, out: &mut String) {
    let statics: Vec<&str> = r["s"]
        .as_array()
        .expect("statics")
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    if let Some(k) = r.get("k") {
        for i in 0..k["kc"].as_u64().unwrap() {
            dynamics_html(&k[i.to_string()], &statics, out);
        }
    } else {
        dynamics_html(r, &statics, out);
    }
}

fn dynamics_html(node: &Json, statics: &[&str], out: &mut String) {
    for (i, s) in statics.iter().enumerate() {
        out.push_str(s);
        if i + 1 < statics.len() {
            match &node[i.to_string()] {
                Json::String(t) => out.push_str(t),
                d @ Json::Object(_) => client_html(d, out),
                other => panic!("dynamic {i} is {other}"),
            }
        }
    }
}

/// A JSON value as a template value (through `Assigns`, the crate's one way in).
fn json_value(j: Json) -> Value {
    let a = Assigns::from_json(serde_json::json!({ "v": j })).unwrap();
    a.get("v").cloned().unwrap()
}

fn parse(diff: &str) -> Json {
    serde_json::from_str(diff).unwrap_or_else(|e| panic!("not JSON ({e}): {diff}"))
}

fn live_engine(sources: &[(String, String)]) -> Engine {
    Engine::builder()
        .live(true)
        .from_sources(sources.iter().cloned())
        .unwrap()
}

#[test]
fn a_live_render_is_the_page_an_ordinary_render_gives_for_every_golden_case() {
    let inputs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inputs");
    let mut partials = Vec::new();
    for entry in fs::read_dir(inputs.join("partials")).unwrap() {
        let path = entry.unwrap().path();
        let name = format!("partials/{}", path.file_name().unwrap().to_string_lossy());
        partials.push((name, fs::read_to_string(&path).unwrap()));
    }
    let (mut checked, mut errors) = (0, 0);
    for entry in fs::read_dir(&inputs).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .strip_suffix(".eex")
        else {
            continue;
        };
        let assigns = match fs::read_to_string(inputs.join(format!("{name}.json"))) {
            Ok(json) => Assigns::from_json(serde_json::from_str(&json).unwrap()).unwrap(),
            Err(_) => Assigns::new(),
        };
        let template = format!("{name}.eex");
        let mut sources = vec![(template.clone(), fs::read_to_string(&path).unwrap())];
        sources.extend(partials.iter().cloned());
        let Ok(plain) = Engine::from_sources(sources.clone()) else {
            continue;
        };
        let expected = plain
            .render(&template, &assigns)
            .map(|l| String::from_utf8(l.to_vec()).unwrap());
        let live = live_engine(&sources).live(&template).unwrap();
        let got = live.render(|n| assigns.get(n).cloned(), Changed::All, None);
        match (expected, got) {
            (Ok(page), Ok(r)) => {
                assert_eq!(live.to_html(&r), page, "{name}");
                let mut json = String::new();
                live.diff(None, &r, &mut json);
                let mut html = String::new();
                client_html(&parse(&json), &mut html);
                assert_eq!(html, page, "{name}: the client's page from {json}");
                checked += 1;
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "{name}");
                errors += 1;
            }
            (a, b) => panic!(
                "{name}: ordinary {:?}, live {:?}",
                a.map(|_| ()),
                b.map(|_| ())
            ),
        }
    }
    assert!(
        checked >= 25 && errors >= 15,
        "{checked} pages and {errors} errors compared"
    );
}

const PAGE: &str = r#"<h1><%= @title %></h1>
<p class="<%= if @flag, do: "on", else: "off" %>">Count: <%= @count %></p>
<%= if @flag do %><em>on since <%= @count %></em><% else %><i>off</i><% end %>
<ul>
<%= for item <- @items do %>  <li id="i-<%= item.id %>"><%= item.name %><%= if item.done do %> ✓<% end %></li>
<% end %></ul>
<%= case @mode do %><% "a" -> %>A <%= @title %><% _ -> %>other<% end %>
<% shown = @count * 2 %><b><%= shown %></b>
<footer><%= length(@items) %> items</footer>"#;

struct State {
    title: String,
    flag: bool,
    count: i64,
    mode: &'static str,
    items: Vec<(i64, String, bool)>,
}

impl State {
    fn value(&self, name: &str) -> Option<Value> {
        Some(match name {
            "title" => Value::from(self.title.as_str()),
            "flag" => Value::Bool(self.flag),
            "count" => Value::Int(self.count),
            "mode" => Value::from(self.mode),
            "items" => {
                let json: Vec<Json> = self
                    .items
                    .iter()
                    .map(|(id, name, done)| serde_json::json!({"id": id, "name": name, "done": done}))
                    .collect();
                json_value(Json::Array(json))
            }
            _ => return None,
        })
    }
}

#[test]
fn diffs_merged_as_the_client_merges_them_rebuild_the_page_after_every_change() {
    let engine = live_engine(&[("page".into(), PAGE.into())]);
    let plain = Engine::from_source("page", PAGE).unwrap();
    let t = engine.live("page").unwrap();
    let mut s = State {
        title: "Tasks & <more>".into(),
        flag: false,
        count: 0,
        mode: "a",
        items: (0..5)
            .map(|i| (i, format!("task {i}"), i % 2 == 0))
            .collect(),
    };
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let first = t.render(|n| s.value(n), Changed::All, None).unwrap();
    let mut json = String::new();
    t.diff(None, &first, &mut json);
    let mut client = parse(&json);
    let mut held: LiveRender = first;
    for step in 0..400 {
        let mut changed: Vec<&str> = Vec::new();
        match next(7) {
            0 => {
                s.count += 1;
                changed.push("count");
            }
            1 => {
                s.flag = !s.flag;
                changed.push("flag");
            }
            2 => {
                s.title = format!("title {step} \"quoted\"");
                changed.push("title");
            }
            3 => {
                s.mode = if s.mode == "a" { "b" } else { "a" };
                changed.push("mode");
            }
            4 => {
                if !s.items.is_empty() {
                    let i = next(s.items.len() as u64) as usize;
                    s.items[i].2 = !s.items[i].2;
                    s.items[i].1 = format!("renamed {step}");
                }
                changed.push("items");
            }
            5 => {
                let new = (100 + step, format!("new {step}"), false);
                match next(4) {
                    _ if s.items.is_empty() => s.items.push(new),
                    0 => s.items.push(new),
                    1 => {
                        s.items.pop();
                    }
                    // Rows move: an insertion or a removal anywhere.
                    2 => {
                        let at = next(s.items.len() as u64 + 1) as usize;
                        s.items.insert(at, new);
                    }
                    _ => {
                        let at = next(s.items.len() as u64) as usize;
                        s.items.remove(at);
                    }
                }
                changed.push("items");
            }
            _ => {}
        }
        let r = t
            .render(
                |n| s.value(n),
                Changed::Only(&|n| changed.contains(&n)),
                Some(&held),
            )
            .unwrap();
        json.clear();
        let any = t.diff(Some(&held), &r, &mut json);
        assert_eq!(any, json != "{}", "{json}");
        merge(&mut client, parse(&json));
        let mut html = String::new();
        client_html(&client, &mut html);
        let expected =
            String::from_utf8(plain.render_with("page", |n| s.value(n)).unwrap().to_vec()).unwrap();
        assert_eq!(
            html, expected,
            "step {step}, changed {changed:?}, diff {json}"
        );
        assert_eq!(t.to_html(&r), expected, "step {step}");
        assert!(
            !json.contains("\"s\":[\"<h1>"),
            "the page's statics sent again: {json}"
        );
        held = r;
    }
}

fn list_template() -> LiveTemplate {
    let source = r#"<table><%= for row <- @rows do %>
<tr><td class="id"><%= row.id %></td><td><%= row.name %></td><td><%= row.status %></td></tr><% end %>
</table>"#;
    live_engine(&[("list".into(), source.into())])
        .live("list")
        .unwrap()
}

fn rows(n: usize, changed: Option<usize>) -> Value {
    let rows: Vec<Json> = (0..n)
        .map(|i| {
            let status = if Some(i) == changed {
                "shipped"
            } else {
                "pending"
            };
            serde_json::json!({"id": i, "name": format!("order-{i}"), "status": status})
        })
        .collect();
    json_value(Json::Array(rows))
}

#[test]
fn one_changed_row_of_three_hundred_sends_that_row_alone() {
    let t = list_template();
    let before = rows(300, None);
    let after = rows(300, Some(137));
    let a = t
        .render(|_| Some(before.clone()), Changed::All, None)
        .unwrap();
    let b = t
        .render(|_| Some(after.clone()), Changed::All, Some(&a))
        .unwrap();
    let mut first = String::new();
    t.diff(None, &a, &mut first);
    let mut diff = String::new();
    t.diff(Some(&a), &b, &mut diff);
    assert_eq!(diff, r#"{"0":{"k":{"137":{"2":"shipped"},"kc":300}}}"#);
    assert!(diff.len() <= 150, "{} bytes", diff.len());
    // The row's statics were sent once, not per row.
    assert_eq!(first.matches("<td class=").count(), 1, "{}", &first[..200]);
    let mut client = parse(&first);
    merge(&mut client, parse(&diff));
    let mut html = String::new();
    client_html(&client, &mut html);
    assert_eq!(html, t.to_html(&b));
}

#[test]
fn rows_that_moved_are_sent_as_their_old_places_not_their_values() {
    let t = list_template();
    let list = |ids: &[usize]| {
        let rows: Vec<Json> = ids
            .iter()
            .map(
                |i| serde_json::json!({"id": i, "name": format!("order-{i}"), "status": "pending"}),
            )
            .collect();
        json_value(Json::Array(rows))
    };
    let ids: Vec<usize> = (1..=20).collect();
    let before = list(&ids);
    let a = t
        .render(|_| Some(before.clone()), Changed::All, None)
        .unwrap();
    let mut client = String::new();
    t.diff(None, &a, &mut client);
    let mut client = parse(&client);
    // One row added at the top: it is sent, each other row is the number of its old place.
    let after = list(&[[0].as_slice(), &ids].concat());
    let b = t
        .render(|_| Some(after.clone()), Changed::All, Some(&a))
        .unwrap();
    let mut diff = String::new();
    t.diff(Some(&a), &b, &mut diff);
    assert!(
        diff.contains(r#""1":0,"2":1,"#) && diff.contains(r#""km":1,"kc":21"#),
        "{diff}"
    );
    assert!(
        !diff.contains("order-5"),
        "moved rows carry no values: {diff}"
    );
    merge(&mut client, parse(&diff));
    let mut html = String::new();
    client_html(&client, &mut html);
    assert_eq!(html, t.to_html(&b));
    // One row taken out of the middle: the rows after it move up.
    let fewer: Vec<usize> = (0..=20).filter(|&i| i != 9).collect();
    let after = list(&fewer);
    let c = t
        .render(|_| Some(after.clone()), Changed::All, Some(&b))
        .unwrap();
    diff.clear();
    t.diff(Some(&b), &c, &mut diff);
    assert!(diff.starts_with(r#"{"0":{"k":{"9":10,"10":11,"#), "{diff}");
    merge(&mut client, parse(&diff));
    html.clear();
    client_html(&client, &mut html);
    assert_eq!(html, t.to_html(&c));
}

#[test]
fn a_dynamic_whose_assigns_did_not_change_is_not_evaluated() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let engine = Engine::builder()
        .live(true)
        .function("expensive", move |x: i64| {
            counted.fetch_add(1, Ordering::Relaxed);
            x * 10
        })
        .from_source(
            "p",
            "<%= @a %>|<%= expensive(@b) %>|<% c = @b %><%= c %>|<%= if @a > 0 do %>pos<% end %>",
        )
        .unwrap();
    let t = engine.live("p").unwrap();
    let a = Cell::new(0i64);
    let assigns = |n: &str| match n {
        "a" => Some(Value::Int(a.get())),
        "b" => Some(Value::Int(7)),
        _ => None,
    };
    let first = t.render(assigns, Changed::All, None).unwrap();
    assert_eq!(t.to_html(&first), "0|70|7|");
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    a.set(1);
    let next = t
        .render(assigns, Changed::Only(&|n| n == "a"), Some(&first))
        .unwrap();
    assert_eq!(t.to_html(&next), "1|70|7|pos");
    assert_eq!(calls.load(Ordering::Relaxed), 1, "expensive(@b) ran again");
    let mut diff = String::new();
    t.diff(Some(&first), &next, &mut diff);
    assert_eq!(diff, r#"{"0":"1","3":{"s":["pos"]}}"#);
    // A change of `b` runs it.
    let third = t
        .render(assigns, Changed::Only(&|n| n == "b"), Some(&next))
        .unwrap();
    assert_eq!(t.to_html(&third), "1|70|7|pos");
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[test]
fn an_engine_not_built_live_says_so() {
    let e = Engine::from_source("p", "<%= @a %>").unwrap();
    let err = e.live("p").unwrap_err();
    assert!(err.to_string().contains("EngineBuilder::live"), "{err}");
    assert!(
        Engine::builder()
            .live(true)
            .from_source("p", "x")
            .unwrap()
            .live("q")
            .is_err()
    );
}
