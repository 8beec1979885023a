//! Cross-crate integration tests live in `tests/`: the example apps probed
//! as a client would.
