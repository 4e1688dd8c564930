//! Opening the store a server is configured with: [`open`], bounded by a timeout, with errors
//! that name the URL with its password hidden ([`redact`]).

use std::fmt;
use std::time::Duration;

use galleon_eventstore::{OpenOptions, Store};

/// Longest wait of [`open`] for the store to open (connect, create or migrate the schema). A
/// backstop for an address that drops packets, where a TCP connect would otherwise hang for
/// minutes; generous, because a migration of a large database may take a while. Add
/// `connect_timeout=SECS` to a PostgreSQL URL for a quicker verdict.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the store could not be opened. Its message starts `opening the event store URL` (the
/// URL [`redact`]ed); the store's own error, when there is one, is its
/// [`source`](std::error::Error::source).
#[derive(Debug)]
pub struct OpenError {
    url: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Timeout(Duration),
    InvalidUrl(String),
    Store(galleon_eventstore::Error),
}

impl OpenError {
    /// The URL, password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// True when the store did not answer in time.
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, Kind::Timeout(_))
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "opening the event store {}", self.url)?;
        match &self.kind {
            Kind::Timeout(t) => write!(f, ": no answer within {}s", t.as_secs_f64()),
            Kind::InvalidUrl(reason) => write!(f, ": invalid URL: {reason}"),
            Kind::Store(_) => Ok(()),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Store(e) => Some(e),
            Kind::Timeout(_) | Kind::InvalidUrl(_) => None,
        }
    }
}

/// [`Store::open_with`], giving up after [`OPEN_TIMEOUT`].
///
/// # Examples
/// ```
/// use galleon_eventstore::OpenOptions;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let e = galleon_eventstore_http::open("postgres://me:s3cr3t@db:notaport/x", OpenOptions::default())
///     .await
///     .unwrap_err();
/// assert!(e.to_string().starts_with("opening the event store postgres://me:***@db:notaport/x: invalid URL"));
/// # });
/// ```
pub async fn open(url: &str, options: OpenOptions) -> Result<Store, OpenError> {
    open_within(url, options, OPEN_TIMEOUT).await
}

/// [`open`] with another timeout.
pub async fn open_within(
    url: &str,
    options: OpenOptions,
    timeout: Duration,
) -> Result<Store, OpenError> {
    let error = |kind| OpenError {
        url: redact(url),
        kind,
    };
    match tokio::time::timeout(timeout, Store::open_with(url, options)).await {
        Err(_elapsed) => Err(error(Kind::Timeout(timeout))),
        Ok(Ok(store)) => Ok(store),
        // Its message repeats the URL verbatim, password included.
        Ok(Err(galleon_eventstore::Error::InvalidUrl { reason, .. })) => {
            Err(error(Kind::InvalidUrl(reason)))
        }
        Ok(Err(e)) => Err(error(Kind::Store(e))),
    }
}

/// `url` with any password replaced by `***`, for messages and logs: the userinfo's password
/// and a `password=` query parameter.
///
/// # Examples
/// ```
/// use galleon_eventstore_http::redact;
///
/// assert_eq!(redact("postgres://me:s3cr3t@db/events"), "postgres://me:***@db/events");
/// assert_eq!(redact("sqlite:./data/events.db"), "sqlite:./data/events.db");
/// ```
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // userinfo is everything before the last `@` of the authority.
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("password", _)) => "password=***".to_owned(),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        for (url, shown) in [
            ("sqlite:./data/events.db", "sqlite:./data/events.db"),
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            (
                "postgres://me:s3cr3t@db:5432/events",
                "postgres://me:***@db:5432/events",
            ),
            (
                "postgresql://me:p@ss@db/events?sslmode=disable",
                "postgresql://me:***@db/events?sslmode=disable",
            ),
            (
                "postgres://db/events?user=me&password=s3cr3t",
                "postgres://db/events?user=me&password=***",
            ),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }
}
