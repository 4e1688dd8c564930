//! What `galleon serve` shows about itself while it runs: the recorder the server reports every
//! request to (`record.rs`), the live page (`page.rs`), Prometheus's `/metrics` (`prom.rs`) and
//! the routes serving them (`routes.rs`), the event store's figures (`store.rs`), plus the access
//! log.

mod page;
mod prom;
mod record;
mod routes;
mod store;

pub(crate) use record::{ACCESS_TARGET, Stats};
pub(crate) use routes::{Diagnostics, mount};
pub(crate) use store::source as store_figures;
