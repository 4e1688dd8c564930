//! One socket's side of the Phoenix channel protocol, without the I/O: each text frame from the
//! client becomes the frames to send back (replies, pushes) or the reason to close the socket;
//! each broadcast delivered to a view becomes its pushed diff. Heartbeats, `phx_join` on `lv:`
//! topics (the session token checked, the view found by the URL's path and mounted),
//! `event`, `live_patch` and `phx_leave`; a view whose handler fails is dropped with
//! `phx_error`, and the client rejoins it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::Value as Json;

use crate::assets::LIVE_VIEW_VERSION;
use crate::limits::RateLimiter;
use crate::message::{Message, encode_raw};
use crate::pubsub::{Delivery, Inbox};
use crate::running::{Running, Update};
use crate::shared::{SESSION_SALT, Shared, ViewCounters, now_unix_s};
use crate::view::{Navigation, ViewError};

/// Why the socket closes: a WebSocket close code and its reason (at most 123 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Close {
    pub(crate) code: u16,
    pub(crate) reason: String,
}

impl Close {
    /// 1008, policy violation: the client broke the protocol.
    pub(crate) fn policy(reason: &str) -> Close {
        Close::new(1008, reason)
    }

    pub(crate) fn new(code: u16, reason: &str) -> Close {
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        Close {
            code,
            reason: reason[..end].to_owned(),
        }
    }
}

struct Joined {
    join_ref: Option<String>,
    running: Running,
    topics: Vec<String>,
    counters: Arc<ViewCounters>,
}

/// The views joined on one socket.
pub(crate) struct Conn {
    shared: Arc<Shared>,
    id: u64,
    inbox: Inbox,
    views: HashMap<Arc<str>, Joined>,
    limiter: RateLimiter,
    /// The socket's CSRF token did not verify: every join is refused as stale.
    stale: bool,
}

impl Conn {
    /// The state of socket `id`, whose views' broadcasts go to `inbox`; `stale`: its CSRF
    /// token did not verify, so no view joins on it.
    pub(crate) fn new(shared: Arc<Shared>, id: u64, inbox: Inbox, stale: bool) -> Conn {
        let l = &shared.limits;
        let limiter = RateLimiter::new(l.events_per_second, l.event_burst);
        Conn {
            shared,
            id,
            inbox,
            views: HashMap::new(),
            limiter,
            stale,
        }
    }

    /// Views joined now.
    pub(crate) fn views(&self) -> usize {
        self.views.len()
    }

    /// Handles one text frame received at `now`, appending the frames to send to `out`.
    ///
    /// # Errors
    ///
    /// The [`Close`] to send when the frame is not a channel message.
    pub(crate) fn text(
        &mut self,
        text: &str,
        now: Instant,
        out: &mut Vec<String>,
    ) -> Result<(), Close> {
        let m = Message::decode(text).map_err(|e| Close::policy(&format!("bad message: {e}")))?;
        if m.topic == "phoenix" && m.event == "heartbeat" {
            out.push(reply(&m, "ok", "{}"));
            return Ok(());
        }
        if !self.limiter.allow(now) {
            self.shared
                .counters
                .events_limited
                .fetch_add(1, Ordering::Relaxed);
            out.push(error_reply(&m, "rate limited"));
            return Ok(());
        }
        match m.event.as_str() {
            "phx_join" => self.join(&m, out),
            "phx_leave" => {
                self.leave(&m.topic);
                out.push(reply(&m, "ok", "{}"));
            }
            "event" | "live_patch" => self.handle(&m, out),
            _ if self.views.contains_key(m.topic.as_str()) => {
                out.push(error_reply(&m, "unsupported event"));
            }
            _ => out.push(error_reply(&m, "unmatched topic")),
        }
        Ok(())
    }

    /// A broadcast for one of this socket's views: its diff and navigation pushed.
    pub(crate) fn deliver(&mut self, d: Delivery, out: &mut Vec<String>) {
        let Some(joined) = self.views.get_mut(&*d.view) else {
            return; // Left since the broadcast.
        };
        match joined.running.info(d.info) {
            Ok(u) => {
                let (topic, join_ref) = (&*d.view, joined.join_ref.as_deref());
                if let Some(diff) = &u.diff {
                    self.shared.counters.diff(diff.len());
                    joined.counters.diff(diff.len());
                    out.push(encode_raw(join_ref, None, topic, "diff", diff));
                }
                if let Some(nav) = &u.navigation {
                    let (event, payload) = navigation(nav);
                    out.push(encode_raw(join_ref, None, topic, event, &payload));
                }
                self.subscribe(&d.view);
            }
            Err(e) => self.crash(&d.view, &e, out),
        }
    }

    fn join(&mut self, m: &Message, out: &mut Vec<String>) {
        let shared = Arc::clone(&self.shared);
        let counters = &shared.counters;
        if !m.topic.starts_with("lv:") {
            out.push(error_reply(m, "unmatched topic"));
            return;
        }
        // A second join of a topic replaces the first, as a Phoenix channel does.
        self.leave(&m.topic);
        if self.views.len() >= self.shared.limits.max_views_per_socket {
            counters.joins_refused.fetch_add(1, Ordering::Relaxed);
            out.push(error_reply(m, "too many views on one socket"));
            return;
        }
        let session = if self.stale {
            None
        } else {
            self.session(&m.payload)
        };
        let Some(session) = session else {
            counters.joins_refused.fetch_add(1, Ordering::Relaxed);
            // The client reloads the page, which brings a fresh token.
            out.push(error_reply(m, "stale"));
            return;
        };
        let url = ["url", "redirect"]
            .iter()
            .find_map(|k| m.payload.get(k).and_then(Json::as_str))
            .unwrap_or("");
        let Some(route) = shared.routes.get(path_of(url)) else {
            counters.joins_refused.fetch_add(1, Ordering::Relaxed);
            // The client falls back to loading the URL as a page.
            out.push(error_reply(m, "unauthorized"));
            return;
        };
        let mounted = Running::mount(
            (route.factory)(),
            route.template.clone(),
            url,
            &session,
            true,
        )
        .and_then(|mut r| r.rendered().map(|json| (r, json)));
        let (running, rendered) = match mounted {
            Ok(ok) => ok,
            Err(e) => {
                counters.crashes.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(topic = %m.topic, error = %e, "live view failed to mount");
                // Not a reason the client knows: it retries the join a few times, then shows
                // the error state.
                out.push(error_reply(m, "join crashed"));
                return;
            }
        };
        counters.joins.fetch_add(1, Ordering::Relaxed);
        counters.views_open.fetch_add(1, Ordering::Relaxed);
        counters
            .rendered_bytes
            .fetch_add(rendered.len() as u64, Ordering::Relaxed);
        let view = Arc::clone(&route.counters);
        view.joins.fetch_add(1, Ordering::Relaxed);
        view.views_open.fetch_add(1, Ordering::Relaxed);
        view.rendered_bytes
            .fetch_add(rendered.len() as u64, Ordering::Relaxed);
        let response =
            format!(r#"{{"rendered":{rendered},"liveview_version":"{LIVE_VIEW_VERSION}"}}"#);
        out.push(reply(m, "ok", &response));
        let topic: Arc<str> = m.topic.as_str().into();
        self.views.insert(
            Arc::clone(&topic),
            Joined {
                join_ref: m.join_ref.clone(),
                running,
                topics: Vec::new(),
                counters: view,
            },
        );
        self.subscribe(&topic);
    }

    /// The session in a join's signed token, if it verifies.
    fn session(&self, payload: &Json) -> Option<Json> {
        let token = payload.get("session")?.as_str()?;
        let max_age = self.shared.limits.token_max_age.as_secs();
        let bytes = self
            .shared
            .signer
            .verify(SESSION_SALT, token, max_age, now_unix_s())
            .ok()?;
        let mut v: Json = serde_json::from_slice(&bytes).ok()?;
        Some(v.get_mut("s").map(Json::take).unwrap_or(Json::Null))
    }

    /// `event` and `live_patch` on a joined view.
    fn handle(&mut self, m: &Message, out: &mut Vec<String>) {
        let Some(joined) = self.views.get_mut(m.topic.as_str()) else {
            out.push(error_reply(m, "unmatched topic"));
            return;
        };
        let result = if m.event == "live_patch" {
            let Some(url) = m.payload.get("url").and_then(Json::as_str) else {
                out.push(error_reply(m, "live_patch needs a url"));
                return;
            };
            joined.running.patch(url)
        } else {
            let p = &m.payload;
            let Some(event) = p.get("event").and_then(Json::as_str) else {
                out.push(error_reply(m, "an event needs a name"));
                return;
            };
            self.shared.counters.events.fetch_add(1, Ordering::Relaxed);
            let kind = p.get("type").and_then(Json::as_str).unwrap_or("");
            let value = p.get("value").unwrap_or(&Json::Null);
            joined.running.event(kind, event, value, p.get("meta"))
        };
        match result {
            Ok(u) => {
                out.push(reply(m, "ok", &self.response(&m.topic, &u)));
                let topic: Arc<str> = m.topic.as_str().into();
                self.subscribe(&topic);
            }
            Err(e) => {
                let topic: Arc<str> = m.topic.as_str().into();
                self.crash(&topic, &e, out);
            }
        }
    }

    /// An event's reply to view `topic`: `{"diff": ..}` and where to go.
    fn response(&self, topic: &str, u: &Update) -> String {
        let mut r = String::from("{");
        if let Some(diff) = &u.diff {
            self.shared.counters.diff(diff.len());
            if let Some(j) = self.views.get(topic) {
                j.counters.diff(diff.len());
            }
            r.push_str("\"diff\":");
            r.push_str(diff);
        }
        if let Some(nav) = &u.navigation {
            if r.len() > 1 {
                r.push(',');
            }
            let (event, payload) = navigation(nav);
            r.push('"');
            r.push_str(event);
            r.push_str("\":");
            r.push_str(&payload);
        }
        r.push('}');
        r
    }

    /// After a handler of view `topic`: registers the topics it subscribed to and sends the
    /// broadcasts it asked for.
    fn subscribe(&mut self, topic: &Arc<str>) {
        let Some(joined) = self.views.get_mut(topic) else {
            return;
        };
        for t in joined.running.take_subscriptions() {
            self.shared
                .pubsub
                .subscribe(&t, self.id, topic, &self.inbox);
            joined.topics.push(t);
        }
        for (t, info) in joined.running.take_broadcasts() {
            self.shared
                .counters
                .broadcasts
                .fetch_add(1, Ordering::Relaxed);
            self.shared.pubsub.broadcast(&t, &info);
        }
    }

    /// Drops view `topic` after its handler failed; the client gets `phx_error` and rejoins.
    fn crash(&mut self, topic: &Arc<str>, e: &ViewError, out: &mut Vec<String>) {
        self.shared.counters.crashes.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(topic = %topic, error = %e, "live view crashed");
        let join_ref = self.views.get(topic).and_then(|j| j.join_ref.clone());
        self.leave(topic);
        out.push(Message::error(join_ref, topic).encode());
    }

    fn leave(&mut self, topic: &str) {
        if let Some(j) = self.views.remove(topic) {
            self.shared
                .counters
                .views_open
                .fetch_sub(1, Ordering::Relaxed);
            j.counters.views_open.fetch_sub(1, Ordering::Relaxed);
            for t in &j.topics {
                self.shared.pubsub.unsubscribe(t, self.id, topic);
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let topics: Vec<Arc<str>> = self.views.keys().cloned().collect();
        for t in topics {
            self.leave(&t);
        }
    }
}

/// A navigation as the client's event name and payload.
fn navigation(nav: &Navigation) -> (&'static str, String) {
    let to = Json::String(match nav {
        Navigation::Patch(to) | Navigation::Navigate(to) | Navigation::Redirect(to) => to.clone(),
    });
    match nav {
        Navigation::Patch(_) => ("live_patch", format!(r#"{{"kind":"push","to":{to}}}"#)),
        Navigation::Navigate(_) => ("live_redirect", format!(r#"{{"kind":"push","to":{to}}}"#)),
        Navigation::Redirect(_) => ("redirect", format!(r#"{{"to":{to}}}"#)),
    }
}

/// `phx_reply` to `m` with `status` and the serialized `response`.
fn reply(m: &Message, status: &str, response: &str) -> String {
    let payload = format!(r#"{{"status":"{status}","response":{response}}}"#);
    encode_raw(
        m.join_ref.as_deref(),
        m.msg_ref.as_deref(),
        &m.topic,
        "phx_reply",
        &payload,
    )
}

/// An error reply with `{"reason": reason}`.
fn error_reply(m: &Message, reason: &str) -> String {
    let response = format!(r#"{{"reason":{}}}"#, Json::String(reason.to_owned()));
    reply(m, "error", &response)
}

/// The path of `url`, absolute (`http://host/p?q`) or not (`/p?q`).
pub(crate) fn path_of(url: &str) -> &str {
    let rest = match url.split_once("://") {
        Some((_, after)) => after.find('/').map_or("/", |i| &after[i..]),
        None => url,
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    &rest[..end]
}
