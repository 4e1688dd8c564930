//! Hot reload of a template directory: the current set in a [`Shared`] cell, a polling
//! [`Watch`] thread that recompiles the directory when a file changed, and the last good set
//! kept when the newest files fail. The same behaviour as `galleon serve --watch`
//! (`galleon-site`'s `templates.rs`), over the same `galleon-state` pieces.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use galleon_state::{Shared, Snapshot, Watch};

use crate::builder::{EngineOptions, LoadError};
use crate::templates::Set;

/// A watched directory's templates: the current set, and how to compile the next one.
pub(crate) struct Live {
    dir: PathBuf,
    options: EngineOptions,
    shared: Shared<Set>,
    /// The fingerprint of the files last compiled (or refused); held for the whole of a
    /// reload, so reloads run one at a time, in order.
    seen: Mutex<u64>,
}

impl Live {
    /// Compiles `dir`: the first set, which must compile.
    pub(crate) fn load(dir: &Path, options: EngineOptions) -> Result<Live, LoadError> {
        // Taken before compiling: a file changed during the compile is compiled again.
        let seen = fingerprint(dir);
        let engine = options.load(dir)?;
        Ok(Live {
            dir: dir.to_owned(),
            options,
            shared: Shared::new(Set::new(engine)),
            seen: Mutex::new(seen),
        })
    }

    /// The current set, for one render.
    pub(crate) fn snapshot(&self) -> Snapshot<Set> {
        self.shared.snapshot()
    }

    /// Recompiles the directory when a template file changed since the last check (or the
    /// start): `None` when nothing did, else the new version or the error that kept the old
    /// one. A refused version is logged once, and not compiled again until it changes.
    pub(crate) fn reload_if_changed(&self) -> Option<Result<u64, Arc<str>>> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let now = fingerprint(&self.dir);
        if now == *seen {
            return None;
        }
        *seen = now;
        Some(self.compile_and_swap())
    }

    fn compile_and_swap(&self) -> Result<u64, Arc<str>> {
        match self.options.load(&self.dir) {
            Ok(engine) => {
                let version = self.shared.store(Set::new(engine));
                tracing::info!(dir = %self.dir.display(), version, "templates reloaded");
                Ok(version)
            }
            Err(e) => {
                let current = self.shared.snapshot();
                tracing::error!(
                    dir = %self.dir.display(),
                    error = %e,
                    "templates not reloaded; version {} keeps serving",
                    current.version()
                );
                let shown: Arc<str> = without_dir(&e.to_string(), &self.dir).into();
                self.shared.store(Set {
                    engine: current.engine.clone(),
                    owners: current.owners.clone(),
                    broken: Some(shown.clone()),
                });
                Err(shown)
            }
        }
    }
}

/// Starts the thread that checks `live`'s directory every `interval`. It holds `live`, not the
/// templates, so dropping the last clone of the templates drops the [`Watch`], which stops it.
pub(crate) fn start(live: Arc<Live>, interval: Duration) -> std::io::Result<Watch> {
    Watch::every("galleon-axum-watch", interval, move || {
        // Both outcomes are logged by the reload.
        let _ = live.reload_if_changed();
    })
}

/// `message` with the directory's path taken out of the file name it starts with (an I/O error
/// names the file by its path: `DIR/pages/a.html.eex: ...` becomes `pages/a.html.eex: ...`,
/// `DIR: ...` becomes `.: ...`), so the error page shows no more of the file system than the
/// templates' own names. A located error starts with the template's name already.
fn without_dir(message: &str, dir: &Path) -> String {
    let dir = dir.display().to_string();
    let dir = dir.trim_end_matches(std::path::MAIN_SEPARATOR);
    if dir.is_empty() {
        return message.to_owned();
    }
    let Some(rest) = message.strip_prefix(dir) else {
        return message.to_owned();
    };
    if let Some(name) = rest.strip_prefix(std::path::MAIN_SEPARATOR) {
        name.to_owned()
    } else if rest.starts_with(':') {
        format!(".{rest}")
    } else {
        message.to_owned()
    }
}

/// The `*.eex` files' fingerprint, as [`galleon_template::Engine::load`] finds them.
fn fingerprint(dir: &Path) -> u64 {
    galleon_state::fingerprint(dir, "eex")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_is_taken_out_of_messages() {
        let dir = Path::new("/tmp/x/templates");
        assert_eq!(
            without_dir("/tmp/x/templates/pages/a.html.eex: permission denied", dir),
            "pages/a.html.eex: permission denied"
        );
        assert_eq!(
            without_dir("/tmp/x/templates: no such directory", dir),
            ".: no such directory"
        );
        assert_eq!(
            without_dir("t.html.eex:1:2: oops at/2", Path::new("t/")),
            "t.html.eex:1:2: oops at/2",
            "a located message is left as it is"
        );
    }
}
