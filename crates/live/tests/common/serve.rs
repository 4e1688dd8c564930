//! A live mount served on 127.0.0.1 for the socket tests, and the client side of the protocol:
//! fetching a page for its tokens, opening the socket, sending and awaiting channel frames.

use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use galleon_http::{Router, Server, ServerConfig};
use galleon_live::{Live, Message};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

/// How long any one wait of a test lasts before it fails.
pub const WAIT: Duration = Duration::from_secs(20);

/// A server running `live` (and `/plain`, an ordinary page) until dropped or stopped.
pub struct Served {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<()>>,
}

impl Served {
    pub async fn start(live: &Live) -> Served {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = live.mount(Router::new());
        let (stop, stopped) = oneshot::channel::<()>();
        let mut config = ServerConfig::default();
        config.shutdown_grace = Duration::from_secs(5);
        let done = tokio::spawn(async move {
            Server::new(router, config)
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Served {
            addr,
            stop: Some(stop),
            done: Some(done),
        }
    }

    /// Starts shutting the server down and waits until it has.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(WAIT, self.done.take().unwrap())
            .await
            .expect("the server stops")
            .unwrap();
    }
}

/// A plain HTTP/1.1 GET: status, head, body.
pub async fn get(
    addr: SocketAddr,
    target: &str,
    headers: &[(&str, &str)],
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("GET {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head[9..12].parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

/// The value of attribute `attr` in `html`'s first element that has it.
pub fn attr(html: &str, attr: &str) -> String {
    let key = format!("{attr}=\"");
    let start = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {attr} in {html}"))
        + key.len();
    html[start..][..html[start..].find('"').unwrap()].to_owned()
}

/// A page's tokens: (session, csrf).
pub async fn tokens(addr: SocketAddr, path: &str) -> (String, String) {
    let (status, _, body) = get(addr, path, &[]).await;
    assert_eq!(status, 200, "{body}");
    (attr(&body, "data-phx-session"), csrf(&body))
}

/// The CSRF token of a page's `csrf-token` meta.
pub fn csrf(html: &str) -> String {
    let at = html.find("name=\"csrf-token\"").expect("a csrf-token meta");
    attr(&html[at..], "content")
}

pub type Ws = WebSocketStream<TcpStream>;

/// Opens the live socket as the JS client does (`?_csrf_token=..&vsn=2.0.0`), with `origin`.
pub async fn connect(addr: SocketAddr, csrf: &str, origin: Option<&str>) -> Result<Ws, WsError> {
    let url = format!("ws://{addr}/live/websocket?_csrf_token={csrf}&vsn=2.0.0");
    let mut req = url.into_client_request().unwrap();
    if let Some(o) = origin {
        req.headers_mut().insert("origin", o.parse().unwrap());
    }
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, _) = tokio_tungstenite::client_async(req, tcp).await?;
    Ok(ws)
}

/// Sends one text frame.
pub async fn send(ws: &mut Ws, text: &str) {
    ws.send(WsMessage::text(text)).await.unwrap();
}

/// Sends `[join_ref, ref, topic, event, payload]`.
pub async fn push(
    ws: &mut Ws,
    join_ref: &str,
    msg_ref: &str,
    topic: &str,
    event: &str,
    payload: Value,
) {
    let m = Message {
        join_ref: Some(join_ref.into()),
        msg_ref: Some(msg_ref.into()),
        topic: topic.into(),
        event: event.into(),
        payload,
    };
    send(ws, &m.encode()).await;
}

/// What the server sent next: a channel message, or the close frame (`Err`), or `Err(None)`
/// when the socket ended without one.
pub async fn next(ws: &mut Ws) -> Result<Message, Option<CloseFrame>> {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame within the wait");
        match frame {
            Some(Ok(WsMessage::Text(t))) => return Ok(Message::decode(&t).unwrap()),
            Some(Ok(WsMessage::Close(c))) => return Err(c),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Err(None),
        }
    }
}

/// The next channel message; panics on a close.
pub async fn expect(ws: &mut Ws) -> Message {
    match next(ws).await {
        Ok(m) => m,
        Err(c) => panic!("expected a message, the socket closed: {c:?}"),
    }
}

/// The close code the server ended with.
pub async fn expect_close(ws: &mut Ws) -> u16 {
    loop {
        match next(ws).await {
            Ok(_) => continue,
            Err(Some(c)) => return c.code.into(),
            Err(None) => panic!("the socket ended without a close frame"),
        }
    }
}

/// Joins `path`'s view as topic `lv:phx-t`, returning the reply.
pub async fn join(ws: &mut Ws, addr: SocketAddr, path: &str, session: &str) -> Message {
    let payload = serde_json::json!({
        "url": format!("http://{addr}{path}"),
        "params": {"_csrf_token": "x", "_mounts": 0},
        "session": session,
        "static": "",
        "sticky": false,
    });
    push(ws, "1", "1", "lv:phx-t", "phx_join", payload).await;
    expect(ws).await
}
