//! The site's compiled templates as shared state ([`galleon_state::Shared`]): every request
//! renders with a snapshot, taken without a lock or a copy; a reload compiles the whole directory
//! anew and swaps it in at once, so a response is rendered by one version from start to end.
//!
//! Reloads come from `galleon serve --watch` (the `*.eex` files polled for a change), SIGHUP and
//! `POST /templates/reload` (loopback peers only; concurrent posts share reloads, see
//! [`Templates::reload_shared`]). Each version finds its own pages (`pages/NAME.html.eex`): a page
//! file added while serving is a page from the reload that compiles it on, a removed one is gone
//! from that reload on, and neither needs a restart. A directory that fails to compile never
//! replaces a working one: the located error (`name:line:col`) goes to the log and the previous
//! templates keep serving. Under `--watch` only (development), the pages then show that error to
//! loopback peers, like Phoenix's debug page, until the file is fixed; other peers get a plain 500.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use galleon_state::{LocalCache, Shared, Snapshot};
use galleon_template::{Engine, Limits, TemplateId};

use crate::coalesce::{Coalesced, Lost};

thread_local! {
    /// Each worker thread's reference to the current templates: one atomic load per request
    /// instead of a snapshot's ~95 instructions (`bench/instructions.sh`).
    static CURRENT: RefCell<LocalCache<Compiled>> = const { RefCell::new(LocalCache::new()) };
}

/// One compiled version of the site's templates.
#[derive(Debug)]
pub struct Compiled {
    /// The templates.
    pub engine: Engine,
    /// This version's pages, by name (`blah` for `pages/blah.html.eex`), sorted, each with its
    /// template in `engine`. Only names of [`is_page_name`]'s characters are pages.
    pub pages: Vec<(Box<str>, TemplateId)>,
    /// `--watch` only: why the newest files did not compile (`engine` is the last good version).
    pub broken: Option<Arc<str>>,
}

impl Compiled {
    /// The template of page `name` in this version: a binary search of [`Compiled::pages`] (a
    /// few string comparisons, no allocation), `None` when this version has no such page.
    pub fn page(&self, name: &str) -> Option<TemplateId> {
        self.pages
            .binary_search_by(|(p, _)| (**p).cmp(name))
            .ok()
            .map(|i| self.pages[i].1)
    }

    /// This version's page names, sorted.
    pub fn page_names(&self) -> impl Iterator<Item = &str> {
        self.pages.iter().map(|(p, _)| &**p)
    }
}

/// The site's templates, reloadable while serving; clones share them.
#[derive(Debug, Clone)]
pub struct Templates {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    copy: CopyBelow,
    limits: Limits,
    /// `--watch`: a failed compile is shown on the pages (to loopback peers).
    watch: bool,
    shared: Shared<Compiled>,
    /// The fingerprint of the files last compiled (or refused); held for the whole of a reload,
    /// so reloads run one at a time, in order.
    seen: Mutex<u64>,
    /// [`Templates::reload`] shared by concurrent callers (`POST /templates/reload`). Its
    /// operation holds the templates weakly: no cycle keeps them alive.
    reloads: Coalesced<Result<u64, String>>,
}

impl Templates {
    /// Compiles every `*.eex` under `dir`; the pages are its `pages/NAME.html.eex`.
    pub fn load(
        dir: &Path,
        copy: CopyBelow,
        limits: Limits,
        watch: bool,
    ) -> anyhow::Result<Templates> {
        let seen = fingerprint(dir);
        let engine = compile(dir, copy, limits).map_err(|e| anyhow::anyhow!("{e}"))?;
        let pages = pages_of(&engine);
        Ok(Templates {
            inner: Arc::new_cyclic(|weak: &Weak<Inner>| Inner {
                dir: dir.to_owned(),
                copy,
                limits,
                watch,
                shared: Shared::new(Compiled {
                    engine,
                    pages,
                    broken: None,
                }),
                seen: Mutex::new(seen),
                reloads: {
                    let weak = weak.clone();
                    Coalesced::new(move || match weak.upgrade() {
                        Some(inner) => Templates { inner }.reload(),
                        None => Err("the templates are gone".to_owned()),
                    })
                },
            }),
        })
    }

    /// The current version's page names, sorted.
    pub fn pages(&self) -> Vec<String> {
        self.snapshot().page_names().map(str::to_owned).collect()
    }

    /// True under `--watch`.
    pub fn watching(&self) -> bool {
        self.inner.watch
    }

    /// The current version.
    pub fn snapshot(&self) -> Snapshot<Compiled> {
        self.inner.shared.snapshot()
    }

    /// Runs `f` with the current version, through the thread's [`LocalCache`] (a snapshot if
    /// `f` itself asks again).
    pub fn with_current<R>(&self, f: impl FnOnce(&Compiled) -> R) -> R {
        CURRENT.with(|cache| match cache.try_borrow_mut() {
            Ok(mut cache) => f(cache.get(&self.inner.shared).value()),
            Err(_) => f(self.snapshot().value()),
        })
    }

    /// Compiles the directory now and publishes it: the new version's number. On an error the
    /// previous templates keep serving (under `--watch` marked broken), and the error is logged
    /// and returned.
    pub fn reload(&self) -> Result<u64, String> {
        let mut seen = self
            .inner
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *seen = fingerprint(&self.inner.dir);
        self.compile_and_swap()
    }

    /// [`Templates::reload`] on tokio's blocking pool, shared with every concurrent caller: the
    /// outcome of a reload that started after this call (at most one runs and one more is
    /// pending, however many ask; see [`crate::coalesce`]). `Err(Lost)` when it panicked.
    pub async fn reload_shared(&self) -> Result<Result<u64, String>, Lost> {
        self.inner.reloads.run().await
    }

    /// Reloads [`Templates::reload_shared`] started so far, and callers waiting for one now.
    pub fn shared_reloads(&self) -> (u64, usize) {
        (self.inner.reloads.runs(), self.inner.reloads.waiting())
    }

    /// [`Templates::reload`] when a template file changed since the last reload (or start);
    /// `None` when nothing did. A refused version is logged once, not again until it changes.
    pub fn reload_if_changed(&self) -> Option<Result<u64, String>> {
        let mut seen = self
            .inner
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = fingerprint(&self.inner.dir);
        if now == *seen {
            return None;
        }
        *seen = now;
        Some(self.compile_and_swap())
    }

    fn compile_and_swap(&self) -> Result<u64, String> {
        let inner = &*self.inner;
        match compile(&inner.dir, inner.copy, inner.limits) {
            Ok(engine) => {
                let version = inner.shared.store(Compiled {
                    pages: pages_of(&engine),
                    engine,
                    broken: None,
                });
                tracing::info!(version, "templates reloaded");
                Ok(version)
            }
            Err(e) => {
                let message = e.to_string();
                let current = inner.shared.snapshot();
                tracing::error!(
                    error = %message,
                    "templates not reloaded; version {} keeps serving",
                    current.version()
                );
                if inner.watch {
                    inner.shared.store(Compiled {
                        engine: current.engine.clone(),
                        pages: current.pages.clone(),
                        broken: Some(message.as_str().into()),
                    });
                }
                Err(message)
            }
        }
    }
}

/// The site's engine from `dir`, with the server's copy thresholds and limits.
fn compile(dir: &Path, copy: CopyBelow, limits: Limits) -> Result<Engine, galleon_template::Error> {
    Ok(Engine::load(dir)?
        .with_copy_below(copy.text)
        .with_value_copy_below(copy.values)
        .with_limits(limits))
}

/// The engine's copy thresholds: static text ([`Engine::copy_below`]) and values
/// ([`Engine::value_copy_below`]).
#[derive(Debug, Clone, Copy)]
pub struct CopyBelow {
    /// Static text shorter than this is copied into the render's buffers.
    pub text: usize,
    /// Values' strings shorter than this are copied.
    pub values: usize,
}

impl CopyBelow {
    /// `text` for static text, the engine's default for values.
    pub fn text(text: usize) -> CopyBelow {
        CopyBelow {
            text,
            values: galleon_template::DEFAULT_VALUE_COPY_BELOW,
        }
    }
}

/// The pages of `engine`: each `pages/NAME.html.eex` whose `NAME` [`is_page_name`], sorted by
/// name, with its template. Found anew in every version, so pages come and go with reloads.
fn pages_of(engine: &Engine) -> Vec<(Box<str>, TemplateId)> {
    let mut pages: Vec<(Box<str>, TemplateId)> = engine
        .names()
        .filter_map(|n| {
            let page = n.strip_prefix("pages/")?.strip_suffix(".html.eex")?;
            if !is_page_name(page) {
                tracing::debug!(template = n, "not a page: its name is not a path segment");
                return None;
            }
            Some((page.into(), engine.id(n).ok()?))
        })
        .collect();
    pages.sort_by(|a, b| a.0.cmp(&b.0));
    pages
}

/// Whether `name` can be a page at `/NAME`: ASCII letters, digits, `-`, `_` and `.`, not
/// starting with `.`. So a page is one path segment that needs no escaping: never empty, never
/// `.` or `..`, never with a `/`, never a hidden file, and its data file `data/NAME.json` stays
/// in `data/`.
pub fn is_page_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The `*.eex` files' fingerprint, as [`galleon_template::Engine::load`] finds them.
fn fingerprint(dir: &Path) -> u64 {
    galleon_state::fingerprint(dir, "eex")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(page: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pages")).unwrap();
        std::fs::write(dir.path().join("pages/p.html.eex"), page).unwrap();
        dir
    }

    fn render(t: &Templates) -> String {
        let c = t.snapshot();
        let page = c
            .engine
            .render_with(c.page("p").unwrap(), |_: &str| None)
            .unwrap();
        String::from_utf8(page.to_vec()).unwrap()
    }

    #[test]
    fn a_broken_version_keeps_the_old_one_and_a_fixed_one_replaces_it() {
        let dir = site("v1");
        let t = Templates::load(dir.path(), CopyBelow::text(64), Limits::default(), false).unwrap();
        assert_eq!(t.pages(), ["p"]);
        assert_eq!(t.reload_if_changed(), None);

        std::fs::write(dir.path().join("pages/p.html.eex"), "<%= if %>").unwrap();
        let err = t.reload_if_changed().unwrap().unwrap_err();
        assert!(err.contains("pages/p.html.eex:1:"), "{err}");
        assert_eq!(render(&t), "v1");
        assert!(
            t.snapshot().broken.is_none(),
            "outside --watch nothing is marked"
        );
        // Refused once; not compiled again until it changes.
        assert_eq!(t.reload_if_changed(), None);

        std::fs::write(dir.path().join("pages/p.html.eex"), "v2").unwrap();
        assert_eq!(t.reload_if_changed(), Some(Ok(2)));
        assert_eq!(render(&t), "v2");
    }

    #[test]
    fn under_watch_a_broken_version_is_marked_until_fixed() {
        let dir = site("v1");
        let t = Templates::load(dir.path(), CopyBelow::text(64), Limits::default(), true).unwrap();
        std::fs::write(dir.path().join("pages/p.html.eex"), "<%= @x + %>").unwrap();
        assert!(t.reload().is_err());
        let c = t.snapshot();
        assert!(c.broken.as_deref().unwrap().contains("pages/p.html.eex:1:"));
        drop(c);
        assert_eq!(render(&t), "v1", "the last good engine is kept");
        std::fs::write(dir.path().join("pages/p.html.eex"), "v3").unwrap();
        assert!(t.reload().is_ok());
        assert!(t.snapshot().broken.is_none());
        assert_eq!(render(&t), "v3");
    }

    /// Each version finds its pages: a renamed page is another page, and the reload succeeds.
    #[test]
    fn a_renamed_page_is_found_by_the_reload() {
        let dir = site("v1");
        let t = Templates::load(dir.path(), CopyBelow::text(64), Limits::default(), false).unwrap();
        std::fs::rename(
            dir.path().join("pages/p.html.eex"),
            dir.path().join("pages/q.html.eex"),
        )
        .unwrap();
        assert_eq!(t.reload(), Ok(2));
        assert_eq!(t.pages(), ["q"]);
        assert!(t.snapshot().page("p").is_none());
    }

    #[test]
    fn page_names_are_one_plain_segment() {
        for ok in ["blah", "blah-split", "a_b", "v2.1"] {
            assert!(is_page_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", ".hidden", "a/b", "a b", "%2e", "a\\b", "é"] {
            assert!(!is_page_name(bad), "{bad}");
        }
        let dir = site("v1");
        std::fs::write(dir.path().join("pages/..html.eex"), "dot").unwrap();
        std::fs::write(dir.path().join("pages/a b.html.eex"), "space").unwrap();
        std::fs::create_dir(dir.path().join("pages/sub")).unwrap();
        std::fs::write(dir.path().join("pages/sub/x.html.eex"), "nested").unwrap();
        let t = Templates::load(dir.path(), CopyBelow::text(64), Limits::default(), false).unwrap();
        assert_eq!(t.pages(), ["p"]);
    }
}
