//! A client read survives the process being stopped and continued.
//!
//! On Linux a blocking `recv` on a socket with a read timeout fails with `EINTR` when the process
//! is stopped (`SIGSTOP`, a cgroup freezer, a debugger) and continued, even with no signal
//! handler installed (signal(7)). CI machines do this; the client must retry, not fail.
//! This file is its own test binary because it stops the whole process.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use galleon_client::Client;

#[test]
fn a_read_survives_sigstop_and_sigcont() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let me = std::process::id().to_string();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        // The client is now blocked in its read. A separate process stops this one and
        // continues it; the answer comes only after that.
        let status = Command::new("sh")
            .args([
                "-c",
                &format!("kill -STOP {me}; sleep 0.3; kill -CONT {me}"),
            ])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(200));
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .unwrap();
    });
    let mut c = Client::connect(addr, Duration::from_secs(20)).unwrap();
    let r = c
        .get("/", &[])
        .expect("the read was not retried after SIGCONT");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"ok");
    server.join().unwrap();
}
