//! [`Reserved`]: what an admitted request took from its limits, to give back or settle.

use smallvec::SmallVec;

/// Cost reserved by an admitted request, for refunds.
pub(crate) struct Reserved<K> {
    pub(crate) key: K,
    pub(crate) cost: u64,
    pub(crate) at: u64,
    /// The limits that admitted it.
    pub(crate) limits: SmallVec<[usize; 2]>,
}
