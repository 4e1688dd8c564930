//! `galleon serve`'s `/fortunes` flags: the default (embedded SQLite) serves the expected page,
//! bad values are refused at start naming the flag, `--help` documents them.

mod serve_support;

use std::time::Duration;

use serve_support::{ServeProcess, galleon, site_dir};

const EXPECTED: &[u8] = include_bytes!("../../site/tests/fixtures/fortunes.html");

#[test]
fn the_default_serves_the_expected_page() {
    let server = ServeProcess::start(&[]);
    let mut client = galleon_client::Client::connect(server.addr, Duration::from_secs(30)).unwrap();
    let r = client.get("/fortunes", &[]).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.body, EXPECTED);
    assert_eq!(r.header("server"), Some("galleon"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
}

#[test]
fn bad_fortunes_flags_are_refused_at_start() {
    for (args, expect) in [
        (["--fortunes-db", "mysql://x"], "is not a fortunes database"),
        (
            ["--fortunes-table", "Fortune"],
            "--fortunes-table \"Fortune\"",
        ),
        (
            ["--fortunes-connections", "5000"],
            "--fortunes-connections 5000",
        ),
    ] {
        let out = galleon()
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--events",
                "off",
                "--site",
            ])
            .arg(site_dir())
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

#[test]
fn help_lists_the_fortunes_flags() {
    let out = galleon().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--fortunes-db",
        "--fortunes-table",
        "--fortunes-connections",
        "postgres://",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}
