//! A private CA, a server certificate it signed (for 127.0.0.1 and
//! localhost) and another CA, as PEM files made for one test, and a
//! server serving TLS with them (feature `tls`), skipped loudly when the
//! server binary was built without TLS.

use crate::redis_server::{free_port, server_binary, skip_loudly, RedisServer, SERVER_VAR};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The files of a private CA, a server certificate it signed (for
/// 127.0.0.1 and localhost), and another CA that signed nothing here.
///
/// ```no_run
/// use ratelimit_test_support::tls::{tls_server, Pki};
///
/// let pki = Pki::new("my-test"); // files under a temp dir
/// if let Some((server, tls_port)) = tls_server(&pki) {
///     let url = format!("rediss://127.0.0.1:{tls_port}/");
///     # let _ = (server, url);
/// }
/// ```
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

/// Whether `bin` was built with TLS. Asked for a TLS port and no
/// certificate, a build without TLS exits saying "Failed finding TLS
/// support"; one with TLS exits on the missing certificate instead
/// (killed after 10 s if it runs on).
fn has_tls(bin: &Path) -> bool {
    let Ok(mut child) = Command::new(bin)
        .args(["--port", "0", "--tls-port", &free_port().to_string()])
        .args(["--save", "", "--appendonly", "no", "--logfile", ""])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        return true; // let the server's own start say what is wrong
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    child.wait_with_output().map_or(true, |out| {
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        !text.contains("TLS support")
    })
}

/// A server with a TLS port (and its plain port, which the harness pings
/// and the test reads keys through), or `None` to skip: without a server
/// binary (see [`RedisServer::start`]), or, loudly and under `CI=true`
/// too, when the binary was built without TLS (`valkey-server` as some
/// packages build it).
pub fn tls_server(pki: &Pki) -> Option<(RedisServer, u16)> {
    static TLS: OnceLock<bool> = OnceLock::new();
    if let Some(bin) = server_binary() {
        if !*TLS.get_or_init(|| has_tls(&bin)) {
            skip_loudly(&format!(
                "SKIPPED: {} has no TLS support (built without it; {SERVER_VAR} names it)",
                bin.display()
            ));
            return None;
        }
    }
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
