//! Noticing a lost rank: no blocking wait of the network tier is without a
//! liveness check.
//!
//! - Ranks on this host: their process must exist, not be a zombie, and not
//!   stay stopped (SIGSTOP) for [`LOST_AFTER`] (`kill(pid, 0)` and the state
//!   in `/proc/<pid>/stat`).
//! - Ranks on other hosts: each rank's watcher puts a heartbeat counter into
//!   every such rank's window part every [`HEARTBEAT`] (request-based puts
//!   that are tested, never waited for, so a dead target cannot block the
//!   watcher); a counter that has not moved for [`LOST_AFTER`] marks its rank
//!   lost, and so does a heartbeat that has not completed locally by then, or
//!   an MPI error.
//!
//! Rings call [`Liveness::check`] while they find their ring empty or full;
//! two threads per rank keep it current: [`Liveness::beat_loop`] sends the
//! heartbeats (MPI calls) and [`Liveness::check_loop`] does the checks
//! (no MPI call, so a blocked MPI cannot hide a lost rank).
//! Heartbeats take the first `heartbeat_bytes(size)` bytes of every part.

use crate::error::{RdmaError, Result};
use crate::win::Epoch;
use crate::world::Mpi;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Interval between two heartbeats of a rank.
pub const HEARTBEAT: Duration = Duration::from_millis(100);
/// A rank on another host whose heartbeat has not moved for this long is lost.
pub const LOST_AFTER: Duration = Duration::from_secs(5);
/// Bytes of one heartbeat slot (a cache line per source rank).
pub const HEARTBEAT_SLOT: usize = 64;

/// Bytes at the start of every window part that hold the heartbeats of
/// `ranks` ranks.
pub const fn heartbeat_bytes(ranks: usize) -> usize {
    ranks * HEARTBEAT_SLOT
}

/// Sleeps for `d`, or until `stop` is set and this thread unparked
/// (`Thread::unpark`), whichever comes first: the loops below nap between
/// rounds, and a job's end must not wait out a whole [`HEARTBEAT`] to join
/// them (that wait was up to 100 ms of every MPI job's run time).
pub fn nap(stop: &AtomicBool, d: Duration) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::park_timeout(until - now);
    }
}

/// Which rank of the job is lost, if any; shared by every ring of a rank.
#[derive(Debug)]
pub struct Liveness {
    me: usize,
    /// 0 while every rank is alive, else lost rank + 1.
    lost: AtomicUsize,
    reason: Mutex<String>,
    pids: Vec<u32>,
    /// Rank r runs on this host: its process can be checked directly.
    same_host: Vec<bool>,
    /// Rank r is watched by heartbeats (it is on another node, real or
    /// emulated).
    beats: Vec<bool>,
    hosts: Vec<String>,
}

impl Liveness {
    /// Liveness of the ranks of `mpi`, as seen from this rank; ranks on
    /// other hosts are watched by heartbeats.
    pub fn new(mpi: &Mpi) -> Liveness {
        Liveness::with_nodes(mpi, &|_| true)
    }

    /// As [`Liveness::new`], but ranks for which `same_node` is false are
    /// watched by heartbeats even on this host (nodes emulated on one
    /// machine).
    pub fn with_nodes(mpi: &Mpi, same_node: &dyn Fn(usize) -> bool) -> Liveness {
        let me = mpi.rank();
        let my_host = mpi.host_of(me).to_string();
        let same_host: Vec<bool> = (0..mpi.size()).map(|r| mpi.host_of(r) == my_host).collect();
        Liveness {
            me,
            lost: AtomicUsize::new(0),
            reason: Mutex::new(String::new()),
            pids: (0..mpi.size()).map(|r| mpi.pid_of(r)).collect(),
            beats: (0..mpi.size())
                .map(|r| !(same_host[r] && same_node(r)))
                .collect(),
            same_host,
            hosts: (0..mpi.size())
                .map(|r| mpi.host_of(r).to_string())
                .collect(),
        }
    }

    /// `Err(RankLost)` once a rank is known to be lost.
    #[inline]
    pub fn check(&self) -> Result<()> {
        match self.lost.load(Ordering::Acquire) {
            0 => Ok(()),
            r => Err(RdmaError::RankLost {
                rank: r - 1,
                reason: self
                    .reason
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
            }),
        }
    }

    /// The lost rank, if any.
    pub fn lost(&self) -> Option<usize> {
        self.lost.load(Ordering::Acquire).checked_sub(1)
    }

    /// Records that `rank` is lost (the first report wins).
    pub fn mark_lost(&self, rank: usize, reason: String) {
        let mut g = self.reason.lock().unwrap_or_else(|e| e.into_inner());
        if self.lost.load(Ordering::Acquire) == 0 {
            *g = reason;
            self.lost.store(rank + 1, Ordering::Release);
        }
    }

    /// Checks every rank on this host once: its process must exist, not be
    /// a zombie, and not stay stopped (SIGSTOP / SIGTSTP, `T` in
    /// `/proc/<pid>/stat`) for more than [`LOST_AFTER`]; `stopped_since[r]`
    /// (one entry per rank) keeps when rank r was first seen stopped. A rank
    /// held by a debugger (`t`, tracing stop) is not lost.
    pub fn check_local_pids(&self, stopped_since: &mut [Option<Instant>]) {
        let now = Instant::now();
        for (r, &pid) in self.pids.iter().enumerate() {
            if r == self.me || !self.same_host[r] {
                continue;
            }
            match process_state(pid) {
                ProcessState::Gone => {
                    self.mark_lost(r, format!("its process {pid} on {} is gone", self.hosts[r]));
                }
                ProcessState::Stopped => {
                    let since = *stopped_since[r].get_or_insert(now);
                    if now.duration_since(since) > LOST_AFTER {
                        self.mark_lost(
                            r,
                            format!(
                                "its process {pid} on {} has been stopped (SIGSTOP) for {} s",
                                self.hosts[r],
                                LOST_AFTER.as_secs()
                            ),
                        );
                    }
                }
                ProcessState::Running => stopped_since[r] = None,
            }
        }
    }

    /// The heartbeat loop, run on its own thread while the job's channels
    /// live: every [`HEARTBEAT`], puts this rank's counter into every rank
    /// watched by heartbeats (request-based puts, tested, never waited for)
    /// and calls into MPI's progress engine. Returns when `stop` is set (at
    /// once if the setter then unparks this thread; see [`nap`]).
    ///
    /// It makes MPI calls, so it can be held up by an MPI library that
    /// serializes threads (MPICH's global lock, held by a worker blocked in
    /// a flush to a stopped rank): the checks are in [`Liveness::check_loop`],
    /// which makes none.
    pub fn beat_loop(&self, epoch: &Epoch<'_, '_>, stop: &AtomicBool) {
        let win = epoch.window();
        let n = self.pids.len();
        // Heartbeat buffers live forever (a request may outlive the loop).
        let beats: &'static mut [u64] = Box::leak(vec![0u64; n].into_boxed_slice());
        let mut reqs: Vec<Option<(crate::win::Request, Instant)>> = (0..n).map(|_| None).collect();
        let mut counter = 0u64;
        while !stop.load(Ordering::Acquire) {
            counter += 1;
            let now = Instant::now();
            for (r, pending) in reqs.iter_mut().enumerate() {
                if r == self.me || !self.beats[r] || self.lost().is_some() {
                    continue;
                }
                // The previous heartbeat to r must have completed locally.
                if let Some((req, since)) = pending {
                    match req.test() {
                        Ok(true) => *pending = None,
                        Ok(false) if now.duration_since(*since) > LOST_AFTER => {
                            self.mark_lost(
                                r,
                                format!(
                                    "a heartbeat to it did not complete in {} s",
                                    LOST_AFTER.as_secs()
                                ),
                            );
                            continue;
                        }
                        Ok(false) => continue,
                        Err(e) => {
                            self.mark_lost(r, format!("heartbeat to it failed: {e}"));
                            continue;
                        }
                    }
                }
                // SAFETY: slot r of the leaked buffer is written only here,
                // while no request reads it (the previous one completed).
                let slot: &'static [u8] = unsafe {
                    let p = beats.as_mut_ptr().add(r);
                    *p = counter;
                    std::slice::from_raw_parts(p.cast::<u8>(), 8)
                };
                match epoch.rput(slot, r, self.me * HEARTBEAT_SLOT) {
                    Ok(req) => *pending = Some((req, now)),
                    Err(e) => self.mark_lost(r, format!("heartbeat to it failed: {e}")),
                }
            }
            win.progress();
            nap(stop, HEARTBEAT);
        }
    }

    /// The check loop, run on its own thread while the job's channels live;
    /// it makes no MPI call, so nothing inside MPI can hold it up. Every
    /// [`HEARTBEAT`] it reads the heartbeat counters in this rank's part of
    /// `window` (a counter that has not moved for [`LOST_AFTER`] marks its
    /// rank lost) and checks the processes of this host's ranks. Once a
    /// rank is lost it calls `on_lost` every round; it returns when `stop` is
    /// set (at once if the setter then unparks this thread; see [`nap`]) or
    /// `on_lost` returns true.
    pub fn check_loop(
        &self,
        window: &crate::win::Window<'_>,
        stop: &AtomicBool,
        on_lost: &dyn Fn(&RdmaError) -> bool,
    ) {
        let n = self.pids.len();
        let mut seen: Vec<(u64, Instant)> = vec![(0, Instant::now()); n];
        let mut stopped_since: Vec<Option<Instant>> = vec![None; n];
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            for (r, s) in seen.iter_mut().enumerate() {
                if r == self.me || !self.beats[r] || r * HEARTBEAT_SLOT + 8 > window.len() {
                    continue;
                }
                // SAFETY: the slot lies inside this rank's part (checked) and
                // is 8-aligned; it is only read here, as an atomic, and
                // written by rank r's puts of whole words. (x86-64 and
                // aarch64 loads see remote stores without MPI_Win_sync; a
                // late view only delays detection.)
                let v = unsafe {
                    (*(window.base().add(r * HEARTBEAT_SLOT) as *const AtomicU64))
                        .load(Ordering::Acquire)
                };
                if v != s.0 {
                    *s = (v, now);
                } else if now.duration_since(s.1) > LOST_AFTER {
                    self.mark_lost(
                        r,
                        format!(
                            "no heartbeat from its process {} on {} for {} s",
                            self.pids[r],
                            self.hosts[r],
                            LOST_AFTER.as_secs()
                        ),
                    );
                }
            }
            self.check_local_pids(&mut stopped_since);
            if let Err(e) = self.check() {
                if on_lost(&e) {
                    return;
                }
            }
            nap(stop, HEARTBEAT);
        }
    }
}

/// What [`process_state`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    /// No such process, or a zombie (killed, not yet reaped).
    Gone,
    /// Stopped by job control (SIGSTOP/SIGTSTP: state `T`).
    Stopped,
    /// Anything else (running, sleeping, held by a debugger).
    Running,
}

/// The state of process `pid` on this host (`kill(pid, 0)`, then the state
/// letter of `/proc/<pid>/stat`); this process and pid 0 are `Running`.
pub fn process_state(pid: u32) -> ProcessState {
    if pid == 0 || pid == std::process::id() {
        return ProcessState::Running;
    }
    // SAFETY: signal 0 performs only the existence and permission check.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return ProcessState::Gone;
    }
    // A killed child of the launcher stays a zombie until reaped.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => match s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
        {
            Some('Z') | Some('X') => ProcessState::Gone,
            Some('T') => ProcessState::Stopped,
            _ => ProcessState::Running,
        },
        Err(_) => ProcessState::Running,
    }
}

/// Whether process `pid` exists and is not a zombie.
pub fn process_alive(pid: u32) -> bool {
    process_state(pid) != ProcessState::Gone
}
