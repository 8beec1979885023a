//! `rediss://` (feature `tls`): a private CA and a server certificate made
//! here, a `redis-server --tls-port` using them; limits hold over TLS with
//! the CA given, and a server whose certificate does not chain to the CA
//! given is refused with an error naming the certificate.

use crate::harness::Client as _;
use ratelimit_core::{Gcra, Store};
use ratelimit_redis::{RedisStore, Target};
use ratelimit_test_support::tls::{tls_server, Pki};
use std::time::Duration;

fn store(target: Target) -> RedisStore {
    RedisStore::builder(target, Gcra::new(3, Duration::from_secs(3600)).unwrap())
        .timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// An error and its sources, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_over_tls_with_a_private_ca() {
    let pki = Pki::new("ok");
    let Some((server, tls_port)) = tls_server(&pki) else {
        return;
    };
    let url = format!("rediss://127.0.0.1:{tls_port}/");
    // Two instances sharing the limit over TLS.
    let a = store(Target::parse(&url, Some(&pki.ca)).unwrap());
    let b = store(Target::parse(&url, Some(&pki.ca)).unwrap());
    let mut admitted = 0;
    for i in 0..10 {
        let s = if i % 2 == 0 { &a } else { &b };
        admitted += u32::from(
            Store::<str>::check(s, "tls-user", 1, 0)
                .await
                .unwrap()
                .allowed,
        );
    }
    assert_eq!(admitted, 3);
    // The state is in this server (read through its plain port).
    let mut plain = server.client().await;
    let exists: bool = redis::cmd("EXISTS")
        .arg(a.redis_key("tls-user"))
        .query_async(&mut plain)
        .await
        .unwrap();
    assert!(exists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_ca_is_refused() {
    let pki = Pki::new("wrong");
    let Some((_server, tls_port)) = tls_server(&pki) else {
        return;
    };
    let url = format!("rediss://127.0.0.1:{tls_port}/");
    // The other CA, then the web roots: neither signed the server's.
    for target in [
        Target::parse(&url, Some(&pki.other_ca)).unwrap(),
        Target::parse(&url, None).unwrap(),
    ] {
        let s = store(target);
        let err = Store::<str>::check(&s, "k", 1, 0).await.unwrap_err();
        let text = chain(&err);
        assert!(
            text.contains("certificate") && text.contains("UnknownIssuer"),
            "{text}"
        );
        // With a fallback, the limit holds in memory: no error at all.
        let target = Target::parse(&url, Some(&pki.other_ca)).unwrap();
        let fallback =
            RedisStore::builder(target, Gcra::new(2, Duration::from_secs(3600)).unwrap())
                .timeout(Duration::from_secs(2))
                .fallback_to_memory(100)
                .build()
                .unwrap();
        let mut admitted = 0;
        for _ in 0..4 {
            admitted += u32::from(
                Store::<str>::check(&fallback, "k", 1, 0)
                    .await
                    .unwrap()
                    .allowed,
            );
        }
        assert_eq!(admitted, 2);
    }
}
