//! The connection caps from the environment (`MAX_CONNECTIONS`,
//! `MAX_CONNECTIONS_PER_CLIENT`), the global one kept below the process's
//! open-file limit.

use super::env_error::{whole_number, EnvError};
use super::options::ServeOptions;

/// File descriptors kept for anything but client connections (logs, the
/// listeners, Redis, the metrics and admin listeners, reloads): an eighth
/// of the open-file limit, at least 32.
pub fn fd_reserve(open_file_limit: u64) -> u64 {
    (open_file_limit / 8).max(32)
}

/// The largest value `MAX_CONNECTIONS` and `MAX_CONNECTIONS_PER_CLIENT`
/// accept.
pub const MAX_CAP: usize = 1_000_000;

impl ServeOptions {
    /// The defaults with the connection caps from the environment:
    ///
    /// - `MAX_CONNECTIONS`: connections served at once. Unset: 10,000, or
    ///   fewer so that [`fd_reserve`] file descriptors stay free under the
    ///   process's open-file limit (`ulimit -n`). A value the limit cannot
    ///   hold (the limit or more) is an error naming it.
    /// - `MAX_CONNECTIONS_PER_CLIENT`: connections per client IP (an IPv6
    ///   /64). Unset: 100, or no cap of its own (the global one) when
    ///   `behind_proxies`, since every connection then comes from a proxy.
    ///
    /// ```
    /// use tower_ratelimit::serve::ServeOptions;
    ///
    /// let options = ServeOptions::from_env(false).unwrap();
    /// assert!(options.max_connections_per_client <= options.max_connections);
    /// ```
    pub fn from_env(behind_proxies: bool) -> Result<Self, EnvError> {
        Self::from_vars(
            |name| std::env::var(name).ok(),
            open_file_limit(),
            behind_proxies,
        )
    }

    /// [`from_env`](Self::from_env) with the variables looked up by `var`
    /// and the open-file limit given.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        open_file_limit: Option<u64>,
        behind_proxies: bool,
    ) -> Result<Self, EnvError> {
        let defaults = Self::default();
        let room = open_file_limit.map(|n| n.saturating_sub(fd_reserve(n)).max(1));
        let room = room.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let max_connections = match var("MAX_CONNECTIONS") {
            None => defaults.max_connections.min(room),
            Some(v) => {
                let n = whole_number("MAX_CONNECTIONS", &v, MAX_CAP)?;
                if let Some(limit) = open_file_limit.filter(|&l| n as u64 >= l) {
                    return Err(EnvError::new(
                        "MAX_CONNECTIONS",
                        Some(v),
                        format!(
                            "the open-file limit is {limit} (ulimit -n): raise it, or set fewer \
                             connections (at most {room} leave the default reserve)"
                        ),
                    ));
                }
                n
            }
        };
        let max_connections_per_client = match var("MAX_CONNECTIONS_PER_CLIENT") {
            Some(v) => whole_number("MAX_CONNECTIONS_PER_CLIENT", &v, MAX_CAP)?,
            None if behind_proxies => max_connections,
            None => defaults.max_connections_per_client,
        };
        Ok(Self {
            max_connections,
            max_connections_per_client: max_connections_per_client.min(max_connections),
            ..defaults
        })
    }
}

/// The process's soft limit on open files (`RLIMIT_NOFILE`), on Linux
/// from `/proc/self/limits`; `None` elsewhere or when unlimited.
pub fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_file_limit(&limits)
}

/// The soft limit in the `Max open files` line of a `/proc/PID/limits`.
fn parse_open_file_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(vars: &[(&str, &str)], limit: Option<u64>, proxies: bool) -> ServeOptions {
        try_options(vars, limit, proxies).unwrap()
    }

    fn try_options(
        vars: &[(&str, &str)],
        limit: Option<u64>,
        proxies: bool,
    ) -> Result<ServeOptions, EnvError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let var = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        ServeOptions::from_vars(var, limit, proxies)
    }

    #[test]
    fn the_global_cap_stays_below_the_open_file_limit() {
        assert_eq!(options(&[], None, false).max_connections, 10_000);
        assert_eq!(options(&[], Some(1_048_576), false).max_connections, 10_000);
        // 1,024 files: 128 kept, 896 connections.
        assert_eq!(options(&[], Some(1024), false).max_connections, 896);
        assert_eq!(options(&[], Some(256), false).max_connections, 224);
        assert_eq!(options(&[], Some(64), false).max_connections, 32);
        assert_eq!(options(&[], Some(10), false).max_connections, 1);
        // Set: anything under the limit.
        let set = options(&[("MAX_CONNECTIONS", "1000")], Some(1024), false);
        assert_eq!(set.max_connections, 1000);
        let e = try_options(&[("MAX_CONNECTIONS", "1024")], Some(1024), false).unwrap_err();
        assert_eq!(e.variable, "MAX_CONNECTIONS");
        assert!(e.to_string().contains("open-file limit is 1024"), "{e}");
    }

    #[test]
    fn the_per_client_cap() {
        assert_eq!(options(&[], None, false).max_connections_per_client, 100);
        // Behind proxies, the global cap alone.
        let behind = options(&[], Some(1024), true);
        assert_eq!(behind.max_connections_per_client, 896);
        let set = options(&[("MAX_CONNECTIONS_PER_CLIENT", "8")], None, true);
        assert_eq!(set.max_connections_per_client, 8);
        // Never above the global cap.
        let small = options(&[("MAX_CONNECTIONS", "50")], None, false);
        assert_eq!(small.max_connections_per_client, 50);
    }

    #[test]
    fn bad_values_are_errors_naming_the_variable() {
        for var in ["MAX_CONNECTIONS", "MAX_CONNECTIONS_PER_CLIENT"] {
            for bad in ["", "0", "-1", "lots", "1000001", "1e3"] {
                let e = try_options(&[(var, bad)], None, false).unwrap_err();
                assert_eq!(e.variable, var, "{bad:?}");
                assert!(e.to_string().contains("expected a whole number"), "{e}");
            }
        }
    }

    #[test]
    fn reads_the_soft_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             63448                63448                processes \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_open_file_limit(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_open_file_limit(unlimited), None);
        assert_eq!(parse_open_file_limit(""), None);
    }
}
