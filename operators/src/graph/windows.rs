//! Which windows an event time belongs to: [`Windows`] (tumbling and
//! sliding, [`Tumbling`], [`Sliding`]) and what every kind of window
//! answers ([`WindowSpec`]; sessions are [`super::Sessions`]).

/// What [`super::KeyedWindowExt::window`] accepts: [`Windows`] (tumbling and
/// sliding) or [`super::Sessions`].
pub trait WindowSpec: Copy + 'static {
    /// The end of the last window a record at event time `t` can belong
    /// to, ms (for sessions: `t + gap`, its own window's end): the record
    /// is late once the watermark reaches it + the allowed lateness.
    fn last_end(&self, t: u64) -> u64;
    /// What is wrong with these windows, if anything.
    fn check(&self) -> Result<(), String>;
}

impl WindowSpec for Windows {
    fn last_end(&self, t: u64) -> u64 {
        Windows::last_end(self, t)
    }
    fn check(&self) -> Result<(), String> {
        Windows::check(self)
    }
}

/// Which windows an event time belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Windows {
    /// `[k·size, (k+1)·size)` ms: every event in exactly one.
    Tumbling {
        /// Length, ms (> 0).
        size: u64,
    },
    /// `[k·slide, k·slide + size)` ms for k >= 0: every event in `size /
    /// slide` of them (rounded up), except events before `size − slide`,
    /// which fall in fewer (no window starts before 0).
    Sliding {
        /// Length, ms (> 0).
        size: u64,
        /// Distance between starts, ms (0 < slide <= size).
        slide: u64,
    },
}

/// Tumbling windows.
#[derive(Debug, Clone, Copy)]
pub struct Tumbling;

impl Tumbling {
    /// Tumbling windows of `size` ms.
    pub fn ms(size: u64) -> Windows {
        Windows::Tumbling { size }
    }
}

/// Sliding windows.
#[derive(Debug, Clone, Copy)]
pub struct Sliding;

impl Sliding {
    /// Windows of `size` ms starting every `slide` ms.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let rows = Arc::new(Mutex::new(Vec::new()));
    /// let out = rows.clone();
    /// run_graph(&cfg, move |df| {
    ///     // (user, time ms): worker w reads every other click.
    ///     let clicks: Vec<(u32, u64)> = [(1, 0), (1, 400), (1, 900), (1, 1_300)]
    ///         .into_iter()
    ///         .skip(df.index())
    ///         .step_by(2)
    ///         .collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(clicks))
    ///         .event_time(|c| c.1, 0)
    ///         .key_by(|c| c.0)
    ///         .window(Sliding::ms(1_000, 500), |c| c.1)
    ///         .aggregate(Count)
    ///         .for_each(move |r| out.lock().unwrap().push((r.start, r.end, r.value)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// // No window starts before 0: the clicks at 0 and 400 are in one window only.
    /// assert_eq!(rows, [(0, 1_000, 3), (500, 1_500, 2), (1_000, 2_000, 1)]);
    /// ```
    pub fn ms(size: u64, slide: u64) -> Windows {
        Windows::Sliding { size, slide }
    }
}

impl Windows {
    /// The windows' length, ms.
    pub fn size(&self) -> u64 {
        match *self {
            Windows::Tumbling { size } | Windows::Sliding { size, .. } => size,
        }
    }

    /// What is wrong with these windows, if anything (a graph with such
    /// windows fails to plan with this message).
    ///
    /// ```
    /// use air_operators::graph::*;
    /// assert_eq!(Tumbling::ms(0).check(), Err("a window's size must be at least 1 ms".into()));
    /// assert!(Sliding::ms(1_000, 2_000).check().is_err());
    /// assert!(Sliding::ms(1_000, 250).check().is_ok());
    /// ```
    pub fn check(&self) -> Result<(), String> {
        match *self {
            Windows::Tumbling { size: 0 } | Windows::Sliding { size: 0, .. } => {
                Err("a window's size must be at least 1 ms".into())
            }
            Windows::Sliding { slide: 0, .. } => {
                Err("a sliding window's slide must be at least 1 ms".into())
            }
            Windows::Sliding { size, slide } if slide > size => Err(format!(
                "a sliding window's slide ({slide} ms) must not exceed its size ({size} ms)"
            )),
            _ => Ok(()),
        }
    }

    /// Calls `f(start)` for every window holding event time `t` (oldest
    /// first).
    ///
    /// ```
    /// use air_operators::graph::*;
    /// let starts = |w: Windows, t| {
    ///     let mut v = Vec::new();
    ///     w.assign(t, |s| v.push(s));
    ///     v
    /// };
    /// assert_eq!(starts(Tumbling::ms(1_000), 1_200), [1_000]);
    /// assert_eq!(starts(Sliding::ms(1_000, 500), 1_200), [500, 1_000]);
    /// assert_eq!(starts(Sliding::ms(1_000, 500), 200), [0]); // none starts before 0
    /// ```
    #[inline]
    pub fn assign(&self, t: u64, mut f: impl FnMut(u64)) {
        match *self {
            Windows::Tumbling { size } => f(t - t % size),
            Windows::Sliding { size, slide } => {
                let last = t - t % slide;
                let mut s = (t + 1).saturating_sub(size);
                s = s.div_ceil(slide) * slide;
                while s <= last {
                    f(s);
                    // No overflow near u64::MAX: stop after the last.
                    match s.checked_add(slide) {
                        Some(next) => s = next,
                        None => break,
                    }
                }
            }
        }
    }

    /// The end of the last window holding event time `t`, ms: a record at
    /// `t` is late (no allowed lateness) once the watermark reaches it.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// assert_eq!(Tumbling::ms(1_000).last_end(1_200), 2_000);
    /// assert_eq!(Sliding::ms(1_000, 500).last_end(1_200), 2_000);
    /// assert_eq!(Sliding::ms(1_000, 500).last_end(1_600), 2_500);
    /// ```
    #[inline]
    pub fn last_end(&self, t: u64) -> u64 {
        match *self {
            Windows::Tumbling { size } => (t - t % size).saturating_add(size),
            Windows::Sliding { size, slide } => (t - t % slide).saturating_add(size),
        }
    }

    /// The pane that sliding windows whose size is a multiple of the slide
    /// are unions of (pre-aggregated per pane: one update per event).
    pub(crate) fn pane(&self) -> Option<u64> {
        match *self {
            Windows::Sliding { size, slide } if size % slide == 0 && size != slide => Some(slide),
            _ => None,
        }
    }
}
