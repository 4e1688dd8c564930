//! # galleon-iolist
//!
//! A byte rope written with `writev`, the way the Erlang VM sends I/O lists, with the copy-or-
//! reference thresholds as data instead of compile-time constants.
//!
//! - [`IoList`] is the rope: `&'static` slices and [`bytes::Bytes`] are held by reference, small
//!   pieces are copied into the list's own scratch buffer (adjacent copies merge), and a whole
//!   list nests inside another in O(1).
//! - [`WritePolicy`] says when the writer copies instead: runs of adjacent segments shorter than
//!   `coalesce_below` bytes become one buffer, and at most `max_iov` iovecs go to one call.
//! - [`IoWriter`] sends a list to a blocking [`std::io::Write`] or a tokio `AsyncWrite`,
//!   resumes after short writes at any byte, counts what it did in [`WriteStats`], and shows each
//!   call to a [`WriteTracer`] if one is installed.
//! - [`escape_html`] escapes into a list whose clean runs reference the input.
//!
//! ```
//! use bytes::Bytes;
//! use galleon_iolist::{IoList, WritePolicy, write_iolist, escape_html_into};
//!
//! let mut page = IoList::new();
//! page.push_static(b"<p>Hello, ");
//! escape_html_into(&mut page, &Bytes::from("Tom & Jerry"), 0);
//! page.push_static(b"</p>\n");
//!
//! let mut out = Vec::new();
//! let stats = write_iolist(&mut out, &page, WritePolicy::default()).unwrap();
//! assert_eq!(out, b"<p>Hello, Tom &amp; Jerry</p>\n");
//! assert_eq!(stats.bytes, page.len() as u64);
//! ```
//!
//! ## Performance model
//! Building a list costs one `Vec` push per segment (plus a `memcpy` for copied pieces); no byte of
//! a referenced segment is touched until the kernel reads it. Writing costs one system call per
//! `max_iov` iovecs plus a `memcpy` of the coalesced runs. The defaults
//! ([`DEFAULT_COALESCE_BELOW`], [`DEFAULT_MAX_IOV`]) come from `cargo bench -p galleon-iolist`,
//! whose table is in the README.

// Denied, not forbidden: `cursor` allows it on its few blocks (each with a `SAFETY:` comment).
#![deny(unsafe_code)]

mod cursor;
mod escape;
mod frames;
mod list;
mod policy;
mod write;

pub use cursor::ByteCursor;
pub use escape::{
    escape_html, escape_html_copy_into, escape_html_into, escape_html_static_into, needs_escape,
};
pub use frames::{OwnedFrames, Owners, to_frames};
pub use list::{CopyBuf, IoList, SegmentKind, Segments};
pub use policy::{
    DEFAULT_COALESCE_BELOW, DEFAULT_MAX_IOV, IOV_MAX, UnknownPolicy, WritePolicy, WriteStats,
};
#[cfg(feature = "tokio")]
pub use write::write_iolist_async;
pub use write::{IoWriter, WriteTracer, release_buffer_pool, write_iolist};
