//! Plots shared by the queries (plotters, with the bundled DejaVu font).

use air_runtime::metrics::Histogram;
use std::path::Path;

/// The latency distribution of a run as HdrHistogram's percentile plot:
/// latency (ms, y) against the percentile on a "nines" axis (x =
/// −log10(1 − q): 0 = 0%, 1 = 90%, 2 = 99%, 3 = 99.9%, …), up to the
/// largest sample; p50, p99 and max are named in the caption. PNG at `path`.
///
/// # Errors
/// An empty histogram, or a file that cannot be written (the message says
/// which).
pub fn write_latency_cdf(h: &Histogram<u64>, path: &Path, title: &str) -> Result<(), String> {
    use plotters::prelude::*;
    air_tools::ring_bench::register_fonts();
    let e = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    if h.is_empty() {
        return Err(format!("{}: no latency samples to plot", path.display()));
    }
    // Points at every distinct percentile step HdrHistogram reports.
    let n = h.len() as f64;
    let mut pts: Vec<(f64, f64)> = Vec::new();
    let mut seen = 0u64;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        let q = seen as f64 / n;
        let x = if q >= 1.0 {
            (n.log10() + 0.3).max(1.0)
        } else {
            -(1.0 - q).log10()
        };
        pts.push((x, h.highest_equivalent(v.value_iterated_to()) as f64));
    }
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max).ceil().max(2.0);
    let ymax = (h.max() as f64 * 1.15).max(1.0);
    let root = BitMapBackend::new(path, (1100, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let caption = format!(
        "{title}: {} samples, p50 {} ms, p99 {} ms, max {} ms",
        h.len(),
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.max()
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20).into_font())
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(|x| e(&x))?;
    let nines = |x: &f64| {
        if (x - x.round()).abs() > 1e-9 {
            return String::new();
        }
        match x.round() as i32 {
            0 => "0%".into(),
            1 => "90%".into(),
            k => format!("99.{}%", "9".repeat(k as usize - 2)).replace("99.%", "99%"),
        }
    };
    chart
        .configure_mesh()
        .x_desc("percentile")
        .x_labels(xmax as usize * 2 + 1)
        .x_label_formatter(&nines)
        .y_desc("latency (ms)")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|x| e(&x))?;
    let col = RGBColor(214, 39, 40);
    // A step line: each latency holds until the next percentile step.
    let mut steps = Vec::with_capacity(pts.len() * 2);
    let mut last_x = 0.0;
    for &(x, y) in &pts {
        steps.push((last_x, y));
        steps.push((x, y));
        last_x = x;
    }
    chart
        .draw_series(LineSeries::new(steps, col.stroke_width(2)))
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
