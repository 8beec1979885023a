//! `PolicyTable::check_routes`: every limit's routes are routes the app
//! serves, so a typo cannot leave a route unlimited without a word.

use super::error::PolicyError;
use super::load::PolicyTable;

impl PolicyTable {
    /// Refuses the table if a limit names a route not in `served` (as
    /// `(method, path)`): a typo such as `POST /login/` or `POST /Login`
    /// would leave `/login` unlimited without a word. A route without a
    /// method needs its path served; `HEAD` is served where `GET` is
    /// (axum answers it). The error names the limit and lists the routes.
    ///
    /// ```
    /// use tower_ratelimit::policy::PolicyTable;
    ///
    /// let text = "[[limit]]\nname = \"login\"\nalgorithm = \"gcra 5/1m\"\nkey = \"client-ip\"\nroutes = [\"POST /login/\"]\n";
    /// let table = PolicyTable::from_toml(text, None).unwrap();
    /// let err = table.check_routes(&[("POST", "/login")]).unwrap_err();
    /// assert!(err.to_string().starts_with("limit \"login\": route \"POST /login/\" is not served"));
    /// ```
    pub fn check_routes(&self, served: &[(&str, &str)]) -> Result<(), PolicyError> {
        for entry in self.entries() {
            for route in &entry.routes {
                let text = route.to_string();
                let (method, path) = match text.split_once(' ') {
                    Some((m, p)) => (Some(m), p),
                    None => (None, text.as_str()),
                };
                let is_served = served.iter().any(|&(m, p)| {
                    p == path && method.is_none_or(|x| x == m || (x == "HEAD" && m == "GET"))
                });
                if !is_served {
                    let list: Vec<String> =
                        served.iter().map(|(m, p)| format!("{m} {p}")).collect();
                    return Err(PolicyError {
                        file: None,
                        line: None,
                        entry: Some(entry.name.clone()),
                        message: format!(
                            "route {text:?} is not served by the app, so the limit would never \
                             apply; the routes are: {}",
                            list.join(", ")
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}
