//! A worker's share of a live NEXMark input (standard input, TCP; see
//! [`crate::sources::live`]), read by one or more sources of the worker's
//! graph.
//!
//! Most queries read the input once: their one source parses the
//! worker's chunks straight into its batches. A query whose graph reads
//! its input twice (q8: once for persons, once for auctions) cannot read
//! a live stream twice; instead both sources share one reader
//! ([`LiveShare`]): whichever polls first parses the next batch, keeps it
//! and queues a copy for each other reader of the share, so every reader
//! gets every event of the worker's share, in stream order, and each line
//! is parsed once. A reader whose copies the others have not taken
//! (more than [`LiveShare::QUEUED_BATCHES`] batches) waits for them
//! ([`LiveFill::Idle`]) rather than queue without bound: the worker polls
//! every source of its graph in turn, so the one behind catches up at its
//! next poll.
//!
//! A rank's shares have one stop flag: the first reader to meet an error
//! that ends its input (a bad record under [`OnBadRecord::Fail`], a read
//! error) sets it, and every reader of the rank then ends at its next
//! poll, as the other workers of a file job stop at their next batch.
//!
//! [`OnBadRecord::Fail`]: crate::sources::ysb::OnBadRecord::Fail

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::reader::{EventFileReader, JsonEvent, SourceError, SourceErrorKind};

/// Opens a worker's reader of a live input, at the first poll of any
/// reader of its share (not when the graph is built: a graph may be built
/// once more, to plan it, and that build must not take the worker's
/// queue). `None`: the worker's queue was taken already.
pub type OpenLive<E> = Box<dyn FnOnce() -> Option<EventFileReader<E>> + Send>;

/// What [`LiveEvents::fill`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveFill {
    /// This many events were written to the front of the buffer (> 0).
    Filled(usize),
    /// Nothing now; poll again later (the input is quiet, or another
    /// reader of the share has not taken its copies yet).
    Idle,
    /// The input ended, or the rank stopped reading: nothing more comes.
    Done,
}

/// One worker's share of a live input, for the readers of its graph
/// ([`LiveShare::reader`]). Cheap to clone (shared state).
pub struct LiveShare<E> {
    state: Arc<Mutex<State<E>>>,
}

impl<E> Clone for LiveShare<E> {
    fn clone(&self) -> Self {
        LiveShare {
            state: self.state.clone(),
        }
    }
}

impl<E> std::fmt::Debug for LiveShare<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveShare").finish_non_exhaustive()
    }
}

struct State<E> {
    /// Opens the reader at the first poll.
    open: Option<OpenLive<E>>,
    reader: Option<EventFileReader<E>>,
    /// Per reader of the share: events parsed by another reader and not
    /// taken yet (used only with more than one reader).
    queues: Vec<VecDeque<E>>,
    /// The rank's stop flag.
    stop: Arc<AtomicBool>,
    /// The input cuts its barriers (a followed file under checkpoints):
    /// every reader's source is told so at each poll.
    cuts: bool,
    /// Per reader: the newest barrier its source placed (seen at its last
    /// poll).
    placed: Vec<u64>,
}

impl<E: JsonEvent + Send + 'static> LiveShare<E> {
    /// Batches of copies a reader may leave untaken before the reader
    /// that parses waits for it.
    pub const QUEUED_BATCHES: usize = 4;

    /// A share whose reader `open` opens at the first poll; `stop` is the
    /// rank's stop flag (see the module docs); `cuts`: the input cuts its
    /// checkpoints' barriers ([`crate::sources::live::LiveFeed::resumes_at_offset`]).
    pub fn new(open: OpenLive<E>, stop: Arc<AtomicBool>, cuts: bool) -> LiveShare<E> {
        LiveShare {
            state: Arc::new(Mutex::new(State {
                open: Some(open),
                reader: None,
                queues: Vec::new(),
                stop,
                cuts,
                placed: Vec::new(),
            })),
        }
    }

    /// A new reader of the share: it gets every event of the share from
    /// the first (make every reader before any polls).
    pub fn reader(&self) -> LiveEvents<E> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.queues.push(VecDeque::new());
        st.placed.push(0);
        LiveEvents {
            state: self.state.clone(),
            me: st.queues.len() - 1,
        }
    }
}

/// One reader of a [`LiveShare`].
pub struct LiveEvents<E> {
    state: Arc<Mutex<State<E>>>,
    /// Its queue.
    me: usize,
}

impl<E> std::fmt::Debug for LiveEvents<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveEvents").field("me", &self.me).finish()
    }
}

impl<E: JsonEvent + Send + 'static> LiveEvents<E> {
    /// Writes the next events of the share to the front of `out`
    /// (non-empty), at most `out.len()`.
    ///
    /// # Errors
    /// The error that ended the input, once, to the reader that met it
    /// (see [`EventFileReader::fill`]: the events before it come first);
    /// the rank's stop flag is then set. Also an error if the worker's
    /// queue of the live input was taken already.
    pub fn fill(&mut self, out: &mut [E]) -> Result<LiveFill, SourceError> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        if st.stop.load(Ordering::Acquire) {
            return Ok(LiveFill::Done);
        }
        if let Some(open) = st.open.take() {
            match open() {
                Some(r) => st.reader = Some(r),
                None => {
                    st.stop.store(true, Ordering::Release);
                    return Err(SourceError {
                        path: PathBuf::from("live input"),
                        line: None,
                        offset: None,
                        kind: SourceErrorKind::Read(io::Error::other(
                            "a worker's share of the live input was taken twice",
                        )),
                    });
                }
            }
        }
        let Some(r) = st.reader.as_mut() else {
            return Ok(LiveFill::Done);
        };
        let me = self.me;
        let tee = st.queues.len() > 1;
        if st.cuts && air_runtime::dataflow::barrier_due().is_some() {
            // Every reader's source places barriers only at the input's
            // cuts, also while it reads copies.
            air_runtime::dataflow::input_cuts_barriers(None);
            st.placed[me] = air_runtime::dataflow::source_barrier();
        }
        if tee {
            let q = &mut st.queues[me];
            if !q.is_empty() {
                let k = q.len().min(out.len());
                for (slot, e) in out.iter_mut().zip(q.drain(..k)) {
                    *slot = e;
                }
                return Ok(LiveFill::Filled(k));
            }
            if r.is_finished() {
                return Ok(LiveFill::Done);
            }
            let limit = Self::limit(out.len());
            if st
                .queues
                .iter()
                .enumerate()
                .any(|(i, q)| i != me && q.len() >= limit)
            {
                return Ok(LiveFill::Idle);
            }
        }
        let oldest = st.placed.iter().copied().min().unwrap_or(0);
        let filled = if tee && st.cuts {
            crate::sources::live::placed_by_all(oldest, || r.fill(out))
        } else {
            r.fill(out)
        };
        let n = match filled {
            Ok(n) => n,
            Err(e) => {
                st.stop.store(true, Ordering::Release);
                return Err(e);
            }
        };
        if n == 0 {
            return Ok(if r.is_finished() {
                LiveFill::Done
            } else {
                LiveFill::Idle
            });
        }
        if tee {
            for (i, q) in st.queues.iter_mut().enumerate() {
                if i != me {
                    q.extend(out[..n].iter().cloned());
                }
            }
        }
        Ok(LiveFill::Filled(n))
    }

    /// Bad records the share's reader skipped under
    /// [`OnBadRecord::Skip`](crate::sources::ysb::OnBadRecord::Skip).
    pub fn skipped(&self) -> u64 {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.reader.as_ref().map_or(0, |r| r.skipped())
    }

    /// Queued copies allowed per other reader, for batches of `batch`.
    fn limit(batch: usize) -> usize {
        LiveShare::<E>::QUEUED_BATCHES * batch.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::live::{LiveFeed, LiveInput, LiveOptions};
    use crate::sources::nexmark::{
        compact_event, full_event, write_json_line, NexEvent, NexmarkConfig, ReaderOptions,
    };
    use std::io::Write;

    /// A live input of `n` events over loopback TCP (one worker), sent and
    /// closed by a thread; the config they come from.
    fn feed(n: u64) -> (LiveFeed, NexmarkConfig, std::thread::JoinHandle<()>) {
        let cfg = NexmarkConfig {
            events: Some(n),
            ..NexmarkConfig::default()
        };
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap().to_string();
        let sender = std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            let mut text = Vec::new();
            for k in 0..n {
                write_json_line(&full_event(&cfg, k), &mut text);
            }
            // In pieces that cut lines.
            for piece in text.chunks(3001) {
                s.write_all(piece).unwrap();
            }
        });
        let opts = LiveOptions {
            chunk_bytes: 8192,
            ..LiveOptions::default()
        };
        let f = LiveFeed::start(&LiveInput::Connect(addr), 1, opts).unwrap();
        (f, cfg, sender)
    }

    fn share(f: &LiveFeed) -> LiveShare<NexEvent> {
        let f = f.clone();
        let open: OpenLive<NexEvent> =
            Box::new(move || EventFileReader::live(&f, 0, || {}, ReaderOptions::default()));
        LiveShare::new(open, Arc::new(AtomicBool::new(false)), false)
    }

    /// Polls `r` until it is done (at most a minute), into `got`.
    fn drain(r: &mut LiveEvents<NexEvent>, got: &mut Vec<NexEvent>, buf: &mut [NexEvent]) -> bool {
        match r.fill(buf).unwrap() {
            LiveFill::Filled(n) => {
                got.extend_from_slice(&buf[..n]);
                false
            }
            LiveFill::Idle => {
                std::thread::sleep(std::time::Duration::from_millis(1));
                false
            }
            LiveFill::Done => true,
        }
    }

    /// Two readers of one share both get every event, in stream order;
    /// one that is not polled holds the other back after
    /// `QUEUED_BATCHES` batches.
    #[test]
    fn two_readers_get_every_event() {
        let (f, cfg, sender) = feed(5_000);
        let s = share(&f);
        let (mut a, mut b) = (s.reader(), s.reader());
        let mut buf = vec![NexEvent::default(); 64];
        let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
        // Only `a` polls: it parses, then waits for `b`.
        let t = std::time::Instant::now();
        loop {
            assert!(t.elapsed().as_secs() < 60, "a never waited for b");
            match a.fill(&mut buf).unwrap() {
                LiveFill::Filled(n) => got_a.extend_from_slice(&buf[..n]),
                LiveFill::Idle if got_a.len() >= 4 * 64 => break,
                LiveFill::Idle => std::thread::sleep(std::time::Duration::from_millis(1)),
                LiveFill::Done => panic!("done early"),
            }
        }
        // `b`'s copies reached the limit with `a`'s last batch.
        let limit = LiveShare::<NexEvent>::QUEUED_BATCHES * 64;
        assert!(
            (limit..limit + 64).contains(&got_a.len()),
            "{}",
            got_a.len()
        );
        let (mut done_a, mut done_b) = (false, false);
        while !(done_a && done_b) {
            assert!(t.elapsed().as_secs() < 60);
            if !done_b {
                done_b = drain(&mut b, &mut got_b, &mut buf);
            }
            if !done_a {
                done_a = drain(&mut a, &mut got_a, &mut buf);
            }
        }
        sender.join().unwrap();
        let want: Vec<NexEvent> = (0..5_000).map(|k| compact_event(&cfg, k)).collect();
        assert_eq!(got_a, want);
        assert_eq!(got_b, want);
        assert_eq!(a.skipped(), 0);
    }

    /// One reader: the events go straight through; a second share of the
    /// same worker's queue is an error.
    #[test]
    fn one_reader_and_a_queue_taken_twice() {
        let (f, cfg, sender) = feed(1_000);
        let s = share(&f);
        let mut a = s.reader();
        let mut buf = vec![NexEvent::default(); 100];
        let mut got = Vec::new();
        let t = std::time::Instant::now();
        while !drain(&mut a, &mut got, &mut buf) {
            assert!(t.elapsed().as_secs() < 60);
        }
        sender.join().unwrap();
        assert_eq!(got.len(), 1_000);
        assert_eq!(got[999], compact_event(&cfg, 999));
        let mut again = share(&f).reader();
        let e = again.fill(&mut buf).unwrap_err();
        assert!(e.to_string().contains("taken twice"), "{e}");
    }
}
