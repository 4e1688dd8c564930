//! galleon's benchmark lab, kept out of the library crates (not published):
//!
//! - [`bench`](mod@bench): the suites of `galleon bench` (iolist, templates, http, eventstore, offload,
//!   rules, cache), their saved runs, `compare`, `graph` and `list`. The `galleon` binary
//!   dispatches its `bench` command here; the suites that need a server spawn that binary
//!   (`std::env::current_exe()`) as their child. Run with `cargo run --release -- bench
//!   [SUITE...]`, then `galleon bench compare` or `galleon bench graph`.
//! - `benches/`: criterion benches of galleon alone (`cargo bench -p galleon-lab --bench
//!   render`) and against its peers, tera, minijinja, sailfish, askama and rayon (`cargo bench
//!   -p galleon-lab --features peers`; never built by `cargo test`).

pub mod bench;
