//! # galleon-eventstore-http
//!
//! The HTTP API of a [`galleon_eventstore::Store`], written once ([`EventsApi`]: one route
//! table, bearer-token roles, limits, JSON errors, server-sent events) and mounted on a
//! galleon-http [`Router`](galleon_http::Router) ([`EventsApi::router`], [`EventsApi::mount`])
//! or, with the cargo feature `axum`, on an `axum::Router` (`EventsApi::axum_router`). Both
//! mounts hand each request to [`EventsApi::handle`], so they answer alike, byte for byte.
//!
//! | route | role | answer |
//! |---|---|---|
//! | `POST /streams/{id}` (`ES-Expected-Version`) | append | 201 positions; 409 conflict; 400 bad JSON or header; 413 |
//! | `GET /streams/{id}?from=&limit=&direction=forward\|backward` | read | 200 events; 404 unknown stream |
//! | `GET /streams/{id}/metadata` | read | 200 `max_count`, `max_age_ms`, `truncate_before`, `deleted` |
//! | `PUT /streams/{id}/metadata` `{"max_count"?, "max_age_ms"?, "truncate_before"?}` | admin | 200; 400 |
//! | `POST /streams/{id}/delete` | admin | 200 `truncate_before` (soft delete); 404 |
//! | `GET /all?from=&limit=&category=&type=` | read | 200 events of `$all`, filtered if asked |
//! | `GET /categories/{c}?from=&limit=&type=` | read | 200 events of the streams `c` and `c-...` |
//! | `GET /all/subscribe?from=&category=&type=` (or `Last-Event-ID`) | read | server-sent events, live |
//! | `GET /subscriptions` | read | 200 every persistent subscription |
//! | `PUT /subscriptions/{name}` `{"from"?, "category"?, "types"?, "partitions"?, "member_timeout_ms"?}` | admin | 200 (a consumer group with `partitions`); 409 other settings |
//! | `GET /subscriptions/{name}` | read | 200 with checkpoint (a group's members and partitions); 404 |
//! | `DELETE /subscriptions/{name}` | admin | 200; 404 |
//! | `GET /subscriptions/{name}/events` (`Last-Event-ID`), `?member=M` | read | server-sent events from the checkpoint; a consumer group as member `M` |
//! | `POST /subscriptions/{name}/ack` `{"position", "member"?}` | read | 200 the checkpoint (a group: of the event's partition); 400 a position the subscription (the member) was not delivered, checkpoint unchanged; 404 |
//!
//! Every answer but an event stream is JSON (`{"error": ...}` for errors); a method a path does
//! not take is 405 with `allow`, as galleon-http's router answers it. An event stream opens with
//! a comment, sends each event as `id:` (its position), `event:` (its type) and `data:` (the
//! event's JSON, as `GET /all` returns it), a `: keep-alive` comment after each
//! [`DEFAULT_KEEP_ALIVE`] of silence ([`EventsApi::with_keep_alive`]), and resumes after a
//! reconnecting `EventSource`'s `Last-Event-ID`. It ends when the client leaves, when its
//! subscription fails (with a comment saying why), and at [`EventsApi::shutdown`].
//!
//! Tokens ([`Access`]): `Authorization: Bearer TOKEN`, one token per [`Role`]: `read`,
//! `append`, `admin` (which may do everything). A missing or unknown token is 401, a token
//! without the role 403. With no token at all the API is open; once any token is set, every role
//! without a token is refused (401) unless [`OpenRoles`] opens it (`read`, `append`).
//!
//! Bounds ([`ApiLimits`]): events per append, the largest read `limit`, bytes per request body.
//!
//! # Examples
//! On galleon-http, beside other routes:
//! ```
//! use galleon_eventstore::Store;
//! use galleon_eventstore_http::{Access, ApiLimits, EventsApi};
//! use galleon_http::{Request, Response, Router, Server, ServerConfig};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(&format!("sqlite:{}", dir.path().join("e.db").display())).await.unwrap();
//! let api = EventsApi::new(store)
//!     .with_limits(ApiLimits { max_append_events: 100, ..ApiLimits::default() })
//!     .with_access(Access { admin: Some("admin-token-0123456789".into()), ..Access::default() });
//! let site = Router::new().get("/", |_req: Request| async { Response::html("home") });
//! let router = api.mount(site);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! let server = Server::new(router, ServerConfig::default());
//! // Event streams end at the server's shutdown.
//! server.serve(listener, async {}).await.unwrap();
//! # });
//! ```
//! On axum (feature `axum`): `axum::serve(listener, api.axum_router())`, with
//! [`EventsApi::shutdown`] in its graceful-shutdown future (see `EventsApi::axum_router`).
//!
//! Opening the store a server is configured with: [`open`] (bounded by [`OPEN_TIMEOUT`], errors
//! with the password [`redact`]ed).

#![forbid(unsafe_code)]

mod api;
mod auth;
#[cfg(feature = "axum")]
mod axum;
mod encode;
mod galleon;
mod limits;
mod open;
mod persistent;
mod query;
mod request;
mod response;
mod routes;
mod sse;
mod streams;

pub use api::{ApiReply, EventsApi};
pub use auth::{Access, InvalidToken, MIN_TOKEN_LEN, OpenRoles, Role};
pub use encode::sse_frame;
pub use limits::{
    ApiLimits, DEFAULT_KEEP_ALIVE, DEFAULT_MAX_BODY_BYTES, DEFAULT_READ_LIMIT,
    MAX_HTTP_APPEND_EVENTS, MAX_HTTP_READ_LIMIT,
};
pub use open::{OPEN_TIMEOUT, OpenError, open, open_within, redact};
pub use request::{ApiRequest, EXPECTED_VERSION_HEADER, LAST_EVENT_ID_HEADER};
pub use response::{ApiResponse, JSON_CONTENT_TYPE, SSE_CONTENT_TYPE};
pub use routes::{Route, routes};
pub use sse::EventStream;
