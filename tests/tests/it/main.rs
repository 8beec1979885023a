//! The cross-crate integration tests, one binary: the contract's and the
//! guide's worked examples replayed through the simulator (`contract`),
//! the example apps probed as a client would (`examples`), and the axum
//! example's reports under a flood (`reports`).

mod contract;
mod examples;
mod reports;
