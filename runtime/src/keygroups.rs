//! Key groups: the unit in which keyed state is owned, written to a
//! checkpoint and moved (DESIGN.md, "State that survives").
//!
//! A key's owner is found in two steps. Its hash ([`crate::key_hash`])
//! picks one of `K` key groups, `K` fixed for the life of a job
//! (`--max-parallelism`, default [`DEFAULT_KEY_GROUPS`]); the group picks
//! the worker. Groups go to workers in contiguous, even ranges, as in
//! Flink's `KeyGroupRangeAssignment`: worker `w` of `W` owns groups
//! `ceil(w·K/W) .. ceil((w+1)·K/W)`, so every worker owns `floor(K/W)` or
//! `ceil(K/W)` groups. Because the groups of a key never change, state
//! stored per group can be read back by a job with another number of
//! workers (rescale), and a group can move as a unit.
//!
//! Both steps are multiplications (no division, no table), exact for every
//! hash: `group = floor(hash·K / 2^64)` (Lemire's "fast range" on the
//! 64-bit hash, which uses its high bits) and `owner = floor(group·W / K)`
//! by a precomputed reciprocal of `K` (Lemire, Kaser and Kurz, "Faster
//! Remainder by Direct Computation", 2019: exact for 32-bit numerators,
//! and `group·W < 2^32` here).

use std::ops::Range;

/// Key groups of a job when not set: 32 768 (2^15, Flink's upper bound for
/// max parallelism). At the design's largest shape, 64 ranks × 28 workers
/// (1 792 workers), every worker owns 18 or 19 groups (at most 5.6% more
/// keys than the mean); at 8 × 28, 146 or 147 (0.7%).
pub const DEFAULT_KEY_GROUPS: u32 = 1 << 15;

/// The largest number of key groups (and of workers): 65 536, so that
/// `group · workers` fits 32 bits.
pub const MAX_KEY_GROUPS: u32 = 1 << 16;

/// The map from a key's hash to its key group and from a group to the
/// worker that owns it, for `K` groups over `W` workers (`1 <= W <= K <=`
/// [`MAX_KEY_GROUPS`]).
///
/// ```
/// use air_runtime::keygroups::KeyGroups;
/// let kg = KeyGroups::new(128, 3).unwrap();
/// assert_eq!(kg.groups_of(0), 0..43);
/// assert_eq!(kg.groups_of(1), 43..86);
/// assert_eq!(kg.groups_of(2), 86..128);
/// let h = air_runtime::key_hash(&42u64);
/// assert!(kg.groups_of(kg.owner(h)).contains(&kg.group(h)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyGroups {
    groups: u32,
    workers: u32,
    /// `ceil(2^64 / groups)`: `floor(n / groups) = (n · recip) >> 64` for
    /// every `n < 2^32` (0 when `groups` is 1, where every `n` here is 0).
    recip: u128,
}

/// Why a number of key groups cannot serve a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyGroupsError {
    /// `K` is 0 or above [`MAX_KEY_GROUPS`].
    #[error("{groups} key groups: expected 1..={MAX_KEY_GROUPS}")]
    OutOfRange {
        /// The number asked for.
        groups: u64,
    },
    /// Fewer groups than workers: some worker would own no key.
    #[error(
        "too few key groups ({groups}) for {workers} workers: every worker needs at least one \
         (raise --max-parallelism to at least {workers})"
    )]
    FewerThanWorkers {
        /// The number of groups.
        groups: u32,
        /// The job's workers (all ranks).
        workers: usize,
    },
}

impl KeyGroups {
    /// `groups` key groups spread over `workers` workers.
    ///
    /// # Errors
    /// `groups` outside `1..=`[`MAX_KEY_GROUPS`], or below `workers`.
    pub fn new(groups: u32, workers: usize) -> Result<KeyGroups, KeyGroupsError> {
        if groups == 0 || groups > MAX_KEY_GROUPS {
            return Err(KeyGroupsError::OutOfRange {
                groups: groups as u64,
            });
        }
        if workers == 0 || workers > groups as usize {
            return Err(KeyGroupsError::FewerThanWorkers { groups, workers });
        }
        let recip = if groups == 1 {
            0
        } else {
            u128::from(u64::MAX) / groups as u128 + 1
        };
        Ok(KeyGroups {
            groups,
            workers: workers as u32,
            recip,
        })
    }

    /// Number of key groups (`K`).
    pub fn groups(&self) -> u32 {
        self.groups
    }

    /// Number of workers the groups are spread over (`W`).
    pub fn workers(&self) -> usize {
        self.workers as usize
    }

    /// The key group of a key whose [`crate::key_hash`] is `hash`:
    /// `floor(hash · K / 2^64)`, in `0..K`.
    #[inline(always)]
    pub fn group(&self, hash: u64) -> u32 {
        ((hash as u128 * self.groups as u128) >> 64) as u32
    }

    /// The worker that owns group `group` (`< K`): `floor(group · W / K)`.
    #[inline(always)]
    pub fn owner_of_group(&self, group: u32) -> usize {
        let n = group as u64 * self.workers as u64;
        if self.groups == 1 {
            return 0;
        }
        ((n as u128 * self.recip) >> 64) as usize
    }

    /// The worker that owns the key whose hash is `hash`.
    #[inline(always)]
    pub fn owner(&self, hash: u64) -> usize {
        self.owner_of_group(self.group(hash))
    }

    /// The groups worker `worker` owns: `ceil(w·K/W) .. ceil((w+1)·K/W)`
    /// (empty past the last worker).
    pub fn groups_of(&self, worker: usize) -> Range<u32> {
        let first = |w: u64| -> u32 {
            let (k, n) = (self.groups as u64, self.workers as u64);
            (w.min(n) * k).div_ceil(n) as u32
        };
        first(worker as u64)..first(worker as u64 + 1)
    }
}

/// Which worker owns each key group: the even ranges of [`KeyGroups`]
/// until the job moves groups (docs/design.md, "Hot keys: moving key
/// groups"), then a table of `K` owners. Cheap to clone (the table is
/// shared); every worker holds the same assignment for an edge between
/// the same two barriers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    groups: KeyGroups,
    /// Per key group: its owner (`None`: the even ranges).
    table: Option<std::sync::Arc<[u16]>>,
}

impl From<KeyGroups> for Assignment {
    fn from(groups: KeyGroups) -> Self {
        Assignment::ranges(groups)
    }
}

impl Assignment {
    /// The even ranges of `groups` ([`KeyGroups::groups_of`]).
    pub fn ranges(groups: KeyGroups) -> Self {
        Assignment {
            groups,
            table: None,
        }
    }

    /// `owners[g]` owns group `g`.
    ///
    /// # Panics
    /// `owners` is not `K` long, or names a worker `>= W`.
    pub fn table(groups: KeyGroups, owners: Vec<u16>) -> Self {
        assert_eq!(
            owners.len(),
            groups.groups() as usize,
            "one owner per key group"
        );
        assert!(
            owners.iter().all(|&w| (w as usize) < groups.workers()),
            "owners are workers of the job"
        );
        Assignment {
            groups,
            table: Some(owners.into()),
        }
    }

    /// Every group `n` workers after its owner in the even ranges
    /// (`(owner + n) mod W`): each worker's groups all move to the next
    /// one at every step. What `AIR_MOVE_KEY_GROUPS=rotate` moves to at
    /// barrier `n`, to test that state follows its group exactly.
    pub fn rotated(groups: KeyGroups, n: u64) -> Self {
        let w = groups.workers() as u64;
        if n % w == 0 {
            return Assignment::ranges(groups);
        }
        let owners = (0..groups.groups())
            .map(|g| ((groups.owner_of_group(g) as u64 + n) % w) as u16)
            .collect();
        Assignment::table(groups, owners)
    }

    /// The key groups and workers this assignment is over.
    pub fn key_groups(&self) -> KeyGroups {
        self.groups
    }

    /// Number of key groups (`K`).
    pub fn groups(&self) -> u32 {
        self.groups.groups()
    }

    /// Number of workers (`W`).
    pub fn workers(&self) -> usize {
        self.groups.workers()
    }

    /// The key group of a key whose hash is `hash` ([`KeyGroups::group`]).
    #[inline(always)]
    pub fn group(&self, hash: u64) -> u32 {
        self.groups.group(hash)
    }

    /// The worker that owns group `group` (`< K`).
    #[inline(always)]
    pub fn owner_of_group(&self, group: u32) -> usize {
        match &self.table {
            None => self.groups.owner_of_group(group),
            Some(t) => t[group as usize] as usize,
        }
    }

    /// The worker that owns the key whose hash is `hash`.
    #[inline(always)]
    pub fn owner(&self, hash: u64) -> usize {
        self.owner_of_group(self.group(hash))
    }

    /// Whether some group worker `from` owns here is owned by `to` in
    /// `next` (state moves from `from` to `to` between the two).
    pub fn gives(&self, next: &Assignment, from: usize, to: usize) -> bool {
        (0..self.groups()).any(|g| self.owner_of_group(g) == from && next.owner_of_group(g) == to)
    }

    /// Groups whose owner differs in `next`.
    pub fn moved(&self, next: &Assignment) -> u32 {
        (0..self.groups())
            .filter(|&g| self.owner_of_group(g) != next.owner_of_group(g))
            .count() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The fast owner equals the exact formula, the owner's range holds
        /// the group, and `group` is `floor(hash·K/2^64)`.
        #[test]
        fn owner_is_exact(groups in 1u32..=MAX_KEY_GROUPS, w in 1u32..=MAX_KEY_GROUPS, hash in any::<u64>()) {
            let workers = (w % groups).max(1) as usize;
            let kg = KeyGroups::new(groups, workers).unwrap();
            let g = kg.group(hash);
            prop_assert!(g < groups);
            prop_assert_eq!(g as u128, (hash as u128 * groups as u128) >> 64);
            let o = kg.owner_of_group(g);
            prop_assert_eq!(o as u64, g as u64 * workers as u64 / groups as u64);
            prop_assert!(kg.groups_of(o).contains(&g));
        }
    }

    /// Every group has one owner, ranges tile `0..K`, sizes differ by at
    /// most one; the edge groups and hashes land where they should.
    #[test]
    fn ranges_tile_the_groups_evenly() {
        for (groups, workers) in [
            (1, 1),
            (2, 1),
            (7, 3),
            (128, 3),
            (32_768, 1_792),
            (65_536, 65_536),
            (65_536, 65_535),
            (32_768, 224),
            (100, 100),
        ] {
            let kg = KeyGroups::new(groups, workers).unwrap();
            let mut next = 0;
            let (mut lo, mut hi) = (u32::MAX, 0);
            for w in 0..workers {
                let r = kg.groups_of(w);
                assert_eq!(r.start, next, "{groups}/{workers} worker {w}");
                next = r.end;
                lo = lo.min(r.len() as u32);
                hi = hi.max(r.len() as u32);
                for g in [r.start, r.end - 1] {
                    assert_eq!(kg.owner_of_group(g), w, "{groups}/{workers} group {g}");
                }
            }
            assert_eq!(next, groups);
            assert!(hi - lo <= 1, "{groups}/{workers}: {lo}..{hi}");
            assert_eq!(kg.group(0), 0);
            assert_eq!(kg.group(u64::MAX), groups - 1);
            assert_eq!(kg.owner(u64::MAX), workers - 1);
        }
    }

    /// A table and the even ranges agree where they should; rotation
    /// moves every group to the next worker and comes back after `W`.
    #[test]
    fn rotated_tables_move_every_group_and_come_back() {
        let kg = KeyGroups::new(128, 3).unwrap();
        let a0 = Assignment::ranges(kg);
        let a1 = Assignment::rotated(kg, 1);
        for g in 0..128 {
            assert_eq!(a1.owner_of_group(g), (kg.owner_of_group(g) + 1) % 3);
        }
        assert_eq!(a0.moved(&a1), 128);
        assert!(a0.gives(&a1, 0, 1) && !a0.gives(&a1, 0, 2) && a0.gives(&a1, 2, 0));
        assert_eq!(Assignment::rotated(kg, 3), a0);
        let h = crate::key_hash(&7u64);
        assert_eq!(a1.owner(h), (kg.owner(h) + 1) % 3);
        let t = Assignment::table(kg, (0..128).map(|g| kg.owner_of_group(g) as u16).collect());
        assert_eq!(t.moved(&a0), 0);
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(matches!(
            KeyGroups::new(0, 1),
            Err(KeyGroupsError::OutOfRange { .. })
        ));
        assert!(matches!(
            KeyGroups::new(MAX_KEY_GROUPS + 1, 1),
            Err(KeyGroupsError::OutOfRange { .. })
        ));
        let e = KeyGroups::new(4, 5).unwrap_err();
        assert!(
            e.to_string().contains("--max-parallelism to at least 5"),
            "{e}"
        );
    }
}
