//! A `[[limit]]`'s pace fields as the policy file writes them: `pace` (which bodies) and byte sizes (`"64KiB"`).

use crate::pace::Paced;
use serde::{Deserialize, Deserializer};

/// `pace = "response" | "request" | "both"`.
pub(super) fn pace<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Paced>, D::Error> {
    match String::deserialize(d)?.as_str() {
        "response" => Ok(Some(Paced::Responses)),
        "request" => Ok(Some(Paced::Requests)),
        "both" => Ok(Some(Paced::Both)),
        other => Err(serde::de::Error::custom(format!(
            "bad pace {other:?}: expected response, request or both"
        ))),
    }
}

/// A byte count: a number, or text with a unit (`"64KiB"`, `"1 MiB"`,
/// `"500kB"`, `"4096"`).
pub(super) fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Number(n) => Ok(Some(n)),
        Raw::Text(text) => byte_size(&text).map(Some).map_err(serde::de::Error::custom),
    }
}

/// `text` as bytes, or why it is not a size.
fn byte_size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "bad size {text:?}: expected bytes, or a number with B, kB, KiB, MB, MiB, GB or GiB"
        )
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let unit: u64 = match unit.trim() {
        "" | "B" => 1,
        "kB" | "KB" => 1000,
        "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" => 1 << 20,
        "GB" => 1_000_000_000,
        "GiB" => 1 << 30,
        _ => return Err(bad()),
    };
    n.checked_mul(unit).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::byte_size;

    #[test]
    fn sizes() {
        assert_eq!(byte_size("4096"), Ok(4096));
        assert_eq!(byte_size("64KiB"), Ok(65536));
        assert_eq!(byte_size("1 MiB"), Ok(1 << 20));
        assert_eq!(byte_size("500kB"), Ok(500_000));
        for bad in [
            "",
            "KiB",
            "1.5MiB",
            "64 kib",
            "-1",
            "99999999999999999999GiB",
        ] {
            assert!(byte_size(bad).is_err(), "{bad:?}");
        }
    }
}
