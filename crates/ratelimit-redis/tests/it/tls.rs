//! `rediss://` (feature `tls`): a private CA and a server certificate made
//! here, a `redis-server --tls-port` using them; limits hold over TLS with
//! the CA given, and a server whose certificate does not chain to the CA
//! given is refused with an error naming the certificate.

use crate::harness::Client as _;
use crate::harness::RedisServer;
use ratelimit_core::{Gcra, Store};
use ratelimit_redis::{RedisStore, Target};
use ratelimit_test_support::redis_server::free_port;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The files of a private CA, a server certificate it signed (for
/// 127.0.0.1 and localhost), and another CA that signed nothing here.
pub struct Pki {
    dir: PathBuf,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub other_ca: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ca_params(name: &str) -> rcgen::CertificateParams {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    params
}

impl Pki {
    /// Made afresh in a temp dir of its own (removed on drop).
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "ratelimit-it-tls-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca =
            rcgen::CertifiedIssuer::self_signed(ca_params("ratelimit test CA"), ca_key).unwrap();
        let server_key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "127.0.0.1");
        let cert = params.signed_by(&server_key, &ca).unwrap();
        let other_key = rcgen::KeyPair::generate().unwrap();
        let other =
            rcgen::CertifiedIssuer::self_signed(ca_params("another CA"), other_key).unwrap();
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        Self {
            ca: write("ca.pem", ca.pem()),
            cert: write("server.pem", cert.pem()),
            key: write("server.key", server_key.serialize_pem()),
            other_ca: write("other-ca.pem", other.pem()),
            dir,
        }
    }
}

/// A server with a TLS port (and its plain port, which the harness pings
/// and the test reads keys through), or `None` to skip.
pub fn tls_server(pki: &Pki) -> Option<(RedisServer, u16)> {
    let tls_port = free_port().to_string();
    let path = |p: &Path| p.display().to_string();
    let server = RedisServer::start_with(&[
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        &path(&pki.cert),
        "--tls-key-file",
        &path(&pki.key),
        "--tls-ca-cert-file",
        &path(&pki.ca),
        "--tls-auth-clients",
        "no",
    ])?;
    Some((server, tls_port.parse().unwrap()))
}

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
