//! Why a deployment was refused (`DeployError`): a bad file, or a bad
//! environment variable.

use crate::policy::PolicyError;
use std::fmt;

/// Why a deployment was refused: the file (its file, line and limit or
/// section, as [`PolicyError`] names them), an environment variable
/// (named; a secret's value is never quoted), or an address that cannot
/// be listened on.
///
/// ```
/// use tower_ratelimit::deploy::{DeployError, Limits};
///
/// let env = |var: &str| (var == "RATELIMIT_LEASE").then(|| "many".to_owned());
/// let err = Limits::from_toml("", None, env).unwrap_err();
/// assert!(matches!(err, DeployError::Env { var: "RATELIMIT_LEASE", .. }), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeployError {
    /// The file: where, and what is wrong.
    File(PolicyError),
    /// An environment variable of the README's settings table.
    Env {
        /// The variable.
        var: &'static str,
        /// What is wrong with its value.
        message: String,
    },
    /// A listener of [`Limits::serve`](super::Limits::serve) could not
    /// be bound.
    Listen {
        /// Which one: the variable and the file's field setting it.
        what: &'static str,
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        message: String,
    },
}

impl DeployError {
    /// An error naming `var`.
    pub(super) fn env(var: &'static str, message: impl fmt::Display) -> Self {
        Self::Env {
            var,
            message: message.to_string(),
        }
    }
}

impl fmt::Display for DeployError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(e) => e.fmt(f),
            Self::Env { var, message } => write!(f, "{var}: {message}"),
            Self::Listen {
                what,
                addr,
                message,
            } => write!(f, "{what}: cannot listen on {addr}: {message}"),
        }
    }
}

impl std::error::Error for DeployError {}

impl From<PolicyError> for DeployError {
    fn from(e: PolicyError) -> Self {
        Self::File(e)
    }
}
