//! Operator state at checkpoint barriers: what each worker saves, where it
//! goes, and what a resumed worker gets back (docs/design.md,
//! "Checkpoints").
//!
//! At build time every component that keeps state between records (a
//! source's position, an operator's windows, a sink's rows not yet
//! committed) takes a *slot* ([`Dataflow::state_slot`]); slots are numbered
//! in build order, which is the same on every run of the same graph. When
//! a component handles barrier `n` it saves its state into its slot
//! ([`save`]); once every slot of the worker saved `n`, the worker's part of
//! checkpoint `n` is complete and goes to this process's writer thread,
//! which writes it ([`crate::checkpoint::Store::write_part`]) while the
//! worker runs on. A resumed worker's components find their saved state in
//! [`StateSlot::take_restored`].
//!
//! [`Dataflow::state_slot`]: super::Dataflow::state_slot

use crate::checkpoint::{CheckpointError, Part, Store};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

/// Where a job writes its checkpoints and how it resumes
/// (`JobConfig::checkpoint`; `air run --checkpoint-dir`).
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// The directory (every rank must reach it: a shared file system on a
    /// cluster). Checkpoint `n` is `DIR/chk-{n:08}/`.
    pub dir: PathBuf,
    /// Complete checkpoints kept (older ones are deleted), at least 1.
    pub retained: usize,
    /// Ignore and delete the checkpoints in `dir` (`--fresh`): start from
    /// the first event.
    pub fresh: bool,
    /// What makes this job this job beyond its graph: a hash of the
    /// options that change results and of its inputs (the caller's). A
    /// checkpoint of another job is refused.
    pub job: u64,
}

/// Deletes every `chk-*` directory of `dir` whose id is above `after`;
/// returns how many it deleted.
fn remove_newer(dir: &std::path::Path, store: &Store, after: u64) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("chk-"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if id > after && std::fs::remove_dir_all(store.checkpoint_dir(id)).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A part handed to the writer: (checkpoint, worker, slots, files made
/// durable before the part is written: [`sync_before_part`]).
type PartJob = (u64, usize, Vec<(u32, Vec<u8>)>, Vec<Durable>);

/// A file a component wrote that must be durable before its worker's part
/// of a checkpoint is ([`sync_before_part`]): the open file, and the
/// directory holding it (fsynced too, so a new file's name is durable).
#[derive(Debug)]
struct Durable {
    file: std::fs::File,
    path: PathBuf,
}

impl Durable {
    /// fsyncs the file's data, then its directory.
    fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        std::fs::File::open(dir)?.sync_all()
    }
}

/// Per-process checkpoint figures, summed over its workers' parts.
#[derive(Debug, Default)]
pub struct WriterFigures {
    /// Parts written.
    pub parts: AtomicU64,
    /// Parts that failed to be written (counted, skipped: the job runs on).
    pub failed: AtomicU64,
    /// Checkpoints this process completed (wrote the manifest of).
    pub completed: AtomicU64,
    /// Bytes of parts written.
    pub bytes: AtomicU64,
    /// Sum of part write times (temp file, fsync, rename), µs.
    pub write_us: AtomicU64,
    /// Longest part write, µs.
    pub write_max_us: AtomicU64,
    /// The newest checkpoint this process knows complete (it wrote or saw
    /// its manifest).
    pub newest_complete: AtomicU64,
    /// Parts handed to the writer.
    pub queued: AtomicU64,
    /// Parts the writer is done with (written, failed or dropped).
    pub handled: AtomicU64,
    /// The checkpoint ids of the parts handed to the writer and not done
    /// with yet, with how many parts of each.
    in_queue: Mutex<BTreeMap<u64, u32>>,
}

impl WriterFigures {
    /// A part of checkpoint `id` is handed to the writer.
    fn queue(&self, id: u64) {
        *self
            .in_queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id)
            .or_insert(0) += 1;
        self.queued.fetch_add(1, Ordering::Release);
    }

    /// The writer is done with a part of checkpoint `id` (written, failed
    /// or dropped).
    fn handled(&self, id: u64) {
        let mut q = self.in_queue.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = q.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                q.remove(&id);
            }
        }
        drop(q);
        self.handled.fetch_add(1, Ordering::Release);
    }

    /// Whether a part of checkpoint `id` or an older one, of any worker of
    /// this process, is handed to the writer and not yet written.
    pub fn queued_up_to(&self, id: u64) -> bool {
        self.in_queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .range(..=id)
            .next()
            .is_some()
    }

    /// Parts handed to the writer and not yet written.
    pub fn backlog(&self) -> u64 {
        let queued = self.queued.load(Ordering::Acquire);
        queued.saturating_sub(self.handled.load(Ordering::Acquire))
    }
}

/// A job's checkpoints in this process: the store, the writer thread, the
/// part a resumed job starts from.
pub struct Checkpoints {
    store: Arc<Store>,
    tx: Mutex<Option<mpsc::Sender<PartJob>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// What the writer did.
    pub figures: Arc<WriterFigures>,
    /// The checkpoint this run resumed from.
    pub resumed: Option<u64>,
    /// The job's workers (all ranks) when that checkpoint was taken:
    /// another count than this run's is a rescale.
    pub resumed_workers: Option<usize>,
    /// Every part of the checkpoint rescaled from, read once per process
    /// (each worker takes from every part what it now owns).
    rescaled_parts: std::sync::OnceLock<Result<Arc<[Part]>, String>>,
    /// This run's workers (all ranks).
    workers: usize,
    /// Warnings to print (a damaged newer checkpoint skipped…).
    pub warnings: Vec<String>,
    /// "resuming from checkpoint …", said once the job is known to start
    /// ([`Checkpoints::say_resuming`]: not before a refusal).
    resuming: Option<String>,
    first_error: Arc<Mutex<Option<String>>>,
    /// Set when a worker's source ended on an error: the job fails, so
    /// nothing that ends now ends for good ([`ends_for_good`]).
    failing: std::sync::atomic::AtomicBool,
    /// Per worker of the job: the newest checkpoint its part went out for
    /// (to the writer; the checkpoint resumed from before its first), or
    /// `u64::MAX` for a worker not running in this process (another
    /// rank's, or ended). [`in_flight`] holds a source back while a worker
    /// here has not caught up.
    parts_out: Vec<AtomicU64>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints")
            .field("dir", &self.store.dir())
            .field("resumed", &self.resumed)
            .finish()
    }
}

impl Checkpoints {
    /// Opens `cfg.dir` for a job of `workers` workers whose graph has
    /// signature `graph`: clears it with `cfg.fresh`, else finds the newest
    /// complete checkpoint to resume from. Starts the writer thread.
    ///
    /// # Errors
    /// The directory cannot be made or read; it holds another job's
    /// checkpoints; every complete checkpoint in it is damaged.
    pub fn open(
        cfg: &CheckpointConfig,
        graph: u64,
        workers: usize,
    ) -> Result<Checkpoints, CheckpointError> {
        // The worker count is checked on its own (a clearer error).
        let opened = Instant::now();
        let signature = graph ^ cfg.job.rotate_left(17);
        let store = Arc::new(Store::open(
            cfg.dir.clone(),
            signature,
            workers,
            cfg.retained.max(1),
        )?);
        let (resumed, resumed_workers, warnings) = if cfg.fresh {
            store.clear()?;
            (None, None, Vec::new())
        } else {
            let (c, w) = store.newest_complete()?;
            let resumed_workers = c.as_ref().map(|c| c.workers);
            let resumed = c.map(|c| c.id);
            // Every checkpoint newer than the one resumed from is of the
            // run that died: complete ones are damaged (kept, retention
            // would count them and delete good ones), incomplete ones hold
            // parts of the dead run that this run's parts of the same id
            // would complete into a mixed, inconsistent checkpoint. Every
            // rank deletes them before any worker of the job starts (the
            // ranks agree on the checkpoint collectively, after this).
            let removed = remove_newer(&cfg.dir, &store, resumed.unwrap_or(0));
            if removed > 0 {
                let from = match resumed {
                    Some(id) => format!("newer than checkpoint {id}, the one resumed from,"),
                    None => "(none complete: a fresh start)".to_string(),
                };
                crate::say!(
                    "air: deleted {removed} checkpoint{} {from} in {} (incomplete or damaged: \
                     the stopped run's)",
                    if removed == 1 { "" } else { "s" },
                    cfg.dir.display()
                );
            }
            (resumed, resumed_workers, w)
        };
        for w in &warnings {
            crate::say!("air: {w}");
        }
        let resuming = resumed.map(|id| {
            let rescale = match resumed_workers {
                Some(then) if then != workers => format!(
                    ", taken at {then} worker{}: its state goes to {workers}",
                    if then == 1 { "" } else { "s" }
                ),
                _ => String::new(),
            };
            format!(
                "air: resuming from checkpoint {id} in {}{rescale} (checked in {} ms; --fresh \
                 starts over)",
                cfg.dir.display(),
                opened.elapsed().as_millis()
            )
        });
        let figures = Arc::new(WriterFigures::default());
        if let Some(id) = resumed {
            figures.newest_complete.store(id, Ordering::Relaxed);
        }
        let (tx, rx) = mpsc::channel::<PartJob>();
        let first_error = Arc::new(Mutex::new(None));
        let writer = {
            let (store, figures, first_error) =
                (store.clone(), figures.clone(), first_error.clone());
            std::thread::Builder::new()
                .name("air-checkpoint".into())
                .spawn(move || {
                    // Checkpoints a part of which failed here: they can
                    // never complete, so their other parts are not written
                    // (and those written are deleted: on a full disk they
                    // would keep it full).
                    let mut failed_ids = std::collections::BTreeSet::new();
                    for (id, worker, slots, durable) in rx {
                        // Counted done once this iteration ends, however.
                        struct Handled<'a>(&'a WriterFigures, u64);
                        impl Drop for Handled<'_> {
                            fn drop(&mut self) {
                                self.0.handled(self.1);
                            }
                        }
                        let _handled = Handled(&figures, id);
                        if failed_ids.contains(&id) {
                            continue;
                        }
                        let refs: Vec<(u32, &[u8])> =
                            slots.iter().map(|(s, b)| (*s, b.as_slice())).collect();
                        let t = Instant::now();
                        // Files the part names are durable before it is.
                        let synced = durable.iter().try_for_each(|d| {
                            d.sync().map_err(|e| CheckpointError::Io {
                                path: d.path.clone(),
                                source: e,
                            })
                        });
                        match synced.and_then(|()| store.write_part(id, worker, &refs)) {
                            Ok(w) => {
                                let us = t.elapsed().as_micros() as u64;
                                figures.parts.fetch_add(1, Ordering::Relaxed);
                                figures.bytes.fetch_add(w.bytes, Ordering::Relaxed);
                                figures.write_us.fetch_add(us, Ordering::Relaxed);
                                figures.write_max_us.fetch_max(us, Ordering::Relaxed);
                                if w.completed {
                                    figures.completed.fetch_add(1, Ordering::Relaxed);
                                    figures.newest_complete.fetch_max(id, Ordering::Relaxed);
                                }
                            }
                            Err(e) => {
                                figures.failed.fetch_add(1, Ordering::Relaxed);
                                failed_ids.insert(id);
                                let _ = std::fs::remove_dir_all(store.checkpoint_dir(id));
                                let mut f = first_error.lock().unwrap_or_else(|e| e.into_inner());
                                if f.is_none() {
                                    crate::say!(
                                        "air: checkpoint {id} skipped: worker {worker}'s part \
                                         was not written ({e}); the job runs on"
                                    );
                                    *f = Some(e.to_string());
                                }
                            }
                        }
                    }
                })
                .map_err(|e| CheckpointError::Io {
                    path: cfg.dir.clone(),
                    source: e,
                })?
        };
        Ok(Checkpoints {
            store,
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            figures,
            resumed,
            resumed_workers,
            rescaled_parts: std::sync::OnceLock::new(),
            workers,
            warnings,
            resuming,
            first_error,
            failing: std::sync::atomic::AtomicBool::new(false),
            parts_out: (0..workers).map(|_| AtomicU64::new(u64::MAX)).collect(),
        })
    }

    /// Says on stderr which checkpoint this run resumes from (and to how
    /// many workers), once: after the checks that may refuse the resume.
    pub(crate) fn say_resuming(&self) {
        if let Some(line) = &self.resuming {
            crate::say!("{line}");
        }
    }

    /// Whether this run resumes from a checkpoint taken at another worker
    /// count.
    pub fn rescaling(&self) -> bool {
        self.resumed.is_some() && self.resumed_workers.is_some_and(|w| w != self.workers)
    }

    /// Every part of the checkpoint this run rescales from (read and
    /// checked once per process).
    fn rescaled_parts(&self) -> Result<Arc<[Part]>, String> {
        self.rescaled_parts
            .get_or_init(|| {
                let (Some(id), Some(then)) = (self.resumed, self.resumed_workers) else {
                    return Err("no checkpoint to rescale from".into());
                };
                (0..then)
                    .map(|w| self.store.read_part_of(id, w, then))
                    .collect::<Result<Vec<Part>, _>>()
                    .map(Arc::from)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Worker `worker`'s part of the checkpoint this run resumes from.
    ///
    /// # Errors
    /// The part cannot be read or is damaged (naming its file).
    pub fn resumed_part(&self, worker: usize) -> Result<Option<Part>, CheckpointError> {
        match self.resumed {
            Some(_) if self.rescaling() => Ok(None),
            Some(id) => self.store.read_part(id, worker).map(Some),
            None => Ok(None),
        }
    }

    /// What worker `worker` resumes from: its own part, or every part of a
    /// checkpoint taken at another worker count, or nothing.
    ///
    /// # Errors
    /// A part cannot be read or is damaged (naming its file).
    pub(crate) fn resumed_state(
        &self,
        worker: usize,
        groups: crate::keygroups::KeyGroups,
    ) -> Result<Resumed, String> {
        if self.rescaling() {
            return Ok(Resumed::Rescaled {
                parts: self.rescaled_parts()?,
                to: Rescale {
                    worker,
                    workers: self.workers,
                    from: self.resumed_workers.unwrap_or(1),
                    groups: groups.into(),
                },
            });
        }
        Ok(
            match self.resumed_part(worker).map_err(|e| e.to_string())? {
                Some(p) => Resumed::Own(p),
                None => Resumed::Nothing,
            },
        )
    }

    /// Whether checkpoint `id` is complete (its manifest is on disk).
    pub fn is_complete(&self, id: u64) -> bool {
        if self.figures.newest_complete.load(Ordering::Relaxed) >= id {
            return true;
        }
        let done = self.store.is_complete(id);
        if done {
            self.figures
                .newest_complete
                .fetch_max(id, Ordering::Relaxed);
        }
        done
    }

    /// The directory.
    pub fn dir(&self) -> PathBuf {
        self.store.dir().to_path_buf()
    }

    fn send(&self, job: PartJob) {
        if let Some(tx) = self.tx.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let id = job.0;
            self.figures.queue(id);
            if tx.send(job).is_err() {
                self.figures.handled(id);
            }
        }
    }

    /// Waits until every part handed over is written (or failed).
    pub fn drain(&self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = w.join();
        }
    }

    /// The newest checkpoint every worker running in this process sent its
    /// part of to the writer (`u64::MAX` with none running).
    fn slowest_part_out(&self) -> u64 {
        self.parts_out
            .iter()
            .map(|p| p.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Worker `worker`'s newest part out ([`Checkpoints::slowest_part_out`]).
    fn set_part_out(&self, worker: usize, id: u64) {
        if let Some(p) = self.parts_out.get(worker) {
            p.store(id, Ordering::Release);
        }
    }

    /// The first write error, if any part failed.
    pub fn first_error(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Checkpoints {
    fn drop(&mut self) {
        self.drain();
    }
}

/// A component's place in its worker's checkpoints
/// ([`super::Dataflow::state_slot`]).
#[derive(Debug)]
pub struct StateSlot {
    index: u32,
    restored: Option<Vec<u8>>,
    rescaled: Option<Rescaled>,
}

/// What a worker resumes from.
pub(crate) enum Resumed {
    /// A fresh start.
    Nothing,
    /// Its own part of a checkpoint taken at this worker count.
    Own(Part),
    /// Every part of a checkpoint taken at another worker count.
    Rescaled {
        /// The parts, by the worker that wrote them.
        parts: Arc<[Part]>,
        /// Which worker this is, of how many, from how many.
        to: Rescale,
    },
}

/// A resume at another worker count, seen from one new worker: its
/// components take from every old worker's state what they own now
/// (keyed state by key group; sources by shard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescale {
    /// This worker (global index).
    pub worker: usize,
    /// The job's workers now (all ranks).
    pub workers: usize,
    /// The workers the checkpoint was taken by.
    pub from: usize,
    /// The job's key groups and their owners now (the even ranges on a
    /// resume; the new table when groups move during a job).
    pub groups: crate::keygroups::Assignment,
}

impl Rescale {
    /// Whether this worker owns `key` now (its key group's owner, as
    /// `key_by` routes it: [`crate::key_hash`]).
    pub fn owns<K: std::hash::Hash + ?Sized>(&self, key: &K) -> bool {
        self.groups.owner(crate::key_hash(key)) == self.worker
    }
}

/// One slot's states in a checkpoint taken at another worker count: every
/// old worker's, in worker order ([`StateSlot::take_rescaled`]).
pub struct Rescaled {
    parts: Arc<[Part]>,
    slot: u32,
    /// Which worker this is, of how many, from how many.
    pub to: Rescale,
}

impl std::fmt::Debug for Rescaled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rescaled")
            .field("slot", &self.slot)
            .field("to", &self.to)
            .finish()
    }
}

impl Rescaled {
    /// Every old worker's saved state of this slot, in worker order.
    ///
    /// # Errors
    /// A part lacks the slot (another graph: refused before, by its
    /// signature, so a damaged part).
    pub fn states(&self) -> Result<Vec<&[u8]>, String> {
        self.parts
            .iter()
            .map(|p| {
                p.slot(self.slot).ok_or_else(|| {
                    format!("{} has no state for slot {}", p.path().display(), self.slot)
                })
            })
            .collect()
    }
}

impl StateSlot {
    /// The slot's number (build order at its worker).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The state saved in this slot by the checkpoint the job resumes
    /// from (`None`: a fresh start, or no checkpoints). Taken once.
    pub fn take_restored(&mut self) -> Option<Vec<u8>> {
        self.restored.take()
    }

    /// Every old worker's state of this slot when the job resumes at
    /// another worker count than its checkpoint's (`None` otherwise).
    /// Taken once.
    pub fn take_rescaled(&mut self) -> Option<Rescaled> {
        self.rescaled.take()
    }

    /// Saves `state` as this slot's state at barrier `id`
    /// ([`save`]).
    pub fn save(&self, id: u64, state: Vec<u8>) {
        save(self.index, id, state)
    }

    /// This slot's component ended with `state`: every later checkpoint of
    /// this worker holds it ([`ended`]).
    pub fn ended(&self, state: Vec<u8>) {
        ended(self.index, state)
    }
}

/// One worker's checkpoint state (thread-local while it runs).
struct WorkerState {
    worker: usize,
    ck: Arc<Checkpoints>,
    /// Slot count (fixed after the build).
    slots: usize,
    /// Saved so far, per checkpoint id still incomplete at this worker.
    building: BTreeMap<u64, Vec<Option<Vec<u8>>>>,
    /// The newest id each slot saved (0: none yet).
    saved: Vec<u64>,
    /// Final states of ended components.
    ended: BTreeMap<u32, Vec<u8>>,
    /// What this worker resumes from.
    restored: Resumed,
    /// Checkpoints abandoned here (a component skipped the id: an
    /// alignment gave up, or an input cut at another id).
    skipped: u64,
    /// Parts handed to the writer.
    parts: u64,
    /// Bytes handed to the writer.
    bytes: u64,
    /// The newest checkpoint id this worker's part went out for.
    last: u64,
    /// Files to make durable before this worker's part of the checkpoint
    /// with the id (or the next part that goes out), oldest first.
    durable: Vec<(u64, Durable)>,
}

thread_local! {
    static WORKER: RefCell<Option<WorkerState>> = const { RefCell::new(None) };
}

/// Sets up the calling thread as worker `worker` of a job with
/// checkpoints; `restored` is its part of the checkpoint it resumes from.
pub(crate) fn begin(worker: usize, ck: Arc<Checkpoints>, restored: Resumed) {
    ck.set_part_out(worker, ck.resumed.unwrap_or(0));
    WORKER.with(|w| {
        *w.borrow_mut() = Some(WorkerState {
            worker,
            ck,
            slots: 0,
            building: BTreeMap::new(),
            saved: Vec::new(),
            ended: BTreeMap::new(),
            restored,
            skipped: 0,
            parts: 0,
            bytes: 0,
            last: 0,
            durable: Vec::new(),
        })
    });
}

/// What this worker did, once it ended: (parts, bytes, skipped). Clears
/// the thread's state.
pub(crate) fn end() -> Option<(u64, u64, u64)> {
    WORKER.with(|w| {
        w.borrow_mut().take().map(|s| {
            // An ended worker holds no other back.
            s.ck.set_part_out(s.worker, u64::MAX);
            (s.parts, s.bytes, s.skipped)
        })
    })
}

/// Whether a checkpoint that slot `slot` saved is still in flight at this
/// worker: this worker's part of it is not finished (another component
/// has not saved it yet); a part of it or of an older checkpoint, of any
/// worker of this process, is not yet written by the process's writer; or
/// a worker of this process has not sent its part of it to the writer yet.
/// A source places no new barrier meanwhile (one checkpoint at a time, as
/// Flink's default): its next id waits, and is placed, under the same id,
/// once this is false. A job whose state takes longer to save or write
/// than the interval takes checkpoints as often as it can, not more often,
/// and holds one checkpoint's state in memory, not a growing queue of
/// them. (Only checkpoints the slot itself saved count: one that waits for
/// this very source, e.g. begun by another source's branch, does not hold
/// it back.)
///
/// The last condition keeps the workers of a process at one checkpoint:
/// where exchanges connect them it holds anyway (no part of `n` is
/// complete before every worker placed `n`), but workers that nothing
/// connects (a graph without an exchange) would each place ids at their
/// own pace, and a checkpoint completes only once the slowest placed its
/// id. (Waiting for the writer's queue alone let whichever worker ticked
/// first after it emptied place the next id: such workers drifted many ids
/// apart, and a resume went back to the slowest one's.) Only this
/// process's workers are waited for: ranks that nothing connects may still
/// drift apart, each at the pace of its own writer.
pub fn in_flight(slot: u32) -> bool {
    WORKER.with(|w| {
        w.borrow().as_ref().is_some_and(|s| {
            let saved = s.saved.get(slot as usize).copied().unwrap_or(0);
            s.building
                .values()
                .any(|part| part.get(slot as usize).is_some_and(Option::is_some))
                || (saved > 0
                    && (s.ck.figures.queued_up_to(saved) || s.ck.slowest_part_out() < saved))
        })
    })
}

/// Whether a component of this worker that ends now ends for good, its
/// final state saved for every later checkpoint and its output committed
/// in full: the job was neither stopped (a signal: it resumes) nor is
/// failing (a source ended on an error, e.g. a bad
/// record: the job fails, and a rerun once the input is mended resumes
/// from the last complete checkpoint, so what came after it must not
/// count as final).
pub fn ends_for_good() -> bool {
    !crate::stop::requested()
        && !WORKER.with(|w| {
            w.borrow()
                .as_ref()
                .is_some_and(|s| s.ck.failing.load(std::sync::atomic::Ordering::Acquire))
        })
}

/// A source of this worker met an error that fails the job (a bad record
/// under `--on-bad-record fail`, a read error): nothing that ends from now
/// on ends for good ([`ends_for_good`]). Sources whose errors reach the
/// job through [`crate::dataflow::Source::take_error`] are marked by the
/// runtime; one that reports its error another way (the `air` command's
/// built-in sources) calls this where it meets the error. Nothing without
/// checkpoints.
pub fn mark_failing() {
    WORKER.with(|w| {
        if let Some(s) = w.borrow().as_ref() {
            s.ck.failing
                .store(true, std::sync::atomic::Ordering::Release);
        }
    })
}

/// Whether this thread runs a worker of a job with checkpoints.
pub fn enabled() -> bool {
    WORKER.with(|w| w.borrow().is_some())
}

/// This job's checkpoints, on a worker thread of a job with checkpoints.
pub fn checkpoints() -> Option<Arc<Checkpoints>> {
    WORKER.with(|w| w.borrow().as_ref().map(|s| s.ck.clone()))
}

/// A new slot at this worker (build time): its number and what the
/// resumed checkpoint saved in it.
pub(crate) fn new_slot(index: u32) -> StateSlot {
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        let mut slot = StateSlot {
            index,
            restored: None,
            rescaled: None,
        };
        let Some(s) = w.as_mut() else { return slot };
        s.slots = s.slots.max(index as usize + 1);
        match &s.restored {
            Resumed::Nothing => {}
            Resumed::Own(p) => slot.restored = p.slot(index).map(|b| b.to_vec()),
            Resumed::Rescaled { parts, to } => {
                slot.rescaled = Some(Rescaled {
                    parts: parts.clone(),
                    slot: index,
                    to: to.clone(),
                })
            }
        }
        slot
    })
}

/// Saves slot `slot`'s state at barrier `id`. Once every slot of this
/// worker saved `id` (or ended), the worker's part of checkpoint `id` goes
/// to the writer. A slot that saves `id` while an older checkpoint still
/// lacks it skipped that one: the older one is abandoned at this worker.
/// (Sources place every id in turn; ids skip where an alignment gave up,
/// `crate::exchange::KEPT_BYTES_MAX`, and at inputs that cut their own
/// barriers, whose ids are the ones due when each cut was asked for.)
/// Nothing happens without checkpoints.
pub fn save(slot: u32, id: u64, state: Vec<u8>) {
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        let Some(s) = w.as_mut() else { return };
        if id <= s.last {
            return;
        }
        let n = s.slots;
        if s.saved.len() < n {
            s.saved.resize(n, 0);
        }
        s.saved[slot as usize] = s.saved[slot as usize].max(id);
        // Older checkpoints this slot skipped can never complete here.
        let stale: Vec<u64> = s
            .building
            .iter()
            .filter(|(&k, v)| k < id && v[slot as usize].is_none())
            .map(|(&k, _)| k)
            .collect();
        for k in stale {
            s.building.remove(&k);
            s.skipped += 1;
        }
        // Nor can this one if another slot (not ended) already saved a
        // newer id without it: a component that skipped `id` (behind an
        // alignment that gave up) while another one here got it. Kept, it
        // would block every later checkpoint of this worker.
        let skipped_by_another = !s.building.contains_key(&id)
            && (0..n).any(|j| {
                j != slot as usize && s.saved[j] > id && !s.ended.contains_key(&(j as u32))
            });
        if skipped_by_another {
            s.skipped += 1;
            return;
        }
        let part = s.building.entry(id).or_insert_with(|| vec![None; n]);
        part[slot as usize] = Some(state);
        try_complete(s);
    })
}

/// Slot `slot`'s component ended, its final state `state`: every
/// checkpoint this worker still builds, and every later one, holds it.
pub fn ended(slot: u32, state: Vec<u8>) {
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        let Some(s) = w.as_mut() else { return };
        for part in s.building.values_mut() {
            if part[slot as usize].is_none() {
                part[slot as usize] = Some(state.clone());
            }
        }
        s.ended.insert(slot, state);
        try_complete(s);
    })
}

/// Hands every checkpoint complete at this worker (oldest first) to the
/// writer.
fn try_complete(s: &mut WorkerState) {
    while let Some((&id, part)) = s.building.iter_mut().next() {
        for (k, v) in &s.ended {
            if part[*k as usize].is_none() {
                part[*k as usize] = Some(v.clone());
            }
        }
        if part.iter().any(|p| p.is_none()) {
            break;
        }
        let part = s.building.remove(&id).expect("present");
        let slots: Vec<(u32, Vec<u8>)> = part
            .into_iter()
            .enumerate()
            .map(|(k, b)| (k as u32, b.expect("complete")))
            .collect();
        s.parts += 1;
        s.bytes += slots.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
        s.last = id;
        s.ck.set_part_out(s.worker, id);
        let cut = s.durable.partition_point(|(k, _)| *k <= id);
        let durable = s.durable.drain(..cut).map(|(_, d)| d).collect();
        s.ck.send((id, s.worker, slots, durable));
    }
}

/// The file `file` (at `path`) must be durable before this worker's part
/// of checkpoint `id` is written: the part names what it holds (an
/// exactly-once sink's pending rows). The writer thread fsyncs the file and
/// its directory, then writes the part; if that fails, the checkpoint is
/// skipped like a part that failed to be written. If checkpoint `id` is
/// abandoned at this worker, the next part that goes out syncs it. Nothing
/// happens without checkpoints (the file is closed).
pub fn sync_before_part(id: u64, file: std::fs::File, path: PathBuf) {
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        let Some(s) = w.as_mut() else { return };
        let at = s.durable.partition_point(|(k, _)| *k <= id);
        s.durable.insert(at, (id, Durable { file, path }));
    })
}

/// A state [`frame`]d with one value (an operator's watermark) and its
/// body: `(value, body)`.
///
/// # Errors
/// Not such a frame; the message names the state as `what` ("window").
pub fn unframe_one<'a>(state: &'a [u8], what: &str) -> Result<(u64, &'a [u8]), String> {
    let (values, body) = unframe(state)?;
    match values[..] {
        [v] => Ok((v, body)),
        _ => Err(format!("{what} state with {} values, not 1", values.len())),
    }
}

/// The little-endian `u64` at byte `at` of a saved state.
///
/// # Errors
/// The state is too short.
pub fn read_u64(state: &[u8], at: usize) -> Result<u64, String> {
    state
        .get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| format!("saved state of {} bytes is too short", state.len()))
}

/// A segment's saved state: `values` (its chain's, [`super::Pipe::save`])
/// then `body` (its source's or operator's): `[count, values…, body]`,
/// little-endian `u64`s.
pub fn frame(values: &[u64], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 * (values.len() + 1) + body.len());
    out.extend_from_slice(&(values.len() as u64).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// What [`frame`] made: (values, body).
///
/// # Errors
/// Bytes [`frame`] did not make (too short).
pub fn unframe(state: &[u8]) -> Result<(Vec<u64>, &[u8]), String> {
    let n = read_u64(state, 0)? as usize;
    let end = n
        .checked_add(1)
        .and_then(|k| k.checked_mul(8))
        .filter(|&e| e <= state.len())
        .ok_or_else(|| format!("saved state of {} bytes is too short", state.len()))?;
    let values = (0..n)
        .map(|i| read_u64(state, 8 * (i + 1)))
        .collect::<Result<Vec<u64>, String>>()?;
    Ok((values, &state[end..]))
}

/// A saved state of `values` and several byte `sections` (records of
/// several types, say): [`frame`] of the values then each section's
/// length, around the sections one after another. [`unframe_sections`]
/// reads it back.
pub fn frame_sections(values: &[u64], sections: &[&[u8]]) -> Vec<u8> {
    let mut all = values.to_vec();
    all.extend(sections.iter().map(|s| s.len() as u64));
    frame(&all, &sections.concat())
}

/// What [`frame_sections`] made, with `n` sections: (values, sections).
///
/// # Errors
/// Bytes [`frame_sections`] did not make with `n` sections.
pub fn unframe_sections(state: &[u8], n: usize) -> Result<(Vec<u64>, Vec<&[u8]>), String> {
    let (mut values, mut body) = unframe(state)?;
    if values.len() < n {
        return Err(format!(
            "saved state with {} values, not {n} sections",
            values.len()
        ));
    }
    let lens = values.split_off(values.len() - n);
    let mut sections = Vec::with_capacity(n);
    for len in lens {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= body.len())
            .ok_or_else(|| format!("a saved section of {len} bytes overruns its state"))?;
        let (head, rest) = body.split_at(len);
        sections.push(head);
        body = rest;
    }
    if !body.is_empty() {
        return Err(format!("{} bytes after the saved sections", body.len()));
    }
    Ok((values, sections))
}

/// Records as saved state (an rkyv archive of the vector).
#[allow(clippy::ptr_arg)]
pub fn records_to_bytes<T: crate::ExchangeData>(items: &Vec<T>) -> Vec<u8> {
    T::to_bytes(items).to_vec()
}

/// The records [`records_to_bytes`] saved (validated: the bytes come from
/// disk).
///
/// # Errors
/// Bytes that are not such an archive.
pub fn records_from_bytes<T: crate::Record>(state: &[u8]) -> Result<Vec<T>, String> {
    let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(state.len());
    aligned.extend_from_slice(state);
    let items = T::read_batch_validated(&aligned)?;
    Ok(items.iter().map(T::from_archived).collect())
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
