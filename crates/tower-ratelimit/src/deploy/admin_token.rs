//! The admin API's bearer token (`AdminToken`): checked when read,
//! compared in constant time, never shown.

use std::fmt;
use std::sync::Arc;

/// The shortest admin token accepted.
pub const MIN_TOKEN: usize = 16;

/// The admin API's bearer token: at least [`MIN_TOKEN`] visible ASCII
/// characters, read from the environment or a file (never the
/// deployment file itself). `Debug` never shows it.
///
/// ```
/// use tower_ratelimit::deploy::AdminToken;
///
/// let token = AdminToken::new("0123456789abcdef")?;
/// assert!(token.matches("0123456789abcdef"));
/// assert!(!token.matches("0123456789abcdeF"));
/// assert!(AdminToken::new("short").is_err());
/// assert_eq!(format!("{token:?}"), "AdminToken(***)");
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(Arc<str>);

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(***)")
    }
}

impl AdminToken {
    /// The token `text`, surrounding white space trimmed; the error says
    /// what a token must be, never echoing it.
    pub fn new(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.len() < MIN_TOKEN || !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "expected at least {MIN_TOKEN} visible ASCII characters"
            ));
        }
        Ok(Self(text.into()))
    }

    /// Whether `given` is the token, in a time that does not depend on
    /// where they differ: every byte of the token is compared.
    pub fn matches(&self, given: &str) -> bool {
        same(given.as_bytes(), self.0.as_bytes())
    }
}

/// Whether `given` equals `token`, every byte of `token` compared.
fn same(given: &[u8], token: &[u8]) -> bool {
    let differ = token.iter().enumerate().fold(0u8, |acc, (i, t)| {
        acc | (t ^ given.get(i).copied().unwrap_or(!t))
    });
    differ == 0 && given.len() == token.len()
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn same_is_equality() {
        assert!(same(b"abcdef", b"abcdef"));
        for given in [&b"abcdeg"[..], b"abcde", b"abcdefg", b"", b"Abcdef"] {
            assert!(!same(given, b"abcdef"), "{given:?}");
        }
    }
}
