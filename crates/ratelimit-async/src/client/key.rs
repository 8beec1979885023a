//! What outgoing requests are paced and held by.

use http::Request;

/// Picks the key an outgoing request is paced by: [`Host`], or a closure
/// `Fn(&Method, &Uri, &HeaderMap) -> Option<K>` (see the impl below).
///
/// ```
/// use ratelimit_async::client::{Host, RequestKey};
///
/// let req = http::Request::get("https://api.example.com/v1").body(()).unwrap();
/// assert_eq!(Host.key(&req), Some("api.example.com:443".to_string()));
/// ```
pub trait RequestKey: Clone + Send + Sync + 'static {
    /// The key.
    type Key: std::hash::Hash + Send + Sync + 'static;

    /// The request's key; `None`: the request is not paced.
    fn key<B>(&self, req: &Request<B>) -> Option<Self::Key>;
}

/// The request's host and port (`api.example.com:443`), lower-case: from
/// the URI's authority, else the `Host` header; none (not paced, not
/// held) without either. The default key, and always the key of the
/// holds a server's `Retry-After` and `RateLimit` fields set.
///
/// ```
/// use ratelimit_async::client::{Host, RequestKey};
///
/// let req = http::Request::get("/v1").header("host", "API.example.com:8080").body(()).unwrap();
/// assert_eq!(Host.key(&req), Some("api.example.com:8080".to_string()));
/// let no_host = http::Request::get("/v1").body(()).unwrap();
/// assert_eq!(Host.key(&no_host), None);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Host;

impl RequestKey for Host {
    type Key = String;

    fn key<B>(&self, req: &Request<B>) -> Option<String> {
        host(req)
    }
}

/// The host of `req` (see [`Host`]).
pub(crate) fn host<B>(req: &Request<B>) -> Option<String> {
    let uri = req.uri();
    if let Some(authority) = uri.authority() {
        let port = authority.port_u16().or(match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        let host = authority.host().to_ascii_lowercase();
        return Some(match port {
            Some(port) => format!("{host}:{port}"),
            None => host,
        });
    }
    let header = req.headers().get(http::header::HOST)?.to_str().ok()?;
    let authority: http::uri::Authority = header.trim().parse().ok()?;
    let host = authority.host().to_ascii_lowercase();
    Some(match authority.port_u16() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}

/// Closures of the request's method, URI and headers are keys too;
/// `None`: not paced.
///
/// ```
/// use http::{HeaderMap, Method, Uri};
/// use ratelimit_async::client::RequestKey;
/// // One limit per API token, whatever the host.
/// let by_token = |_: &Method, _: &Uri, headers: &HeaderMap| {
///     headers.get("x-api-token").map(|t| t.as_bytes().to_vec())
/// };
/// let req = http::Request::get("/").header("x-api-token", "t1").body(()).unwrap();
/// assert_eq!(by_token.key(&req), Some(b"t1".to_vec()));
/// ```
impl<F, K> RequestKey for F
where
    F: Fn(&http::Method, &http::Uri, &http::HeaderMap) -> Option<K> + Clone + Send + Sync + 'static,
    K: std::hash::Hash + Send + Sync + 'static,
{
    type Key = K;

    fn key<B>(&self, req: &Request<B>) -> Option<K> {
        self(req.method(), req.uri(), req.headers())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(uri: &str, host_header: Option<&str>) -> Request<()> {
        let mut b = Request::builder().uri(uri);
        if let Some(h) = host_header {
            b = b.header("host", h);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn host_and_port_from_the_uri_or_the_host_header() {
        assert_eq!(
            host(&req("http://Example.COM/x", None)).unwrap(),
            "example.com:80"
        );
        assert_eq!(host(&req("https://a.b/x", None)).unwrap(), "a.b:443");
        assert_eq!(
            host(&req("http://127.0.0.1:3000/", None)).unwrap(),
            "127.0.0.1:3000"
        );
        assert_eq!(host(&req("/x", Some("API.x:8080"))).unwrap(), "api.x:8080");
        assert_eq!(host(&req("/x", Some("api.x"))).unwrap(), "api.x");
        assert_eq!(host(&req("/x", None)), None);
        assert_eq!(host(&req("/x", Some("bad host"))), None);
    }
}
