//! What a limit keys on (`KeySpec`, parsed and written as the file does), and the key it gives (`PolicyKey`).

use crate::key::{HeaderKey, IpKey, IpPrefixes, RouteKey};
use crate::override_key::OverridePart;
use ratelimit_core::algorithm::{StableHasher, StableKey};
use std::fmt;
use std::str::FromStr;

/// One part of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyPart {
    /// The peer's address, at these prefix lengths (none given: the
    /// default, v4/32 and v6/64).
    PeerIp(Option<IpPrefixes>),
    /// The client's address, at these prefix lengths (none given: those of
    /// [`PolicyOptions::client_ip`]).
    ClientIp(Option<IpPrefixes>),
    /// A header, and whether its values are secret.
    Header(http::HeaderName, bool),
    ApiKey,
    Bearer,
    Global,
    Route,
    App(String),
    /// A descriptor entry's value, by its key: `ratelimitd`'s plans
    /// only (an HTTP request has no descriptors).
    Descriptor(String),
}

/// What an entry keys on: one part, or several joined by `+`.
///
/// ```
/// use tower_ratelimit::policy::{KeySpec, PolicyOptions};
///
/// let spec: KeySpec = "client-ip(v4/24, v6/48)+route".parse().unwrap();
/// assert!(spec.extractor(&PolicyOptions::default()).is_ok());
/// assert!("client-ip/48".parse::<KeySpec>().is_err()); // which family?
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec(pub(super) Vec<KeyPart>);

/// `NAME` or `NAME(v4/N, v6/N)`: the prefix lengths of an IP key, if any.
pub(super) fn ip_part(
    part: &str,
    name: &str,
    key: &str,
) -> Option<Result<Option<IpPrefixes>, String>> {
    let rest = part.strip_prefix(name)?.trim_start();
    if rest.is_empty() {
        return Some(Ok(None));
    }
    let list = rest.strip_prefix('(')?.strip_suffix(')')?;
    Some(
        list.parse::<IpPrefixes>()
            .map(Some)
            .map_err(|e| format!("key {key:?}: {e}")),
    )
}

/// One `+`-separated part of the key `key`.
pub(super) fn key_part(part: &str, key: &str) -> Result<KeyPart, String> {
    if let Some(prefixes) = ip_part(part, "client-ip", key) {
        return prefixes.map(KeyPart::ClientIp);
    }
    if let Some(prefixes) = ip_part(part, "peer-ip", key) {
        return prefixes.map(KeyPart::PeerIp);
    }
    Ok(match part {
        "api-key" => KeyPart::ApiKey,
        "bearer" => KeyPart::Bearer,
        "global" => KeyPart::Global,
        "route" => KeyPart::Route,
        other => match (
            other
                .strip_prefix("header:")
                .map(|n| (n, false))
                .or_else(|| other.strip_prefix("secret-header:").map(|n| (n, true))),
            other.strip_prefix("app:"),
        ) {
            (Some((name, secret)), _) => match http::HeaderName::try_from(name) {
                Ok(name) => KeyPart::Header(name, secret),
                Err(_) => return Err(format!("bad header name {name:?} in key {key:?}")),
            },
            (_, Some(name)) if !name.is_empty() => KeyPart::App(name.to_owned()),
            _ if other
                .strip_prefix("descriptor:")
                .is_some_and(|n| !n.is_empty()) =>
            {
                KeyPart::Descriptor(other["descriptor:".len()..].to_owned())
            }
            _ => {
                return Err(format!(
                    "unknown key {other:?}: expected peer-ip, client-ip (either with prefix \
                     lengths, as in client-ip(v4/24, v6/48)), header:NAME, secret-header:NAME, \
                     api-key, bearer, global, route, app:NAME, or several joined by + \
                     (and descriptor:NAME, ratelimitd's plans only)"
                ))
            }
        },
    })
}

impl FromStr for KeySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts = s
            .split('+')
            .map(|p| key_part(p.trim(), s))
            .collect::<Result<Vec<_>, String>>()?;
        if parts.len() > 4 {
            return Err(format!("key {s:?} has more than 4 parts"));
        }
        Ok(Self(parts))
    }
}

impl KeyPart {
    /// What an override's key looks like in this part.
    pub(super) fn override_part(&self) -> OverridePart {
        match self {
            Self::PeerIp(p) | Self::ClientIp(p) => OverridePart::Ip(p.unwrap_or_default()),
            Self::Header(_, secret) => OverridePart::Text { secret: *secret },
            Self::ApiKey | Self::Bearer | Self::Descriptor(_) => {
                OverridePart::Text { secret: true }
            }
            Self::Global | Self::Route | Self::App(_) => OverridePart::Any,
        }
    }
}

impl fmt::Display for KeyPart {
    /// The form the policy file writes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = |f: &mut fmt::Formatter<'_>, name: &str, p: &Option<IpPrefixes>| match p {
            None => f.write_str(name),
            Some(p) => write!(f, "{name}({p})"),
        };
        match self {
            Self::PeerIp(p) => ip(f, "peer-ip", p),
            Self::ClientIp(p) => ip(f, "client-ip", p),
            Self::Header(name, false) => write!(f, "header:{name}"),
            Self::Header(name, true) => write!(f, "secret-header:{name}"),
            Self::ApiKey => f.write_str("api-key"),
            Self::Bearer => f.write_str("bearer"),
            Self::Global => f.write_str("global"),
            Self::Route => f.write_str("route"),
            Self::App(name) => write!(f, "app:{name}"),
            Self::Descriptor(name) => write!(f, "descriptor:{name}"),
        }
    }
}

impl fmt::Display for KeySpec {
    /// The form the policy file writes: parts joined by `+`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, part) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            write!(f, "{part}")?;
        }
        Ok(())
    }
}

/// The key of a table's limit: whichever its `key` names.
///
/// ```
/// use tower_ratelimit::policy::{KeySpec, PolicyKey, PolicyOptions};
///
/// let key = "peer-ip".parse::<KeySpec>().unwrap().extractor(&PolicyOptions::default()).unwrap();
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert("203.0.113.7:50000".parse::<std::net::SocketAddr>().unwrap());
/// let (parts, ()) = req.into_parts();
/// assert!(matches!(key(&parts), Ok(PolicyKey::Ip(_))));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyKey {
    /// The request is on a route the entry does not list (never stored).
    Skip,
    /// A client's IP (or prefix).
    Ip(IpKey),
    /// A header's value, an API key or a bearer token.
    Text(HeaderKey),
    /// Everyone.
    Global,
    /// A route.
    Route(RouteKey),
    /// Several parts.
    Composite(Box<[PolicyKey]>),
}

impl fmt::Display for PolicyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Skip => f.write_str("-"),
            Self::Ip(k) => k.fmt(f),
            Self::Text(k) => k.fmt(f),
            Self::Global => f.write_str("global"),
            Self::Route(k) => k.fmt(f),
            Self::Composite(parts) => {
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str("|")?;
                    }
                    p.fmt(f)?;
                }
                Ok(())
            }
        }
    }
}

impl StableKey for PolicyKey {
    fn write_stable(&self, h: &mut StableHasher) {
        use std::fmt::Write;
        // `StableHasher`'s `fmt::Write` never fails.
        let _ = write!(h, "{self}");
    }

    /// An API key, a bearer token, a secret header, or a composite with
    /// one of them.
    fn is_secret(&self) -> bool {
        match self {
            Self::Text(k) => k.is_secret(),
            Self::Composite(parts) => parts.iter().any(StableKey::is_secret),
            _ => false,
        }
    }
    /// The stored form of each text part: the text sent is dropped.
    fn into_stored(self) -> Self {
        match self {
            Self::Text(k) => Self::Text(k.into_stored()),
            Self::Composite(parts) => Self::Composite(
                parts
                    .into_vec()
                    .into_iter()
                    .map(StableKey::into_stored)
                    .collect(),
            ),
            other => other,
        }
    }
}
