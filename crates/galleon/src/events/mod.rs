//! The event store in `galleon serve`: opens the [`Store`] named by `--events` and mounts its
//! HTTP API ([`galleon_eventstore::api`]) on the router.
//!
//! | route                                           | what                                         |
//! |-------------------------------------------------|----------------------------------------------|
//! | `POST /streams/{id}` (`ES-Expected-Version`)    | append: 201 positions, 409 conflict, 400, 413 |
//! | `GET /streams/{id}?from=&limit=&direction=`     | read one stream forward or backward          |
//! | `GET`/`PUT /streams/{id}/metadata`, `POST /streams/{id}/delete` | stream metadata, soft delete (admin) |
//! | `GET /all?from=&limit=&category=&type=`         | read `$all` in position order, filtered      |
//! | `GET /categories/{c}?from=&limit=&type=`        | read the streams `c` and `c-...`             |
//! | `GET /all/subscribe?from=&category=&type=` (or `Last-Event-ID`) | live, as server-sent events  |
//! | `PUT`/`GET`/`DELETE /subscriptions/{name}`, `GET /subscriptions` | persistent subscriptions    |
//! | `GET /subscriptions/{name}/events`, `POST /subscriptions/{name}/ack` | consume, acknowledge    |
//! | `GET /subscriptions/{name}/events?member=M`     | consume a consumer group as member `M`       |
//!
//! Each request/response route decodes its parameters once and calls its [`api`] function,
//! whose status, content type and JSON body become the [`Response`]. A subscription is a
//! [`Store::subscribe_frames`] turned into a streamed body (`sse.rs`): one chunk per batch of
//! ready events ([`api::sse_frame`] each, formatted once per live batch for all subscribers), a comment line every [`DEFAULT_KEEP_ALIVE`] of silence. The server drops the stream (and with it the
//! subscription) as soon as the client closes its socket, and ends it at shutdown.

mod auth;
mod http;
mod sse;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::Either;

use galleon_eventstore::{OpenOptions, Store, api};
use galleon_http::{Handler, Method, Request, Response, Router};

use http::{
    LAST_EVENT_ID_HEADER, bad_name, bad_stream_id, borrowed, header, into_response, path_param,
    query_pairs, stream_param,
};
use sse::sse_response;

pub(crate) use auth::Access;
use auth::Role;

/// `--events` when neither the flag nor `GALLEON_EVENTS` is given: an SQLite file under the
/// working directory, created (with its directory) on first start.
pub(crate) const DEFAULT_EVENTS_URL: &str = "sqlite:./data/events.db";

/// The `--events` value that serves no event store (the routes are not mounted).
pub(crate) const EVENTS_OFF: &str = "off";

/// Default `--events-keep-alive`: a comment line after 15 s without an event. Proxies cut idle
/// responses after 60 s (nginx `proxy_read_timeout`, AWS ALB's idle timeout) or 100 s
/// (Cloudflare); 15 s stays well under all of them, at 15 bytes per quarter minute.
pub(crate) const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Longest wait for the store to open (connect, create or migrate the schema) before startup
/// fails. A backstop for an address that drops packets, where a TCP connect would otherwise
/// hang for minutes; generous, because a migration of a large database may take a while. Add
/// `connect_timeout=SECS` to a PostgreSQL URL for a quicker verdict.
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);

/// The event-store part of `galleon serve`'s configuration.
#[derive(Debug, Clone)]
pub(crate) struct EventsConfig {
    /// `sqlite:PATH`, `postgres://...` or [`EVENTS_OFF`].
    pub(crate) url: String,
    /// PostgreSQL only: the schema holding the tables, created when missing.
    pub(crate) schema: Option<String>,
    /// Silence after which a subscription sends a keep-alive comment.
    pub(crate) keep_alive: Duration,
    /// Live-feed batches kept for subscribers that fall behind.
    pub(crate) subscriber_buffer: usize,
    /// Most events the live feed's reader takes per query when behind.
    pub(crate) tail_batch: usize,
    /// SQLite only: the store's reader threads.
    pub(crate) sqlite_reader_threads: usize,
}

/// Opens the store `config` names; `None` when it is [`EVENTS_OFF`]. Errors name the URL
/// (password hidden) and say what went wrong.
pub(crate) async fn open(config: &EventsConfig) -> anyhow::Result<Option<Store>> {
    if config.url == EVENTS_OFF {
        anyhow::ensure!(
            config.schema.is_none(),
            "--events-schema needs an event store, but --events is off"
        );
        return Ok(None);
    }
    anyhow::ensure!(
        !config.url.trim().is_empty(),
        "--events (or GALLEON_EVENTS) is empty: give sqlite:PATH, postgres://... or {EVENTS_OFF}"
    );
    let shown = redact(&config.url);
    let is_pg = config.url.starts_with("postgres://") || config.url.starts_with("postgresql://");
    anyhow::ensure!(
        config.schema.is_none() || is_pg,
        "--events-schema applies to PostgreSQL only, but --events is {shown}"
    );
    let options = OpenOptions {
        pg_schema: config.schema.clone(),
        pg_application_name: Some("galleon".to_owned()),
        subscriber_buffer: Some(config.subscriber_buffer),
        tail_batch_max: Some(config.tail_batch),
        sqlite_reader_threads: Some(config.sqlite_reader_threads),
        ..OpenOptions::default()
    };
    let store = tokio::time::timeout(OPEN_TIMEOUT, Store::open_with(&config.url, options))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "opening the event store {shown}: no answer within {}s",
                OPEN_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| match e {
            // Its message repeats the URL verbatim, password included.
            galleon_eventstore::Error::InvalidUrl { reason, .. } => {
                anyhow::anyhow!("opening the event store {shown}: invalid URL: {reason}")
            }
            e => anyhow::Error::new(e).context(format!("opening the event store {shown}")),
        })?;
    Ok(Some(store))
}

/// `url` with any password replaced by `***`, for messages and logs.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // userinfo is everything before the last `@` of the authority.
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("password", _)) => "password=***".to_owned(),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// Adds the event-store routes to `router`: each decodes its parameters once (the router the
/// path parameters, [`query_pairs`] the query) and calls its [`api`] function.
pub(crate) fn mount(
    router: Router,
    store: Store,
    keep_alive: Duration,
    limits: api::ApiLimits,
    access: Access,
) -> Router {
    let access = Arc::new(access);
    let s = store.clone();
    let router = router
        .post(
            "/streams/{id}",
            guard(&access, Role::Append, move |req: Request| {
                let store = s.clone();
                async move {
                    let stream = match stream_param(&req) {
                        Ok(s) => s,
                        Err(resp) => return *resp,
                    };
                    let expected = match header(&req, api::EXPECTED_VERSION_HEADER) {
                        Ok(v) => v,
                        Err(resp) => return *resp,
                    };
                    into_response(api::append(&store, &limits, stream, expected, req.body()).await)
                }
            }),
        )
        .on_bad_escape(bad_stream_id);
    let s = store.clone();
    let router = router
        .get(
            "/streams/{id}",
            guard(&access, Role::Read, move |req: Request| {
                let store = s.clone();
                async move {
                    let stream = match stream_param(&req) {
                        Ok(s) => s,
                        Err(resp) => return *resp,
                    };
                    match query_pairs(&req) {
                        Ok(q) => into_response(
                            api::read_stream(&store, &limits, stream, &borrowed(&q)).await,
                        ),
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_stream_id);
    let router = mount_stream_admin(router, &store, &access);
    let s = store.clone();
    let router = router.get(
        "/all",
        guard(&access, Role::Read, move |req: Request| {
            let store = s.clone();
            async move {
                match query_pairs(&req) {
                    Ok(q) => into_response(api::read_all(&store, &limits, &borrowed(&q)).await),
                    Err(resp) => *resp,
                }
            }
        }),
    );
    let s = store.clone();
    let router = router
        .get(
            "/categories/{category}",
            guard(&access, Role::Read, move |req: Request| {
                let store = s.clone();
                async move {
                    let category = match path_param(&req, "category") {
                        Ok(c) => c,
                        Err(resp) => return *resp,
                    };
                    match query_pairs(&req) {
                        Ok(q) => into_response(
                            api::read_category(&store, &limits, category, &borrowed(&q)).await,
                        ),
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_name);
    let s = store.clone();
    let router = router.get(
        "/all/subscribe",
        guard(&access, Role::Read, move |req: Request| {
            let store = s.clone();
            async move { subscribe(&store, &req, keep_alive) }
        }),
    );
    mount_persistent(router, store, keep_alive, &access)
}

/// Stream metadata and soft delete: `GET` (read role) and `PUT` (admin) `/streams/{id}/metadata`,
/// `POST /streams/{id}/delete` (admin; a `POST` to a path of its own, so that a stray `DELETE`
/// of a stream URL deletes nothing).
fn mount_stream_admin(router: Router, store: &Store, access: &Arc<Access>) -> Router {
    let s = store.clone();
    let router = router
        .get(
            "/streams/{id}/metadata",
            guard(access, Role::Read, move |req: Request| {
                let store = s.clone();
                async move {
                    match stream_param(&req) {
                        Ok(stream) => into_response(api::stream_metadata(&store, stream).await),
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_stream_id);
    let s = store.clone();
    let router = router
        .route(
            Method::Put,
            "/streams/{id}/metadata",
            guard(access, Role::Admin, move |req: Request| {
                let store = s.clone();
                async move {
                    match stream_param(&req) {
                        Ok(stream) => into_response(
                            api::set_stream_metadata(&store, stream, req.body()).await,
                        ),
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_stream_id);
    let s = store.clone();
    router
        .post(
            "/streams/{id}/delete",
            guard(access, Role::Admin, move |req: Request| {
                let store = s.clone();
                async move {
                    match stream_param(&req) {
                        Ok(stream) => into_response(api::delete_stream(&store, stream).await),
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_stream_id)
}

/// The persistent-subscription routes: create, list, inspect, delete, consume, acknowledge.
fn mount_persistent(
    router: Router,
    store: Store,
    keep_alive: Duration,
    access: &Arc<Access>,
) -> Router {
    let s = store.clone();
    let router = router.get(
        "/subscriptions",
        guard(access, Role::Read, move |_req: Request| {
            let store = s.clone();
            async move { into_response(api::list_subscriptions(&store).await) }
        }),
    );
    let s = store.clone();
    let router = router
        .route(
            Method::Put,
            "/subscriptions/{name}",
            guard(access, Role::Admin, move |req: Request| {
                let store = s.clone();
                async move {
                    match path_param(&req, "name") {
                        Ok(name) => {
                            into_response(api::create_subscription(&store, name, req.body()).await)
                        }
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_name);
    let s = store.clone();
    let router = router
        .get(
            "/subscriptions/{name}",
            guard(access, Role::Read, move |req: Request| {
                let store = s.clone();
                async move {
                    match path_param(&req, "name") {
                        Ok(name) => into_response(api::subscription_info(&store, name).await),
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_name);
    let s = store.clone();
    let router = router
        .route(
            Method::Delete,
            "/subscriptions/{name}",
            guard(access, Role::Admin, move |req: Request| {
                let store = s.clone();
                async move {
                    match path_param(&req, "name") {
                        Ok(name) => into_response(api::delete_subscription(&store, name).await),
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_name);
    let s = store.clone();
    let router = router
        .post(
            "/subscriptions/{name}/ack",
            guard(access, Role::Read, move |req: Request| {
                let store = s.clone();
                async move {
                    match path_param(&req, "name") {
                        Ok(name) => into_response(api::ack(&store, name, req.body()).await),
                        Err(resp) => *resp,
                    }
                }
            }),
        )
        .on_bad_escape(bad_name);
    router
        .get(
            "/subscriptions/{name}/events",
            guard(access, Role::Read, move |req: Request| {
                let store = store.clone();
                async move { consume(&store, &req, keep_alive).await }
            }),
        )
        .on_bad_escape(bad_name)
}

/// `handler` behind `access`: a request without `role` gets the 401 or 403 instead.
fn guard<F, Fut>(access: &Arc<Access>, role: Role, handler: F) -> impl Handler
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let access = access.clone();
    move |req: Request| match access.check(&req, role) {
        Some(denied) => Either::Left(std::future::ready(denied)),
        None => Either::Right(handler(req)),
    }
}

/// `GET /all/subscribe`: `$all` (or the events a `category=`/`type=` filter keeps) from the
/// requested position on, as server-sent events.
fn subscribe(store: &Store, req: &Request, keep_alive: Duration) -> Response {
    let last_event_id = match header(req, LAST_EVENT_ID_HEADER) {
        Ok(v) => v,
        Err(resp) => return *resp,
    };
    let query = match query_pairs(req) {
        Ok(q) => q,
        Err(resp) => return *resp,
    };
    let (from, filter) = match api::subscribe_query(&borrowed(&query), last_event_id) {
        Ok(q) => q,
        Err(resp) => return into_response(resp),
    };
    sse_response(
        store.subscribe_frames(from, filter, api::sse_frame),
        format!("galleon $all from position {from}"),
        keep_alive,
    )
}

/// `GET /subscriptions/{name}/events`: the persistent subscription's events from its checkpoint
/// (or past `Last-Event-ID`), as server-sent events; the client acknowledges with
/// `POST /subscriptions/{name}/ack`. With `?member=M` (a consumer group): the events of the
/// partitions member `M` holds, each from its partition's checkpoint.
async fn consume(store: &Store, req: &Request, keep_alive: Duration) -> Response {
    let name = match path_param(req, "name") {
        Ok(n) => n,
        Err(resp) => return *resp,
    };
    let query = match query_pairs(req) {
        Ok(q) => q,
        Err(resp) => return *resp,
    };
    let mut member = None;
    for (k, v) in &query {
        match &**k {
            "member" if member.is_none() => member = Some(&**v),
            "member" => {
                return http::json_error(
                    galleon_http::StatusCode::BAD_REQUEST,
                    "query member= is given twice",
                );
            }
            other => {
                return http::json_error(
                    galleon_http::StatusCode::BAD_REQUEST,
                    &format!("unknown query parameter {other:?} (this route takes member=)"),
                );
            }
        }
    }
    if let Some(member) = member {
        return match api::consume_group_from(store, name, member).await {
            Ok((_, sub)) => sse_response(
                sub.into_frames(api::sse_frame),
                format!("galleon subscription {name}, consumer group member {member}"),
                keep_alive,
            ),
            Err(resp) => into_response(resp),
        };
    }
    let last_event_id = match header(req, LAST_EVENT_ID_HEADER) {
        Ok(v) => v,
        Err(resp) => return *resp,
    };
    let (info, from) = match api::consume_from(store, name, last_event_id).await {
        Ok(x) => x,
        Err(resp) => return into_response(resp),
    };
    sse_response(
        store.subscribe_frames(from, info.filter, api::sse_frame),
        format!("galleon subscription {name} from position {from}"),
        keep_alive,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        for (url, shown) in [
            ("sqlite:./data/events.db", "sqlite:./data/events.db"),
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            (
                "postgres://me:s3cr3t@db:5432/events",
                "postgres://me:***@db:5432/events",
            ),
            (
                "postgresql://me:p@ss@db/events?sslmode=disable",
                "postgresql://me:***@db/events?sslmode=disable",
            ),
            (
                "postgres://db/events?user=me&password=s3cr3t",
                "postgres://db/events?user=me&password=***",
            ),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }
}
