//! Triggers for reloads: polling for file changes on a thread, and SIGHUP.
//!
//! Polling rather than inotify: it sees a file replaced by rename, an editor's write-then-move, a
//! file on a network or overlay mount and a directory that is itself replaced, all the same way,
//! with no platform code; a stat every half second costs nothing measurable.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::reload::Reloader;

/// How often [`Reloader::watch`] looks at its file by default: twice a second.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// A polling thread: runs a check every interval until dropped (which stops and joins it) or
/// [`Watch::detach`]ed (which leaves it running for the life of the process).
#[derive(Debug)]
pub struct Watch {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    /// Runs `check` every `interval` on a thread named `name`, until the `Watch` is dropped.
    /// The first run is one interval from now.
    pub fn every<F>(name: &str, interval: Duration, mut check: F) -> std::io::Result<Watch>
    where
        F: FnMut() + Send + 'static,
    {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                // A message or a dropped sender both mean stop.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    check();
                }
            })?;
        Ok(Watch {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Lets the thread run for the rest of the process.
    pub fn detach(mut self) {
        if let Some(stop) = self.stop.take() {
            std::mem::forget(stop);
        }
        self.thread.take();
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl<T: Send + Sync + 'static> Reloader<T> {
    /// Checks the file every `interval` on a thread of its own and reloads it when its contents
    /// changed ([`Reloader::reload_if_changed`]; refusals are logged there).
    pub fn watch(&self, interval: Duration) -> std::io::Result<Watch> {
        let me = self.clone();
        Watch::every("galleon-state-watch", interval, move || {
            let _ = me.reload_if_changed();
        })
    }
}

/// Runs `f` on the blocking pool at every SIGHUP (the Unix convention for "reread your
/// configuration"), one run at a time, for the life of the runtime.
///
/// The handler is installed before this returns, so a SIGHUP sent afterwards never takes the
/// default action (which ends the process). Must be called from within a tokio runtime; an error
/// when there is none or the signal cannot be registered.
#[cfg(all(unix, feature = "signal"))]
pub fn on_sighup<F>(f: F) -> std::io::Result<tokio::task::JoinHandle<()>>
where
    F: Fn() + Send + Sync + 'static,
{
    use tokio::signal::unix::{SignalKind, signal};
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|e| std::io::Error::other(format!("SIGHUP needs a tokio runtime: {e}")))?;
    let _guard = handle.enter();
    let mut hup = signal(SignalKind::hangup())?;
    let f = std::sync::Arc::new(f);
    Ok(handle.spawn(async move {
        while hup.recv().await.is_some() {
            let f = f.clone();
            tracing::info!("SIGHUP: reloading");
            if let Err(e) = tokio::task::spawn_blocking(move || f()).await {
                tracing::error!(error = %e, "SIGHUP reload panicked");
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use super::*;
    use crate::reload::ParseError;

    fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "timed out: {what}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_watch_runs_until_dropped() {
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        let w = Watch::every("t", Duration::from_millis(1), move || {
            n2.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        wait_for("three checks", || n.load(Ordering::SeqCst) >= 3);
        drop(w);
        let after = n.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(n.load(Ordering::SeqCst), after);
    }

    #[test]
    fn a_watched_file_is_reloaded_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        let parse = |_: &std::path::Path, b: &[u8]| -> Result<u64, ParseError> {
            Ok(std::str::from_utf8(b)?.trim().parse()?)
        };
        let r = Reloader::load(&path, parse).unwrap();
        let _w = r.watch(Duration::from_millis(10)).unwrap();
        std::fs::write(&path, "7").unwrap();
        wait_for("reload", || **r.shared().snapshot() == 7);
        std::fs::write(&path, "not a number").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(**r.shared().snapshot(), 7);
        std::fs::write(&path, "8").unwrap();
        wait_for("reload", || **r.shared().snapshot() == 8);
    }

    #[cfg(feature = "signal")]
    #[test]
    fn sighup_runs_the_callback() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert!(on_sighup(|| {}).is_err(), "no runtime entered");
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        rt.block_on(async move {
            let _task = on_sighup(move || {
                n2.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            let pid = std::process::id().to_string();
            let st = std::process::Command::new("kill")
                .args(["-HUP", &pid])
                .status()
                .unwrap();
            assert!(st.success());
            let start = Instant::now();
            while n.load(Ordering::SeqCst) == 0 {
                assert!(start.elapsed() < Duration::from_secs(10), "no SIGHUP seen");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }
}
