//! Templates replaced while the site serves (issue 15), in-process: `POST /templates/reload` and
//! `PagesConfig::watch`; every response rendered by exactly one version, a broken version never
//! served without watching, and shown (located) on the page while watching. SIGHUP is
//! `galleon serve`'s test (`crates/galleon/tests/templates.rs`).

mod support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use galleon_client::{Client, ClientResponse};
use support::{TestSite, wait_for};

/// Version `k` of the page: a loop long enough that a render takes a while, naming `k` in every
/// line, so a response that mixed two versions would show it.
fn page(k: usize) -> String {
    format!("<h1>version {k}</h1>\n<%= for i <- 1..300 do %><p>{k}:<%= i %></p>\n<% end %>")
}

/// What version `k` renders to.
fn body(k: usize) -> Vec<u8> {
    let mut s = format!("<h1>version {k}</h1>\n");
    for i in 1..=300 {
        s.push_str(&format!("<p>{k}:{i}</p>\n"));
    }
    s.into_bytes()
}

const BROKEN: &str = "<h1>broken</h1>\n<%= for i <- 1..3 do %>\n<%= i +  %>\n<% end %>";

/// Replaces the page in one rename, as an editor or a deploy would.
fn install(site: &Path, text: &str) {
    let tmp = site.join("pages/.v.html.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, site.join("pages/v.html.eex")).unwrap();
}

fn site_with(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("pages")).unwrap();
    install(dir.path(), text);
    dir
}

fn start(site: &Path, watch: bool) -> TestSite {
    let mut config = support::config(site);
    config.pages.watch = watch;
    TestSite::start(config)
}

fn reload(c: &mut Client) -> ClientResponse {
    c.request("POST", "/templates/reload", &[], b"").unwrap()
}

/// The version a whole, unmixed response is, or a panic.
fn version_of(r: &ClientResponse, versions: &[Vec<u8>]) -> usize {
    assert_eq!(r.status, 200, "{}", r.text());
    versions
        .iter()
        .position(|b| *b == r.body)
        .unwrap_or_else(|| panic!("a response of no single version: {}", r.text()))
}

/// Readers on three connections, each response checked by `check`; returns the stop flag, the
/// count served and the threads.
fn readers(
    s: &TestSite,
    check: impl Fn(&ClientResponse) + Send + Sync + 'static,
) -> (
    Arc<AtomicBool>,
    Arc<AtomicUsize>,
    Vec<std::thread::JoinHandle<()>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let check = Arc::new(check);
    let threads = (0..3)
        .map(|_| {
            let (stop, served, check) = (stop.clone(), served.clone(), check.clone());
            let mut c = s.client();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    check(&c.get("/v", &[]).unwrap());
                    served.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    (stop, served, threads)
}

#[test]
fn a_hundred_reloads_under_load_and_a_broken_version_never_reaches_a_client() {
    let _turn = support::log_turn();
    let site = site_with(&page(0));
    let s = start(site.path(), false);
    let versions: Vec<Vec<u8>> = (0..5).map(body).collect();
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let (stop, served, threads) = {
        let (versions, seen) = (versions.clone(), seen.clone());
        readers(&s, move |r| {
            let k = version_of(r, &versions);
            seen.lock().unwrap().insert(k);
        })
    };
    let mut admin = s.client();
    let mut refused = 0;
    for n in 0..100 {
        if n % 10 == 5 {
            install(site.path(), BROKEN);
            let r = reload(&mut admin);
            assert_eq!(r.status, 422, "{}", r.text());
            assert!(r.text().contains("pages/v.html.eex:3:"), "{}", r.text());
            refused += 1;
        } else {
            install(site.path(), &page(n % 5));
            let r = reload(&mut admin);
            assert_eq!(r.status, 200, "{}", r.text());
            // Read back on its own connection: the new version answers from now on.
            let got = admin.get("/v", &[]).unwrap();
            assert_eq!(version_of(&got, &versions), n % 5);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a reader saw a wrong response");
    }
    assert_eq!(refused, 10);
    assert!(
        served.load(Ordering::Relaxed) >= 100,
        "too few requests ran"
    );
    assert!(
        seen.lock().unwrap().len() >= 2,
        "readers saw one version only"
    );
    let log = support::log();
    assert!(
        log.contains("templates not reloaded") && log.contains("pages/v.html.eex:3:"),
        "{log}"
    );
}

#[test]
fn watch_reloads_changed_files_and_shows_a_broken_one_located_on_the_page() {
    let _turn = support::log_turn();
    let site = site_with(&page(0));
    let s = start(site.path(), true);
    let versions: Vec<Vec<u8>> = (0..4).map(body).collect();
    let broken_seen = Arc::new(AtomicUsize::new(0));
    let (stop, served, threads) = {
        let (versions, broken_seen) = (versions.clone(), broken_seen.clone());
        readers(&s, move |r| {
            if r.status == 500 {
                // The debug page: the located error, escaped, and never the raw source.
                let text = r.text();
                assert!(text.contains("pages/v.html.eex:3:"), "{text}");
                assert!(!text.contains("<%="), "{text}");
                broken_seen.fetch_add(1, Ordering::Relaxed);
            } else {
                version_of(r, &versions);
            }
        })
    };
    let mut c = s.client();
    for k in [1, 2, 3, 0, 1] {
        install(site.path(), &page(k));
        wait_for(&format!("version {k}"), || {
            c.get("/v", &[]).unwrap().body == versions[k]
        });
    }
    install(site.path(), BROKEN);
    wait_for("the error page", || c.get("/v", &[]).unwrap().status == 500);
    install(site.path(), &page(2));
    wait_for("the fixed version", || {
        c.get("/v", &[]).unwrap().body == versions[2]
    });
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a reader saw a wrong response");
    }
    assert!(served.load(Ordering::Relaxed) > 0);
    let log = support::log();
    assert!(log.contains("pages/v.html.eex:3:"), "{log}");
}
