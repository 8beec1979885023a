//! Option values the subcommands share: durations, and clap errors on one line.

use crate::error::SimError;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use ratelimit_core::plumbing::parse_duration;
use std::time::Duration;

/// Parses a duration option with [`parse_duration`].
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A duration of more than zero (`--interval`, `--bin`).
pub(crate) fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be positive".to_owned()),
        d => Ok(d),
    }
}

/// A clap error on one line, naming the bad value: `noun` names what a
/// subcommand position stands for (`algorithm`, `generator`). A hint at
/// the command's `--help` follows when the error is about `ratelimit-sim`
/// itself.
pub fn cli_error(e: &clap::Error, noun: &str) -> SimError {
    let rendered = e.render().to_string();
    let (body, usage) = rendered
        .split_once("\nUsage:")
        .unwrap_or((rendered.as_str(), ""));
    let names = |kind| match e.get(kind) {
        Some(ContextValue::String(name)) => vec![name.as_str()],
        Some(ContextValue::Strings(names)) => names.iter().map(String::as_str).collect(),
        _ => Vec::new(),
    };
    let mut out = String::new();
    match e.kind() {
        ErrorKind::InvalidSubcommand if !names(ContextKind::InvalidSubcommand).is_empty() => {
            out = format!(
                "unknown {noun} {:?}",
                names(ContextKind::InvalidSubcommand)[0]
            );
            if let Some(similar) = names(ContextKind::SuggestedSubcommand).first() {
                out.push_str(&format!(" (did you mean {similar:?}?)"));
            }
        }
        ErrorKind::MissingSubcommand => {
            let valid: Vec<&str> = names(ContextKind::ValidSubcommand)
                .into_iter()
                .filter(|n| *n != "help")
                .collect();
            out = format!("missing {noun}: one of {}", valid.join(", "));
        }
        _ => {
            let lines = body.lines().map(str::trim).filter(|l| !l.is_empty());
            for line in lines.take_while(|l| !l.starts_with("For more information")) {
                let line = line.strip_prefix("error: ").unwrap_or(line);
                if line.starts_with("tip: to pass") {
                    continue;
                }
                let line = line.strip_prefix("tip: ").unwrap_or(line);
                if !out.is_empty() {
                    let joined = out.ends_with(':') || line.starts_with('[');
                    out.push_str(if joined { " " } else { "; " });
                }
                out.push_str(line);
            }
        }
    }
    // `ratelimit-sim gcra [OPTIONS] ...`: the command is the words before
    // the first option or placeholder.
    let command: Vec<&str> = usage
        .split_whitespace()
        .take_while(|w| !w.starts_with(['[', '<', '-']))
        .collect();
    if command.first() == Some(&"ratelimit-sim") {
        out.push_str(&format!("; see '{} --help'", command.join(" ")));
    }
    SimError(out)
}
