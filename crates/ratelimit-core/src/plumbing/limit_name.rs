//! The one rule for a limit's name, which the layer builder, the policy
//! table and the Redis stores all check.

/// The rule for a limit's name, as error messages state it.
pub const LIMIT_NAME_RULE: &str = "1 to 64 visible ASCII characters, without quotes or braces";

/// Whether `name` can name a limit: 1 to 64 visible ASCII characters
/// (`!` to `~`), without `"` (it goes in a header's quoted string) and
/// without `{` or `}` (it goes in Redis key names, where braces would
/// change the Cluster hash tag).
///
/// ```
/// use ratelimit_core::plumbing::is_valid_limit_name;
///
/// assert!(is_valid_limit_name("per-ip"));
/// assert!(!is_valid_limit_name(""));
/// assert!(!is_valid_limit_name("two words"));
/// assert!(!is_valid_limit_name("{tag}"));
/// assert!(!is_valid_limit_name("é"));
/// ```
pub fn is_valid_limit_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && !matches!(b, b'"' | b'{' | b'}'))
}
