//! The galleon-http mount: every route of the table on a [`Router`], each a thin handler that
//! hands the request to [`EventsApi::handle`] and turns the [`ApiReply`] into a [`Response`]
//! (an event stream into a streamed body, one gathered write per chunk).

use futures::StreamExt as _;
use galleon_http::{Body, BoxError, IoList, Method, Request, Response, Router, StatusCode};

use crate::api::{ApiReply, EventsApi};
use crate::request::ApiRequest;
use crate::routes::routes;
use crate::sse::EventStream;

impl EventsApi {
    /// A galleon-http [`Router`] with the API's routes and nothing else.
    ///
    /// # Examples
    /// ```
    /// use bytes::Bytes;
    /// use galleon_eventstore::Store;
    /// use galleon_eventstore_http::EventsApi;
    /// use galleon_http::{Method, Request};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(&format!("sqlite:{}", dir.path().join("e.db").display())).await.unwrap();
    /// let router = EventsApi::new(store).router();
    /// let body = Bytes::from_static(br#"[{"type":"Placed","data":{}}]"#);
    /// let resp = router.handle(Request::new(Method::Post, "/streams/order-1", &[], body)).await;
    /// assert_eq!(resp.status().0, 201);
    /// let resp = router.handle(Request::new(Method::Get, "/all", &[], Bytes::new())).await;
    /// assert_eq!(resp.status().0, 200);
    /// # });
    /// ```
    pub fn router(&self) -> Router {
        self.mount(Router::new())
    }

    /// Adds the API's routes to `router` (beside a site's pages, say), each answering a path of
    /// its shape whose escapes do not decode with the API's JSON 400.
    ///
    /// The server's own request body limit ([`galleon_http::Limits::max_body_bytes`]) is checked
    /// before the API's ([`crate::ApiLimits::max_body_bytes`]); the server ends the event streams
    /// at shutdown.
    pub fn mount(&self, mut router: Router) -> Router {
        for route in routes() {
            let api = self.clone();
            let handler = move |req: Request| {
                let api = api.clone();
                async move { into_response(api.handle(api_request(&req)).await) }
            };
            router = router
                .route(Method::from_token(route.method()), route.pattern(), handler)
                .on_bad_escape(move |_req: &Request| {
                    into_response(ApiReply::Response(route.bad_escape()))
                });
        }
        router
    }
}

/// `req` as the API reads it.
fn api_request(req: &Request) -> ApiRequest<'_> {
    let mut r = ApiRequest::new(req.method().as_str(), req.path(), req.query(), req.body());
    for name in ApiRequest::HEADERS {
        if let Some(value) = req.header(name) {
            r = r.with_header(name, value);
        }
    }
    r
}

/// The API's answer as a galleon-http response: same status, headers and bytes.
fn into_response(reply: ApiReply) -> Response {
    match reply {
        ApiReply::Response(r) => {
            let mut resp = Response::new(StatusCode(r.status), IoList::from(r.body))
                .with_header("content-type", r.content_type);
            for (name, value) in r.headers {
                resp = resp.with_header(name, value);
            }
            resp
        }
        ApiReply::Events(events) => {
            let mut resp = Response::new(StatusCode::OK, Body::stream(chunks(events)));
            for (name, value) in EventStream::HEADERS {
                resp = resp.with_header(name, value);
            }
            resp
        }
    }
}

/// Each chunk of `events` as one [`IoList`] of its shared buffers.
fn chunks(
    events: EventStream,
) -> impl futures::Stream<Item = Result<IoList, BoxError>> + Send + 'static {
    events.map(|chunk| Ok(chunk.into_iter().collect::<IoList>()))
}
