//! `peers-ysb`: YSB on `air`, timely-dataflow and a crossbeam-channel
//! pipeline, side by side in one run: same generator, same job, same worker
//! count; engines interleaved over the repeats; medians; every run's rows
//! checked against `air`'s.

use air_peers::{air_run, channel_ysb, timely_ysb, Mode, Row, YsbSpec};
use anyhow::Context;
use clap::Parser;
use std::io::Write;
use std::path::PathBuf;

/// YSB on air and its peers (timely-dataflow, a crossbeam-channel pipeline)
/// in one run: events/s medians and the ratio of air to each peer.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Worker threads of every engine.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Events of the whole job.
    #[arg(long, default_value_t = 200_000_000)]
    events: u64,
    /// Runs of each engine (interleaved); medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Generator seed (`air run ysb --seed`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the table here as CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// The `air` binary (default: `air` beside this executable).
    #[arg(long)]
    air: Option<PathBuf>,
    /// Engines to run (air always runs: it gives the expected rows and the
    /// ratios).
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["timely", "crossbeam", "roof"])]
    peers: Vec<Engine>,
    /// How the aggregate reaches the owner: the modes to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["pre-aggregated", "every-event"])]
    modes: Vec<ModeArg>,
}

/// A mode on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ModeArg {
    /// Local pre-aggregation per (window, campaign), partials exchanged
    /// (`air run ysb`).
    PreAggregated,
    /// Every view crosses the exchange (`air run ysb --shuffle`).
    EveryEvent,
}

impl ModeArg {
    fn mode(self) -> Mode {
        match self {
            ModeArg::PreAggregated => Mode::PreAggregated,
            ModeArg::EveryEvent => Mode::EveryEvent,
        }
    }
}

/// An engine.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    /// `air run ysb` (the binary).
    Air,
    /// timely-dataflow.
    Timely,
    /// The crossbeam-channel pipeline.
    Crossbeam,
    /// The generator roof: generator, filter and lookup only, no window,
    /// no exchange (`air_peers::generator_roof`); no rows to check.
    Roof,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Air => "air",
            Engine::Timely => "timely",
            Engine::Crossbeam => "crossbeam-channel",
            Engine::Roof => "generator only",
        }
    }
}

/// One (engine, mode) line of the table.
struct Line {
    engine: Engine,
    /// `None` for the generator roof.
    mode: Option<Mode>,
    runs: Vec<f64>,
}

impl Line {
    fn mode_name(&self) -> &'static str {
        self.mode.map_or("no window, no exchange", Mode::name)
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The first row where `got` and `want` differ, for the error message.
fn first_difference(got: &[Row], want: &[Row]) -> String {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            return format!("row {i}: got {g:?}, expected {w:?}");
        }
    }
    format!("{} rows, expected {}", got.len(), want.len())
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    anyhow::ensure!(a.workers > 0, "--workers must be at least 1");
    anyhow::ensure!(a.repeats > 0, "--repeats must be at least 1");
    let air = air_run::locate(a.air.as_deref())?;
    // An unwritable --csv fails now, not after every run.
    if let Some(p) = &a.csv {
        std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?;
    }
    let spec = YsbSpec {
        seed: a.seed,
        ..YsbSpec::new(a.events, a.workers)
    };
    let mut lines: Vec<Line> = Vec::new();
    anyhow::ensure!(!a.modes.is_empty(), "--modes: name at least one mode");
    for mode in Mode::ALL
        .into_iter()
        .filter(|m| a.modes.iter().any(|x| x.mode() == *m))
    {
        lines.push(Line {
            engine: Engine::Air,
            mode: Some(mode),
            runs: Vec::new(),
        });
        for &e in &a.peers {
            if e != Engine::Air && e != Engine::Roof {
                lines.push(Line {
                    engine: e,
                    mode: Some(mode),
                    runs: Vec::new(),
                });
            }
        }
    }
    if a.peers.contains(&Engine::Roof) {
        lines.push(Line {
            engine: Engine::Roof,
            mode: None,
            runs: Vec::new(),
        });
    }
    eprintln!(
        "YSB, {} events, {} workers, synthetic event time, seed {}; air: {}",
        a.events,
        a.workers,
        a.seed,
        air.display()
    );
    let mut expected: Option<Vec<Row>> = None;
    for rep in 0..a.repeats {
        for line in lines.iter_mut() {
            let what = format!(
                "{} ({}), run {}",
                line.engine.name(),
                line.mode_name(),
                rep + 1
            );
            let (rows, events, eps, late) = match (line.engine, line.mode) {
                (Engine::Roof, _) | (_, None) => {
                    let r = air_peers::generator_roof(&spec);
                    anyhow::ensure!(r.events == a.events, "{what}: {} events", r.events);
                    let eps = r.events_per_s();
                    eprintln!("{what}: {:.1} M events/s ({} views)", eps / 1e6, r.late);
                    line.runs.push(eps);
                    continue;
                }
                (Engine::Air, Some(mode)) => {
                    let r = air_run::run(&air, &spec, mode)?;
                    (r.rows, r.events, r.events_per_s, r.late)
                }
                (Engine::Timely, Some(mode)) => {
                    let r = timely_ysb::run(&spec, mode)?;
                    let eps = r.events_per_s();
                    (r.rows, r.events, eps, r.late)
                }
                (Engine::Crossbeam, Some(mode)) => {
                    let r = channel_ysb::run(&spec, mode)?;
                    let eps = r.events_per_s();
                    (r.rows, r.events, eps, r.late)
                }
            };
            anyhow::ensure!(
                events == a.events,
                "{what}: {events} events, expected {}",
                a.events
            );
            anyhow::ensure!(late == 0, "{what}: {late} late events, expected none");
            match &expected {
                None => {
                    anyhow::ensure!(!rows.is_empty(), "{what}: no rows");
                    expected = Some(rows);
                }
                Some(want) => anyhow::ensure!(
                    &rows == want,
                    "{what}: rows differ from air's: {}",
                    first_difference(&rows, want)
                ),
            }
            eprintln!("{what}: {:.1} M events/s, rows match", eps / 1e6);
            line.runs.push(eps);
        }
    }
    let rows = expected.map_or(0, |r| r.len());
    // The roof is compared with air's pre-aggregated run.
    let air_median = |mode: Option<Mode>| {
        let mode = mode.unwrap_or(Mode::PreAggregated);
        lines
            .iter()
            .find(|l| l.engine == Engine::Air && l.mode == Some(mode))
            .map_or(f64::NAN, |l| median(&l.runs))
    };
    println!(
        "YSB, {} events, {} workers, median of {} (all {rows} rows equal to air's in every run)",
        a.events, a.workers, a.repeats
    );
    println!(
        "{:<18} {:<22} {:>14} {:>16} {:>10}   runs (M events/s)",
        "engine", "mode", "events/s", "M/s per worker", "air/peer"
    );
    let mut csv = csv::Writer::from_writer(Vec::new());
    csv.write_record([
        "engine",
        "mode",
        "workers",
        "events",
        "repeats",
        "median_events_per_s",
        "m_events_per_s_per_worker",
        "ratio_air_over_peer",
        "runs_events_per_s",
    ])?;
    for l in &lines {
        let m = median(&l.runs);
        // (No ratio for the roof when air's pre-aggregated run was not asked for.)
        let ratio = Some(air_median(l.mode) / m).filter(|r| r.is_finite());
        let runs: Vec<String> = l.runs.iter().map(|r| format!("{:.1}", r / 1e6)).collect();
        println!(
            "{:<18} {:<22} {:>12.1} M {:>16.1} {:>10}   {}",
            l.engine.name(),
            l.mode_name(),
            m / 1e6,
            m / 1e6 / a.workers as f64,
            ratio.map_or("-".to_string(), |r| format!("{r:.2}x")),
            runs.join(" / ")
        );
        let runs_raw: Vec<String> = l.runs.iter().map(|r| format!("{r:.0}")).collect();
        csv.write_record([
            l.engine.name().to_string(),
            l.mode_name().to_string(),
            a.workers.to_string(),
            a.events.to_string(),
            a.repeats.to_string(),
            format!("{m:.0}"),
            format!("{:.3}", m / 1e6 / a.workers as f64),
            ratio.map_or(String::new(), |r| format!("{r:.4}")),
            runs_raw.join(";"),
        ])?;
    }
    if let Some(p) = &a.csv {
        std::fs::File::create(p)
            .and_then(|mut f| f.write_all(&csv.into_inner().map_err(|e| e.into_error())?))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
