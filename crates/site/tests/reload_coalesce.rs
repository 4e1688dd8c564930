//! Concurrent reloads share runs (hostile-client report, bug B): fifty `POST /templates/reload`
//! or `POST /rules/reload` at once are two compiles or parses, not fifty, and every caller gets a
//! success; callers that leave leave at most the one pending run behind.
//!
//! Deterministic, without timing: the first reload is held on a named pipe (a FIFO page file or
//! rules file, whose read blocks until the test writes it) until every caller is counted as
//! waiting; then the test lets the reads through and counts runs and versions.
#![cfg(unix)]

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use galleon_http::{Method, Request, Response, Router};
use galleon_site::Site;
use support::TestSite;

/// A named pipe at `path` standing in for a file: a reader's open blocks until the test writes.
/// Dropped (at the end or on a failure), it feeds every later reader on a thread of its own, so
/// nothing stays blocked on it; that thread ends when the pipe is gone.
struct Gate {
    path: PathBuf,
    text: Vec<u8>,
}

impl Gate {
    /// Makes the pipe at a temporary name and renames it over `path`.
    fn install(path: &Path, text: &[u8]) -> Gate {
        let tmp = path.with_extension("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&tmp)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo failed");
        std::fs::rename(&tmp, path).unwrap();
        Gate {
            path: path.to_owned(),
            text: text.to_vec(),
        }
    }

    /// Lets one reader through: waits for it to open the pipe, then gives it the whole text.
    fn feed_once(&self) {
        feed(&self.path, &self.text).unwrap();
    }

    /// Lets every reader through from now on.
    fn open_forever(&self) {
        let (path, text) = (self.path.clone(), self.text.clone());
        std::thread::spawn(move || while feed(&path, &text).is_ok() {});
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open_forever();
    }
}

/// One writer's turn at the pipe (a reader that closed early makes the write fail: ignored).
fn feed(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let mut pipe = std::fs::OpenOptions::new().write(true).open(path)?;
    let _ = pipe.write_all(text);
    Ok(())
}

/// Waits, 20 s at most, until `cond` holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// [`wait_for`] on a runtime's thread.
async fn wait_for_async(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)))
}

fn body(r: &Response) -> Vec<u8> {
    r.body().as_full().map(|l| l.to_vec()).unwrap_or_default()
}

/// A site of one page, opened in-process (its `Templates` at hand to count runs), on a runtime
/// of two workers; `test` gets the router, the templates and the page directory.
fn with_site<F, Fut>(test: F)
where
    F: FnOnce(Arc<Router>, galleon_site::templates::Templates, PathBuf) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("pages")).unwrap();
    std::fs::write(dir.path().join("pages/v.html.eex"), "v").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let Site {
            router,
            cpu,
            templates,
            guards,
            ..
        } = Site::open(support::config(dir.path())).unwrap();
        test(Arc::new(router), templates, dir.path().join("pages")).await;
        drop(guards);
        tokio::task::spawn_blocking(move || cpu.join())
            .await
            .unwrap();
    });
}

fn post_templates_reload() -> Request {
    Request::new(Method::Post, "/templates/reload", &[], Bytes::new())
}

/// Regression: every post compiled the templates anew, one after another.
#[test]
fn fifty_concurrent_template_reloads_are_two_compiles_and_all_succeed() {
    with_site(|router, templates, pages| async move {
        let gate = Gate::install(&pages.join("gate.html.eex"), b"gate");
        let calls: Vec<_> = (0..50)
            .map(|_| {
                let router = router.clone();
                tokio::spawn(async move { router.handle(post_templates_reload()).await })
            })
            .collect();
        // The first compile is held on the pipe; the other 49 wait for the next one.
        wait_for_async("fifty callers, one compile", || {
            templates.shared_reloads() == (1, 50)
        })
        .await;
        gate.open_forever();
        let mut versions = Vec::new();
        for call in calls {
            let r = call.await.unwrap();
            let b = body(&r);
            assert_eq!(r.status().0, 200, "{}", String::from_utf8_lossy(&b));
            versions.push(json(&b)["version"].as_u64().unwrap());
        }
        versions.sort_unstable();
        let mut want = vec![3; 50];
        want[0] = 2;
        assert_eq!(
            versions, want,
            "one caller had the first compile, 49 the second"
        );
        assert_eq!(templates.shared_reloads(), (2, 0));
        assert_eq!(templates.snapshot().version(), 3);
    });
}

/// Callers that leave while a compile runs leave one pending compile, not one each.
#[test]
fn template_reload_callers_that_leave_leave_one_pending_compile() {
    with_site(|router, templates, pages| async move {
        let gate = Gate::install(&pages.join("gate.html.eex"), b"gate");
        let calls: Vec<_> = (0..50)
            .map(|_| {
                let router = router.clone();
                tokio::spawn(async move { router.handle(post_templates_reload()).await })
            })
            .collect();
        wait_for_async("fifty callers", || templates.shared_reloads() == (1, 50)).await;
        for call in &calls {
            call.abort();
        }
        for call in calls {
            assert!(call.await.unwrap_err().is_cancelled());
        }
        assert_eq!(templates.shared_reloads(), (1, 0), "nobody waits");
        gate.open_forever();
        // The running compile and the one pending, then nothing more.
        wait_for_async("the pending compile", || {
            templates.snapshot().version() == 3
        })
        .await;
        assert_eq!(templates.shared_reloads().0, 2);
        let r = router.handle(post_templates_reload()).await;
        assert_eq!(
            (r.status().0, json(&body(&r))["version"].as_u64()),
            (200, Some(4))
        );
        assert_eq!(templates.shared_reloads(), (3, 0));
    });
}

/// `GET /rules`' version and `(runs, waiting)` of its reloads.
fn rules_state(c: &mut galleon_client::Client) -> (u64, u64, u64) {
    let r = c.get("/rules", &[]).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = json(&r.body);
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
    (
        n(&v["version"]),
        n(&v["reloads"]["runs"]),
        n(&v["reloads"]["waiting"]),
    )
}

/// Regression: 300 concurrent posts of a 56 MB rules file were 300 parses in a row.
#[test]
fn fifty_concurrent_rules_reloads_are_two_parses_and_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.json");
    let rules = std::fs::read(support::site_dir().join("data/rules.json")).unwrap();
    std::fs::write(&path, &rules).unwrap();
    let mut config = support::config(&support::site_dir());
    config.rules.file = Some(path.clone());
    config.rules.poll_ms = 0;
    let s = TestSite::start(config);
    let gate = Gate::install(&path, &rules);
    let mut admin = s.client();
    assert_eq!(rules_state(&mut admin), (1, 0, 0));
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let mut c = s.client();
            std::thread::spawn(move || c.request("POST", "/rules/reload", &[], b"").unwrap())
        })
        .collect();
    wait_for("fifty callers, one parse", || {
        rules_state(&mut admin) == (1, 1, 50)
    });
    // One read each, the second once the first read is parsed and published (so the file is
    // closed): a pipe read by two at once would mix their bytes.
    gate.feed_once();
    wait_for("the first parse", || rules_state(&mut admin).0 == 2);
    gate.feed_once();
    let mut versions = Vec::new();
    for call in calls {
        let r = call.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        versions.push(json(&r.body)["version"].as_u64().unwrap());
    }
    versions.sort_unstable();
    let mut want = vec![3; 50];
    want[0] = 2;
    assert_eq!(
        versions, want,
        "one caller had the first parse, 49 the second"
    );
    assert_eq!(rules_state(&mut admin), (3, 2, 0));
}
