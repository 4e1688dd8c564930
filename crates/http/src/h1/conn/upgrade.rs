//! Upgrading a connection after `101 Switching Protocols` ([`Response::upgrade`]): the head is
//! written and the exchange reported as any other, then the socket, the bytes read past the
//! request and the shutdown signal go to the handler's callback, which runs on this task.

use tokio::io::AsyncWriteExt;

use super::{Conn, Pending};
use crate::response::{Response, StatusCode};
use crate::upgrade::Upgraded;

impl Conn {
    /// Answers an upgrade response: 101 and the hand-over when its request asked for one,
    /// else 500 and close. Either way the connection is done with HTTP afterwards.
    pub(super) async fn upgrade(mut self, p: Pending) {
        let mut resp = p.resp;
        let Some(on) = resp.take_upgrade() else {
            return;
        };
        if !on.asked || p.head_only || p.minor == 0 {
            tracing::error!(
                peer = %self.peer,
                "a handler answered with an upgrade a request that did not ask for one (an \
                 HTTP/1.1 GET with `connection: upgrade` and `upgrade`); sent 500 instead"
            );
            let refused = Response::error(StatusCode::INTERNAL_SERVER_ERROR, "upgrade not asked");
            let written = self
                .write_response(refused, p.head_only, p.minor, false, p.token, p.label)
                .await;
            if let Ok(false) = self.end_exchange(written, p.observed, p.route) {
                self.linger().await;
            }
            return;
        }
        // Keep-alive (`KeepAlive::Default`) so the server adds no `connection` header of its
        // own beside the handler's `connection: upgrade`.
        let written = self
            .write_response(resp, false, 1, true, p.token, p.label)
            .await;
        let written = match written {
            Ok(_) => self.stream.flush().await.map(|()| true),
            Err(e) => Err(e),
        };
        if self.end_exchange(written, p.observed, p.route).is_err() {
            return;
        }
        tracing::debug!(peer = %self.peer, "connection upgraded");
        let Conn {
            stream,
            shutdown,
            buf,
            peer,
            timer,
            ..
        } = self;
        drop(timer);
        // A copy (usually of nothing), so the connection's read buffer is freed now rather
        // than held by a long-lived protocol's read-ahead.
        let read_ahead = bytes::Bytes::copy_from_slice(&buf);
        drop(buf);
        let up = Upgraded {
            stream,
            read_ahead,
            peer,
            shutdown,
        };
        (on.run)(up).await;
    }
}
