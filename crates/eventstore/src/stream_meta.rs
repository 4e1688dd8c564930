//! Stream metadata, truncate-before and soft delete, on both backends: a stream's metadata
//! (`max_count`, `max_age`, `truncate_before`, `deleted`) is a row of its own (`stream_meta`),
//! read with every stream read and applied to what the read returns. Events are hidden, never
//! removed: `$all`, category reads and subscriptions keep them (they are history other streams'
//! consumers may have seen; filtering `$all` by every stream's metadata would cost a lookup per
//! event), as EventStoreDB keeps them until a scavenge.
//!
//! A soft delete ([`Store::delete_stream`]) sets `truncate_before` to one past the last version
//! and marks the stream deleted: it reads as not found until something is appended after the
//! delete. An append with `NoStream` (or `Any`) then continues after the old last version, as in
//! EventStoreDB, so versions never repeat.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::store::{Backend, Store};
use crate::time::Timestamp;
use crate::types::{
    AppendResult, Direction, EventData, ExpectedVersion, MAX_READ_EVENTS, RecordedEvent,
    StreamMetadata, validate_stream_id,
};

impl Backend {
    async fn get_meta(&self, stream: &str) -> Result<Option<StreamMetadata>> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.get_meta(stream).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.get_meta(stream).await,
        }
    }

    async fn put_meta(&self, stream: &str, meta: StreamMetadata) -> Result<()> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.put_meta(stream, meta).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.put_meta(stream, meta).await,
        }
    }
}

impl Store {
    /// Appends `events` to `stream` atomically if the stream satisfies `expected`.
    ///
    /// Errors: [`Error::WrongExpectedVersion`] (nothing stored), [`Error::DuplicateEventId`]
    /// when an id is already stored elsewhere, [`Error::InvalidInput`] for a bad stream id, no
    /// events, more than [`crate::MAX_APPEND_EVENTS`], a bad type or an id given twice.
    /// When every id is already stored in this stream, in this order, the call is a retry of an
    /// earlier append: it returns that append's result and stores nothing, provided `expected`
    /// accepts the stream as the original found it (`Any`; `NoStream` for an append that
    /// created the stream; `Exact(v)` for one that followed version `v`...); otherwise it is
    /// the [`Error::WrongExpectedVersion`] it would have been, as EventStoreDB answers. So after
    /// a transient error ([`Error::is_transient`]: a dropped connection, where the append may
    /// or may not have committed), retrying the same call is always safe.
    ///
    /// On a soft-deleted stream ([`Store::delete_stream`]) with nothing appended since,
    /// `NoStream` is accepted and the events continue after the old last version, and
    /// `StreamExists` is refused (the stream reads as not found).
    pub async fn append(
        &self,
        stream: &str,
        expected: ExpectedVersion,
        events: Vec<EventData>,
    ) -> Result<AppendResult> {
        // A soft-deleted stream with nothing appended since reads as not found, so it does not
        // exist for `StreamExists` either (EventStoreDB refuses it too).
        if expected == ExpectedVersion::StreamExists {
            validate_stream_id(stream)?;
            if let Some(meta) = self.backend().get_meta(stream).await?
                && meta.deleted
                && match self.last_version(stream).await {
                    Ok(last) => meta.truncate_before == Some(last + 1),
                    Err(Error::StreamNotFound(_)) => true,
                    Err(e) => return Err(e),
                }
            {
                let outcome = Err(Error::WrongExpectedVersion {
                    expected,
                    actual: None,
                });
                self.note_append(&outcome);
                return outcome;
            }
        }
        // Only a `NoStream` append can need a second attempt: keep its events for it.
        let again = (expected == ExpectedVersion::NoStream).then(|| events.clone());
        let mut outcome = self.append_raw(stream, expected, events).await;
        if let (
            Err(Error::WrongExpectedVersion {
                actual: Some(last), ..
            }),
            Some(events),
        ) = (&outcome, again)
        {
            let last = *last;
            let meta = self.backend().get_meta(stream).await?;
            if meta.is_some_and(|m| m.deleted && m.truncate_before == Some(last + 1)) {
                outcome = self
                    .append_raw(stream, ExpectedVersion::Exact(last), events)
                    .await
                    .map_err(|e| match e {
                        // Someone appended meanwhile: the stream exists again.
                        Error::WrongExpectedVersion { actual, .. } => Error::WrongExpectedVersion {
                            expected: ExpectedVersion::NoStream,
                            actual,
                        },
                        e => e,
                    });
            }
        }
        self.note_append(&outcome);
        outcome
    }

    /// Reads up to `max` events of `stream` (clamped to [`crate::MAX_READ_EVENTS`]) starting
    /// at version `from_version`, forward (increasing versions) or backward (use `u64::MAX`
    /// to start at the end). [`Error::StreamNotFound`] when the stream has no events.
    /// The stream's metadata applies ([`Store::stream_metadata`]): events before
    /// `truncate_before`, older than `max_age` or beyond the latest `max_count` are not returned,
    /// and a soft-deleted stream with nothing after the delete is [`Error::StreamNotFound`].
    pub async fn read_stream(
        &self,
        stream: &str,
        from_version: u64,
        max: usize,
        direction: Direction,
    ) -> Result<Vec<RecordedEvent>> {
        validate_stream_id(stream)?;
        let max = max.min(MAX_READ_EVENTS);
        let Some(meta) = self.backend().get_meta(stream).await? else {
            return self
                .read_stream_raw(stream, from_version, max, direction)
                .await;
        };
        let last = if meta.max_count.is_some() || meta.deleted {
            Some(self.last_version(stream).await?)
        } else {
            None
        };
        let truncated = meta.truncate_before.unwrap_or(0);
        if meta.deleted && last.is_some_and(|l| l < truncated) {
            return Err(Error::StreamNotFound(stream.to_owned()));
        }
        let mut lower = truncated;
        if let (Some(n), Some(last)) = (meta.max_count, last) {
            lower = lower.max((last + 1).saturating_sub(n));
        }
        let cutoff = meta.max_age.map(|age| {
            let age = i64::try_from(age.as_micros()).unwrap_or(i64::MAX);
            Timestamp::now().as_micros().saturating_sub(age)
        });
        let fresh = |e: &RecordedEvent| cutoff.is_none_or(|c| e.recorded_at.as_micros() >= c);
        match direction {
            Direction::Forward => {
                let mut from = from_version.max(lower);
                loop {
                    let events = self
                        .read_stream_raw(stream, from, max, Direction::Forward)
                        .await?;
                    let full = max > 0 && events.len() == max;
                    let next = events.last().map_or(from, |e| e.version + 1);
                    let kept: Vec<RecordedEvent> = events.into_iter().filter(fresh).collect();
                    // Events too old come first (recorded in version order): skip whole pages.
                    if !kept.is_empty() || !full {
                        return Ok(kept);
                    }
                    from = next;
                }
            }
            Direction::Backward => {
                if from_version < lower {
                    return Ok(Vec::new());
                }
                let events = self
                    .read_stream_raw(stream, from_version, max, Direction::Backward)
                    .await?;
                Ok(events
                    .into_iter()
                    .take_while(|e| e.version >= lower && fresh(e))
                    .collect())
            }
        }
    }

    /// The version of the stream's last event, hidden or not.
    async fn last_version(&self, stream: &str) -> Result<u64> {
        self.read_stream_raw(stream, u64::MAX, 1, Direction::Backward)
            .await?
            .first()
            .map(|e| e.version)
            .ok_or_else(|| Error::StreamNotFound(stream.to_owned()))
    }

    /// The stream's metadata (all `None` and not deleted when it has none; a stream need not
    /// exist to have metadata).
    pub async fn stream_metadata(&self, stream: &str) -> Result<StreamMetadata> {
        validate_stream_id(stream)?;
        Ok(self.backend().get_meta(stream).await?.unwrap_or_default())
    }

    /// Sets the stream's `max_count`, `max_age` and `truncate_before` (replacing what was set;
    /// `None` removes a rule). `deleted` is kept as stored: only [`Store::delete_stream`] and an
    /// append after it change it. [`Error::InvalidInput`] for a `max_count` or `max_age` of 0.
    pub async fn set_stream_metadata(&self, stream: &str, meta: StreamMetadata) -> Result<()> {
        validate_stream_id(stream)?;
        if meta.max_count == Some(0) || meta.max_age == Some(Duration::ZERO) {
            return Err(Error::InvalidInput(
                "max_count and max_age must be more than 0 (leave them out for no limit)".into(),
            ));
        }
        let stored = self.backend().get_meta(stream).await?.unwrap_or_default();
        let meta = StreamMetadata {
            deleted: stored.deleted,
            ..meta
        };
        self.backend().put_meta(stream, meta).await
    }

    /// Soft-deletes `stream`: its reads start after its current last version
    /// (`truncate_before`) and it reads as not found until an event is appended; a `NoStream` or
    /// `Any` append continues its versions. Returns the new `truncate_before`.
    /// [`Error::StreamNotFound`] when it has no events, or none since an earlier delete.
    pub async fn delete_stream(&self, stream: &str) -> Result<u64> {
        validate_stream_id(stream)?;
        let stored = self.backend().get_meta(stream).await?.unwrap_or_default();
        let last = self.last_version(stream).await?;
        if stored.deleted && stored.truncate_before.is_some_and(|tb| last < tb) {
            return Err(Error::StreamNotFound(stream.to_owned()));
        }
        let truncate_before = last + 1;
        let meta = StreamMetadata {
            truncate_before: Some(truncate_before),
            deleted: true,
            ..stored
        };
        self.backend().put_meta(stream, meta).await?;
        Ok(truncate_before)
    }
}
