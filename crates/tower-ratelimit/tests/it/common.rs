//! Shared helpers.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use http_body_util::BodyExt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const SEC: Duration = Duration::from_secs(1);

/// A GET request from `peer`, with headers.
pub fn get_from(peer: &str, uri: &str, headers: &[(&str, &[u8])]) -> Request<Body> {
    let mut b = Request::get(uri);
    for (n, v) in headers {
        b = b.header(*n, axum::http::HeaderValue::from_bytes(v).unwrap());
    }
    let mut req = b.body(Body::empty()).unwrap();
    let addr: SocketAddr = peer.parse().unwrap();
    req.extensions_mut().insert(ConnectInfo(addr));
    req
}

pub async fn body_string(res: Response<Body>) -> String {
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Counts how many requests reached the handler.
#[derive(Clone, Default)]
pub struct Hits(pub Arc<AtomicUsize>);

impl Hits {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
    pub fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Captured log output.
#[derive(Clone, Default)]
pub struct Captured(pub Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures this thread's log lines at `warn` and above while the guard
/// lives.
pub fn capture_warnings() -> (Captured, tracing::subscriber::DefaultGuard) {
    capture(tracing::Level::WARN)
}

/// Captures this thread's log lines at `level` and above while the guard
/// lives.
pub fn capture(level: tracing::Level) -> (Captured, tracing::subscriber::DefaultGuard) {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(level)
        .finish();
    (out, tracing::subscriber::set_default(subscriber))
}

/// A fresh directory for a test's files under the system's temporary one,
/// named after `name`, this process and the time.
#[cfg(feature = "table")]
pub fn fresh_dir(name: &str) -> std::path::PathBuf {
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("{name}-{}-{unique}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
