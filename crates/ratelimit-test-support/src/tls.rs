//! A private CA, a server certificate it signed (for 127.0.0.1 and
//! localhost) and another CA, as PEM files made for one test, and a
//! `redis-server` serving TLS with them (feature `tls`).

use crate::redis_server::{free_port, RedisServer};
use std::path::{Path, PathBuf};

/// The files of a private CA, a server certificate it signed (for
/// 127.0.0.1 and localhost), and another CA that signed nothing here.
pub struct Pki {
    dir: PathBuf,
    /// The CA that signed the server certificate.
    pub ca: PathBuf,
    /// The server certificate.
    pub cert: PathBuf,
    /// The server certificate's private key.
    pub key: PathBuf,
    /// A CA that signed nothing here.
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
