//! HTTP/1.1 on the wire: [`decode`] reads requests, [`encode`] writes response heads and chunk
//! framing, [`conn`] runs one connection. `decode` and `encode` are pure (no I/O); only `conn`
//! touches the socket.

mod chunks;
mod conn;
pub(crate) mod decode;
pub(crate) mod encode;
mod unsent;

pub(crate) use chunks::ChunkPool;
pub use chunks::STREAM_CHUNK_KIND;
pub(crate) use conn::{Shared, serve_connection};
