//! A server hardened for the open internet (feature `serve`): an accept
//! loop serving HTTP/1.1 and HTTP/2 on one port ([`serve`]), logs
//! ([`init_logs`]), a shutdown signal ([`shutdown_signal`]) and the
//! connection caps read from the environment ([`ServeOptions::from_env`]).
//!
//! [`deploy::Limits::serve`](crate::deploy::Limits::serve) serves an app
//! this way in one call; the example servers (`examples/hyper`,
//! `examples/grpc`) use the parts.
//!
//! One port serves HTTP/1.1 and cleartext HTTP/2 with prior knowledge
//! (h2c: a client that opens with the HTTP/2 preface). Every HTTP/2
//! stream is a request like any other: it goes through the same layers,
//! tagged with the same peer address, and each is counted by the limits.
//!
//! Against slow, half-sent or idle connections, each has:
//!
//! - a **header read timeout** ([`ServeOptions::header_read_timeout`],
//!   10 s): an HTTP/1.1 request head not complete in time, counted from the
//!   connection's start or the end of the previous response, closes the
//!   connection (so an idle HTTP/1.1 connection lasts at most this long);
//! - an **idle timeout** ([`ServeOptions::idle_timeout`], 10 s): a
//!   connection with no request in flight that long (since it was accepted
//!   or since its last response was sent) is closed, HTTP/2 with a
//!   `GOAWAY`; one that sent nothing yet is closed too;
//! - a **request timeout** ([`ServeOptions::request_timeout`], 10 s): a
//!   request (its body and its handling) not done in time is answered
//!   `408 Request Timeout` (an HTTP/1.1 connection is then closed);
//! - a **body size limit** ([`ServeOptions::max_body_bytes`], 64 KiB): a
//!   declared `Content-Length` above it is answered `413` at once, before
//!   any of the body is read, and a longer chunked body fails at the limit;
//! - at most [`ServeOptions::max_streams_per_connection`] HTTP/2 streams
//!   at once (100).
//!
//! Against floods of connections:
//!
//! - a client (an IPv4 address, an IPv6 /64) holds at most
//!   [`ServeOptions::max_connections_per_client`] connections (100); one
//!   more is closed as soon as it is accepted, and the others are served
//!   as before;
//! - at most [`ServeOptions::max_connections`] connections are open at
//!   once ([`ServeOptions::from_env`] keeps it below the open-file limit).
//!   A connection that comes when all are taken replaces the one idle
//!   longest, closed at once; if none is idle, it waits for one to close
//!   (the kernel queues the rest);
//! - accept errors that mean the process is out of a resource (`EMFILE`,
//!   `ENFILE`, `ENOBUFS`, `ENOMEM`) shed the connections idle longest (up
//!   to [`SHED_ON_ACCEPT_ERROR`]) and make the loop back off, from 10 ms
//!   doubling to 1 s, instead of spinning ([`AcceptBackoff`]).
//!
//! The caps log a warning (at most one a second) when they close or hold
//! back connections, and every connection the server closes on its own is
//! counted in [`CONNECTIONS_CLOSED`] (`server_connections_closed_total`),
//! by `reason`: `client_cap`, `shed_full`, `shed_accept_error`, `idle`.
//!
//! ```no_run
//! use tower_ratelimit::serve::{serve, shutdown_signal, ServeOptions};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let options = ServeOptions::from_env(false)?; // MAX_CONNECTIONS...
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3001").await?;
//! let hello = tower::service_fn(|_req| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::from("hi")))
//! });
//! serve(listener, options, move |_peer| hello.clone(), shutdown_signal()).await;
//! # Ok(())
//! # }
//! ```

mod accept_loop;
mod activity;
mod backoff;
mod closed;
mod connection_caps;
mod connection_task;
mod drive;
mod env_error;
mod gate;
mod logs;
mod options;
mod public_proxies;
mod registry;
mod shutdown;
mod throttled;

pub use accept_loop::{serve, BoxError, RequestBody};
pub use backoff::AcceptBackoff;
pub use closed::CONNECTIONS_CLOSED;
pub use connection_caps::{fd_reserve, open_file_limit, MAX_CAP};
pub use env_error::{whole_number, EnvError};
pub use gate::SHED_ON_ACCEPT_ERROR;
pub use logs::init_logs;
pub use options::ServeOptions;
pub use public_proxies::warn_of_public_proxies;
pub use shutdown::shutdown_signal;
pub use throttled::Throttled;
