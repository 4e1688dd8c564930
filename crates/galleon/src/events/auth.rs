//! Who may use the event-store API: a bearer token per role, set by flag or environment.
//!
//! | role | may |
//! |---|---|
//! | `read` | read streams, `$all` and categories; subscribe; consume and acknowledge a persistent subscription |
//! | `append` | append (`POST /streams/{id}`) |
//! | `admin` | everything, and create or delete persistent subscriptions, set stream metadata, soft-delete streams |
//!
//! A request sends `Authorization: Bearer TOKEN`; a missing or unknown token is 401, a token
//! without the role 403. A role with no token configured is open. With no token at all the API is
//! open to whoever reaches the port, so `galleon serve` refuses to start it on a non-loopback
//! address unless `--events-open` says that is meant.

use galleon_http::{Request, Response, StatusCode};

use super::http::json_error;

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Reading and consuming.
    Read,
    /// Appending.
    Append,
    /// Managing persistent subscriptions.
    Admin,
}

/// The configured tokens (`None`: that role is open).
#[derive(Clone, Default)]
pub(crate) struct Access {
    pub(crate) read: Option<String>,
    pub(crate) append: Option<String>,
    pub(crate) admin: Option<String>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        f.debug_struct("Access")
            .field("read", &self.read.is_some())
            .field("append", &self.append.is_some())
            .field("admin", &self.admin.is_some())
            .finish()
    }
}

/// Shortest token accepted: 16 bytes, so a token cannot be guessed by trying.
pub(crate) const MIN_TOKEN_LEN: usize = 16;

impl Access {
    /// True when no role has a token: the API is open.
    pub(crate) fn is_open(&self) -> bool {
        self.read.is_none() && self.append.is_none() && self.admin.is_none()
    }

    /// Checks the tokens' shape; the message names the flag.
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        for (flag, token) in [
            ("--events-read-token", &self.read),
            ("--events-append-token", &self.append),
            ("--events-admin-token", &self.admin),
        ] {
            if let Some(t) = token {
                anyhow::ensure!(
                    t.len() >= MIN_TOKEN_LEN && t.bytes().all(|b| b.is_ascii_graphic()),
                    "{flag}: expected at least {MIN_TOKEN_LEN} visible ASCII characters, no spaces"
                );
            }
        }
        Ok(())
    }

    /// `None` when `req` may do what `role` allows, else the 401 or 403 to answer.
    pub(crate) fn check(&self, req: &Request, role: Role) -> Option<Response> {
        let needed = match role {
            Role::Read => &self.read,
            Role::Append => &self.append,
            Role::Admin => &self.admin,
        };
        if needed.is_none() && (role != Role::Admin || self.is_open()) {
            return None;
        }
        let Some(given) = bearer(req) else {
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
            json_error(
                StatusCode(403),
                &format!("this token may not {}", role.verb()),
            )
        } else {
            unauthorized("unknown token")
        })
    }
}

impl Role {
    fn verb(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Append => "append",
            Role::Admin => "manage subscriptions or streams",
        }
    }
}

/// The token of `Authorization: Bearer TOKEN`, if the header has that shape.
fn bearer(req: &Request) -> Option<&str> {
    let value = std::str::from_utf8(req.header("authorization")?).ok()?;
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

fn unauthorized(message: &str) -> Response {
    json_error(StatusCode(401), message).with_header("www-authenticate", "Bearer")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use galleon_http::Method;

    const R: &str = "read-token-0123456789";
    const A: &str = "append-token-0123456789";
    const M: &str = "admin-token-0123456789";

    fn req(token: Option<&str>) -> Request {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("authorization", a.as_str())).collect();
        Request::new(Method::Get, "/all", &headers, Bytes::new())
    }

    fn status(access: &Access, token: Option<&str>, role: Role) -> u16 {
        access
            .check(&req(token), role)
            .map_or(200, |r| r.status().0)
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
        let r = access.check(&req(None), Role::Read).unwrap();
        assert!(
            r.headers()
                .any(|(n, v)| n == "www-authenticate" && v == "Bearer")
        );
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
        let e = short.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("--events-read-token: expected at least 16"),
            "{e}"
        );
        let spaced = Access {
            admin: Some("has a space in it, long".into()),
            ..Access::default()
        };
        assert!(spaced.validate().is_err());
        let ok = Access {
            read: Some(R.into()),
            ..Access::default()
        };
        assert!(ok.validate().is_ok());
        assert!(!format!("{ok:?}").contains(R));
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "abcd"));
        assert_eq!(bearer(&req(Some(R))), Some(R));
    }
}
