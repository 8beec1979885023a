//! What every clone of a fair queue's layer and services shares: settings, the queue, the latency average.

use super::queue::State;
use super::Capacity;
use crate::key::KeyExtractor;
use crate::strategy::Cost;
use ratelimit_core::plumbing::saturating_nanos;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// State shared by every clone of a fair queue's layer and services.
pub(crate) struct Shared<X: KeyExtractor, R> {
    pub(super) key: X,
    pub(super) cost: Option<Box<dyn Cost>>,
    pub(super) response: R,
    pub(super) capacity: Capacity,
    pub(super) state: Mutex<State<X::Key>>,
    pub(super) max_wait: Duration,
    pub(super) max_per_key: usize,
    pub(super) name: &'static str,
    /// Moving average of the inner service's latency, in nanoseconds.
    pub(super) service: AtomicU64,
    /// Whether a request without a peer address has been logged.
    pub(super) no_peer_logged: AtomicBool,
}

impl<X: KeyExtractor, R> Shared<X, R> {
    pub(super) fn lock(&self) -> MutexGuard<'_, State<X::Key>> {
        // The state is consistent between statements: a panic elsewhere
        // leaves nothing half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Folds a latency into the moving average (weight 1/8).
    pub(super) fn record(&self, latency: Duration) {
        let sample = saturating_nanos(latency);
        let old = self.service.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.service.store(new, Ordering::Relaxed);
    }

    pub(super) fn service_nanos(&self) -> u64 {
        self.service.load(Ordering::Relaxed)
    }
}
