//! The reference models (`ratelimit_test_support::model`, written from the
//! contract and independent of this crate), with this crate's anchors and
//! `stable_hash` plugged in.

pub use ratelimit_test_support::model::{Model, Out, Spec};

use ratelimit_core::algorithm::{stable_hash, Anchor};
use ratelimit_test_support::model::Anchor as ModelAnchor;

/// A model of `spec` for `u64` keys; key offsets by [`stable_hash`].
pub fn model(spec: Spec) -> Model<u64> {
    Model::new(spec).with_key_hash(stable_hash::<u64>)
}

/// The model's name for `anchor`.
pub fn anchor(anchor: Anchor) -> ModelAnchor {
    match anchor {
        Anchor::Aligned => ModelAnchor::Aligned,
        Anchor::FirstRequest => ModelAnchor::FirstRequest,
        Anchor::KeyOffset => ModelAnchor::KeyOffset,
    }
}
