//! Broadcast topics: views subscribe by name ([`Socket::subscribe`](crate::Socket::subscribe)),
//! `Live::broadcast` hands a message to each subscriber's socket inbox. An inbox that is full
//! (a socket too slow to keep up) is not waited for: its socket is told it lagged and closes,
//! and its client rejoins with a fresh render, so no view goes on showing a state it missed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, mpsc};

use crate::view::Info;

/// Messages one socket's inbox holds before its socket counts as lagging.
pub(crate) const INBOX_CAPACITY: usize = 256;

/// A message for one view of a socket.
#[derive(Debug)]
pub(crate) struct Delivery {
    /// The view's channel topic (`lv:phx-...`).
    pub(crate) view: Arc<str>,
    pub(crate) info: Info,
}

/// The sending side of one socket's inbox.
#[derive(Clone, Debug)]
pub(crate) struct Inbox {
    tx: mpsc::Sender<Delivery>,
    lagged: Arc<Lagged>,
}

/// Set, and its waiter woken, when a delivery to the socket found its inbox full.
#[derive(Debug, Default)]
pub(crate) struct Lagged {
    set: AtomicBool,
    notify: Notify,
}

impl Lagged {
    /// Completes once a delivery was dropped for want of room.
    pub(crate) async fn wait(&self) {
        loop {
            let woken = self.notify.notified();
            if self.set.load(Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }

    fn mark(&self) {
        self.set.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

impl Inbox {
    /// A new inbox: its sender, its receiver, and the lag flag the socket waits on.
    pub(crate) fn new() -> (Inbox, mpsc::Receiver<Delivery>, Arc<Lagged>) {
        let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
        let lagged = Arc::new(Lagged::default());
        (
            Inbox {
                tx,
                lagged: Arc::clone(&lagged),
            },
            rx,
            lagged,
        )
    }
}

struct Subscriber {
    socket: u64,
    view: Arc<str>,
    inbox: Inbox,
}

/// Topic name → the views subscribed to it.
#[derive(Default)]
pub(crate) struct PubSub {
    topics: Mutex<HashMap<String, Vec<Subscriber>>>,
}

impl std::fmt::Debug for PubSub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PubSub")
            .field("topics", &self.lock().len())
            .finish()
    }
}

impl PubSub {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<Subscriber>>> {
        // A panic while holding the lock leaves the map whole (every change is one push or
        // one retain), so a poisoned lock is still good to use.
        self.topics.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscribes view `view` of socket `socket` to `topic` (once, however often asked).
    pub(crate) fn subscribe(&self, topic: &str, socket: u64, view: &Arc<str>, inbox: &Inbox) {
        let mut topics = self.lock();
        let subs = topics.entry(topic.to_owned()).or_default();
        if !subs.iter().any(|s| s.socket == socket && s.view == *view) {
            subs.push(Subscriber {
                socket,
                view: Arc::clone(view),
                inbox: inbox.clone(),
            });
        }
    }

    /// Ends view `view`'s subscription to `topic`.
    pub(crate) fn unsubscribe(&self, topic: &str, socket: u64, view: &str) {
        let mut topics = self.lock();
        if let Some(subs) = topics.get_mut(topic) {
            subs.retain(|s| !(s.socket == socket && &*s.view == view));
            if subs.is_empty() {
                topics.remove(topic);
            }
        }
    }

    /// Hands `info` to every view subscribed to `topic`; returns how many were handed it.
    pub(crate) fn broadcast(&self, topic: &str, info: &Info) -> usize {
        let topics = self.lock();
        let Some(subs) = topics.get(topic) else {
            return 0;
        };
        let mut handed = 0;
        for s in subs {
            let d = Delivery {
                view: Arc::clone(&s.view),
                info: info.clone(),
            };
            match s.inbox.tx.try_send(d) {
                Ok(()) => handed += 1,
                Err(mpsc::error::TrySendError::Full(_)) => s.inbox.lagged.mark(),
                // The socket is closing; it unsubscribes on its way out.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        handed
    }

    /// How many views are subscribed to `topic`.
    pub(crate) fn subscribers(&self, topic: &str) -> usize {
        self.lock().get(topic).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_broadcast_reaches_each_subscribed_view_once() {
        let ps = PubSub::default();
        let (a, mut ra, _) = Inbox::new();
        let (b, mut rb, _) = Inbox::new();
        let (va, vb): (Arc<str>, Arc<str>) = ("lv:a".into(), "lv:b".into());
        ps.subscribe("orders", 1, &va, &a);
        ps.subscribe("orders", 1, &va, &a);
        ps.subscribe("orders", 2, &vb, &b);
        assert_eq!(ps.subscribers("orders"), 2);
        assert_eq!(ps.broadcast("orders", &Info::new(7u32)), 2);
        assert_eq!(ps.broadcast("other", &Info::new(7u32)), 0);
        let d = ra.recv().await.unwrap();
        assert_eq!(&*d.view, "lv:a");
        assert_eq!(d.info.downcast_ref::<u32>(), Some(&7));
        assert!(ra.try_recv().is_err(), "one delivery, not two");
        assert_eq!(&*rb.recv().await.unwrap().view, "lv:b");
        ps.unsubscribe("orders", 1, "lv:a");
        assert_eq!(ps.broadcast("orders", &Info::new(8u32)), 1);
        ps.unsubscribe("orders", 2, "lv:b");
        assert_eq!(ps.subscribers("orders"), 0);
    }

    #[tokio::test]
    async fn a_full_inbox_marks_its_socket_lagged_and_blocks_nobody() {
        let ps = PubSub::default();
        let (slow, _keep, lagged) = Inbox::new();
        let v: Arc<str> = "lv:x".into();
        ps.subscribe("t", 1, &v, &slow);
        for _ in 0..INBOX_CAPACITY {
            assert_eq!(ps.broadcast("t", &Info::new(())), 1);
        }
        assert_eq!(ps.broadcast("t", &Info::new(())), 0);
        // Returns at once: the flag is set.
        tokio::time::timeout(std::time::Duration::from_secs(5), lagged.wait())
            .await
            .expect("the socket is told it lagged");
    }
}
