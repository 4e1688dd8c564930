//! The live socket over a real WebSocket, as the JavaScript client speaks it: the page's
//! tokens, the join, events and their diffs, patches, broadcasts, crashes, and every way a
//! client can be refused or closed (origin, CSRF, stale session, bad frames, oversize frames,
//! rate and connection limits, timeouts, shutdown).

mod common;

use std::time::Duration;

use common::serve::{
    Served, WAIT, connect, expect, expect_close, get, join, next, push, send, tokens,
};
use galleon_live::{Info, Limits, Live, LiveView, Socket, ViewError};
use galleon_template::Engine;
use serde_json::{Value, json};

struct Counter;

impl LiveView for Counter {
    fn mount(&mut self, _: &Value, session: &Value, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("count", 0);
        s.assign("name", session["user"].as_str().unwrap_or("anon"));
        s.subscribe("news");
        s.page_title("Counter");
        Ok(())
    }
    fn handle_event(&mut self, ev: &str, v: &Value, s: &mut Socket) -> Result<(), ViewError> {
        match ev {
            "inc" => s.update_int("count", |n| n + 1),
            "name" => {
                s.assign("name", v["user"]["name"].as_str().unwrap_or(""));
            }
            "go" => s.push_patch("/counter?page=2"),
            "away" => s.redirect("/elsewhere"),
            "shout" => s.broadcast("news", Info::new(100i64)),
            "boom" => panic!("the view exploded"),
            _ => return Err(format!("unknown event {ev}").into()),
        }
        Ok(())
    }
    fn handle_params(&mut self, p: &Value, _: &str, s: &mut Socket) -> Result<(), ViewError> {
        s.assign("page", p["page"].as_str().unwrap_or("1"));
        Ok(())
    }
    fn handle_info(&mut self, info: Info, s: &mut Socket) -> Result<(), ViewError> {
        if let Some(n) = info.downcast_ref::<i64>() {
            s.update_int("count", |c| c + n);
        }
        Ok(())
    }
}

const TEMPLATE: &str = "<p><%= @count %></p><b><%= @name %></b><i><%= @page %></i>";

fn live(limits: Limits) -> Live {
    let engine = Engine::builder()
        .live(true)
        .from_source("counter", TEMPLATE)
        .unwrap();
    Live::builder(&engine)
        .view("/counter", "counter", || Counter)
        .limits(limits)
        .build()
        .unwrap()
}

async fn joined(s: &Served) -> common::serve::Ws {
    let (session, csrf) = tokens(s.addr, "/counter").await;
    let mut ws = connect(s.addr, &csrf, None).await.unwrap();
    let reply = join(&mut ws, s.addr, "/counter", &session).await;
    assert_eq!(reply.payload["status"], "ok", "{reply:?}");
    ws
}

#[tokio::test]
async fn the_page_is_rendered_then_joined_then_diffed() {
    let live = live(Limits::default());
    let s = Served::start(&live).await;
    let (status, head, body) = get(s.addr, "/counter?page=7", &[]).await;
    assert_eq!(status, 200);
    assert!(head.contains("cache-control: private, no-store"), "{head}");
    assert!(body.contains("<title>Counter</title>"), "{body}");
    assert!(body.contains("<p>0</p><b>anon</b><i>7</i>"), "{body}");
    assert!(body.contains("data-phx-main"), "{body}");
    assert!(
        body.contains("/live/assets/phoenix_live_view.min.js"),
        "{body}"
    );
    let (session, csrf) = (
        common::serve::attr(&body, "data-phx-session"),
        common::serve::csrf(&body),
    );
    let mut ws = connect(s.addr, &csrf, Some(&format!("http://{}", s.addr)))
        .await
        .unwrap();
    let reply = join(&mut ws, s.addr, "/counter?page=7", &session).await;
    assert_eq!(
        (reply.join_ref.as_deref(), reply.msg_ref.as_deref()),
        (Some("1"), Some("1"))
    );
    assert_eq!(reply.event, "phx_reply");
    assert_eq!(reply.payload["status"], "ok");
    let r = &reply.payload["response"];
    assert_eq!(
        r["liveview_version"],
        galleon_live::assets::LIVE_VIEW_VERSION
    );
    assert_eq!(
        r["rendered"],
        json!({"0": "0", "1": "anon", "2": "7", "s": ["<p>", "</p><b>", "</b><i>", "</i>"],
               "t": "Counter"})
    );

    push(
        &mut ws,
        "1",
        "2",
        "lv:phx-t",
        "event",
        json!({"type": "click", "event": "inc", "value": {}}),
    )
    .await;
    let m = expect(&mut ws).await;
    assert_eq!(m.msg_ref.as_deref(), Some("2"));
    assert_eq!(
        m.payload,
        json!({"status": "ok", "response": {"diff": {"0": "1"}}})
    );

    let form = "user%5Bname%5D=Ada+%3Cb%3E&_target=user%5Bname%5D";
    push(
        &mut ws,
        "1",
        "3",
        "lv:phx-t",
        "event",
        json!({"type": "form", "event": "name", "value": form}),
    )
    .await;
    let m = expect(&mut ws).await;
    assert_eq!(
        m.payload["response"],
        json!({"diff": {"1": "Ada &lt;b&gt;"}})
    );

    // push_patch: handle_params runs at once; the reply carries the diff and the new URL.
    push(
        &mut ws,
        "1",
        "4",
        "lv:phx-t",
        "event",
        json!({"type": "click", "event": "go", "value": {}}),
    )
    .await;
    let m = expect(&mut ws).await;
    assert_eq!(
        m.payload["response"],
        json!({"diff": {"2": "2"}, "live_patch": {"kind": "push", "to": "/counter?page=2"}})
    );
    // live_patch from the client (a patch link).
    push(
        &mut ws,
        "1",
        "5",
        "lv:phx-t",
        "live_patch",
        json!({"url": format!("http://{}/counter?page=9", s.addr)}),
    )
    .await;
    assert_eq!(
        expect(&mut ws).await.payload["response"],
        json!({"diff": {"2": "9"}})
    );
    // An event that changes nothing replies with no diff.
    push(
        &mut ws,
        "1",
        "6",
        "lv:phx-t",
        "live_patch",
        json!({"url": "/counter?page=9"}),
    )
    .await;
    assert_eq!(
        expect(&mut ws).await.payload,
        json!({"status": "ok", "response": {}})
    );
    push(
        &mut ws,
        "1",
        "7",
        "lv:phx-t",
        "event",
        json!({"type": "click", "event": "away", "value": {}}),
    )
    .await;
    assert_eq!(
        expect(&mut ws).await.payload["response"],
        json!({"redirect": {"to": "/elsewhere"}})
    );

    // Heartbeats.
    push(&mut ws, "x", "8", "phoenix", "heartbeat", json!({})).await;
    let m = expect(&mut ws).await;
    assert_eq!(
        (m.topic.as_str(), m.payload["status"].as_str()),
        ("phoenix", Some("ok"))
    );

    let stats = live.stats();
    assert_eq!(
        (stats.sockets_open, stats.views_open, stats.joins),
        (1, 1, 1)
    );
    assert_eq!(stats.diffs, 4);
    // The same by page: the diffs were {"0":"1"}, {"1":"Ada &lt;b&gt;"}, {"2":"2"}, {"2":"9"}.
    let [view] = &stats.views[..] else {
        panic!("one page: {:?}", stats.views)
    };
    assert_eq!(
        (view.path.as_str(), view.views_open, view.joins),
        ("/counter", 1, 1)
    );
    assert_eq!((view.diffs, view.diff_bytes), (4, 9 + 21 + 9 + 9));
    assert_eq!((view.diff_p50_bytes, view.diff_p99_bytes), (9, 21));
    assert!(view.first_render_bytes > 60, "{view:?}");
    assert!(stats.page_renders >= 1 && stats.rendered_bytes > 0);
    push(&mut ws, "1", "9", "lv:phx-t", "phx_leave", json!({})).await;
    assert_eq!(expect(&mut ws).await.payload["status"], "ok");
    assert_eq!(live.stats().views_open, 0);
    drop(ws);
    s.stop().await;
}

#[tokio::test]
async fn a_broadcast_is_pushed_as_a_diff_to_subscribed_views() {
    let live = live(Limits::default());
    let s = Served::start(&live).await;
    let mut a = joined(&s).await;
    let mut b = joined(&s).await;
    assert_eq!(live.subscribers("news"), 2);
    assert_eq!(live.broadcast("news", Info::new(5i64)), 2);
    for ws in [&mut a, &mut b] {
        let m = expect(ws).await;
        assert_eq!((m.event.as_str(), m.msg_ref.as_deref()), ("diff", None));
        assert_eq!(m.join_ref.as_deref(), Some("1"));
        assert_eq!(m.payload, json!({"0": "5"}));
    }
    // A message the view ignores sends nothing; the next one still arrives.
    live.broadcast("news", Info::new("ignored"));
    live.broadcast("news", Info::new(1i64));
    assert_eq!(expect(&mut a).await.payload, json!({"0": "6"}));
    drop(a);
    // The closed socket's view unsubscribes.
    let gone = tokio::time::timeout(WAIT, async {
        while live.subscribers("news") != 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    gone.await.expect("the closed view unsubscribes");
    drop(b);
    s.stop().await;
}

#[tokio::test]
async fn one_clients_event_can_update_every_subscribed_page() {
    let live = live(Limits::default());
    let s = Served::start(&live).await;
    let mut a = joined(&s).await;
    let mut b = joined(&s).await;
    let click = json!({"type": "click", "event": "shout", "value": {}});
    push(&mut a, "1", "2", "lv:phx-t", "event", click).await;
    // The sender's reply (its handler changed nothing itself), then the broadcast's diff.
    assert_eq!(
        expect(&mut a).await.payload,
        json!({"status": "ok", "response": {}})
    );
    assert_eq!(expect(&mut a).await.payload, json!({"0": "100"}));
    let m = expect(&mut b).await;
    assert_eq!(
        (m.event.as_str(), m.payload.clone()),
        ("diff", json!({"0": "100"}))
    );
    assert_eq!(live.stats().broadcasts, 1);
    drop((a, b));
    s.stop().await;
}

#[tokio::test]
async fn a_crashing_handler_drops_its_view_with_phx_error_and_the_socket_lives_on() {
    let live = live(Limits::default());
    let s = Served::start(&live).await;
    let (session, _) = tokens(s.addr, "/counter").await;
    let mut ws = joined(&s).await;
    push(
        &mut ws,
        "1",
        "2",
        "lv:phx-t",
        "event",
        json!({"type": "click", "event": "boom", "value": {}}),
    )
    .await;
    let m = expect(&mut ws).await;
    assert_eq!(
        (m.event.as_str(), m.topic.as_str()),
        ("phx_error", "lv:phx-t")
    );
    assert_eq!(live.stats().crashes, 1);
    // The view is gone: its events are unmatched, and a rejoin mounts it afresh.
    push(
        &mut ws,
        "1",
        "3",
        "lv:phx-t",
        "event",
        json!({"type": "click", "event": "inc", "value": {}}),
    )
    .await;
    let m = expect(&mut ws).await;
    assert_eq!(
        m.payload,
        json!({"status": "error", "response": {"reason": "unmatched topic"}})
    );
    assert_eq!(
        join(&mut ws, s.addr, "/counter", &session).await.payload["status"],
        "ok"
    );
    drop(ws);
    s.stop().await;
}

#[tokio::test]
async fn joins_are_refused_with_the_reasons_the_client_acts_on() {
    let live = live(Limits::default());
    let s = Served::start(&live).await;
    let (session, csrf) = tokens(s.addr, "/counter").await;
    let mut ws = connect(s.addr, &csrf, None).await.unwrap();
    // A forged or tampered session: "stale" (the client reloads the page).
    let mut tampered = session.clone();
    tampered.insert(
        3,
        if tampered.as_bytes()[3] == b'A' {
            'B'
        } else {
            'A'
        },
    );
    for bad in [json!("nonsense"), json!(tampered), json!(null), json!(7)] {
        let payload = json!({"url": format!("http://{}/counter", s.addr), "session": bad});
        push(&mut ws, "1", "1", "lv:phx-t", "phx_join", payload).await;
        assert_eq!(expect(&mut ws).await.payload["response"]["reason"], "stale");
    }
    // No view at the URL: "unauthorized" (the client loads the URL as a page).
    for url in ["http://h/nowhere", "", "/counter/x"] {
        let payload = json!({"url": url, "session": session});
        push(&mut ws, "1", "1", "lv:phx-t", "phx_join", payload).await;
        assert_eq!(
            expect(&mut ws).await.payload["response"]["reason"],
            "unauthorized"
        );
    }
    // A topic that is not a live view's.
    push(&mut ws, "1", "1", "room:1", "phx_join", json!({})).await;
    assert_eq!(
        expect(&mut ws).await.payload["response"]["reason"],
        "unmatched topic"
    );
    // The redirect key of a live navigation works as the url does.
    let payload = json!({"redirect": format!("http://{}/counter", s.addr), "session": session});
    push(&mut ws, "1", "1", "lv:phx-t", "phx_join", payload).await;
    assert_eq!(expect(&mut ws).await.payload["status"], "ok");
    assert_eq!(live.stats().joins_refused, 7);
    drop(ws);
    s.stop().await;
}

#[tokio::test]
async fn sockets_need_a_csrf_token_from_a_page_and_their_own_origin() {
    let live = live(Limits::default());
    let s = Served::start(&live).await;
    let (_, csrf) = tokens(s.addr, "/counter").await;
    let status = |e: tokio_tungstenite::tungstenite::Error| match e {
        tokio_tungstenite::tungstenite::Error::Http(r) => r.status().as_u16(),
        other => panic!("expected an HTTP refusal, got {other}"),
    };
    assert_eq!(status(connect(s.addr, "", None).await.unwrap_err()), 403);
    // A token that does not verify (forged, or from before a restart with another secret)
    // opens the socket, but its joins are "stale", on which the JS client reloads the page:
    // refused at the handshake, the client would retry the same token forever.
    let (session, _) = tokens(s.addr, "/counter").await;
    let other = galleon_live::Signer::new(&[9u8; 32]).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Signed right, with the salt the mount uses, under another secret.
    let foreign = other.sign("galleon-live csrf", b"", now);
    for bad in ["forged.token", foreign.as_str()] {
        let mut ws = connect(s.addr, bad, None).await.unwrap();
        let reply = join(&mut ws, s.addr, "/counter", &session).await;
        assert_eq!(reply.payload["response"]["reason"], "stale", "{reply:?}");
    }
    assert_eq!(live.stats().joins_refused, 2);
    let evil = connect(s.addr, &csrf, Some("http://evil.example")).await;
    assert_eq!(status(evil.unwrap_err()), 403);
    assert!(
        connect(s.addr, &csrf, Some(&format!("http://{}", s.addr)))
            .await
            .is_ok()
    );
    // Only the v2 serializer: v1's JSON objects are refused at the handshake.
    let url = format!(
        "ws://{}/live/websocket?_csrf_token={csrf}&vsn=1.0.0",
        s.addr
    );
    let tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let v1 = tokio_tungstenite::client_async(url, tcp).await.map(|_| ());
    assert_eq!(status(v1.unwrap_err()), 400);
    // A plain GET of the socket's path says what it is.
    let (code, _, body) = get(s.addr, "/live/websocket", &[]).await;
    assert_eq!(code, 426, "{body}");
    let (code, _, _) = get(s.addr, "/live/assets/phoenix.min.js", &[]).await;
    assert_eq!(code, 200);
    let (code, _, body) = get(s.addr, "/live/assets/app.js", &[]).await;
    assert_eq!(code, 200);
    assert!(body.contains("LiveView.LiveSocket(\"/live\""), "{body}");
    assert_eq!(
        get(s.addr, "/live/assets/..%2FCargo.toml", &[]).await.0,
        404
    );
    assert_eq!(live.stats().sockets_refused, 2);
    s.stop().await;
}

#[tokio::test]
async fn frames_that_are_not_channel_messages_close_the_socket_with_a_reason() {
    let live = live(Limits {
        max_message_bytes: 1024,
        ..Limits::default()
    });
    let s = Served::start(&live).await;
    for (frame, code) in [
        ("not json".to_owned(), 1008),
        ("{\"a\":1}".to_owned(), 1008),
        ("[1,2,3]".to_owned(), 1008),
        (
            format!(
                "[null,null,\"phoenix\",\"heartbeat\",\"{}\"]",
                "x".repeat(2000)
            ),
            1009,
        ),
    ] {
        let mut ws = joined(&s).await;
        send(&mut ws, &frame).await;
        assert_eq!(
            expect_close(&mut ws).await,
            code,
            "{}",
            &frame[..20.min(frame.len())]
        );
    }
    let mut ws = joined(&s).await;
    ws.send_binary().await;
    assert_eq!(expect_close(&mut ws).await, 1003);
    // Every socket's view is gone.
    assert_eq!(live.stats().views_open, 0);
    s.stop().await;
}

trait SendBinary {
    async fn send_binary(&mut self);
}

impl SendBinary for common::serve::Ws {
    async fn send_binary(&mut self) {
        use futures::SinkExt;
        self.send(tokio_tungstenite::tungstenite::Message::binary(vec![
            1, 2, 3,
        ]))
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn events_past_the_burst_are_refused_and_heartbeats_never_are() {
    let live = live(Limits {
        events_per_second: 0,
        event_burst: 3,
        ..Limits::default()
    });
    let s = Served::start(&live).await;
    let mut ws = joined(&s).await; // The join took one token.
    for i in 0..2 {
        push(
            &mut ws,
            "1",
            &format!("e{i}"),
            "lv:phx-t",
            "event",
            json!({"type": "click", "event": "inc", "value": {}}),
        )
        .await;
        assert_eq!(expect(&mut ws).await.payload["status"], "ok");
    }
    push(
        &mut ws,
        "1",
        "e3",
        "lv:phx-t",
        "event",
        json!({"type": "click", "event": "inc", "value": {}}),
    )
    .await;
    let m = expect(&mut ws).await;
    assert_eq!(
        m.payload,
        json!({"status": "error", "response": {"reason": "rate limited"}})
    );
    push(&mut ws, "x", "h", "phoenix", "heartbeat", json!({})).await;
    assert_eq!(expect(&mut ws).await.payload["status"], "ok");
    assert_eq!(live.stats().events_limited, 1);
    drop(ws);
    s.stop().await;
}

#[tokio::test]
async fn views_and_sockets_past_their_limits_are_refused() {
    let live = live(Limits {
        max_connections: 1,
        max_views_per_socket: 1,
        ..Limits::default()
    });
    let s = Served::start(&live).await;
    let (session, csrf) = tokens(s.addr, "/counter").await;
    let mut ws = joined(&s).await;
    let payload = json!({"url": format!("http://{}/counter", s.addr), "session": session});
    push(&mut ws, "1", "1", "lv:phx-other", "phx_join", payload).await;
    let m = expect(&mut ws).await;
    assert_eq!(
        m.payload["response"]["reason"],
        "too many views on one socket"
    );
    match connect(s.addr, &csrf, None).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 503),
        other => panic!("expected 503, got {other:?}"),
    }
    drop(ws);
    // The place comes back when the socket closes.
    let again = tokio::time::timeout(WAIT, async {
        loop {
            if connect(s.addr, &csrf, None).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    again.await.expect("a socket opens once the first closed");
    s.stop().await;
}

#[tokio::test]
async fn a_socket_that_never_joins_or_goes_quiet_is_closed() {
    let live = live(Limits {
        join_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(600),
        ..Limits::default()
    });
    let s = Served::start(&live).await;
    let (_, csrf) = tokens(s.addr, "/counter").await;
    let mut ws = connect(s.addr, &csrf, None).await.unwrap();
    // Heartbeats alone do not count as joining.
    push(&mut ws, "x", "h", "phoenix", "heartbeat", json!({})).await;
    expect(&mut ws).await;
    assert_eq!(expect_close(&mut ws).await, 1008);
    let mut ws = joined(&s).await;
    assert_eq!(expect_close(&mut ws).await, 1008);
    s.stop().await;
}

#[tokio::test]
async fn shutting_down_closes_live_sockets_with_going_away() {
    let live = live(Limits::default());
    let s = Served::start(&live).await;
    let mut ws = joined(&s).await;
    let stopping = tokio::spawn(s.stop());
    assert_eq!(expect_close(&mut ws).await, 1001);
    drop(ws);
    stopping.await.unwrap();
    // Nothing is left open.
    assert_eq!(live.stats().sockets_open, 0);
    let _ = next;
}

#[test]
fn a_mount_refuses_bad_paths_and_templates_at_build() {
    let engine = Engine::builder()
        .live(true)
        .from_source("counter", TEMPLATE)
        .unwrap();
    let build = |path: &str, template: &str| {
        Live::builder(&engine)
            .view(path, template, || Counter)
            .build()
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert!(build("/c", "counter").is_ok());
    assert!(
        build("c", "counter")
            .unwrap_err()
            .contains("must start with /")
    );
    assert!(build("/c/", "counter").is_err());
    assert!(build("/live/c", "counter").is_ok());
    for taken in ["/live/websocket", "/live/assets", "/live/assets/app.js"] {
        assert!(
            build(taken, "counter").unwrap_err().contains("taken by"),
            "{taken}"
        );
    }
    assert!(build("/c", "missing").unwrap_err().contains("/c"));
    let not_live = Engine::builder().from_source("counter", TEMPLATE).unwrap();
    let e = Live::builder(&not_live)
        .view("/c", "counter", || Counter)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("live"), "{e}");
    let twice = Live::builder(&engine)
        .view("/c", "counter", || Counter)
        .view("/c", "counter", || Counter)
        .build();
    assert!(twice.unwrap_err().to_string().contains("two views"));
}
