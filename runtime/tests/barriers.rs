//! Checkpoint barriers in-band (docs/design.md, "Checkpoints"), on real
//! threads and rings: every sink sees barriers, and they cut the stream
//! consistently. A record that a source pushed after its barrier `n`
//! reaches every sink after barrier `n`, and one pushed before it, before
//! it, through two exchanges, a union of two sources and a two-input
//! operator, with tiny rings that keep senders blocked while receivers
//! hold aligned inputs. Each record arrives exactly once, and a job with
//! barriers gives the same records as one without. Every source places
//! every barrier id in turn, however late its ticks (a source that
//! skipped ids would make other workers' checkpoints of them incomplete).

use air_runtime::data::ExchangeData;
use air_runtime::dataflow::{
    run_graph, Cx, Dataflow, Operator, Operator2, Outbox, Source, SourcePoll, Stats, Tail,
};
use air_runtime::JobConfig;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A record: (stream, source worker, sequence number at that source).
type Rec = (u64, u64, u64);

/// Worker `me` of stream `stream` yields `(stream, me, i)` for `i < n`, 64
/// a poll.
struct Seq {
    stream: u64,
    me: u64,
    n: u64,
    next: u64,
}

impl Source for Seq {
    type Item = Rec;
    fn poll(&mut self, buf: &mut Vec<Rec>, _max: usize) -> SourcePoll {
        buf.clear();
        let end = (self.next + 64).min(self.n);
        buf.extend((self.next..end).map(|i| (self.stream, self.me, i)));
        self.next = end;
        if end < self.n {
            SourcePoll::Ready
        } else {
            SourcePoll::Done
        }
    }
}

/// Where each source put its barriers: per (stream, worker), the
/// (barrier id, records pushed before it) it passed, in order.
type Cuts = BTreeMap<(u64, u64), Vec<(u64, u64)>>;

/// A source's end at an exchange: routes by sequence number and notes
/// where its barriers fell.
struct Tap {
    out: Outbox<Rec>,
    workers: u64,
    pushed: BTreeMap<u64, u64>,
    cuts: Rc<RefCell<Cuts>>,
    me: u64,
    /// The streams whose records pass here.
    streams: &'static [u64],
}

impl Tail<Rec> for Tap {
    fn push(&mut self, r: Rec, cx: &mut Cx<'_, '_>) {
        *self.pushed.entry(r.0).or_insert(0) += 1;
        self.out
            .push((r.2.wrapping_mul(7) % self.workers) as usize, r, cx)
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.out.watermark(wm, cx)
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.out.flush(cx)
    }
    fn end(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.out.end(wm, cx)
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        let mut c = self.cuts.borrow_mut();
        // After a union: one barrier for both streams.
        for &s in self.streams {
            let n = self.pushed.get(&s).copied().unwrap_or(0);
            c.entry((s, self.me)).or_default().push((id, n));
        }
        self.out.barrier(id, cx)
    }
}

/// Hands records on (an operator between two exchanges).
struct Relay;

impl Operator for Relay {
    type In = Rec;
    type Out = Rec;
    fn on_batch<E: FnMut(Rec)>(&mut self, items: &[<Rec as ExchangeData>::Item], emit: &mut E) {
        for r in items {
            emit(<Rec as air_runtime::Record>::from_archived(r));
        }
    }
    fn on_watermark<E: FnMut(Rec)>(&mut self, _wm: u64, _emit: &mut E) {}
}

/// Merges two inputs (a two-input operator aligns them).
struct Merge;

impl Operator2 for Merge {
    type In1 = Rec;
    type In2 = Rec;
    type Out = Rec;
    fn on_batch1<E: FnMut(Rec)>(&mut self, items: &[<Rec as ExchangeData>::Item], emit: &mut E) {
        for r in items {
            emit(<Rec as air_runtime::Record>::from_archived(r));
        }
    }
    fn on_batch2<E: FnMut(Rec)>(&mut self, items: &[<Rec as ExchangeData>::Item], emit: &mut E) {
        for r in items {
            emit(<Rec as air_runtime::Record>::from_archived(r));
        }
    }
    fn on_watermark<E: FnMut(Rec)>(&mut self, _wm: u64, _emit: &mut E) {}
}

/// What a sink saw, in order.
#[derive(Debug, Clone, Copy)]
enum Seen {
    Record(Rec),
    Barrier(u64),
}

/// A sink that logs records and barriers in arrival order.
struct Log(Rc<RefCell<Vec<Seen>>>);

impl Tail<Rec> for Log {
    fn push(&mut self, r: Rec, _cx: &mut Cx<'_, '_>) {
        self.0.borrow_mut().push(Seen::Record(r));
    }
    fn watermark(&mut self, _wm: u64, _cx: &mut Cx<'_, '_>) {}
    fn end(&mut self, _wm: u64, _cx: &mut Cx<'_, '_>) {}
    fn barrier(&mut self, id: u64, _cx: &mut Cx<'_, '_>) {
        self.0.borrow_mut().push(Seen::Barrier(id));
    }
}

#[derive(Clone, Copy, Debug)]
enum Shape {
    /// source → exchange → relay → exchange → sink.
    TwoHops,
    /// Two sources united → exchange → sink.
    Union,
    /// Two sources, each to its own exchange → a two-input operator →
    /// exchange → sink.
    TwoInputs,
}

#[derive(Default)]
struct Out {
    cuts: Cuts,
    logs: Vec<Vec<Seen>>,
    stats: Option<Stats>,
}

const N: u64 = 30_000;

fn run(shape: Shape, workers: usize, ring: usize, barriers: Option<Duration>) -> Out {
    let out = Arc::new(Mutex::new(Out::default()));
    let cfg = JobConfig {
        workers,
        ring_bytes: ring,
        ring_budget: None,
        flush: Duration::from_micros(200),
        batch_records: 64,
        pin: false,
        barrier_every: barriers,
        ..JobConfig::default()
    };
    let o = out.clone();
    let res = run_graph(&cfg, move |df: &Dataflow| {
        let (me, w) = (df.index() as u64, df.workers() as u64);
        let cuts = Rc::new(RefCell::new(Cuts::new()));
        let log = Rc::new(RefCell::new(Vec::new()));
        let tap = |df: &Dataflow, edge: usize, streams: &'static [u64]| Tap {
            out: df.outbox::<Rec>(edge),
            workers: w,
            pushed: BTreeMap::new(),
            cuts: cuts.clone(),
            me,
            streams,
        };
        let seq = |stream| Seq {
            stream,
            me,
            n: N,
            next: 0,
        };
        match shape {
            Shape::TwoHops => {
                let e1 = df.new_edge("first");
                df.source(seq(0)).end_in(tap(df, e1, &[0]));
                df.consume(e1, Relay)
                    .key_by(|r: &Rec| r.2 / 3)
                    .exchange()
                    .end_in(Log(log.clone()));
            }
            Shape::Union => {
                let e1 = df.new_edge("united");
                df.source(seq(0))
                    .union(df.source(seq(1)))
                    .end_in(tap(df, e1, &[0, 1]));
                df.consume(e1, Relay).end_in(Log(log.clone()));
            }
            Shape::TwoInputs => {
                let (e1, e2) = (df.new_edge("left"), df.new_edge("right"));
                df.source(seq(0)).end_in(tap(df, e1, &[0]));
                df.source(seq(1)).end_in(tap(df, e2, &[1]));
                df.consume2(e1, e2, Merge)
                    .key_by(|r: &Rec| r.2 % 5)
                    .exchange()
                    .end_in(Log(log.clone()));
            }
        }
        let o = o.clone();
        df.report_with(move |_| {
            let mut g = o.lock().unwrap();
            for (k, v) in cuts.borrow().iter() {
                g.cuts.entry(*k).or_default().extend(v.iter().copied());
            }
            g.logs.push(std::mem::take(&mut *log.borrow_mut()));
        });
    })
    .unwrap_or_else(|e| panic!("{shape:?} at {workers} workers, ring {ring}: {e}"));
    let mut g = std::mem::take(&mut *out.lock().unwrap());
    let mut stats = Stats::default();
    for w in &res.workers {
        stats.merge(&w.stats);
    }
    g.stats = Some(stats);
    g
}

/// Checks that barriers cut every sink's stream where the sources put
/// them; returns the barriers seen at sinks.
fn check(shape: Shape, workers: usize, out: &Out) -> usize {
    let streams: &[u64] = match shape {
        Shape::TwoHops => &[0],
        _ => &[0, 1],
    };
    // Every source placed ids 1, 2, 3… with none skipped, at a barrier
    // interval (500 µs) shorter than its ticks are apart on a loaded
    // machine. (After a union the ids are the minimum of two sources',
    // which jumps where the one behind ends.)
    if !matches!(shape, Shape::Union) {
        for ((s, w), c) in &out.cuts {
            let ids: Vec<u64> = c.iter().map(|&(id, _)| id).collect();
            let want: Vec<u64> = (1..=ids.len() as u64).collect();
            assert_eq!(
                ids, want,
                "{shape:?} W={workers}: source ({s}, {w}) skipped barrier ids"
            );
        }
    }
    // Where source (stream, w) stands for barrier `id`: the position of
    // its first barrier with an id at least `id` (after a union, the
    // union's barrier for them); u64::MAX if it never passed one (it
    // ended first).
    let pos = |s: u64, w: u64, id: u64| -> u64 {
        out.cuts
            .get(&(s, w))
            .and_then(|c| c.iter().find(|(b, _)| *b >= id).map(|&(_, n)| n))
            .unwrap_or(u64::MAX)
    };
    let mut seen = HashSet::new();
    let mut barriers = 0;
    for (k, log) in out.logs.iter().enumerate() {
        let mut last = 0u64;
        // The barrier after each record (its epoch's end).
        let mut next_after = vec![None; log.len()];
        let mut next = None;
        for (i, e) in log.iter().enumerate().rev() {
            match e {
                Seen::Barrier(id) => next = Some(*id),
                Seen::Record(_) => next_after[i] = next,
            }
        }
        for (i, e) in log.iter().enumerate() {
            match *e {
                Seen::Barrier(id) => {
                    assert!(id > last, "sink {k}: barrier {id} after {last}");
                    last = id;
                    barriers += 1;
                }
                Seen::Record(r) => {
                    let (s, w, i_) = r;
                    assert!(seen.insert(r), "{r:?} arrived twice");
                    if last > 0 {
                        assert!(
                            i_ >= pos(s, w, last),
                            "{shape:?} W={workers}: sink {k} got {r:?} after barrier {last}, \
                             but its source passed that barrier after record {}",
                            pos(s, w, last)
                        );
                    }
                    if let Some(b) = next_after[i] {
                        assert!(
                            i_ < pos(s, w, b),
                            "{shape:?} W={workers}: sink {k} got {r:?} before barrier {b}, \
                             but its source passed that barrier at record {}",
                            pos(s, w, b)
                        );
                    }
                }
            }
        }
    }
    assert_eq!(
        seen.len() as u64,
        streams.len() as u64 * workers as u64 * N,
        "{shape:?} W={workers}: every record exactly once"
    );
    barriers
}

#[test]
fn barriers_cut_every_sink_where_the_sources_put_them() {
    for shape in [Shape::TwoHops, Shape::Union, Shape::TwoInputs] {
        for (workers, ring) in [(1, 1 << 16), (2, 1 << 16), (3, 4096), (4, 1 << 16)] {
            let out = run(shape, workers, ring, Some(Duration::from_micros(500)));
            let barriers = check(shape, workers, &out);
            let st = out.stats.as_ref().expect("stats");
            eprintln!(
                "{shape:?} W={workers} ring={ring}: {barriers} barriers at sinks, {} alignments, \
                 p99 {} µs",
                st.get("checkpoint_alignments"),
                st.alignment.value_at_quantile(0.99)
            );
            assert!(
                barriers >= workers,
                "{shape:?} W={workers}: only {barriers} barriers reached the sinks"
            );
            assert!(st.get("checkpoint_alignments") > 0);
        }
    }
}

#[test]
fn without_barriers_nothing_changes() {
    let out = run(Shape::TwoInputs, 3, 1 << 16, None);
    assert_eq!(check(Shape::TwoInputs, 3, &out), 0);
    assert!(out.cuts.is_empty());
    assert_eq!(out.stats.unwrap().get("checkpoint_alignments"), 0);
}
