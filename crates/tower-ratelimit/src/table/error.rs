//! Why a policy table was rejected, and where in the file.

use std::fmt;
use std::path::PathBuf;

/// Why a policy table was rejected: where, which entry, and what.
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

/// The line of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The `name` of the `[[limit]]` block holding byte `offset`, if any.
pub(super) fn entry_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = if text[offset..].starts_with("[[limit]]") {
        offset
    } else {
        text[..offset].rfind("[[limit]]")?
    };
    let end = text[start + 9..]
        .find("[[limit]]")
        .map_or(text.len(), |e| start + 9 + e);
    text[start..end].lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "name").then(|| v.trim().trim_matches('"').to_owned())
    })
}
