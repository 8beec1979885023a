//! Envoy's default access log format:
//!
//! ```text
//! [%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"
//! ```
//!
//! It logs no downstream address: the peer is the last address of the
//! logged `X-Forwarded-For` (which Envoy appends the peer to), and the
//! header is the addresses before it; without the header the peer is
//! `0.0.0.0`, one client.

use super::fields::{request, split};
use crate::whatif::line::{present, LogLine};
use crate::whatif::time::parse_iso;
use std::net::{IpAddr, Ipv4Addr};

/// Whether `line` looks like Envoy's: a bracketed ISO time, then a
/// quoted request.
pub fn looks_like(line: &str) -> bool {
    let f = split(line);
    line.starts_with('[') && f.len() >= 10 && parse_iso(f[0]).is_some() && request(f[1]).is_some()
}

/// The peer and the header before it, from a logged `X-Forwarded-For`.
fn peer_of(xff: Option<&str>) -> (IpAddr, Option<String>) {
    let Some(xff) = xff else {
        return (IpAddr::V4(Ipv4Addr::UNSPECIFIED), None);
    };
    let (rest, last) = match xff.rsplit_once(',') {
        Some((rest, last)) => (Some(rest.trim().to_owned()), last.trim()),
        None => (None, xff.trim()),
    };
    match last.parse() {
        Ok(ip) => (ip, rest),
        Err(_) => (IpAddr::V4(Ipv4Addr::UNSPECIFIED), Some(xff.to_owned())),
    }
}

/// One line, or why it is not one.
pub fn parse(line: &str) -> Result<LogLine, String> {
    let f = split(line);
    if f.len() < 10 {
        return Err(format!("{} fields where Envoy's default has 13", f.len()));
    }
    let time = parse_iso(f[0]).ok_or_else(|| format!("bad time {:?}", f[0]))?;
    let (method, target) = request(f[1]).ok_or_else(|| format!("bad request {:?}", f[1]))?;
    let status = f[2].parse().map_err(|_| format!("bad status {:?}", f[2]))?;
    let (remote, forwarded) = peer_of(present(f[8]));
    Ok(LogLine::new(
        time,
        remote,
        (method, target),
        status,
        forwarded,
    ))
}
