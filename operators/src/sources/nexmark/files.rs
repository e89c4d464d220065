//! `air gen nexmark`: a NEXMark stream written as a JSON-lines file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc;
use std::thread;

use super::beam::JsonForm;
use super::config::NexmarkConfig;
use super::full::full_event_with;
use super::generator::Model;
use crate::sources::pace::OutputPace;

/// Events per chunk of text a thread formats at a time (about 4 MB).
const CHUNK_EVENTS: u64 = 16 << 10;

/// Writes events `0..events` of the stream of `cfg` to `path` as JSON lines
/// (one [full event](super::full_event) per line, see
/// [`write_json_line`](super::write_json_line)) and returns how many it wrote. The same config
/// gives the same file.
///
/// Formatting runs on every available core: thread `t` of `T` formats
/// chunks `t, t + T, …` of 16 Ki events and the calling thread writes them
/// in order (at most 2 chunks queued per thread, so memory stays bounded).
///
/// # Errors
/// `InvalidInput` for an unbounded stream (`events: None`) or a config that
/// does not [validate](NexmarkConfig::validate); I/O errors, with the path
/// in the message.
pub fn gen_to_file(cfg: &NexmarkConfig, path: &Path) -> io::Result<u64> {
    gen_to_file_as(cfg, path, JsonForm::Ours)
}

/// [`gen_to_file`] in the JSON form `form`: ours, or Apache Beam's nested
/// one ([`write_beam_json_line`](super::write_beam_json_line)). The same
/// events either way.
///
/// # Errors
/// As [`gen_to_file`].
pub fn gen_to_file_as(cfg: &NexmarkConfig, path: &Path, form: JsonForm) -> io::Result<u64> {
    checked_total(cfg)?;
    let with_path = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let file = File::create(path).map_err(with_path)?;
    gen_to_writer_as(cfg, file, form).map_err(with_path)
}

/// The number of events of `cfg`, if it can be written out.
fn checked_total(cfg: &NexmarkConfig) -> io::Result<u64> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    let total = cfg
        .events
        .ok_or_else(|| invalid("an unbounded NEXMark stream cannot be written to a file".into()))?;
    cfg.validate()
        .map_err(|e| invalid(format!("invalid NEXMark config: {e}")))?;
    Ok(total)
}

/// [`gen_to_file_as`] into `out` (standard output, a pipe), buffered here
/// in 1 MiB; the same bytes as the file.
///
/// # Errors
/// As [`gen_to_file`], without a path in the message.
pub fn gen_to_writer_as(cfg: &NexmarkConfig, out: impl Write, form: JsonForm) -> io::Result<u64> {
    let total = checked_total(cfg)?;
    let mut file = BufWriter::with_capacity(1 << 20, out);
    let model = Model::new(cfg);
    let chunks = total.div_ceil(CHUNK_EVENTS);
    let threads = thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(chunks.max(1) as usize);
    let format = |chunk: u64| {
        let first = chunk * CHUNK_EVENTS;
        let mut text = Vec::with_capacity(CHUNK_EVENTS as usize * 256);
        for n in first..(first + CHUNK_EVENTS).min(total) {
            form.write_line(&full_event_with(&model, n), &mut text);
        }
        text
    };
    if threads <= 1 {
        for chunk in 0..chunks {
            file.write_all(&format(chunk))?;
        }
    } else {
        thread::scope(|s| -> io::Result<()> {
            let receivers: Vec<mpsc::Receiver<Vec<u8>>> = (0..threads)
                .map(|t| {
                    let (tx, rx) = mpsc::sync_channel(2);
                    let format = &format;
                    s.spawn(move || {
                        for chunk in (t as u64..chunks).step_by(threads) {
                            if tx.send(format(chunk)).is_err() {
                                return; // the writer stopped on an error
                            }
                        }
                    });
                    rx
                })
                .collect();
            for chunk in 0..chunks {
                let text = receivers[(chunk % threads as u64) as usize]
                    .recv()
                    .expect("a formatting thread panicked");
                file.write_all(&text)?;
            }
            Ok(())
        })?;
    }
    file.flush()?;
    Ok(total)
}

/// [`gen_to_writer_as`] for a live job: the events of `cfg` written to
/// `out` in batches paced by the wall clock at `rate` events per second
/// ([`OutputPace`]: about 5 ms of events a batch, each written and flushed
/// when due; `None`: as fast as `out` takes them, flushed per batch), on
/// the calling thread. `cfg.events: None` writes until `out` fails (a
/// reader that went away). The same bytes as [`gen_to_writer_as`] for the
/// same events. Returns how many events it wrote.
///
/// # Errors
/// `InvalidInput` for a config that does not
/// [validate](NexmarkConfig::validate); the first write error (with the
/// events written before it lost from the count).
pub fn gen_to_writer_paced(
    cfg: &NexmarkConfig,
    mut out: impl Write,
    form: JsonForm,
    rate: Option<u64>,
) -> io::Result<u64> {
    cfg.validate().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid NEXMark config: {e}"),
        )
    })?;
    let total = cfg.events.unwrap_or(u64::MAX);
    let model = Model::new(cfg);
    let pace = OutputPace::new(rate);
    let per_batch = pace.map_or(4096, |p| p.batch(4096)) as u64;
    let mut text = Vec::with_capacity(per_batch as usize * 256);
    let mut n = 0u64;
    while n < total {
        if let Some(p) = &pace {
            p.wait_for(n);
        }
        let end = n.saturating_add(per_batch).min(total);
        text.clear();
        for k in n..end {
            form.write_line(&full_event_with(&model, k), &mut text);
        }
        out.write_all(&text)?;
        out.flush()?;
        n = end;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paced writer writes the bytes of the parallel one, in both
    /// forms, and takes at least the time its rate gives.
    #[test]
    fn paced_writer_writes_the_same_bytes() {
        let cfg = NexmarkConfig {
            events: Some(3_000),
            ..NexmarkConfig::default()
        };
        for form in [JsonForm::Ours, JsonForm::Beam] {
            let mut want = Vec::new();
            assert_eq!(gen_to_writer_as(&cfg, &mut want, form).unwrap(), 3_000);
            let mut got = Vec::new();
            assert_eq!(
                gen_to_writer_paced(&cfg, &mut got, form, None).unwrap(),
                3_000
            );
            assert_eq!(got, want);
            let t = std::time::Instant::now();
            let mut paced = Vec::new();
            let n = gen_to_writer_paced(&cfg, &mut paced, form, Some(30_000)).unwrap();
            assert_eq!(n, 3_000);
            assert_eq!(paced, want);
            // The last batch (at event 2850) is due at 95 ms.
            assert!(t.elapsed().as_millis() >= 94, "{:?}", t.elapsed());
        }
    }
}
