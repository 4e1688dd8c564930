//! The rules example (issue 15) in-process, against `Site::open`'s router: matching, errors,
//! the three `RulesConfig::mode`s, and reloads (POST, file change) while requests run. SIGHUP is
//! `galleon serve`'s test (`crates/galleon/tests/rules.rs`).

mod support;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use galleon_client::{Client, ClientResponse};
use galleon_site::rules::{Mode, generate};
use support::{TestSite, wait_for};

/// The queries every check asks; together they cover each field type, `_limit` and no filter.
const QUERIES: &[&str] = &[
    "/rules/match?country=NL&channel=web",
    "/rules/match?tier=3&active=true",
    "/rules/match?category=books&device=mobile&_limit=3",
    "/rules/match?price_cap=326.97",
    "/rules/match?_limit=7",
    "/rules/match?note=first+the+days+stock+and+shipped+except",
];

fn client(s: &TestSite) -> Client {
    s.client()
}

/// What `galleon gen-rules` writes, into `path` (written to a temporary name and renamed into
/// place).
fn gen_rules(path: &Path, seed: u64, count: usize, revision: &str) {
    generate::run(generate::Args {
        seed,
        count,
        revision: Some(revision.to_owned()),
        output: Some(path.to_owned()),
    })
    .unwrap();
}

/// Replaces `dst` with `src`'s bytes in one rename, as an editor or a deploy would.
fn install(src: &Path, dst: &Path) {
    let tmp = dst.with_extension("json.tmp");
    std::fs::copy(src, &tmp).unwrap();
    std::fs::rename(&tmp, dst).unwrap();
}

fn install_bytes(bytes: &[u8], dst: &Path) {
    let tmp = dst.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dst).unwrap();
}

/// The repository's site serving the rules in `rules`, `tune`d.
fn start(rules: &Path, tune: impl FnOnce(&mut galleon_site::rules::RulesConfig)) -> TestSite {
    let mut config = support::config(&support::site_dir());
    config.rules.file = Some(rules.to_owned());
    tune(&mut config.rules);
    TestSite::start(config)
}

fn json(r: &ClientResponse) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

/// The revision a response body names (`{"revision":"v3",...`).
fn revision_of(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v["revision"].as_str().map(str::to_owned)
}

fn reload(c: &mut Client) -> ClientResponse {
    c.request("POST", "/rules/reload", &[], b"").unwrap()
}

#[test]
fn the_sites_rules_load_by_default_and_match() {
    let s = TestSite::default_site();
    let mut c = client(&s);
    let info = c.get("/rules", &[]).unwrap();
    assert_eq!(info.status, 200, "{}", info.text());
    let v = json(&info);
    assert_eq!(
        (v["rules"].as_u64(), v["version"].as_u64()),
        (Some(5000), Some(1))
    );
    assert_eq!(v["fields"].as_array().unwrap().len(), 27);
    assert_eq!(v["revision"], "seed-3");
    // Rule 3 of site/data/rules.json, found by its note and by three other fields.
    for q in [
        "/rules/match?note=first+the+days+stock+and+shipped+except",
        "/rules/match?product=P-0391&country=ES&weight=0.55",
    ] {
        let r = c.get(q, &[]).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("x-galleon-rules-version"), Some("1"));
        let v = json(&r);
        let ids: Vec<_> = v["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].clone())
            .collect();
        assert!(ids.contains(&3.into()), "{q}: {ids:?}");
        assert_eq!(v["count"].as_u64(), Some(ids.len() as u64));
    }
}

#[test]
fn unknown_fields_bad_values_and_bad_options_are_400_json() {
    let s = TestSite::default_site();
    let mut c = client(&s);
    for (q, msg) in [
        ("/rules/match?colour=red", "unknown field `colour`"),
        (
            "/rules/match?tier=three",
            "field `tier` is an integer and `three` is not one",
        ),
        ("/rules/match?active=yes", "field `active` is a boolean"),
        (
            "/rules/match?price_cap=cheap",
            "field `price_cap` is a number",
        ),
        (
            "/rules/match?_limit=1000000",
            "_limit `1000000`: expected 0 to 1000",
        ),
        ("/rules/match?_sort=id", "unknown option `_sort`"),
        ("/rules/match?country=%ZZ", "malformed percent-escape"),
    ] {
        let r = c.get(q, &[]).unwrap();
        assert_eq!(r.status, 400, "{q}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        let err = json(&r)["error"].as_str().unwrap().to_owned();
        assert!(err.contains(msg), "{q}: {err}");
    }
    // A value that reads but matches nothing is an empty answer, not an error.
    let r = c.get("/rules/match?country=XX", &[]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(json(&r)["count"], 0);
}

#[test]
fn the_three_modes_answer_with_the_same_bytes() {
    let site = support::site_dir().join("data/rules.json");
    let servers: Vec<_> = [Mode::Shared, Mode::Copy, Mode::Pool]
        .into_iter()
        .map(|m| {
            start(&site, |r| {
                r.mode = m;
                r.max_results = 50;
            })
        })
        .collect();
    for q in QUERIES
        .iter()
        .chain(&["/rules/match?", "/rules/match?tier=9"])
    {
        let bodies: Vec<Vec<u8>> = servers
            .iter()
            .map(|s| {
                let r = client(s).get(q, &[]).unwrap();
                assert_eq!(r.status, 200, "{q}");
                r.body
            })
            .collect();
        assert!(
            bodies[0] == bodies[1] && bodies[1] == bodies[2],
            "{q}: modes differ"
        );
    }
}

/// Reloads the rules 100 times (among them refused files) while readers on several connections
/// ask [`QUERIES`]; every answer must be 200 and byte-equal to what its named revision answers
/// alone, and no refused file may show.
fn reload_under_load(mode: Mode) {
    let _turn = support::log_turn();
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.json");
    let versions: Vec<(String, PathBuf)> = (0..5)
        .map(|i| {
            let rev = format!("v{i}");
            let p = dir.path().join(format!("{rev}.json"));
            gen_rules(&p, 100 + i, 400, &rev);
            (rev, p)
        })
        .collect();
    install(&versions[0].1, &rules);
    let s = start(&rules, |r| {
        r.mode = mode;
        r.poll_ms = 20;
    });
    let mut admin = client(&s);

    // What each revision answers when it alone is serving.
    let mut expected: HashMap<String, Vec<Vec<u8>>> = HashMap::new();
    for (rev, path) in &versions {
        install(path, &rules);
        let r = reload(&mut admin);
        assert_eq!(r.status, 200, "{}", r.text());
        let bodies = QUERIES
            .iter()
            .map(|q| {
                let r = admin.get(q, &[]).unwrap();
                assert_eq!(
                    (r.status, revision_of(&r.body).as_deref()),
                    (200, Some(rev.as_str()))
                );
                r.body
            })
            .collect();
        expected.insert(rev.clone(), bodies);
    }
    // The versions differ where it counts: a mix would be seen.
    assert_ne!(expected["v0"][0], expected["v1"][0]);

    let malformed = std::fs::read_to_string(&versions[1].1).unwrap();
    let malformed = &malformed[..malformed.len() / 2];
    // The first rule's tier a string instead of an integer.
    let invalid = {
        let text = std::fs::read_to_string(&versions[2].1).unwrap();
        let at = text.find("\"tier\": ").unwrap();
        let end = at + text[at..].find(',').unwrap();
        format!("{}\"tier\": \"x\"{}", &text[..at], &text[end..])
    };
    let (stop, served, seen) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(std::sync::Mutex::new(HashSet::new())),
    );
    let expected = Arc::new(expected);
    let readers: Vec<_> = (0..3)
        .map(|t| {
            let (stop, served, seen) = (stop.clone(), served.clone(), seen.clone());
            let expected = expected.clone();
            let mut c = client(&s);
            std::thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let q = i % QUERIES.len();
                    let r = c.get(QUERIES[q], &[]).unwrap();
                    assert_eq!(r.status, 200, "{}: {}", QUERIES[q], r.text());
                    assert!(r.header("x-galleon-rules-version").is_some());
                    let rev = revision_of(&r.body)
                        .unwrap_or_else(|| panic!("no revision in {}", r.text()));
                    let want = expected
                        .get(&rev)
                        .unwrap_or_else(|| panic!("unknown revision {rev}"));
                    assert!(
                        r.body == want[q],
                        "{}: answer not that of revision {rev}: {}",
                        QUERIES[q],
                        r.text()
                    );
                    seen.lock().unwrap().insert(rev);
                    served.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();

    let mut refused = 0;
    for n in 0..100 {
        if n % 10 == 5 {
            // A broken file mid-way: refused with its location, never served.
            let (bytes, want) = if n % 20 == 5 {
                (malformed, "rules.json:")
            } else {
                (invalid.as_str(), "field `tier`: expected an integer")
            };
            install_bytes(bytes.as_bytes(), &rules);
            let r = reload(&mut admin);
            assert_eq!(r.status, 422, "{}", r.text());
            assert!(
                json(&r)["error"].as_str().unwrap().contains(want),
                "{}",
                r.text()
            );
            refused += 1;
        }
        let (rev, path) = &versions[n % versions.len()];
        install(path, &rules);
        let r = reload(&mut admin);
        assert_eq!(r.status, 200, "{}", r.text());
        // The watcher may have published the same file too: the revision is this one's.
        assert_eq!(json(&r)["revision"], rev.as_str(), "{}", r.text());
        std::thread::sleep(Duration::from_millis(3));
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("a reader failed");
    }
    let info = json(&admin.get("/rules", &[]).unwrap());
    // 1 at start, 5 to record the answers, 100 here (the watcher may add some).
    assert!(info["version"].as_u64().unwrap() >= 106, "{info}");
    assert_eq!(info["revision"], "v4");
    assert_eq!(refused, 10);
    assert!(
        served.load(Ordering::Relaxed) >= 100,
        "too few requests ran"
    );
    assert!(
        seen.lock().unwrap().len() >= 2,
        "readers saw only one revision"
    );
    let log = support::log();
    assert!(
        log.contains("reload refused:") && log.contains("rules.json:"),
        "{log}"
    );
    assert!(
        log.contains("rules[0], field `tier`: expected an integer, got a string"),
        "{log}"
    );
}

#[test]
fn reloads_under_load_shared() {
    reload_under_load(Mode::Shared);
}

#[test]
fn reloads_under_load_pool() {
    reload_under_load(Mode::Pool);
}

#[test]
fn reloads_under_load_copy() {
    reload_under_load(Mode::Copy);
}

#[test]
fn a_changed_file_is_picked_up_and_a_broken_one_is_logged_with_its_location() {
    let _turn = support::log_turn();
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.json");
    gen_rules(&rules, 1, 50, "first");
    let s = start(&rules, |r| r.poll_ms = 20);
    let mut c = client(&s);
    let revision = |c: &mut Client| json(&c.get("/rules", &[]).unwrap())["revision"].clone();
    gen_rules(&rules, 2, 50, "second");
    wait_for("the changed file", || revision(&mut c) == "second");
    // A comma missing in rules[1], on line 33 (header lines, then one rule per line).
    let text = std::fs::read_to_string(&rules).unwrap();
    let broken: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 32 {
                l.replacen(", \"tier\"", " \"tier\"", 1)
            } else {
                l.to_owned()
            }
        })
        .collect();
    install_bytes(broken.join("\n").as_bytes(), &rules);
    wait_for("the refusal in the log", || {
        support::log().contains("reload refused")
    });
    let log = support::log();
    assert!(log.contains("rules.json:33:"), "{log}");
    assert!(log.contains("keeping version 2"), "{log}");
    assert_eq!(revision(&mut c), "second");
    gen_rules(&rules, 3, 50, "third");
    wait_for("the repaired file", || revision(&mut c) == "third");
}

#[test]
fn reload_is_allowed_to_loopback_peers() {
    let site = support::site_dir().join("data/rules.json");
    // Loopback: allowed.
    let local = start(&site, |_| {});
    let r = reload(&mut client(&local));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(json(&r)["version"], 2);
    // Other peers are refused: a unit test in `rules/mod.rs` (no traffic off loopback here).
}
