//! A Redis store for ratelimit-core.
