//! HTTP/1.1 on the wire: [`decode`] reads requests, [`encode`] writes response heads and chunk
//! framing, [`conn`] runs one connection. `decode` and `encode` are pure (no I/O); only `conn`
//! touches the socket.

mod conn;
pub(crate) mod decode;
pub(crate) mod encode;

pub(crate) use conn::{Shared, serve_connection};
