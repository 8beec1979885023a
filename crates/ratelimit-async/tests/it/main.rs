//! The integration tests of `ratelimit-async`, one binary: the limiter on
//! tokio's paused clock, the client layer against scripted servers, and the
//! real timer's wake-up error (which calibrates itself against tokio's own
//! timer first, so other tests running beside it only widen its bound).

mod client;
mod limiter;
mod wake_up;
