//! Who may use the API: a bearer token per [`Role`], checked per route.
//!
//! | role | may |
//! |---|---|
//! | `read` | read streams, `$all` and categories; subscribe; consume and acknowledge a persistent subscription |
//! | `append` | append (`POST /streams/{id}`) |
//! | `admin` | everything, and create or delete persistent subscriptions, set stream metadata, soft-delete streams |
//!
//! A request sends `Authorization: Bearer TOKEN`; a missing or unknown token is 401 (with
//! `www-authenticate: Bearer`), a token without the role 403. With no token at all the API is
//! open to whoever reaches the port. Once any token is set, a role without a token of its own
//! takes the admin token only (a request without one is 401), unless [`OpenRoles`] opens it
//! explicitly (`read` or `append`; `admin` is never opened while a token is set).

use std::fmt;

use galleon_http::{bearer_token, tokens_equal};

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

/// The configured tokens, and the roles left open on purpose. `Debug` shows which tokens are
/// set, never the tokens.
///
/// With no token at all every role is open. Once any token is set, a role is open only if
/// [`OpenRoles`] says so; otherwise it needs its own token or the admin token (without a token
/// of its own: the admin token only, and `admin` without a token: nobody).
///
/// # Examples
/// ```
/// use galleon_eventstore_http::{Access, OpenRoles, Role};
///
/// let access = Access {
///     admin: Some("admin-token-0123456789".into()),
///     ..Access::default()
/// };
/// assert!(access.validate().is_ok());
/// assert!(!access.is_role_open(Role::Read), "any token closes every role");
/// assert_eq!(access.describe(), "read admin token only, append admin token only, admin token");
///
/// let public_reads = Access {
///     open: OpenRoles { read: true, append: false },
///     ..access
/// };
/// assert!(public_reads.is_role_open(Role::Read));
/// assert_eq!(public_reads.describe(), "read open, append admin token only, admin token");
///
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
    /// Roles served without a token although tokens are set (none by default).
    pub open: OpenRoles,
}

/// Roles served to anyone even though some token is set ([`Access::open`]). An opened role
/// needs no token, so it should have none ([`Access::validate`] refuses both). `admin` cannot
/// be opened: an API without tokens is the way to leave everything open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenRoles {
    /// Anyone may read, subscribe, consume and acknowledge.
    pub read: bool,
    /// Anyone may append.
    pub append: bool,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("read", &self.read.is_some())
            .field("append", &self.append.is_some())
            .field("admin", &self.admin.is_some())
            .field("open", &self.open)
            .finish()
    }
}

/// A configured token of the wrong shape, or a role both opened and given a token
/// ([`Access::validate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidToken {
    /// The role whose token it is.
    pub role: Role,
    /// True when the role is opened ([`OpenRoles`]) and has a token too, whatever its shape.
    pub opened: bool,
}

impl InvalidToken {
    /// What a token must be, for a message naming where it came from (a flag, a variable).
    pub fn rule(&self) -> String {
        if self.opened {
            format!("the {} role is opened, so it takes no token", self.role)
        } else {
            format!("expected at least {MIN_TOKEN_LEN} visible ASCII characters, no spaces")
        }
    }
}

impl fmt::Display for InvalidToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} token: {}", self.role, self.rule())
    }
}

impl std::error::Error for InvalidToken {}

impl Access {
    /// True when no role has a token: the whole API is open.
    pub fn is_open(&self) -> bool {
        self.read.is_none() && self.append.is_none() && self.admin.is_none()
    }

    /// True when a request without a token may do what `role` allows: no token is set at all,
    /// or `role` is opened by [`Access::open`].
    pub fn is_role_open(&self, role: Role) -> bool {
        self.is_open()
            || match role {
                Role::Read => self.open.read,
                Role::Append => self.open.append,
                Role::Admin => false,
            }
    }

    /// True when some role is open to a request without a token (see [`Access::is_role_open`]).
    pub fn any_open(&self) -> bool {
        [Role::Read, Role::Append, Role::Admin]
            .into_iter()
            .any(|role| self.is_role_open(role))
    }

    /// Each role's state, for a start-up line: `read open`, `append token` (its own token or
    /// the admin token), `read admin token only` (no token of its own), `admin nobody (no
    /// token)` (no admin token while others are set), joined by `, `. Never shows a token.
    pub fn describe(&self) -> String {
        [Role::Read, Role::Append, Role::Admin]
            .into_iter()
            .map(|role| {
                let state = if self.is_role_open(role) {
                    "open"
                } else if self.token(role).is_some() {
                    "token"
                } else if role != Role::Admin && self.admin.is_some() {
                    "admin token only"
                } else {
                    "nobody (no token)"
                };
                format!("{role} {state}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The token configured for `role`.
    fn token(&self, role: Role) -> &Option<String> {
        match role {
            Role::Read => &self.read,
            Role::Append => &self.append,
            Role::Admin => &self.admin,
        }
    }

    /// Checks the tokens' shape (at least [`MIN_TOKEN_LEN`] visible ASCII characters) and that
    /// no opened role has a token; the error names the role, never the token.
    pub fn validate(&self) -> Result<(), InvalidToken> {
        for role in [Role::Read, Role::Append, Role::Admin] {
            let Some(t) = self.token(role) else { continue };
            let opened = match role {
                Role::Read => self.open.read,
                Role::Append => self.open.append,
                Role::Admin => false,
            };
            let shaped = t.len() >= MIN_TOKEN_LEN && t.bytes().all(|b| b.is_ascii_graphic());
            if opened || !shaped {
                return Err(InvalidToken { role, opened });
            }
        }
        Ok(())
    }

    /// `None` when a request with this `Authorization` value may do what `role` allows, else
    /// the 401 or 403 to answer.
    pub(crate) fn check(&self, authorization: Option<&[u8]>, role: Role) -> Option<ApiResponse> {
        if self.is_role_open(role) {
            return None;
        }
        let Some(given) = authorization.and_then(bearer_token) else {
            return Some(unauthorized(
                "this route needs `Authorization: Bearer TOKEN`",
            ));
        };
        let matches = |t: &Option<String>| t.as_deref().is_some_and(|t| tokens_equal(t, given));
        if matches(&self.admin) || matches(self.token(role)) {
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
            ..Access::default()
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
    fn any_token_closes_every_role_unless_opened() {
        let open = Access::default();
        assert!(open.is_open() && open.any_open());
        assert_eq!(status(&open, None, Role::Admin), 200);
        assert_eq!(
            open.describe(),
            "read open, append open, admin open",
            "no token at all: everything open"
        );
        // Issue 35: a role without a token is no longer open once any token is set.
        let append_only = Access {
            append: Some(A.into()),
            ..Access::default()
        };
        assert!(!append_only.any_open());
        assert_eq!(status(&append_only, None, Role::Read), 401);
        assert_eq!(status(&append_only, Some(A), Role::Read), 403);
        assert_eq!(status(&append_only, None, Role::Append), 401);
        assert_eq!(status(&append_only, Some(A), Role::Append), 200);
        // Management is never left open once the API is protected at all.
        assert_eq!(status(&append_only, None, Role::Admin), 401);
        assert_eq!(status(&append_only, Some(A), Role::Admin), 403);
        assert_eq!(
            append_only.describe(),
            "read nobody (no token), append token, admin nobody (no token)"
        );
        let admin_only = Access {
            admin: Some(M.into()),
            ..Access::default()
        };
        for role in [Role::Read, Role::Append, Role::Admin] {
            assert_eq!(status(&admin_only, None, role), 401, "{role}");
            assert_eq!(status(&admin_only, Some(M), role), 200, "{role}");
        }
        // Opened explicitly: no token needed for that role, the others stay closed.
        let public_reads = Access {
            open: OpenRoles {
                read: true,
                append: false,
            },
            ..admin_only.clone()
        };
        assert!(public_reads.is_role_open(Role::Read) && public_reads.any_open());
        assert_eq!(status(&public_reads, None, Role::Read), 200);
        assert_eq!(
            status(&public_reads, Some("whatever-whatever"), Role::Read),
            200
        );
        assert_eq!(status(&public_reads, None, Role::Append), 401);
        assert_eq!(status(&public_reads, None, Role::Admin), 401);
        assert_eq!(status(&public_reads, Some(M), Role::Admin), 200);
        assert_eq!(
            public_reads.describe(),
            "read open, append admin token only, admin token"
        );
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
        let both = Access {
            open: OpenRoles {
                read: true,
                append: false,
            },
            ..ok.clone()
        };
        let e = both.validate().unwrap_err();
        assert_eq!((e.role, e.opened), (Role::Read, true));
        assert_eq!(
            e.to_string(),
            "the read token: the read role is opened, so it takes no token"
        );
        assert!(tokens_equal("abc", "abc") && !tokens_equal("abc", "abd"));
        assert!(!tokens_equal("abc", "abcd"));
        assert_eq!(bearer_token(format!("bearer  {R} ").as_bytes()), Some(R));
    }
}
