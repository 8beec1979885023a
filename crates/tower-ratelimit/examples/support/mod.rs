//! What the recipes' tests share: a request from a given client address,
//! sent to the app in-process, tagged as `axum::serve` tags it with
//! `into_make_service_with_connect_info`.
#![allow(dead_code)] // each recipe uses a part

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{request::Builder, Request, Response};
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::net::SocketAddr;
use tower::{Service, ServiceExt};

/// A request being written.
pub struct Probe {
    req: Builder,
    body: Body,
}

/// A `method` request for `uri` from `peer` (`"203.0.113.7:40000"`).
pub fn from(peer: &str, method: &str, uri: &str) -> Probe {
    let peer: SocketAddr = peer.parse().expect("a socket address");
    Probe {
        req: Request::builder()
            .method(method)
            .uri(uri)
            .extension(ConnectInfo(peer)),
        body: Body::empty(),
    }
}

impl Probe {
    /// With the header `name: value`.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.req = self.req.header(name, value);
        self
    }

    /// With `body`.
    pub fn body(mut self, body: &'static str) -> Self {
        self.body = Body::from(body);
        self
    }

    /// The app's response.
    pub async fn send<S>(self, app: &S) -> Response<Body>
    where
        S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone,
    {
        let req = self.req.body(self.body).expect("a valid request");
        app.clone()
            .oneshot(req)
            .await
            .unwrap_or_else(|e| match e {})
    }

    /// The status of the app's response.
    pub async fn status<S>(self, app: &S) -> u16
    where
        S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone,
    {
        self.send(app).await.status().as_u16()
    }
}

/// A response header as text ("" when absent).
pub fn header<'a>(res: &'a Response<Body>, name: &str) -> &'a str {
    res.headers()
        .get(name)
        .map_or("", |v| v.to_str().expect("a text header"))
}

/// The response body as text.
pub async fn text(res: Response<Body>) -> String {
    let bytes = res.into_body().collect().await.expect("a body").to_bytes();
    String::from_utf8(bytes.to_vec()).expect("a text body")
}
