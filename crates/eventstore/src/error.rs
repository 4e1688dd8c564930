//! The error type of every store operation.

use crate::expected::{BadExpectedVersion, ExpectedVersion};

/// Everything that can go wrong in a store operation.
///
/// Callers match on [`Error::WrongExpectedVersion`] (optimistic concurrency) and on
/// [`Error::StreamNotFound`]; the other variants are reported, not handled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The stream's current version did not satisfy the append's expectation; nothing was stored.
    #[error("wrong expected version: expected {expected}, actual {}", display_actual(*.actual))]
    WrongExpectedVersion {
        /// What the caller asked for.
        expected: ExpectedVersion,
        /// The version of the stream's last event, `None` when the stream has no events.
        actual: Option<u64>,
    },
    /// The stream has no events.
    #[error("stream {0:?} not found")]
    StreamNotFound(String),
    /// An event id of the append is already stored somewhere else than this append would put it,
    /// so the append is neither new nor a retry of an earlier one; nothing was stored.
    #[error("event id {0} is already stored at another place")]
    DuplicateEventId(uuid::Uuid),
    /// The request is malformed (bad stream name, empty or oversized append, bad URL...).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The store's URL could not be understood.
    #[error("invalid store URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given to [`crate::Store::open`].
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database file or schema was written by a newer version of this crate.
    #[error("database schema version {found} is newer than the supported {supported}")]
    SchemaTooNew {
        /// Version found in `schema_version`.
        found: i64,
        /// Highest version this build knows.
        supported: i64,
    },
    /// The database reported an error or could not be reached. The driver's own error is the
    /// [`source`](std::error::Error::source); the message says what the database said.
    #[error("{backend}: {message}")]
    Backend {
        /// `postgres`, `postgres pool` or `sqlite`.
        backend: &'static str,
        /// The database's message (for PostgreSQL with its severity and SQLSTATE).
        message: String,
        /// Whether retrying later may succeed (see [`Error::is_transient`]).
        transient: bool,
        /// The driver's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A file-system operation failed (creating the SQLite file's directory).
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Stored data could not be decoded (corrupt row, invalid JSON in storage).
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// No persistent subscription has this name.
    #[error("subscription {0:?} not found")]
    SubscriptionNotFound(String),
    /// A persistent subscription of this name exists with another filter; creating it again
    /// with the same filter is not an error.
    #[error("subscription {0:?} already exists with another filter")]
    SubscriptionExists(String),
    /// Creating a persistent subscription (or consumer group) past the store's limit,
    /// [`crate::OpenOptions::max_subscriptions`]: delete some, or open the store with a higher
    /// limit. Nothing was created.
    #[error(
        "the store holds its limit of {limit} persistent subscriptions: delete one, or raise \
         the limit (OpenOptions::max_subscriptions; galleon serve --events-max-subscriptions)"
    )]
    TooManySubscriptions {
        /// The limit.
        limit: usize,
    },
    /// An acknowledgement named a position the subscription does not deliver: no event is
    /// stored there, it is past the head (not delivered yet), its event is outside the
    /// subscription's filter, or (an ack by a consumer group member) its partition is held by
    /// another member. The checkpoint did not move; `reason` says which and what was expected.
    #[error("invalid ack of position {position}: {reason}")]
    InvalidAck {
        /// The position acknowledged.
        position: u64,
        /// Why it is refused, and what an ack must name.
        reason: String,
    },
    /// The store was closed (its writer thread or background task is gone).
    #[error("the store is closed")]
    Closed,
    /// The operation panicked (a bug); the panic was caught and the store goes on. The message
    /// is the panic's.
    #[error("event store operation panicked: {0}")]
    Panicked(String),
}

impl Error {
    /// True for [`Error::WrongExpectedVersion`].
    pub fn is_wrong_expected_version(&self) -> bool {
        matches!(self, Error::WrongExpectedVersion { .. })
    }

    /// True when retrying the same call later may succeed: a lost connection, an exhausted pool,
    /// a busy database. Subscriptions retry these silently.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Backend {
                transient: true,
                ..
            }
        )
    }

    /// The PostgreSQL driver's error behind this one, if that is what it is.
    #[cfg(feature = "postgres")]
    pub(crate) fn as_postgres(&self) -> Option<&tokio_postgres::Error> {
        match self {
            Error::Backend { source, .. } => source.downcast_ref(),
            _ => None,
        }
    }
}

#[cfg(feature = "postgres")]
impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        // No SQLSTATE: the connection failed. Class 08: connection exception; class 57:
        // operator intervention (a terminated backend, a shutting-down server); 40001/40P01:
        // serialization failure and deadlock, which a retry resolves.
        let transient = match e.code() {
            None => true,
            Some(code) => {
                let c = code.code();
                c.starts_with("08") || c.starts_with("57") || c == "40001" || c == "40P01"
            }
        };
        Error::Backend {
            backend: "postgres",
            message: describe_pg(&e),
            transient,
            source: Box::new(e),
        }
    }
}

#[cfg(feature = "postgres")]
impl From<deadpool_postgres::PoolError> for Error {
    fn from(e: deadpool_postgres::PoolError) -> Error {
        Error::Backend {
            backend: "postgres pool",
            message: e.to_string(),
            transient: true,
            source: Box::new(e),
        }
    }
}

#[cfg(feature = "sqlite")]
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Error {
        let transient = matches!(
            &e,
            rusqlite::Error::SqliteFailure(f, _) if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            )
        );
        Error::Backend {
            backend: "sqlite",
            message: e.to_string(),
            transient,
            source: Box::new(e),
        }
    }
}

/// tokio-postgres displays a server error as just "db error"; show its severity, code and message.
#[cfg(feature = "postgres")]
fn describe_pg(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        None => e.to_string(),
    }
}

fn display_actual(actual: Option<u64>) -> String {
    match actual {
        Some(v) => v.to_string(),
        None => "no stream".to_owned(),
    }
}

impl From<BadExpectedVersion> for Error {
    fn from(e: BadExpectedVersion) -> Error {
        Error::InvalidInput(e.to_string())
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
