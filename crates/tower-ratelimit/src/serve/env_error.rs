//! A bad environment variable (`EnvError`), and the whole numbers the
//! settings take (`whole_number`).

use std::fmt;

/// Parses `value` of `variable`: a whole number from 1 to `max`,
/// surrounding blanks allowed; else an error naming the variable.
///
/// ```
/// use tower_ratelimit::serve::whole_number;
///
/// assert_eq!(whole_number("WORKERS", " 8 ", 64), Ok(8));
/// let e = whole_number("WORKERS", "0", 64).unwrap_err();
/// assert_eq!(e.to_string(), "WORKERS=\"0\": out of range: expected a whole number from 1 to 64");
/// ```
pub fn whole_number(variable: &'static str, value: &str, max: usize) -> Result<usize, EnvError> {
    let error = |why: &str| {
        EnvError::new(
            variable,
            Some(value.to_owned()),
            format!("{why}: expected a whole number from 1 to {max}"),
        )
    };
    let digits = value.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error("not a number"));
    }
    match digits.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(error("out of range")),
    }
}

/// A bad environment variable: its name, its value when it may be shown,
/// and why it is refused.
///
/// ```
/// use tower_ratelimit::serve::EnvError;
///
/// let e = EnvError::new("API_KEYS", None, "key 2 is too long"); // a secret: no value
/// assert_eq!(e.to_string(), "API_KEYS: key 2 is too long");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    /// The variable's name.
    pub variable: &'static str,
    /// Its value; `None` when absent or secret.
    pub value: Option<String>,
    /// Why it is refused.
    pub reason: String,
}

impl EnvError {
    /// `variable`, set to `value`, is refused because of `reason`.
    pub fn new(variable: &'static str, value: Option<String>, reason: impl fmt::Display) -> Self {
        Self {
            variable,
            value,
            reason: reason.to_string(),
        }
    }
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{}={value:?}: {}", self.variable, self.reason),
            None => write!(f, "{}: {}", self.variable, self.reason),
        }
    }
}

impl std::error::Error for EnvError {}
