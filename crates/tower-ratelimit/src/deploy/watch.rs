//! The deployment file reloaded on `SIGHUP` and when it changes: its
//! limits through the table's reload, its own sections only at a restart.

use super::inner::Inner;
use super::sections;
use crate::policy::PolicyTable;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Watches the file the limits were loaded from, if any, when there is a
/// tokio runtime to watch it on (else says so).
pub(super) fn start(limits: &Arc<Inner>, poll: Duration) {
    let Some(file) = limits.file.clone() else {
        return;
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return tracing::warn!(file = %file.display(), "no tokio runtime: the limits are not reloaded");
    }
    let Some(handle) = limits.handle.get() else {
        return;
    };
    let loaded = handle.watched(&file, Some(limits.text.clone().into_bytes()));
    watch(Arc::downgrade(limits), file, loaded, poll);
}

/// Reloads `file` into `limits` on `SIGHUP` and once its contents (or a
/// plan's keys file's) differ from those `loaded` or last applied, and
/// held still for one more read every `poll`, until the limits are
/// dropped.
fn watch(limits: Weak<Inner>, file: PathBuf, loaded: Option<Vec<u8>>, poll: Duration) {
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(
            |e| tracing::error!(error = %e, "no SIGHUP handler: reloading on file change only"),
        )
        .ok();
    tokio::spawn(async move {
        let mut applied = loaded;
        let mut seen = applied.clone();
        loop {
            #[cfg(unix)]
            let signalled = match hangup.as_mut() {
                Some(h) => {
                    tokio::select! { _ = h.recv() => true, () = tokio::time::sleep(poll) => false }
                }
                None => {
                    tokio::time::sleep(poll).await;
                    false
                }
            };
            #[cfg(not(unix))]
            let signalled = {
                tokio::time::sleep(poll).await;
                false
            };
            let Some(inner) = limits.upgrade() else {
                return;
            };
            let now = inner.handle.get().and_then(|h| h.watched(&file, None));
            let settled = now != applied && now == seen;
            seen = now.clone();
            if signalled || settled {
                applied = now;
                reload(&inner, &file);
            }
        }
    });
}

/// Reloads the limits of `file`; logs what changed, or why not.
fn reload(inner: &Inner, file: &std::path::Path) {
    let Some(handle) = inner.handle.get() else {
        return;
    };
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            return tracing::error!(file = %file.display(), error = %e, "rate-limit reload rejected; the running limits stay")
        }
    };
    let (table, own) = sections::split_sections(&text, &sections::LIMITS_SECTIONS);
    if own != inner.own {
        tracing::warn!(file = %file.display(), "[store], [proxies], [admin], [metrics] or [server] changed: they apply at a restart");
    }
    match PolicyTable::from_toml(&table, Some(file)).and_then(|t| handle.reload(&t)) {
        Ok(changes) if changes.is_empty() => {
            tracing::info!(file = %file.display(), "rate limits reloaded: no change");
        }
        Ok(changes) => {
            for c in &changes {
                tracing::info!(limit = %c.limit, from = %c.from, to = %c.to, overrides = %c.overrides, "rate limit changed");
            }
            tracing::info!(file = %file.display(), changed = changes.len(), "rate limits reloaded");
        }
        Err(e) => {
            tracing::error!(error = %e, "rate-limit reload rejected; the running limits stay")
        }
    }
}
