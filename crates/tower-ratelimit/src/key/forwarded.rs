//! Parsing the proxy headers' address lists: `X-Forwarded-For` nodes
//! and RFC 7239 `Forwarded` elements, read right to left.

use super::header::trim;
use std::net::IpAddr;

/// A node of either header (RFC 7239 section 6): an address, optionally
/// with a port (`1.2.3.4`, `1.2.3.4:80`, `::1`, `[::1]`, `[::1]:80`), or a
/// hop that hides the client (`unknown`, an obfuscated `_name`), which is
/// `Some(None)`. `None` when malformed.
pub(super) fn parse_node(s: &[u8]) -> Option<Option<IpAddr>> {
    if s.is_empty() || s.len() > 64 {
        return None;
    }
    let s = std::str::from_utf8(s).ok()?;
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(Some(ip)); // Bare, IPv6 included.
    }
    let (name, port) = match s.strip_prefix('[') {
        Some(rest) => {
            let (v6, port) = rest.split_once(']')?;
            let port = match port {
                "" => None,
                p => Some(p.strip_prefix(':')?),
            };
            return port
                .is_none_or(is_port)
                .then_some(Some(IpAddr::V6(v6.parse().ok()?)));
        }
        None => match s.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (s, None),
        },
    };
    if !port.is_none_or(is_port) {
        return None;
    }
    if name.eq_ignore_ascii_case("unknown") || is_obfuscated(name) {
        return Some(None);
    }
    name.parse::<std::net::Ipv4Addr>()
        .ok()
        .map(|ip| Some(IpAddr::V4(ip)))
}

/// `1*5DIGIT`, or an obfuscated port.
fn is_port(p: &str) -> bool {
    (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())) || is_obfuscated(p)
}

/// `"_" 1*(ALPHA / DIGIT / "." / "_" / "-")` (RFC 7239, 6.3).
fn is_obfuscated(s: &str) -> bool {
    s.strip_prefix('_').is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

/// The comma-separated elements of a header value, from the right: only
/// the elements actually reached are ever looked at, so whatever the client
/// wrote left of its address (non-ASCII bytes, a stray quote) is never
/// read. `None` when a quote opened (right to left) is not closed.
pub(super) struct RSplit<'a> {
    rest: Option<&'a [u8]>,
    quotes: bool,
}

impl<'a> RSplit<'a> {
    /// The elements of `value`, split at commas outside quoted strings
    /// when `quotes` (`Forwarded`), at every comma otherwise
    /// (`X-Forwarded-For`).
    pub(super) fn new(value: &'a [u8], quotes: bool) -> Self {
        Self {
            rest: Some(value),
            quotes,
        }
    }
}

impl<'a> Iterator for RSplit<'a> {
    type Item = Option<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.rest?;
        let mut quoted = false;
        for i in (0..s.len()).rev() {
            match s[i] {
                b'"' if self.quotes && quoted => {
                    // The opening quote, unless escaped by an odd number
                    // of backslashes.
                    let escapes = s[..i].iter().rev().take_while(|&&b| b == b'\\').count();
                    quoted = escapes % 2 == 1;
                }
                b'"' if self.quotes => quoted = true,
                b',' if !quoted => {
                    self.rest = Some(&s[..i]);
                    return Some(Some(&s[i + 1..]));
                }
                _ => {}
            }
        }
        self.rest = None;
        Some((!quoted).then_some(s))
    }
}

/// The `for=` node of one `Forwarded` element, unquoted: `Some(None)` when
/// the element has none, `None` when it is malformed.
pub(super) fn forwarded_for(element: &[u8]) -> Option<Option<&[u8]>> {
    for pair in element.split(|&b| b == b';') {
        let pair = trim(pair);
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (name, value) = (trim(&pair[..eq]), trim(&pair[eq + 1..]));
        if name.eq_ignore_ascii_case(b"for") {
            let value = match value.strip_prefix(b"\"") {
                Some(rest) => rest.strip_suffix(b"\"")?,
                None => value,
            };
            if value.iter().any(|b| matches!(b, b'"' | b'\\')) {
                return None;
            }
            return Some(Some(value));
        }
    }
    Some(None)
}
