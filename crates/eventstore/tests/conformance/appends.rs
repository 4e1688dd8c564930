//! Appends: expected versions, atomic batches, idempotent retries, the group commit, the JSON
//! nesting limit.

use super::*;

/// Regression: SQLite stored a 100,000-deep event (consumers then failed to parse `$all`) and
/// PostgreSQL answered the same append with an internal error. Both now refuse anything nested
/// deeper than `MAX_JSON_DEPTH` as invalid input, storing nothing, and take exactly that depth.
pub(super) async fn check_json_nesting_limit(ctx: Ctx) {
    let s = &ctx.store;
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let event = |data: String, meta: String| EventData {
        id: Uuid::now_v7(),
        event_type: "Deep".into(),
        data: Json::from_string(data).unwrap(),
        metadata: Json::from_string(meta).unwrap(),
    };
    for (data, meta) in [
        (nest(100_000), "{}".to_owned()),
        (nest(MAX_JSON_DEPTH + 1), "{}".to_owned()),
        ("{}".to_owned(), nest(MAX_JSON_DEPTH + 1)),
    ] {
        let err = s
            .append("deep", ExpectedVersion::Any, vec![event(data, meta)])
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        assert!(
            err.to_string().contains(&MAX_JSON_DEPTH.to_string()),
            "{err}"
        );
    }
    assert_eq!(stream_len(s, "deep").await, None, "nothing stored");
    let deepest = nest(MAX_JSON_DEPTH);
    s.append(
        "deep",
        ExpectedVersion::NoStream,
        vec![event(deepest.clone(), "{}".into())],
    )
    .await
    .unwrap();
    let read = s
        .read_stream("deep", 0, 10, Direction::Forward)
        .await
        .unwrap();
    assert_eq!(read[0].data.get(), deepest);
}

pub(super) async fn check_expected_version_semantics(ctx: Ctx) {
    let s = &ctx.store;
    use ExpectedVersion::*;
    // NoStream
    let r = s.append("ev-a", NoStream, events(2)).await.unwrap();
    assert_eq!((r.first_version, r.last_version), (0, 1));
    assert_eq!(r.last_position - r.first_position, 1);
    assert_eq!(
        wrong_version(s.append("ev-a", NoStream, events(1)).await.unwrap_err()),
        (NoStream, Some(1))
    );
    // StreamExists
    assert_eq!(
        wrong_version(s.append("ev-b", StreamExists, events(1)).await.unwrap_err()),
        (StreamExists, None)
    );
    let r = s.append("ev-a", StreamExists, events(1)).await.unwrap();
    assert_eq!((r.first_version, r.last_version), (2, 2));
    // Exact
    assert_eq!(
        wrong_version(s.append("ev-b", Exact(0), events(1)).await.unwrap_err()),
        (Exact(0), None)
    );
    let r = s.append("ev-a", Exact(2), events(3)).await.unwrap();
    assert_eq!((r.first_version, r.last_version), (3, 5));
    assert_eq!(
        wrong_version(s.append("ev-a", Exact(2), events(1)).await.unwrap_err()),
        (Exact(2), Some(5))
    );
    assert_eq!(
        wrong_version(s.append("ev-a", Exact(6), events(1)).await.unwrap_err()),
        (Exact(6), Some(5))
    );
    // Any
    let r = s.append("ev-c", Any, events(1)).await.unwrap();
    assert_eq!(r.first_version, 0);
    let r = s.append("ev-a", Any, events(1)).await.unwrap();
    assert_eq!(r.first_version, 6);
    // Nothing of the failed appends was stored.
    assert_eq!(stream_len(s, "ev-a").await, Some(7));
    assert_eq!(stream_len(s, "ev-b").await, None);
    assert_eq!(stream_len(s, "ev-c").await, Some(1));
    all_events(s, 8).await;
    // The error text names both versions.
    let msg = s
        .append("ev-a", Exact(1), events(1))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(msg, "wrong expected version: expected 1, actual 6");
}

pub(super) async fn check_atomic_append(ctx: Ctx) {
    let s = &ctx.store;
    let taken = event(0);
    s.append("atomic-other", ExpectedVersion::Any, vec![taken.clone()])
        .await
        .unwrap();
    // The last event's id is already stored elsewhere: the whole append fails, nothing stored.
    let mut batch = events(50);
    batch.push(taken.clone());
    match s.append("atomic-a", ExpectedVersion::Any, batch).await {
        Err(Error::DuplicateEventId(id)) => assert_eq!(id, taken.id),
        other => panic!("expected DuplicateEventId, got {other:?}"),
    }
    assert_eq!(stream_len(s, "atomic-a").await, None);
    // Same on an existing stream: its version is unchanged afterwards.
    s.append("atomic-b", ExpectedVersion::Any, events(3))
        .await
        .unwrap();
    let mut batch = events(10);
    batch.push(taken);
    assert!(matches!(
        s.append("atomic-b", ExpectedVersion::Any, batch).await,
        Err(Error::DuplicateEventId(_))
    ));
    assert_eq!(stream_len(s, "atomic-b").await, Some(3));
    let r = s
        .append("atomic-b", ExpectedVersion::Exact(2), events(1))
        .await
        .unwrap();
    assert_eq!(r.first_version, 3);
    // Invalid input is rejected before anything happens.
    let e = events(1).pop().unwrap();
    let err = s
        .append("atomic-c", ExpectedVersion::Any, vec![e.clone(), e])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("appears twice"), "{err}");
    let err = s
        .append("atomic-c", ExpectedVersion::Any, vec![])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    let err = s
        .append("$all", ExpectedVersion::Any, events(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("reserved"), "{err}");
    let too_many = galleon_eventstore::MAX_APPEND_EVENTS + 1;
    let err = s
        .append("atomic-c", ExpectedVersion::Any, events(too_many))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
    assert_eq!(stream_len(s, "atomic-c").await, None);
}

pub(super) async fn check_idempotent_retry(ctx: Ctx) {
    let s = &ctx.store;
    let batch = events(3);
    let first = s
        .append("idem-a", ExpectedVersion::NoStream, batch.clone())
        .await
        .unwrap();
    // Same call again (a client that lost the answer): same result, nothing stored twice.
    assert_eq!(
        s.append("idem-a", ExpectedVersion::NoStream, batch.clone())
            .await
            .unwrap(),
        first
    );
    assert_eq!(
        s.append("idem-a", ExpectedVersion::Any, batch.clone())
            .await
            .unwrap(),
        first
    );
    // Regression (issue 13, class 9): a replay under another expectation than the one the
    // original met is the conflict it would have been, as in EventStoreDB, not a success.
    for expected in [
        ExpectedVersion::Exact(5),
        ExpectedVersion::Exact(0),
        ExpectedVersion::StreamExists,
    ] {
        assert_eq!(
            wrong_version(
                s.append("idem-a", expected, batch.clone())
                    .await
                    .unwrap_err()
            ),
            (expected, Some(2)),
            "{expected:?}"
        );
    }
    // A prefix of the original is also where it was.
    let prefix = s
        .append("idem-a", ExpectedVersion::NoStream, batch[..2].to_vec())
        .await
        .unwrap();
    assert_eq!((prefix.first_version, prefix.last_version), (0, 1));
    assert_eq!(prefix.first_position, first.first_position);
    assert_eq!(stream_len(s, "idem-a").await, Some(3));
    all_events(s, 3).await;
    // The same ids elsewhere or reordered are not a retry.
    assert!(matches!(
        s.append("idem-b", ExpectedVersion::Any, batch.clone())
            .await,
        Err(Error::DuplicateEventId(_))
    ));
    let reordered = vec![batch[1].clone(), batch[0].clone()];
    assert!(matches!(
        s.append("idem-a", ExpectedVersion::Any, reordered).await,
        Err(Error::DuplicateEventId(_))
    ));
    // Known ids followed by a new one: not a retry either, and nothing is stored.
    let mut extended = batch.clone();
    extended.push(event(9));
    assert!(matches!(
        s.append("idem-a", ExpectedVersion::Any, extended).await,
        Err(Error::DuplicateEventId(_))
    ));
    assert_eq!(stream_len(s, "idem-a").await, Some(3));
    assert_eq!(stream_len(s, "idem-b").await, None);
    // Later appends continue after the original events.
    let next = s
        .append("idem-a", ExpectedVersion::Exact(2), events(1))
        .await
        .unwrap();
    assert_eq!(next.first_version, 3);
    assert!(next.first_position > first.last_position);
}

/// Many concurrent appends with every kind of outcome. Both backends commit concurrent appends in
/// groups; whatever groups form, each append must get exactly the answer it would get alone.
pub(super) async fn check_group_commit_mixed_outcomes(ctx: Ctx) {
    let s = &ctx.store;
    let stored = events(3);
    let original = s
        .append("gc-existing", ExpectedVersion::NoStream, stored.clone())
        .await
        .unwrap();
    let fresh = |n| -> Vec<EventData> { events(n) };
    let mut dup_late = fresh(3);
    dup_late[2].id = stored[1].id; // a later id is stored elsewhere
    let mut dup_first = fresh(2);
    dup_first[0].id = stored[0].id; // the first id is stored elsewhere

    type Check = Box<dyn FnOnce(Result<galleon_eventstore::AppendResult, Error>) + Send>;
    let mut calls: Vec<(String, ExpectedVersion, Vec<EventData>, Check)> = Vec::new();
    for i in 0..30 {
        calls.push((
            format!("gc-new-{i}"),
            ExpectedVersion::NoStream,
            fresh(2),
            Box::new(|r| assert_eq!(r.unwrap().first_version, 0)),
        ));
    }
    for _ in 0..10 {
        calls.push((
            "gc-shared".into(),
            ExpectedVersion::Any,
            fresh(3),
            Box::new(|r| assert_eq!(r.unwrap().first_version % 3, 0)),
        ));
    }
    calls.push((
        "gc-dup-late".into(),
        ExpectedVersion::Any,
        dup_late,
        Box::new(|r| assert!(matches!(r, Err(Error::DuplicateEventId(_))), "{r:?}")),
    ));
    calls.push((
        "gc-dup-first".into(),
        ExpectedVersion::Any,
        dup_first,
        Box::new(|r| assert!(matches!(r, Err(Error::DuplicateEventId(_))), "{r:?}")),
    ));
    calls.push((
        "gc-existing".into(),
        ExpectedVersion::NoStream,
        stored.clone(),
        Box::new(move |r| assert_eq!(r.unwrap(), original)),
    ));
    calls.push((
        "gc-existing".into(),
        ExpectedVersion::NoStream,
        fresh(1),
        Box::new(|r| {
            assert_eq!(
                wrong_version(r.unwrap_err()),
                (ExpectedVersion::NoStream, Some(2))
            )
        }),
    ));
    calls.push((
        "gc-missing".into(),
        ExpectedVersion::Exact(7),
        fresh(1),
        Box::new(|r| {
            assert_eq!(
                wrong_version(r.unwrap_err()),
                (ExpectedVersion::Exact(7), None)
            )
        }),
    ));
    calls.push((
        "gc-missing".into(),
        ExpectedVersion::StreamExists,
        fresh(1),
        Box::new(|r| {
            assert_eq!(
                wrong_version(r.unwrap_err()),
                (ExpectedVersion::StreamExists, None)
            )
        }),
    ));
    let tasks: Vec<_> = calls
        .into_iter()
        .map(|(stream, expected, evs, check)| {
            let store = s.clone();
            tokio::spawn(async move { check(store.append(&stream, expected, evs).await) })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    for i in 0..30 {
        assert_eq!(stream_len(s, &format!("gc-new-{i}")).await, Some(2));
    }
    let shared = s
        .read_stream("gc-shared", 0, 1000, Direction::Forward)
        .await
        .unwrap();
    assert_eq!(
        shared.iter().map(|e| e.version).collect::<Vec<_>>(),
        (0..30).collect::<Vec<_>>()
    );
    assert_eq!(stream_len(s, "gc-existing").await, Some(3));
    assert_eq!(stream_len(s, "gc-dup-late").await, None);
    assert_eq!(stream_len(s, "gc-dup-first").await, None);
    assert_eq!(stream_len(s, "gc-missing").await, None);
    // `$all`: every event once, positions increasing, each append's events contiguous.
    let all = all_events(s, 3 + 60 + 30).await;
    assert!(all.windows(2).all(|w| w[0].position < w[1].position));
    let ids: HashSet<Uuid> = all.iter().map(|e| e.id).collect();
    assert_eq!(ids.len(), all.len());
}
