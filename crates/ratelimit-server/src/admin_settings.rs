//! The `[admin]` table: the admin API's address and where its token comes from (never the file itself).

use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// The shortest admin token accepted, in characters.
pub const MIN_TOKEN: usize = 16;

/// The `[admin]` table, with the token once the environment is read
/// ([`Config::with_env`](crate::Config::with_env)): `ADMIN_TOKEN`, else
/// the contents of `token-file`. Off (no admin API) until `addr` or
/// `ADMIN_ADDR` is set.
///
/// ```
/// use ratelimit_server::Config;
///
/// let config = Config::parse(r#"
///     [admin]
///     addr = "127.0.0.1:9091"
/// "#, "inline").unwrap();
/// let env = |var: &str| (var == "ADMIN_TOKEN").then(|| "a-token-of-16-chars-or-more".to_owned());
/// let config = config.with_env(env).unwrap();
/// assert_eq!(config.admin.addr.unwrap().port(), 9091);
/// assert!(config.admin.token.is_some());
/// // A token written in the file is refused, naming the field.
/// let err = Config::parse("[admin]\ntoken = \"secret\"", "f.toml").unwrap_err();
/// assert!(err.to_string().contains("[admin] token"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminSettings {
    /// Where the admin API listens (`addr`, or `ADMIN_ADDR`); `None`: off.
    pub addr: Option<SocketAddr>,
    /// The file holding the token (`token-file`; read by
    /// [`Config::with_env`](crate::Config::with_env) when `ADMIN_TOKEN`
    /// is not set).
    pub token_file: Option<PathBuf>,
    /// The token, once read.
    pub token: Option<AdminToken>,
}

/// The admin API's bearer token: at least [`MIN_TOKEN`] visible ASCII
/// characters. It is never printed (`Debug` shows its length only).
///
/// ```
/// use ratelimit_server::AdminToken;
///
/// let token = AdminToken::new("0123456789abcdef").unwrap();
/// assert!(token.matches("0123456789abcdef"));
/// assert!(!token.matches("0123456789abcdeF"));
/// assert!(AdminToken::new("short").is_err());
/// assert_eq!(format!("{token:?}"), "AdminToken(16 characters)");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(Arc<str>);

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AdminToken({} characters)", self.0.len())
    }
}

impl AdminToken {
    /// The token `text` (surrounding white space trimmed); an error says
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
    /// where they differ (every byte of the token is compared).
    pub fn matches(&self, given: &str) -> bool {
        let (token, given) = (self.0.as_bytes(), given.as_bytes());
        let differ = token.iter().enumerate().fold(0u8, |acc, (i, t)| {
            acc | (t ^ given.get(i).copied().unwrap_or(!t))
        });
        differ == 0 && token.len() == given.len()
    }
}

/// The `[admin]` table as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct AdminToml {
    addr: Option<String>,
    token_file: Option<PathBuf>,
    /// Refused: read only to name it in the error.
    token: Option<toml::Value>,
}

impl AdminToml {
    /// The settings, the token not read yet; a token literal is refused.
    pub(crate) fn checked(self) -> Result<AdminSettings, String> {
        if self.token.is_some() {
            return Err(
                "[admin] token: a token is never written in the configuration; \
                 give token-file = \"PATH\" or the ADMIN_TOKEN environment variable"
                    .into(),
            );
        }
        Ok(AdminSettings {
            addr: crate::address::optional_address(self.addr, "[admin] addr")?,
            token_file: self.token_file,
            token: None,
        })
    }
}

impl AdminSettings {
    /// The token: `env_token` (`ADMIN_TOKEN`) if set, else the contents
    /// of `token-file`; required when the admin API is on.
    pub(crate) fn read_token(&mut self, env_token: Option<String>) -> Result<(), String> {
        let text = match (env_token.filter(|t| !t.trim().is_empty()), &self.token_file) {
            (Some(text), _) => text,
            (None, Some(path)) => std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "[admin] token-file = {:?}: cannot read it: {e}",
                    path.display()
                )
            })?,
            (None, None) if self.addr.is_some() => {
                return Err("[admin] is on (addr or ADMIN_ADDR) without a token: \
                     give ADMIN_TOKEN or [admin] token-file"
                    .into())
            }
            (None, None) => return Ok(()),
        };
        let token = AdminToken::new(&text)
            .map_err(|e| format!("the admin token (ADMIN_TOKEN or [admin] token-file): {e}"))?;
        self.token = Some(token);
        Ok(())
    }
}
