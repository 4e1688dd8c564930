//! Persistent subscriptions on both backends: resumed exactly after the last ack when the store
//! is opened again, and their lifecycle
//! (their HTTP answers are galleon-eventstore-http's tests).

mod support;

use galleon_eventstore::{Error, EventFilter, ExpectedVersion, Store};
use support::{Ctx, all_events, collect, event};

on_both_backends!(galleon_eventstore::OpenOptions::default();
    check_resumes_exactly_after_the_last_ack_across_a_restart,
    check_lifecycle_and_errors,
    check_acks_name_an_event_the_subscription_delivers,
    check_lists_subscriptions_in_pages,
);

on_both_backends!(galleon_eventstore::OpenOptions {
        max_subscriptions: Some(3),
        ..galleon_eventstore::OpenOptions::default()
    };
    check_subscriptions_past_the_limit_are_refused,
);

/// With `max_subscriptions` 3: a plain subscription and a consumer group count alike; a fourth
/// is [`Error::TooManySubscriptions`] and creates nothing; creating an existing one again is
/// still fine, the existing ones still deliver and take acks; deleting one makes room
/// (issue 35).
async fn check_subscriptions_past_the_limit_are_refused(ctx: Ctx) {
    let s = &ctx.store;
    s.create_subscription("a", 0, EventFilter::all())
        .await
        .unwrap();
    s.create_subscription("b", 0, EventFilter::all())
        .await
        .unwrap();
    s.create_group("g", 0, EventFilter::all(), Default::default())
        .await
        .unwrap();
    for refused in [
        s.create_subscription("d", 0, EventFilter::all()).await,
        s.create_group("h", 0, EventFilter::all(), Default::default())
            .await,
    ] {
        match refused {
            Err(Error::TooManySubscriptions { limit: 3 }) => {}
            other => panic!("expected TooManySubscriptions, got {other:?}"),
        }
    }
    let e = s
        .create_subscription("d", 0, EventFilter::all())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("max_subscriptions"), "{e}");
    assert!(matches!(
        s.subscription_info("d").await,
        Err(Error::SubscriptionNotFound(_))
    ));
    assert_eq!(s.list_subscriptions().await.unwrap().len(), 3);
    // The existing ones: created again (same filter), consumed, acknowledged.
    s.create_subscription("a", 0, EventFilter::all())
        .await
        .unwrap();
    s.append("x-1", ExpectedVersion::Any, vec![event("A", 1)])
        .await
        .unwrap();
    let (_, mut sub) = s.consume("a").await.unwrap();
    let got = collect(&mut sub, 1).await;
    assert_eq!(
        s.ack("a", got[0].position).await.unwrap(),
        got[0].position + 1
    );
    s.delete_subscription("b").await.unwrap();
    s.create_subscription("d", 0, EventFilter::all())
        .await
        .unwrap();
}

/// 25 subscriptions, some with names whose byte order differs from a locale's (`-`, `.`, `_`,
/// capitals): pages of 10 give 10, 10 and 5, every name once, in byte order (issue 35).
async fn check_lists_subscriptions_in_pages(ctx: Ctx) {
    let s = &ctx.store;
    let mut names: Vec<String> = (0..21).map(|i| format!("sub-{i:02}")).collect();
    names.extend(["Zed", "_under", "sub.dot", "sub_x"].map(String::from));
    for n in &names {
        s.create_subscription(n, 0, EventFilter::all())
            .await
            .unwrap();
    }
    names.sort();
    let mut after: Option<String> = None;
    let mut got = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let page = s
            .list_subscriptions_page(after.as_deref(), 10)
            .await
            .unwrap();
        sizes.push(page.len());
        got.extend(page.iter().map(|i| i.name.clone()));
        if page.len() < 10 {
            break;
        }
        after = page.last().map(|i| i.name.clone());
    }
    assert_eq!(sizes, [10, 10, 5]);
    assert_eq!(got, names);
    let all: Vec<String> = s
        .list_subscriptions()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(all, names, "the unpaged list in the same order");
    assert!(s.list_subscriptions_page(None, 0).await.unwrap().is_empty());
    let last = s.list_subscriptions_page(Some("zzz"), 10).await.unwrap();
    assert!(last.is_empty());
}

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
    let r = s
        .append(
            "p-1",
            ExpectedVersion::Any,
            (0..10).map(|i| event("A", i)).collect(),
        )
        .await
        .unwrap();
    // Readable (delivered) once `$all` shows it.
    let last = all_events(s, 10).await[9].position;
    assert_eq!(last, r.first_position + 9);
    assert_eq!(s.ack("p.1", last).await.unwrap(), last + 1);
    // Created again with the same filter: unchanged, checkpoint kept.
    let again = s.create_subscription("p.1", 0, f.clone()).await.unwrap();
    assert_eq!(again.checkpoint, last + 1);
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

/// Issue 35: an ack names an event the subscription delivers. Past the head, `u64::MAX`, a
/// position with no event, an event outside the category or of another type are refused and the
/// checkpoint stays; a valid ack, its idempotent repeat and a stale one are fine, and the next
/// events are still delivered after the refusals.
async fn check_acks_name_an_event_the_subscription_delivers(ctx: Ctx) {
    let s = &ctx.store;
    s.create_subscription("inv", 0, EventFilter::category("invoice").unwrap())
        .await
        .unwrap();
    let typed = EventFilter::all().with_types(["A"]).unwrap();
    s.create_subscription("typed", 0, typed).await.unwrap();
    let mine = s
        .append(
            "invoice-1",
            ExpectedVersion::Any,
            vec![event("A", 0), event("A", 1)],
        )
        .await
        .unwrap();
    let other = s
        .append("other-1", ExpectedVersion::Any, vec![event("B", 2)])
        .await
        .unwrap();
    let (_, mut sub) = s.consume("inv").await.unwrap();
    let got = collect(&mut sub, 2).await;
    assert_eq!(got[0].position, mine.first_position);
    let first = got[0].position;
    assert_eq!(s.ack("inv", first).await.unwrap(), first + 1);
    // At least once: the same ack again is fine and changes nothing.
    assert_eq!(s.ack("inv", first).await.unwrap(), first + 1);
    drop(sub);

    let head = s.head_position().await.unwrap();
    for (name, bad, why) in [
        ("inv", head, "the head"),
        ("inv", head + 1000, "past the head"),
        ("inv", u64::MAX, "u64::MAX"),
        ("inv", first + 100_000, "no event there"),
        ("inv", other.first_position, "another category"),
        ("typed", other.first_position, "another type"),
    ] {
        let before = s.subscription_info(name).await.unwrap().checkpoint;
        let r = s.ack(name, bad).await;
        assert!(
            matches!(r, Err(Error::InvalidAck { position, .. }) if position == bad),
            "{why}: the ack of {bad} on {name} was not refused: {r:?}"
        );
        let msg = r.unwrap_err().to_string();
        assert!(msg.contains("expected"), "{why}: {msg}");
        assert_eq!(
            s.subscription_info(name).await.unwrap().checkpoint,
            before,
            "{why}: a refused ack moved the checkpoint"
        );
    }
    assert!(
        s.ack("typed", mine.first_position + 1).await.unwrap() == mine.first_position + 2,
        "a matching type is acknowledged"
    );

    // Delivery goes on after the refusals: the second event, then a live one.
    let (info, mut sub) = s.consume("inv").await.unwrap();
    assert_eq!(info.checkpoint, first + 1);
    assert_eq!(collect(&mut sub, 1).await[0].id, got[1].id);
    let live = event("A", 3);
    s.append("invoice-2", ExpectedVersion::NoStream, vec![live.clone()])
        .await
        .unwrap();
    let next = collect(&mut sub, 1).await;
    assert_eq!(next[0].id, live.id);
    assert_eq!(
        s.ack("inv", next[0].position).await.unwrap(),
        next[0].position + 1
    );
    // A stale ack (below the checkpoint) of a delivered event stays a no-op.
    assert_eq!(s.ack("inv", first).await.unwrap(), next[0].position + 1);
}
