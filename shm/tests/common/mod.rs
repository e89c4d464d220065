//! Helpers shared by the ring tests: a deterministic payload pattern and a PRNG.
#![allow(dead_code)]

/// SplitMix64: a tiny deterministic PRNG for test sizes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A size in `0..=max`, log-uniform so small and large frames both occur.
    pub fn size(&mut self, max: usize) -> usize {
        let bits = 64 - (max as u64).leading_zeros() as u64;
        let e = self.next() % (bits + 1);
        let hi = (1u64 << e).min(max as u64 + 1);
        (self.next() % hi) as usize
    }
}

/// Fills `buf` with the pattern of frame `seq`: every byte depends on seq and position.
pub fn fill(buf: &mut [u8], seq: u64) {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes());
    }
    let rem = chunks.into_remainder();
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let b = x.to_le_bytes();
    rem.copy_from_slice(&b[..rem.len()]);
}

/// Checks `buf` against the pattern of frame `seq`; returns a checksum of it.
pub fn check(buf: &[u8], seq: u64) -> u64 {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut sum = 0u64;
    let mut chunks = buf.chunks_exact(8);
    for c in &mut chunks {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let got = u64::from_le_bytes(c.try_into().unwrap());
        assert_eq!(got, x, "frame {seq}: payload corrupted");
        sum = sum.wrapping_mul(31).wrapping_add(got);
    }
    let rem = chunks.remainder();
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    assert_eq!(
        rem,
        &x.to_le_bytes()[..rem.len()],
        "frame {seq}: tail corrupted"
    );
    for &b in rem {
        sum = sum.wrapping_mul(31).wrapping_add(b as u64);
    }
    sum.wrapping_add(buf.len() as u64)
}
