//! The cap on the keys of each in-memory store (`RATELIMIT_MAX_KEYS`),
//! for the example servers.

use tower_ratelimit::serve::{whole_number, EnvError};

/// The default cap on the keys of each in-memory store.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// The largest cap [`parse_max_keys`] accepts.
pub const MAX_MAX_KEYS: usize = 1_000_000_000;

/// Reads `RATELIMIT_MAX_KEYS`, the cap on the keys of each in-memory store
/// ([`DEFAULT_MAX_KEYS`] when unset).
pub fn max_keys_from_env() -> Result<usize, EnvError> {
    match std::env::var("RATELIMIT_MAX_KEYS") {
        Ok(value) => parse_max_keys(&value),
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_MAX_KEYS),
        Err(e) => Err(EnvError::new("RATELIMIT_MAX_KEYS", None, e)),
    }
}

/// Parses a value of `RATELIMIT_MAX_KEYS`: a whole number from 1 to
/// [`MAX_MAX_KEYS`], surrounding blanks allowed.
pub fn parse_max_keys(value: &str) -> Result<usize, EnvError> {
    whole_number("RATELIMIT_MAX_KEYS", value, MAX_MAX_KEYS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_keys_values() {
        assert_eq!(parse_max_keys("1"), Ok(1));
        assert_eq!(parse_max_keys(" 250000 "), Ok(250_000));
        assert_eq!(parse_max_keys("1000000000"), Ok(MAX_MAX_KEYS));
        for bad in [
            "",
            " ",
            "0",
            "-1",
            "+5",
            "1e6",
            "1_000",
            "10 00",
            "abc",
            "1000000001",
        ] {
            let e = parse_max_keys(bad).unwrap_err();
            assert_eq!(e.variable, "RATELIMIT_MAX_KEYS");
            let shown = e.to_string();
            assert!(shown.starts_with("RATELIMIT_MAX_KEYS="), "{shown}");
            assert!(shown.contains("expected a whole number"), "{shown}");
        }
        assert!(parse_max_keys("99999999999999999999999").is_err());
    }
}
