//! The axum mount (feature `axum`): each pattern of the route table claimed on an
//! [`axum::Router`] for every method, each request read (its body up to the API's limit) and
//! handed to [`EventsApi::handle`], which resolves the method itself, so 405s and bad escapes
//! answer as on galleon-http; an event stream becomes a streamed body.

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;

use crate::api::{ApiReply, EventsApi};
use crate::request::ApiRequest;
use crate::response::ApiResponse;
use crate::routes::routes;
use crate::sse::EventStream;

impl EventsApi {
    /// An [`axum::Router`] with the API's routes, for any state `S` (merge it into an
    /// application's router, or nest it: the API sees the path below the prefix).
    ///
    /// Request bodies are read up to [`crate::ApiLimits::max_body_bytes`] (a longer one is 413,
    /// refused at once when its `content-length` says so); axum's `DefaultBodyLimit` does not
    /// apply. axum's graceful shutdown waits for every response to end, and an event stream
    /// does not end by itself: call [`EventsApi::shutdown`] in the shutdown future.
    ///
    /// # Examples
    /// ```
    /// use galleon_eventstore::Store;
    /// use galleon_eventstore_http::EventsApi;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(&format!("sqlite:{}", dir.path().join("e.db").display())).await.unwrap();
    /// let api = EventsApi::new(store);
    /// let app: axum::Router = api.axum_router();
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let server = tokio::spawn(axum::serve(listener, app).with_graceful_shutdown(async move {
    ///     let _ = stopped.await;
    ///     api.shutdown(); // ends the event streams, so the shutdown does not wait for them
    /// }).into_future());
    /// stop.send(()).unwrap();
    /// server.await.unwrap().unwrap();
    /// # });
    /// ```
    pub fn axum_router<S>(&self) -> axum::Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        let mut router = axum::Router::new();
        let mut claimed: Vec<&str> = Vec::new();
        for route in routes() {
            if claimed.contains(&route.pattern()) {
                continue;
            }
            claimed.push(route.pattern());
            let api = self.clone();
            let handler = move |req: Request| {
                let api = api.clone();
                async move { serve(&api, req).await }
            };
            router = router.route(route.pattern(), axum::routing::any(handler));
        }
        router
    }
}

/// One request through the API.
async fn serve(api: &EventsApi, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match read_body(body, &parts.headers, api.limits().max_body_bytes).await {
        Ok(body) => body,
        Err(refused) => return into_response(ApiReply::Response(refused)),
    };
    let mut r = ApiRequest::new(
        parts.method.as_str(),
        parts.uri.path(),
        parts.uri.query().unwrap_or(""),
        &body,
    );
    for name in ApiRequest::HEADERS {
        if let Some(value) = parts.headers.get(name) {
            r = r.with_header(name, value.as_bytes());
        }
    }
    into_response(api.handle(r).await)
}

/// The whole body, or the 413 (over `limit` bytes) or 400 (a body that breaks off) to answer.
async fn read_body(body: Body, headers: &HeaderMap, limit: u64) -> Result<Bytes, ApiResponse> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared
        && len > limit
    {
        return Err(ApiResponse::body_too_large(Some(len), limit));
    }
    let mut data = body.into_data_stream();
    let mut out = BytesMut::new();
    while let Some(piece) = data.next().await {
        let piece = piece
            .map_err(|e| ApiResponse::error(400, &format!("reading the request body: {e}")))?;
        if (out.len() + piece.len()) as u64 > limit {
            return Err(ApiResponse::body_too_large(None, limit));
        }
        out.extend_from_slice(&piece);
    }
    Ok(out.freeze())
}

/// The API's answer as an axum response: same status, headers and bytes; an event stream's
/// chunks as the body's frames.
fn into_response(reply: ApiReply) -> Response {
    match reply {
        ApiReply::Response(r) => {
            let mut resp = Response::new(Body::from(r.body));
            *resp.status_mut() =
                StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let headers = resp.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
            for (name, value) in r.headers {
                // The API's own header names and values, valid by construction.
                if let (Ok(name), Ok(value)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::try_from(value),
                ) {
                    headers.append(name, value);
                }
            }
            resp
        }
        ApiReply::Events(events) => {
            let frames = events.flat_map(|chunk| {
                futures::stream::iter(chunk.into_iter().map(Ok::<_, Infallible>))
            });
            let mut resp = Response::new(Body::from_stream(frames));
            let headers = resp.headers_mut();
            for (name, value) in EventStream::HEADERS {
                headers.insert(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            resp
        }
    }
}
