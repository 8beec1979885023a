//! [`Now`]: the value of a store's answer that the test knows is ready.

use ratelimit_core::Answer;

/// The value of an answer the store gave at once (a memory store's).
pub trait Now<T> {
    /// The ready value; panics if the answer is pending.
    fn now(self) -> T;
}

impl<T, F> Now<T> for Answer<T, F> {
    fn now(self) -> T {
        match self.into_ready() {
            Ok(value) => value,
            Err(_) => panic!("the store did not answer at once"),
        }
    }
}
