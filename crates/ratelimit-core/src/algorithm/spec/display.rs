//! Printing: an [`AnyAlgorithm`] back to its line of text (its `Display`).

use super::anchor_name;
use crate::algorithm::{Anchor, DEFAULT_MAX_LOG_ENTRIES};
use crate::plumbing::format_duration;
use crate::AnyAlgorithm;
use std::fmt;
use std::time::Duration;

/// `L/P` with the period in its largest exact unit.
struct Rate(u64, Duration);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.0, format_duration(self.1))
    }
}

impl fmt::Display for AnyAlgorithm {
    /// The canonical text form (see [`AnyAlgorithm`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::Algorithm;
        let name = self.name();
        match self {
            Self::Gcra(a) => {
                write!(f, "{name} {}", Rate(a.rate_limit(), a.period()))?;
                if a.burst() != a.rate_limit() {
                    write!(f, " burst {}", a.burst())?;
                }
                Ok(())
            }
            Self::TokenBucket(a) => write!(
                f,
                "{name} {} refill {}",
                a.capacity(),
                Rate(a.refill(), a.period())
            ),
            Self::LeakyBucket(a) => {
                write!(f, "{name} {}", Rate(a.rate_limit(), a.period()))?;
                if a.queue() != 0 {
                    write!(f, " queue {}", a.queue())?;
                }
                Ok(())
            }
            Self::FixedWindow(a) => {
                match a.calendar_unit() {
                    Some(unit) => write!(f, "{name} {}/{unit}", a.rate_limit())?,
                    None => write!(f, "{name} {}", Rate(a.rate_limit(), a.period()))?,
                }
                if a.anchor() != Anchor::Aligned {
                    write!(f, " anchor {}", anchor_name(a.anchor()))?;
                }
                Ok(())
            }
            Self::SlidingLog(a) => {
                write!(f, "{name} {}", Rate(a.rate_limit(), a.period()))?;
                if a.rate_limit() > DEFAULT_MAX_LOG_ENTRIES {
                    write!(f, " max-entries {}", a.rate_limit())?;
                }
                Ok(())
            }
            Self::SlidingWindow(a) => write!(f, "{name} {}", Rate(a.rate_limit(), a.period())),
        }
    }
}
