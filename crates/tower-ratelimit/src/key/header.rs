//! A request header's value as the key, and the [`HeaderKey`] type shared by header-based extractors.

use super::{KeyError, KeyExtractor};
use crate::BuildError;
use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A key read from a header (a value, an API key, a bearer token): shares
/// the header's bytes, so extracting it does not allocate. Always visible
/// ASCII, so it displays as is.
#[derive(Clone)]
pub struct HeaderKey {
    value: HeaderValue,
    start: usize,
    end: usize,
}

impl HeaderKey {
    /// `value[start..end]`, which the caller checked is visible ASCII.
    pub(crate) fn new(value: HeaderValue, start: usize, end: usize) -> Self {
        Self { value, start, end }
    }

    /// The key text.
    #[allow(clippy::string_from_utf8_as_bytes)] // `HeaderValue::as_bytes`, not `str`'s
    pub fn as_str(&self) -> &str {
        // Checked visible ASCII at construction.
        std::str::from_utf8(&self.value.as_bytes()[self.start..self.end]).unwrap_or_default()
    }
}

impl PartialEq for HeaderKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for HeaderKey {}

impl Hash for HeaderKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Display for HeaderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for HeaderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The single value of `name`, trimmed: missing if absent or blank,
/// malformed if repeated, longer than `max_len`, or not visible ASCII
/// (spaces allowed inside when `spaces`).
pub(crate) fn single_value(
    req: &Parts,
    name: &HeaderName,
    max_len: usize,
    spaces: bool,
    missing: KeyError,
    malformed: KeyError,
) -> Result<HeaderKey, KeyError> {
    let mut values = req.headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Err(missing);
    };
    if values.next().is_some() {
        return Err(malformed);
    }
    let bytes = value.as_bytes();
    let start = bytes
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |i| i + 1);
    if start == end {
        return Err(missing);
    }
    let text = &bytes[start..end];
    let ok = |b: &u8| b.is_ascii_graphic() || (spaces && *b == b' ');
    if text.len() > max_len || !text.iter().all(ok) {
        return Err(malformed);
    }
    Ok(HeaderKey::new(value.clone(), start, end))
}

/// Keys by the value of a request header (a tenant id, a client id...).
///
/// Absent or blank: a missing key. Repeated, longer than 1024 bytes, or
/// containing bytes other than visible ASCII and spaces: malformed. Both
/// answer 400 when rejected.
#[derive(Debug, Clone)]
pub struct Header {
    name: HeaderName,
    max_len: usize,
}

impl Header {
    /// The header `name`.
    pub const fn new(name: HeaderName) -> Self {
        Self {
            name,
            max_len: 1024,
        }
    }

    /// The header named `name`; fails if it is not a valid header name.
    pub fn named(name: &str) -> Result<Self, BuildError> {
        HeaderName::try_from(name)
            .map(Self::new)
            .map_err(|_| BuildError::BadHeaderName(name.to_owned()))
    }

    /// The longest accepted value (default 1024).
    pub const fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }
}

impl KeyExtractor for Header {
    type Key = HeaderKey;

    fn extract(&self, req: &Parts) -> Result<HeaderKey, KeyError> {
        single_value(
            req,
            &self.name,
            self.max_len,
            true,
            KeyError::missing("key header"),
            KeyError::malformed("key header"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values() {
        let h = Header::named("x-tenant").unwrap();
        let parts = |v: &[&[u8]]| {
            let mut b = http::Request::builder();
            for v in v {
                b = b.header("x-tenant", HeaderValue::from_bytes(v).unwrap());
            }
            b.body(()).unwrap().into_parts().0
        };
        assert_eq!(
            h.extract(&parts(&[b"  acme co "])).unwrap().as_str(),
            "acme co"
        );
        assert!(h.extract(&parts(&[])).unwrap_err().is_missing());
        assert!(h.extract(&parts(&[b"   "])).unwrap_err().is_missing());
        assert!(!h.extract(&parts(&[b"a", b"b"])).unwrap_err().is_missing());
        assert!(!h
            .extract(&parts(&[b"caf\xc3\xa9"]))
            .unwrap_err()
            .is_missing());
        assert!(Header::named("bad name").is_err());
    }
}
