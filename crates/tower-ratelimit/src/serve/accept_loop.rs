//! The accept loop (`serve`): accepts connections through the gate of
//! caps and serves each, HTTP/1.1 or HTTP/2, until shutdown.

use super::connection_task::ConnectionTask;
use super::gate::Gate;
use super::options::ServeOptions;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::{Service, ServiceBuilder};
use tower_http::body::Limited;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

/// The body of the requests that [`serve`] hands to the app: the
/// connection's body, limited to [`ServeOptions::max_body_bytes`].
///
/// ```
/// use tower_ratelimit::serve::RequestBody;
///
/// fn body_of(req: http::Request<RequestBody>) -> RequestBody {
///     req.into_body()
/// }
/// ```
pub type RequestBody = Limited<Incoming>;

/// Any error.
///
/// ```
/// use tower_ratelimit::serve::BoxError;
///
/// let e: BoxError = "refused".into();
/// assert_eq!(e.to_string(), "refused");
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves HTTP/1.1 and HTTP/2 (h2c, prior knowledge) on `listener` until
/// `shutdown` completes, then lets open connections finish (at most
/// [`ServeOptions::shutdown_grace`]).
///
/// `make_service` is called once per connection with the peer's address:
/// the place to tag requests with it (axum's `ConnectInfo`, or
/// [`PeerAddr`](crate::key::PeerAddr)). Every request of the connection,
/// HTTP/2 streams included, goes through that service.
pub async fn serve<M, S, B>(
    listener: TcpListener,
    options: ServeOptions,
    mut make_service: M,
    shutdown: impl Future<Output = ()>,
) where
    M: FnMut(SocketAddr) -> S,
    S: Service<Request<RequestBody>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = hyper::body::Bytes> + Default + Send + 'static,
    B::Error: Into<BoxError>,
{
    let http = builder(&options);
    let mut gate = Gate::new(&options);
    let (stop, stopped) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match gate.accepted(accepted) {
            Ok(accepted) => accepted,
            Err(delay) => tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(delay) => continue,
            },
        };
        let Some(entry) = gate.admit(peer) else {
            continue;
        };
        let slot = tokio::select! {
            biased;
            () = &mut shutdown => break,
            slot = gate.slot(&entry) => slot,
        };
        let _ = stream.set_nodelay(true);
        let task = ConnectionTask {
            entry,
            slot,
            idle_timeout: options.idle_timeout,
            stopped: stopped.clone(),
        };
        let svc = layered(&options, make_service(peer));
        tokio::spawn(task.serve(http.clone(), stream, peer, svc));
    }
    drop(listener);
    stop.send_replace(true);
    gate.drain(options.shutdown_grace).await;
}

/// `svc` under the body size limit and the request timeout.
fn layered<S>(
    options: &ServeOptions,
    svc: S,
) -> tower_http::limit::RequestBodyLimit<tower_http::timeout::Timeout<S>> {
    ServiceBuilder::new()
        .layer(RequestBodyLimitLayer::new(options.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            options.request_timeout,
        ))
        .service(svc)
}

/// The HTTP/2 flow-control window of a stream: 64 KiB, the largest body
/// by default (the protocol's own default is 64 KiB less one byte).
const H2_STREAM_WINDOW: u32 = 64 * 1024;

/// The HTTP/1.1 and HTTP/2 settings of every connection.
fn builder(options: &ServeOptions) -> auto::Builder<TokioExecutor> {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    // A client may send this much before the app reads it: a stream its
    // window, a connection at most 256 KiB, whatever its streams.
    http.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(options.max_streams_per_connection)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(4 * H2_STREAM_WINDOW);
    http
}
