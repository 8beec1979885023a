//! Key extractors: what a request is limited by (client IP, token, user, route...).
//!
//! Every extractor implements [`KeyExtractor`]; closures
//! `Fn(&http::request::Parts) -> Result<K, KeyError>` do too. Built-in keys
//! are cheap to extract (IP keys are `Copy`, header keys share the header's
//! bytes) and implement `Display`, `Hash` and `Eq`, as in-memory and remote
//! stores need.
//!
//! When no key can be extracted the layer applies its
//! [`KeyErrorPolicy`](crate::policy::KeyErrorPolicy): reject with the
//! error's 4xx status (the default), or let the request through unlimited.

mod api_key;
mod bearer;
mod client_ip;
mod composite;
mod extractor;
mod global;
mod header;
mod ip;
mod peer_ip;
mod user;

pub use api_key::ApiKey;
pub use bearer::Bearer;
pub use client_ip::{ClientIp, ProxyHeader};
pub use composite::{Composite, Pair, Route, RouteKey};
pub use extractor::{KeyError, KeyErrorKind, KeyExtractor};
pub use global::{Global, GlobalKey};
pub use header::{Header, HeaderKey};
pub use ip::{IpKey, IpPrefixes};
pub use peer_ip::{peer_addr, PeerAddr, PeerIp};
pub use user::FromExtension;
