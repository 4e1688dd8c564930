//! The event store in `galleon serve`: opens the [`Store`] named by `--events` and mounts its
//! HTTP API ([`galleon_eventstore::api`]) on the router.
//!
//! | route                                           | what                                         |
//! |-------------------------------------------------|----------------------------------------------|
//! | `POST /streams/{id}` (`ES-Expected-Version`)    | append: 201 positions, 409 conflict, 400, 413 |
//! | `GET /streams/{id}?from=&limit=&direction=`     | read one stream forward or backward          |
//! | `GET /all?from=&limit=`                         | read `$all` in position order                |
//! | `GET /all/subscribe?from=` (or `Last-Event-ID`) | `$all` live, as server-sent events           |
//!
//! Each request/response route decodes its parameters once and calls its [`api`] function,
//! whose status, content type and JSON body become the [`Response`]. The subscription is a [`Store::subscribe_all`] turned into a
//! [`Body::stream`]: one chunk per batch of ready events ([`api::sse_frame`] each), a comment
//! line every [`DEFAULT_KEEP_ALIVE`] of silence. The server drops the stream (and with it the
//! subscription) as soon as the client closes its socket, and ends it at shutdown.

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt as _, Stream, StreamExt as _};
use galleon_eventstore::{OpenOptions, Store, Subscription, api};
use galleon_http::{
    Body, BoxError, IoList, Request, Response, Router, StatusCode, percent_decode, split_query,
};

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

/// Most events sent in one chunk of a subscription when several are ready at once (catching up
/// from storage): one gathered write per batch instead of one per event. A guess: 64 typical
/// frames are ~40 KB, under a loopback socket buffer.
const SSE_BATCH_EVENTS: usize = 64;

/// A batch of ready events is cut once it holds this many bytes, so one chunk stays a socket
/// buffer's worth even when events are large. A guess, matching a loopback write.
const SSE_BATCH_BYTES: usize = 64 * 1024;

/// The comment sent when nothing else was for the keep-alive interval (ignored by `EventSource`).
const KEEP_ALIVE_FRAME: &[u8] = b": keep-alive\n\n";

/// The header an `EventSource` sends when it reconnects: the `id:` of the last frame it saw.
const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// The event-store part of `galleon serve`'s configuration.
#[derive(Debug, Clone)]
pub(crate) struct EventsConfig {
    /// `sqlite:PATH`, `postgres://...` or [`EVENTS_OFF`].
    pub(crate) url: String,
    /// PostgreSQL only: the schema holding the tables, created when missing.
    pub(crate) schema: Option<String>,
    /// Silence after which a subscription sends a keep-alive comment.
    pub(crate) keep_alive: Duration,
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
/// stream id, [`query_pairs`] the query) and calls its [`api`] function.
pub(crate) fn mount(
    router: Router,
    store: Store,
    keep_alive: Duration,
    limits: api::ApiLimits,
) -> Router {
    let append = store.clone();
    let read = store.clone();
    let all = store.clone();
    router
        .post("/streams/{id}", move |req: Request| {
            let store = append.clone();
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
        })
        .on_bad_escape(bad_stream_id)
        .get("/streams/{id}", move |req: Request| {
            let store = read.clone();
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
        })
        .on_bad_escape(bad_stream_id)
        .get("/all", move |req: Request| {
            let store = all.clone();
            async move {
                match query_pairs(&req) {
                    Ok(q) => into_response(api::read_all(&store, &limits, &borrowed(&q)).await),
                    Err(resp) => *resp,
                }
            }
        })
        .get("/all/subscribe", move |req: Request| {
            let store = store.clone();
            async move { subscribe(&store, &req, keep_alive) }
        })
}

/// The route's stream id, decoded by the router; one that decodes to something holding `/` is
/// not a stream of this API.
fn stream_param(req: &Request) -> Result<&str, Box<Response>> {
    match req.param("id") {
        Some(s) if !s.is_empty() && !s.contains('/') => Ok(s),
        _ => Err(Box::new(json_error(
            StatusCode::NOT_FOUND,
            "no such route: the stream id is missing or contains `/`",
        ))),
    }
}

/// The query's pairs, percent-decoded (`+` is kept: these are numbers and names); a bad escape
/// is a 400, not a pair silently dropped.
fn query_pairs(req: &Request) -> Result<Vec<QueryPair<'_>>, Box<Response>> {
    split_query(req.query())
        .map(
            |(k, v)| match (percent_decode(k, false), percent_decode(v, false)) {
                (Some(k), Some(v)) => Ok((k, v)),
                _ => Err(Box::new(json_error(
                    StatusCode::BAD_REQUEST,
                    &format!("query {k}: bad percent escape or not UTF-8 in {v:?}"),
                ))),
            },
        )
        .collect()
}

/// A decoded query pair, borrowed from the request where nothing needed decoding.
type QueryPair<'r> = (Cow<'r, str>, Cow<'r, str>);

/// `pairs` as the `&str` pairs the API takes.
fn borrowed<'a>(pairs: &'a [QueryPair<'_>]) -> Vec<(&'a str, &'a str)> {
    pairs.iter().map(|(k, v)| (&**k, &**v)).collect()
}

/// `GET /all/subscribe`: `$all` from the requested position on, as server-sent events.
fn subscribe(store: &Store, req: &Request, keep_alive: Duration) -> Response {
    let last_event_id = match header(req, LAST_EVENT_ID_HEADER) {
        Ok(v) => v,
        Err(resp) => return *resp,
    };
    let query = match query_pairs(req) {
        Ok(q) => q,
        Err(resp) => return *resp,
    };
    let from = match api::subscribe_from(&borrowed(&query), last_event_id) {
        Ok(from) => from,
        Err(resp) => return into_response(resp),
    };
    let events = sse_stream(store.subscribe_all(from), from, keep_alive);
    Response::new(StatusCode::OK, Body::stream(events))
        .with_header("content-type", api::SSE_CONTENT_TYPE)
        .with_header("cache-control", "no-cache")
        // nginx would otherwise buffer the stream and deliver events late.
        .with_header("x-accel-buffering", "no")
}

/// The state of one subscription's body stream.
struct Sse {
    subscription: Subscription,
    keep_alive: Duration,
    /// Set until the opening comment is sent: the position the subscription starts at.
    opening: Option<u64>,
    /// The subscription failed or ended; the stream ends after the current chunk.
    finished: bool,
}

/// The body of a subscription: an opening comment (so the client gets the response head at
/// once, before any event), then one chunk per batch of ready events, or a keep-alive comment
/// after `keep_alive` without one. Ends when the subscription fails, with a comment saying so; an
/// `EventSource` then reconnects with `Last-Event-ID` and resumes after the last event it got.
fn sse_stream(
    subscription: Subscription,
    from: u64,
    keep_alive: Duration,
) -> impl Stream<Item = Result<IoList, BoxError>> + Send + 'static {
    let state = Sse {
        subscription,
        keep_alive,
        opening: Some(from),
        finished: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.finished {
            return None;
        }
        if let Some(from) = st.opening.take() {
            let hello = format!(": galleon $all from position {from}\n\n");
            return Some((Ok(IoList::from(hello)), st));
        }
        let first = match tokio::time::timeout(st.keep_alive, st.subscription.next()).await {
            Err(_silence) => {
                let mut chunk = IoList::new();
                chunk.push_static(KEEP_ALIVE_FRAME);
                return Some((Ok(chunk), st));
            }
            Ok(item) => item,
        };
        let mut chunk = IoList::new();
        let mut item = first;
        let mut frames = 0;
        loop {
            match item {
                Some(Ok(event)) => {
                    chunk.push_bytes(api::sse_frame(&event));
                    frames += 1;
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "event subscription failed; ending the stream");
                    chunk.push_bytes(Bytes::from(format!(
                        ": subscription failed: {}\n\n",
                        one_line(&e.to_string())
                    )));
                    st.finished = true;
                    break;
                }
                // A subscription only ends after an error, but do not rely on it.
                None => {
                    st.finished = true;
                    break;
                }
            }
            if frames >= SSE_BATCH_EVENTS || chunk.len() >= SSE_BATCH_BYTES {
                break;
            }
            // Take more only if they are ready now: a live event is never held back.
            match st.subscription.next().now_or_never() {
                Some(next) => item = next,
                None => break,
            }
        }
        if chunk.is_empty() {
            return None;
        }
        Some((Ok(chunk), st))
    })
}

/// `text` on one line, so it fits in an SSE comment.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// The value of header `name`: `Ok(None)` when absent, a 400 when it is not UTF-8 (treating it
/// as absent would, for `ES-Expected-Version`, turn a guarded append into an unguarded one).
fn header<'r>(req: &'r Request, name: &str) -> Result<Option<&'r str>, Box<Response>> {
    match req.header(name) {
        None => Ok(None),
        Some(raw) => std::str::from_utf8(raw).map(Some).map_err(|_| {
            Box::new(json_error(
                StatusCode::BAD_REQUEST,
                &format!("header {name}: the value is not UTF-8"),
            ))
        }),
    }
}

/// An [`api::ApiResponse`] as a [`Response`]: same status, content type and bytes.
fn into_response(resp: api::ApiResponse) -> Response {
    Response::new(StatusCode(resp.status), IoList::from(resp.body))
        .with_header("content-type", resp.content_type)
}

/// `{"error": message}` with `status`, shaped like the API's own errors.
/// A stream id whose percent-escapes do not decode: a JSON 400, like every API answer.
fn bad_stream_id(_req: &Request) -> Response {
    json_error(
        StatusCode::BAD_REQUEST,
        "stream id: malformed percent-escape or not UTF-8",
    )
}

fn json_error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    Response::new(status, body).with_header("content-type", api::JSON_CONTENT_TYPE)
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

    #[test]
    fn error_text_fits_one_comment_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
    }
}
