//! The example site's pages in-process, against `Site::open`'s router served on 127.0.0.1:0:
//! the index, data files and query assigns, compiled pages, static files (paths, validators,
//! ranges), client errors as one-line 400s, the render bounds, and the strings pages.

mod support;

use std::io::Write;

use galleon_site::SiteConfig;
use support::{TestSite, site_dir};

/// The repository's site with `galleon serve`'s defaults, `tune`d.
fn with(tune: impl FnOnce(&mut SiteConfig)) -> SiteConfig {
    let mut config = support::config(&site_dir());
    tune(&mut config);
    config
}

#[test]
fn pages_index_static_files_and_404s() {
    let s = TestSite::default_site();
    let mut c = s.client();
    let index = c.get("/", &[]).unwrap();
    assert_eq!(index.status, 200);
    for page in [
        "blah",
        "blah-split",
        "doom",
        "static-strings",
        "dynamic-strings",
    ] {
        assert!(
            index.text().contains(&format!("<a href=\"/{page}\">")),
            "{page} missing from the index"
        );
    }
    // Data from site/data/teams.json.
    let teams = c.get("/teams", &[]).unwrap();
    assert_eq!(teams.status, 200);
    assert!(teams.text().contains("<h1>CSL"), "{}", teams.text());
    // Query assigns override data, JSON-parsed where possible.
    let teams = c.get("/teams?year=1999", &[]).unwrap();
    assert!(
        teams.text().contains("<h1>CSL 1999</h1>"),
        "{}",
        teams.text()
    );
    // The last of repeated names wins.
    let teams = c.get("/teams?year=1&year=1999", &[]).unwrap();
    assert!(teams.text().contains("<h1>CSL 1999</h1>"));
    // The compiled variant is mounted beside it and answers the same bytes.
    let compiled = c.get("/compiled/teams?year=1&year=1999", &[]).unwrap();
    assert_eq!((compiled.status, &compiled.body), (200, &teams.body));
    let css = c.get("/static/site.css", &[]).unwrap();
    assert_eq!(css.status, 200);
    assert_eq!(
        css.body,
        std::fs::read(site_dir().join("static/site.css")).unwrap()
    );
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    for bad in [
        "/static/../Cargo.toml",
        "/static/%2e%2e/Cargo.toml",
        "/static/..%2fpages/blah.html.eex",
        "/static/%2e%2e%2f%2e%2e%2fCargo.toml",
        "/static/",
        "/static//etc/passwd",
        "/nope",
    ] {
        assert_eq!(c.get(bad, &[]).unwrap().status, 404, "{bad}");
    }
    assert_eq!(c.request("POST", "/blah", &[], b"x").unwrap().status, 405);
    // Regression (issue 13, class 10): query values of the wrong type made a 500 whose body
    // showed the template's path, line and source. A client's values are a 400 with one short
    // line; the located error goes to the log only. The server goes on serving.
    for bad in [
        "/blah?iters=%22x%22",
        "/blah?iters=1e308",
        "/blah?iters=%5B1%5D",
        "/big-table?table=5",
        "/teams?teams=7",
    ] {
        let r = c.get(bad, &[]).unwrap();
        let body = r.text();
        assert_eq!(r.status, 400, "{bad}: {body}");
        assert!(!body.contains(".eex"), "{bad}: template name shown: {body}");
        assert!(
            !body.contains('|') && !body.contains('^'),
            "{bad}: source shown: {body}"
        );
        assert!(!body.contains("0x"), "{bad}: address shown: {body}");
    }
    assert_eq!(c.get("/blah?iters=2", &[]).unwrap().status, 200);
    // Regression: a query that does not percent-decode, or a page's value missing from the
    // query, made a 500 ("unknown assign"): the client's request, so a 400 saying which.
    let malformed = "400 the query string is malformed";
    let missing = "400 this page needs a query value the request does not give";
    for (bad, why) in [
        ("/blah?iters=%zz", malformed),
        ("/blah?iters=%ff", malformed),
        ("/blah?it%zers=2", malformed),
        ("/compiled/blah?iters=%zz", malformed),
        // Regression: a value that does not decode made /doom fall back to its default, a
        // 30 GB page; a page with a data file fell back the same way.
        ("/doom?iters=%zz", malformed),
        ("/doom?it%zers=1", malformed),
        ("/compiled/doom?iters=%zz", malformed),
        ("/teams?teams=%zz", malformed),
        ("/compiled/teams?teams=%zz", malformed),
        ("/compiled/big-table?table=%zz", malformed),
        ("/blah", missing),
        ("/blah?x=1", missing),
        ("/compiled/blah", missing),
    ] {
        // Bodies over 64 KiB fail the read: a page that fell back to a default would otherwise
        // stream gigabytes into the test.
        struct Capped(Vec<u8>);
        impl Write for Capped {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                if self.0.len() + b.len() > 64 << 10 {
                    return Err(std::io::Error::other("body over 64 KiB"));
                }
                self.0.extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut body = Capped(Vec::new());
        let r = c
            .request_to("GET", bad, &[], &mut body)
            .unwrap_or_else(|e| panic!("{bad}: {e}"));
        let text = String::from_utf8_lossy(&body.0);
        assert_eq!((r.status, text.trim()), (400, why), "{bad}");
    }
    // A malformed pair the page does not need is skipped, as before.
    assert_eq!(c.get("/blah?x=%zz&iters=2", &[]).unwrap().status, 200);
    assert_eq!(c.get("/doom?x=%zz&iters=2", &[]).unwrap().status, 200);
}

/// `PagesConfig::full_body_max` and the template limits reach the pages: a page over the bound
/// is streamed with the same bytes, and a render past the step limit is refused, not run.
#[test]
fn render_bounds_are_config() {
    let whole = TestSite::default_site();
    let small = TestSite::start(with(|c| c.pages.full_body_max = 1000));
    let few_steps = TestSite::start(with(|c| c.pages.limits.max_steps = 500));
    let (mut cw, mut cs, mut cf) = (whole.client(), small.client(), few_steps.client());
    let a = cw.get("/blah?iters=10", &[]).unwrap();
    let b = cs.get("/blah?iters=10", &[]).unwrap();
    assert_eq!(a.header("content-length"), Some("4100"));
    assert_eq!(a.header("transfer-encoding"), None);
    assert_eq!(b.header("transfer-encoding"), Some("chunked"));
    assert_eq!(b.header("content-length"), None);
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!(a.body, b.body);
    // 1,000 iterations cost over 500 steps: refused under the small budget (the query asked for
    // them: 400), rendered under the default one.
    assert_eq!(cw.get("/blah?iters=1000", &[]).unwrap().status, 200);
    let r = cf.get("/blah?iters=1000", &[]).unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(cf.get("/blah?iters=10", &[]).unwrap().status, 200);
}

#[test]
fn strings_pages_reuse_or_scatter_the_same_pool() {
    let s = TestSite::default_site();
    let mut c = s.client();
    let a = c.get("/static-strings?count=500", &[]).unwrap().text();
    let b = c.get("/dynamic-strings?count=500", &[]).unwrap().text();
    let distinct = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("<p>"))
            .collect::<std::collections::HashSet<_>>()
            .len()
    };
    assert_eq!(a.lines().filter(|l| l.starts_with("<p>")).count(), 500);
    assert_eq!(b.lines().filter(|l| l.starts_with("<p>")).count(), 500);
    assert!(distinct(&a) <= 16, "static-strings uses a small set");
    assert!(distinct(&b) > 400, "dynamic-strings scatters over the pool");
    assert_eq!(a.len(), b.len(), "same amount of output");
    // Past the 4 MiB whole-render limit the page is streamed, with the strings picked once.
    let big = c.get("/static-strings?count=100000", &[]).unwrap();
    assert_eq!(big.header("transfer-encoding"), Some("chunked"));
    let big = big.text();
    assert_eq!(
        big.lines().filter(|l| l.starts_with("<p>")).count(),
        100_000
    );
    assert!(distinct(&big) <= 16, "static-strings uses a small set");
}

/// Regression (issue 13, class 4): static files had no validators, ranges, `304` or `nosniff`.
#[test]
fn static_files_answer_conditional_and_range_requests() {
    let s = TestSite::default_site();
    let mut c = s.client();
    let full = std::fs::read(site_dir().join("static/site.css")).unwrap();
    let r = c.get("/static/site.css", &[]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, full);
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    let etag = r.header("etag").expect("an etag").to_owned();
    let modified = r
        .header("last-modified")
        .expect("a last-modified")
        .to_owned();
    // Unchanged since: 304, no body.
    let r = c
        .get("/static/site.css", &[("if-none-match", &etag)])
        .unwrap();
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    let r = c
        .get("/static/site.css", &[("if-modified-since", &modified)])
        .unwrap();
    assert_eq!(r.status, 304);
    let r = c
        .get("/static/site.css", &[("if-none-match", "\"other\"")])
        .unwrap();
    assert_eq!(r.status, 200);
    // One range: 206 with the bytes asked for; past the end: 416.
    let r = c
        .get("/static/site.css", &[("range", "bytes=2-5")])
        .unwrap();
    assert_eq!(r.status, 206);
    assert_eq!(r.body, full[2..6]);
    let expected_range = format!("bytes 2-5/{}", full.len());
    assert_eq!(r.header("content-range"), Some(expected_range.as_str()));
    let r = c.get("/static/site.css", &[("range", "bytes=-3")]).unwrap();
    assert_eq!(r.body, full[full.len() - 3..]);
    let past = format!("bytes={}-", full.len());
    let r = c.get("/static/site.css", &[("range", &past)]).unwrap();
    assert_eq!(r.status, 416);
    let expected_unsatisfied = format!("bytes */{}", full.len());
    assert_eq!(
        r.header("content-range"),
        Some(expected_unsatisfied.as_str())
    );
    // A range whose If-Range names another version: the whole file.
    let r = c
        .get(
            "/static/site.css",
            &[("range", "bytes=2-5"), ("if-range", "\"old\"")],
        )
        .unwrap();
    assert_eq!((r.status, r.body.len()), (200, full.len()));
}

/// Regression (issue 35, cause 8): a page rendered whole stays in memory until its reader has
/// taken it, so each slow reader held one (80 clients that pipelined requests and read nothing
/// held 4.6 MiB each of a 3.6 MB page). Past `--max-whole-pages` pages are streamed instead,
/// rendered as the client takes them; once the held page is written, pages are whole again.
#[test]
fn pages_past_the_whole_pages_budget_are_streamed() {
    use std::io::Read;
    // 7.3 MB: more than the kernel's socket buffers take while the client reads nothing.
    let page = "/dynamic-strings?count=100000";
    let s = TestSite::start(with(|c| {
        c.pages.full_body_max = 16 << 20;
        c.pages.max_whole_pages = 10 << 20;
    }));
    let mut stalled = std::net::TcpStream::connect(s.addr).unwrap();
    stalled.set_read_timeout(Some(support::TIMEOUT)).unwrap();
    stalled
        .write_all(
            format!("GET {page} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
    // Its head (written with the body's first bytes) shows the page was rendered whole.
    let mut head = vec![0u8; 4096];
    let n = stalled.read(&mut head).unwrap();
    let head = String::from_utf8_lossy(&head[..n]).to_lowercase();
    assert!(head.contains("content-length: "), "{head}");
    // The held page leaves 2.7 MB of the budget: the next render of it streams.
    let mut c = s.client();
    let streamed = c.get(page, &[]).unwrap();
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed.header("transfer-encoding"), Some("chunked"));
    assert!(streamed.header("content-length").is_none());
    // The slow reader takes its page; once it has all of it, the page counts no more.
    let mut rest = Vec::new();
    stalled.read_to_end(&mut rest).unwrap();
    assert!(
        rest.len() + n > streamed.body.len(),
        "{} bytes",
        rest.len() + n
    );
    let whole = c.get(page, &[]).unwrap();
    assert_eq!(whole.status, 200);
    assert_eq!(
        whole.header("content-length"),
        Some(&*streamed.body.len().to_string())
    );
    assert_eq!(whole.body.len(), streamed.body.len());
}
