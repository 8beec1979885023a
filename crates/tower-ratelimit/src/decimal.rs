//! [`decimal`]: the count written in a header or trailer value (ASCII digits only; a number past `u64` saturates).

/// The count in `value`: ASCII digits only, surrounding whitespace
/// ignored, a number past `u64::MAX` read as `u64::MAX`. `None` for
/// anything else: empty, a sign (`+5`, `-5`), a fraction, letters, bytes
/// that are not text. `0`, `00` are 0: the caller decides what 0 means.
pub(crate) fn decimal(value: &http::HeaderValue) -> Option<u64> {
    let text = value.to_str().ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::decimal;

    fn read(text: &str) -> Option<u64> {
        decimal(&http::HeaderValue::from_str(text).unwrap())
    }

    #[test]
    fn digits_only_and_saturating() {
        assert_eq!(read("500"), Some(500));
        assert_eq!(read(" 7 "), Some(7));
        assert_eq!(read("007"), Some(7));
        assert_eq!(read("0"), Some(0));
        assert_eq!(read("00"), Some(0));
        assert_eq!(read("99999999999999999999999"), Some(u64::MAX));
        for bad in [
            "", " ", "+0", "+5", "-5", "abc", "1.5", "1e3", "0x10", "5 5",
        ] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
    }
}
