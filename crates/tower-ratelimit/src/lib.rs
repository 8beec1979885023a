//! Rate-limiting middleware for tower and axum.
