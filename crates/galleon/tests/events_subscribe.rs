//! `$all` subscriptions of `galleon serve`, against the real binary on a temporary SQLite file:
//! `--events-keep-alive`, and SIGTERM ending open subscriptions. The rest of their behaviour is
//! galleon-eventstore-http's tests.

mod events_support;
mod serve_support;

use std::time::{Duration, Instant};

use events_support::{Subscriber, append, client, events, start};

#[test]
fn an_idle_subscription_sends_keep_alive_comments() {
    let s = start(&["--events-keep-alive", "0.2"]);
    let mut sub = Subscriber::open(s.proc.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let started = Instant::now();
    for _ in 0..2 {
        let f = sub.next_frame().unwrap();
        assert_eq!(
            (f.id, &f.comments[..]),
            (None, &["keep-alive".to_owned()][..])
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // Events still arrive between keep-alives.
    let (status, r) = append(&mut client(s.proc.addr), "k", None, &events("Tick", 1));
    assert_eq!(status, 201);
    assert_eq!(sub.next_event().id, r["first_position"].as_u64());
}

#[test]
fn shutdown_ends_open_subscriptions() {
    let mut s = start(&[]);
    let mut sub = Subscriber::open(s.proc.addr, "/all/subscribe", &[]);
    sub.next_frame().unwrap();
    let pid = s.proc.pid();
    let started = Instant::now();
    let status = s
        .proc
        .terminate(pid)
        .expect("server did not exit after SIGTERM");
    assert!(status.success(), "{status:?}: {}", s.proc.stderr());
    // The 30 s shutdown grace is for responses that finish; an endless stream ends at once.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(sub.next_frame().is_none(), "the stream did not end");
    assert!(sub.ended, "the stream ended without its last chunk");
}
