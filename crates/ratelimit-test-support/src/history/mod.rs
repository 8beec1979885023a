//! Linearizability of a store's concurrent histories: operations recorded
//! from many threads or tasks, and each key's history searched for an
//! order, consistent with real time, in which the reference model gives
//! every answer seen.
//!
//! The search is Wing and Gong's: depth first over the operations that
//! may go next (invoked before any pending operation returned), with
//! Lowe's memo of (the set of operations linearized, the model's state),
//! so an order already refuted is not tried again. Keys share nothing
//! (ALGORITHMS.md, "Ground rules"), so each key's history is checked on
//! its own (P-compositionality). A key holds at most 128 operations, and
//! the search is bounded in steps ([`Checker::max_steps`]).
//!
//! Time: each operation carries the `now` the store decided at. On a
//! manual clock that no task moves during a burst, every operation of the
//! burst has the same `now`, and bursts are apart in real time, so any
//! order the search takes keeps time monotonic. A store that reads its own
//! clock (Redis's `TIME`) can be checked on a period so long that the
//! test's seconds move no `allowed` or `remaining`, with
//! [`Checker::ignore_wait`] and any constant `now`.

mod checker;
mod event;
mod mix;
#[cfg(test)]
mod tests;
mod violation;

pub use checker::Checker;
pub use event::{admitted_cost, Answer, Event, Op, Recorder};
pub use mix::Mix;
pub use violation::{Summary, Violation};
