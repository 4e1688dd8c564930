//! Append-only event streams for galleon: PostgreSQL for production, an embedded SQLite file as
//! the default that needs no server, one API over both.
//!
//! # Main types
//!
//! - [`Store`] opens a backend by URL (`sqlite:./data/events.db` or `postgres://...`), creates or
//!   migrates its schema, and offers [`Store::append`], [`Store::read_stream`],
//!   [`Store::read_all`] and [`Store::subscribe_all`]. A PostgreSQL URL's `sslmode` (`disable`,
//!   `prefer`, `require`, `verify-ca`, `verify-full`) and `sslrootcert` mean what they mean to
//!   libpq, over rustls; without `sslmode` the connection is not encrypted (libpq would try).
//! - [`EventData`] goes in (id, type, JSON data, JSON metadata); [`RecordedEvent`] comes out,
//!   with its stream `version` (0, 1, 2, ... per stream) and its `$all` `position` (strictly
//!   increasing, with gaps).
//! - [`ExpectedVersion`] guards an append (`Any`, `NoStream`, `StreamExists`, `Exact(v)`);
//!   a conflict is [`Error::WrongExpectedVersion`]. Re-sending an append whose ids are already
//!   stored at the same place, with an expectation the original met, returns the original
//!   [`AppendResult`] and stores nothing.
//! - [`Subscription`] follows `$all`: stored events first, then live ones, each exactly once,
//!   in increasing position, surviving dropped connections.
//! - Persistent subscriptions ([`Store::create_subscription`], [`Store::consume`], [`Store::ack`])
//!   keep a checkpoint; consumer groups ([`Store::create_group`], [`Store::consume_group`])
//!   split one by stream among members, a checkpoint per partition ([`partition_of`]), a dead
//!   member's partitions going to the others after [`GroupSettings::member_timeout`].
//! - [`StreamMetadata`] (`max_count`, `max_age`, `truncate_before`) shapes stream reads;
//!   [`Store::delete_stream`] is a soft delete whose stream continues its versions.
//! - [`Store::stats`]: appends, conflicts, subscribers and the `$all` watermark, from atomics.
//!   [`Store::subscribe_frames`] yields SSE-ready [`Frames`], formatted once per live batch.
//! - Its HTTP API (routes, bearer-token roles, server-sent events) is the crate
//!   `galleon-eventstore-http`, mountable on galleon-http and axum.
//!
//! Backends are cargo features, `sqlite` and `postgres`, both on by default.
//!
//! # Example
//!
//! ```
//! use futures::StreamExt;
//! use galleon_eventstore::{Direction, EventData, ExpectedVersion, Store};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(&format!("sqlite:{}/data/events.db", dir.path().display())).await?;
//!
//! let placed = EventData::json("OrderPlaced", &serde_json::json!({"order": 1, "total": 30}))?;
//! let r = store.append("order-1", ExpectedVersion::NoStream, vec![placed.clone()]).await?;
//! assert_eq!((r.first_version, r.last_version), (0, 0));
//!
//! // A retry of the same append is answered from storage, not stored twice.
//! assert_eq!(store.append("order-1", ExpectedVersion::NoStream, vec![placed]).await?, r);
//!
//! // A writer that expected another version loses.
//! let late = EventData::json("OrderPaid", &serde_json::json!({"order": 1}))?;
//! let err = store.append("order-1", ExpectedVersion::NoStream, vec![late]).await.unwrap_err();
//! assert!(err.is_wrong_expected_version());
//!
//! let events = store.read_stream("order-1", 0, 100, Direction::Forward).await?;
//! assert_eq!(events[0].event_type, "OrderPlaced");
//!
//! let mut all = store.subscribe_all(0);
//! let first = all.next().await.expect("a subscription never ends on its own")?;
//! assert_eq!(first.position, r.first_position);
//! # Ok(())
//! # }
//! ```
//!
//! # Performance model
//!
//! - **PostgreSQL appends are group-committed.** Each append goes to one of a few writer tasks
//!   (one per core); a stream stays on its writer while it has appends pending, so its appends
//!   keep their order. A lone append runs at once as one prepared `SELECT galleon_append(...)`
//!   (six array parameters, one round trip, one commit). Concurrent appends queue and go in one
//!   transaction: one `galleon_append_batch` call checks every expected version and numbers the
//!   positions, one binary `COPY` writes all their events, one commit. Writers of one stream
//!   queue on its row; writers of different streams never wait for each other.
//! - **`$all` order without a global lock.** An event's position is its transaction id shifted
//!   left 16 bits plus its index in the transaction. `$all` is read only below the oldest
//!   transaction still running (`pg_snapshot_xmin`), so a slow transaction holding an earlier
//!   position can never commit behind a reader: readers wait for it instead.
//! - **SQLite append = a queue hop + a share of one fsync.** One writer thread takes up to 128
//!   queued calls, runs each in a savepoint of one transaction and commits once (WAL,
//!   `synchronous=FULL`). Reads run on reader threads of their own
//!   ([`OpenOptions::sqlite_reader_threads`]), one connection each, not on tokio's blocking pool.
//! - **Reads = index ranges.** On PostgreSQL (schema 4) the stream index holds the first event
//!   of each append; a read takes the heads in its window plus one primary-key range per longer
//!   append. `$all` is a primary-key range. JSON stays text end to end ([`Json`]): checked once
//!   on the way in, never parsed again on the way out.
//! - **Subscriptions** wake on in-process signals and PostgreSQL `NOTIFY` (sent outside the
//!   append transactions, one per burst), and re-read every
//!   [`SUBSCRIPTION_POLL_INTERVAL`] anyway, so a lost wake-up only delays.
//!
//! Measurements and the reasoning behind each choice: `DESIGN-NOTES.md` and
//! `bench/results/eventstore.txt`.
//! Bench: `cargo bench -p galleon-eventstore` prints the seed's suite on both backends beside
//! the naive and global-lock baselines.

#![forbid(unsafe_code)]

#[cfg(not(any(feature = "sqlite", feature = "postgres")))]
compile_error!(
    "galleon-eventstore needs at least one backend: cargo feature `sqlite` or `postgres`"
);

mod consumer_group;
mod error;
mod expected;
mod fanout;
mod filter;
mod group_beater;
mod groups;
mod persistent;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
mod stats;
mod store;
mod stream_meta;
mod subscription;
mod time;
mod types;

pub use consumer_group::MAX_HEARTBEAT_INTERVAL;
pub use error::{Error, Result};
pub use expected::BadExpectedVersion;
pub use fanout::{
    DEFAULT_SUBSCRIBER_BUFFER, FanoutStats, FrameFormat, MAX_SUBSCRIBER_BUFFER, SUBSCRIPTION_BATCH,
    SUBSCRIPTION_POLL_INTERVAL, TAIL_BATCH_MAX,
};
pub use filter::{EventFilter, MAX_FILTER_TYPES, category_of};
pub use groups::{
    DEFAULT_GROUP_PARTITIONS, DEFAULT_MEMBER_TIMEOUT, GroupSettings, GroupStatus,
    MAX_GROUP_PARTITIONS, MAX_MEMBER_TIMEOUT, MIN_MEMBER_TIMEOUT, MemberState, PartitionState,
    partition_of,
};
pub use persistent::{Acked, DEFAULT_MAX_SUBSCRIPTIONS};
#[cfg(feature = "postgres")]
pub use postgres::DEFAULT_POOL_SIZE;
#[cfg(feature = "sqlite")]
pub use sqlite::{DEFAULT_SQLITE_READER_THREADS, MAX_SQLITE_READER_THREADS};
pub use stats::StoreStats;
pub use store::{DEFAULT_HELD_BACK_WARNING, OpenOptions, Store};
pub use subscription::{FrameSubscription, Frames, Subscription};
pub use time::Timestamp;
pub use types::{
    AppendResult, Direction, EventData, ExpectedVersion, Json, MAX_APPEND_EVENTS,
    MAX_EVENT_TYPE_BYTES, MAX_JSON_DEPTH, MAX_READ_EVENTS, MAX_STREAM_ID_BYTES,
    MAX_SUBSCRIPTION_NAME_BYTES, RecordedEvent, StreamMetadata, SubscriptionInfo,
    validate_stream_id, validate_subscription_name,
};
