//! `GET /fortunes` through a real HTTP request: the page byte for byte against
//! `fixtures/fortunes.html` with TechEmpower's headers, on the embedded SQLite default and on
//! PostgreSQL (`DATABASE_URL`, skipped loudly without it), and a database that is down
//! answering 503 without its details.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};

use galleon_site::fortunes::{FortunesConfig, Source};
use support::{TestSite, config, site_dir};

const EXPECTED: &[u8] = include_bytes!("fixtures/fortunes.html");

fn site(fortunes: FortunesConfig) -> TestSite {
    let mut c = config(&site_dir());
    c.fortunes = fortunes;
    TestSite::start(c)
}

/// The page and TechEmpower's headers, on several requests of one connection.
fn check_page(site: &TestSite) {
    let mut client = site.client();
    for _ in 0..3 {
        let r = client.get("/fortunes", &[]).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        assert_eq!(r.header("server"), Some("galleon"));
        assert!(r.header("date").is_some_and(|d| d.ends_with(" GMT")));
        assert_eq!(
            r.header("content-length"),
            Some(EXPECTED.len().to_string().as_str())
        );
        assert_eq!(r.text(), String::from_utf8_lossy(EXPECTED));
    }
}

#[test]
fn the_sqlite_default_serves_the_expected_page() {
    let site = site(FortunesConfig::default());
    check_page(&site);
}

#[test]
fn a_sqlite_file_is_created_seeded_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let site = site(FortunesConfig {
        source: Source::SqliteFile(dir.path().join("fortunes.db")),
        connections: 2,
        ..FortunesConfig::default()
    });
    check_page(&site);
}

#[test]
fn off_mounts_no_route() {
    let site = site(FortunesConfig {
        source: Source::Off,
        ..FortunesConfig::default()
    });
    assert_eq!(site.client().get("/fortunes", &[]).unwrap().status, 404);
}

/// A table of this test run's own, so tests sharing the `test` database never meet.
fn pg_table() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "fortune_test_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[test]
fn postgres_serves_the_expected_page_and_reads_every_request() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("skipped: DATABASE_URL not set");
        return;
    };
    let table = pg_table();
    {
        let site = site(FortunesConfig {
            source: Source::Postgres(url.clone()),
            table: table.clone(),
            connections: 2,
            batch: true,
        });
        check_page(&site);
        // Rows changed behind the server show at once: nothing is cached.
        support::pg_exec(
            &url,
            &format!(
                "INSERT INTO {table} VALUES (13, 'zz & <i>'); DELETE FROM {table} WHERE id = 12"
            ),
        );
        let r = site.client().get("/fortunes", &[]).unwrap();
        let page = r.text();
        assert!(
            page.ends_with("<tr><td>13</td><td>zz &amp; &lt;i&gt;</td></tr></table></body></html>"),
            "{page}"
        );
        assert!(!page.contains("<td>12</td>"), "{page}");
    }
    // Opened again on the same table: not seeded a second time.
    {
        let site = site(FortunesConfig {
            source: Source::Postgres(url.clone()),
            table: table.clone(),
            connections: 1,
            batch: false,
        });
        let page = site.client().get("/fortunes", &[]).unwrap().text();
        assert_eq!(page.matches("<tr><td>").count(), 13, "{page}");
    }
    support::pg_exec(&url, &format!("DROP TABLE {table}"));
}

/// A connection PostgreSQL ends under the server: the requests queued on it answer (503 or,
/// once it is opened again, the page), none hangs, and the page comes back.
#[test]
fn a_connection_killed_under_the_server_is_opened_again() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("skipped: DATABASE_URL not set");
        return;
    };
    let table = pg_table();
    let sep = if url.contains('?') { '&' } else { '?' };
    let site = site(FortunesConfig {
        source: Source::Postgres(format!("{url}{sep}application_name={table}")),
        table: table.clone(),
        connections: 1,
        batch: true,
    });
    check_page(&site);
    support::pg_exec(
        &url,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{table}'"
        ),
    );
    let mut statuses = Vec::new();
    let mut client = site.client();
    for _ in 0..20 {
        let r = client.get("/fortunes", &[]).unwrap();
        statuses.push(r.status);
        if r.status == 200 {
            assert_eq!(r.body, EXPECTED);
            break;
        }
        assert_eq!(r.status, 503, "{}", r.text());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(statuses.last(), Some(&200), "{statuses:?}");
    support::pg_exec(&url, &format!("DROP TABLE {table}"));
}

#[test]
fn a_database_that_is_down_answers_503_without_its_details() {
    let _turn = support::log_turn();
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let site = site(FortunesConfig {
        source: Source::Postgres(format!(
            "postgres://nobody:secret-pw@127.0.0.1:{port}/nodb?connect_timeout=2"
        )),
        ..FortunesConfig::default()
    });
    let mut client = site.client();
    for _ in 0..2 {
        let r = client.get("/fortunes", &[]).unwrap();
        assert_eq!(r.status, 503);
        let body = r.text();
        assert!(body.contains("unavailable"), "{body}");
        assert!(
            !body.contains("127.0.0.1") && !body.contains("nodb"),
            "{body}"
        );
    }
    let log = support::log();
    assert!(
        log.contains("connecting to PostgreSQL database nodb"),
        "{log}"
    );
    assert!(!log.contains("secret-pw"), "{log}");
}
