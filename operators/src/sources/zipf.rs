//! Zipf-distributed keys in O(1) per draw: Vose's alias method over a
//! table built once per job and shared (`Arc`) by its workers.
//!
//! Key `k` (0-based) of `keys` has probability `(k + 1)^-s / H(keys, s)`,
//! `H(keys, s) = Σ_{j=1..keys} j^-s` (the Zipf law over ranks `1..=keys`).
//!
//! **The method.** Walker's alias method (A. J. Walker, "An efficient method
//! for generating discrete random variables with general distributions",
//! ACM TOMS 3(3), 1977) in Vose's O(n) construction (M. D. Vose, "A linear
//! algorithm for generating random numbers with a given distribution", IEEE
//! TSE 17(9), 1991): `keys` columns of equal mass; column `c` holds key `c`
//! up to a threshold and the rest of its mass is one other key, its alias.
//! A draw picks a column uniformly and flips one biased coin: one table
//! load, no loop, no rejection. An inverse-CDF table with a guide table
//! would also be O(1) on average, but its walk varies per draw; the alias
//! draw is the same few instructions every time.
//!
//! **Exact in integers.** Each key's mass is rounded once to an integer
//! number of units, `2^32` units a column, `keys · 2^32` in all (the
//! rounding residue, at most `keys / 2` units, goes to key 0, the heaviest);
//! the construction then works in exact integer arithmetic, so the table
//! represents exactly those rounded masses: every other key's probability
//! is within half a unit, `2^-33 / keys`, of the exact value (a relative
//! error of `1 / (2 p · keys · 2^32)`, 10^-3 for the rarest of 10^7 keys at
//! `s = 1.5`), key 0's within `2^-33` (relative: below 10^-9 here).
//!
//! **A draw from one 64-bit hash.** `x = hash · keys` (128 bits): the high
//! 64 bits are the column (uniform in `0..keys`, Lemire's multiply-shift),
//! the next 32 bits (the fraction's top) are the coin; for any threshold
//! the count of hashes that take it is exact to one hash in `2^64`.
//!
//! **Memory and time.** One `u64` per key (threshold `<< 32 | alias`):
//! 0.8 MB for 10^5 keys, 80 MB for 10^7. Building costs one `powf` per key
//! plus O(keys) integer work, with about 20 bytes per key of scratch;
//! [`MAX_KEYS`] bounds it.

use std::fmt;

/// The most keys a Zipf table may have: 2^27 (134 M keys, a 1 GiB table).
pub const MAX_KEYS: u64 = 1 << 27;

/// Units of mass a column holds: the coin's resolution.
const COLUMN: u64 = 1 << 32;

/// An alias table over `0..n`: O(1) draws from a fixed discrete
/// distribution.
#[derive(Clone, PartialEq, Eq)]
pub struct AliasTable {
    /// Column `c`: `threshold << 32 | alias`. A draw that lands in column
    /// `c` with coin `u` (32 bits) is `c` if `u < threshold`, else `alias`;
    /// a full column has `alias == c`.
    cols: Vec<u64>,
}

impl fmt::Debug for AliasTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AliasTable")
            .field("n", &self.cols.len())
            .finish_non_exhaustive()
    }
}

impl AliasTable {
    /// The table of `n` outcomes whose outcome `k` has probability
    /// `weight(k) / Σ weight` (weights finite, non-negative, the sum
    /// positive).
    ///
    /// # Errors
    /// `n` is 0 or above [`MAX_KEYS`], or a weight is not finite and
    /// non-negative, or all are zero.
    pub fn new(n: u64, weight: impl Fn(u64) -> f64) -> Result<AliasTable, String> {
        if n == 0 || n > MAX_KEYS {
            return Err(format!("{n} outcomes: an alias table holds 1..={MAX_KEYS}"));
        }
        let w: Vec<f64> = (0..n).map(&weight).collect();
        if w.iter().any(|x| !(x.is_finite() && *x >= 0.0)) {
            return Err("weights must be finite and non-negative".into());
        }
        // Summed from the smallest (the tail) for accuracy.
        let total: f64 = w.iter().rev().sum();
        if total <= 0.0 {
            return Err("the weights sum to zero".into());
        }
        // Masses in units, `n · 2^32` in all exactly: each weight's share
        // rounded, the residue (at most n / 2 units either way) given to
        // the heaviest outcome, which has at least 2^32 > n / 2 units.
        let units = n * COLUMN;
        let scale = units as f64 / total;
        // Same size and alignment: collected in place, no second buffer.
        let mut mass: Vec<u64> = w.into_iter().map(|x| (x * scale).round() as u64).collect();
        let top = (0..mass.len()).max_by_key(|&k| mass[k]).unwrap_or(0);
        let others = mass.iter().sum::<u64>() - mass[top];
        mass[top] = units - others;
        Ok(AliasTable::from_units(mass))
    }

    /// Vose's construction on masses in units (`Σ mass = n · 2^32`).
    fn from_units(mut mass: Vec<u64>) -> AliasTable {
        let n = mass.len();
        let mut cols = vec![0u64; n];
        let (mut small, mut large): (Vec<u32>, Vec<u32>) = (0..n as u32)
            .rev()
            .partition(|&k| mass[k as usize] < COLUMN);
        while let (Some(&l), Some(&g)) = (small.last(), large.last()) {
            small.pop();
            // Column l: key l for mass[l] units, then g fills it.
            cols[l as usize] = mass[l as usize] << 32 | g as u64;
            let g_left = mass[g as usize] - (COLUMN - mass[l as usize]);
            mass[g as usize] = g_left;
            if g_left < COLUMN {
                large.pop();
                small.push(g);
            }
        }
        // What is left holds exactly one column's mass each (the sums are
        // exact): a full column, its own alias.
        for k in small.into_iter().chain(large) {
            debug_assert_eq!(mass[k as usize], COLUMN);
            cols[k as usize] = k as u64;
        }
        AliasTable { cols }
    }

    /// Number of outcomes.
    pub fn len(&self) -> u64 {
        self.cols.len() as u64
    }

    /// Always false: a table has at least one outcome.
    pub fn is_empty(&self) -> bool {
        self.cols.is_empty()
    }

    /// The outcome of 64 uniform random bits `hash`, in `0..len()`.
    #[inline(always)]
    pub fn sample(&self, hash: u64) -> u64 {
        let x = hash as u128 * self.cols.len() as u128;
        let col = (x >> 64) as usize;
        let coin = (x >> 32) as u32;
        // `col < len` since `hash < 2^64`.
        let e = self.cols[col];
        if coin < (e >> 32) as u32 {
            col as u64
        } else {
            e & 0xffff_ffff
        }
    }

    /// Probability of each outcome as the table holds it (units / total):
    /// for tests and checks.
    pub fn probabilities(&self) -> Vec<f64> {
        let n = self.cols.len();
        let mut units = vec![0u64; n];
        for (c, &e) in self.cols.iter().enumerate() {
            let (thr, alias) = (e >> 32, (e & 0xffff_ffff) as usize);
            if alias == c {
                units[c] += COLUMN;
            } else {
                units[c] += thr;
                units[alias] += COLUMN - thr;
            }
        }
        let total = (n as u64 * COLUMN) as f64;
        units.into_iter().map(|u| u as f64 / total).collect()
    }
}

/// Zipf's law over `keys` keys with exponent `s`: key `k` (0-based) has
/// probability `(k + 1)^-s / H(keys, s)`.
#[derive(Clone, Debug, PartialEq)]
pub struct ZipfTable {
    /// The exponent.
    s: f64,
    table: AliasTable,
}

impl ZipfTable {
    /// The table of `keys` keys (`1..=`[`MAX_KEYS`]) and exponent `s` (> 0,
    /// finite). Takes about 10–20 ns per key (one `powf` each).
    ///
    /// # Errors
    /// `keys` out of range, `s` not a positive finite number.
    pub fn new(keys: u64, s: f64) -> Result<ZipfTable, String> {
        if !(s.is_finite() && s > 0.0) {
            return Err(format!("Zipf exponent {s}: must be a positive number"));
        }
        if keys == 0 || keys > MAX_KEYS {
            return Err(format!("{keys} keys: a Zipf table holds 1..={MAX_KEYS}"));
        }
        let table = AliasTable::new(keys, |k| ((k + 1) as f64).powf(-s))?;
        Ok(ZipfTable { s, table })
    }

    /// The number of keys.
    pub fn keys(&self) -> u64 {
        self.table.len()
    }

    /// The exponent.
    pub fn exponent(&self) -> f64 {
        self.s
    }

    /// The key of 64 uniform random bits `hash`, in `0..keys()`.
    #[inline(always)]
    pub fn key(&self, hash: u64) -> u64 {
        self.table.sample(hash)
    }

    /// The alias table beneath.
    pub fn alias_table(&self) -> &AliasTable {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The construction is exact: the table holds the rounded masses, and
    /// they are within one unit of the weights' share.
    #[test]
    fn tables_hold_the_exact_probabilities() {
        for (n, s) in [(1u64, 1.0), (2, 0.5), (7, 1.2), (1000, 0.8), (1000, 1.5)] {
            let z = ZipfTable::new(n, s).unwrap();
            let h: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            let unit = 1.0 / (n as f64 * COLUMN as f64);
            for (k, p) in z.alias_table().probabilities().into_iter().enumerate() {
                let want = ((k + 1) as f64).powf(-s) / h;
                // Key 0 took the rounding residue (up to n / 2 units).
                let units = if k == 0 { n as f64 / 2.0 + 1.0 } else { 0.5 };
                assert!(
                    (p - want).abs() <= units * unit + want * 1e-12,
                    "{n} {s} {k}"
                );
            }
        }
    }

    /// Draws over a grid of hashes give each outcome its share (a uniform
    /// and a skewed table; every hash maps into range).
    #[test]
    fn draws_over_all_hashes_match_the_table() {
        let t = AliasTable::new(5, |k| [5.0, 4.0, 3.0, 2.0, 1.0][k as usize]).unwrap();
        let grid = 1u64 << 20;
        let mut got = [0u64; 5];
        for i in 0..grid {
            got[t.sample(i.wrapping_mul(u64::MAX / grid).wrapping_add(i)) as usize] += 1;
        }
        for (k, &g) in got.iter().enumerate() {
            let want = (5 - k) as f64 / 15.0 * grid as f64;
            assert!((g as f64 - want).abs() < 8.0, "outcome {k}: {g} vs {want}");
        }
        assert!(t.sample(u64::MAX) < 5);
        let one = AliasTable::new(1, |_| 1.0).unwrap();
        assert_eq!((one.sample(0), one.sample(u64::MAX)), (0, 0));
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(ZipfTable::new(0, 1.0).is_err());
        assert!(ZipfTable::new(MAX_KEYS + 1, 1.0).is_err());
        assert!(ZipfTable::new(10, 0.0).is_err());
        assert!(ZipfTable::new(10, f64::NAN).is_err());
        assert!(AliasTable::new(3, |_| 0.0).is_err());
        assert!(AliasTable::new(3, |k| if k == 1 { -1.0 } else { 1.0 }).is_err());
    }
}
