//! The fan-out's category feeds and shared frames on both backends: subscribers filtering on a
//! category follow a feed of that category's events only, joined while it is quiet and while it
//! is busy, and still get each of their events once, in order, with types filtered on top;
//! frame subscribers get exactly `frame` of each of their events, once, in order, whether
//! caught up from storage or formatted once per live batch and shared.

mod support;

use futures::StreamExt;
use galleon_eventstore::{EventFilter, ExpectedVersion, FrameSubscription, RecordedEvent, Store};
use support::{Ctx, collect, event};

on_both_backends!(galleon_eventstore::OpenOptions::default();
    check_category_subscribers_get_their_events_once_in_order,
    check_frame_subscribers_get_each_frame_once_in_order,
);

/// The frame format of these checks: every field of the event, one line (galleon-eventstore-http
/// formats server-sent events the same way, through `Store::subscribe_frames`).
fn frame(e: &RecordedEvent) -> bytes::Bytes {
    bytes::Bytes::from(format!(
        "{} {} {} {} {} {} {}\n",
        e.position,
        e.stream_id,
        e.version,
        e.id,
        e.event_type,
        e.data.get(),
        e.metadata.get()
    ))
}

/// Frames from `sub` until they hold `n` events, concatenated.
async fn frames(sub: &mut FrameSubscription, n: usize) -> Vec<u8> {
    let (mut out, mut got, mut last) = (Vec::new(), 0, None);
    tokio::time::timeout(support::DELIVERY_TIMEOUT, async {
        while got < n {
            let f = sub.next().await.expect("ended").expect("error");
            assert!(last < Some(f.last_position), "frames out of order");
            last = Some(f.last_position);
            out.extend_from_slice(&f.bytes);
            got += f.events;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{got} of {n} events arrived"));
    assert_eq!(got, n, "more events than expected");
    out
}

/// `frame` of every event of `$all` that passes `filter`, concatenated, and their count.
async fn expected(s: &Store, filter: &EventFilter) -> (Vec<u8>, usize) {
    let all = s.read_all(0, 10_000).await.unwrap();
    let kept: Vec<_> = all.iter().filter(|e| filter.matches(e)).collect();
    (
        kept.iter().flat_map(|e| frame(e).to_vec()).collect(),
        kept.len(),
    )
}

async fn check_frame_subscribers_get_each_frame_once_in_order(ctx: Ctx) {
    let s = &ctx.store;
    for i in 0..5 {
        s.append("fa-1", ExpectedVersion::Any, vec![event("A", i)])
            .await
            .unwrap();
    }
    let filters = [
        EventFilter::all(),
        EventFilter::all().with_types(["B"]).unwrap(),
        EventFilter::category("fb").unwrap(),
    ];
    let mut subs: Vec<FrameSubscription> = filters
        .iter()
        .flat_map(|f| (0..3).map(|_| s.subscribe_frames(0, f.clone(), frame)))
        .collect();
    // Caught up from storage first...
    for sub in subs.iter_mut().take(3) {
        assert_eq!(frames(sub, 5).await, expected(s, &filters[0]).await.0);
    }
    // ...then live batches, shared (several events per append: multi-event batches).
    for i in 0..20 {
        let ty = if i % 3 == 0 { "B" } else { "A" };
        let stream = if i % 2 == 0 { "fa-1" } else { "fb-2" };
        s.append(
            stream,
            ExpectedVersion::Any,
            vec![event(ty, i), event("A", 100 + i)],
        )
        .await
        .unwrap();
    }
    for (k, sub) in subs.iter_mut().enumerate() {
        let f = &filters[k / 3];
        let (want, n) = expected(s, f).await;
        let have = if k < 3 {
            // These already took the first five.
            let rest = frames(sub, n - 5).await;
            let mut all = expected_prefix(s, 5).await;
            all.extend_from_slice(&rest);
            all
        } else {
            frames(sub, n).await
        };
        assert_eq!(have, want, "subscriber {k}");
    }
}

/// `frame` of the first `n` events of `$all`, concatenated.
async fn expected_prefix(s: &Store, n: usize) -> Vec<u8> {
    let all = s.read_all(0, n).await.unwrap();
    all.iter().flat_map(|e| frame(e).to_vec()).collect()
}

async fn check_category_subscribers_get_their_events_once_in_order(ctx: Ctx) {
    let s = &ctx.store;
    // The tailer runs for an $all subscriber; the category feed is made while `cat` is quiet.
    let mut all = s.subscribe_all(0);
    let mut early = s.subscribe(0, EventFilter::category("cat").unwrap());
    let mut typed = s.subscribe(
        0,
        EventFilter::category("cat")
            .unwrap()
            .with_types(["B"])
            .unwrap(),
    );
    let mut want = Vec::new();
    for i in 0..60 {
        s.append(
            &format!("dog-{}", i % 3),
            ExpectedVersion::Any,
            vec![event("A", i)],
        )
        .await
        .unwrap();
        if i % 4 == 0 {
            let ty = if i % 8 == 0 { "A" } else { "B" };
            let e = event(ty, i);
            want.push((e.id, ty));
            s.append(&format!("cat-{}", i % 5), ExpectedVersion::Any, vec![e])
                .await
                .unwrap();
        }
    }
    let got = collect(&mut early, want.len()).await;
    let ids: Vec<_> = got.iter().map(|e| e.id).collect();
    assert_eq!(ids, want.iter().map(|w| w.0).collect::<Vec<_>>());
    assert!(got.windows(2).all(|w| w[0].position < w[1].position));
    let b: Vec<_> = want.iter().filter(|w| w.1 == "B").map(|w| w.0).collect();
    let got_b: Vec<_> = collect(&mut typed, b.len())
        .await
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(got_b, b);
    collect(&mut all, 60 + want.len()).await;
    // A subscriber joining now, from 0, bridges from the store to the busy category feed.
    let mut late = s.subscribe(0, EventFilter::category("cat").unwrap());
    let last = event("A", 999);
    s.append("cat-9", ExpectedVersion::Any, vec![last.clone()])
        .await
        .unwrap();
    let got = collect(&mut late, want.len() + 1).await;
    assert_eq!(got.last().unwrap().id, last.id);
    assert_eq!(collect(&mut early, 1).await[0].id, last.id);
    // Nothing else arrives: the dogs never reach a cat subscriber.
    let extra = tokio::time::timeout(std::time::Duration::from_millis(300), early.next()).await;
    assert!(extra.is_err(), "unexpected {extra:?}");
    assert!(s.fanout_stats().live_subscribers >= 3);
}
