//! Stream metadata, truncate-before and soft delete on both backends: what stream reads show,
//! appends after a delete continuing the versions, `$all` keeping everything, and the HTTP
//! functions' answers.

mod support;

use std::time::Duration;

use galleon_eventstore::{Direction, Error, ExpectedVersion, StreamMetadata, api};
use support::{Ctx, event};

on_both_backends!(galleon_eventstore::OpenOptions::default();
    check_max_count_max_age_and_truncate_before_apply_to_reads,
    check_soft_delete_then_append_continues_versions,
    check_stream_metadata_http,
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

async fn check_stream_metadata_http(ctx: Ctx) {
    let s = &ctx.store;
    let json =
        |r: &api::ApiResponse| -> serde_json::Value { serde_json::from_slice(&r.body).unwrap() };
    let limits = api::ApiLimits::default();
    let body = br#"[{"type":"T","data":{}},{"type":"T","data":{}},{"type":"T","data":{}}]"#;
    assert_eq!(api::append(s, &limits, "h-1", None, body).await.status, 201);
    let r = api::set_stream_metadata(s, "h-1", br#"{"max_count":2,"max_age_ms":60000}"#).await;
    assert_eq!(r.status, 200, "{}", json(&r));
    let v = json(&api::stream_metadata(s, "h-1").await);
    assert_eq!(
        v,
        serde_json::json!({"stream_id": "h-1", "max_count": 2, "max_age_ms": 60000, "truncate_before": null, "deleted": false})
    );
    let r = api::read_stream(s, &limits, "h-1", &[]).await;
    let got: Vec<u64> = json(&r)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [1, 2]);
    for body in [
        &br#"{"max_count":0}"#[..],
        br#"{"max_count":-1}"#,
        br#"{"colour":1}"#,
        b"[",
        br#"{"deleted":true}"#,
    ] {
        let r = api::set_stream_metadata(s, "h-1", body).await;
        assert_eq!(r.status, 400, "{}", json(&r));
    }
    assert_eq!(api::set_stream_metadata(s, "$bad", b"{}").await.status, 400);
    let r = api::delete_stream(s, "h-1").await;
    assert_eq!(
        (r.status, &json(&r)["truncate_before"]),
        (200, &3.into()),
        "{}",
        json(&r)
    );
    assert_eq!(api::read_stream(s, &limits, "h-1", &[]).await.status, 404);
    assert_eq!(api::delete_stream(s, "h-1").await.status, 404);
    assert_eq!(api::delete_stream(s, "nope").await.status, 404);
    let r = api::append(
        s,
        &limits,
        "h-1",
        Some("no_stream"),
        br#"[{"type":"T","data":{}}]"#,
    )
    .await;
    assert_eq!((r.status, &json(&r)["first_version"]), (201, &3.into()));
}
