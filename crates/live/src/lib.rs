//! galleon-live: server-rendered pages that stay live, speaking Phoenix LiveView's wire protocol.
//!
//! A page is rendered on the server (the first paint is plain HTML), then the official
//! `phoenix` and `phoenix_live_view` JavaScript clients join it over a WebSocket; after that only
//! the dynamic parts of the template that changed cross the wire, and a block's static text is
//! sent once per client.

pub mod assets;
mod channel;
#[cfg(feature = "eventstore")]
mod events;
mod limits;
mod message;
mod page;
mod params;
mod pubsub;
mod running;
mod server;
mod shared;
mod socket;
mod token;
mod view;

#[cfg(feature = "eventstore")]
pub use events::follow_events;
pub use limits::Limits;
pub use message::{Message, MessageError};
pub use page::{Layout, Page, default_layout};
pub use params::decode_form;
pub use server::{Live, LiveBuilder, LiveError, LiveStats, ViewStats};
pub use socket::SocketUpgrade;
pub use token::{Signer, TokenError};
pub use view::{Info, LiveView, Navigation, Socket, ViewError};
