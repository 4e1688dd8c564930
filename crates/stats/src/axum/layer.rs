//! [`StatsLayer`]: a tower layer that records every request an axum app answers into a
//! [`Stats`]: route (`MatchedPath`), method, status, latency to the response head, and the
//! body's bytes when its size is known up front; and writes the access log.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::extract::{ConnectInfo, MatchedPath};
use http::uri::PathAndQuery;
use http_body::Body;
use tower_layer::Layer;
use tower_service::Service;

use crate::access;
use crate::record::{Answered, RouteKey, Stats};

/// Records every request of the service it wraps into a [`Stats`]; made by
/// [`layer`](crate::axum::layer).
#[derive(Debug, Clone)]
pub struct StatsLayer {
    stats: Arc<Stats>,
}

impl StatsLayer {
    /// A layer recording into `stats` (which then reports [`Source::Axum`]'s figures).
    ///
    /// [`Source::Axum`]: crate::Source::Axum
    pub fn new(stats: &Arc<Stats>) -> StatsLayer {
        stats.mark_axum();
        StatsLayer {
            stats: stats.clone(),
        }
    }
}

impl<S> Layer<S> for StatsLayer {
    type Service = StatsService<S>;

    fn layer(&self, inner: S) -> StatsService<S> {
        StatsService {
            inner,
            stats: self.stats.clone(),
        }
    }
}

/// The service [`StatsLayer`] wraps around each route.
#[derive(Debug, Clone)]
pub struct StatsService<S> {
    inner: S,
    stats: Arc<Stats>,
}

impl<S, B, ResBody> Service<http::Request<B>> for StatsService<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
    ResBody: Body,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> ResponseFuture<S::Future> {
        let config = self.stats.config();
        let pending = (config.record || config.access_log).then(|| Pending {
            stats: self.stats.clone(),
            started: Instant::now(),
            method: req.method().clone(),
            route: req.extensions().get::<MatchedPath>().cloned(),
            target: config
                .access_log
                .then(|| req.uri().path_and_query().cloned())
                .flatten(),
            peer: req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0),
        });
        ResponseFuture {
            inner: self.inner.call(req),
            pending,
        }
    }
}

/// What a request's record needs from its head, kept until its response.
#[derive(Debug)]
struct Pending {
    stats: Arc<Stats>,
    started: Instant,
    method: http::Method,
    route: Option<MatchedPath>,
    target: Option<PathAndQuery>,
    peer: Option<SocketAddr>,
}

impl Pending {
    fn record<ResBody: Body>(self, resp: &http::Response<ResBody>) {
        let elapsed = self.started.elapsed();
        let status = resp.status().as_u16();
        let bytes = resp.body().size_hint().exact();
        let config = self.stats.config();
        if config.access_log {
            access::request(
                self.method.as_str(),
                self.target.as_ref().map_or("", PathAndQuery::as_str),
                status,
                bytes,
                elapsed,
                self.peer,
            );
        }
        self.stats.answered(&Answered {
            method: self.method.as_str(),
            route: self
                .route
                .as_ref()
                .map_or(RouteKey::Unmatched, |m| RouteKey::Labelled(m.as_str())),
            status,
            elapsed,
            bytes: bytes.unwrap_or(0),
            writes: None,
            completed: true,
        });
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`StatsService`]: the inner one, recording its response when it
    /// is ready.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        pending: Option<Pending>,
    }
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<ResBody>, E>>,
    ResBody: Body,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let out = ready!(this.inner.poll(cx));
        if let (Ok(resp), Some(p)) = (&out, this.pending.take()) {
            p.record(resp);
        }
        Poll::Ready(out)
    }
}
