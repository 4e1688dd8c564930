//! A minimal W3C WebDriver client: headless Chromium driven through chromedriver, for tests that
//! load pages (and later the Phoenix LiveView JS client) in a real browser.
//!
//! Every command is one HTTP request on a fresh connection (`galleon_client::Client`); failures
//! panic with the command, the WebDriver error and its message, since these are test helpers.
//!
//! # Examples
//!
//! ```ignore
//! let Some(b) = Browser::start() else { return }; // skipped loudly without chromium
//! b.goto("http://127.0.0.1:4000/");
//! b.click("#increment");
//! b.wait_text("#count", "1");
//! ```

use std::cell::RefCell;
use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use galleon_client::Client;
use serde_json::{Value, json};

/// Longest one WebDriver command may take before it fails instead of hanging (page loads on a
/// shared CI machine can be slow).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// How long [`Browser::wait_text`] and [`Browser::wait_text_contains`] wait by default.
pub const WAIT: Duration = Duration::from_secs(20);

/// How often a wait re-checks its condition.
const POLL: Duration = Duration::from_millis(50);

/// How long chromedriver gets to answer `/status` as ready.
const DRIVER_START: Duration = Duration::from_secs(20);

/// How many ports [`Browser::start`] tries chromedriver on.
const START_TRIES: usize = 3;

/// How many times an element action is retried when its element went stale in between.
const STALE_RETRIES: usize = 5;

/// Key under which W3C WebDriver returns an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Most page source a failed wait shows.
const SOURCE_SHOWN: usize = 4 * 1024;

/// A headless Chromium session through a chromedriver this process started; dropping it ends
/// the session and kills chromedriver's whole process group.
pub struct Browser {
    /// chromedriver's address, `127.0.0.1:PORT`.
    addr: String,
    /// The WebDriver session id.
    session: String,
    /// The chromedriver process, leader of its own process group.
    driver: Child,
    /// Console messages read so far (reading the browser log drains it).
    logs: RefCell<Vec<String>>,
    /// The profile directory and chromedriver's log; removed after the processes are gone.
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session, or `None` (with a loud notice on
    /// stderr) when either is not installed, unless `GALLEON_REQUIRE_CHROMIUM` is set: then it
    /// panics, so CI cannot skip the browser tests silently.
    pub fn start() -> Option<Browser> {
        let chromium = find_program(&["chromium", "chromium-browser"]);
        let driver = find_program(&["chromedriver"]);
        let (Some(chromium), Some(driver)) = (chromium, driver) else {
            assert!(
                std::env::var_os("GALLEON_REQUIRE_CHROMIUM").is_none(),
                "GALLEON_REQUIRE_CHROMIUM is set but chromium or chromedriver is not installed"
            );
            eprintln!("\n*** SKIPPED: the browser test, no chromium/chromedriver installed ***\n");
            return None;
        };
        let mut errors = Vec::new();
        for attempt in 0..START_TRIES {
            match Browser::try_start(&chromium, &driver, attempt) {
                Ok(b) => return Some(b),
                Err(e) => errors.push(e),
            }
        }
        panic!(
            "chromedriver did not start in {START_TRIES} tries:\n{}",
            errors.join("\n")
        );
    }

    /// One try: chromedriver on a free port, ready, with a session.
    fn try_start(chromium: &Path, driver: &Path, attempt: usize) -> Result<Browser, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let log_path = dir.path().join(format!("chromedriver-{attempt}.log"));
        let log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let err_log = log.try_clone().map_err(|e| format!("log: {e}"))?;
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("{}: {e}", driver.display()))?;
        let mut b = Browser {
            addr: format!("127.0.0.1:{port}"),
            session: String::new(),
            driver: child,
            logs: RefCell::new(Vec::new()),
            dir,
        };
        // From here on, an error drops `b`, which kills what was started.
        b.wait_ready()
            .map_err(|e| format!("{e}\nchromedriver log:\n{}", b.driver_log()))?;
        let profile = b.dir.path().join("profile");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let value = b
            .raw("POST", "/session", Some(caps), COMMAND_TIMEOUT)
            .map_err(|e| format!("{e}\nchromedriver log:\n{}", b.driver_log()))?;
        b.session = value["sessionId"]
            .as_str()
            .ok_or_else(|| format!("POST /session: no sessionId in {value}"))?
            .to_string();
        b.cmd("POST", "/timeouts", Some(json!({"pageLoad": 60000})))?;
        Ok(b)
    }

    /// Polls `GET /status` until chromedriver says it is ready, or fails if it exits first.
    fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.driver.try_wait() {
                return Err(format!("chromedriver on {} exited: {status}", self.addr));
            }
            if let Ok(v) = self.raw("GET", "/status", None, Duration::from_secs(5))
                && v["ready"] == Value::Bool(true)
            {
                return Ok(());
            }
            if start.elapsed() > DRIVER_START {
                return Err(format!(
                    "chromedriver on {} not ready in {DRIVER_START:?}",
                    self.addr
                ));
            }
            sleep(POLL);
        }
    }

    /// What chromedriver wrote to its output so far.
    fn driver_log(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path()) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().ends_with(".log") {
                    text.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
                }
            }
        }
        text
    }

    /// One HTTP request to chromedriver: the response's `value`, or the WebDriver error as
    /// `"{METHOD} {path}: {error}: {message}"`.
    fn raw(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, String> {
        let fail = |e: &dyn std::fmt::Display| format!("{method} {path}: {e}");
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut client = Client::connect(self.addr.as_str(), timeout).map_err(|e| fail(&e))?;
        let resp = client
            .request(
                method,
                path,
                &[
                    ("content-type", "application/json"),
                    ("connection", "close"),
                ],
                body.as_bytes(),
            )
            .map_err(|e| fail(&e))?;
        let v: Value = serde_json::from_slice(&resp.body).map_err(|e| {
            fail(&format!(
                "status {}, body not JSON ({e}): {}",
                resp.status,
                resp.text()
            ))
        })?;
        let value = v.get("value").cloned().unwrap_or(Value::Null);
        if let Some(error) = value.get("error").and_then(Value::as_str) {
            let message = value.get("message").and_then(Value::as_str).unwrap_or("");
            return Err(fail(&format!("{error}: {message}")));
        }
        if resp.status != 200 {
            return Err(fail(&format!("status {}: {}", resp.status, resp.text())));
        }
        Ok(value)
    }

    /// A command on this session (`path` after `/session/{id}`).
    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let full = format!("/session/{}{path}", self.session);
        self.raw(method, &full, body, COMMAND_TIMEOUT)
    }

    /// A command that must succeed.
    fn must(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.cmd(method, path, body)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Navigates to `url` and waits for the page to load.
    pub fn goto(&self, url: &str) {
        self.must("POST", "/url", Some(json!({ "url": url })));
    }

    /// The reference of the first element matching the CSS selector `css`.
    pub fn find(&self, css: &str) -> Result<String, String> {
        let v = self.cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )?;
        v.get(ELEMENT_KEY)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("POST /element {css:?}: no element reference in {v}"))
    }

    /// Finds `css` and runs `f` on its element reference, again when the element went stale in
    /// between (the page re-rendered it).
    fn on_element<T>(
        &self,
        css: &str,
        mut f: impl FnMut(&str) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut last = String::new();
        for _ in 0..STALE_RETRIES {
            match self.find(css).and_then(|id| f(&id)) {
                Err(e) if e.contains("stale element reference") => last = e,
                other => return other,
            }
        }
        Err(last)
    }

    /// Clicks the element `css`, or says why it could not.
    pub fn try_click(&self, css: &str) -> Result<(), String> {
        self.on_element(css, |id| {
            self.cmd("POST", &format!("/element/{id}/click"), Some(json!({})))
                .map(drop)
        })
    }

    /// Clicks the element `css`.
    pub fn click(&self, css: &str) {
        self.try_click(css)
            .unwrap_or_else(|e| panic!("click {css:?}: {e}"));
    }

    /// Clears the input `css` and types `text` into it.
    pub fn clear_and_type(&self, css: &str, text: &str) {
        self.on_element(css, |id| {
            self.cmd("POST", &format!("/element/{id}/clear"), Some(json!({})))?;
            self.cmd(
                "POST",
                &format!("/element/{id}/value"),
                Some(json!({ "text": text })),
            )
            .map(drop)
        })
        .unwrap_or_else(|e| panic!("clear_and_type {css:?}: {e}"));
    }

    /// Types `text` into the element `css` (WebDriver key codes such as `"\u{E007}"`, Enter,
    /// work too).
    pub fn send_keys(&self, css: &str, text: &str) {
        self.on_element(css, |id| {
            self.cmd(
                "POST",
                &format!("/element/{id}/value"),
                Some(json!({ "text": text })),
            )
            .map(drop)
        })
        .unwrap_or_else(|e| panic!("send_keys {css:?}: {e}"));
    }

    /// The rendered text of the element `css`, or why it could not be read.
    pub fn try_text(&self, css: &str) -> Result<String, String> {
        self.on_element(css, |id| {
            let v = self.cmd("GET", &format!("/element/{id}/text"), None)?;
            Ok(v.as_str().unwrap_or_default().to_string())
        })
    }

    /// The rendered text of the element `css`.
    pub fn text(&self, css: &str) -> String {
        self.try_text(css)
            .unwrap_or_else(|e| panic!("text {css:?}: {e}"))
    }

    /// The attribute `name` of the element `css`, `None` when it has none.
    pub fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.on_element(css, |id| {
            let v = self.cmd("GET", &format!("/element/{id}/attribute/{name}"), None)?;
            Ok(v.as_str().map(str::to_string))
        })
        .unwrap_or_else(|e| panic!("attr {css:?} {name:?}: {e}"))
    }

    /// Runs `js` as a function body in the page (`arguments[i]` are `args`) and returns what
    /// it returns.
    pub fn execute(&self, js: &str, args: Vec<Value>) -> Value {
        self.must(
            "POST",
            "/execute/sync",
            Some(json!({"script": js, "args": args})),
        )
    }

    /// The current page's serialized DOM.
    pub fn page_source(&self) -> String {
        self.must("GET", "/source", None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The current page's URL.
    pub fn current_url(&self) -> String {
        self.must("GET", "/url", None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Goes back one page in history.
    pub fn back(&self) {
        self.must("POST", "/back", Some(json!({})));
    }

    /// Every browser console message of this session so far, oldest first, as chromedriver
    /// formats them (`"console-api 12:8 \"hello\""`), each prefixed with its level.
    pub fn console_logs(&self) -> Vec<String> {
        if let Err(e) = self.read_logs() {
            panic!("{e}");
        }
        self.logs.borrow().clone()
    }

    /// Moves the messages chromedriver has (reading drains them) into `self.logs`.
    fn read_logs(&self) -> Result<(), String> {
        let v = self.cmd("POST", "/se/log", Some(json!({"type": "browser"})))?;
        let mut logs = self.logs.borrow_mut();
        for entry in v.as_array().into_iter().flatten() {
            let level = entry["level"].as_str().unwrap_or("?");
            let message = entry["message"].as_str().unwrap_or("");
            logs.push(format!("{level} {message}"));
        }
        Ok(())
    }

    /// Polls `f` every 50 ms until it holds; after `timeout` panics naming `what`, with the page
    /// source (its first 4 KB) and the console messages.
    pub fn wait_until(&self, what: &str, timeout: Duration, mut f: impl FnMut(&Browser) -> bool) {
        self.wait_for(what, timeout, |b| {
            if f(b) { Ok(()) } else { Err(String::new()) }
        });
    }

    /// Like [`Browser::wait_until`], with `f` saying what it saw instead (`Err`), which the
    /// panic shows.
    fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut(&Browser) -> Result<(), String>,
    ) {
        let start = Instant::now();
        let seen = loop {
            match f(self) {
                Ok(()) => return,
                Err(seen) if start.elapsed() > timeout => break seen,
                Err(_) => sleep(POLL),
            }
        };
        let source = match self.cmd("GET", "/source", None) {
            Ok(v) => truncate(v.as_str().unwrap_or_default(), SOURCE_SHOWN),
            Err(e) => format!("(page source unreadable: {e})"),
        };
        let logs = match self.read_logs() {
            Ok(()) => self.logs.borrow().join("\n"),
            Err(e) => format!("(console unreadable: {e})"),
        };
        let seen = if seen.is_empty() {
            String::new()
        } else {
            format!(" (last seen: {seen})")
        };
        panic!(
            "timed out after {timeout:?} waiting for {what}{seen}\n--- page source ---\n{source}\n\
             --- console ---\n{logs}"
        );
    }

    /// Waits until the text of `css` is `expected`.
    pub fn wait_text(&self, css: &str, expected: &str) {
        self.wait_for(
            &format!("{css:?} to read {expected:?}"),
            WAIT,
            |b| match b.try_text(css) {
                Ok(t) if t == expected => Ok(()),
                Ok(t) => Err(format!("{t:?}")),
                Err(e) => Err(e),
            },
        );
    }

    /// Waits until the text of `css` contains `needle`.
    pub fn wait_text_contains(&self, css: &str, needle: &str) {
        self.wait_for(
            &format!("{css:?} to contain {needle:?}"),
            WAIT,
            |b| match b.try_text(css) {
                Ok(t) if t.contains(needle) => Ok(()),
                Ok(t) => Err(format!("{t:?}")),
                Err(e) => Err(e),
            },
        );
    }

    /// Kills chromedriver's process group (Chromium included), escalating to SIGKILL when it
    /// does not go within a few seconds, and reaps chromedriver.
    fn kill_group(&mut self) {
        let group = format!("-{}", self.driver.id());
        let signal = |sig: &str| {
            Command::new("kill")
                .args([sig, "--", &group])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        signal("-TERM");
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let start = Instant::now();
        // `kill -0` succeeds while any process of the group is left.
        while signal("-0") {
            if start.elapsed() > Duration::from_secs(5) {
                signal("-KILL");
                break;
            }
            sleep(POLL);
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = self.raw("DELETE", &path, None, Duration::from_secs(30));
        }
        self.kill_group();
    }
}

/// The first of `names` found as an executable file on `PATH`.
fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| {
                use std::os::unix::fs::PermissionsExt;
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

/// `s` cut to at most `max` bytes on a character boundary, marked when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes more)", &s[..end], s.len() - end)
}
