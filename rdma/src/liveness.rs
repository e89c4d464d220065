//! Noticing a lost rank: no blocking wait of the network tier is without a
//! liveness check.
//!
//! - Ranks on this host: their process must exist and not be a zombie
//!   (`kill(pid, 0)` and `/proc/<pid>/stat`).
//! - Ranks on other hosts: each rank's watcher puts a heartbeat counter into
//!   every other rank's window part every [`HEARTBEAT`]; a counter that has
//!   not moved for [`LOST_AFTER`] marks its rank lost, and so does an MPI
//!   error on the heartbeat put.
//!
//! Rings call [`Liveness::check`] while they find their ring empty or full;
//! the watcher thread ([`Liveness::watch`]) does the checks and the puts.
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

/// Which rank of the job is lost, if any; shared by every ring of a rank.
#[derive(Debug)]
pub struct Liveness {
    me: usize,
    /// 0 while every rank is alive, else lost rank + 1.
    lost: AtomicUsize,
    reason: Mutex<String>,
    pids: Vec<u32>,
    same_host: Vec<bool>,
    hosts: Vec<String>,
}

impl Liveness {
    /// Liveness of the ranks of `mpi`, as seen from this rank.
    pub fn new(mpi: &Mpi) -> Liveness {
        let me = mpi.rank();
        let my_host = mpi.host_of(me).to_string();
        Liveness {
            me,
            lost: AtomicUsize::new(0),
            reason: Mutex::new(String::new()),
            pids: (0..mpi.size()).map(|r| mpi.pid_of(r)).collect(),
            same_host: (0..mpi.size()).map(|r| mpi.host_of(r) == my_host).collect(),
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

    /// Checks every rank on this host once (process exists, not a zombie).
    pub fn check_local_pids(&self) {
        for (r, &pid) in self.pids.iter().enumerate() {
            if r != self.me && self.same_host[r] && !process_alive(pid) {
                self.mark_lost(r, format!("its process {pid} on {} is gone", self.hosts[r]));
            }
        }
    }

    /// The watcher loop, run on its own thread while the job's channels
    /// live: every [`HEARTBEAT`], puts this rank's counter into every rank
    /// on another host, checks their counters in this rank's part, checks
    /// the processes of this host's ranks, and calls into MPI's progress
    /// engine. Returns when `stop` is set, or `on_lost` returns true after
    /// a rank was found lost (the runtime's last resort when a blocking MPI
    /// call would never return).
    pub fn watch(
        &self,
        epoch: &Epoch<'_, '_>,
        stop: &AtomicBool,
        on_lost: &dyn Fn(&RdmaError) -> bool,
    ) {
        let win = epoch.window();
        let n = self.pids.len();
        let mut beat = [0u64; 1];
        let mut seen: Vec<(u64, Instant)> = vec![(0, Instant::now()); n];
        while !stop.load(Ordering::Acquire) {
            beat[0] += 1;
            let bytes: &[u8] = &beat_bytes(&beat);
            for r in 0..n {
                if r == self.me || self.same_host[r] || self.lost().is_some() {
                    continue;
                }
                let put = epoch
                    .put(bytes, r, self.me * HEARTBEAT_SLOT)
                    .and_then(|p| p.flush());
                if let Err(e) = put {
                    self.mark_lost(r, format!("heartbeat to it failed: {e}"));
                }
            }
            let _ = win.sync();
            let now = Instant::now();
            for (r, s) in seen.iter_mut().enumerate() {
                if r == self.me || self.same_host[r] || r * HEARTBEAT_SLOT + 8 > win.len() {
                    continue;
                }
                // SAFETY: the slot lies inside this rank's part (checked) and
                // is 8-aligned; it is only read here, as an atomic, and
                // written by rank r's puts of whole words.
                let v = unsafe {
                    (*(win.base().add(r * HEARTBEAT_SLOT) as *const AtomicU64))
                        .load(Ordering::Acquire)
                };
                if v != s.0 {
                    *s = (v, now);
                } else if now.duration_since(s.1) > LOST_AFTER {
                    self.mark_lost(
                        r,
                        format!(
                            "no heartbeat from {} for {} s",
                            self.hosts[r],
                            LOST_AFTER.as_secs()
                        ),
                    );
                }
            }
            self.check_local_pids();
            win.progress();
            if let Err(e) = self.check() {
                if on_lost(&e) {
                    return;
                }
            }
            std::thread::sleep(HEARTBEAT);
        }
    }
}

fn beat_bytes(w: &[u64; 1]) -> [u8; 8] {
    w[0].to_le_bytes()
}

/// Whether process `pid` exists and is not a zombie.
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid == std::process::id() {
        return true;
    }
    // SAFETY: signal 0 performs only the existence and permission check.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    // A killed child of the launcher stays a zombie until reaped.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next()),
            Some('Z') | Some('X')
        ),
        Err(_) => true,
    }
}
