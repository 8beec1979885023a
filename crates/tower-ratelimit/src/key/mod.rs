//! Key extractors: what a request is limited by (client IP, token, user, route...).
//!
//! Every extractor implements [`KeyExtractor`]; closures
//! `Fn(&http::request::Parts) -> Result<K, KeyError>` do too. Built-in keys
//! implement `Display`, `Hash` and `Eq`, as in-memory and remote stores
//! need.
//!
//! When no key can be extracted the layer applies its
//! [`KeyErrorPolicy`](crate::strategy::KeyErrorPolicy): reject with the
//! error's 4xx status (the default), or let the request through unlimited.
//!
//! # Memory per key
//!
//! A key a store keeps lives as long as its limit's state, and clients
//! choose how many there are, so every stored key owns a few bytes of its
//! own and never the request's buffers (hyper keeps a whole request head
//! in one buffer that every header value and the URI share). Text keys
//! are [`HeaderKey`]s: up to 64 bytes are kept as they are, longer ones
//! as `#` and the 32 hex digits of a 128-bit digest, the same in every
//! process (see [`HeaderKey`]). A request's key also holds the text the
//! client sent, for the request's life; a store keeps the digest only
//! ([`StableKey::into_stored`](ratelimit_core::algorithm::StableKey::into_stored)).
//!
//! Bytes per stored key, inline size included, on 64-bit Linux, measured
//! by `tests/memory.rs` (10,000 keys from requests each carrying a 16 KB
//! unrelated header, the requests dropped), before the store's own cost:
//!
//! | extractor | key | bytes per key |
//! |---|---|---|
//! | [`PeerIp`], [`ClientIp`] | [`IpKey`] (`Copy`) | 18 |
//! | [`Global`] | [`GlobalKey`] (`Copy`) | 0 |
//! | [`Bearer`], [`ApiKey`], [`Header`] | [`HeaderKey`] | 24 + the key's length (at most 64); 57 for a longer key (the digest, and whether it is secret) |
//! | [`Route`] | [`RouteKey`] | 48 with a matched route (shared with the router); 48 + the path's length (at most 64), or 81 for a longer path; an extension method longer than 15 bytes adds 33 |
//! | [`Composite`] | [`CompositeKey`] | the two keys' sizes |
//! | [`FromExtension<T>`] | `T` | `T`'s: make it own small data, not a `HeaderValue` or `Bytes` clone |
//! | closures | yours | yours: see [`KeyExtractor`] |

mod api_key;
mod bearer;
mod client_ip;
mod composite;
mod digest;
mod extractor;
mod forwarded;
mod from_extension;
mod global;
pub(crate) mod header;
pub(crate) mod ip;
pub(crate) mod peer_ip;
mod proxy_header;
mod proxy_watch;
mod route;

pub use api_key::ApiKey;
pub use bearer::Bearer;
pub use client_ip::ClientIp;
pub use composite::{Composite, CompositeKey};
pub use extractor::{KeyError, KeyErrorKind, KeyExtractor};
pub use from_extension::FromExtension;
pub use global::{Global, GlobalKey};
pub use header::{Header, HeaderKey};
pub use ip::{IpKey, IpPrefixes};
pub use peer_ip::{peer_addr, PeerAddr, PeerIp};
pub use proxy_header::ProxyHeader;
pub use route::{Route, RouteKey};
