//! [`ApiResponse`]: what a request/response route answers (status, content type, headers, a
//! whole body), and the API's errors as `{"error": ...}`, including how each store error maps to
//! a status.

use bytes::Bytes;
use galleon_eventstore::Error;
use serde::Serialize;

/// Content type of every JSON answer.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// Content type of the event streams (`GET /all/subscribe`, `GET /subscriptions/{name}/events`).
pub const SSE_CONTENT_TYPE: &str = "text/event-stream";

/// An HTTP response with a complete body: status, content type, further headers, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResponse {
    /// Status code.
    pub status: u16,
    /// Value of `Content-Type`.
    pub content_type: &'static str,
    /// Headers besides `Content-Type` (`www-authenticate` on a 401, `allow` on a 405), names in
    /// lowercase.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Bytes,
}

impl ApiResponse {
    /// `value` as JSON with `status`; a 500 in the same shape if it cannot be encoded.
    pub(crate) fn json<T: Serialize>(status: u16, value: &T) -> ApiResponse {
        match serde_json::to_vec(value) {
            Ok(body) => ApiResponse::raw_json(status, Bytes::from(body)),
            Err(e) => ApiResponse::error(500, &format!("cannot encode the response: {e}")),
        }
    }

    /// A JSON body already encoded.
    pub(crate) fn raw_json(status: u16, body: Bytes) -> ApiResponse {
        ApiResponse {
            status,
            content_type: JSON_CONTENT_TYPE,
            headers: Vec::new(),
            body,
        }
    }

    /// `{"error": message}` with `status`.
    pub(crate) fn error(status: u16, message: &str) -> ApiResponse {
        #[derive(Serialize)]
        struct Body<'a> {
            error: &'a str,
        }
        let body = serde_json::to_vec(&Body { error: message }).unwrap_or_else(|_| b"{}".to_vec());
        ApiResponse::raw_json(status, Bytes::from(body))
    }

    /// Adds a header (a lowercase name).
    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// A request body longer than `limit` bytes (`len`, when known): 413, before it is parsed.
    pub(crate) fn body_too_large(len: Option<u64>, limit: u64) -> ApiResponse {
        let message = match len {
            Some(len) => {
                format!("the request body of {len} bytes is over the limit of {limit} bytes")
            }
            None => format!("the request body is over the limit of {limit} bytes"),
        };
        ApiResponse::error(413, &message)
    }

    /// What a store error means to the client: 409 conflicts, 404 unknown streams and
    /// subscriptions, 400 bad input, 503 a store that is briefly unreachable, else a 500 whose
    /// cause goes to the log, not to the client.
    pub(crate) fn from_store_error(e: &Error) -> ApiResponse {
        match e {
            Error::WrongExpectedVersion { expected, actual } => {
                #[derive(Serialize)]
                struct Body {
                    error: String,
                    expected: String,
                    actual: Option<u64>,
                }
                ApiResponse::json(
                    409,
                    &Body {
                        error: e.to_string(),
                        expected: expected.to_string(),
                        actual: *actual,
                    },
                )
            }
            Error::DuplicateEventId(_) => ApiResponse::error(409, &e.to_string()),
            Error::StreamNotFound(_) | Error::SubscriptionNotFound(_) => {
                ApiResponse::error(404, &e.to_string())
            }
            Error::SubscriptionExists(_) | Error::TooManySubscriptions { .. } => {
                ApiResponse::error(409, &e.to_string())
            }
            Error::InvalidInput(_) | Error::InvalidAck { .. } => {
                ApiResponse::error(400, &e.to_string())
            }
            e if e.is_transient() => {
                tracing::warn!(error = %e, "event store unavailable");
                ApiResponse::error(503, "the event store is temporarily unavailable")
            }
            e => {
                tracing::error!(error = %e, "event store request failed");
                ApiResponse::error(500, "internal error in the event store")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use galleon_eventstore::ExpectedVersion;

    fn body(r: &ApiResponse) -> serde_json::Value {
        serde_json::from_slice(&r.body).unwrap()
    }

    #[test]
    fn errors_are_json_with_the_status_the_client_can_act_on() {
        let r = ApiResponse::error(400, "a \"quoted\" message");
        assert_eq!((r.status, r.content_type), (400, JSON_CONTENT_TYPE));
        assert_eq!(
            body(&r),
            serde_json::json!({"error": "a \"quoted\" message"})
        );

        let conflict = ApiResponse::from_store_error(&Error::WrongExpectedVersion {
            expected: ExpectedVersion::NoStream,
            actual: Some(3),
        });
        assert_eq!(conflict.status, 409);
        assert_eq!(body(&conflict)["expected"], "no_stream");
        assert_eq!(body(&conflict)["actual"], 3);
        for (e, status) in [
            (Error::StreamNotFound("s".into()), 404),
            (Error::SubscriptionNotFound("s".into()), 404),
            (Error::SubscriptionExists("s".into()), 409),
            (Error::TooManySubscriptions { limit: 3 }, 409),
            (Error::InvalidInput("bad".into()), 400),
            (
                Error::InvalidAck {
                    position: 9,
                    reason: "no event".into(),
                },
                400,
            ),
            (Error::Closed, 500),
        ] {
            assert_eq!(ApiResponse::from_store_error(&e).status, status, "{e}");
        }
        // A 500 says nothing of the cause.
        let r = ApiResponse::from_store_error(&Error::Corrupt("row 7 of secret_table".into()));
        assert!(!String::from_utf8_lossy(&r.body).contains("secret"));
    }

    #[test]
    fn too_large_names_the_limit() {
        let r = ApiResponse::body_too_large(Some(1001), 1000);
        assert_eq!(r.status, 413);
        assert!(
            body(&r)["error"]
                .as_str()
                .unwrap()
                .contains("1001 bytes is over the limit of 1000")
        );
        assert_eq!(ApiResponse::body_too_large(None, 5).status, 413);
    }
}
