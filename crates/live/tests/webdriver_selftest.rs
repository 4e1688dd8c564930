//! The WebDriver harness against a tiny page served here: clicks, typing, links, history, script
//! and the console all reach the browser and come back. Skipped loudly without chromium.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::webdriver::{Browser, WAIT};
use serde_json::json;

/// Most connections the page server accepts before it stops.
const MAX_CONNECTIONS: usize = 200;

const PAGE_ONE: &str = r#"<!doctype html><html><head><title>one</title></head><body>
<button id="b" onclick="var n = document.getElementById('n'); n.textContent = +n.textContent + 1">+</button>
<span id="n">0</span>
<input id="i" oninput="document.getElementById('m').textContent = this.value">
<span id="m"></span>
<a id="next" href="/two">two</a>
</body></html>"#;

const PAGE_TWO: &str = r#"<!doctype html><html><head><title>two</title></head><body><p id="p">page two</p></body></html>"#;

/// Serves the two pages on 127.0.0.1:0 from a thread (a thread per connection, at most
/// [`MAX_CONNECTIONS`]); returns the base URL.
fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(MAX_CONNECTIONS).flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    base
}

/// Reads one request head and answers it, closing the connection.
fn answer(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = match path {
        "/" => ("200 OK", PAGE_ONE),
        "/two" => ("200 OK", PAGE_TWO),
        _ => ("404 Not Found", "not found"),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
}

#[test]
fn drives_a_page_through_chromedriver() {
    let Some(b) = Browser::start() else { return };
    let base = serve();
    b.goto(&format!("{base}/"));
    b.wait_text("#n", "0");

    for _ in 0..3 {
        b.click("#b");
    }
    b.wait_text("#n", "3");

    b.clear_and_type("#i", "hello");
    b.wait_text("#m", "hello");
    b.send_keys("#i", " world");
    b.wait_text_contains("#m", "world");
    assert_eq!(
        b.execute("return document.getElementById('i').value;", vec![]),
        json!("hello world")
    );
    assert_eq!(b.attr("#next", "id"), Some("next".to_string()));
    assert_eq!(b.attr("#next", "data-missing"), None);

    assert_eq!(
        b.execute("return arguments[0] + 1;", vec![json!(41)]),
        json!(42)
    );
    b.execute("console.log('selftest-marker');", vec![]);
    b.wait_until("the console message", WAIT, |b| {
        b.console_logs()
            .iter()
            .any(|l| l.contains("selftest-marker"))
    });

    let missing = b.find("#nope").unwrap_err();
    assert!(missing.contains("no such element"), "{missing}");

    b.click("#next");
    let two = format!("{base}/two");
    b.wait_until("the second page", WAIT, |b| b.current_url() == two);
    b.wait_text("#p", "page two");
    assert!(b.page_source().contains("page two"));

    b.back();
    b.wait_until("the first page again", WAIT, |b| {
        b.current_url() == format!("{base}/")
    });
    b.wait_until("the button again", WAIT, |b| b.find("#b").is_ok());
}
