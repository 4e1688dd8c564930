//! Reads and what happens around them: directions and limits, reads against a model, concurrent
//! exact appends, a subscription with 100 writers, a dropped append, data after reopening.

use super::*;

pub(super) async fn check_read_stream_directions_and_limits(ctx: Ctx) {
    let s = &ctx.store;
    let batch = events(10);
    let ids: Vec<Uuid> = batch.iter().map(|e| e.id).collect();
    s.append("read-a", ExpectedVersion::NoStream, batch[..4].to_vec())
        .await
        .unwrap();
    s.append("read-other", ExpectedVersion::NoStream, events(2))
        .await
        .unwrap();
    s.append("read-a", ExpectedVersion::Exact(3), batch[4..].to_vec())
        .await
        .unwrap();
    let versions = |evs: &[RecordedEvent]| evs.iter().map(|e| e.version).collect::<Vec<_>>();
    let fwd = s
        .read_stream("read-a", 3, 4, Direction::Forward)
        .await
        .unwrap();
    assert_eq!(versions(&fwd), [3, 4, 5, 6]);
    assert_eq!(fwd.iter().map(|e| e.id).collect::<Vec<_>>(), ids[3..7]);
    assert!(
        fwd.iter()
            .all(|e| e.stream_id == "read-a" && e.event_type == "TestEvent")
    );
    let data: serde_json::Value = serde_json::from_str(fwd[0].data.get()).unwrap();
    assert_eq!(data["index"], 3);
    let meta: serde_json::Value = serde_json::from_str(fwd[0].metadata.get()).unwrap();
    assert_eq!(meta["user"], "conformance-suite");
    assert_eq!(
        versions(
            &s.read_stream("read-a", u64::MAX, 3, Direction::Backward)
                .await
                .unwrap()
        ),
        [9, 8, 7]
    );
    assert_eq!(
        versions(
            &s.read_stream("read-a", 2, 10, Direction::Backward)
                .await
                .unwrap()
        ),
        [2, 1, 0]
    );
    assert!(
        s.read_stream("read-a", 10, 10, Direction::Forward)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        s.read_stream("read-missing", 0, 10, Direction::Forward).await,
        Err(Error::StreamNotFound(name)) if name == "read-missing"
    ));
    // $all: every event once, increasing positions, pages join without gaps or repeats.
    let all = all_events(s, 12).await;
    assert!(all.windows(2).all(|w| w[0].position < w[1].position));
    let mut paged = Vec::new();
    let mut from = 0;
    loop {
        let page = s.read_all(from, 5).await.unwrap();
        let Some(last) = page.last() else { break };
        from = last.position + 1;
        paged.extend(page);
    }
    assert_eq!(
        paged.iter().map(|e| e.id).collect::<Vec<_>>(),
        all.iter().map(|e| e.id).collect::<Vec<_>>()
    );
    let stream_positions: Vec<u64> = s
        .read_stream("read-a", 0, 100, Direction::Forward)
        .await
        .unwrap()
        .iter()
        .map(|e| e.position)
        .collect();
    assert!(stream_positions.windows(2).all(|w| w[0] < w[1]));
}

/// Streams built from appends of many sizes (one at a time, and concurrently so that several
/// appends of one stream share a group commit, interleaved with other streams' appends) read
/// back exactly as a model of what each append stored says: from every version, both directions,
/// many limits. On PostgreSQL only the first event of each append is in the stream index; the
/// rest are found by position, which this pins down.
pub(super) async fn check_reads_across_appends_match_a_model(ctx: Ctx) {
    let s = &ctx.store;
    // model[stream][version] = id of the event stored there, from the append results alone.
    let mut model: Vec<(String, Vec<Uuid>)> = Vec::new();
    let mut seq = Vec::new();
    for n in [1, 3, 1, 1, 7, 2, 1, 10, 1, 4, 1] {
        let batch = events(n);
        let ids: Vec<Uuid> = batch.iter().map(|e| e.id).collect();
        let expected = match seq.len() {
            0 => ExpectedVersion::NoStream,
            stored => ExpectedVersion::Exact(stored as u64 - 1),
        };
        let r = s.append("model-seq", expected, batch).await.unwrap();
        assert_eq!(r.first_version, seq.len() as u64);
        seq.extend(ids);
        // Another stream's append between each, so positions of one stream are not contiguous.
        s.append("model-other", ExpectedVersion::Any, events(2))
            .await
            .unwrap();
    }
    model.push(("model-seq".to_owned(), seq));
    // 24 concurrent appends of 1-5 events to each of 3 streams: many share a batch.
    let tasks: Vec<_> = (0..72)
        .map(|i| {
            let store = s.clone();
            tokio::spawn(async move {
                let stream = format!("model-conc-{}", i % 3);
                let batch = events(1 + i % 5);
                let ids: Vec<Uuid> = batch.iter().map(|e| e.id).collect();
                let r = store
                    .append(&stream, ExpectedVersion::Any, batch)
                    .await
                    .unwrap();
                (stream, r.first_version, ids)
            })
        })
        .collect();
    let mut conc: Vec<Vec<Option<Uuid>>> = vec![Vec::new(); 3];
    for t in tasks {
        let (stream, first, ids) = t.await.unwrap();
        let slot = &mut conc[stream.as_bytes()[stream.len() - 1] as usize - b'0' as usize];
        for (k, id) in ids.into_iter().enumerate() {
            let v = first as usize + k;
            if slot.len() <= v {
                slot.resize(v + 1, None);
            }
            assert!(
                slot[v].replace(id).is_none(),
                "{stream}: version {v} given twice"
            );
        }
    }
    for (k, versions) in conc.into_iter().enumerate() {
        let ids: Vec<Uuid> = versions
            .into_iter()
            .enumerate()
            .map(|(v, id)| {
                id.unwrap_or_else(|| panic!("model-conc-{k}: no append stored version {v}"))
            })
            .collect();
        model.push((format!("model-conc-{k}"), ids));
    }
    for (stream, ids) in &model {
        let len = ids.len() as u64;
        for from in 0..=len + 1 {
            for max in [1usize, 2, 3, 5, 8, 100] {
                let fwd = s
                    .read_stream(stream, from, max, Direction::Forward)
                    .await
                    .unwrap();
                let want: Vec<Uuid> = ids.iter().skip(from as usize).take(max).copied().collect();
                assert_eq!(
                    fwd.iter().map(|e| e.id).collect::<Vec<_>>(),
                    want,
                    "{stream}: forward from {from}, max {max}"
                );
                assert!(
                    fwd.iter()
                        .zip(from..)
                        .all(|(e, v)| e.version == v && e.stream_id == *stream),
                    "{stream}: forward from {from}, max {max}: versions"
                );
                let back = s
                    .read_stream(stream, from, max, Direction::Backward)
                    .await
                    .unwrap();
                let top = from.min(len - 1) as usize;
                let want: Vec<Uuid> = ids[..=top].iter().rev().take(max).copied().collect();
                assert_eq!(
                    back.iter().map(|e| e.id).collect::<Vec<_>>(),
                    want,
                    "{stream}: backward from {from}, max {max}"
                );
            }
        }
        let last = s
            .read_stream(stream, u64::MAX, usize::MAX, Direction::Backward)
            .await
            .unwrap();
        assert_eq!(
            last.iter().map(|e| e.id).collect::<Vec<_>>(),
            ids.iter().rev().copied().collect::<Vec<_>>(),
            "{stream}: everything backward from the end, no limit"
        );
        let all = s
            .read_stream(stream, 0, usize::MAX, Direction::Forward)
            .await
            .unwrap();
        assert_eq!(
            all.len(),
            ids.len(),
            "{stream}: everything forward, no limit"
        );
    }
}

pub(super) async fn check_concurrent_exact_appends(ctx: Ctx) {
    const CONTENDERS: usize = 20;
    let s = &ctx.store;
    s.append("race-a", ExpectedVersion::NoStream, events(1))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let store = s.clone();
            tokio::spawn(async move {
                store
                    .append("race-a", ExpectedVersion::Exact(0), events(2))
                    .await
            })
        })
        .collect();
    let mut wins = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(r) => {
                wins += 1;
                assert_eq!((r.first_version, r.last_version), (1, 2));
            }
            Err(e) => assert_eq!(wrong_version(e), (ExpectedVersion::Exact(0), Some(2))),
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(stream_len(s, "race-a").await, Some(3));
    // The same for creating a stream.
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let store = s.clone();
            tokio::spawn(async move {
                store
                    .append("race-b", ExpectedVersion::NoStream, events(1))
                    .await
            })
        })
        .collect();
    let mut wins = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => wins += 1,
            Err(e) => assert_eq!(wrong_version(e), (ExpectedVersion::NoStream, Some(0))),
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(stream_len(s, "race-b").await, Some(1));
    // With `Any`, concurrent writers to one stream all succeed, with distinct versions.
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let store = s.clone();
            tokio::spawn(async move {
                store
                    .append("race-c", ExpectedVersion::Any, events(3))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut firsts = Vec::new();
    for t in tasks {
        firsts.push(t.await.unwrap().first_version);
    }
    firsts.sort_unstable();
    assert_eq!(
        firsts,
        (0..CONTENDERS as u64).map(|i| i * 3).collect::<Vec<_>>()
    );
}

pub(super) async fn check_subscription_with_100_writers(ctx: Ctx) {
    const WRITERS: usize = 100;
    const PER_WRITER: usize = 10;
    let s = &ctx.store;
    let mut early = s.subscribe_all(0);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = s.clone();
            tokio::spawn(async move {
                let batch = events(PER_WRITER);
                let ids: Vec<Uuid> = batch.iter().map(|e| e.id).collect();
                // Half the writers share one stream, half have their own.
                let stream = if w % 2 == 0 {
                    "sub-shared".to_owned()
                } else {
                    format!("sub-{w}")
                };
                store
                    .append(&stream, ExpectedVersion::Any, batch)
                    .await
                    .unwrap();
                ids
            })
        })
        .collect();
    // A second subscriber joins while the writers run: it catches up, then follows live.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut late = s.subscribe_all(0);
    let mut written = HashSet::new();
    for w in writers {
        written.extend(w.await.unwrap());
    }
    assert_eq!(written.len(), WRITERS * PER_WRITER);
    for sub in [&mut early, &mut late] {
        let got = collect(sub, WRITERS * PER_WRITER).await;
        assert!(
            got.windows(2).all(|w| w[0].position < w[1].position),
            "positions not increasing"
        );
        let ids: HashSet<Uuid> = got.iter().map(|e| e.id).collect();
        assert_eq!(ids, written, "every event exactly once");
    }
    // Nothing extra is pending: the next event each one sees is the marker appended now.
    let marker = event(0);
    s.append(
        "sub-marker",
        ExpectedVersion::NoStream,
        vec![marker.clone()],
    )
    .await
    .unwrap();
    for sub in [&mut early, &mut late] {
        assert_eq!(collect(sub, 1).await[0].id, marker.id);
    }
    // A subscription from the middle starts exactly there.
    let all = all_events(s, WRITERS * PER_WRITER + 1).await;
    let mid = &all[all.len() / 2];
    let mut from_mid = s.subscribe_all(mid.position);
    assert_eq!(collect(&mut from_mid, 1).await[0].id, mid.id);
}

pub(super) async fn check_dropped_append_future(ctx: Ctx) {
    let s = &ctx.store;
    // Drop appends at various moments; each must end up all there or not there at all.
    for (i, delay_us) in [0u64, 200, 1_000, 5_000, 20_000].into_iter().enumerate() {
        let stream = format!("dropped-{i}");
        let fut = s.append(&stream, ExpectedVersion::NoStream, events(2_000));
        let _ = tokio::time::timeout(Duration::from_micros(delay_us), fut).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let len = stream_len(s, &stream).await;
        assert!(
            len.is_none() || len == Some(2_000),
            "{stream}: {len:?} events"
        );
    }
    // The store still works.
    let r = s
        .append("dropped-after", ExpectedVersion::NoStream, events(1))
        .await
        .unwrap();
    assert_eq!(r.first_version, 0);
}

pub(super) async fn check_reopen_keeps_data(ctx: Ctx) {
    let r = ctx
        .store
        .append("reopen-a", ExpectedVersion::NoStream, events(5))
        .await
        .unwrap();
    let again = ctx.reopen().await;
    let evs = again
        .read_stream("reopen-a", 0, 10, Direction::Forward)
        .await
        .unwrap();
    assert_eq!(evs.len(), 5);
    assert_eq!(evs[4].position, r.last_position);
    // Both handles write the same store; versions continue.
    let r2 = again
        .append("reopen-a", ExpectedVersion::Exact(4), events(1))
        .await
        .unwrap();
    assert_eq!(r2.first_version, 5);
    assert!(r2.first_position > r.last_position);
    assert_eq!(
        wrong_version(
            ctx.store
                .append("reopen-a", ExpectedVersion::Exact(4), events(1))
                .await
                .unwrap_err()
        ),
        (ExpectedVersion::Exact(4), Some(5))
    );
}
