//! `Store::stats` on both backends: appends, events and conflicts counted apart, subscribers
//! counted while open and forgotten when dropped, the `$all` watermark following the appends.

mod support;

use std::time::Duration;

use galleon_eventstore::{ExpectedVersion, StoreStats};
use support::{Ctx, collect, event};

on_both_backends!(galleon_eventstore::OpenOptions::default();
    check_stats_count_appends_conflicts_and_subscribers,
);

async fn check_stats_count_appends_conflicts_and_subscribers(ctx: Ctx) {
    let s = &ctx.store;
    assert_eq!(s.stats(), StoreStats::default());
    let r = s
        .append(
            "st-1",
            ExpectedVersion::NoStream,
            vec![event("A", 0), event("A", 1)],
        )
        .await
        .unwrap();
    s.append("st-2", ExpectedVersion::Any, vec![event("A", 2)])
        .await
        .unwrap();
    let conflict = s
        .append("st-1", ExpectedVersion::NoStream, vec![event("A", 3)])
        .await
        .unwrap_err();
    assert!(conflict.is_wrong_expected_version());
    // A bad append is neither an append nor a conflict.
    assert!(
        s.append("$bad", ExpectedVersion::Any, vec![event("A", 4)])
            .await
            .is_err()
    );
    let stats = s.stats();
    assert_eq!(
        (stats.appends, stats.events_appended, stats.conflicts),
        (2, 3, 1)
    );
    // Clones share the counters.
    assert_eq!(s.clone().stats().appends, 2);
    assert_eq!(stats.subscribers, 0);

    let mut a = s.subscribe_all(0);
    let mut b = s.subscribe_all(r.first_position);
    assert_eq!(s.stats().subscribers, 2);
    let got = collect(&mut a, 3).await;
    collect(&mut b, 3).await;
    let last = got[2].position;
    // Both are live once they have read what is stored; the watermark is past the last event.
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let st = s.stats();
            if st.live_subscribers == 2 && st.all_watermark > last {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("both subscribers live");
    let e = s
        .append("st-3", ExpectedVersion::NoStream, vec![event("A", 5)])
        .await
        .unwrap();
    assert_eq!(collect(&mut a, 1).await[0].position, e.first_position);
    let st = s.stats();
    assert!(st.all_watermark > e.first_position, "{st:?}");
    let lag = st.all_lag_micros.expect("a batch was published");
    assert!(lag < 60_000_000, "lag {lag} µs");
    drop(a);
    assert_eq!(s.stats().subscribers, 1);
    drop(b);
    assert_eq!(s.stats().subscribers, 0);
}
