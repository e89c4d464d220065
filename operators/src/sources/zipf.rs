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
//! plus O(keys) integer work, spread over the process's CPUs, in place
//! (no scratch beyond the table but a list of the heavy keys);
//! [`MAX_KEYS`] bounds it.

use std::fmt;

/// The most keys a Zipf table may have: 2^26 (67 M keys, a 512 MiB table
/// built in 2.4 s on a busy 2-CPU machine; 10^7 keys in 0.34 s).
pub const MAX_KEYS: u64 = 1 << 26;

/// Units of mass a column holds: the coin's resolution.
const COLUMN: u64 = 1 << 32;

/// Outcomes per chunk of the table's parallel passes (a fixed size: the
/// floating-point sums, so the table, do not depend on the thread count).
pub const CHUNK: usize = 1 << 16;

/// `f(start, chunk)` on each [`CHUNK`]-sized chunk of `data` (`start` its
/// first index), spread over the process's CPUs; the results in chunk
/// order.
fn for_chunks<R: Send>(data: &mut [u64], f: impl Fn(usize, &mut [u64]) -> R + Sync) -> Vec<R> {
    let chunks: Vec<(usize, &mut [u64])> = data
        .chunks_mut(CHUNK)
        .enumerate()
        .map(|(i, c)| (i * CHUNK, c))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(chunks.len());
    if threads <= 1 {
        return chunks.into_iter().map(|(s, c)| f(s, c)).collect();
    }
    let per = chunks.len().div_ceil(threads);
    let mut groups: Vec<Vec<(usize, &mut [u64])>> = Vec::new();
    let mut it = chunks.into_iter().peekable();
    while it.peek().is_some() {
        groups.push(it.by_ref().take(per).collect());
    }
    let f = &f;
    std::thread::scope(|sc| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|g| sc.spawn(move || g.into_iter().map(|(s, c)| f(s, c)).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a table-building thread panicked"))
            .collect()
    })
}

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
    /// positive). The weights are computed and scaled on all the process's
    /// CPUs, in fixed chunks of [`CHUNK`] outcomes summed in a fixed order:
    /// the table does not depend on the thread count.
    ///
    /// # Errors
    /// `n` is 0 or above [`MAX_KEYS`], or a weight is not finite and
    /// non-negative, or all are zero.
    pub fn new(n: u64, weight: impl Fn(u64) -> f64 + Sync) -> Result<AliasTable, String> {
        if n == 0 || n > MAX_KEYS {
            return Err(format!("{n} outcomes: an alias table holds 1..={MAX_KEYS}"));
        }
        // One slot a key: first its weight (f64 bits), then its mass in
        // units, then its column (Vose's construction works in place).
        let mut slots = vec![0u64; n as usize];
        let sums = for_chunks(&mut slots, |start, chunk| {
            let mut ok = true;
            for (k, slot) in (start as u64..).zip(chunk.iter_mut()) {
                let w = weight(k);
                ok &= w.is_finite() && w >= 0.0;
                *slot = w.to_bits();
            }
            // Summed from the smallest (the tail) for accuracy.
            let sum: f64 = chunk.iter().rev().map(|&b| f64::from_bits(b)).sum();
            (ok, sum.to_bits())
        });
        if sums.iter().any(|&(ok, _)| !ok) {
            return Err("weights must be finite and non-negative".into());
        }
        let total: f64 = sums.iter().rev().map(|&(_, b)| f64::from_bits(b)).sum();
        if total <= 0.0 || !total.is_finite() {
            return Err("the weights must have a positive finite sum".into());
        }
        // Masses in units, `n · 2^32` in all exactly: each weight's share
        // rounded, the residue (at most n / 2 units either way) given to
        // the heaviest outcome, which has at least 2^32 > n / 2 units.
        let units = n * COLUMN;
        let scale = units as f64 / total;
        let tops = for_chunks(&mut slots, |start, chunk| {
            let (mut sum, mut top, mut top_mass) = (0u64, start, 0u64);
            for (k, slot) in (start..).zip(chunk.iter_mut()) {
                // Rounded half up (the weight is non-negative): `round`
                // is a libm call on baseline x86-64.
                *slot = (f64::from_bits(*slot) * scale + 0.5) as u64;
                sum += *slot;
                if *slot > top_mass {
                    (top, top_mass) = (k, *slot);
                }
            }
            (sum, top)
        });
        let top = tops
            .iter()
            .map(|&(_, t)| t)
            .max_by_key(|&t| (slots[t], std::cmp::Reverse(t)))
            .unwrap_or(0);
        let others = tops.iter().map(|&(s, _)| s).sum::<u64>() - slots[top];
        slots[top] = units - others;
        Ok(AliasTable::from_units(slots))
    }

    /// Vose's construction, in place, on masses in units (`Σ mass = n ·
    /// 2^32`): the light outcomes (below a column) in index order each take
    /// the current donor, the heavy outcomes in index order, as alias; a
    /// donor left with less than a column is itself filled by the next
    /// heavy one. A slot holds its outcome's mass until its column is
    /// final, then the column.
    fn from_units(mut slots: Vec<u64>) -> AliasTable {
        let heavy: Vec<u32> = (0..slots.len() as u32)
            .filter(|&k| slots[k as usize] >= COLUMN)
            .collect();
        // The heaviest has at least a column: `heavy` is not empty.
        let (mut d, mut next_heavy) = (0usize, heavy.iter().copied().peekable());
        for l in 0..slots.len() {
            if next_heavy.peek() == Some(&(l as u32)) {
                next_heavy.next();
                continue;
            }
            let (mut small, mut m) = (l, slots[l]);
            // Column `small`: itself for m units, the donor for the rest.
            loop {
                let g = heavy[d] as usize;
                slots[small] = m << 32 | g as u64;
                slots[g] -= COLUMN - m;
                if slots[g] >= COLUMN {
                    break;
                }
                // The donor fell below a column: the next heavy one fills
                // it (there is one, as the sums are exact).
                (small, m) = (g, slots[g]);
                d += 1;
            }
        }
        // The heavy outcomes left hold exactly one column each: full
        // columns, their own alias.
        for &g in &heavy[d..] {
            debug_assert_eq!(slots[g as usize], COLUMN);
            slots[g as usize] = g as u64;
        }
        AliasTable { cols: slots }
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

/// Hot keys that move with event time: every `every_ms` ms of event time
/// (epochs aligned to multiples of `every_ms`, like tumbling windows) the
/// Zipf ranks are rotated over the keys, so other keys are hot. Rank `r`
/// at event time `t` is key `(r + offset(t)) mod keys`, `offset(t) = ⌊t /
/// every_ms⌋ · stride mod keys`, `stride = ⌊keys · 0.618…⌋` (the golden
/// ratio's fraction, at least 1 for 2 keys or more): each epoch's hottest
/// keys land far from the last epoch's, and the rotation is a bijection,
/// so each epoch is exactly the Zipf law over the keys relabelled. A
/// function of the event time alone: a stream stays the same for any
/// worker count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZipfShift {
    every_ms: u64,
    stride: u64,
    keys: u64,
}

impl ZipfShift {
    /// Ranks of `keys` keys rotated every `every_ms` ms of event time.
    ///
    /// # Errors
    /// `every_ms` or `keys` is 0.
    pub fn new(keys: u64, every_ms: u64) -> Result<ZipfShift, String> {
        if every_ms == 0 {
            return Err("the hot keys' period must be at least 1 ms".into());
        }
        if keys == 0 {
            return Err("no keys to shift over".into());
        }
        let stride = if keys < 2 {
            0
        } else {
            ((keys as f64 * 0.618_033_988_749_894_9) as u64).clamp(1, keys - 1)
        };
        Ok(ZipfShift {
            every_ms,
            stride,
            keys,
        })
    }

    /// The period, ms of event time.
    pub fn every_ms(&self) -> u64 {
        self.every_ms
    }

    /// The rotation at event time `time_ms`: `⌊time_ms / every_ms⌋ · stride
    /// mod keys`.
    pub fn offset_at(&self, time_ms: u64) -> u64 {
        ((time_ms / self.every_ms) as u128 * self.stride as u128 % self.keys as u128) as u64
    }

    /// The key of Zipf rank `rank` (`< keys`) under rotation `offset` (`<
    /// keys`, from [`ZipfShift::offset_at`]).
    #[inline(always)]
    pub fn key(&self, rank: u64, offset: u64) -> u64 {
        let k = rank + offset;
        if k >= self.keys {
            k - self.keys
        } else {
            k
        }
    }
}

/// A generator's cached [`ZipfShift`] rotation: recomputed only when an
/// event's time leaves the epoch it was computed for (one comparison per
/// event otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShiftCache {
    /// The rotation of event times `from..until`.
    offset: u64,
    from: u64,
    until: u64,
}

impl ShiftCache {
    /// The rotation of `shift` at event time `time_ms`.
    #[inline(always)]
    pub fn offset(&mut self, shift: &ZipfShift, time_ms: u64) -> u64 {
        if time_ms >= self.until || time_ms < self.from {
            let epoch = time_ms / shift.every_ms;
            self.from = epoch * shift.every_ms;
            self.until = self.from.saturating_add(shift.every_ms);
            self.offset = shift.offset_at(time_ms);
        }
        self.offset
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

    /// Unsorted weights over several chunks (built on several threads),
    /// equal weights (every column full) and one weight alone: the table
    /// holds each share to within half a unit (the heaviest: the residue).
    #[test]
    fn any_weights_over_many_chunks_are_held_exactly() {
        let n = 3 * CHUNK as u64 + 5;
        let cases: [(u64, &(dyn Fn(u64) -> f64 + Sync)); 3] = [
            (n, &|k| ((k * 7919) % 1000) as f64 + 0.5),
            (n, &|_| 2.0),
            (1000, &|k| if k == 517 { 3.0 } else { 0.0 }),
        ];
        for (n, weight) in cases {
            let t = AliasTable::new(n, weight).unwrap();
            let total: f64 = (0..n).map(weight).sum();
            let p = t.probabilities();
            let unit = 1.0 / (n as f64 * COLUMN as f64);
            // The residue's taker: the first of the heaviest.
            let top = (0..n)
                .rev()
                .max_by(|&a, &b| weight(a).total_cmp(&weight(b)))
                .unwrap() as usize;
            for (k, &p) in p.iter().enumerate() {
                let want = weight(k as u64) / total;
                let units = if k == top { n as f64 / 2.0 + 1.0 } else { 0.5 };
                assert!((p - want).abs() <= units * unit + want * 1e-12, "{n}: {k}");
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

    /// The rotation moves the hottest key by the stride each epoch, wraps,
    /// and the cache agrees with the definition at every time.
    #[test]
    fn shifts_rotate_the_ranks_each_epoch() {
        let s = ZipfShift::new(100, 10).unwrap();
        assert_eq!(s.stride, 61);
        assert_eq!(
            (0..4).map(|e| s.offset_at(e * 10)).collect::<Vec<_>>(),
            [0, 61, 22, 83]
        );
        assert_eq!(s.offset_at(19), 61);
        assert_eq!(s.key(99, 61), 60);
        let mut c = ShiftCache::default();
        for t in (0..500).chain([3, 1_000_000, 7]) {
            assert_eq!(c.offset(&s, t), s.offset_at(t), "t = {t}");
        }
        for keys in [1u64, 2, 3] {
            let s = ZipfShift::new(keys, 1).unwrap();
            let mut seen: Vec<u64> = (0..keys).map(|r| s.key(r, s.offset_at(5))).collect();
            seen.sort();
            assert_eq!(
                seen,
                (0..keys).collect::<Vec<_>>(),
                "{keys} keys: a bijection"
            );
        }
        assert!(ZipfShift::new(10, 0).is_err() && ZipfShift::new(0, 10).is_err());
    }
}
