//! The key of a `GET /check` (forward auth): the limit's `key-header`, or the client's address, keyed per client as tower-ratelimit's `client-ip` keys it.

use crate::rule::Rule;
use http::request::Parts;
use std::sync::OnceLock;
use tower_ratelimit::key::{ClientIp, ProxyHeader};

/// The key `GET /check` checks on `rule` for the request `parts`:
///
/// - the value of the limit's `key-header`, as sent, when it names one;
/// - else the client's address, as tower-ratelimit's [`ClientIp`] finds
///   it: with trusted proxies (`client_ip`, from `[proxies]`), their
///   header read from the right, believed only from a trusted peer;
///   without, the peer's own address (a forwarding header is ignored,
///   and warned of once). The address is keyed per client as `client-ip`
///   keys it: an IPv4 address as is, an IPv6 address by its /64
///   (`2001:db8::/64`).
///
/// The error says what is missing or malformed.
pub(crate) fn forward_key(
    rule: &Rule,
    client_ip: Option<&ClientIp>,
    parts: &Parts,
) -> Result<String, String> {
    if let Some(header) = &rule.config.key_header {
        return match parts.headers.get(header).map(|v| v.to_str()) {
            Some(Ok(key)) if !key.is_empty() => Ok(key.to_owned()),
            _ => Err(format!(
                "no {header} header: limit {:?} keys on it",
                rule.config.name
            )),
        };
    }
    let client_ip = client_ip.unwrap_or_else(|| no_proxy());
    let addr = client_ip.client_addr(parts).map_err(|e| {
        let header = client_ip.proxy_header().name();
        format!("the client's address (from {header}): {e}")
    })?;
    Ok(client_ip.key_prefixes().key(addr).to_string())
}

/// The client's address with no proxy trusted: the peer's. Its header is
/// nginx's `X-Real-IP`, so that one sent with no `[proxies]` is warned
/// of (once): every client behind that proxy would share its address.
fn no_proxy() -> &'static ClientIp {
    static NONE: OnceLock<ClientIp> = OnceLock::new();
    NONE.get_or_init(|| ClientIp::default().header(ProxyHeader::X_REAL_IP))
}
