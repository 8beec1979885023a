//! Strategies and settings of a layer: modes, costs, per-request limit
//! selection, counted responses and failure handling.
//!
//! Per-route and per-method limits need nothing special: put a layer on a
//! route with axum's `route_layer` (or on a `MethodRouter`), or choose limits
//! per request with a [`LimitSelector`].

mod cost;
mod failure;
mod header_cost;
mod key_error;
mod mode;
mod predicate;
mod select;

pub use cost::{Cost, FixedCost};
pub use failure::FailurePolicy;
pub use header_cost::HeaderCost;
pub use key_error::KeyErrorPolicy;
pub use mode::Mode;
pub use predicate::{ClientErrors, ResponsePredicate, ServerErrors, StatusIs, Successes};
pub use select::{LimitSelector, Selection};
