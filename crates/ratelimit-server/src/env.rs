//! The environment's settings over the file's: addresses and the admin token.

use crate::address::optional_address;
use crate::config::{Config, ConfigFileError};

impl Config {
    /// This configuration with the environment's settings over the
    /// file's, read through `var` (`|v| std::env::var(v).ok()` for the
    /// process's): `BIND_ADDR`, `GRPC_BIND_ADDR`, `METRICS_ADDR`,
    /// `ADMIN_ADDR` (an empty value is unset), and the admin token from
    /// `ADMIN_TOKEN` or `[admin] token-file`. An error names the variable
    /// or the field.
    ///
    /// ```
    /// use ratelimit_server::Config;
    ///
    /// let config = Config::parse("[metrics]\naddr = \"127.0.0.1:9090\"", "inline").unwrap();
    /// let env = |var: &str| (var == "METRICS_ADDR").then(|| "127.0.0.1:9999".to_owned());
    /// assert_eq!(config.clone().with_env(env).unwrap().metrics.addr.unwrap().port(), 9999);
    /// let bad = |var: &str| (var == "BIND_ADDR").then(|| "nowhere".to_owned());
    /// assert!(config.with_env(bad).unwrap_err().to_string().contains("BIND_ADDR=\"nowhere\""));
    /// ```
    pub fn with_env(
        mut self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigFileError> {
        let file = self.file.clone();
        let fail = |message: String| ConfigFileError {
            file: file.clone(),
            line: None,
            limit: None,
            message,
        };
        let address =
            |name: &str| optional_address(var(name), name).map_err(|m| m.replacen(" = ", "=", 1));
        if let Some(addr) = address("BIND_ADDR").map_err(fail)? {
            self.server.http = addr;
        }
        if let Some(addr) = address("GRPC_BIND_ADDR").map_err(fail)? {
            self.server.grpc = addr;
        }
        if let Some(addr) = address("METRICS_ADDR").map_err(fail)? {
            self.metrics.addr = Some(addr);
        }
        if let Some(addr) = address("ADMIN_ADDR").map_err(fail)? {
            self.admin.addr = Some(addr);
        }
        self.admin.read_token(var("ADMIN_TOKEN")).map_err(fail)?;
        Ok(self)
    }
}
