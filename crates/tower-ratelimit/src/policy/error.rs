//! Why a policy table was rejected, and where in the file.

use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a policy table was rejected: where, which entry, and what.
///
/// ```
/// use tower_ratelimit::policy::PolicyTable;
///
/// let text = "[[limit]]\nname = \"api\"\nalgorithm = \"gcra 100/1m brust 5\"\nkey = \"peer-ip\"\n";
/// let err = PolicyTable::from_toml(text, None).unwrap_err();
/// assert_eq!(err.line, Some(3)); // the algorithm's line
/// assert!(err.message.contains("brust"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The file, when the table was read from one.
    pub file: Option<PathBuf>,
    /// The line (1-based), when known.
    pub line: Option<usize>,
    /// The entry's name, when known.
    pub entry: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: ", file.display())?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            (None, Some(line)) => write!(f, "line {line}: ")?,
            (None, None) => {}
        }
        if let Some(entry) = &self.entry {
            write!(f, "limit {entry:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for PolicyError {}

/// A table's text and its file: where in them an error is.
pub(super) struct Source<'a> {
    pub(super) text: &'a str,
    pub(super) file: Option<&'a Path>,
}

impl Source<'_> {
    /// An error at byte `at` (its line), in the entry `entry`.
    pub(super) fn error(
        &self,
        at: Option<usize>,
        entry: Option<String>,
        message: String,
    ) -> PolicyError {
        PolicyError {
            file: self.file.map(Path::to_path_buf),
            line: at.map(|at| self.line_of(at)),
            entry,
            message,
        }
    }

    /// TOML's error: at its span, in the limit or plan holding it.
    pub(super) fn toml_error(&self, e: &toml::de::Error) -> PolicyError {
        let at = e.span().map(|s| s.start);
        let message = e.message().trim().to_owned();
        match at.and_then(|at| self.entry_at(at)) {
            Some(Held::Limit(name)) => self.error(at, Some(name), message),
            Some(Held::Plan(name)) => self.error(at, None, format!("plan {name:?}: {message}")),
            None => self.error(at, None, message),
        }
    }

    /// The line (1-based) of byte `at`.
    fn line_of(&self, at: usize) -> usize {
        let text = self.text.as_bytes();
        text[..at.min(text.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// The `[[limit]]` or `[[plan]]` holding byte `at`: the last one that
    /// starts before it, by the spans of the entries read without their
    /// checks. Where the text is not TOML, the entries of the lines before
    /// `at`'s.
    fn entry_at(&self, at: usize) -> Option<Held> {
        let at = at.min(self.text.len());
        let before = self.text[..at].rfind('\n').map_or(0, |n| n + 1);
        let names = toml::from_str::<Names>(self.text)
            .or_else(|_| toml::from_str::<Names>(&self.text[..before]))
            .ok()?;
        let last = |list: Vec<toml::Spanned<Name>>| {
            let e = list.into_iter().rfind(|e| e.span().start <= at)?;
            let start = e.span().start;
            let name = match e.into_inner().name? {
                toml::Value::String(name) => name,
                other => other.to_string(),
            };
            Some((start, name))
        };
        match (last(names.limit), last(names.plan)) {
            (Some((l, name)), Some((p, _))) if l > p => Some(Held::Limit(name)),
            (_, Some((_, name))) => Some(Held::Plan(name)),
            (Some((_, name)), None) => Some(Held::Limit(name)),
            (None, None) => None,
        }
    }
}

/// What holds a place of the file.
enum Held {
    Limit(String),
    Plan(String),
}

/// The entries' names, where they are, and nothing else of a table.
#[derive(Deserialize)]
struct Names {
    #[serde(default)]
    limit: Vec<toml::Spanned<Name>>,
    #[serde(default)]
    plan: Vec<toml::Spanned<Name>>,
}

/// An entry's name, whatever else it holds.
#[derive(Deserialize)]
struct Name {
    name: Option<toml::Value>,
}
