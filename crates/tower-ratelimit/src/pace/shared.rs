//! What every clone of a pace layer and its services shares.

use super::paced::Paced;
use crate::key::KeyExtractor;
use crate::strategy::KeyErrorPolicy;
use ratelimit_core::Clock;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A pace layer's settings, its key extractor, store and rejection
/// builder.
pub(crate) struct PaceShared<X: KeyExtractor, St, R> {
    pub(crate) name: &'static str,
    pub(crate) key: X,
    pub(crate) store: Arc<St>,
    pub(crate) piece: u64,
    pub(crate) after: u64,
    pub(crate) paced: Paced,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) on_key_error: KeyErrorPolicy,
    pub(crate) response: R,
    /// Keys that step aside (a table's route that the limit does not
    /// cover): their bodies are not paced.
    pub(crate) skip: Option<fn(&X::Key) -> bool>,
    pub(crate) no_peer_logged: AtomicBool,
}
