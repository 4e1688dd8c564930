//! Live data from galleon's event store (feature `eventstore`): a task that follows a
//! [`Subscription`] and broadcasts each event to the views subscribed to a topic. On PostgreSQL
//! a subscription sees the appends of every node, through the store's own notifications, so a
//! page held open on one node shows an append made through another.

use futures::StreamExt;
use galleon_eventstore::{RecordedEvent, Subscription};
use tokio::task::JoinHandle;

use crate::server::Live;
use crate::view::Info;

/// Follows `subscription` on a task of the current tokio runtime: each event goes to
/// `on_event` (update a shared read model there), and what it returns is broadcast to the
/// views subscribed to `topic` (`None`: nothing to tell them). The task ends when the
/// subscription does (a permanent store error, logged) or when it is aborted.
///
/// # Examples
///
/// ```no_run
/// # async fn f(live: galleon_live::Live, store: galleon_eventstore::Store) -> anyhow::Result<()> {
/// use galleon_eventstore::EventFilter;
/// use galleon_live::Info;
///
/// // Every append to an `order-*` stream reaches the views that did `subscribe("orders")`.
/// let orders = store.subscribe(0, EventFilter::category("order")?);
/// galleon_live::follow_events(&live, orders, "orders", |e| Some(Info::new(e.clone())));
/// # Ok(()) }
/// ```
pub fn follow_events<F>(
    live: &Live,
    mut subscription: Subscription,
    topic: &str,
    mut on_event: F,
) -> JoinHandle<()>
where
    F: FnMut(&RecordedEvent) -> Option<Info> + Send + 'static,
{
    let (live, topic) = (live.clone(), topic.to_owned());
    tokio::spawn(async move {
        while let Some(next) = subscription.next().await {
            match next {
                Ok(event) => {
                    if let Some(info) = on_event(&event) {
                        live.broadcast(&topic, info);
                    }
                }
                Err(e) => {
                    tracing::error!(topic, error = %e, "live: the event subscription ended");
                    return;
                }
            }
        }
    })
}
