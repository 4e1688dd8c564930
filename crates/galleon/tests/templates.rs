//! Templates replaced while `galleon serve` runs (issue 15): SIGHUP reloads them. Reloads under
//! load, `POST /templates/reload` and watching are tested in-process in
//! `crates/site/tests/templates.rs`.

mod serve_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use galleon_client::Client;
use serve_support::ServeProcess;

const TIMEOUT: Duration = Duration::from_secs(30);

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

fn start(site: &Path, extra: &[&str]) -> ServeProcess {
    let mut args = vec!["--events", "off"];
    args.extend_from_slice(extra);
    ServeProcess::start_site(&[], site, &args)
}

fn client(s: &ServeProcess) -> Client {
    Client::connect(s.addr, TIMEOUT).unwrap()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < TIMEOUT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sighup_reloads_the_templates() {
    let site = site_with(&page(1));
    let s = start(site.path(), &[]);
    let mut c = client(&s);
    assert_eq!(c.get("/v", &[]).unwrap().body, body(1));
    install(site.path(), &page(2));
    // Without --watch a changed file is not picked up by itself.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(c.get("/v", &[]).unwrap().body, body(1));
    let st = Command::new("kill")
        .args(["-HUP", &s.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_for("the SIGHUP reload", || {
        c.get("/v", &[]).unwrap().body == body(2)
    });
}
