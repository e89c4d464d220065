//! A generator's stream in shards, and a worker that reads several: what
//! makes a generator source resume at another worker count.
//!
//! The built-in generators split the job's one stream by global event
//! index: shard `s` of `n` generates events `s, s + n, s + 2n, …`, and a
//! job of `W` workers runs shard `w` of `W` at worker `w`. A checkpoint
//! saves each shard's position (events generated). Resumed at `W'`
//! workers, the shards stay what they were: they are listed (old worker
//! by old worker), and the `i`-th goes to new worker `i mod W'`, which
//! generates the rest of each of its shards. Together the new workers
//! generate every event the old ones had not, once. A worker with several
//! shards merges them by event time (each shard is in event-time order), so
//! its stream is in order too: no record is later than in a run that never
//! rescaled (a watermark delay of 0 stays exact).

use air_runtime::dataflow::state::{read_u64, Rescale};
use air_runtime::dataflow::SourcePoll;

/// A generator whose stream is split by global event index
/// (module docs).
pub trait Sharded: Sized {
    /// What it generates.
    type Event;
    /// Which shard of how many it is: `(shard, shards)`.
    fn shard(&self) -> (usize, usize);
    /// The same stream's shard `shard` of `shards`, at its start.
    ///
    /// # Errors
    /// `shard >= shards` or `shards == 0`.
    fn sibling(&self, shard: usize, shards: usize) -> Result<Self, String>;
    /// Events generated so far.
    fn generated(&self) -> u64;
    /// Goes on as if it had generated `n` events.
    ///
    /// # Errors
    /// It generated events already, or `n` is past its budget.
    fn skip_to(&mut self, n: u64) -> Result<(), String>;
    /// The event time of an event it generated, ms.
    fn time_of(event: &Self::Event) -> u64;
    /// Writes its next events to the front of `out`; returns how many (0:
    /// its budget is spent).
    fn fill(&mut self, out: &mut [Self::Event]) -> usize;
}

/// A generator's position as saved: `[count, (shard, shards, generated)…]`,
/// little-endian `u64`s (one entry for a worker's own shard, several after
/// a rescale).
pub fn save_positions<G: Sharded>(gens: &[G]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 24 * gens.len());
    out.extend_from_slice(&(gens.len() as u64).to_le_bytes());
    for g in gens {
        let (s, n) = g.shard();
        for v in [s as u64, n as u64, g.generated()] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// What [`save_positions`] wrote: `(shard, shards, generated)` entries.
///
/// # Errors
/// Bytes it did not write.
pub fn read_positions(state: &[u8]) -> Result<Vec<(usize, usize, u64)>, String> {
    let n = read_u64(state, 0)? as usize;
    if state.len() != 8 + 24 * n {
        return Err(format!(
            "a generator position of {} bytes, not {} for {n} shards",
            state.len(),
            8 + 24 * n
        ));
    }
    (0..n)
        .map(|i| {
            let at = 8 + 24 * i;
            Ok((
                read_u64(state, at)? as usize,
                read_u64(state, at + 8)? as usize,
                read_u64(state, at + 16)?,
            ))
        })
        .collect()
}

/// Moves generator `g` (this worker's own shard, fresh) to the position
/// `state` saved: its own shard's (`None`: `g` goes on), or the shards of a
/// worker of a rescaled run (`Some`: they replace `g`).
///
/// # Errors
/// A position that cannot be read or reached.
pub fn resume<G: Sharded>(g: &mut G, state: &[u8]) -> Result<Option<Shards<G>>, String>
where
    G::Event: Clone + Default,
{
    let at = read_positions(state)?;
    if let [(shard, shards, n)] = at[..] {
        if (shard, shards) == g.shard() {
            g.skip_to(n)?;
            return Ok(None);
        }
    }
    Ok(Some(Shards::of(build(g, &at)?)))
}

/// Generators of `positions`, made from `proto` (any shard of the same
/// stream) and moved to their positions.
fn build<G: Sharded>(proto: &G, positions: &[(usize, usize, u64)]) -> Result<Vec<G>, String> {
    positions
        .iter()
        .map(|&(s, n, at)| {
            let mut g = proto.sibling(s, n)?;
            g.skip_to(at)?;
            Ok(g)
        })
        .collect()
}

/// The shards one worker generates, merged by event time: each shard
/// generates a run of events ahead into its own buffer, and the merge takes
/// the oldest head of all buffers, event by event.
#[derive(Debug, Clone)]
pub struct Shards<G: Sharded> {
    gens: Vec<G>,
    /// Events generated ahead, per shard, and how many of them are out.
    ahead: Vec<(Vec<G::Event>, usize)>,
}

/// Events a shard generates ahead of the merge.
const AHEAD: usize = 256;

impl<G: Sharded> Shards<G>
where
    G::Event: Clone + Default,
{
    fn of(gens: Vec<G>) -> Shards<G> {
        let ahead = gens.iter().map(|_| (Vec::new(), 0)).collect();
        Shards { gens, ahead }
    }

    /// This worker's share of every old worker's shards (`states`, by old
    /// worker) on a resume at another worker count (module docs).
    ///
    /// # Errors
    /// A position that cannot be read or reached.
    pub fn rescaled(proto: &G, states: &[&[u8]], to: Rescale) -> Result<Shards<G>, String> {
        let mut all = Vec::new();
        for s in states {
            all.extend(read_positions(s)?);
        }
        let mine: Vec<_> = all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % to.workers == to.worker)
            .map(|(_, p)| p)
            .collect();
        Ok(Shards::of(build(proto, &mine)?))
    }

    /// Its position (see [`save_positions`]): per shard, the events
    /// generated less those generated ahead and not yet out.
    pub fn save(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 24 * self.gens.len());
        out.extend_from_slice(&(self.gens.len() as u64).to_le_bytes());
        for (g, (buf, at)) in self.gens.iter().zip(&self.ahead) {
            let (s, n) = g.shard();
            let done = g.generated() - (buf.len() - at) as u64;
            for v in [s as u64, n as u64, done] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    /// A source's poll of these shards: up to `max` events into `buf`
    /// (`Done` once every shard is spent). Out of line and cold: only a
    /// worker resumed at another worker count polls shards, and its
    /// generator's own poll must compile as before.
    #[cold]
    #[inline(never)]
    pub fn poll(&mut self, buf: &mut Vec<G::Event>, max: usize) -> SourcePoll {
        buf.resize(max, G::Event::default());
        let n = self.fill(buf);
        buf.truncate(n);
        if n == 0 {
            SourcePoll::Done
        } else {
            SourcePoll::Ready
        }
    }

    /// Fills the front of `out` with the next events of its shards in
    /// event-time order; returns how many (0: every shard is spent).
    pub fn fill(&mut self, out: &mut [G::Event]) -> usize {
        let mut n = 0;
        while n < out.len() {
            // Refill the buffers that ran dry; a shard that yields nothing
            // is spent.
            let mut i = 0;
            while i < self.gens.len() {
                let (buf, at) = &mut self.ahead[i];
                if *at == buf.len() {
                    buf.resize(AHEAD, G::Event::default());
                    let got = self.gens[i].fill(buf);
                    buf.truncate(got);
                    *at = 0;
                    if got == 0 {
                        self.gens.remove(i);
                        self.ahead.remove(i);
                        continue;
                    }
                }
                i += 1;
            }
            if self.gens.is_empty() {
                break;
            }
            // The oldest head (the first shard listed on a tie).
            let (mut best, mut t) = (0, u64::MAX);
            for (k, (buf, at)) in self.ahead.iter().enumerate() {
                let tk = G::time_of(&buf[*at]);
                if tk < t {
                    (best, t) = (k, tk);
                }
            }
            // Out go its events up to the next shard's head time (every
            // other head is at or after `limit`).
            let limit = self
                .ahead
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != best)
                .map(|(_, (buf, at))| G::time_of(&buf[*at]))
                .min()
                .unwrap_or(u64::MAX);
            let (buf, at) = &mut self.ahead[best];
            while n < out.len() && *at < buf.len() && G::time_of(&buf[*at]) <= limit {
                out[n] = buf[*at].clone();
                n += 1;
                *at += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events `i` (global index) of a stream of `total`, at time `i / 3`.
    #[derive(Debug, Clone)]
    struct Toy {
        shard: (usize, usize),
        next: u64,
        total: u64,
        generated: u64,
    }

    impl Sharded for Toy {
        type Event = u64;
        fn shard(&self) -> (usize, usize) {
            self.shard
        }
        fn sibling(&self, shard: usize, shards: usize) -> Result<Self, String> {
            Ok(Toy {
                shard: (shard, shards),
                next: shard as u64,
                total: self.total,
                generated: 0,
            })
        }
        fn generated(&self) -> u64 {
            self.generated
        }
        fn skip_to(&mut self, n: u64) -> Result<(), String> {
            self.next += n * self.shard.1 as u64;
            self.generated = n;
            Ok(())
        }
        fn time_of(e: &u64) -> u64 {
            e / 3
        }
        fn fill(&mut self, out: &mut [u64]) -> usize {
            let mut k = 0;
            while k < out.len() && self.next < self.total {
                out[k] = self.next;
                self.next += self.shard.1 as u64;
                k += 1;
            }
            self.generated += k as u64;
            k
        }
    }

    fn toy(shard: usize, shards: usize) -> Toy {
        Toy {
            shard: (0, 1),
            next: 0,
            total: 10_000,
            generated: 0,
        }
        .sibling(shard, shards)
        .unwrap()
    }

    /// Three old workers at different positions, resumed at 2 and then
    /// (saved mid-way) at 1: every event after the positions comes out
    /// once, each worker's in event-time order.
    #[test]
    fn rescaled_shards_generate_the_rest_once_in_time_order() {
        let at = [700u64, 90, 1_500];
        let states: Vec<Vec<u8>> = (0..3)
            .map(|w| {
                let mut g = toy(w, 3);
                g.skip_to(at[w]).unwrap();
                save_positions(&[g])
            })
            .collect();
        let refs: Vec<&[u8]> = states.iter().map(|s| s.as_slice()).collect();
        let mut seen = Vec::new();
        let mut saved = Vec::new();
        for worker in 0..2 {
            let to = Rescale {
                worker,
                workers: 2,
                from: 3,
                groups: air_runtime::keygroups::KeyGroups::new(16, 2)
                    .unwrap()
                    .into(),
            };
            let mut s = Shards::rescaled(&toy(0, 1), &refs, to).unwrap();
            let mut buf = vec![0u64; 100];
            let n = s.fill(&mut buf);
            assert_eq!(n, 100);
            assert!(buf.windows(2).all(|p| p[0] / 3 <= p[1] / 3), "{buf:?}");
            seen.extend_from_slice(&buf);
            saved.push(s.save());
        }
        // Resumed again at 1 worker from the two saved mid-way.
        let refs: Vec<&[u8]> = saved.iter().map(|s| s.as_slice()).collect();
        let to = Rescale {
            worker: 0,
            workers: 1,
            from: 2,
            groups: air_runtime::keygroups::KeyGroups::new(16, 1)
                .unwrap()
                .into(),
        };
        let mut s = Shards::rescaled(&toy(0, 1), &refs, to).unwrap();
        let mut buf = vec![0u64; 333];
        let mut last = 0;
        loop {
            let n = s.fill(&mut buf);
            if n == 0 {
                break;
            }
            assert!(buf[..n].iter().all(|&e| {
                let ok = e / 3 >= last;
                last = e / 3;
                ok
            }));
            seen.extend_from_slice(&buf[..n]);
        }
        seen.sort_unstable();
        let want: Vec<u64> = (0..10_000u64)
            .filter(|&i| i / 3 >= at[(i % 3) as usize])
            .collect();
        assert_eq!(seen, want);
    }
}
