//! [`Divisor`]: a `u64` divisor fixed by a setting, divided by with
//! multiplications, as a division instruction takes several times longer.

/// `d` and `m = floor(2^64 / d)` (`u64::MAX` when `d` is 1). Public in
/// a private module, for the sealed state word that divides by it.
///
/// `q = floor(n * m / 2^64)` is `floor(n / d)` or one less: `n * m /
/// 2^64` is at most `n / d`, and more than `n / d - n / 2^64`, so more
/// than `n / d - 1` for every `u64` `n`. The remainder `n - q * d` tells
/// which: it is `d` or more only when `q` is one short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Divisor {
    d: u64,
    m: u64,
}

impl Divisor {
    /// Division by `d`.
    ///
    /// # Panics
    ///
    /// When `d` is 0 (a setting's divisor never is: it is refused first).
    pub(crate) fn new(d: u64) -> Self {
        assert!(d > 0, "a divisor of 0");
        let m = u64::try_from((1u128 << 64) / u128::from(d)).unwrap_or(u64::MAX);
        Self { d, m }
    }

    /// `floor(n / d)` and `n mod d`.
    #[inline(always)]
    fn div_rem(self, n: u64) -> (u64, u64) {
        let q = ((u128::from(n) * u128::from(self.m)) >> 64) as u64;
        // q * d <= n: no overflow, and r < 2d.
        let r = n - q * self.d;
        if r >= self.d {
            (q + 1, r - self.d)
        } else {
            (q, r)
        }
    }

    /// `floor(n / d)`.
    #[inline(always)]
    pub(crate) fn div(self, n: u64) -> u64 {
        self.div_rem(n).0
    }

    /// `ceil(n / d)`.
    #[inline(always)]
    pub(crate) fn div_ceil(self, n: u64) -> u64 {
        let (q, r) = self.div_rem(n);
        q + u64::from(r != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::Divisor;
    use proptest::prelude::*;

    const EDGES: [u64; 9] = [
        1,
        2,
        3,
        7,
        1 << 32,
        (1 << 32) + 1,
        1 << 63,
        u64::MAX - 1,
        u64::MAX,
    ];

    fn agrees(n: u64, d: u64) {
        let by = Divisor::new(d);
        assert_eq!(by.div(n), n / d, "{n} / {d}");
        assert_eq!(by.div_ceil(n), n.div_ceil(d), "ceil({n} / {d})");
    }

    #[test]
    fn divides_exactly_at_the_edges() {
        for d in EDGES {
            for n in EDGES.into_iter().chain([0, d - 1, d, d.saturating_add(1)]) {
                agrees(n, d);
                agrees(n.wrapping_mul(d), d);
            }
        }
    }

    proptest! {
        #[test]
        fn divides_as_the_instruction_does(n: u64, d in 1u64..) {
            agrees(n, d);
        }

        #[test]
        fn divides_small_divisors_as_the_instruction_does(n: u64, d in 1u64..100_000) {
            agrees(n, d);
        }
    }
}
