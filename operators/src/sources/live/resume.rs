//! What a checkpoint keeps of a live input, and how a followed file
//! resumes at its offset.
//!
//! Standard input and TCP cannot be read again: a checkpoint records only
//! that the input was live ([`LivePosition`]), and a resumed run reads on
//! from what the sender sends then. A followed file (`--follow`) can: under
//! checkpoints its reader cuts the stream for barrier `n` at one byte
//! offset for every worker of the rank (a marker queued to each worker
//! behind the whole lines before it; [`air_runtime::dataflow::input_cuts_barriers`]),
//! each worker's source places barrier `n` exactly there, and the
//! checkpoint holds that offset with the file's identity
//! ([`FollowPosition`], the same in every part). A resumed run's reader
//! starts there, whatever the worker count: nothing is read twice, nothing
//! skipped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use super::{LiveFeed, LiveInput};

/// What a checkpoint keeps of a worker's share of a live input that
/// cannot be read again (standard input, TCP): the lines it had read, and
/// that it was live. On resume the source reads on from what the sender
/// sends then, so state and committed output stay consistent with each
/// other (they come from the same checkpoint), and the lines the job had
/// read after its last complete checkpoint are lost unless the sender
/// sends them again. Saved as 16 bytes: the tag [`LivePosition::TAG`] and
/// the line count (little-endian u64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LivePosition {
    /// Lines the worker had read (for reports; a resume does not use it).
    pub lines: u64,
}

impl LivePosition {
    /// The tag a live position's bytes start with.
    pub const TAG: [u8; 8] = *b"air-live";

    /// The saved form (16 bytes).
    pub fn save(&self) -> Vec<u8> {
        let mut v = Self::TAG.to_vec();
        v.extend_from_slice(&self.lines.to_le_bytes());
        v
    }

    /// What [`LivePosition::save`] made.
    ///
    /// # Errors
    /// Other bytes: the checkpoint's source read files or a generator, not
    /// a live input (the message says so).
    pub fn read(state: &[u8]) -> Result<LivePosition, String> {
        match state {
            [tag @ .., a, b, c, d, e, f, g, h] if tag == Self::TAG => Ok(LivePosition {
                lines: u64::from_le_bytes([*a, *b, *c, *d, *e, *f, *g, *h]),
            }),
            _ if FollowPosition::read(state).is_ok() => Err(
                "the checkpoint's source followed a file (--follow): resume with the same \
                 --follow, or --fresh"
                    .into(),
            ),
            _ => Err("the checkpoint's source did not read a live input \
                 (it read files or a generator): resume with the same input, or --fresh"
                .into()),
        }
    }

    /// The positions of a checkpoint taken at another worker count: each
    /// must be a live one; a live input has nothing to deal out.
    ///
    /// # Errors
    /// As [`LivePosition::read`].
    pub fn read_all(states: &[&[u8]]) -> Result<u64, String> {
        states
            .iter()
            .map(|s| LivePosition::read(s).map(|p| p.lines))
            .sum()
    }
}

/// Where a followed file's stream was cut for a checkpoint: the file
/// (device and inode, and which file at the path it was: 1 for the first,
/// one more after each rotation or truncation), the byte offset in it
/// where the lines after the cut start, that line's number, and a hash of
/// the 64 bytes before the cut (a file that replaced the old one under
/// the same inode differs there). Saved as [`FollowPosition::TAG`] and
/// seven little-endian u64s (the last 1 if the file had been read to its
/// end: the input ended).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowPosition {
    /// Byte offset in the file of the first byte after the cut.
    pub offset: u64,
    /// 1-based number of the line that starts there.
    pub line: u64,
    /// The file's device and inode.
    pub id: (u64, u64),
    /// Which file at the path (1-based).
    pub files: u64,
    /// FNV-1a of the (up to) 64 bytes before `offset`.
    pub tail: u64,
    /// The input had ended (idle end) when it was saved.
    pub ended: bool,
}

impl FollowPosition {
    /// The tag a followed file's position starts with.
    pub const TAG: [u8; 8] = *b"air-foll";

    /// The saved form (64 bytes).
    pub fn save(&self) -> Vec<u8> {
        let mut v = Self::TAG.to_vec();
        let fields = [
            self.offset,
            self.line,
            self.id.0,
            self.id.1,
            self.files,
            self.tail,
            u64::from(self.ended),
        ];
        for x in fields {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }

    /// What [`FollowPosition::save`] made.
    ///
    /// # Errors
    /// Other bytes (the message says what the checkpoint's source was).
    pub fn read(state: &[u8]) -> Result<FollowPosition, String> {
        if state.len() != 64 || state[..8] != Self::TAG {
            return Err(if state.starts_with(&LivePosition::TAG) {
                "the checkpoint's source read a live input that is not a followed file \
                 (standard input, TCP; or a followed file of a build that did not resume \
                 one at its offset): resume with the same input, or --fresh"
                    .into()
            } else {
                "the checkpoint's source did not follow a file (it read files or a \
                 generator): resume with the same input, or --fresh"
                    .into()
            });
        }
        let x = |i: usize| u64::from_le_bytes(state[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        Ok(FollowPosition {
            offset: x(0),
            line: x(1),
            id: (x(2), x(3)),
            files: x(4),
            tail: x(5),
            ended: x(6) != 0,
        })
    }
}

/// Where a followed file's reader starts.
#[derive(Debug)]
enum Start {
    /// Not known yet: no worker opened its share and no checkpoint was
    /// restored.
    Pending,
    /// From the file's start (`None`) or a checkpoint's cut.
    From(Option<FollowPosition>),
}

/// The cuts of a followed file under checkpoints, shared by its reader and
/// the rank's workers.
#[derive(Debug)]
pub(super) struct FollowCuts {
    /// Whether the input is a followed file (cuts are made only then).
    pub(super) enabled: bool,
    /// The newest barrier a worker asked a cut for.
    requested: AtomicU64,
    /// The newest barrier the reader cut the stream for.
    made: AtomicU64,
    start: Mutex<Start>,
    started: Condvar,
    /// The position after the last line, once the input ended.
    end: Mutex<Option<FollowPosition>>,
}

impl FollowCuts {
    pub(super) fn new(input: &LiveInput) -> FollowCuts {
        FollowCuts {
            enabled: matches!(input, LiveInput::Follow(_)),
            requested: AtomicU64::new(0),
            made: AtomicU64::new(0),
            start: Mutex::new(Start::Pending),
            started: Condvar::new(),
            end: Mutex::new(None),
        }
    }

    /// A worker asks for barrier `id`'s cut.
    pub(super) fn request(&self, id: u64) {
        self.requested.fetch_max(id, Ordering::AcqRel);
    }

    /// The barrier to cut the stream for now, if a worker asked for one
    /// newer than the last cut.
    pub(super) fn due(&self) -> Option<u64> {
        let want = self.requested.load(Ordering::Acquire);
        (self.enabled && want > self.made.load(Ordering::Acquire)).then_some(want)
    }

    /// The reader cut the stream for barrier `id`.
    pub(super) fn made(&self, id: u64) {
        self.made.fetch_max(id, Ordering::AcqRel);
    }

    /// Sets where the reader starts, if not set yet; `Err` if a restore
    /// set another position (parts of one checkpoint that disagree).
    fn decide(&self, at: Option<FollowPosition>) -> Result<(), String> {
        let mut s = self.start.lock().unwrap_or_else(|e| e.into_inner());
        match &*s {
            Start::Pending => {
                *s = Start::From(at);
                self.started.notify_all();
                Ok(())
            }
            Start::From(was) if *was == at || at.is_none() => Ok(()),
            Start::From(was) => Err(format!(
                "the checkpoint's parts disagree on the followed file's position \
                 ({was:?} and {at:?})"
            )),
        }
    }

    /// A worker opened its share: the reader starts from the file's start
    /// unless a checkpoint said otherwise.
    pub(super) fn opened(&self) {
        let _ = self.decide(None);
    }

    /// Waits until the start is known (the reader's first step).
    pub(super) fn wait_start(&self) -> Option<FollowPosition> {
        let mut s = self.start.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match &*s {
                Start::From(at) => return *at,
                Start::Pending => {
                    s = self.started.wait(s).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    /// The reader ended at `at` (after the last line).
    pub(super) fn ended(&self, at: FollowPosition) {
        *self.end.lock().unwrap_or_else(|e| e.into_inner()) = Some(at);
    }
}

impl LiveFeed {
    /// What a source of this feed saves outside a cut (at the install's
    /// check, and once its share ended): for a followed file the position
    /// after its last line once the input ended, else its start; for
    /// other inputs a [`LivePosition`] of `lines` read.
    pub fn save_position(&self, lines: u64) -> Vec<u8> {
        let f = &self.shared.follow;
        if !f.enabled {
            return LivePosition { lines }.save();
        }
        let end = *f.end.lock().unwrap_or_else(|e| e.into_inner());
        end.unwrap_or(FollowPosition {
            offset: 0,
            line: 1,
            id: (0, 0),
            files: 1,
            tail: 0,
            ended: false,
        })
        .save()
    }

    /// Restores a source of this feed from its checkpoint's state: a
    /// followed file's reader starts at the saved cut (the first restore
    /// of the rank sets it; every part holds the same); other inputs
    /// accept a [`LivePosition`] and read on.
    ///
    /// # Errors
    /// The state is not this kind of input's, or parts disagree.
    pub fn restore(&self, state: &[u8]) -> Result<(), String> {
        if !self.shared.follow.enabled {
            return LivePosition::read(state).map(|_| ());
        }
        let at = FollowPosition::read(state)?;
        self.shared.follow.decide(Some(at))
    }

    /// [`LiveFeed::restore`] from a checkpoint taken at another worker
    /// count: every part's position (a followed file's are one cut).
    ///
    /// # Errors
    /// As [`LiveFeed::restore`].
    pub fn rescale(&self, states: &[&[u8]]) -> Result<(), String> {
        if !self.shared.follow.enabled {
            return LivePosition::read_all(states).map(|_| ());
        }
        let mut at: Option<FollowPosition> = None;
        for s in states {
            let p = FollowPosition::read(s)?;
            // A part saved once its share ended holds the input's end;
            // the others the cut (the same in each).
            at = Some(match at {
                Some(a) if a.ended && !p.ended => p,
                Some(a) => a,
                None => p,
            });
        }
        match at {
            Some(p) => self.shared.follow.decide(Some(p)),
            None => Ok(()),
        }
    }

    /// Whether checkpoints resume this input at its offset (a followed
    /// file) rather than reading on from what comes (standard input, TCP).
    pub fn resumes_at_offset(&self) -> bool {
        self.shared.follow.enabled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_position_reads_back_and_others_are_refused() {
        let p = LivePosition { lines: 1 << 40 };
        assert_eq!(LivePosition::read(&p.save()), Ok(p));
        let e = LivePosition::read(&[0u8; 16]).unwrap_err();
        assert!(e.contains("did not read a live input"), "{e}");
        assert!(LivePosition::read(&p.save()[..15]).is_err());
        let two = [p.save(), LivePosition { lines: 2 }.save()];
        let states: Vec<&[u8]> = two.iter().map(|v| v.as_slice()).collect();
        assert_eq!(LivePosition::read_all(&states), Ok((1 << 40) + 2));
    }

    #[test]
    fn a_follow_position_reads_back_and_others_are_refused() {
        let p = FollowPosition {
            offset: 1 << 33,
            line: 77,
            id: (5, 1 << 50),
            files: 2,
            tail: 99,
            ended: true,
        };
        assert_eq!(FollowPosition::read(&p.save()), Ok(p));
        let e = FollowPosition::read(&LivePosition { lines: 3 }.save()).unwrap_err();
        assert!(e.contains("not a followed file"), "{e}");
        let e = FollowPosition::read(&[0u8; 64]).unwrap_err();
        assert!(e.contains("did not follow a file"), "{e}");
        let e = LivePosition::read(&p.save()).unwrap_err();
        assert!(e.contains("followed a file"), "{e}");
    }
}
