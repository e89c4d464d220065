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

/// A grouped bar chart: one group per entry of `groups` along x (labelled
/// with it), one bar per series within each group (coloured and named in
/// the legend), bar height = the series' value for that group (`None`: no
/// bar). Values are drawn as they are (the caller scales them to the unit
/// `y_desc` names). PNG at `path`.
///
/// # Errors
/// No groups or no series, a value that is negative or not finite, or a
/// file that cannot be written (the message says which).
pub fn write_grouped_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<(), String> {
    use plotters::prelude::*;
    air_tools::ring_bench::register_fonts();
    let e = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    if groups.is_empty() || series.is_empty() {
        return Err(format!("{}: nothing to plot", path.display()));
    }
    let values = series.iter().flat_map(|(_, v)| v.iter().flatten());
    if let Some(v) = values.clone().find(|v| !v.is_finite() || **v < 0.0) {
        return Err(format!("{}: cannot draw a bar of {v}", path.display()));
    }
    let ymax = values.fold(0.0f64, |m, v| m.max(*v)).max(1e-9) * 1.15;
    let n = groups.len();
    let width = (160 + 90 * n as u32).max(700);
    let root = BitMapBackend::new(path, (width, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22).into_font())
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..ymax)
        .map_err(|x| e(&x))?;
    let names = groups.to_vec();
    let label = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * n + 1)
        .x_label_formatter(&label)
        .y_desc(y_desc)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|x| e(&x))?;
    const COLOURS: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];
    let k = series.len() as f64;
    let bar = 0.8 / k;
    for (j, (name, vals)) in series.iter().enumerate() {
        let col = COLOURS[j % COLOURS.len()];
        let left = |i: usize| i as f64 - 0.4 + j as f64 * bar;
        chart
            .draw_series(vals.iter().enumerate().filter_map(|(i, v)| {
                v.map(|v| Rectangle::new([(left(i), 0.0), (left(i) + bar * 0.92, v)], col.filled()))
            }))
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], col.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
