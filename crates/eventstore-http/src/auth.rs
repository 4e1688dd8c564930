//! Who may use the API: a bearer token per [`Role`], checked per route.
//!
//! | role | may |
//! |---|---|
//! | `read` | read streams, `$all` and categories; subscribe; consume and acknowledge a persistent subscription |
//! | `append` | append (`POST /streams/{id}`) |
//! | `admin` | everything, and create or delete persistent subscriptions, set stream metadata, soft-delete streams |
//!
//! A request sends `Authorization: Bearer TOKEN`; a missing or unknown token is 401 (with
//! `www-authenticate: Bearer`), a token without the role 403. A role with no token configured
//! is open, except `admin` once any token is set. With no token at all the API is open to
//! whoever reaches the port.

use std::fmt;

use crate::response::ApiResponse;

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Reading, subscribing, consuming and acknowledging.
    Read,
    /// Appending.
    Append,
    /// Managing persistent subscriptions and stream metadata (and everything else).
    Admin,
}

impl Role {
    /// `read`, `append` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Append => "append",
            Role::Admin => "admin",
        }
    }

    /// What a 403 says the token may not do.
    fn verb(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Append => "append",
            Role::Admin => "manage subscriptions or streams",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Shortest token accepted: 16 bytes, so a token cannot be guessed by trying.
pub const MIN_TOKEN_LEN: usize = 16;

/// The configured tokens (`None`: that role is open). `Debug` shows which are set, never the
/// tokens.
///
/// # Examples
/// ```
/// use galleon_eventstore_http::{Access, Role};
///
/// let access = Access {
///     admin: Some("admin-token-0123456789".into()),
///     ..Access::default()
/// };
/// assert!(access.validate().is_ok());
/// let short = Access { read: Some("short".into()), ..Access::default() };
/// assert_eq!(short.validate().unwrap_err().role, Role::Read);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Token of the `read` role.
    pub read: Option<String>,
    /// Token of the `append` role.
    pub append: Option<String>,
    /// Token of the `admin` role, which may do everything.
    pub admin: Option<String>,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("read", &self.read.is_some())
            .field("append", &self.append.is_some())
            .field("admin", &self.admin.is_some())
            .finish()
    }
}

/// A configured token of the wrong shape ([`Access::validate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidToken {
    /// The role whose token it is.
    pub role: Role,
}

impl InvalidToken {
    /// What a token must be, for a message naming where it came from (a flag, a variable).
    pub fn rule(&self) -> String {
        format!("expected at least {MIN_TOKEN_LEN} visible ASCII characters, no spaces")
    }
}

impl fmt::Display for InvalidToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} token: {}", self.role, self.rule())
    }
}

impl std::error::Error for InvalidToken {}

impl Access {
    /// True when no role has a token: the API is open.
    pub fn is_open(&self) -> bool {
        self.read.is_none() && self.append.is_none() && self.admin.is_none()
    }

    /// Checks the tokens' shape (at least [`MIN_TOKEN_LEN`] visible ASCII characters); the
    /// error names the role, never the token.
    pub fn validate(&self) -> Result<(), InvalidToken> {
        for (role, token) in [
            (Role::Read, &self.read),
            (Role::Append, &self.append),
            (Role::Admin, &self.admin),
        ] {
            if let Some(t) = token
                && !(t.len() >= MIN_TOKEN_LEN && t.bytes().all(|b| b.is_ascii_graphic()))
            {
                return Err(InvalidToken { role });
            }
        }
        Ok(())
    }

    /// `None` when a request with this `Authorization` value may do what `role` allows, else
    /// the 401 or 403 to answer.
    pub(crate) fn check(&self, authorization: Option<&[u8]>, role: Role) -> Option<ApiResponse> {
        let needed = match role {
            Role::Read => &self.read,
            Role::Append => &self.append,
            Role::Admin => &self.admin,
        };
        if needed.is_none() && (role != Role::Admin || self.is_open()) {
            return None;
        }
        let Some(given) = authorization.and_then(bearer) else {
            return Some(unauthorized(
                "this route needs `Authorization: Bearer TOKEN`",
            ));
        };
        let matches = |t: &Option<String>| t.as_deref().is_some_and(|t| same(t, given));
        if matches(&self.admin) || matches(needed) {
            return None;
        }
        let known = matches(&self.read) || matches(&self.append);
        Some(if known {
            ApiResponse::error(403, &format!("this token may not {}", role.verb()))
        } else {
            unauthorized("unknown token")
        })
    }
}

/// The token of `Bearer TOKEN`, if the header value has that shape.
fn bearer(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Equal strings, compared in time that depends on the length only (not on where they differ).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn unauthorized(message: &str) -> ApiResponse {
    ApiResponse::error(401, message).with_header("www-authenticate", "Bearer")
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: &str = "read-token-0123456789";
    const A: &str = "append-token-0123456789";
    const M: &str = "admin-token-0123456789";

    fn status(access: &Access, token: Option<&str>, role: Role) -> u16 {
        let auth = token.map(|t| format!("Bearer {t}"));
        access
            .check(auth.as_deref().map(str::as_bytes), role)
            .map_or(200, |r| r.status)
    }

    #[test]
    fn each_token_grants_its_role_and_admin_grants_all() {
        let access = Access {
            read: Some(R.into()),
            append: Some(A.into()),
            admin: Some(M.into()),
        };
        for (token, read, append, admin) in [
            (Some(R), 200, 403, 403),
            (Some(A), 403, 200, 403),
            (Some(M), 200, 200, 200),
            (Some("nope-nope-nope-nope"), 401, 401, 401),
            (None, 401, 401, 401),
        ] {
            assert_eq!(status(&access, token, Role::Read), read, "{token:?} read");
            assert_eq!(
                status(&access, token, Role::Append),
                append,
                "{token:?} append"
            );
            assert_eq!(
                status(&access, token, Role::Admin),
                admin,
                "{token:?} admin"
            );
        }
        let r = access.check(None, Role::Read).unwrap();
        assert_eq!(r.headers, [("www-authenticate", "Bearer".to_owned())]);
        let r = access.check(Some(R.as_bytes()), Role::Read).unwrap();
        assert_eq!(r.status, 401, "a token without `Bearer` is no token");
        let r = access.check(Some(b"Bearer \xff"), Role::Read).unwrap();
        assert_eq!(r.status, 401, "nor is one that is not UTF-8");
    }

    #[test]
    fn a_role_without_a_token_is_open_but_admin_needs_one_once_any_is_set() {
        let open = Access::default();
        assert!(open.is_open());
        assert_eq!(status(&open, None, Role::Admin), 200);
        let append_only = Access {
            append: Some(A.into()),
            ..Access::default()
        };
        assert_eq!(status(&append_only, None, Role::Read), 200);
        assert_eq!(status(&append_only, None, Role::Append), 401);
        // Management is never left open once the API is protected at all.
        assert_eq!(status(&append_only, None, Role::Admin), 401);
        assert_eq!(status(&append_only, Some(A), Role::Admin), 403);
    }

    #[test]
    fn tokens_are_checked_at_start_and_never_printed() {
        let short = Access {
            read: Some("short".into()),
            ..Access::default()
        };
        let e = short.validate().unwrap_err();
        assert_eq!(e.role, Role::Read);
        assert_eq!(
            e.to_string(),
            "the read token: expected at least 16 visible ASCII characters, no spaces"
        );
        assert!(!e.to_string().contains("short"));
        let spaced = Access {
            admin: Some("has a space in it, long".into()),
            ..Access::default()
        };
        assert_eq!(spaced.validate().unwrap_err().role, Role::Admin);
        let ok = Access {
            read: Some(R.into()),
            ..Access::default()
        };
        assert!(ok.validate().is_ok());
        assert!(!format!("{ok:?}").contains(R));
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "abcd"));
        assert_eq!(bearer(format!("bearer  {R} ").as_bytes()), Some(R));
    }
}
