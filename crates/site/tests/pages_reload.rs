//! Pages come and go with template reloads (hostile-client report, bug A), in-process: a page
//! file added while serving is at `/NAME` once a reload compiled it; a removed one is a 404 and
//! the reload succeeds; under `--watch` too, without the error page. Other routes keep priority
//! over a page of the same name, and a page is one plain path segment.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use galleon_client::{Client, ClientResponse};
use support::TestSite;

/// Writes a page in one rename, as an editor or a deploy would.
fn put(site: &Path, name: &str, text: &str) {
    let tmp = site.join(format!("pages/.{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, site.join(format!("pages/{name}.html.eex"))).unwrap();
}

fn rm(site: &Path, name: &str) {
    std::fs::remove_file(site.join(format!("pages/{name}.html.eex"))).unwrap();
}

/// A site of pages `a` and `b` (and `rules`, with the repository's rules beside it when
/// `with_rules`).
fn site(with_rules: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pages")).unwrap();
    put(dir.path(), "a", "page a <%= 1 + 1 %>");
    put(dir.path(), "b", "page b");
    if with_rules {
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::copy(
            support::site_dir().join("data/rules.json"),
            dir.path().join("data/rules.json"),
        )
        .unwrap();
        put(dir.path(), "rules", "the rules page");
    }
    dir
}

fn start(site: &Path, watch: bool) -> TestSite {
    let mut config = support::config(site);
    config.pages.watch = watch;
    config.rules.poll_ms = 0;
    TestSite::start(config)
}

fn reload(c: &mut Client) {
    let r = c.request("POST", "/templates/reload", &[], b"").unwrap();
    assert_eq!(r.status, 200, "the reload: {}", r.text());
}

fn get(c: &mut Client, target: &str) -> ClientResponse {
    c.get(target, &[]).unwrap()
}

/// `(status, body)` of `GET target`.
fn page(c: &mut Client, target: &str) -> (u16, String) {
    let r = get(c, target);
    (r.status, r.text())
}

/// Waits, 20 s at most, until `cond` holds (the watch polls the files).
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Regression: a page added after the start was a 404 until a restart, and removing one made
/// every later reload fail (`no template named pages/a.html.eex`).
#[test]
fn a_page_added_or_removed_while_serving_is_routed_by_the_next_reload() {
    let dir = site(false);
    let s = start(dir.path(), false);
    let mut c = s.client();
    assert_eq!(page(&mut c, "/a"), (200, "page a 2".into()));
    assert_eq!(page(&mut c, "/new").0, 404);

    put(dir.path(), "new", "a new page <%= 6 * 7 %>");
    assert_eq!(page(&mut c, "/new").0, 404, "not before a reload");
    reload(&mut c);
    assert_eq!(page(&mut c, "/new"), (200, "a new page 42".into()));
    let post = c.request("POST", "/new", &[], b"").unwrap();
    assert_eq!(
        (post.status, post.header("allow")),
        (405, Some("GET, HEAD"))
    );
    assert!(get(&mut c, "/").text().contains("<a href=\"/new\">"));
    // Its next version, like any page's.
    put(dir.path(), "new", "version 2");
    reload(&mut c);
    assert_eq!(page(&mut c, "/new"), (200, "version 2".into()));

    // A page of the start removed: the reload succeeds, the page is a 404, the others serve.
    rm(dir.path(), "a");
    reload(&mut c);
    assert_eq!(page(&mut c, "/a").0, 404);
    assert_eq!(page(&mut c, "/b"), (200, "page b".into()));
    assert_eq!(page(&mut c, "/new"), (200, "version 2".into()));
    let index = get(&mut c, "/").text();
    assert!(!index.contains("href=\"/a\""), "{index}");
    assert!(index.contains("href=\"/b\""), "{index}");
    // And the reloads after it too.
    put(dir.path(), "b", "page b, again");
    reload(&mut c);
    assert_eq!(page(&mut c, "/b"), (200, "page b, again".into()));

    // A page added later and removed: a 404, not an error; back when its file is.
    rm(dir.path(), "new");
    reload(&mut c);
    assert_eq!(page(&mut c, "/new").0, 404);
    assert_eq!(c.request("POST", "/new", &[], b"").unwrap().status, 404);
    put(dir.path(), "a", "a is back");
    put(dir.path(), "new", "new is back");
    reload(&mut c);
    assert_eq!(page(&mut c, "/a"), (200, "a is back".into()));
    assert_eq!(page(&mut c, "/new"), (200, "new is back".into()));
}

/// Under `--watch` a removed page showed the error page on every page; now it is a 404 and the
/// others serve, and an added page is served, with no reload asked.
#[test]
fn under_watch_pages_come_and_go_without_the_error_page() {
    let dir = site(false);
    let s = start(dir.path(), true);
    let mut c = s.client();
    assert_eq!(page(&mut c, "/b"), (200, "page b".into()));
    put(dir.path(), "late", "late page");
    wait_for("the added page", || page(&mut c, "/late").0 == 200);
    assert_eq!(page(&mut c, "/late"), (200, "late page".into()));
    rm(dir.path(), "b");
    wait_for("the removed page gone", || page(&mut c, "/b").0 == 404);
    for (target, want) in [("/a", "page a 2"), ("/late", "late page")] {
        assert_eq!(page(&mut c, target), (200, want.into()), "{target}");
    }
    // A later change still reaches the pages: the watch did not stop at the removal.
    put(dir.path(), "a", "page a, edited");
    wait_for("the edited page", || {
        page(&mut c, "/a") == (200, "page a, edited".into())
    });
}

/// The site's own routes win over a page of the same name, at the start and when added later;
/// only one plain segment names a page.
#[test]
fn other_routes_win_over_pages_and_page_names_do_not_escape() {
    let dir = site(true);
    // Not pages: a nested file, a dot name, a name that needs escaping.
    std::fs::create_dir_all(dir.path().join("pages/sub")).unwrap();
    std::fs::write(dir.path().join("pages/sub/x.html.eex"), "nested").unwrap();
    std::fs::write(dir.path().join("pages/..html.eex"), "dot").unwrap();
    let s = start(dir.path(), false);
    let mut c = s.client();
    let rules = get(&mut c, "/rules");
    assert_eq!(rules.status, 200);
    assert!(rules.text().contains("\"fields\""), "{}", rules.text());
    // Pages named like routes, added while serving: the routes still answer.
    put(dir.path(), "static", "a page named static");
    put(dir.path(), "compiled", "a page named compiled");
    std::fs::create_dir_all(dir.path().join("static")).unwrap();
    std::fs::write(dir.path().join("static/x.txt"), "static file").unwrap();
    reload(&mut c);
    assert!(get(&mut c, "/rules").text().contains("\"fields\""));
    assert_eq!(page(&mut c, "/static/x.txt"), (200, "static file".into()));
    // `/static` is the static files' route's (an empty path), not the page's.
    assert_ne!(page(&mut c, "/static").1, "a page named static");
    assert_eq!(
        page(&mut c, "/compiled"),
        (200, "a page named compiled".into())
    );
    assert!(get(&mut c, "/").text().contains("<h1>galleon</h1>"));
    for bad in [
        "/sub/x",
        "/sub%2fx",
        "/..",
        "/.",
        "/%2e%2e",
        "/pages/a.html.eex",
        "/a.html.eex",
        "/a/",
        "//a",
        "/A",
    ] {
        assert_eq!(page(&mut c, bad).0, 404, "{bad}");
    }
    assert_eq!(page(&mut c, "/a").0, 200);
}
