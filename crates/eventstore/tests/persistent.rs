//! Persistent subscriptions on both backends: resumed exactly after the last ack when the store
//! is opened again, and their lifecycle
//! (their HTTP answers are galleon-eventstore-http's tests).

mod support;

use galleon_eventstore::{Error, EventFilter, ExpectedVersion, Store};
use support::{Ctx, collect, event};

on_both_backends!(galleon_eventstore::OpenOptions::default();
    check_resumes_exactly_after_the_last_ack_across_a_restart,
    check_lifecycle_and_errors,
);

/// Ten events of the category among five of another; the consumer handles them, acks the
/// fourth, "crashes" (store dropped) and starts again on a new store handle: delivery resumes
/// at the fifth; a stale ack does not move the checkpoint back; live events follow.
async fn check_resumes_exactly_after_the_last_ack_across_a_restart(ctx: Ctx) {
    let Ctx {
        store,
        url,
        options,
    } = ctx;
    let s = &store;
    let filter = EventFilter::category("invoice").unwrap();
    s.create_subscription("billing", 0, filter.clone())
        .await
        .unwrap();
    for i in 0..15 {
        let stream = if i % 3 == 2 { "other-1" } else { "invoice-1" };
        s.append(stream, ExpectedVersion::Any, vec![event("T", i)])
            .await
            .unwrap();
    }
    let (info, mut sub) = s.consume("billing").await.unwrap();
    assert_eq!(info.checkpoint, 0);
    let got = collect(&mut sub, 10).await;
    assert!(got.iter().all(|e| e.stream_id == "invoice-1"));
    assert_eq!(
        s.ack("billing", got[3].position).await.unwrap(),
        got[3].position + 1
    );
    // An older ack (a slow duplicate) keeps the checkpoint.
    assert_eq!(
        s.ack("billing", got[1].position).await.unwrap(),
        got[3].position + 1
    );
    drop(sub);
    drop(store);

    let s = Store::open_with(&url, options).await.unwrap();
    let (info, mut sub) = s.consume("billing").await.unwrap();
    assert_eq!(info.checkpoint, got[3].position + 1);
    let again = collect(&mut sub, 6).await;
    let ids = |v: &[galleon_eventstore::RecordedEvent]| v.iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(
        ids(&again),
        ids(&got[4..]),
        "exactly the unacknowledged events, in order"
    );
    let live = event("T", 99);
    s.append("invoice-2", ExpectedVersion::NoStream, vec![live.clone()])
        .await
        .unwrap();
    assert_eq!(collect(&mut sub, 1).await[0].id, live.id);
}

async fn check_lifecycle_and_errors(ctx: Ctx) {
    let s = &ctx.store;
    let f = EventFilter::all().with_types(["A"]).unwrap();
    let created = s.create_subscription("p.1", 7, f.clone()).await.unwrap();
    assert_eq!((created.checkpoint, &created.filter), (7, &f));
    s.ack("p.1", 41).await.unwrap();
    // Created again with the same filter: unchanged, checkpoint kept.
    let again = s.create_subscription("p.1", 0, f.clone()).await.unwrap();
    assert_eq!(again.checkpoint, 42);
    assert_eq!(again.created_at, created.created_at);
    // Another filter under the same name is a conflict.
    let other = EventFilter::all().with_types(["B"]).unwrap();
    assert!(matches!(
        s.create_subscription("p.1", 0, other).await,
        Err(Error::SubscriptionExists(_))
    ));
    // From the head: only events not yet readable (on PostgreSQL an event is readable once
    // every older transaction of the cluster ended, so wait for the first to be).
    s.append("x-1", ExpectedVersion::Any, vec![event("A", 0)])
        .await
        .unwrap();
    collect(&mut s.subscribe_all(0), 1).await;
    let head = s.head_position().await.unwrap();
    s.create_subscription("p-2", head, EventFilter::all())
        .await
        .unwrap();
    let fresh = event("A", 1);
    s.append("x-1", ExpectedVersion::Any, vec![fresh.clone()])
        .await
        .unwrap();
    let (_, mut sub) = s.consume("p-2").await.unwrap();
    assert_eq!(collect(&mut sub, 1).await[0].id, fresh.id);
    let names: Vec<String> = s
        .list_subscriptions()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["p-2", "p.1"]);
    s.delete_subscription("p.1").await.unwrap();
    for r in [
        s.delete_subscription("p.1").await.err(),
        s.subscription_info("p.1").await.err(),
        s.ack("p.1", 1).await.err(),
        s.consume("p.1").await.err(),
    ] {
        assert!(matches!(r, Some(Error::SubscriptionNotFound(_))), "{r:?}");
    }
    for bad in ["", "a b", "a/b", &"x".repeat(101)] {
        assert!(matches!(
            s.create_subscription(bad, 0, EventFilter::all()).await,
            Err(Error::InvalidInput(_))
        ));
    }
}
