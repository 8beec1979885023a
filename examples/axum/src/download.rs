//! `GET /download`: a 1 MiB file, its body paced by the policy file's `download` limit (256 KiB/s per client IP).

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use std::sync::OnceLock;

/// The size of the download: 1 MiB.
pub const DOWNLOAD_BYTES: usize = 1 << 20;

/// The file, made once for the process: every download shares it, so a
/// client paced for seconds holds no copy of its own.
fn file() -> Bytes {
    static FILE: OnceLock<Bytes> = OnceLock::new();
    FILE.get_or_init(|| Bytes::from(vec![b'.'; DOWNLOAD_BYTES]))
        .clone()
}

/// Answers with [`DOWNLOAD_BYTES`] bytes; the pace layer in front of it
/// yields them no faster than the client's budget allows.
pub(crate) async fn download() -> Response {
    (
        [(CONTENT_TYPE, "application/octet-stream")],
        Body::from(file()),
    )
        .into_response()
}
