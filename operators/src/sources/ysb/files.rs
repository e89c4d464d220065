//! `air gen ysb`: a YSB data set on disk (events as JSON lines plus the
//! campaign file).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::campaigns::{Campaigns, CampaignsFormat};
use super::event::YsbEvent;
use super::generator::{EventTimeMode, YsbGenConfig, YsbGenerator};
use super::json::write_json_line;
use crate::sources::pace::OutputPace;

/// Options of [`gen_to_files`] and [`gen_to_writer`] beyond the event count and seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenFilesOptions {
    /// Number of campaigns (YSB: 100).
    pub num_campaigns: usize,
    /// Ads per campaign (YSB: 10).
    pub ads_per_campaign: usize,
    /// Event times of the file. Default: deterministic, starting at
    /// 1461024576817 ms (an event time of YSB's own data) at 100 000
    /// events/s of event time.
    pub event_time: EventTimeMode,
    /// Format of the campaign file (default [`CampaignsFormat::Mapping`]).
    pub campaigns_format: CampaignsFormat,
    /// Wall-clock pace of the output, events per second (default `None`:
    /// as fast as it can be written). Paced output is written and flushed
    /// in small batches (about 200 a second), each when it is due, so a
    /// live job reading it sees a steady stream.
    pub rate: Option<u64>,
}

impl Default for GenFilesOptions {
    fn default() -> GenFilesOptions {
        GenFilesOptions {
            num_campaigns: Campaigns::DEFAULT_CAMPAIGNS,
            ads_per_campaign: Campaigns::DEFAULT_ADS_PER_CAMPAIGN,
            event_time: EventTimeMode::Deterministic {
                start_ms: 1_461_024_576_817,
                events_per_s: 100_000,
            },
            campaigns_format: CampaignsFormat::Mapping,
            rate: None,
        }
    }
}

/// What [`gen_to_files`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenSummary {
    /// Events written.
    pub events: u64,
    /// Bytes of the event file.
    pub bytes: u64,
    /// The campaigns written to the campaign file (and drawn from).
    pub campaigns: Campaigns,
}

/// A failure of [`gen_to_files`]: the file and the I/O error.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct GenError {
    /// The file being written.
    pub path: PathBuf,
    /// The I/O error.
    #[source]
    pub source: io::Error,
}

/// Writes `events` YSB events as JSON lines to `out` and the campaigns they
/// draw from to `campaigns_out`, deterministically from `seed`: campaigns
/// are `Campaigns::generate(num_campaigns, ads_per_campaign, seed)` and
/// events the stream of a one-worker [`YsbGenerator`] with that seed (the
/// same file for the same arguments).
pub fn gen_to_files(
    events: u64,
    seed: u64,
    out: &Path,
    campaigns_out: &Path,
    opts: &GenFilesOptions,
) -> Result<GenSummary, GenError> {
    gen_events(events, seed, EventsTo::File(out), Some(campaigns_out), opts)
}

/// [`gen_to_files`] with the events written to `out` (standard output, a
/// pipe, a socket) instead of a file; `out_name` names it in errors; the
/// campaign file is written only if `campaigns_out` names one. The same
/// bytes as the file. `events: u64::MAX` writes until `out` fails (a
/// reader that went away).
///
/// # Errors
/// As [`gen_to_files`].
pub fn gen_to_writer(
    events: u64,
    seed: u64,
    out: &mut dyn Write,
    out_name: &Path,
    campaigns_out: Option<&Path>,
    opts: &GenFilesOptions,
) -> Result<GenSummary, GenError> {
    gen_events(
        events,
        seed,
        EventsTo::Writer(out_name, out),
        campaigns_out,
        opts,
    )
}

/// Where the events go: a file created at the path, or a writer (and its
/// name for errors).
enum EventsTo<'a> {
    File(&'a Path),
    Writer(&'a Path, &'a mut dyn Write),
}

fn gen_events(
    events: u64,
    seed: u64,
    out: EventsTo<'_>,
    campaigns_out: Option<&Path>,
    opts: &GenFilesOptions,
) -> Result<GenSummary, GenError> {
    let campaigns = Campaigns::generate(opts.num_campaigns, opts.ads_per_campaign, seed);
    if let Some(campaigns_out) = campaigns_out {
        campaigns
            .write(campaigns_out, opts.campaigns_format)
            .map_err(|source| GenError {
                path: campaigns_out.to_path_buf(),
                source,
            })?;
    }
    let out_path = match &out {
        EventsTo::File(p) | EventsTo::Writer(p, _) => p.to_path_buf(),
    };
    let err = |source| GenError {
        path: out_path.clone(),
        source,
    };
    let config = YsbGenConfig::new(seed, &campaigns)
        .with_events(Some(events))
        .with_event_time(opts.event_time);
    let mut gen = YsbGenerator::new(&config, 0, 1);
    let mut file: Box<dyn Write + '_> = match out {
        EventsTo::File(path) => Box::new(File::create(path).map_err(err)?),
        EventsTo::Writer(_, w) => Box::new(w),
    };
    let mut batch = vec![YsbEvent::default(); 4096];
    let mut text = Vec::with_capacity(batch.len() * 300);
    let mut bytes = 0u64;
    // Paced: batches of about 5 ms of events, each written when due.
    let pace = OutputPace::new(opts.rate);
    let per_batch = pace.map_or(batch.len(), |p| p.batch(batch.len()));
    loop {
        if let Some(p) = &pace {
            p.wait_for(gen.generated());
        }
        let n = gen.fill(&mut batch[..per_batch]);
        if n == 0 {
            break;
        }
        text.clear();
        for e in &batch[..n] {
            write_json_line(e, &mut text);
        }
        file.write_all(&text).map_err(err)?;
        if pace.is_some() {
            file.flush().map_err(err)?;
        }
        bytes += text.len() as u64;
    }
    file.flush().map_err(err)?;
    Ok(GenSummary {
        events: gen.generated(),
        bytes,
        campaigns,
    })
}
