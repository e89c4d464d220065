//! The per-worker YSB event generator (paced by [`crate::sources::pace::Pacer`]).

use std::sync::Arc;
use std::time::Instant;

use super::campaigns::Campaigns;
use super::event::{AdType, EventType, YsbEvent};
use super::rng::{below, splitmix64, uuid_v4, WyRand, WY_STEP};
use crate::sources::pace::{share, PacedFill, Pacer};
use crate::sources::zipf::{ShiftCache, ZipfShift, ZipfTable};

/// How [`YsbGenerator`] stamps `event_time_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventTimeMode {
    /// Reproducible event times: the job's `g`-th event (global index `g`,
    /// see [`YsbGenerator`]) has `event_time_ms = start_ms + g * 1000 /
    /// events_per_s` (integer division), so the job as a whole produces
    /// `events_per_s` events per second of event time, independent of the
    /// number of workers and of the wall clock. For tests and files.
    Deterministic {
        /// Event time of the job's first event, in ms since the Unix epoch.
        start_ms: u64,
        /// Events per second of event time for the whole job (> 0).
        events_per_s: u64,
    },
    /// `event_time_ms` is the wall clock (ms since the Unix epoch) when the
    /// batch is generated: the clock is read once per [`YsbGenerator::fill`]
    /// call, so a batch shares one timestamp. This is YSB's behaviour (its
    /// generator stamps events with the current time as it emits them).
    WallClock,
}

/// What a job's generators share: the seed, the ads to draw from, the event
/// budget and the event-time mode. Each worker builds its own
/// [`YsbGenerator`] from it.
#[derive(Clone, Debug)]
pub struct YsbGenConfig {
    /// Seed of the job; worker `w` derives its stream from `(seed, w)`.
    pub seed: u64,
    /// The ads `ad_id` is drawn from, uniformly (the ads of [`Campaigns`])
    /// unless `zipf` is set.
    pub ads: Arc<[u128]>,
    /// Zipf-distributed campaigns instead of uniform ads
    /// ([`YsbGenConfig::with_zipf`]); `None`: every ad equally likely.
    pub zipf: Option<Arc<CampaignZipf>>,
    /// Number of events of the whole job (`--events`), or `None` for an
    /// endless stream (ended by a [`Pacer`] duration or the caller).
    pub events: Option<u64>,
    /// How event times are stamped.
    pub event_time: EventTimeMode,
}

impl YsbGenConfig {
    /// An endless, wall-clock-stamped stream over the ads of `campaigns`.
    pub fn new(seed: u64, campaigns: &Campaigns) -> YsbGenConfig {
        YsbGenConfig {
            seed,
            ads: campaigns.ads_shared(),
            zipf: None,
            events: None,
            event_time: EventTimeMode::WallClock,
        }
    }

    /// Sets the job's event budget (`None`: endless).
    pub fn with_events(mut self, events: Option<u64>) -> YsbGenConfig {
        self.events = events;
        self
    }

    /// Sets the event-time mode.
    pub fn with_event_time(mut self, mode: EventTimeMode) -> YsbGenConfig {
        self.event_time = mode;
        self
    }

    /// Draws campaigns from a Zipf law of exponent `s` over `campaigns`
    /// (the window's key is the campaign): campaign index `c` (in
    /// [`Campaigns`] order) has probability `∝ (c + 1)^-s`, the ad is
    /// uniform among the campaign's ads; with `shift_ms`, the ranks rotate
    /// over the campaigns every `shift_ms` ms of event time
    /// ([`ZipfShift`]). `s == 0` keeps uniform ads (as without), and then
    /// `shift_ms` changes nothing. `campaigns` must be those of `ads`.
    ///
    /// # Errors
    /// `s` negative or not finite, `shift_ms` of 0.
    pub fn with_zipf(
        mut self,
        campaigns: &Campaigns,
        s: f64,
        shift_ms: Option<u64>,
    ) -> Result<YsbGenConfig, String> {
        if !(s.is_finite() && s >= 0.0) {
            return Err(format!("Zipf exponent {s}: must be a number ≥ 0"));
        }
        let shift = shift_ms
            .map(|ms| ZipfShift::new(campaigns.len() as u64, ms))
            .transpose()?;
        if s == 0.0 {
            self.zipf = None;
            return Ok(self);
        }
        self.zipf = Some(Arc::new(CampaignZipf::new(campaigns, s, shift)?));
        Ok(self)
    }
}

/// Zipf-distributed campaigns ([`YsbGenConfig::with_zipf`]): one draw's 64
/// bits give the campaign's rank (an alias table, O(1)), its rotation by
/// event time maps the rank to a campaign, and a mix of the same bits
/// picks the ad among the campaign's.
pub struct CampaignZipf {
    table: ZipfTable,
    shift: Option<ZipfShift>,
    /// The ads grouped by campaign: campaign `c`'s are
    /// `ads[start[c]..start[c + 1]]`.
    ads: Vec<u128>,
    start: Vec<u32>,
}

impl std::fmt::Debug for CampaignZipf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CampaignZipf")
            .field("campaigns", &self.table.keys())
            .field("exponent", &self.table.exponent())
            .field("shift", &self.shift)
            .finish_non_exhaustive()
    }
}

impl CampaignZipf {
    /// The table of `campaigns` at exponent `s` (> 0).
    ///
    /// # Errors
    /// `s` not positive, more campaigns than a Zipf table holds.
    pub fn new(
        campaigns: &Campaigns,
        s: f64,
        shift: Option<ZipfShift>,
    ) -> Result<CampaignZipf, String> {
        let n = campaigns.len();
        let table = ZipfTable::new(n as u64, s)?;
        let mut start = vec![0u32; n + 1];
        for (_, c) in campaigns.pairs() {
            start[c as usize + 1] += 1;
        }
        for c in 0..n {
            start[c + 1] += start[c];
        }
        let mut next = start.clone();
        let mut ads = vec![0u128; campaigns.num_ads()];
        for (ad, c) in campaigns.pairs() {
            ads[next[c as usize] as usize] = ad;
            next[c as usize] += 1;
        }
        Ok(CampaignZipf {
            table,
            shift,
            ads,
            start,
        })
    }

    /// The Zipf exponent.
    pub fn exponent(&self) -> f64 {
        self.table.exponent()
    }

    /// The campaign index of 64 random bits `h` at event time `time_ms`.
    #[inline(always)]
    pub fn campaign(&self, h: u64, time_ms: u64, cache: &mut ShiftCache) -> usize {
        let rank = self.table.key(h);
        match &self.shift {
            None => rank as usize,
            Some(s) => s.key(rank, cache.offset(s, time_ms)) as usize,
        }
    }

    /// The ad of 64 random bits `h` at event time `time_ms`.
    #[inline(always)]
    fn ad(&self, h: u64, time_ms: u64, cache: &mut ShiftCache) -> u128 {
        let c = self.campaign(h, time_ms, cache);
        let (a, b) = (self.start[c], self.start[c + 1]);
        self.ads[(a as u64 + below(splitmix64(h), (b - a) as u64)) as usize]
    }
}

/// One worker's shard of the YSB event stream.
///
/// Every field is drawn per event: `user_id` and `page_id` are random
/// version-4 UUIDs, `ad_id` is uniform over the configured ads (or its
/// campaign Zipf-distributed, [`YsbGenConfig::with_zipf`]), `ad_type`
/// uniform over the 5 [`AdType`]s, `event_type` uniform over the 3
/// [`EventType`]s, `ip` a random `u32`. The random source is one wyrand
/// stream per seed, [`DRAWS_PER_EVENT`] draws per event: the event of global
/// index `g` takes draws `6g + 1 ..= 6g + 6`, whichever worker makes it
/// (wyrand's draw at any position is computed directly from it). So the
/// job's events — their fields and event times — are the same for any
/// number of workers and ranks, and equal `air gen ysb`'s (one worker) for
/// the same seed: results do not depend on the job's shape.
///
/// With `events = Some(N)` over `W` workers, worker `w` generates `N / W`
/// events, plus one if `w < N % W`: the job generates exactly `N`.
///
/// The global index of worker `w`'s `i`-th event is `g = i * W + w` (workers
/// interleave); [`EventTimeMode::Deterministic`] stamps events from `g`.
///
/// ```
/// use air_operators::sources::ysb::*;
/// let c = Campaigns::generate(10, 10, 1);
/// let cfg = YsbGenConfig::new(3, &c)
///     .with_events(Some(10))
///     .with_event_time(EventTimeMode::Deterministic { start_ms: 0, events_per_s: 1000 });
/// let mut g = YsbGenerator::new(&cfg, 1, 2); // worker 1 of 2
/// let mut buf = [YsbEvent::default(); 8];
/// assert_eq!(g.fill(&mut buf), 5);
/// // global indices 1, 3, 5, 7, 9 → 1 ms apart at 1000 events/s
/// assert_eq!(buf[..5].iter().map(|e| e.event_time_ms).collect::<Vec<_>>(), [1, 3, 5, 7, 9]);
/// assert_eq!(g.fill(&mut buf), 0);
/// ```
#[derive(Clone, Debug)]
pub struct YsbGenerator {
    rng: WyRand,
    /// What the stream's state advances by after each event, to skip the
    /// other workers' events: `DRAWS_PER_EVENT · (W − 1) · WY_STEP`.
    skip: u64,
    ads: Arc<[u128]>,
    /// Zipf campaigns ([`YsbGenConfig::zipf`]) and the rotation last used.
    zipf: Option<Arc<CampaignZipf>>,
    shift: ShiftCache,
    /// Events this worker may still generate (`None`: endless).
    remaining: Option<u64>,
    quota: Option<u64>,
    generated: u64,
    time: TimeState,
    /// Which shard of the stream it is: (worker, workers) it was made for.
    shard: (usize, usize),
    /// What it was made from (for its siblings: another shard of the same
    /// stream, [`crate::sources::shards::Sharded`]).
    config: YsbGenConfig,
}

/// Incremental state of `start_ms + g * 1000 / rate`: `g * 1000 = q * rate + r`
/// for the next event's `g`; each event adds `W * 1000 = dq * rate + dr`.
#[derive(Clone, Debug)]
enum TimeState {
    Deterministic {
        start_ms: u64,
        rate: u64,
        q: u64,
        r: u64,
        dq: u64,
        dr: u64,
    },
    WallClock,
}

impl YsbGenerator {
    /// The generator of worker `worker_index` of `workers`.
    ///
    /// # Panics
    /// If `workers == 0`, `worker_index >= workers`, the config has no ads,
    /// or a deterministic `events_per_s` is 0.
    pub fn new(config: &YsbGenConfig, worker_index: usize, workers: usize) -> YsbGenerator {
        assert!(
            workers > 0 && worker_index < workers,
            "worker {worker_index} of {workers}"
        );
        assert!(!config.ads.is_empty(), "no ads to draw from");
        let quota = config.events.map(|n| share(n, worker_index, workers));
        let time = match config.event_time {
            EventTimeMode::Deterministic {
                start_ms,
                events_per_s: rate,
            } => {
                assert!(rate > 0, "events_per_s must be > 0");
                let first = worker_index as u128 * 1000;
                let step = workers as u128 * 1000;
                TimeState::Deterministic {
                    start_ms,
                    rate,
                    q: (first / rate as u128) as u64,
                    r: (first % rate as u128) as u64,
                    dq: (step / rate as u128) as u64,
                    dr: (step % rate as u128) as u64,
                }
            }
            EventTimeMode::WallClock => TimeState::WallClock,
        };
        // The job's one stream, positioned before this worker's first
        // event (global index `worker_index`).
        let draws = |events: u64| events.wrapping_mul(DRAWS_PER_EVENT).wrapping_mul(WY_STEP);
        let mut rng = WyRand::new(splitmix64(config.seed) ^ YSB_STREAM);
        rng.advance(draws(worker_index as u64));
        YsbGenerator {
            rng,
            skip: draws(workers as u64 - 1),
            ads: Arc::clone(&config.ads),
            zipf: config.zipf.clone(),
            shift: ShiftCache::default(),
            remaining: quota,
            quota,
            generated: 0,
            time,
            shard: (worker_index, workers),
            config: config.clone(),
        }
    }

    /// Fills the front of `out` with the next events and returns how many it
    /// wrote: `out.len()`, fewer at the end of the budget, 0 once the budget
    /// is spent. Unthrottled; see [`YsbGenerator::fill_paced`] for `--rate`.
    ///
    /// Kept out of line: inlined into a consumer's per-event loop it took
    /// that loop's registers (measured: YSB at 2 workers 165 vs 171 M
    /// events/s, `peers-ysb --modes pre-aggregated`).
    #[inline(never)]
    pub fn fill(&mut self, out: &mut [YsbEvent]) -> usize {
        let n = match self.remaining {
            Some(rem) => (out.len() as u64).min(rem) as usize,
            None => out.len(),
        };
        let out = &mut out[..n];
        match &mut self.time {
            TimeState::Deterministic {
                start_ms,
                rate,
                q,
                r,
                dq,
                dr,
            } => {
                let (start_ms, rate, dq, dr) = (*start_ms, *rate, *dq, *dr);
                let (mut tq, mut tr) = (*q, *r);
                let time = || {
                    let t = start_ms.wrapping_add(tq);
                    tq += dq;
                    tr += dr;
                    if tr >= rate {
                        tr -= rate;
                        tq += 1;
                    }
                    t
                };
                match self.zipf.as_deref() {
                    None => generate(&mut self.rng, self.skip, out, time, uniform(&self.ads)),
                    Some(z) => {
                        let cache = &mut self.shift;
                        generate(&mut self.rng, self.skip, out, time, |h, t| {
                            z.ad(h, t, cache)
                        })
                    }
                }
                (*q, *r) = (tq, tr);
            }
            TimeState::WallClock => {
                let now = wall_clock_ms();
                match self.zipf.as_deref() {
                    None => generate(&mut self.rng, self.skip, out, || now, uniform(&self.ads)),
                    Some(z) => {
                        let cache = &mut self.shift;
                        generate(
                            &mut self.rng,
                            self.skip,
                            out,
                            || now,
                            |h, t| z.ad(h, t, cache),
                        )
                    }
                }
            }
        }
        self.generated += n as u64;
        if let Some(rem) = &mut self.remaining {
            *rem -= n as u64;
        }
        n
    }

    /// [`YsbGenerator::fill`] under a [`Pacer`]: writes at most as many events
    /// as the pacer allows at `now` (counting all this generator generated
    /// before), or says when to come back, or that the stream is over (event
    /// budget spent, or the pacer's limit or deadline reached).
    pub fn fill_paced(&mut self, out: &mut [YsbEvent], pacer: &Pacer, now: Instant) -> PacedFill {
        crate::sources::pace::fill_paced(self, out, pacer, now)
    }

    /// Goes on as if it had generated `n` events already (a checkpoint's
    /// position): the same events follow as in a run that generated them.
    /// O(1): the stream's state and the event-time counter jump.
    ///
    /// # Errors
    /// It generated events already, or `n` is past its budget.
    pub fn skip_to(&mut self, n: u64) -> Result<(), String> {
        if self.generated != 0 {
            return Err("the generator already generated events".into());
        }
        if let Some(q) = self.quota.filter(|&q| n > q) {
            return Err(format!("position {n} is past this worker's {q} events"));
        }
        let per_event = DRAWS_PER_EVENT
            .wrapping_mul(WY_STEP)
            .wrapping_add(self.skip);
        self.rng.advance(n.wrapping_mul(per_event));
        if let TimeState::Deterministic {
            rate, q, r, dq, dr, ..
        } = &mut self.time
        {
            let total = *r as u128 + n as u128 * *dr as u128;
            *q = (*q as u128 + n as u128 * *dq as u128 + total / *rate as u128) as u64;
            *r = (total % *rate as u128) as u64;
        }
        self.generated = n;
        if let Some(rem) = &mut self.remaining {
            *rem -= n;
        }
        Ok(())
    }

    /// Stamps the next event at `at_ms` and those after it on from there
    /// (a resumed paced run, [`crate::sources::pace::Generator::restamp_next`]):
    /// deterministic event times move their start; wall-clock ones need
    /// nothing.
    pub fn restamp_next(&mut self, at_ms: u64) {
        if let TimeState::Deterministic { start_ms, q, .. } = &mut self.time {
            // The next event is stamped start_ms + q.
            *start_ms = at_ms.saturating_sub(*q);
        }
    }

    /// Events generated so far by this worker.
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// This worker's event budget (`None`: endless).
    pub fn quota(&self) -> Option<u64> {
        self.quota
    }

    /// Events this worker may still generate (`None`: endless).
    pub fn remaining(&self) -> Option<u64> {
        self.remaining
    }
}

impl crate::sources::shards::Sharded for YsbGenerator {
    type Event = YsbEvent;
    fn shard(&self) -> (usize, usize) {
        self.shard
    }
    fn sibling(&self, shard: usize, shards: usize) -> Result<Self, String> {
        if shard >= shards {
            return Err(format!("shard {shard} of {shards}"));
        }
        Ok(YsbGenerator::new(&self.config, shard, shards))
    }
    fn generated(&self) -> u64 {
        self.generated
    }
    fn skip_to(&mut self, n: u64) -> Result<(), String> {
        YsbGenerator::skip_to(self, n)
    }
    fn time_of(event: &YsbEvent) -> u64 {
        event.event_time_ms
    }
    fn fill(&mut self, out: &mut [YsbEvent]) -> usize {
        YsbGenerator::fill(self, out)
    }
}

use crate::now_ms as wall_clock_ms;

/// Random draws per event: two for each UUID, one for the ad, one for the
/// IP and the two enums.
pub const DRAWS_PER_EVENT: u64 = 6;

/// Mixed into the seed of the YSB stream (so that another generator seeded
/// alike draws another stream).
const YSB_STREAM: u64 = 0x5953_4200_0000_0000;

/// Uniform ads: the ad of a draw `h`, whatever the time.
#[inline(always)]
fn uniform(ads: &[u128]) -> impl FnMut(u64, u64) -> u128 + '_ {
    let num_ads = ads.len() as u64;
    move |h, _| ads[below(h, num_ads) as usize]
}

/// The hot loop: [`DRAWS_PER_EVENT`] 64-bit draws per event, then `skip`
/// added to the stream's state (the other workers' events); `ad` gives the
/// ad of the ad's draw at the event's time.
#[inline(always)]
fn generate(
    rng: &mut WyRand,
    skip: u64,
    out: &mut [YsbEvent],
    mut time: impl FnMut() -> u64,
    mut ad: impl FnMut(u64, u64) -> u128,
) {
    for e in out {
        let user_id = uuid_v4(rng.next_u128());
        let page_id = uuid_v4(rng.next_u128());
        let draw = rng.next_u64();
        let r = rng.next_u64();
        let event_time_ms = time();
        let ad_id = ad(draw, event_time_ms);
        // Low 32 bits: the IP; bits 32..48 and 48..64: the two enums
        // (multiply-shift on 16 bits, bias < 2^-13, far below sampling noise).
        let ad_type = AdType::from_index((((r >> 32) & 0xFFFF) * 5) >> 16);
        let event_type = EventType::from_index(((r >> 48) * 3) >> 16);
        *e = YsbEvent {
            user_id,
            page_id,
            ad_id,
            event_time_ms,
            ip: r as u32,
            ad_type,
            event_type,
        };
        rng.advance(skip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generator moved to event `n` ([`YsbGenerator::skip_to`]) yields
    /// exactly the events a generator that generated `n` yields next
    /// (deterministic event times included), at every worker of 3.
    #[test]
    fn skip_to_continues_the_same_stream() {
        let ads: Arc<[u128]> = (1..=50u128).collect::<Vec<_>>().into();
        let config = YsbGenConfig {
            seed: 7,
            ads,
            zipf: None,
            events: Some(3_000),
            event_time: EventTimeMode::Deterministic {
                start_ms: 1_000,
                events_per_s: 333,
            },
        };
        for w in 0..3 {
            let mut whole = YsbGenerator::new(&config, w, 3);
            let mut all = vec![YsbEvent::default(); 1_000];
            assert_eq!(whole.fill(&mut all), 1_000);
            for n in [0u64, 1, 17, 999, 1_000] {
                let mut g = YsbGenerator::new(&config, w, 3);
                g.skip_to(n).unwrap();
                let mut rest = vec![YsbEvent::default(); 1_000];
                let k = g.fill(&mut rest);
                assert_eq!(k as u64, 1_000 - n, "worker {w} at {n}");
                assert_eq!(&rest[..k], &all[n as usize..], "worker {w} at {n}");
                assert_eq!(g.generated(), 1_000);
            }
            let mut g = YsbGenerator::new(&config, w, 3);
            assert!(g.skip_to(1_001).is_err());
        }
    }

    /// Zipf campaigns: the same events for any worker count, the hottest
    /// campaign's share as the law says (s = 1.2 over 100 campaigns:
    /// 1 / H(100, 1.2) = 0.2745), every ad of a campaign drawn, and with a
    /// shift the hottest campaign moves by the stride each epoch.
    #[test]
    fn zipf_campaigns_follow_the_law_for_any_worker_count() {
        let campaigns = Campaigns::generate(100, 10, 5);
        let h: f64 = (1..=100).map(|k| (k as f64).powf(-1.2)).sum();
        let p0 = 1.0 / h;
        for shift in [None, Some(1_000)] {
            let cfg = YsbGenConfig::new(3, &campaigns)
                .with_events(Some(60_000))
                .with_event_time(EventTimeMode::Deterministic {
                    start_ms: 0,
                    events_per_s: 20_000,
                })
                .with_zipf(&campaigns, 1.2, shift)
                .unwrap();
            let events = |workers: usize| {
                let mut all = Vec::new();
                for w in 0..workers {
                    let mut g = YsbGenerator::new(&cfg, w, workers);
                    let mut buf = vec![YsbEvent::default(); 777];
                    loop {
                        let n = g.fill(&mut buf);
                        if n == 0 {
                            break;
                        }
                        all.extend_from_slice(&buf[..n]);
                    }
                }
                all.sort_by_key(|e| (e.event_time_ms, e.user_id));
                all
            };
            let one = events(1);
            assert_eq!(events(3), one, "shift {shift:?}");
            // Per second of event time (one epoch when shifting): counts
            // per campaign.
            let mut per = vec![[0u64; 100]; 3];
            let mut ads = std::collections::HashSet::new();
            for e in &one {
                per[(e.event_time_ms / 1000) as usize]
                    [campaigns.campaign_of(e.ad_id).unwrap() as usize] += 1;
                ads.insert(e.ad_id);
            }
            assert_eq!(ads.len(), 1000, "every ad drawn");
            let stride = ZipfShift::new(100, 1_000).unwrap().offset_at(1_000) as usize;
            for (sec, counts) in per.iter().enumerate() {
                let hot = match shift {
                    None => 0,
                    Some(_) => sec * stride % 100,
                };
                let share = counts[hot] as f64 / 20_000.0;
                let sigma = (p0 * (1.0 - p0) / 20_000.0).sqrt();
                assert!(
                    (share - p0).abs() < 5.0 * sigma,
                    "{shift:?} s{sec}: {share} vs {p0}"
                );
                assert_eq!(counts.iter().max(), Some(&counts[hot]));
            }
        }
        let uniform = YsbGenConfig::new(3, &campaigns).with_zipf(&campaigns, 0.0, None);
        assert!(uniform.unwrap().zipf.is_none());
        assert!(YsbGenConfig::new(3, &campaigns)
            .with_zipf(&campaigns, -1.0, None)
            .is_err());
    }
}
