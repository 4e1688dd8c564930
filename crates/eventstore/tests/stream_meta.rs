//! Stream metadata, truncate-before and soft delete on both backends: what stream reads show,
//! appends after a delete continuing the versions, `$all` keeping everything (the HTTP answers
//! are galleon-eventstore-http's tests).

mod support;

use std::time::Duration;

use galleon_eventstore::{Direction, Error, ExpectedVersion, StreamMetadata};
use support::{Ctx, event};

on_both_backends!(galleon_eventstore::OpenOptions::default();
    check_max_count_max_age_and_truncate_before_apply_to_reads,
    check_soft_delete_then_append_continues_versions,
);

fn versions(events: &[galleon_eventstore::RecordedEvent]) -> Vec<u64> {
    events.iter().map(|e| e.version).collect()
}

async fn check_max_count_max_age_and_truncate_before_apply_to_reads(ctx: Ctx) {
    let s = &ctx.store;
    let ten: Vec<_> = (0..10).map(|i| event("T", i)).collect();
    s.append("m-1", ExpectedVersion::NoStream, ten)
        .await
        .unwrap();
    assert_eq!(
        s.stream_metadata("m-1").await.unwrap(),
        StreamMetadata::default()
    );
    let fwd = |from| async move {
        versions(
            &s.read_stream("m-1", from, 100, Direction::Forward)
                .await
                .unwrap(),
        )
    };
    let back = || async {
        versions(
            &s.read_stream("m-1", u64::MAX, 100, Direction::Backward)
                .await
                .unwrap(),
        )
    };

    s.set_stream_metadata(
        "m-1",
        StreamMetadata {
            truncate_before: Some(4),
            ..StreamMetadata::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(fwd(0).await, (4..10).collect::<Vec<_>>());
    assert_eq!(fwd(6).await, (6..10).collect::<Vec<_>>());
    assert_eq!(back().await, (4..10).rev().collect::<Vec<_>>());
    assert!(
        s.read_stream("m-1", 3, 10, Direction::Backward)
            .await
            .unwrap()
            .is_empty()
    );

    // max_count and truncate_before together: the stricter wins.
    s.set_stream_metadata(
        "m-1",
        StreamMetadata {
            max_count: Some(3),
            truncate_before: Some(4),
            ..StreamMetadata::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(fwd(0).await, [7, 8, 9]);
    s.append("m-1", ExpectedVersion::Exact(9), vec![event("T", 10)])
        .await
        .unwrap();
    assert_eq!(fwd(0).await, [8, 9, 10]);
    assert_eq!(back().await, [10, 9, 8]);

    // max_age: the old events are hidden, a fresh one shows. A page of only old events is
    // skipped, not returned empty.
    s.set_stream_metadata(
        "m-1",
        StreamMetadata {
            max_age: Some(Duration::from_millis(400)),
            ..StreamMetadata::default()
        },
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(fwd(0).await.is_empty());
    s.append("m-1", ExpectedVersion::Any, vec![event("T", 11)])
        .await
        .unwrap();
    assert_eq!(
        versions(
            &s.read_stream("m-1", 0, 2, Direction::Forward)
                .await
                .unwrap()
        ),
        [11]
    );
    assert_eq!(back().await, [11]);

    // Bad values; the rules apply to stream reads only: $all keeps all twelve.
    for bad in [
        StreamMetadata {
            max_count: Some(0),
            ..StreamMetadata::default()
        },
        StreamMetadata {
            max_age: Some(Duration::ZERO),
            ..StreamMetadata::default()
        },
    ] {
        assert!(matches!(
            s.set_stream_metadata("m-1", bad).await,
            Err(Error::InvalidInput(_))
        ));
    }
    assert_eq!(support::all_events(s, 12).await.len(), 12);
}

async fn check_soft_delete_then_append_continues_versions(ctx: Ctx) {
    let s = &ctx.store;
    s.append(
        "d-1",
        ExpectedVersion::NoStream,
        vec![event("T", 0), event("T", 1), event("T", 2)],
    )
    .await
    .unwrap();
    assert_eq!(s.delete_stream("d-1").await.unwrap(), 3);
    let meta = s.stream_metadata("d-1").await.unwrap();
    assert!(meta.deleted && meta.truncate_before == Some(3), "{meta:?}");
    for dir in [Direction::Forward, Direction::Backward] {
        assert!(matches!(
            s.read_stream("d-1", 0, 10, dir).await,
            Err(Error::StreamNotFound(_))
        ));
    }
    // Deleting again, or a stream that never was: not found.
    assert!(matches!(
        s.delete_stream("d-1").await,
        Err(Error::StreamNotFound(_))
    ));
    assert!(matches!(
        s.delete_stream("never").await,
        Err(Error::StreamNotFound(_))
    ));
    // StreamExists is refused: the stream reads as not found (as EventStoreDB answers).
    let exists = s
        .append("d-1", ExpectedVersion::StreamExists, vec![event("T", 9)])
        .await
        .unwrap_err();
    assert!(exists.is_wrong_expected_version(), "{exists}");
    // NoStream is accepted and continues after the old last version.
    let r = s
        .append("d-1", ExpectedVersion::NoStream, vec![event("T", 3)])
        .await
        .unwrap();
    assert_eq!(r.first_version, 3);
    assert_eq!(
        versions(
            &s.read_stream("d-1", 0, 10, Direction::Forward)
                .await
                .unwrap()
        ),
        [3]
    );
    // ...once: the stream exists again.
    let again = s
        .append("d-1", ExpectedVersion::NoStream, vec![event("T", 4)])
        .await
        .unwrap_err();
    assert!(again.is_wrong_expected_version(), "{again}");
    // ...and StreamExists is accepted again.
    let r = s
        .append("d-1", ExpectedVersion::StreamExists, vec![event("T", 5)])
        .await
        .unwrap();
    assert_eq!(r.first_version, 4);
    // Delete and append with Any: continues too.
    assert_eq!(s.delete_stream("d-1").await.unwrap(), 5);
    let r = s
        .append("d-1", ExpectedVersion::Any, vec![event("T", 6)])
        .await
        .unwrap();
    assert_eq!(r.first_version, 5);
    assert_eq!(
        versions(
            &s.read_stream("d-1", u64::MAX, 10, Direction::Backward)
                .await
                .unwrap()
        ),
        [5]
    );
    // $all keeps every event.
    assert_eq!(support::all_events(s, 6).await.len(), 6);
}
