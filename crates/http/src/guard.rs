//! [`Guard`]: who may use a server's diagnostics and control routes (statistics, reloads).
//!
//! By default loopback peers only. Behind a reverse proxy on the same host every client is a
//! loopback peer, so the peer's address guards nothing there: with a token set, every request,
//! loopback included, must send `Authorization: Bearer TOKEN`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::{Request, Response, StatusCode};

/// Fewest characters of a guard token (visible ASCII): a short one could be guessed.
pub const MIN_GUARD_TOKEN_LEN: usize = 16;

/// Who may use the routes a [`Guard`] protects: loopback peers ([`Guard::default`]), any peer
/// ([`Guard::open`], for reading routes only), or only requests with the token
/// ([`Guard::with_token`]).
///
/// # Examples
///
/// ```
/// use galleon_http::{Guard, Method, Request};
/// let guard = Guard::default().with_token("correct-horse-battery-staple").unwrap();
/// let peer = "127.0.0.1:5000".parse().unwrap();
/// let bare = Request::new(Method::Get, "/_galleon", &[], bytes::Bytes::new()).with_peer(peer);
/// assert_eq!(guard.check(&bare).unwrap().status().0, 401, "loopback is not enough");
/// let auth = [("authorization", "Bearer correct-horse-battery-staple")];
/// let sent = Request::new(Method::Get, "/_galleon", &auth, bytes::Bytes::new()).with_peer(peer);
/// assert!(guard.check(&sent).is_none());
/// ```
#[derive(Clone, Default)]
pub struct Guard {
    open: bool,
    token: Option<Arc<str>>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// A guard token that is too short or has characters other than visible ASCII; never shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidGuardToken;

impl std::fmt::Display for InvalidGuardToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a token needs at least {MIN_GUARD_TOKEN_LEN} visible ASCII characters"
        )
    }
}

impl std::error::Error for InvalidGuardToken {}

impl Guard {
    /// Let any peer in (`true`), or loopback peers only (`false`, the default). A token, when
    /// set, is still required.
    pub fn open(mut self, open: bool) -> Guard {
        self.open = open;
        self
    }

    /// Require `Authorization: Bearer TOKEN` from every peer, loopback included.
    pub fn with_token(mut self, token: &str) -> Result<Guard, InvalidGuardToken> {
        if token.len() < MIN_GUARD_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(InvalidGuardToken);
        }
        self.token = Some(token.into());
        Ok(self)
    }

    /// The same token, for a control route (a reload): never open to any peer without it.
    pub fn closed(&self) -> Guard {
        Guard {
            open: false,
            token: self.token.clone(),
        }
    }

    /// One line for the start-up log (never the token).
    pub fn describe(&self) -> &'static str {
        match (&self.token, self.open) {
            (Some(_), _) => "behind a bearer token",
            (None, true) => "open to any peer",
            (None, false) => "loopback peers only",
        }
    }

    /// Whether a request from `peer` (`None`: in-process, trusted) with this `Authorization`
    /// value may pass: `Ok`, or the status (401, 403) and message to answer.
    pub fn allows(
        &self,
        peer: Option<SocketAddr>,
        authorization: Option<&[u8]>,
    ) -> Result<(), (u16, &'static str)> {
        if let Some(token) = &self.token {
            return match authorization.and_then(bearer_token) {
                Some(given) if tokens_equal(token, given) => Ok(()),
                Some(_) => Err((401, "unknown token")),
                None => Err((401, "this route needs `Authorization: Bearer TOKEN`")),
            };
        }
        if self.open || peer.is_none_or(|p| is_loopback(p.ip())) {
            return Ok(());
        }
        Err((403, "this route answers loopback peers only"))
    }

    /// [`Guard::allows`] for a galleon-http request: `None` to go on, or the response to send
    /// (401 with `www-authenticate: Bearer`, or 403).
    pub fn check(&self, req: &Request) -> Option<Response> {
        let (status, message) = self.allows(req.peer(), req.header("authorization")).err()?;
        let r = Response::error(StatusCode(status), message);
        Some(if status == 401 {
            r.with_header("www-authenticate", "Bearer")
        } else {
            r
        })
    }
}

/// Loopback, IPv4-mapped IPv6 loopback (`::ffff:127.0.0.1`) included.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
    }
}

/// The token of an `Authorization: Bearer TOKEN` header's value, if it has that shape (the
/// scheme in any case, spaces around the token ignored, an empty token none).
///
/// # Examples
/// ```
/// assert_eq!(galleon_http::bearer_token(b"Bearer abc"), Some("abc"));
/// assert_eq!(galleon_http::bearer_token(b"Basic abc"), None);
/// ```
pub fn bearer_token(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether two tokens are equal, compared in time that depends on the length only (not on
/// where they differ), so a client cannot find a secret token byte by byte by timing.
pub fn tokens_equal(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "0123456789abcdef-token";

    fn peer(s: &str) -> Option<SocketAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn loopback_only_by_default_and_mapped_loopback_counts() {
        let g = Guard::default();
        assert_eq!(g.allows(peer("127.0.0.1:1"), None), Ok(()));
        assert_eq!(g.allows(peer("[::1]:1"), None), Ok(()));
        assert_eq!(g.allows(peer("[::ffff:127.0.0.1]:1"), None), Ok(()));
        assert_eq!(g.allows(None, None), Ok(()), "in-process");
        assert_eq!(g.allows(peer("192.0.2.7:1"), None).unwrap_err().0, 403);
        assert_eq!(
            g.allows(peer("[::ffff:192.0.2.7]:1"), None).unwrap_err().0,
            403
        );
        assert_eq!(
            g.clone().open(true).allows(peer("192.0.2.7:1"), None),
            Ok(())
        );
        assert_eq!(
            g.open(true)
                .closed()
                .allows(peer("192.0.2.7:1"), None)
                .unwrap_err()
                .0,
            403
        );
    }

    #[test]
    fn a_token_is_required_from_every_peer_loopback_included() {
        let g = Guard::default().open(true).with_token(T).unwrap();
        let ok = format!("Bearer {T}");
        for p in [peer("127.0.0.1:1"), peer("192.0.2.7:1"), None] {
            assert_eq!(g.allows(p, None).unwrap_err().0, 401);
            assert_eq!(g.allows(p, Some(b"Bearer nope")).unwrap_err().0, 401);
            assert_eq!(
                g.allows(p, Some(T.as_bytes())).unwrap_err().0,
                401,
                "no scheme"
            );
            assert_eq!(g.allows(p, Some(ok.as_bytes())), Ok(()));
            assert_eq!(g.closed().allows(p, Some(ok.as_bytes())), Ok(()));
        }
        assert_eq!(g.describe(), "behind a bearer token");
        assert!(!format!("{g:?}").contains(T), "the token is never printed");
    }

    #[test]
    fn short_or_invisible_tokens_are_refused() {
        assert_eq!(
            Guard::default().with_token("short").unwrap_err(),
            InvalidGuardToken
        );
        let spaced = "0123456789 abcdef";
        assert!(Guard::default().with_token(spaced).is_err());
    }
}
