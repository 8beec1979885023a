//! Algorithms as text: one line names an algorithm and its settings
//! (`gcra 100/1m burst 20`), parsed by [`AnyAlgorithm`]'s `FromStr` and
//! printed back by its `Display`.
//!
//! The form is documented on [`AnyAlgorithm`].

mod display;
mod error;
mod parse;
#[cfg(feature = "serde")]
mod serde_form;

pub use error::SpecError;
use parse::anchor_name;
#[cfg(feature = "serde")]
use parse::{fixed_window, parse_period, Period};
