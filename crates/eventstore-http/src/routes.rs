//! The route table, written once: each route's method, path pattern, role and endpoint, and how
//! a raw request path resolves against it (with the 405, bad-escape and 404 answers).
//!
//! Resolution follows galleon-http's [`Router`](galleon_http::Router) rule for rule, so the two
//! mounts answer alike: routes are tried in table order; `HEAD` takes the `GET` route; a path
//! that other methods match is 405 with `allow` listing them in table order (`HEAD` after `GET`);
//! a path of a route's shape whose escapes do not decode is a JSON 400.

use std::borrow::Cow;

use galleon_http::percent_decode;

use crate::auth::Role;
use crate::response::ApiResponse;

/// What a route does; [`crate::EventsApi`] dispatches on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Append,
    ReadStream,
    StreamMetadata,
    SetStreamMetadata,
    DeleteStream,
    ReadAll,
    ReadCategory,
    Subscribe,
    ListSubscriptions,
    CreateSubscription,
    SubscriptionInfo,
    DeleteSubscription,
    Ack,
    Consume,
}

/// What a route's one path parameter names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param {
    Stream,
    Category,
    Subscription,
}

impl Param {
    /// How the "missing or contains `/`" 404 names it (`stream id`, `category`, `name`).
    fn noun(self) -> &'static str {
        match self {
            Param::Stream => "stream id",
            Param::Category => "category",
            Param::Subscription => "name",
        }
    }
}

/// One route of the API: method, path pattern (`{name}` is one non-empty segment) and the role
/// a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    method: &'static str,
    pattern: &'static str,
    role: Role,
    pub(crate) endpoint: Endpoint,
    param: Option<Param>,
}

impl Route {
    /// The method's token (`GET`, `POST`, `PUT`, `DELETE`); a `GET` route also answers `HEAD`.
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// The path pattern, in the syntax both galleon-http and axum 0.8 take (`/streams/{id}`).
    pub fn pattern(&self) -> &'static str {
        self.pattern
    }

    /// The role a request needs (see [`crate::Access`]).
    pub fn role(&self) -> Role {
        self.role
    }

    /// The answer to a path of this route's shape whose percent-escapes do not decode.
    pub(crate) fn bad_escape(&self) -> ApiResponse {
        match self.param {
            Some(Param::Stream) => {
                ApiResponse::error(400, "stream id: malformed percent-escape or not UTF-8")
            }
            _ => ApiResponse::error(
                400,
                "path: malformed percent-escape or not UTF-8 in the name",
            ),
        }
    }

    /// The decoded path parameter, checked: non-empty and without `/` (which an escaped `%2F`
    /// could put in), else a JSON 404.
    pub(crate) fn param<'p>(&self, value: Option<&'p str>) -> Result<&'p str, ApiResponse> {
        let noun = self.param.map_or("parameter", Param::noun);
        match value {
            Some(s) if !s.is_empty() && !s.contains('/') => Ok(s),
            _ => Err(ApiResponse::error(
                404,
                &format!("no such route: the {noun} is missing or contains `/`"),
            )),
        }
    }
}

const fn route(
    method: &'static str,
    pattern: &'static str,
    role: Role,
    endpoint: Endpoint,
    param: Option<Param>,
) -> Route {
    Route {
        method,
        pattern,
        role,
        endpoint,
        param,
    }
}

/// The table. Its order is the order of the `allow` header of a 405.
static ROUTES: [Route; 14] = {
    use Endpoint as E;
    use Param::{Category, Stream, Subscription};
    use Role::{Admin, Append, Read};
    [
        route("POST", "/streams/{id}", Append, E::Append, Some(Stream)),
        route("GET", "/streams/{id}", Read, E::ReadStream, Some(Stream)),
        route(
            "GET",
            "/streams/{id}/metadata",
            Read,
            E::StreamMetadata,
            Some(Stream),
        ),
        route(
            "PUT",
            "/streams/{id}/metadata",
            Admin,
            E::SetStreamMetadata,
            Some(Stream),
        ),
        // A `POST` to a path of its own, so that a stray `DELETE` of a stream URL deletes nothing.
        route(
            "POST",
            "/streams/{id}/delete",
            Admin,
            E::DeleteStream,
            Some(Stream),
        ),
        route("GET", "/all", Read, E::ReadAll, None),
        route(
            "GET",
            "/categories/{category}",
            Read,
            E::ReadCategory,
            Some(Category),
        ),
        route("GET", "/all/subscribe", Read, E::Subscribe, None),
        route("GET", "/subscriptions", Read, E::ListSubscriptions, None),
        route(
            "PUT",
            "/subscriptions/{name}",
            Admin,
            E::CreateSubscription,
            Some(Subscription),
        ),
        route(
            "GET",
            "/subscriptions/{name}",
            Read,
            E::SubscriptionInfo,
            Some(Subscription),
        ),
        route(
            "DELETE",
            "/subscriptions/{name}",
            Admin,
            E::DeleteSubscription,
            Some(Subscription),
        ),
        // Consumers acknowledge with the read token.
        route(
            "POST",
            "/subscriptions/{name}/ack",
            Read,
            E::Ack,
            Some(Subscription),
        ),
        route(
            "GET",
            "/subscriptions/{name}/events",
            Read,
            E::Consume,
            Some(Subscription),
        ),
    ]
};

/// Every route of the API, in the order they are tried.
///
/// # Examples
/// ```
/// use galleon_eventstore_http::{Role, routes};
///
/// let append = routes().iter().find(|r| r.method() == "POST").unwrap();
/// assert_eq!((append.pattern(), append.role()), ("/streams/{id}", Role::Append));
/// ```
pub fn routes() -> &'static [Route] {
    &ROUTES
}

/// What a method and a raw path resolve to.
#[derive(Debug)]
pub(crate) enum Resolved<'p> {
    /// The route and its decoded parameter, if it has one.
    Route(&'static Route, Option<Cow<'p, str>>),
    /// The path exists under other methods: the answer (405 with `allow`).
    Refused(ApiResponse),
    /// No route has this path.
    NotFound,
}

/// How a raw path compares with a pattern.
enum Shape<'p> {
    No,
    /// Matches; the decoded parameter.
    Yes(Option<Cow<'p, str>>),
    /// Has the shape, but an escape of the parameter does not decode.
    BadEscape,
}

fn shape<'p>(pattern: &str, path: &'p str) -> Shape<'p> {
    let Some(rest) = path.strip_prefix('/') else {
        return Shape::No;
    };
    let mut pieces = pattern[1..].split('/');
    let mut segments = rest.split('/');
    let mut param = None;
    let mut bad = false;
    loop {
        match (pieces.next(), segments.next()) {
            (None, None) => break,
            (Some(piece), Some(segment)) if piece.starts_with('{') => {
                if segment.is_empty() {
                    return Shape::No;
                }
                match percent_decode(segment, false) {
                    Some(decoded) => param = Some(decoded),
                    None => bad = true,
                }
            }
            (Some(piece), Some(segment)) if piece == segment => {}
            _ => return Shape::No,
        }
    }
    if bad {
        Shape::BadEscape
    } else {
        Shape::Yes(param)
    }
}

/// Resolves `method` and the raw `path` against the table.
pub(crate) fn resolve<'p>(method: &str, path: &'p str) -> Resolved<'p> {
    let mut allowed: Vec<&'static str> = Vec::new();
    let mut head_fallback = None;
    let mut bad_escape: Option<&'static Route> = None;
    for r in &ROUTES {
        match shape(r.pattern, path) {
            Shape::No => continue,
            Shape::BadEscape => {
                // That of the first route of this shape for the method, else of any.
                let better = bad_escape.is_none_or(|b| b.method != method && r.method == method);
                if better {
                    bad_escape = Some(r);
                }
                continue;
            }
            Shape::Yes(param) => {
                if r.method == method {
                    return Resolved::Route(r, param);
                }
                if method == "HEAD" && r.method == "GET" && head_fallback.is_none() {
                    head_fallback = Some((r, param));
                }
                if !allowed.contains(&r.method) {
                    allowed.push(r.method);
                }
            }
        }
    }
    if let Some((r, param)) = head_fallback {
        return Resolved::Route(r, param);
    }
    if !allowed.is_empty() {
        if allowed.contains(&"GET") && !allowed.contains(&"HEAD") {
            allowed.push("HEAD");
        }
        return Resolved::Refused(method_not_allowed(&allowed));
    }
    match bad_escape {
        Some(r) => Resolved::Refused(r.bad_escape()),
        None => Resolved::NotFound,
    }
}

/// 405 with `allow`, in galleon-http's router's shape (its text body, its header).
fn method_not_allowed(allowed: &[&str]) -> ApiResponse {
    ApiResponse {
        status: 405,
        content_type: "text/plain; charset=utf-8",
        headers: vec![("allow", allowed.join(", "))],
        body: bytes::Bytes::from_static(b"405 method not allowed\n"),
    }
}

/// A path no route has: a JSON 404.
pub(crate) fn not_found() -> ApiResponse {
    ApiResponse::error(404, "no such route")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(method: &str, path: &str) -> Option<(Endpoint, Option<String>)> {
        match resolve(method, path) {
            Resolved::Route(r, p) => Some((r.endpoint, p.map(Cow::into_owned))),
            _ => None,
        }
    }

    fn refused(method: &str, path: &str) -> ApiResponse {
        match resolve(method, path) {
            Resolved::Refused(r) => r,
            other => panic!("{method} {path}: {other:?}"),
        }
    }

    #[test]
    fn paths_resolve_to_their_endpoints_with_decoded_parameters() {
        assert_eq!(
            endpoint("POST", "/streams/order-1"),
            Some((Endpoint::Append, Some("order-1".into())))
        );
        assert_eq!(
            endpoint("GET", "/streams/a%20b/metadata"),
            Some((Endpoint::StreamMetadata, Some("a b".into())))
        );
        assert_eq!(
            endpoint("HEAD", "/all"),
            Some((Endpoint::ReadAll, None)),
            "HEAD takes the GET route"
        );
        assert_eq!(
            endpoint("GET", "/all/subscribe"),
            Some((Endpoint::Subscribe, None))
        );
        assert_eq!(
            endpoint("DELETE", "/subscriptions/mail"),
            Some((Endpoint::DeleteSubscription, Some("mail".into())))
        );
        // An escaped slash decodes into the parameter, for the route to refuse.
        assert_eq!(
            endpoint("GET", "/streams/a%2Fb"),
            Some((Endpoint::ReadStream, Some("a/b".into())))
        );
        for path in [
            "/streams/",
            "/streams",
            "/all/",
            "/streams/a/b",
            "all",
            "/nope",
        ] {
            assert!(matches!(resolve("GET", path), Resolved::NotFound), "{path}");
        }
    }

    #[test]
    fn other_methods_get_405_with_the_allowed_ones_in_table_order() {
        let r = refused("DELETE", "/streams/order-1");
        assert_eq!(r.status, 405);
        assert_eq!(r.headers, [("allow", "POST, GET, HEAD".to_owned())]);
        let r = refused("POST", "/all");
        assert_eq!(r.headers, [("allow", "GET, HEAD".to_owned())]);
        let r = refused("PATCH", "/subscriptions/x");
        assert_eq!(r.headers, [("allow", "PUT, GET, DELETE, HEAD".to_owned())]);
        let r = refused("GET", "/streams/x/delete");
        assert_eq!(r.headers, [("allow", "POST".to_owned())]);
    }

    #[test]
    fn bad_escapes_are_json_400_naming_the_parameter() {
        for (method, path, says) in [
            ("GET", "/streams/a%zz", "stream id"),
            ("POST", "/streams/a%ff", "stream id"),
            ("PUT", "/streams/%e2%28/metadata", "stream id"),
            ("GET", "/categories/%zz", "in the name"),
            ("POST", "/subscriptions/%ff/ack", "in the name"),
        ] {
            let r = refused(method, path);
            assert_eq!(r.status, 400, "{path}");
            assert!(String::from_utf8_lossy(&r.body).contains(says), "{path}");
        }
    }

    #[test]
    fn parameters_must_be_one_segment() {
        let r = &ROUTES[0];
        assert_eq!(r.param(Some("s-1")).unwrap(), "s-1");
        for bad in [None, Some(""), Some("a/b")] {
            let resp = r.param(bad).unwrap_err();
            assert_eq!(resp.status, 404);
            assert!(String::from_utf8_lossy(&resp.body).contains("the stream id is missing"));
        }
    }

    #[test]
    fn every_pattern_is_distinct_per_method() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(
                    (a.method, a.pattern) != (b.method, b.pattern),
                    "{} {} twice",
                    a.method,
                    a.pattern
                );
            }
        }
    }
}
