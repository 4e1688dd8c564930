//! Shared read-mostly state for a server: every request reads it, now and then it is replaced
//! whole.
//!
//! Seed 003 kept 5,000 rules in an Elixir Agent and copied them into every request (92 req/s,
//! 10 GB); a pool of workers each holding a copy did better (879 req/s, 400 MB). Here readers take
//! a pointer instead:
//!
//! - [`Shared`]: [`Shared::snapshot`] gives the current version without a lock or a copy;
//!   [`Shared::store`] publishes a new one atomically; a reader keeps the version it started
//!   with until it lets go. Each version carries its number ([`Versioned::version`]).
//! - [`LocalCache`]: a thread's reference to the current version, checked with one atomic load
//!   per read, for values read on every request.
//! - [`Reloader`]: a `Shared` value loaded from a file through a caller's parse-and-validate
//!   function. A refused file (malformed, invalid, unreadable, too large) is logged with its
//!   located error and the previous version keeps serving.
//! - Triggers: [`Reloader::watch`] (a thread polling the file; [`Watch::every`] for any other
//!   check) and [`on_sighup`].
//!
//! # Examples
//!
//! ```
//! use galleon_state::Shared;
//!
//! let config = Shared::new(String::from("v1"));
//! let reader = config.clone();
//! let seen = std::thread::spawn(move || reader.snapshot().value().clone())
//!     .join()
//!     .unwrap();
//! assert_eq!(seen, "v1");
//! config.store(String::from("v2"));
//! assert_eq!(config.snapshot().value(), "v2");
//! ```

mod fingerprint;
mod local;
mod reload;
mod shared;
mod watch;

pub use fingerprint::fingerprint;
pub use local::LocalCache;
pub use reload::{DEFAULT_MAX_BYTES, ParseError, ReloadError, Reloader};
pub use shared::{Shared, Snapshot, Versioned};
#[cfg(all(unix, feature = "signal"))]
pub use watch::on_sighup;
pub use watch::{DEFAULT_POLL_INTERVAL, Watch};
