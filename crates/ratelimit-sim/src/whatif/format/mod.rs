//! The access-log formats `what-if` reads, one file each, and their
//! detection from a log's first lines.

mod alb;
mod envoy;
mod fields;
mod json;
mod nginx;

pub use json::JsonFields;

use super::line::LogLine;
use clap::ValueEnum;

/// An access-log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// nginx `combined`, optionally with `"$http_x_forwarded_for"` and
    /// `$request_time` appended.
    Nginx,
    /// JSON lines (fields mapped with `--field`).
    Json,
    /// AWS Application Load Balancer.
    Alb,
    /// Envoy's default access log.
    Envoy,
}

impl Format {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Json => "json",
            Self::Alb => "alb",
            Self::Envoy => "envoy",
        }
    }

    /// The format of `line`, if one fits.
    pub fn of(line: &str) -> Option<Self> {
        if json::looks_like(line) {
            Some(Self::Json)
        } else if alb::looks_like(line) {
            Some(Self::Alb)
        } else if envoy::looks_like(line) {
            Some(Self::Envoy)
        } else if nginx::looks_like(line) {
            Some(Self::Nginx)
        } else {
            None
        }
    }

    /// The format most of `lines` (a log's first non-empty lines) fit.
    pub fn detect<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut votes = [0usize; 4];
        let mut seen = 0;
        for line in lines {
            seen += 1;
            if let Some(f) = Self::of(line) {
                votes[f as usize] += 1;
            }
        }
        let all = [Self::Nginx, Self::Json, Self::Alb, Self::Envoy];
        match votes.iter().enumerate().max_by_key(|(_, n)| **n) {
            Some((i, n)) if *n > 0 => Ok(all[i]),
            _ if seen == 0 => Err("the log is empty: no format to detect".to_owned()),
            _ => Err(format!(
                "cannot tell the log's format from its first {seen} lines: \
                 give --format nginx, json, alb or envoy"
            )),
        }
    }

    /// One line of this format, or why it is not one.
    pub fn parse(self, line: &str, fields: &JsonFields) -> Result<LogLine, String> {
        match self {
            Self::Nginx => nginx::parse(line),
            Self::Json => json::parse(line, fields),
            Self::Alb => alb::parse(line),
            Self::Envoy => envoy::parse(line),
        }
    }
}
