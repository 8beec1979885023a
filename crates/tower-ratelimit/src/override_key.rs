//! The keys of a policy file's overrides, checked and written the way the limit's key extractor writes them.
//!
//! An override applies to the key whose text equals the override's, so
//! one written in another form (`2001:DB8::/64` for `2001:db8::/64`, a
//! trailing space, a /48 on a per-/64 limit) would never apply. Each part
//! is checked against the part of the limit's key it stands for, and IP
//! parts are rewritten in the extractor's form.

use crate::key::{HeaderKey, IpKey, IpPrefixes};
use ipnet::IpNet;
use std::net::IpAddr;

/// What one part of a limit's key looks like, for its overrides.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OverridePart {
    /// An address keyed at these prefix lengths: an override names an
    /// address (masked to the prefix) or the network itself.
    Ip(IpPrefixes),
    /// A header's value, an API key or a bearer token: up to 64 visible
    /// ASCII characters, spaces inside only (longer ones are keyed by a
    /// hash no file can name). `secret`: never echoed in errors.
    Text { secret: bool },
    /// Whatever the app's own key writes (`global`, a route, `app:NAME`).
    Any,
}

/// Longest text key an override can name (longer keys are hashed), for
/// the error.
const MAX_TEXT: usize = 64;

/// `text` written as the key `parts` make it, or why no request's key
/// could ever be `text`. Parts of a composite key are joined by `|`.
pub(crate) fn canonical(parts: &[OverridePart], text: &str) -> Result<String, String> {
    let pieces: Vec<&str> = if parts.len() == 1 {
        vec![text]
    } else {
        text.split('|').collect()
    };
    if pieces.len() != parts.len() {
        return Err(format!(
            "an override's key has {} parts joined by |, where the limit's key has {}",
            pieces.len(),
            parts.len()
        ));
    }
    let written = pieces
        .iter()
        .zip(parts)
        .map(|(piece, part)| canonical_part(*part, piece))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(written.join("|"))
}

fn canonical_part(part: OverridePart, text: &str) -> Result<String, String> {
    match part {
        OverridePart::Ip(prefixes) => ip(prefixes, text),
        OverridePart::Text { secret } => self_text(secret, text),
        OverridePart::Any if text.is_empty() || text.trim() != text => Err(format!(
            "override key {text:?}: empty, or blank around it: no key is"
        )),
        OverridePart::Any => Ok(text.to_owned()),
    }
}

/// A header key: as [`HeaderKey::new`](crate::key::HeaderKey::new) keeps it.
fn self_text(secret: bool, text: &str) -> Result<String, String> {
    // Header values are trimmed before they become keys, and a key
    // `HeaderKey` would hash has a text no file can write.
    let ok =
        !text.is_empty() && text.trim() == text && !HeaderKey::new(text.as_bytes()).is_hashed();
    if ok {
        return Ok(text.to_owned());
    }
    let what = if secret {
        format!("an override's key ({} characters long)", text.len())
    } else {
        format!("override key {text:?}")
    };
    Err(format!(
        "{what} is not one a request can have: 1 to {MAX_TEXT} visible ASCII characters, \
         no blanks around them, not starting with #"
    ))
}

/// An address or a network, written as `prefixes` key it.
fn ip(prefixes: IpPrefixes, text: &str) -> Result<String, String> {
    let bad = |why: &str| format!("override key {text:?}: {why}");
    match ip_key(prefixes, text) {
        Ok(key) => Ok(key.to_string()),
        Err(NotIpKey::NotIp) => Err(bad("not an IP address or network")),
        Err(NotIpKey::Length { given, want, .. }) => Err(bad(&format!(
            "this limit keys addresses by /{want} networks, so no key is a /{given}"
        ))),
    }
}

/// Why a text is no IP key of a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotIpKey {
    /// Neither an address nor a network.
    NotIp,
    /// A network of `given` bits, where the limit keys `family` (`IPv4`
    /// or `IPv6`) by networks of `want` bits.
    Length {
        given: u8,
        want: u8,
        family: &'static str,
    },
}

/// `text`, an address or a network, as `prefixes` key it: an address is
/// masked to its network, a network must have the limit's length (host
/// bits are masked), a mapped IPv6 address or network is IPv4.
pub(crate) fn ip_key(prefixes: IpPrefixes, text: &str) -> Result<IpKey, NotIpKey> {
    let (addr, length) = match text.parse::<IpNet>() {
        Ok(net) => (net.addr(), Some(net.prefix_len())),
        Err(_) => match text.parse::<IpAddr>() {
            Ok(addr) => (addr, None),
            Err(_) => return Err(NotIpKey::NotIp),
        },
    };
    let key = prefixes.key(addr);
    let (want, family) = match key {
        IpKey::V4 { prefix, .. } => (prefix, "IPv4"),
        IpKey::V6 { prefix, .. } => (prefix, "IPv6"),
    };
    // A mapped IPv6 network (::ffff:a.b.c.d/N) has 96 more bits.
    let given = match (addr, key) {
        (IpAddr::V6(_), IpKey::V4 { .. }) => length.map(|l| l.saturating_sub(96)),
        _ => length,
    };
    match given {
        Some(given) if given != want => Err(NotIpKey::Length {
            given,
            want,
            family,
        }),
        _ => Ok(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(part: OverridePart, text: &str) -> Result<String, String> {
        canonical(&[part], text)
    }

    #[test]
    fn ip_overrides_are_written_as_their_keys() {
        let client = OverridePart::Ip(IpPrefixes::DEFAULT);
        let site = OverridePart::Ip(IpPrefixes::SITE);
        let ok = |p, t: &str| one(p, t).unwrap();
        assert_eq!(ok(client, "10.0.0.7"), "10.0.0.7");
        assert_eq!(ok(client, "10.0.0.7/32"), "10.0.0.7");
        assert_eq!(ok(client, "::ffff:10.0.0.7"), "10.0.0.7");
        assert_eq!(ok(client, "2001:DB8:0:1::/64"), "2001:db8:0:1::/64");
        assert_eq!(ok(client, "2001:db8:0:1:0:0:0:9"), "2001:db8:0:1::/64");
        assert_eq!(ok(site, "198.51.100.77"), "198.51.100.0/24");
        assert_eq!(ok(site, "2001:db8:aa::/48"), "2001:db8:aa::/48");
        for bad in [
            "nonsense",
            "10.0.0.7 ",
            " 10.0.0.7",
            "2001:db8::/48",
            "10.0.0.0/24",
        ] {
            assert!(one(client, bad).is_err(), "{bad}");
        }
        assert!(one(site, "2001:db8:aa::/64").unwrap_err().contains("/48"));
    }

    #[test]
    fn text_overrides_are_as_a_request_sends_them() {
        let key = OverridePart::Text { secret: true };
        assert_eq!(one(key, "demo-key-1").unwrap(), "demo-key-1");
        assert!(one(key, "").is_err());
        for bad in [
            "sekrit-1 ",
            " sekrit-1",
            "#sekrit-1",
            "sekrit-caf\u{e9}",
            &"sekrit-1".repeat(9),
        ] {
            let e = one(key, bad).unwrap_err();
            assert!(!e.contains("sekrit"), "a secret in {e}");
        }
        let header = OverridePart::Text { secret: false };
        assert!(one(header, "acme ").unwrap_err().contains("acme"));
    }

    #[test]
    fn composite_overrides_name_every_part() {
        let parts = [OverridePart::Ip(IpPrefixes::DEFAULT), OverridePart::Any];
        assert_eq!(
            canonical(&parts, "10.0.0.7|POST /search").unwrap(),
            "10.0.0.7|POST /search"
        );
        assert!(canonical(&parts, "10.0.0.7").is_err());
        assert!(canonical(&parts, "10.0.0.7|a|b").is_err());
    }
}
