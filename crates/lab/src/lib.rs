//! galleon's benchmark lab, kept out of the library crates: the criterion benches that compare
//! galleon with its peers (`benches/`, built with `--features peers`, never by `cargo test`) and
//! the suites of `galleon bench`.
