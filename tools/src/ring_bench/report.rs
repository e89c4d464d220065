//! Results of a run: the OSU-style table on stdout, the target check, the
//! CSV file and the PNG plot.

use super::util::{human_rate, human_size, median, Displaced};
use anyhow::{anyhow, Context, Result};
use std::path::Path;

/// Where the two sides of a run live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// Two threads of one process.
    Thread,
    /// Two processes (the ring and the roofs over a `/dev/shm` segment).
    Process,
}

impl Where {
    /// Lower-case label (CSV, table).
    pub fn label(self) -> &'static str {
        match self {
            Where::Thread => "thread",
            Where::Process => "process",
        }
    }
}

/// One row of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    /// The frame ring, batched (`commit_deferred` + `publish`, `release_deferred`
    /// + `release_pending`); in latency runs, the ring (one frame per message).
    Ring,
    /// The frame ring, `commit` and `release` per frame.
    RingFrame,
    /// The frame ring, batched as `Ring`, with neither thread pinned: the
    /// kernel's scheduler places them (what a job without `air` placement
    /// gets). Threads only.
    RingUnpinned,
    /// crossbeam-channel, bounded.
    Crossbeam,
    /// rtrb, a ring of bytes.
    Rtrb,
    /// The cross-core copy roof (16 slots, one flag each).
    CopyRoof,
    /// The cache-line ping-pong (one atomic each way).
    CacheLine,
}

impl Contender {
    /// Lower-case label (CSV, table, plot legend).
    pub fn label(self) -> &'static str {
        match self {
            Contender::Ring => "ring",
            Contender::RingFrame => "ring-frame",
            Contender::RingUnpinned => "ring-unpinned",
            Contender::Crossbeam => "crossbeam",
            Contender::Rtrb => "rtrb",
            Contender::CopyRoof => "copy-roof",
            Contender::CacheLine => "cache-line",
        }
    }
}

/// A throughput result: the median of several runs.
#[derive(Clone, Debug)]
pub struct ThroughputRow {
    /// Threads or processes.
    pub mode: Where,
    /// Who was measured.
    pub contender: Contender,
    /// Frame payload in bytes.
    pub size: usize,
    /// Median frames per second over the runs.
    pub frames_per_s: f64,
    /// Frames per second of each run, in repeat order (repeat `i` of every
    /// contender of a size ran back to back, under the same conditions).
    pub samples: Vec<f64>,
    /// Runs the median was taken over.
    pub runs: usize,
    /// Frames that arrived wrong, over all runs (must be 0).
    pub bad: u64,
    /// Run-queue wait and wall time of the two sides over all runs (a
    /// quiet machine shows ~0%; more means other work shared the CPUs).
    pub displaced: Displaced,
    /// One-way p50 of the cache-line probes taken before the runs of this
    /// size (median), in ns.
    pub line_ns: f64,
}

impl ThroughputRow {
    /// Payload megabytes (10^6 bytes) per second.
    pub fn mb_per_s(&self) -> f64 {
        self.frames_per_s * self.size as f64 / 1e6
    }

    /// `self` against `other` (same size and mode): the median over repeats
    /// of the per-repeat ratio of frames/s. Pairing runs that were taken back
    /// to back cancels most of the host's drift between repeats.
    pub fn ratio(&self, other: &ThroughputRow) -> f64 {
        let v: Vec<f64> = self
            .samples
            .iter()
            .zip(&other.samples)
            .filter(|(_, b)| **b > 0.0)
            .map(|(a, b)| a / b)
            .collect();
        if v.is_empty() {
            0.0
        } else {
            median(v)
        }
    }
}

/// A latency result: one-way times (half round trips) in ns.
#[derive(Clone, Debug)]
pub struct LatencyRow {
    /// Threads or processes.
    pub mode: Where,
    /// Who was measured.
    pub contender: Contender,
    /// Payload of each ping, in bytes.
    pub size: usize,
    /// Median one-way time, ns.
    pub p50_ns: f64,
    /// 99th percentile, ns.
    pub p99_ns: f64,
    /// 99.9th percentile, ns.
    pub p999_ns: f64,
    /// Largest, ns.
    pub max_ns: f64,
    /// Round trips recorded.
    pub rounds: u64,
    /// Run-queue wait and wall time of the two sides over all rounds.
    pub displaced: Displaced,
}

/// Everything one `air bench ring` run measured.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// Throughput rows in measurement order.
    pub throughput: Vec<ThroughputRow>,
    /// Latency rows in measurement order.
    pub latency: Vec<LatencyRow>,
}

impl Results {
    /// The throughput row of (`mode`, `c`, `size`), if measured.
    pub fn tput(&self, mode: Where, c: Contender, size: usize) -> Option<&ThroughputRow> {
        self.throughput
            .iter()
            .find(|r| r.mode == mode && r.contender == c && r.size == size)
    }

    /// The latency row of (`mode`, `c`), if measured.
    pub fn lat(&self, mode: Where, c: Contender) -> Option<&LatencyRow> {
        self.latency
            .iter()
            .find(|r| r.mode == mode && r.contender == c)
    }
}

/// The header line of the throughput table.
pub fn throughput_header() -> String {
    format!(
        "{:<9} {:<13} {:>12} {:>12} {:>8} {:>8} {:>8}",
        "# Size", "Contender", "MB/s", "Frames/s", "% roof", "line ns", "% runq"
    )
}

/// One line of the throughput table; `roof` is the copy roof's row of the
/// same size and mode, if measured.
pub fn throughput_line(r: &ThroughputRow, roof: Option<&ThroughputRow>) -> String {
    let pct = match roof {
        Some(f) if f.frames_per_s > 0.0 && r.contender != Contender::CopyRoof => {
            format!("{:.1}", 100.0 * r.ratio(f))
        }
        _ => String::new(),
    };
    let warn = if r.bad > 0 {
        format!("  ({} BAD FRAMES)", r.bad)
    } else {
        String::new()
    };
    format!(
        "{:<9} {:<13} {:>12.1} {:>12} {:>8} {:>8.0} {:>8.2}{warn}",
        human_size(r.size),
        r.contender.label(),
        r.mb_per_s(),
        human_rate(r.frames_per_s),
        pct,
        r.line_ns,
        r.displaced.pct()
    )
}

/// The header line of the latency table.
pub fn latency_header() -> String {
    format!(
        "{:<9} {:<13} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "# Mode", "Contender", "p50", "p99", "p99.9", "max", "rounds", "% runq"
    )
}

/// One line of the latency table.
pub fn latency_line(r: &LatencyRow) -> String {
    format!(
        "{:<9} {:<13} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9} {:>8.2}",
        r.mode.label(),
        r.contender.label(),
        r.p50_ns,
        r.p99_ns,
        r.p999_ns,
        r.max_ns,
        r.rounds,
        r.displaced.pct()
    )
}

/// The targets of issue 2, checked against `res`; one line each.
pub fn targets(res: &Results) -> Vec<String> {
    let mut out = Vec::new();
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    for mode in [Where::Thread, Where::Process] {
        if let Some(l) = res.lat(mode, Contender::CacheLine) {
            out.push(format!(
                "cache-line ping-pong one way ({}): p50 {:.0} ns",
                mode.label(),
                l.p50_ns
            ));
        }
    }
    for mode in [Where::Thread, Where::Process] {
        let mut worst: Option<(usize, f64)> = None;
        let mut sizes = Vec::new();
        for r in res
            .throughput
            .iter()
            .filter(|r| r.mode == mode && r.contender == Contender::Ring && r.size >= 65536)
        {
            if let Some(roof) = res.tput(mode, Contender::CopyRoof, r.size) {
                let q = r.ratio(roof);
                sizes.push(format!("{} {:.0}%", human_size(r.size), 100.0 * q));
                if worst.is_none_or(|(_, w)| q < w) {
                    worst = Some((r.size, q));
                }
            }
        }
        if let Some((s, q)) = worst {
            out.push(format!(
                "ring >= 90% of the copy roof at >= 64K ({}): worst {:.1}% at {} [{}] {}",
                mode.label(),
                100.0 * q,
                human_size(s),
                sizes.join(", "),
                verdict(q >= 0.9)
            ));
        }
    }
    for mode in [Where::Thread, Where::Process] {
        if let (Some(r), Some(c)) = (
            res.tput(mode, Contender::Ring, 64),
            res.tput(mode, Contender::Crossbeam, 64),
        ) {
            let q = r.ratio(c);
            out.push(format!(
                "ring batched >= 3x crossbeam frames/s at 64 B ({}): {} vs {}, paired median {:.2}x {}",
                mode.label(),
                human_rate(r.frames_per_s),
                human_rate(c.frames_per_s),
                q,
                verdict(q >= 3.0)
            ));
        }
    }
    // Pinned vs unpinned (threads): the same ring, the same run.
    let mut pairs = Vec::new();
    for r in res
        .throughput
        .iter()
        .filter(|r| r.mode == Where::Thread && r.contender == Contender::Ring)
    {
        if let Some(u) = res.tput(Where::Thread, Contender::RingUnpinned, r.size) {
            pairs.push(format!("{} {:.2}x", human_size(r.size), r.ratio(u)));
        }
    }
    if !pairs.is_empty() {
        out.push(format!(
            "ring pinned / unpinned frames/s (thread, paired medians): {}",
            pairs.join(", ")
        ));
    }
    if let (Some(p), Some(u)) = (
        res.lat(Where::Thread, Contender::Ring),
        res.lat(Where::Thread, Contender::RingUnpinned),
    ) {
        out.push(format!(
            "ring one way pinned vs unpinned (thread): p50 {:.0} vs {:.0} ns, p99 {:.0} vs {:.0} ns",
            p.p50_ns, u.p50_ns, p.p99_ns, u.p99_ns
        ));
    }
    for mode in [Where::Thread, Where::Process] {
        let ring = res.lat(mode, Contender::Ring);
        if let (Some(r), Some(l)) = (ring, res.lat(mode, Contender::CacheLine)) {
            let q = r.p50_ns / l.p50_ns;
            out.push(format!(
                "ring p50 one way <= 1.3x cache line ({}): {:.0} vs {:.0} ns = {:.2}x {}",
                mode.label(),
                r.p50_ns,
                l.p50_ns,
                q,
                verdict(q <= 1.3)
            ));
        }
        if let (Some(r), Some(c)) = (ring, res.lat(mode, Contender::Crossbeam)) {
            out.push(format!(
                "ring p50 one way <= crossbeam ({}): {:.0} vs {:.0} ns = {:.2}x {}",
                mode.label(),
                r.p50_ns,
                c.p50_ns,
                r.p50_ns / c.p50_ns,
                verdict(r.p50_ns <= c.p50_ns)
            ));
        }
    }
    out
}

#[derive(serde::Serialize)]
struct CsvRow<'a> {
    kind: &'a str,
    mode: &'a str,
    contender: &'a str,
    size_bytes: usize,
    mb_per_s: Option<f64>,
    frames_per_s: Option<f64>,
    pct_of_roof: Option<f64>,
    p50_ns: Option<f64>,
    p99_ns: Option<f64>,
    p999_ns: Option<f64>,
    max_ns: Option<f64>,
    line_ns: Option<f64>,
    samples: u64,
    bad_frames: u64,
    runq_pct: f64,
}

/// Writes every row to `path` as CSV (one header line; throughput rows
/// leave the latency columns empty and the other way round).
pub fn write_csv(res: &Results, path: &Path) -> Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("cannot write {}", path.display()))?;
    for r in &res.throughput {
        let roof = res
            .tput(r.mode, Contender::CopyRoof, r.size)
            .filter(|f| f.frames_per_s > 0.0 && r.contender != Contender::CopyRoof);
        w.serialize(CsvRow {
            kind: "throughput",
            mode: r.mode.label(),
            contender: r.contender.label(),
            size_bytes: r.size,
            mb_per_s: Some(r.mb_per_s()),
            frames_per_s: Some(r.frames_per_s),
            pct_of_roof: roof.map(|f| 100.0 * r.ratio(f)),
            p50_ns: None,
            p99_ns: None,
            p999_ns: None,
            max_ns: None,
            line_ns: Some(r.line_ns),
            samples: r.runs as u64,
            bad_frames: r.bad,
            runq_pct: r.displaced.pct(),
        })?;
    }
    for r in &res.latency {
        w.serialize(CsvRow {
            kind: "latency",
            mode: r.mode.label(),
            contender: r.contender.label(),
            size_bytes: r.size,
            mb_per_s: None,
            frames_per_s: None,
            pct_of_roof: None,
            p50_ns: Some(r.p50_ns),
            p99_ns: Some(r.p99_ns),
            p999_ns: Some(r.p999_ns),
            max_ns: Some(r.max_ns),
            line_ns: None,
            samples: r.rounds,
            bad_frames: 0,
            runq_pct: r.displaced.pct(),
        })?;
    }
    w.flush()?;
    Ok(())
}

/// Registers the bundled DejaVu Sans as "sans-serif" (once): plots render
/// text without system fonts.
pub fn register_fonts() {
    use plotters::style::FontStyle;
    static FONT: std::sync::Once = std::sync::Once::new();
    FONT.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold());
    });
}

/// Draws throughput (MB/s, log scale) against frame size (log 2) for every
/// contender, threads solid and processes dashed, with the one-way p50
/// latencies in the caption area; writes a PNG to `path`.
pub fn write_plot(res: &Results, path: &Path, title: &str) -> Result<()> {
    use plotters::prelude::*;
    use plotters::series::DashedLineSeries;

    register_fonts();
    if res.throughput.is_empty() {
        return Err(anyhow!("no throughput rows to plot"));
    }
    let err = |e: &dyn std::fmt::Display| anyhow!("plot {}: {e}", path.display());
    let sizes: Vec<usize> = res.throughput.iter().map(|r| r.size).collect();
    let xmin = (*sizes.iter().min().expect("rows") as f64).log2();
    let xmax = (*sizes.iter().max().expect("rows") as f64).log2();
    let rates: Vec<f64> = res
        .throughput
        .iter()
        .map(|r| r.mb_per_s())
        .filter(|v| *v > 0.0)
        .collect();
    let ymin = rates
        .iter()
        .cloned()
        .fold(f64::INFINITY, f64::min)
        .max(1e-3)
        * 0.6;
    let ymax = rates.iter().cloned().fold(0.0, f64::max).max(ymin * 10.0) * 1.6;

    let root = BitMapBackend::new(path, (1280, 1040)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (top, rest) = root.split_vertically(740);
    let (strip, bottom) = rest.split_vertically(220);
    let mut chart = ChartBuilder::on(&top)
        .caption(title, ("sans-serif", 24).into_font())
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d((xmin - 0.3)..(xmax + 0.3), (ymin..ymax).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("frame payload (bytes, log 2)")
        .y_desc("throughput (MB/s, log)")
        .x_labels(((xmax - xmin) as usize + 1).min(24))
        .x_label_formatter(&size_label)
        .y_labels(16)
        .y_label_formatter(&|y| {
            if *y >= 1000.0 {
                format!("{:.0}", y)
            } else {
                format!("{y}")
            }
        })
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|e| err(&e))?;

    let color = |c: Contender| match c {
        Contender::Ring => RGBColor(214, 39, 40),
        Contender::RingFrame => RGBColor(255, 127, 14),
        Contender::RingUnpinned => RGBColor(148, 103, 189),
        Contender::Crossbeam => RGBColor(31, 119, 180),
        Contender::Rtrb => RGBColor(44, 160, 44),
        Contender::CopyRoof | Contender::CacheLine => RGBColor(40, 40, 40),
    };
    for mode in [Where::Thread, Where::Process] {
        for c in [
            Contender::CopyRoof,
            Contender::Ring,
            Contender::RingFrame,
            Contender::Crossbeam,
            Contender::Rtrb,
        ] {
            let pts: Vec<(f64, f64)> = res
                .throughput
                .iter()
                .filter(|r| r.mode == mode && r.contender == c && r.mb_per_s() > 0.0)
                .map(|r| ((r.size as f64).log2(), r.mb_per_s()))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let col = color(c);
            let style = col.stroke_width(if c == Contender::Ring { 3 } else { 2 });
            let label = format!("{} ({})", c.label(), mode.label());
            match mode {
                Where::Thread => {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), style))
                        .map_err(|e| err(&e))?
                        .label(label)
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(3))
                        });
                    chart
                        .draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.filled())))
                        .map_err(|e| err(&e))?;
                }
                Where::Process => {
                    chart
                        .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                        .map_err(|e| err(&e))?
                        .label(label)
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 10, y)], col.stroke_width(3))
                        });
                    chart
                        .draw_series(pts.iter().map(|p| TriangleMarker::new(*p, 4, col.filled())))
                        .map_err(|e| err(&e))?;
                }
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|e| err(&e))?;

    // The cache-line probe taken with the runs of each size: when the host
    // moves the vCPUs apart, this jumps and every throughput drops with it.
    let lmax = res
        .throughput
        .iter()
        .map(|r| r.line_ns)
        .fold(0.0, f64::max)
        .max(100.0)
        * 1.6;
    let mut probe = ChartBuilder::on(&strip)
        .margin_left(16)
        .margin_right(16)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d((xmin - 0.3)..(xmax + 0.3), 0.0..lmax)
        .map_err(|e| err(&e))?;
    probe
        .configure_mesh()
        .x_labels(((xmax - xmin) as usize + 1).min(24))
        .x_label_formatter(&size_label)
        .y_labels(5)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("line ns")
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(|e| err(&e))?;
    for mode in [Where::Thread, Where::Process] {
        let mut pts: Vec<(f64, f64)> = res
            .throughput
            .iter()
            .filter(|r| r.mode == mode)
            .map(|r| ((r.size as f64).log2(), r.line_ns))
            .collect();
        pts.dedup();
        if pts.is_empty() {
            continue;
        }
        let col = if mode == Where::Thread {
            RGBColor(90, 90, 90)
        } else {
            RGBColor(160, 100, 200)
        };
        probe
            .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(format!(
                "cache-line probe one way, ns, with the {} runs",
                mode.label()
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(3)));
        probe
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.filled())))
            .map_err(|e| err(&e))?;
    }
    probe
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| err(&e))?;

    let mut y = 8;
    for mode in [Where::Thread, Where::Process] {
        let parts: Vec<String> = res
            .latency
            .iter()
            .filter(|r| r.mode == mode)
            .map(|r| format!("{} {:.0}", r.contender.label(), r.p50_ns))
            .collect();
        if parts.is_empty() {
            continue;
        }
        bottom
            .draw(&Text::new(
                format!(
                    "one-way latency p50, ns ({}, 8-byte ping-pong): {}",
                    mode.label(),
                    parts.join(",  ")
                ),
                (30, y),
                ("sans-serif", 17).into_font(),
            ))
            .map_err(|e| err(&e))?;
        y += 28;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// An x-axis label of the plots: the frame size at integral log2 values.
fn size_label(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-6 && *x >= 0.0 {
        human_size(2f64.powi(x.round() as i32) as usize)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: Where, c: Contender, size: usize, samples: &[f64]) -> ThroughputRow {
        ThroughputRow {
            mode,
            contender: c,
            size,
            frames_per_s: median(samples.to_vec()),
            samples: samples.to_vec(),
            runs: samples.len(),
            bad: 0,
            displaced: Displaced::default(),
            line_ns: 50.0,
        }
    }

    fn lat(mode: Where, c: Contender, p50: f64) -> LatencyRow {
        LatencyRow {
            mode,
            contender: c,
            size: 8,
            p50_ns: p50,
            p99_ns: p50 * 2.0,
            p999_ns: p50 * 3.0,
            max_ns: p50 * 10.0,
            rounds: 1000,
            displaced: Displaced::default(),
        }
    }

    #[test]
    fn paired_ratios_and_targets() {
        let t = Where::Thread;
        // The host halves every rate in repeat 2: pairing keeps the ratio at 0.95.
        let ring = row(t, Contender::Ring, 65536, &[95.0, 47.5, 95.0]);
        let roof = row(t, Contender::CopyRoof, 65536, &[100.0, 50.0, 100.0]);
        assert!((ring.ratio(&roof) - 0.95).abs() < 1e-9);
        let res = Results {
            throughput: vec![
                ring,
                roof,
                row(t, Contender::Ring, 64, &[30e6, 31e6, 29e6]),
                row(t, Contender::Crossbeam, 64, &[10e6, 11e6, 9e6]),
            ],
            latency: vec![
                lat(t, Contender::Ring, 60.0),
                lat(t, Contender::Crossbeam, 150.0),
                lat(t, Contender::CacheLine, 50.0),
            ],
        };
        let lines = targets(&res);
        let find = |what: &str| {
            lines
                .iter()
                .find(|l| l.contains(what))
                .unwrap_or_else(|| panic!("no line with {what:?} in {lines:#?}"))
                .clone()
        };
        assert!(find("copy roof at >= 64K (thread)").ends_with("PASS"));
        assert!(find("3x crossbeam").ends_with("PASS"));
        assert!(find("1.3x cache line (thread)").ends_with("PASS"));
        assert!(find("<= crossbeam (thread)").ends_with("PASS"));
        assert!(find("cache-line ping-pong one way (thread)").contains("50 ns"));

        let dir = std::env::temp_dir().join(format!("air-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("r.csv");
        write_csv(&res, &csv).unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(text.lines().count(), 1 + 4 + 3);
        assert!(text.lines().nth(1).unwrap().contains(",95.0,"), "{text}");
        let png = dir.join("r.png");
        write_plot(&res, &png, "test").unwrap();
        assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
