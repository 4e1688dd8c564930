//! The diagnostics routes as an `axum::Router`: the same answers as galleon-http's, loopback
//! peers told apart by `ConnectInfo<SocketAddr>`.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};

use crate::diagnostics::{
    Answer, Diagnostics, HEALTH_PATH, JSON_PATH, METRICS_PATH, PAGE_PATH, Route,
};

/// The routes of `d`, for any app state `S`.
pub(crate) fn router<S>(d: Diagnostics) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    [
        (PAGE_PATH, Route::Page),
        (JSON_PATH, Route::Json),
        (METRICS_PATH, Route::Metrics),
        (HEALTH_PATH, Route::Health),
    ]
    .into_iter()
    .fold(axum::Router::new(), |router, (path, route)| {
        let d = d.clone();
        router.route(
            path,
            get(move |req: Request| async move {
                // Without `ConnectInfo` the peer is unknown: not loopback (the unspecified
                // address stands for it; `None` would mean a trusted in-process caller).
                let peer = req
                    .extensions()
                    .get::<ConnectInfo<SocketAddr>>()
                    .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.0);
                let authorization = req.headers().get(header::AUTHORIZATION);
                response(d.answer(route, Some(peer), authorization.map(|v| v.as_bytes())))
            }),
        )
    })
}

fn response(a: Answer) -> http::Response<Body> {
    let mut r = http::Response::new(Body::from(a.body.to_bytes()));
    *r.status_mut() = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(a.content_type),
    );
    if a.no_store {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if a.challenge {
        h.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}
