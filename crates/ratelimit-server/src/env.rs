//! ratelimitd's own environment variables over the file's `[server]`: `BIND_ADDR` and `GRPC_BIND_ADDR`.

use std::net::SocketAddr;

/// The variables ratelimitd reads besides tower-ratelimit's
/// [`OVERRIDES`](tower_ratelimit::deploy::OVERRIDES).
///
/// ```
/// use ratelimit_server::{Config, SERVER_OVERRIDES};
///
/// let env = |var: &str| (var == SERVER_OVERRIDES[0]).then(|| "127.0.0.1:9999".to_owned());
/// assert_eq!(Config::parse("", "inline", env).unwrap().server.http.port(), 9999);
/// ```
pub const SERVER_OVERRIDES: [&str; 2] = ["BIND_ADDR", "GRPC_BIND_ADDR"];

/// `BIND_ADDR` over `[server] http` and `GRPC_BIND_ADDR` over `[server]
/// grpc`, read through `var` (an empty value is unset); an error names
/// the variable.
pub(crate) fn server_env(
    http: &mut SocketAddr,
    grpc: &mut SocketAddr,
    var: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    for (name, field) in SERVER_OVERRIDES.into_iter().zip([http, grpc]) {
        let Some(text) = var(name) else { continue };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        *field = text
            .parse()
            .map_err(|_| format!("{name}={text:?} is not an address like 127.0.0.1:9090"))?;
    }
    Ok(())
}
