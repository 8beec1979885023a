//! An optional socket address of the configuration or the environment, read with an error naming it.

use std::net::SocketAddr;

/// `value` as an address (`None` for none or empty), `what` naming it in
/// the error.
pub(crate) fn optional_address(
    value: Option<String>,
    what: &str,
) -> Result<Option<SocketAddr>, String> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| format!("{what} = {text:?} is not an address like 127.0.0.1:9090")),
    }
}
