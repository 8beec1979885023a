//! [`PolicyHandle::watch`]: a table file reloaded on `SIGHUP` and when its contents change and hold still.

use super::error::PolicyError;
use super::reload::{LimitChange, PolicyHandle};
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl PolicyHandle {
    /// What a watcher of the table at `path` compares: the file's bytes
    /// (`loaded`, or read now), then each plan's keys file's, so that an
    /// edited list reloads the table too; `None` when the table's file
    /// cannot be read.
    pub(crate) fn watched(
        &self,
        path: &std::path::Path,
        loaded: Option<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        let mut all = loaded.or_else(|| std::fs::read(path).ok())?;
        let dir = path.parent().unwrap_or(std::path::Path::new(""));
        for file in self
            .plans
            .plans()
            .iter()
            .filter_map(|p| p.keys_file.as_ref())
        {
            all.extend_from_slice(b"\0");
            all.extend(std::fs::read(dir.join(file)).unwrap_or_default());
        }
        Some(all)
    }

    /// Reloads `path` on `SIGHUP` (Unix) and whenever its contents, or a
    /// plan's keys file, change
    /// (read every `poll`; a change is applied once the contents have
    /// held still for one more read, so an editor's partial write is not
    /// taken). Every reload is logged: `info` when applied, `error` with
    /// the reason when rejected (the running limits stay). The task ends
    /// when every other `Arc` of the handle is dropped; it needs a tokio
    /// runtime.
    pub fn watch(self: &Arc<Self>, path: impl Into<PathBuf>, poll: std::time::Duration) {
        let (handle, path) = (Arc::downgrade(self), path.into());
        let mut hangup = Hangup::new();
        tokio::spawn(async move {
            let read = |handle: &PolicyHandle| handle.watched(&path, None);
            let mut contents = Contents::new(handle.upgrade().and_then(|h| read(&h)));
            loop {
                let signalled = tokio::select! {
                    _ = hangup.recv() => true,
                    _ = tokio::time::sleep(poll) => false,
                };
                let Some(handle) = handle.upgrade() else {
                    return;
                };
                if !contents.settled(read(&handle), signalled) {
                    continue;
                }
                let why = if signalled { "SIGHUP" } else { "file changed" };
                log(&path, why, handle.reload_file(&path));
            }
        });
    }
}

/// `SIGHUP`, where there is one (Unix) and its handler could be set up.
struct Hangup {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangup {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let signal = signal(SignalKind::hangup())
                .map_err(|e| {
                    tracing::error!(error = %e, "no SIGHUP handler: reloading on file change only");
                })
                .ok();
            Self { signal }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next `SIGHUP`; never, without one.
    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = self.signal.as_mut() {
            signal.recv().await;
            return;
        }
        std::future::pending::<()>().await
    }
}

/// A file's contents as last applied, and a change seen once and not yet
/// applied.
struct Contents {
    seen: Option<Vec<u8>>,
    pending: Option<Option<Vec<u8>>>,
}

impl Contents {
    fn new(seen: Option<Vec<u8>>) -> Self {
        Self {
            seen,
            pending: None,
        }
    }

    /// Whether to apply the file, whose contents are `now`: when
    /// `signalled`, or when a change has held still for one more read.
    fn settled(&mut self, now: Option<Vec<u8>>, signalled: bool) -> bool {
        let apply = if signalled {
            true
        } else if now == self.seen {
            self.pending = None;
            false
        } else if self.pending.as_ref() == Some(&now) {
            true
        } else {
            self.pending = Some(now.clone());
            false
        };
        if apply {
            self.seen = now;
            self.pending = None;
        }
        apply
    }
}

/// Logs a reload of `path` (`why`: what started it).
fn log(path: &Path, why: &str, result: Result<Vec<LimitChange>, PolicyError>) {
    match result {
        Ok(changes) if changes.is_empty() => {
            tracing::info!(file = %path.display(), why, "rate limits reloaded: no change");
        }
        Ok(changes) => {
            for c in &changes {
                tracing::info!(limit = %c.limit, from = %c.from, to = %c.to, overrides = %c.overrides, "rate limit changed");
            }
            tracing::info!(file = %path.display(), why, changed = changes.len(), "rate limits reloaded");
        }
        Err(e) => tracing::error!(
            error = %e,
            why,
            "rate-limit reload rejected; the running limits stay"
        ),
    }
}
