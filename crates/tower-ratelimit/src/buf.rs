//! A small stack buffer for header values and bodies: one copy, no formatting machinery.

use smallvec::SmallVec;

pub(crate) struct Buf(SmallVec<[u8; 320]>);

impl Buf {
    #[inline]
    pub(crate) fn new() -> Self {
        Self(SmallVec::new())
    }

    #[inline]
    pub(crate) fn push(&mut self, s: &str) -> &mut Self {
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    #[inline]
    pub(crate) fn num(&mut self, mut n: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.0.extend_from_slice(&digits[i..]);
        self
    }

    /// `s` as a quoted string, escaping `"` and `\` (and, for JSON,
    /// control characters).
    #[inline]
    pub(crate) fn quoted(&mut self, s: &str) -> &mut Self {
        self.0.push(b'"');
        if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.0.extend_from_slice(s.as_bytes());
        } else {
            for c in s.chars() {
                match c {
                    '"' | '\\' => {
                        self.0.push(b'\\');
                        self.0.push(c as u8);
                    }
                    c if (c as u32) < 0x20 => {
                        self.push("\\u00");
                        let hex = b"0123456789abcdef";
                        self.0.push(hex[(c as usize) >> 4]);
                        self.0.push(hex[(c as usize) & 15]);
                    }
                    c => {
                        let mut b = [0; 4];
                        self.0.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                    }
                }
            }
        }
        self.0.push(b'"');
        self
    }

    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_quotes() {
        let mut b = Buf::new();
        b.num(0)
            .push(" ")
            .num(18_446_744_073_709_551_615)
            .push(" ")
            .quoted("a\"b\\c\n");
        assert_eq!(
            std::str::from_utf8(b.as_bytes()).unwrap(),
            r#"0 18446744073709551615 "a\"b\\c\u000a""#
        );
        assert!(Buf::new().is_empty());
    }
}
