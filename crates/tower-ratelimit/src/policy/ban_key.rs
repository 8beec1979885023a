//! Which keys a `ban` may hold: one client's, never a key many clients share or one any client can get counted.

use super::entry::PolicyEntry;
use super::key::KeyPart;
use crate::key::IpPrefixes;

impl PolicyEntry {
    /// Why the entry's `ban` could ban clients other than the one that
    /// earned it, if it could and `ban-any-key` does not allow it: a key
    /// with no part naming one client (`global`, `route`, a header's value,
    /// which any client can send), or a credential (API key, bearer token,
    /// secret header) with no such part, counted on failures (every
    /// response, or a status of 400 or above), which any client sending
    /// the credential can cause.
    pub(super) fn checked_ban_key(&self) -> Result<(), String> {
        if self.ban.is_none() || self.ban_any_key || self.key.0.iter().any(names_a_client) {
            return Ok(());
        }
        let key = self.key.to_string();
        let fix = "key the ban by client (client-ip, peer-ip, app:NAME, or a composite with one), \
                   or set ban-any-key = true to ban such a key on purpose";
        if !self.key.0.iter().any(is_credential) {
            return Err(format!(
                "ban on key {key:?}, which is not one client's ({}): \
                 a ban one client earns would hold every client keyed alike; {fix}",
                shared_because(&self.key.0)
            ));
        }
        let counted = match &self.count {
            None => "every response counts, failures included".to_owned(),
            Some(statuses) => match statuses.iter().find(|s| s.as_u16() >= 400) {
                Some(failure) => format!("count has {}, a failure", failure.as_u16()),
                None => return Ok(()),
            },
        };
        Err(format!(
            "ban on key {key:?} counted on failures ({counted}): any client sending a \
             credential, valid or not, can fail with it and get its holder banned; \
             count only successes (count = [200]), or {fix}"
        ))
    }
}

/// Whether `part` tells one client from another by something the client
/// cannot choose: its address or network (a site's at most), or a key the
/// app defines (a checked user).
fn names_a_client(part: &KeyPart) -> bool {
    match part {
        KeyPart::PeerIp(p) | KeyPart::ClientIp(p) => !wider_than_a_site(p),
        KeyPart::App(_) => true,
        _ => false,
    }
}

/// Whether an address key's prefixes hold more than one site: shorter
/// than [`IpPrefixes::SITE`] (IPv4 /24, IPv6 /48) in either family.
fn wider_than_a_site(prefixes: &Option<IpPrefixes>) -> bool {
    let p = prefixes.unwrap_or_default();
    p.v4() < IpPrefixes::SITE.v4() || p.v6() < IpPrefixes::SITE.v6()
}

/// Whether `part` is a credential: only its holder should send it.
fn is_credential(part: &KeyPart) -> bool {
    matches!(
        part,
        KeyPart::Header(_, true) | KeyPart::ApiKey | KeyPart::Bearer
    )
}

/// Why a key of `parts`, none naming a client nor a credential, is shared.
fn shared_because(parts: &[KeyPart]) -> String {
    let header = parts.iter().find_map(|p| match p {
        KeyPart::Header(name, false) => Some(name),
        _ => None,
    });
    let wide = parts.iter().any(|p| match p {
        KeyPart::PeerIp(p) | KeyPart::ClientIp(p) => wider_than_a_site(p),
        _ => false,
    });
    match header {
        Some(name) => format!("any client can send any value of {name}"),
        None if wide => "its address prefix is wider than a site's, IPv4 /24 or IPv6 /48, \
                         so many sites' clients share it"
            .to_owned(),
        None => "every client shares it".to_owned(),
    }
}
