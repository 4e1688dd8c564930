//! Consumers of the store on both backends: the fan-out of live events (one reader, many
//! subscribers, slow ones catching up on their own), filters by category and type against a
//! model, and `recorded_at`.

mod support;

use std::collections::HashSet;

use galleon_eventstore::{
    EventFilter, ExpectedVersion, OpenOptions, RecordedEvent, SUBSCRIPTION_BATCH, TAIL_BATCH_MAX,
    Timestamp, category_of,
};
use support::{Ctx, all_events, collect, event};
use uuid::Uuid;

fn ids(events: &[RecordedEvent]) -> Vec<Uuid> {
    events.iter().map(|e| e.id).collect()
}

/// A ring of one batch: a subscriber that is not polled while others are fed falls behind.
fn tiny_buffer() -> OpenOptions {
    OpenOptions {
        subscriber_buffer: Some(1),
        ..OpenOptions::default()
    }
}

/// The tailer's reads capped at one subscription batch (`OpenOptions::tail_batch_max`).
fn capped_tail() -> OpenOptions {
    OpenOptions {
        tail_batch_max: Some(SUBSCRIPTION_BATCH),
        ..OpenOptions::default()
    }
}

on_both_backends!(super::tiny_buffer(); check_a_slow_subscriber_catches_up_and_rejoins);
on_both_backends!(super::capped_tail(); check_a_capped_tailer_reads_no_more_than_its_cap);
on_both_backends!(galleon_eventstore::OpenOptions::default();
    check_subscribers_share_one_reader,
    check_a_tailer_behind_reads_larger_batches,
    check_a_tailer_reads_a_repeated_burst_at_once,
    check_filters_match_a_model,
    check_every_event_has_recorded_at,
);

/// With a ring of one batch, a subscriber left alone while 30 appends are delivered one by one
/// to another falls behind (the fan-out counts it), reads the store itself, and still gets
/// every event once, in order; then it follows live events again.
async fn check_a_slow_subscriber_catches_up_and_rejoins(ctx: Ctx) {
    let s = &ctx.store;
    s.append("slow-0", ExpectedVersion::Any, vec![event("T", 0)])
        .await
        .unwrap();
    let mut slow = s.subscribe_all(0);
    let mut fast = s.subscribe_all(0);
    // Both have joined the live feed once they got the first event.
    collect(&mut slow, 1).await;
    collect(&mut fast, 1).await;
    let lagged_before = s.fanout_stats().lagged;
    for i in 1..=30 {
        s.append(
            &format!("slow-{i}"),
            ExpectedVersion::Any,
            vec![event("T", i)],
        )
        .await
        .unwrap();
        // One append, one batch: the fast subscriber takes each before the next is published.
        collect(&mut fast, 1).await;
    }
    let got = collect(&mut slow, 30).await;
    let all = all_events(s, 31).await;
    assert_eq!(ids(&got), ids(&all[1..]), "every event once, in order");
    assert!(
        s.fanout_stats().lagged > lagged_before,
        "the slow subscriber fell behind the ring: {:?}",
        s.fanout_stats()
    );
    // Back on the live feed: the next event arrives.
    let r = s
        .append("slow-live", ExpectedVersion::NoStream, vec![event("T", 99)])
        .await
        .unwrap();
    assert_eq!(collect(&mut slow, 1).await[0].position, r.first_position);
    assert_eq!(collect(&mut fast, 1).await[0].position, r.first_position);
}

/// 200 live subscribers: appends reach every one, and none of them reads the store for it (the
/// one reader does).
async fn check_subscribers_share_one_reader(ctx: Ctx) {
    const SUBSCRIBERS: usize = 200;
    let s = &ctx.store;
    let mut subs: Vec<_> = (0..SUBSCRIBERS).map(|_| s.subscribe_all(0)).collect();
    // Two events before counting: joining may take a read of its own after the first (on
    // PostgreSQL the feed starts at the `$all` line, which may lie above the first event).
    for i in 0..2 {
        s.append("share-0", ExpectedVersion::Any, vec![event("T", i)])
            .await
            .unwrap();
        for sub in &mut subs {
            collect(sub, 1).await;
        }
    }
    let stats = s.fanout_stats();
    assert_eq!(stats.live_subscribers, SUBSCRIBERS, "{stats:?}");
    let reads_before = stats.subscriber_reads;
    let mut written = Vec::new();
    for i in 1..=20 {
        let e = event("T", i);
        written.push(e.id);
        s.append("share-1", ExpectedVersion::Any, vec![e])
            .await
            .unwrap();
    }
    for sub in &mut subs {
        assert_eq!(ids(&collect(sub, 20).await), written);
    }
    assert_eq!(
        s.fanout_stats().subscriber_reads,
        reads_before,
        "live subscribers read nothing themselves"
    );
    drop(subs);
}

/// Appends a burst of seven subscription batches while one subscriber follows `$all`; checks
/// that it gets every event once, in order, and returns how many batches the tailer published.
async fn burst_batches(ctx: &Ctx, stream: &str) -> u64 {
    const BURST: usize = SUBSCRIPTION_BATCH * 7;
    let s = &ctx.store;
    let mut sub = s.subscribe_all(0);
    s.append(
        &format!("{stream}-0"),
        ExpectedVersion::Any,
        vec![event("T", 0)],
    )
    .await
    .unwrap();
    collect(&mut sub, 1).await;
    let before = s.fanout_stats();
    let events: Vec<_> = (1..=BURST).map(|i| event("T", i)).collect();
    let written: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    s.append(&format!("{stream}-1"), ExpectedVersion::Any, events)
        .await
        .unwrap();
    assert_eq!(ids(&collect(&mut sub, BURST).await), written);
    let after = s.fanout_stats();
    assert_eq!(
        after.events_published - before.events_published,
        BURST as u64
    );
    after.batches_published - before.batches_published
}

/// An append larger than one read leaves the one reader behind: it doubles each full read (500,
/// 1,000, 2,000 events) instead of taking 500 at a time, so the feed keeps up with bursts;
/// subscribers still get every event once, in order.
async fn check_a_tailer_behind_reads_larger_batches(ctx: Ctx) {
    assert_eq!(
        burst_batches(&ctx, "burst").await,
        3,
        "reads of 500, 1,000 and 2,000 events"
    );
    const { assert!(TAIL_BATCH_MAX >= 4 * SUBSCRIPTION_BATCH) };
}

/// After a short read the tailer asks for twice what it got: the first burst of 1,200 events
/// takes reads of 500 and 700, a second one of the same size a single read (it took two, 500 and
/// 700 again, when every short read sent it back to 500).
async fn check_a_tailer_reads_a_repeated_burst_at_once(ctx: Ctx) {
    const BURST: usize = SUBSCRIPTION_BATCH * 12 / 5;
    let s = &ctx.store;
    let mut sub = s.subscribe_all(0);
    s.append("again-0", ExpectedVersion::Any, vec![event("T", 0)])
        .await
        .unwrap();
    collect(&mut sub, 1).await;
    let mut batches = Vec::new();
    for k in 1..=2 {
        let before = s.fanout_stats();
        let events: Vec<_> = (1..=BURST).map(|i| event("T", i)).collect();
        let written: Vec<Uuid> = events.iter().map(|e| e.id).collect();
        s.append(&format!("again-{k}"), ExpectedVersion::Any, events)
            .await
            .unwrap();
        assert_eq!(ids(&collect(&mut sub, BURST).await), written);
        let after = s.fanout_stats();
        assert_eq!(
            after.events_published - before.events_published,
            BURST as u64
        );
        batches.push(after.batches_published - before.batches_published);
    }
    assert_eq!(batches, [2, 1], "reads of 500 and 700, then one of 1,200");
    const { assert!(TAIL_BATCH_MAX >= 3 * SUBSCRIPTION_BATCH) };
}

/// The same burst with the tailer's reads capped at 500 events: seven reads of 500.
async fn check_a_capped_tailer_reads_no_more_than_its_cap(ctx: Ctx) {
    assert_eq!(
        burst_batches(&ctx, "cap").await,
        7,
        "reads of 500 events each"
    );
}

#[tokio::test]
async fn a_tail_batch_outside_its_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("events.db").display());
    for bad in [
        SUBSCRIPTION_BATCH - 1,
        galleon_eventstore::MAX_READ_EVENTS + 1,
    ] {
        let options = OpenOptions {
            tail_batch_max: Some(bad),
            ..OpenOptions::default()
        };
        let err = galleon_eventstore::Store::open_with(&url, options)
            .await
            .unwrap_err();
        assert!(
            matches!(err, galleon_eventstore::Error::InvalidInput(_)),
            "{bad}: {err:?}"
        );
    }
    let options = OpenOptions {
        tail_batch_max: Some(galleon_eventstore::MAX_READ_EVENTS),
        ..OpenOptions::default()
    };
    galleon_eventstore::Store::open_with(&url, options)
        .await
        .unwrap();
}

/// Streams in categories that share prefixes, several types, appends before and after the
/// subscriptions start: every filtered read (in pages of several sizes) and every filtered
/// subscription returns exactly what the filter applied to `$all` keeps, in order.
async fn check_filters_match_a_model(ctx: Ctx) {
    let s = &ctx.store;
    let streams = [
        "acct-1", "acct-2", "acct", "acct-1-x", "accts-1", "ac-1", "other-1",
    ];
    let types = ["Opened", "Credited", "Closed"];
    let append_round = |round: usize| {
        let s = s.clone();
        async move {
            // A fixed pseudo-random order of streams and types, two events per append.
            for i in 0..21 {
                let k = round * 21 + i;
                let stream = streams[(k * 5 + 3) % streams.len()];
                let evs = vec![event(types[k % 3], k), event(types[(k / 3) % 3], k)];
                s.append(stream, ExpectedVersion::Any, evs).await.unwrap();
            }
        }
    };
    append_round(0).await;
    let filters = [
        EventFilter::category("acct").unwrap(),
        EventFilter::category("accts").unwrap(),
        EventFilter::category("nothing").unwrap(),
        EventFilter::all().with_types(["Closed"]).unwrap(),
        EventFilter::all().with_types(["Opened", "Closed"]).unwrap(),
        EventFilter::category("acct")
            .unwrap()
            .with_types(["Credited"])
            .unwrap(),
    ];
    let mut subs: Vec<_> = filters.iter().map(|f| s.subscribe(0, f.clone())).collect();
    append_round(1).await;
    let all = all_events(s, 2 * 21 * 2).await;
    for (f, sub) in filters.iter().zip(&mut subs) {
        let model: Vec<&RecordedEvent> = all
            .iter()
            .filter(|e| {
                f.category_name()
                    .is_none_or(|c| category_of(&e.stream_id) == c)
                    && (f.event_types().is_empty() || f.event_types().contains(&e.event_type))
            })
            .collect();
        let model_ids: Vec<Uuid> = model.iter().map(|e| e.id).collect();
        for page in [1, 3, 7, 500] {
            let mut got = Vec::new();
            let mut from = 0;
            loop {
                let events = s.read_filtered(from, page, f).await.unwrap();
                assert!(events.len() <= page);
                match events.last() {
                    Some(last) => from = last.position + 1,
                    None => break,
                }
                got.extend(events);
            }
            assert_eq!(ids(&got), model_ids, "{f:?} in pages of {page}");
        }
        assert_eq!(
            ids(&collect(sub, model.len()).await),
            model_ids,
            "subscription {f:?}"
        );
    }
    // Nothing else was pending: the next event each gets is one appended now.
    let marker = event("Opened", 1000);
    s.append("acct-9", ExpectedVersion::Any, vec![marker.clone()])
        .await
        .unwrap();
    for (f, sub) in filters.iter().zip(&mut subs) {
        if f.matches_parts("acct-9", "Opened") {
            assert_eq!(collect(sub, 1).await[0].id, marker.id, "{f:?}");
        }
    }
    let distinct: HashSet<Uuid> = all.iter().map(|e| e.id).collect();
    assert_eq!(distinct.len(), all.len());
}

/// Every event carries when it was recorded, by the clock of the machine (the database's and
/// the test's are the same here), in reads of all kinds (the HTTP API's JSON shows
/// the same: galleon-eventstore-http's tests).
async fn check_every_event_has_recorded_at(ctx: Ctx) {
    let s = &ctx.store;
    // SQLite keeps microseconds but PostgreSQL's `now()` is the transaction's start: allow a
    // second either side for clocks read at slightly different moments.
    let before = Timestamp::from_micros(Timestamp::now().as_micros() - 1_000_000);
    let r = s
        .append(
            "time-1",
            ExpectedVersion::NoStream,
            vec![event("T", 0), event("T", 1)],
        )
        .await
        .unwrap();
    let after = Timestamp::from_micros(Timestamp::now().as_micros() + 1_000_000);
    let read = s
        .read_stream("time-1", 0, 10, galleon_eventstore::Direction::Forward)
        .await
        .unwrap();
    let all = s.read_all(r.first_position, 10).await.unwrap();
    let mut sub = s.subscribe(0, EventFilter::category("time").unwrap());
    let live = collect(&mut sub, 2).await;
    for e in read.iter().chain(&all).chain(&live) {
        assert!(
            before <= e.recorded_at && e.recorded_at <= after,
            "{} not in {before}..={after}",
            e.recorded_at
        );
        assert_eq!(e.recorded_at, read[0].recorded_at, "one append, one time");
    }
}
