//! The site's compiled templates as shared state ([`galleon_state::Shared`]): every request
//! renders with a snapshot, taken without a lock or a copy; a reload compiles the whole directory
//! anew and swaps it in at once, so a response is rendered by one version from start to end.
//!
//! Reloads come from `galleon serve --watch` (the `*.eex` files polled for a change), SIGHUP and
//! `POST /templates/reload` (loopback peers only). A directory that fails to compile never
//! replaces a working one: the located error (`name:line:col`) goes to the log and the previous
//! templates keep serving. Under `--watch` only (development), the pages then show that error to
//! loopback peers, like Phoenix's debug page, until the file is fixed; other peers get a plain 500.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use galleon_state::{LocalCache, Shared, Snapshot};
use galleon_template::{Engine, Limits, TemplateId};

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
    /// Each page's template in `engine`, in the order of [`Templates::pages`].
    pub ids: Vec<TemplateId>,
    /// `--watch` only: why the newest files did not compile (`engine` is the last good version).
    pub broken: Option<Arc<str>>,
}

/// The site's templates, reloadable while serving; clones share them.
#[derive(Debug, Clone)]
pub struct Templates {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    /// Page names (`blah` for `pages/blah.html.eex`), fixed at start: they are the routes.
    pages: Vec<String>,
    copy: CopyBelow,
    limits: Limits,
    /// `--watch`: a failed compile is shown on the pages (to loopback peers).
    watch: bool,
    shared: Shared<Compiled>,
    /// The fingerprint of the files last compiled (or refused); held for the whole of a reload,
    /// so reloads run one at a time, in order.
    seen: Mutex<u64>,
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
        let mut pages: Vec<String> = engine
            .names()
            .filter_map(|n| n.strip_prefix("pages/")?.strip_suffix(".html.eex"))
            .filter(|p| !p.contains('/'))
            .map(str::to_owned)
            .collect();
        pages.sort();
        let ids = page_ids(&engine, &pages).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Templates {
            inner: Arc::new(Inner {
                dir: dir.to_owned(),
                pages,
                copy,
                limits,
                watch,
                shared: Shared::new(Compiled {
                    engine,
                    ids,
                    broken: None,
                }),
                seen: Mutex::new(seen),
            }),
        })
    }

    /// The pages, in the order of [`Compiled::ids`].
    pub fn pages(&self) -> &[String] {
        &self.inner.pages
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
        let built = compile(&inner.dir, inner.copy, inner.limits)
            .and_then(|engine| Ok((page_ids(&engine, &inner.pages)?, engine)));
        match built {
            Ok((ids, engine)) => {
                let version = inner.shared.store(Compiled {
                    engine,
                    ids,
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
                        ids: current.ids.clone(),
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

/// Each page's template in `engine`: an error when one is gone (the routes are fixed at start,
/// so removing a page needs a restart).
fn page_ids(engine: &Engine, pages: &[String]) -> Result<Vec<TemplateId>, galleon_template::Error> {
    pages
        .iter()
        .map(|p| engine.id(&format!("pages/{p}.html.eex")))
        .collect()
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
        let page = c.engine.render_with(c.ids[0], |_: &str| None).unwrap();
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

    #[test]
    fn a_removed_page_is_refused() {
        let dir = site("v1");
        let t = Templates::load(dir.path(), CopyBelow::text(64), Limits::default(), false).unwrap();
        std::fs::rename(
            dir.path().join("pages/p.html.eex"),
            dir.path().join("pages/q.html.eex"),
        )
        .unwrap();
        let err = t.reload().unwrap_err();
        assert!(err.contains("p.html.eex"), "{err}");
        assert_eq!(render(&t), "v1");
    }
}
