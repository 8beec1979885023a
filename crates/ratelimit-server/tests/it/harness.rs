//! Starts a server of a configuration on free ports, and its clients.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use ratelimit_core::{Clock, SystemClock};
use ratelimit_server::{Config, ConfigFileError, Reloaded, Running, State};
use std::sync::Arc;
use tonic::transport::Channel;
use tower_ratelimit::serve::ServeOptions;

/// A running server and clients of it.
pub struct Harness {
    pub running: Running,
    pub state: Arc<State>,
    pub grpc: RateLimitServiceClient<Channel>,
    http: HttpClient,
}

/// An HTTP answer.
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Harness {
    /// The server of the `[[limit]]` entries in `toml` (and `[server]`
    /// settings, whose addresses are replaced by free ports).
    pub async fn start(toml: &str) -> Self {
        Self::start_with_clock(toml, Arc::new(SystemClock::new())).await
    }

    /// As [`start`](Self::start), the stores on `clock`.
    pub async fn start_with_clock(toml: &str, clock: Arc<dyn Clock>) -> Self {
        let config = Config::parse(toml, "test.toml", |_| None).expect("test config");
        Self::start_config(config, clock).await
    }

    /// The server of `config`, its addresses (and those of metrics and
    /// admin, when on) replaced by free ports, the stores on `clock`.
    pub async fn start_config(config: Config, clock: Arc<dyn Clock>) -> Self {
        Self::start_serving(config, clock, ServeOptions::default()).await
    }

    /// As [`start_config`](Self::start_config), the listeners with `options`.
    pub async fn start_serving(
        mut config: Config,
        clock: Arc<dyn Clock>,
        options: ServeOptions,
    ) -> Self {
        free_ports(&mut config);
        let state = Arc::new(State::with_clock(&config, clock).expect("stores"));
        let running = Running::start(Arc::clone(&state), options)
            .await
            .expect("listen");
        let grpc = RateLimitServiceClient::connect(format!("http://{}", running.grpc_addr))
            .await
            .expect("gRPC connect");
        let http = http_client();
        Self {
            running,
            state,
            grpc,
            http,
        }
    }

    /// Reloads `config`, its addresses replaced as at start.
    pub fn reload(&self, mut config: Config) -> Result<Reloaded, ConfigFileError> {
        free_ports(&mut config);
        self.state.reload(&config)
    }

    /// `ShouldRateLimit` of `request`.
    pub async fn rls(&self, request: RateLimitRequest) -> RateLimitResponse {
        self.grpc
            .clone()
            .should_rate_limit(request)
            .await
            .expect("ShouldRateLimit")
            .into_inner()
    }

    /// An HTTP call to the server's HTTP API.
    pub async fn http(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let uri = format!("http://{}{path_and_query}", self.running.http_addr);
        call(&self.http, method, &uri, headers, body).await
    }

    /// An HTTP call to `addr` (the metrics or admin listener).
    pub async fn http_at(
        &self,
        addr: Option<std::net::SocketAddr>,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let addr = addr.expect("that listener is on");
        let uri = format!("http://{addr}{path_and_query}");
        call(&self.http, method, &uri, headers, body).await
    }
}

/// `config`'s addresses (those of metrics and admin, when on) replaced by
/// port 0: free ports.
fn free_ports(config: &mut Config) {
    let free: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    config.server.grpc = free;
    config.server.http = free;
    let deployment = &mut config.deployment;
    deployment.metrics = deployment.metrics.map(|_| free);
    if let Some(admin) = &mut deployment.admin {
        admin.address = free;
    }
}

/// A plain HTTP/1.1 client.
pub type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// A new [`HttpClient`].
pub fn http_client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// An HTTP call to `uri` (a JSON body if not empty).
pub async fn call(
    client: &HttpClient,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = http::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if !body.is_empty() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = client.request(request).await.expect("HTTP call");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// A descriptor of `entries`, with a per-descriptor `hits_addend` if given.
pub fn descriptor(entries: &[(&str, &str)], hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        hits_addend: hits.map(|value| UInt64Value { value }),
        ..RateLimitDescriptor::default()
    }
}

/// A request in `domain` of `descriptors`, with the request-level `hits_addend`.
pub fn request(
    domain: &str,
    descriptors: Vec<RateLimitDescriptor>,
    hits_addend: u32,
) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend,
    }
}
