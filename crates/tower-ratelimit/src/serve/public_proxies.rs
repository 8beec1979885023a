//! A warning at startup for each trusted proxy range that holds public
//! addresses (`warn_of_public_proxies`).

/// Warns, once at startup, of each trusted proxy range that holds public
/// addresses (`TRUSTED_PROXIES=0.0.0.0/0`, say): a client there can write
/// the forwarding header and choose its own key. Right for a CDN's
/// published ranges, which is why it is a warning.
pub fn warn_of_public_proxies(client_ip: &crate::key::ClientIp) {
    for net in client_ip.public_trusted() {
        tracing::warn!(
            %net,
            "TRUSTED_PROXIES holds public addresses: any client in this range can set its \
             own address in the forwarding header; trust only your proxies' ranges"
        );
    }
}
