//! A small stack buffer for header values and bodies: one copy, no formatting machinery.

/// Up to `N` bytes on the stack, then a `Vec`.
pub(crate) struct Buf<const N: usize = 128> {
    stack: [u8; N],
    len: usize,
    heap: Option<Vec<u8>>,
}

impl<const N: usize> Buf<N> {
    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            stack: [0; N],
            len: 0,
            heap: None,
        }
    }

    #[inline(always)]
    fn bytes(&mut self, s: &[u8]) {
        let end = self.len + s.len();
        if self.heap.is_none() && end <= N {
            // Inlined, a short constant piece is a store or two.
            self.stack[self.len..end].copy_from_slice(s);
            self.len = end;
        } else {
            self.spill(s);
        }
    }

    /// Appends `s` on the heap, moving there first if needed.
    #[cold]
    fn spill(&mut self, s: &[u8]) {
        match &mut self.heap {
            Some(heap) => heap.extend_from_slice(s),
            None => {
                let mut heap = Vec::with_capacity((self.len + s.len()) * 2);
                heap.extend_from_slice(&self.stack[..self.len]);
                heap.extend_from_slice(s);
                self.heap = Some(heap);
            }
        }
    }

    #[inline]
    fn byte(&mut self, b: u8) {
        if self.heap.is_none() && self.len < N {
            self.stack[self.len] = b;
            self.len += 1;
        } else {
            self.bytes(&[b]);
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes());
        self
    }

    #[inline]
    pub(crate) fn num(&mut self, n: u64) -> &mut Self {
        self.bytes(itoa::Buffer::new().format(n).as_bytes());
        self
    }

    /// `s` as a quoted string, escaping `"` and `\` (and, for JSON,
    /// control characters).
    #[inline]
    pub(crate) fn quoted(&mut self, s: &str) -> &mut Self {
        self.byte(b'"');
        self.escaped(s);
        self.byte(b'"');
        self
    }

    /// `s` escaped for a quoted string, copied in runs.
    pub(crate) fn escaped(&mut self, s: &str) -> &mut Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let bytes = s.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if b < 0x20 || b == b'"' || b == b'\\' {
                self.bytes(&bytes[start..i]);
                if b < 0x20 {
                    self.bytes(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[usize::from(b >> 4)],
                        HEX[usize::from(b & 15)],
                    ]);
                } else {
                    self.bytes(&[b'\\', b]);
                }
                start = i + 1;
            }
        }
        self.bytes(&bytes[start..]);
        self
    }

    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.heap {
            Some(heap) => heap,
            None => &self.stack[..self.len],
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_quotes() {
        let mut b = Buf::<8>::new();
        b.num(0)
            .push(" ")
            .num(18_446_744_073_709_551_615)
            .push(" ")
            .quoted("a\"b\\c\n");
        assert_eq!(
            std::str::from_utf8(b.as_bytes()).unwrap(),
            r#"0 18446744073709551615 "a\"b\\c\u000a""#
        );
        assert!(Buf::<8>::new().is_empty());
        let mut big = Buf::<4>::new();
        big.push("ab").push("cdef").push("g");
        assert_eq!(big.as_bytes(), b"abcdefg");
    }
}
