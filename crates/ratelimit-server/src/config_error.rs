//! Why a configuration was refused (`ConfigFileError`): the file, the line, the limit and what is wrong.

use std::fmt;
use tower_ratelimit::deploy::DeployError;

/// Why a configuration was refused: the file, the line, the limit and what is wrong.
///
/// ```
/// use ratelimit_server::Config;
///
/// let err = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "gcra 5/soon"
///     descriptors = [{ key = "remote_address" }]
/// "#, "limits.toml", |_| None).unwrap_err();
/// assert_eq!((err.file.as_str(), err.limit.as_deref()), ("limits.toml", Some("per-ip")));
/// assert!(err.to_string().contains("soon"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFileError {
    /// The file (or the origin given to [`Config::parse`](crate::Config::parse)).
    pub file: String,
    /// The line (1-based) of the fault or of its `[[limit]]`, when known.
    pub line: Option<usize>,
    /// The limit at fault, if one is.
    pub limit: Option<String>,
    /// What is wrong, naming the bad value.
    pub message: String,
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: ", self.file)?,
            None => write!(f, "{}: ", self.file)?,
        }
        if let Some(limit) = &self.limit {
            write!(f, "limit {limit:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigFileError {}

impl ConfigFileError {
    /// The error of the deployment's sections (tower-ratelimit's
    /// `[store]`, `[proxies]`, `[admin]`, `[metrics]` and their
    /// variables), in the file `file`.
    pub(crate) fn of_deployment(file: &str, e: DeployError) -> Self {
        let (line, limit, message) = match e {
            DeployError::File(e) => (e.line, e.entry, e.message),
            DeployError::Env { var, message } => (None, None, format!("{var}: {message}")),
            other => (None, None, other.to_string()),
        };
        Self {
            file: file.to_owned(),
            line,
            limit,
            message,
        }
    }
}

/// The text being parsed and the file it came from, for errors.
pub(crate) struct Source<'a> {
    pub(crate) text: &'a str,
    pub(crate) origin: &'a str,
}

impl Source<'_> {
    /// The line of byte offset `at`, from 1.
    pub(crate) fn line_of(&self, at: usize) -> usize {
        self.text[..at.min(self.text.len())].matches('\n').count() + 1
    }

    /// An error at byte offset `at` (if known) about `limit` (if any).
    pub(crate) fn error(
        &self,
        at: Option<usize>,
        limit: Option<&str>,
        message: String,
    ) -> ConfigFileError {
        ConfigFileError {
            file: self.origin.to_owned(),
            line: at.map(|at| self.line_of(at)),
            limit: limit.map(str::to_owned),
            message,
        }
    }
}
