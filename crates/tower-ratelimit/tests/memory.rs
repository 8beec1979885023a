//! Memory per key: extracted keys own a few bytes, never the request's
//! buffers, and what a store keeps of a key is bounded however long the
//! key the client sent.
//!
//! hyper parses a request head into one buffer and every header value (and
//! the URI) shares it, so a key that kept a `HeaderValue` would keep the
//! whole head alive: kilobytes per key. Here each request carries a 16 KB
//! unrelated header in the same shared buffer as the key's header, the keys
//! are kept and the requests dropped, and the live heap per key is counted.
//!
//! Allocated bytes are counted by a `#[global_allocator]` wrapper around
//! `std::alloc::System`, so this is its own test binary (the counter sees
//! the whole process) with a single test.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Uri};
use ratelimit_core::algorithm::StableKey;
use ratelimit_core::{Gcra, MemoryStore, Store};
use ratelimit_test_support::CountingAlloc;
use std::time::Duration;
use tower_ratelimit::key::{
    ApiKey, Bearer, ClientIp, Composite, Header, HeaderKey, KeyExtractor, PeerAddr, PeerIp,
    ProxyHeader, Route,
};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

fn allocated() -> usize {
    GLOBAL.allocated()
}

const KEYS: usize = 10_000;
const BIG: usize = 16 * 1024;

/// A request head as hyper leaves it: one buffer holding a 16 KB unrelated
/// header, the key header `name: value` and the path, every value and the
/// URI slices of it. `i` makes the key distinct.
fn request(i: usize, name: &str, value: &str, method: &str, path: &str) -> Parts {
    let value = value.replace("{i}", &format!("{i:08}"));
    let path = path.replace("{i}", &format!("{i:08}"));
    let method = method.replace("{i}", &format!("{i:08}"));
    let mut head = vec![b'b'; BIG];
    head.extend_from_slice(value.as_bytes());
    head.extend_from_slice(path.as_bytes());
    let head = Bytes::from(head);
    let mut parts = http::Request::new(()).into_parts().0;
    let shared = |r: std::ops::Range<usize>| HeaderValue::from_maybe_shared(head.slice(r)).unwrap();
    parts.headers.insert("x-big", shared(0..BIG));
    let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
    parts.headers.insert(name, shared(BIG..BIG + value.len()));
    parts.method = method.parse().unwrap();
    parts.uri = Uri::from_maybe_shared(head.slice(BIG + value.len()..)).unwrap();
    parts.extensions.insert(PeerAddr(
        format!("10.0.{}.{}:1", i / 256 % 256, i % 256)
            .parse()
            .unwrap(),
    ));
    parts
}

/// Live bytes per key (its inline size included) after extracting `KEYS`
/// keys with `x`, keeping their stored forms (what a store keeps) and
/// dropping the requests.
fn per_key<X: KeyExtractor>(x: &X, name: &str, value: &str, path: &str) -> usize
where
    X::Key: StableKey,
{
    per_key_method(x, name, value, "GET", path)
}

/// [`per_key`] with this method.
fn per_key_method<X: KeyExtractor>(
    x: &X,
    name: &str,
    value: &str,
    method: &str,
    path: &str,
) -> usize
where
    X::Key: StableKey,
{
    let mut keys = Vec::with_capacity(KEYS);
    let before = allocated();
    for i in 0..KEYS {
        let req = request(i, name, value, method, path);
        keys.push(x.extract(&req).expect("a key").into_stored());
    }
    let heap = allocated().saturating_sub(before);
    heap / KEYS + std::mem::size_of::<X::Key>()
}

/// Live bytes per request key (before a store keeps it): the key sent,
/// never the request's shared buffer.
fn per_request_key<X: KeyExtractor>(x: &X, name: &str, value: &str) -> usize {
    let mut keys = Vec::with_capacity(KEYS);
    let before = allocated();
    for i in 0..KEYS {
        keys.push(
            x.extract(&request(i, name, value, "GET", "/"))
                .expect("a key"),
        );
    }
    let heap = allocated().saturating_sub(before);
    heap / KEYS + std::mem::size_of::<X::Key>()
}

/// Live bytes per key of a memory store checked with `KEYS` bearer
/// tokens of 4 KB, the requests and their keys dropped: the store keeps
/// each key's digest, not the text sent.
fn per_stored_long_key() -> usize {
    let store: MemoryStore<Gcra, HeaderKey> =
        MemoryStore::new(Gcra::new(10, Duration::from_secs(60)).unwrap());
    let token = format!("Bearer {}{{i}}", "t".repeat(4088));
    let before = allocated();
    for i in 0..KEYS {
        let key = Bearer::new()
            .extract(&request(i, "authorization", &token, "GET", "/"))
            .expect("a key");
        assert!(key.sent().is_some_and(|s| s.len() == 4096), "the text sent");
        assert!(store.check(&key, 1, 0).value().unwrap().allowed);
    }
    assert_eq!(store.len(), KEYS);
    allocated().saturating_sub(before) / KEYS
}

#[test]
fn keys_hold_only_their_own_bytes() {
    let token32 = format!("{}{{i}}", "t".repeat(24));
    let token4k = format!("{}{{i}}", "t".repeat(4088));
    let bearer32 = format!("Bearer {token32}");
    let bearer4k = format!("Bearer {token4k}");
    let ip = ClientIp::new(["10.0.0.0/8"])
        .unwrap()
        .header(ProxyHeader::X_REAL_IP);
    let cases: Vec<(&str, usize, usize)> = vec![
        (
            "Bearer, 32-byte token",
            per_key(&Bearer::new(), "authorization", &bearer32, "/"),
            100,
        ),
        (
            "Bearer, 4 KB token",
            per_key(&Bearer::new(), "authorization", &bearer4k, "/"),
            100,
        ),
        (
            "ApiKey, 32 bytes",
            per_key(&ApiKey::new(), "x-api-key", &token32, "/"),
            100,
        ),
        (
            "Header, 1 KB value",
            per_key(
                &"x-tenant".parse::<Header>().unwrap(),
                "x-tenant",
                &format!("{}{{i}}", "v".repeat(1016)),
                "/",
            ),
            100,
        ),
        ("PeerIp", per_key(&PeerIp::new(), "x-none", "", "/"), 32),
        (
            "ClientIp (X-Real-IP)",
            per_key(&ip, "x-real-ip", "203.0.113.9", "/"),
            32,
        ),
        (
            "Route, 64-byte path",
            per_key(&Route, "x-none", "", &format!("/{}{{i}}", "p".repeat(55))),
            128,
        ),
        (
            "Route, 4 KB path",
            per_key(&Route, "x-none", "", &format!("/{}{{i}}", "p".repeat(4087))),
            128,
        ),
        (
            "Route, 4 KB method",
            per_key_method(
                &Route,
                "x-none",
                "",
                &format!("M{}{{i}}", "X".repeat(4087)),
                "/",
            ),
            128,
        ),
        (
            "Composite(Route, PeerIp)",
            per_key(
                &Composite::new(Route, PeerIp::new()),
                "x-none",
                "",
                "/users/{i}",
            ),
            128,
        ),
        (
            "Bearer, 4 KB token, the request's key",
            per_request_key(&Bearer::new(), "authorization", &bearer4k),
            4096 + 100,
        ),
        (
            "MemoryStore of 4 KB bearer tokens, per key",
            per_stored_long_key(),
            200,
        ),
    ];
    for (what, bytes, bound) in &cases {
        println!("{what}: {bytes} bytes per key (bound {bound})");
    }
    for (what, bytes, bound) in cases {
        assert!(
            bytes <= bound,
            "{what}: {bytes} bytes per key, more than {bound}"
        );
    }
}
