//! The thread Redis connections are driven on: a small runtime of its
//! own, so that a saturated application runtime does not hold Redis's
//! answers back from the calls waiting for them.

use std::future::Future;
use std::sync::OnceLock;

/// The driver runtime, started on first use; `None` when it could not be
/// (connections are then driven on the caller's runtime).
static DRIVER: OnceLock<Option<tokio::runtime::Handle>> = OnceLock::new();

/// The driver runtime's handle: one thread, `ratelimit-redis-io`, for
/// the life of the process.
fn handle() -> Option<&'static tokio::runtime::Handle> {
    DRIVER
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("ratelimit-redis-io".to_owned())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .ok()?;
            Some(handle)
        })
        .as_ref()
}

/// Runs `work` (a connect) on the driver thread, so that the tasks it
/// spawns (the connection's reader and writer) run there: a call then
/// waits on Redis, and on the driver thread's share of the CPU, never on
/// the application runtime's queue. Without a driver thread, runs it
/// here. `Err` if it panicked.
pub(crate) async fn drive<T: Send + 'static>(
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T, String> {
    match handle() {
        Some(driver) => driver.spawn(work).await.map_err(|e| e.to_string()),
        None => Ok(work.await),
    }
}

/// Spawns `work` (a background loop) on the driver thread, or on the
/// caller's runtime without one.
pub(crate) fn spawn(work: impl Future<Output = ()> + Send + 'static) {
    match handle() {
        Some(driver) => drop(driver.spawn(work)),
        None => drop(tokio::spawn(work)),
    }
}
