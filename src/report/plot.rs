//! The classic shielded-vs-unshielded figure: one latency histogram per
//! phase, count on a log scale against latency in µs, as SVG and PNG.
//!
//! Drawn with plotters. Text is laid out with `ab_glyph` from DejaVu Sans
//! embedded in the binary (see Cargo.toml), so neither backend needs a
//! system font and the static build links. Writes only the files it is
//! asked to write.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::ReportError;
use crate::compare::summary::{
    threshold_label, Curve, AFFINITY, DEFAULT_THRESHOLDS_US, IDLE, SHIELDED, UNSHIELDED,
};

/// How the figure looks.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotOptions {
    /// Caption above the plot.
    pub title: String,
    /// Width in pixels (SVG user units).
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Thresholds (µs) drawn as vertical guide lines when in range.
    pub thresholds_us: Vec<f64>,
    /// At most this many bins across the x range; finer histograms are
    /// merged for drawing (the axis label gives the drawn bin width).
    pub max_bins: usize,
}

impl Default for PlotOptions {
    fn default() -> Self {
        PlotOptions {
            title: "Latency histogram".into(),
            width: 960,
            height: 540,
            thresholds_us: DEFAULT_THRESHOLDS_US.to_vec(),
            max_bins: 600,
        }
    }
}

static FONTS: Once = Once::new();

/// Registers the embedded font under the family names plotters asks for.
pub(super) fn ensure_fonts() {
    FONTS.call_once(|| {
        for family in ["sans-serif", "serif", "monospace"] {
            // The embedded font is a valid TrueType file; failure here would
            // be a build defect, and text then errors out at draw time.
            let _ =
                plotters::style::register_font(family, FontStyle::Normal, dejavu::sans::regular());
            let _ = plotters::style::register_font(family, FontStyle::Bold, dejavu::sans::bold());
        }
    });
}

/// The colour of a phase: idle grey, unshielded red, shielded blue.
fn colour(label: &str, index: usize) -> RGBColor {
    match label {
        IDLE => RGBColor(110, 110, 110),
        UNSHIELDED => RGBColor(214, 39, 40),
        SHIELDED => RGBColor(31, 119, 180),
        AFFINITY => RGBColor(255, 127, 14),
        _ => {
            const OTHERS: [RGBColor; 4] = [
                RGBColor(44, 160, 44),
                RGBColor(148, 103, 189),
                RGBColor(255, 127, 14),
                RGBColor(23, 190, 207),
            ];
            OTHERS[index % OTHERS.len()]
        }
    }
}

/// The figure as an SVG document.
pub fn svg_string(curves: &[Curve], opts: &PlotOptions) -> Result<String, ReportError> {
    ensure_fonts();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (opts.width, opts.height)).into_drawing_area();
        draw(&root, curves, opts)?;
        root.present().map_err(plot_err)?;
    }
    Ok(out)
}

/// Writes the figure as SVG to `path`.
pub fn write_svg(path: &Path, curves: &[Curve], opts: &PlotOptions) -> Result<(), ReportError> {
    let svg = svg_string(curves, opts)?;
    super::write_report_file(path, svg.as_bytes())
}

/// Writes the figure as PNG to `path`: drawn into memory, encoded as
/// plotters would save it, written by [`super::write_report_file`].
pub fn write_png(path: &Path, curves: &[Curve], opts: &PlotOptions) -> Result<(), ReportError> {
    ensure_fonts();
    let (w, h) = (opts.width, opts.height);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let bitmap = BitMapBackend::with_buffer(&mut rgb, (w, h));
        let root = super::glyphs::FixedText::new(bitmap)
            .ok_or_else(|| ReportError::Plot("embedded font unreadable".into()))?
            .into_drawing_area();
        draw(&root, curves, opts)?;
        root.present().map_err(plot_err)?;
    }
    let mut png = std::io::Cursor::new(Vec::new());
    image::write_buffer_with_format(
        &mut png,
        &rgb,
        w,
        h,
        image::ColorType::Rgb8,
        image::ImageOutputFormat::Png,
    )
    .map_err(|e| ReportError::Plot(format!("encoding the PNG: {e}")))?;
    super::write_report_file(path, png.get_ref())
}

pub(super) fn plot_err<E: std::error::Error + Send + Sync>(
    e: DrawingAreaErrorKind<E>,
) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// One curve ready to draw: merged bins and the points with samples.
struct Drawn {
    label: String,
    colour: RGBColor,
    width_us: f64,
    /// Runs of consecutive non-empty bins, (bin centre µs, count) each: a
    /// line never bridges empty bins, so it never suggests samples where
    /// there were none.
    runs: Vec<Vec<(f64, f64)>>,
    /// Isolated non-empty bins (empty neighbours): drawn as dots so a lone
    /// outlier is visible.
    lone: Vec<(f64, f64)>,
    total: u64,
    overflow: u64,
    range_end_us: f64,
}

fn prepare(curves: &[Curve], opts: &PlotOptions) -> (Vec<Drawn>, f64) {
    // The x range ends past the highest non-empty bucket of any curve.
    let top_us = curves
        .iter()
        .filter_map(|c| {
            c.highest_bucket()
                .map(|i| (i + 1) as f64 * c.bucket_width_us)
        })
        .fold(0.0f64, f64::max);
    let x_max = (top_us * 1.05).max(10.0);
    let drawn = curves
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let needed = (x_max / c.bucket_width_us).ceil() as usize;
            let factor = needed.div_ceil(opts.max_bins.max(1)).max(1);
            let r = c.rebinned(factor);
            let w = r.bucket_width_us;
            let nonzero = |i: usize| r.counts.get(i).is_some_and(|&v| v > 0);
            let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
            for (i, &v) in r.counts.iter().enumerate() {
                if v == 0 {
                    continue;
                }
                let p = ((i as f64 + 0.5) * w, v as f64);
                match runs.last_mut() {
                    Some(run) if i > 0 && nonzero(i - 1) => run.push(p),
                    _ => runs.push(vec![p]),
                }
            }
            let lone = r
                .counts
                .iter()
                .enumerate()
                .filter(|&(i, &v)| v > 0 && !(i > 0 && nonzero(i - 1)) && !nonzero(i + 1))
                .map(|(i, &v)| ((i as f64 + 0.5) * w, v as f64))
                .collect();
            Drawn {
                label: c.label.clone(),
                colour: colour(&c.label, k),
                width_us: w,
                runs,
                lone,
                total: c.total(),
                overflow: c.overflow,
                range_end_us: c.range_end_us(),
            }
        })
        .collect();
    (drawn, x_max)
}

fn legend_label(d: &Drawn) -> String {
    let mut s = format!("{} (n={})", d.label, d.total);
    if d.overflow > 0 {
        s.push_str(&format!(", {} beyond {:.0} µs", d.overflow, d.range_end_us));
    }
    s
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    curves: &[Curve],
    opts: &PlotOptions,
) -> Result<(), ReportError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(plot_err)?;
    let (drawn, x_max) = prepare(curves, opts);
    let y_max = drawn
        .iter()
        .flat_map(|d| d.runs.iter().flatten().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 3.0;
    let widths: Vec<f64> = drawn.iter().map(|d| d.width_us).collect();
    let bin_note = match widths.first() {
        Some(&w) if widths.iter().all(|&x| x == w) => format!("bins of {w} µs"),
        Some(_) => "bins per curve".to_string(),
        None => "no data".to_string(),
    };

    let mut chart = ChartBuilder::on(root)
        .caption(&opts.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0f64..x_max, (0.5f64..y_max).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(format!("latency (µs, {bin_note})"))
        .y_desc("samples (log scale)")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(210, 210, 210))
        .y_label_formatter(&|v| format_count(*v))
        .x_label_formatter(&|v| trim_float(*v))
        .draw()
        .map_err(plot_err)?;

    for (k, &t) in opts.thresholds_us.iter().enumerate() {
        if t > 0.0 && t < x_max {
            let guide = RGBColor(150, 150, 150);
            chart
                .draw_series(LineSeries::new(
                    vec![(t, 0.5), (t, y_max)],
                    guide.stroke_width(1),
                ))
                .map_err(plot_err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    threshold_label(t),
                    // Half-way up the log axis, clear of the legend; each
                    // further label lower, so that close thresholds on a
                    // long axis (100 µs and 1 ms of 100 ms) do not overlap.
                    (
                        t + x_max * 0.005,
                        (0.5 * y_max).sqrt() / 3f64.powi(k as i32),
                    ),
                    ("sans-serif", 13).into_font().color(&guide),
                )))
                .map_err(plot_err)?;
        }
    }

    for d in &drawn {
        let c = d.colour;
        // An empty series carries the legend entry; the runs carry the data.
        chart
            .draw_series(LineSeries::new(Vec::new(), c.stroke_width(2)))
            .map_err(plot_err)?
            .label(legend_label(d))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        for run in d.runs.iter().filter(|r| r.len() > 1) {
            chart
                .draw_series(LineSeries::new(run.clone(), c.stroke_width(2)))
                .map_err(plot_err)?;
        }
        chart
            .draw_series(d.lone.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(plot_err)?;
    }

    if !drawn.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(plot_err)?;
    }
    Ok(())
}

/// `200`, `2.5`: no trailing zeros on the latency axis.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `1`, `10`, `1k`, `10k`, `1M` for the log axis.
fn format_count(v: f64) -> String {
    if v < 1.0 {
        return String::new();
    }
    let (x, unit) = if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{x:.1}");
    format!("{}{unit}", s.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_on_the_log_axis() {
        assert_eq!(format_count(0.5), "");
        assert_eq!(format_count(1.0), "1");
        assert_eq!(format_count(10.0), "10");
        assert_eq!(format_count(1000.0), "1k");
        assert_eq!(format_count(25000.0), "25k");
        assert_eq!(format_count(3_000_000.0), "3M");
    }

    #[test]
    fn wide_ranges_are_merged_and_outliers_kept() {
        let mut counts = vec![0u64; 5000];
        counts[3] = 100;
        counts[4] = 50;
        counts[4000] = 1;
        let c = Curve {
            label: UNSHIELDED.into(),
            bucket_width_us: 1.0,
            counts,
            overflow: 2,
        };
        let opts = PlotOptions {
            max_bins: 500,
            ..Default::default()
        };
        let (d, x_max) = prepare(&[c], &opts);
        assert!(x_max > 4000.0);
        assert!(
            d[0].width_us >= 8.0 && d[0].width_us <= 10.0,
            "{}",
            d[0].width_us
        );
        let sum: f64 = d[0].runs.iter().flatten().map(|p| p.1).sum();
        assert_eq!(sum, 151.0);
        assert_eq!(d[0].runs.len(), 2);
        assert_eq!(d[0].lone.len(), 2); // the first bin and the outlier
        assert!(legend_label(&d[0]).contains("2 beyond 5000 µs"));
    }

    /// The y coordinate of the SVG `<text>` element holding `label`.
    fn text_y(svg: &str, label: &str) -> f64 {
        let end = svg
            .find(label)
            .unwrap_or_else(|| panic!("{label} not in the SVG"));
        let start = svg[..end].rfind("<text").unwrap();
        let tag = &svg[start..end];
        let y = tag.find(" y=\"").unwrap() + 4;
        tag[y..y + tag[y..].find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn threshold_labels_are_staggered() {
        // 100 µs and 1 ms on a 100 ms axis lie a few pixels apart: their
        // labels must not be drawn on top of each other.
        let mut counts = vec![0u64; 100_000];
        counts[50] = 1000;
        counts[99_000] = 1;
        let c = Curve {
            label: SHIELDED.into(),
            bucket_width_us: 1.0,
            counts,
            overflow: 0,
        };
        let svg = svg_string(&[c], &PlotOptions::default()).unwrap();
        let (a, b) = (text_y(&svg, "&gt; 100 µs"), text_y(&svg, "&gt; 1 ms"));
        assert!(b - a > 20.0, "labels at y {a} and {b}");
    }
}
