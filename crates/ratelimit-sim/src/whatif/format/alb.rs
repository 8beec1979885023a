//! AWS Application Load Balancer access logs: space-separated fields,
//!
//! ```text
//! type time elb client:port target:port request_processing_time target_processing_time response_processing_time elb_status_code target_status_code received_bytes sent_bytes "request" "user_agent" ...
//! ```
//!
//! The request holds a full URL (`GET https://host:443/path?q HTTP/1.1`).
//! The status is the target's (what the app answered), or the load
//! balancer's when no target answered. The client is the peer; ALB's own
//! `X-Forwarded-For` is not logged.

use super::fields::{request, split};
use crate::whatif::line::LogLine;
use crate::whatif::time::parse_iso;

const TYPES: [&str; 6] = ["http", "https", "h2", "grpcs", "ws", "wss"];

/// Whether `line` looks like ALB's: a known type, then an ISO time.
pub fn looks_like(line: &str) -> bool {
    let f = split(line);
    f.len() >= 13 && TYPES.contains(&f[0]) && parse_iso(f[1]).is_some()
}

/// `ip:port`, `[v6]:port` or `-`: the address.
fn address(s: &str) -> Option<std::net::IpAddr> {
    let host = match s.rsplit_once(':') {
        Some((h, _)) => h,
        None => s,
    };
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// `https://host:443/path?q` or `/path`: the path and query.
fn target(url: &str) -> &str {
    match url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => url,
    }
}

/// One line, or why it is not one.
pub fn parse(line: &str) -> Result<LogLine, String> {
    let f = split(line);
    if f.len() < 13 {
        return Err(format!("{} fields where ALB has at least 13", f.len()));
    }
    let time = parse_iso(f[1]).ok_or_else(|| format!("bad time {:?}", f[1]))?;
    let remote = address(f[3]).ok_or_else(|| format!("bad client {:?}", f[3]))?;
    let status = f[9]
        .parse()
        .or_else(|_| f[8].parse())
        .map_err(|_| format!("bad status {:?}", f[8]))?;
    let (method, url) = request(f[12]).ok_or_else(|| format!("bad request {:?}", f[12]))?;
    Ok(LogLine::new(
        time,
        remote,
        (method, target(url)),
        status,
        None,
    ))
}
