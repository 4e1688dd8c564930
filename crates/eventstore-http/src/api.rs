//! [`EventsApi`]: the store, its limits, tokens and keep-alive, and [`EventsApi::handle`], the
//! one request path both mounts call: resolve the route, check the body's size and the token,
//! decode the parameters once, and answer an [`ApiReply`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use galleon_eventstore::Store;
use tokio::sync::watch;

use crate::auth::Access;
use crate::encode::sse_frame;
use crate::limits::{ApiLimits, DEFAULT_KEEP_ALIVE};
use crate::persistent;
use crate::query::subscribe_query;
use crate::request::{ApiRequest, borrowed};
use crate::response::ApiResponse;
use crate::routes::{Endpoint, Resolved, Route, not_found, resolve};
use crate::sse::{EventStream, StreamControl};
use crate::streams;

/// The event store's HTTP API, independent of any server: what both mounts
/// ([`EventsApi::router`], [`EventsApi::axum_router`](crate::EventsApi)) run.
///
/// Cheap to clone; clones share the store, the tokens and the event streams' shutdown.
///
/// # Examples
/// ```
/// use galleon_eventstore::Store;
/// use galleon_eventstore_http::{ApiReply, ApiRequest, EventsApi};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&format!("sqlite:{}", dir.path().join("e.db").display())).await.unwrap();
/// let api = EventsApi::new(store);
/// let body = br#"[{"type":"Placed","data":{"n":1}}]"#;
/// let req = ApiRequest::new("POST", "/streams/order-1", "", body)
///     .with_header("ES-Expected-Version", b"no_stream");
/// let ApiReply::Response(r) = api.handle(req).await else { unreachable!() };
/// assert_eq!(r.status, 201);
/// let req = ApiRequest::new("GET", "/streams/order-1", "limit=10", b"");
/// let ApiReply::Response(r) = api.handle(req).await else { unreachable!() };
/// assert_eq!(r.status, 200);
/// # });
/// ```
#[derive(Clone)]
pub struct EventsApi {
    store: Store,
    limits: ApiLimits,
    access: Arc<Access>,
    keep_alive: Duration,
    control: Arc<StreamControl>,
}

impl fmt::Debug for EventsApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventsApi")
            .field("backend", &self.store.backend_name())
            .field("limits", &self.limits)
            .field("access", &self.access)
            .field("keep_alive", &self.keep_alive)
            .field("streams", &self.control)
            .finish()
    }
}

/// What the API answers: a whole response, or an event stream.
#[derive(Debug)]
pub enum ApiReply {
    /// Status, content type, headers and a whole body.
    Response(ApiResponse),
    /// `200` with [`EventStream::HEADERS`] and this body, streamed until it ends.
    Events(EventStream),
}

impl EventsApi {
    /// The API over `store`: open (no tokens), [`ApiLimits::default`], keep-alive comments after
    /// [`DEFAULT_KEEP_ALIVE`].
    pub fn new(store: Store) -> EventsApi {
        EventsApi {
            store,
            limits: ApiLimits::default(),
            access: Arc::new(Access::default()),
            keep_alive: DEFAULT_KEEP_ALIVE,
            control: Arc::new(StreamControl::new()),
        }
    }

    /// With these bounds per request.
    pub fn with_limits(mut self, limits: ApiLimits) -> EventsApi {
        self.limits = limits;
        self
    }

    /// Behind these tokens (see [`Access`]; check them first with [`Access::validate`]).
    pub fn with_access(mut self, access: Access) -> EventsApi {
        self.access = Arc::new(access);
        self
    }

    /// With a keep-alive comment after `interval` without an event on a stream.
    ///
    /// # Panics
    /// When `interval` is zero: a stream would send nothing but keep-alives.
    pub fn with_keep_alive(mut self, interval: Duration) -> EventsApi {
        assert!(!interval.is_zero(), "the keep-alive interval must be > 0");
        self.keep_alive = interval;
        self
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The bounds per request.
    pub fn limits(&self) -> &ApiLimits {
        &self.limits
    }

    /// The tokens.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// Ends every open event stream (each sends its last chunk and the response is complete),
    /// and every one opened later at once. galleon-http's server ends event streams at shutdown
    /// by itself; under axum, whose graceful shutdown waits for every response to finish, call
    /// this in the shutdown future (see [`EventsApi::axum_router`](crate::EventsApi)).
    pub fn shutdown(&self) {
        self.control.shutdown();
    }

    /// Event streams open now (made and not yet dropped): a gauge for a stats page.
    pub fn open_streams(&self) -> usize {
        self.control.open_streams()
    }

    /// A receiver of [`EventsApi::open_streams`], to wait for a count (`wait_for`).
    pub fn watch_open_streams(&self) -> watch::Receiver<usize> {
        self.control.watch_open_streams()
    }

    /// Answers one request: 413 for a body over [`ApiLimits::max_body_bytes`]; 405, a JSON 400
    /// (bad escape) or a JSON 404 for a path that is not a route for this method; 401 or 403
    /// without the route's token; then the route's own answer.
    pub async fn handle(&self, req: ApiRequest<'_>) -> ApiReply {
        let len = req.body().len() as u64;
        if len > self.limits.max_body_bytes {
            return ApiReply::Response(ApiResponse::body_too_large(
                Some(len),
                self.limits.max_body_bytes,
            ));
        }
        let (route, param) = match resolve(req.method(), req.path()) {
            Resolved::Route(route, param) => (route, param),
            Resolved::Refused(answer) => return ApiReply::Response(answer),
            Resolved::NotFound => return ApiReply::Response(not_found()),
        };
        if let Some(denied) = self.access.check(req.authorization(), route.role()) {
            return ApiReply::Response(denied);
        }
        let param = param.as_deref();
        match route.endpoint {
            Endpoint::Subscribe => self
                .subscribe(&req)
                .map_or_else(ApiReply::Response, ApiReply::Events),
            Endpoint::Consume => match self.consume(route, param, &req).await {
                Ok(events) => ApiReply::Events(events),
                Err(r) => ApiReply::Response(r),
            },
            _ => ApiReply::Response(self.respond(route, param, &req).await.unwrap_or_else(|r| r)),
        }
    }

    /// The request/response routes; `Err` is an answer too (a bad parameter).
    async fn respond(
        &self,
        route: &Route,
        param: Option<&str>,
        req: &ApiRequest<'_>,
    ) -> Result<ApiResponse, ApiResponse> {
        let (store, limits) = (&self.store, &self.limits);
        Ok(match route.endpoint {
            Endpoint::Append => {
                let stream = route.param(param)?;
                let expected = req.expected_version()?;
                streams::append(store, limits, stream, expected, req.body()).await
            }
            Endpoint::ReadStream => {
                let stream = route.param(param)?;
                let q = req.query_pairs()?;
                streams::read_stream(store, limits, stream, &borrowed(&q)).await
            }
            Endpoint::StreamMetadata => streams::stream_metadata(store, route.param(param)?).await,
            Endpoint::SetStreamMetadata => {
                streams::set_stream_metadata(store, route.param(param)?, req.body()).await
            }
            Endpoint::DeleteStream => streams::delete_stream(store, route.param(param)?).await,
            Endpoint::ReadAll => {
                let q = req.query_pairs()?;
                streams::read_all(store, limits, &borrowed(&q)).await
            }
            Endpoint::ReadCategory => {
                let category = route.param(param)?;
                let q = req.query_pairs()?;
                streams::read_category(store, limits, category, &borrowed(&q)).await
            }
            Endpoint::ListSubscriptions => {
                let q = req.query_pairs()?;
                persistent::list_subscriptions(store, limits, &borrowed(&q)).await
            }
            Endpoint::CreateSubscription => {
                persistent::create_subscription(store, route.param(param)?, req.body()).await
            }
            Endpoint::SubscriptionInfo => {
                persistent::subscription_info(store, route.param(param)?).await
            }
            Endpoint::DeleteSubscription => {
                persistent::delete_subscription(store, route.param(param)?).await
            }
            Endpoint::Ack => persistent::ack(store, route.param(param)?, req.body()).await,
            // Event streams: `handle` answers them before it gets here.
            Endpoint::Subscribe | Endpoint::Consume => not_found(),
        })
    }

    /// `GET /all/subscribe`: `$all` (or the events a `category=`/`type=` filter keeps) from the
    /// requested position on.
    fn subscribe(&self, req: &ApiRequest<'_>) -> Result<EventStream, ApiResponse> {
        let last_event_id = req.last_event_id()?;
        let query = req.query_pairs()?;
        let (from, filter) = subscribe_query(&borrowed(&query), last_event_id)?;
        Ok(self.stream(
            self.store.subscribe_frames(from, filter, sse_frame),
            format!("galleon $all from position {from}"),
        ))
    }

    /// `GET /subscriptions/{name}/events`: the persistent subscription's events from its
    /// checkpoint (or past `Last-Event-ID`); with `?member=M` (a consumer group) the events of
    /// the partitions member `M` holds, each from its partition's checkpoint.
    async fn consume(
        &self,
        route: &Route,
        param: Option<&str>,
        req: &ApiRequest<'_>,
    ) -> Result<EventStream, ApiResponse> {
        let name = route.param(param)?;
        let query = req.query_pairs()?;
        let mut member = None;
        for (k, v) in &query {
            match &**k {
                "member" if member.is_none() => member = Some(&**v),
                "member" => return Err(ApiResponse::error(400, "query member= is given twice")),
                other => {
                    return Err(ApiResponse::error(
                        400,
                        &format!("unknown query parameter {other:?} (this route takes member=)"),
                    ));
                }
            }
        }
        if let Some(member) = member {
            let (_, sub) = persistent::consume_group_from(&self.store, name, member).await?;
            return Ok(self.stream(
                sub.into_frames(sse_frame),
                format!("galleon subscription {name}, consumer group member {member}"),
            ));
        }
        let last_event_id = req.last_event_id()?;
        let (info, from) = persistent::consume_from(&self.store, name, last_event_id).await?;
        Ok(self.stream(
            self.store.subscribe_frames(from, info.filter, sse_frame),
            format!("galleon subscription {name} from position {from}"),
        ))
    }

    fn stream(
        &self,
        subscription: galleon_eventstore::FrameSubscription,
        opening: String,
    ) -> EventStream {
        EventStream::new(subscription, opening, self.keep_alive, &self.control)
    }
}
