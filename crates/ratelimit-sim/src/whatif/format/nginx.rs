//! nginx's `combined` format, and its common variants with
//! `"$http_x_forwarded_for"` and `$request_time` appended (either order):
//!
//! ```text
//! $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" ["$http_x_forwarded_for"] [$request_time]
//! ```

use super::fields::{request, split};
use crate::whatif::line::{present, LogLine};
use crate::whatif::time::parse_nginx;

/// Whether `line` looks like nginx's: an address, two words, a
/// bracketed local time.
pub fn looks_like(line: &str) -> bool {
    let f = split(line);
    f.len() >= 9 && f[0].parse::<std::net::IpAddr>().is_ok() && parse_nginx(f[3]).is_some()
}

/// One line, or why it is not one.
pub fn parse(line: &str) -> Result<LogLine, String> {
    let f = split(line);
    if f.len() < 9 {
        return Err(format!("{} fields where combined has 9", f.len()));
    }
    let remote = f[0]
        .parse()
        .map_err(|_| format!("bad remote address {:?}", f[0]))?;
    let time = parse_nginx(f[3]).ok_or_else(|| format!("bad time {:?}", f[3]))?;
    let (method, target) = request(f[4]).ok_or_else(|| format!("bad request {:?}", f[4]))?;
    let status = f[5].parse().map_err(|_| format!("bad status {:?}", f[5]))?;
    // After the user agent: a quoted X-Forwarded-For, a request time, or
    // both. A bare number is the request time; the rest is the header.
    let forwarded = f[9..]
        .iter()
        .find(|x| x.parse::<f64>().is_err())
        .and_then(|x| present(x))
        .map(str::to_owned);
    Ok(LogLine::new(
        time,
        remote,
        (method, target),
        status,
        forwarded,
    ))
}
