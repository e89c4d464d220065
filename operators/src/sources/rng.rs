//! A small, fast, seedable PRNG (wyrand) and helpers to derive seeds.
//!
//! wyrand (Wang Yi's `wyhash` family, public domain) is a 64-bit counter
//! passed through a 64×64→128 multiply-fold: one add, one multiply and one
//! xor per output, about 1 ns, and it passes BigCrush/PractRand for the
//! sample sizes a benchmark generator needs. Not cryptographic.

/// wyrand: a Weyl sequence (`state += P0`) mixed by a multiply-fold.
#[derive(Clone, Debug)]
pub(crate) struct WyRand {
    state: u64,
}

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;

impl WyRand {
    /// A generator whose stream is fully determined by `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        WyRand {
            state: splitmix64(seed),
        }
    }

    /// The next 64 random bits.
    #[inline(always)]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(WY_STEP);
        wymix(self.state)
    }

    /// Skips draws: `by` is `draws · WY_STEP` (wrapping) to skip `draws`.
    #[inline(always)]
    pub(crate) fn advance(&mut self, by: u64) {
        self.state = self.state.wrapping_add(by);
    }

    /// The next 128 random bits.
    #[inline(always)]
    pub(crate) fn next_u128(&mut self) -> u128 {
        ((self.next_u64() as u128) << 64) | self.next_u64() as u128
    }
}

/// What wyrand's state advances by per draw: draw `i` (from 1) of a
/// generator whose state starts at `s` is `wymix(s + i · WY_STEP)`, so any
/// draw of the sequence is computed directly from its position.
pub(crate) const WY_STEP: u64 = P0;

/// wyrand's output of state `s`: the high and low halves of the 128-bit
/// product `s · (s ^ P1)`, xored.
#[inline(always)]
pub(crate) fn wymix(s: u64) -> u64 {
    let t = (s as u128).wrapping_mul((s ^ P1) as u128);
    (t >> 64) as u64 ^ t as u64
}

/// SplitMix64's finaliser: a bijective mix of a 64-bit value (Steele, Lea,
/// Flood 2014), used to derive a stream's start from a seed.
#[inline]
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform integer in `0..n` from 64 random bits (Lemire's multiply-shift;
/// the bias is below `n / 2^64`, negligible here).
#[inline(always)]
pub(crate) fn below(r: u64, n: u64) -> u64 {
    ((r as u128 * n as u128) >> 64) as u64
}

/// Turns 128 random bits into a version-4 (random) UUID per RFC 9562 §5.4:
/// version nibble `4`, variant bits `10`; 122 random bits remain.
#[inline(always)]
pub(crate) fn uuid_v4(r: u128) -> u128 {
    (r & !(0xF << 76) & !(0b11 << 62)) | (0x4 << 76) | (0b10 << 62)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::ysb::uuid_to_string;

    #[test]
    fn deterministic_and_distinct() {
        let a: Vec<u64> = {
            let mut r = WyRand::new(1);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = WyRand::new(1);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = WyRand::new(2);
            (0..8).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_is_in_range_and_balanced() {
        let mut r = WyRand::new(9);
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[below(r.next_u64(), 7) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn uuid_v4_bits() {
        let s = uuid_to_string(uuid_v4(u128::MAX));
        assert_eq!(s, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        let s = uuid_to_string(uuid_v4(0));
        assert_eq!(s, "00000000-0000-4000-8000-000000000000");
    }
}
