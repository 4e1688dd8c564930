//! `site/static/` at `/static/...`: files sent with `sendfile`, their type from the extension
//! (`mime_guess`), `ETag` and `Last-Modified` with `304` for conditional requests, one byte range
//! per request (`206`, `416`), `x-content-type-options: nosniff`, and nothing outside the root
//! or hidden (no `..`, no symlink out, no dotfile).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use galleon_http::{Body, Request, Response, StatusCode};

/// What a request asks of a static file beyond its path: the conditional and range headers.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    range: Option<String>,
    if_range: Option<String>,
    if_none_match: Option<String>,
    if_modified_since: Option<String>,
}

impl Ask {
    /// The headers of `req` that matter here.
    pub fn of(req: &Request) -> Ask {
        let get = |name: &str| req.header_str(name).map(str::to_owned);
        Ask {
            range: get("range"),
            if_range: get("if-range"),
            if_none_match: get("if-none-match"),
            if_modified_since: get("if-modified-since"),
        }
    }
}

/// Answers `rel` (already percent-decoded) under `root`.
pub fn serve(root: &Path, rel: &str, ask: &Ask) -> Response {
    let Some(path) = resolve_static(root, rel) else {
        return Response::not_found();
    };
    let Ok(file) = std::fs::File::open(&path) else {
        return Response::not_found();
    };
    let Ok(meta) = file.metadata() else {
        return Response::not_found();
    };
    let len = meta.len();
    let modified = meta.modified().ok();
    let etag = etag(len, modified);
    let last_modified = modified.map(httpdate::fmt_http_date);
    let with_validators = |resp: Response| {
        let resp = resp
            .with_header("etag", etag.clone())
            .with_header("x-content-type-options", "nosniff")
            .with_header("accept-ranges", "bytes");
        match &last_modified {
            Some(lm) => resp.with_header("last-modified", lm.clone()),
            None => resp,
        }
    };
    if not_modified(ask, &etag, modified) {
        return with_validators(Response::new(StatusCode::NOT_MODIFIED, Body::empty()));
    }
    let content_type = content_type(&path);
    let range = ask
        .range
        .as_deref()
        .filter(|_| ask.if_range.as_deref().is_none_or(|v| v.trim() == etag));
    match range.map(|r| parse_range(r, len)) {
        Some(Some(Ok((start, end)))) => with_validators(
            Response::new(
                StatusCode::PARTIAL_CONTENT,
                Body::file_range(file, start, end - start + 1),
            )
            .with_header("content-type", content_type)
            .with_header("content-range", format!("bytes {start}-{end}/{len}")),
        ),
        Some(Some(Err(()))) => with_validators(
            Response::error(StatusCode::RANGE_NOT_SATISFIABLE, "range not satisfiable")
                .with_header("content-range", format!("bytes */{len}")),
        ),
        // No range, or one this server does not serve (several ranges, another unit): the
        // whole file, as RFC 9110 allows.
        Some(None) | None => with_validators(
            Response::new(StatusCode::OK, Body::file(file, len))
                .with_header("content-type", content_type),
        ),
    }
}

/// A strong validator from the file's size and modification time (what nginx uses too).
fn etag(len: u64, modified: Option<SystemTime>) -> String {
    let nanos = modified
        .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("\"{len:x}-{nanos:x}\"")
}

/// RFC 9110 section 13.1: `If-None-Match` decides when present (`*` or a listed tag matches);
/// otherwise `If-Modified-Since` at or after the file's time (to the second) means unchanged.
fn not_modified(ask: &Ask, etag: &str, modified: Option<SystemTime>) -> bool {
    if let Some(tags) = &ask.if_none_match {
        return tags
            .split(',')
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == "*" || t == etag);
    }
    match (&ask.if_modified_since, modified) {
        (Some(since), Some(modified)) => httpdate::parse_http_date(since).is_ok_and(|since| {
            httpdate::fmt_http_date(modified) == httpdate::fmt_http_date(since) || modified <= since
        }),
        _ => false,
    }
}

/// One range of `bytes=FIRST-LAST`, `bytes=FIRST-` or `bytes=-SUFFIX` over a file of `len`
/// bytes: `None` to ignore the header (not bytes, several ranges, malformed), `Some(Err)` when
/// it selects nothing (416), else the first and last byte.
fn parse_range(header: &str, len: u64) -> Option<Result<(u64, u64), ()>> {
    let spec = header.trim().strip_prefix("bytes=")?.trim();
    if spec.contains(',') {
        return None;
    }
    let (first, last) = spec.split_once('-')?;
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let (first, last) = (first.trim(), last.trim());
    let range = if first.is_empty() {
        let suffix = number(last)?;
        if suffix == 0 || len == 0 {
            return Some(Err(()));
        }
        (len.saturating_sub(suffix), len - 1)
    } else {
        let first = number(first)?;
        let last = if last.is_empty() {
            u64::MAX
        } else {
            number(last)?
        };
        if first > last {
            return None;
        }
        if first >= len {
            return Some(Err(()));
        }
        (first, last.min(len - 1))
    };
    Some(Ok(range))
}

/// The file's content type by extension (`mime_guess`), `; charset=utf-8` on text types;
/// `application/octet-stream` when unknown.
fn content_type(path: &Path) -> String {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    if mime.type_() == mime_guess::mime::TEXT {
        format!("{}; charset=utf-8", mime.essence_str())
    } else {
        mime.essence_str().to_owned()
    }
}

/// Resolves `rel` (already percent-decoded) under `root`, refusing anything that could leave it
/// or that is hidden: empty, `.` or `..` segments, segments starting with `.` (dotfiles such as
/// `.env` or `.git`), backslashes, NULs, and symlinks pointing outside.
pub fn resolve_static(root: &Path, rel: &str) -> Option<PathBuf> {
    if rel.is_empty() || rel.contains('\0') || rel.contains('\\') {
        return None;
    }
    let mut path = root.to_path_buf();
    for seg in rel.split('/') {
        if seg.is_empty() || seg.starts_with('.') {
            return None;
        }
        path.push(seg);
    }
    let root = root.canonicalize().ok()?;
    let real = path.canonicalize().ok()?;
    (real.starts_with(&root) && real.is_file()).then_some(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_paths_cannot_escape_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("static");
        std::fs::create_dir_all(root.join("css")).unwrap();
        std::fs::write(root.join("css/site.css"), "body{}").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "no").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link.txt")).unwrap();
        assert!(resolve_static(&root, "css/site.css").is_some());
        for bad in [
            "../secret.txt",
            "css/../../secret.txt",
            "./css/site.css",
            "css//site.css",
            "/etc/passwd",
            "",
            "css",
            "link.txt",
            "css\\..\\..\\secret.txt",
            "css/site.css\0",
        ] {
            assert!(resolve_static(&root, bad).is_none(), "{bad:?} escaped");
        }
    }

    /// Regression (issue 13, class 4): dotfiles were served.
    #[test]
    fn dotfiles_are_not_served() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".env"), "SECRET=1").unwrap();
        std::fs::write(dir.path().join(".git/config"), "x").unwrap();
        std::fs::write(dir.path().join("ok.txt"), "x").unwrap();
        assert!(resolve_static(dir.path(), "ok.txt").is_some());
        assert!(resolve_static(dir.path(), ".env").is_none());
        assert!(resolve_static(dir.path(), ".git/config").is_none());
    }

    #[test]
    fn ranges() {
        let r = |h: &str| parse_range(h, 1000);
        assert_eq!(r("bytes=0-99"), Some(Ok((0, 99))));
        assert_eq!(r("bytes=900-"), Some(Ok((900, 999))));
        assert_eq!(r("bytes=-100"), Some(Ok((900, 999))));
        assert_eq!(r("bytes=-5000"), Some(Ok((0, 999))));
        assert_eq!(r("bytes=990-2000"), Some(Ok((990, 999))));
        assert_eq!(r("bytes=1000-"), Some(Err(())));
        assert_eq!(r("bytes=-0"), Some(Err(())));
        assert_eq!(r("bytes=5-1"), None);
        assert_eq!(r("bytes=0-1,5-6"), None);
        assert_eq!(r("items=0-1"), None);
        assert_eq!(r("bytes=+1-2"), None);
        assert_eq!(r("bytes=a-b"), None);
    }

    #[test]
    fn types_come_from_a_maintained_table() {
        for (name, t) in [
            ("a.css", "text/css; charset=utf-8"),
            ("a.html", "text/html; charset=utf-8"),
            ("a.json", "application/json"),
            ("a.png", "image/png"),
            ("a.wasm", "application/wasm"),
            ("a.webp", "image/webp"),
            ("a.unknownext", "application/octet-stream"),
        ] {
            assert_eq!(content_type(Path::new(name)), t, "{name}");
        }
    }
}
