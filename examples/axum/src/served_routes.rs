//! The routes the app serves (`SERVED`), and the check that every limit of a policy names one of them.

use tower_ratelimit::policy::{PolicyError, PolicyTable};

/// The routes [`app_with_policy`](crate::app_with_policy) serves, as
/// `(method, path)`. A policy limit on any other route would never apply.
///
/// ```
/// assert!(axum_example::served_routes::SERVED.contains(&("POST", "/login")));
/// ```
pub const SERVED: &[(&str, &str)] = &[
    ("GET", "/reports"),
    ("POST", "/tickets"),
    ("POST", "/accounts"),
    ("POST", "/login"),
    ("GET", "/api/items"),
    ("POST", "/v1/chat"),
    ("GET", "/download"),
    ("GET", "/health"),
    ("GET", "/ready"),
];

/// Refuses `policy` if a limit names a route the app does not serve (a
/// typo such as `POST /login/` or `POST /Login` would leave `/login`
/// unlimited without a word). A route without a method needs its path
/// served; `HEAD` is served where `GET` is (axum answers it).
pub(crate) fn check(policy: &PolicyTable) -> Result<(), PolicyError> {
    for entry in policy.entries() {
        for route in &entry.routes {
            let text = route.to_string();
            let (method, path) = match text.split_once(' ') {
                Some((m, p)) => (Some(m), p),
                None => (None, text.as_str()),
            };
            let served = SERVED.iter().any(|&(m, p)| {
                p == path && method.is_none_or(|x| x == m || (x == "HEAD" && m == "GET"))
            });
            if !served {
                let list: Vec<String> = SERVED.iter().map(|(m, p)| format!("{m} {p}")).collect();
                return Err(PolicyError {
                    file: None,
                    line: None,
                    entry: Some(entry.name.clone()),
                    message: format!(
                        "route {text:?} is not served by the app, so the limit would never apply; \
                         the routes are: {}",
                        list.join(", ")
                    ),
                });
            }
        }
    }
    Ok(())
}
