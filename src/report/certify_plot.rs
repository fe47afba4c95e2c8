//! `certify`'s figures, as SVG for its page: each CPU's largest sample of
//! every minute over the run (drift, bursts and breaks show there), and the
//! tail of the block maxima with the fitted GEV (how far the fit carries,
//! and where the bound lies against it).

use plotters::prelude::*;

use super::plot::{ensure_fonts, plot_err};
use super::ReportError;
use crate::certify::evt::{BandPoint, Gev};

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// The bounds drawn (within four times the data's top, so that a far
/// bound does not flatten the data) and those left above the scale.
fn on_scale(bounds_us: &[f64], data_top: f64) -> (Vec<f64>, Vec<f64>) {
    bounds_us.iter().partition(|&&b| b <= 4.0 * data_top)
}

/// Bounds for a caption: `50 µs`, `10 ms`.
fn us_list(bounds_us: &[f64]) -> String {
    let one = |b: f64| {
        if b >= 1000.0 {
            format!("{} ms", b / 1000.0)
        } else {
            format!("{b} µs")
        }
    };
    bounds_us
        .iter()
        .map(|&b| one(b))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The largest of each whole minute of `per_second_ns` (a partial last
/// minute included), µs.
pub fn per_minute_us(per_second_ns: &[u64]) -> Vec<f64> {
    per_second_ns
        .chunks(60)
        .map(|c| c.iter().copied().max().unwrap_or(0) as f64 / 1000.0)
        .collect()
}

/// Runs up to this long are drawn a point a second, longer ones a point a
/// minute (a two-minute run would be two dots).
pub const PER_SECOND_UP_TO_S: usize = 600;

/// The maxima a run is drawn with: each second's for a run of up to
/// [`PER_SECOND_UP_TO_S`], else each minute's, µs; and the unit's name.
pub fn maxima_series(per_second_ns: &[u64]) -> (Vec<f64>, &'static str) {
    if per_second_ns.len() <= PER_SECOND_UP_TO_S {
        let us = per_second_ns.iter().map(|&m| m as f64 / 1000.0).collect();
        (us, "second")
    } else {
        (per_minute_us(per_second_ns), "minute")
    }
}

/// Each CPU's maximum per `unit` (second or minute) against time, with the
/// budget's `max` bounds as horizontal lines.
pub fn maxima_svg(
    series: &[(u32, Vec<f64>)],
    bounds_us: &[f64],
    unit: &str,
) -> Result<String, ReportError> {
    ensure_fonts();
    let minutes = series.iter().map(|s| s.1.len()).max().unwrap_or(0).max(1) as f64;
    let data_top = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(1.0f64, f64::max);
    let (shown, above) = on_scale(bounds_us, data_top);
    let top = shown.iter().copied().fold(data_top, f64::max) * 1.15;
    let caption = match above.as_slice() {
        [] => format!("largest sample of each {unit}"),
        b => format!(
            "largest sample of each {unit} (bound {} above the scale)",
            us_list(b)
        ),
    };
    let bounds_us = &shown;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (960, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0f64..minutes, 0.0f64..top)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(format!("{unit} of the run"))
            .y_desc("µs")
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(plot_err)?;
        for &b in bounds_us {
            chart
                .draw_series(LineSeries::new(
                    vec![(0.0, b), (minutes, b)],
                    RGBColor(150, 150, 150).stroke_width(1),
                ))
                .map_err(plot_err)?
                .label(format!("bound {b} µs"))
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], RGBColor(150, 150, 150))
                });
        }
        for (k, (cpu, maxima)) in series.iter().enumerate() {
            let c = COLOURS[k % COLOURS.len()];
            let points: Vec<(f64, f64)> = maxima
                .iter()
                .enumerate()
                .map(|(i, &m)| (i as f64 + 0.5, m))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                .map_err(plot_err)?
                .label(format!("CPU {cpu}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart
                .draw_series(points.into_iter().map(|p| Circle::new(p, 2, c.filled())))
                .map_err(plot_err)?;
        }
        legend_and_present(&root, &mut chart)?;
    }
    Ok(out)
}

/// The band's outline in the plot's units (µs; probabilities clamped to
/// the plot's `floor`): its upper side left to right, its lower side back,
/// only the points within `(lo, hi)` µs.
fn band_outline(band: &[BandPoint], (lo, hi): (f64, f64), floor: f64) -> Vec<(f64, f64)> {
    let inside: Vec<&BandPoint> = band
        .iter()
        .filter(|b| (lo..=hi).contains(&(b.x_ns / 1000.0)))
        .collect();
    let upper = inside
        .iter()
        .map(|b| (b.x_ns / 1000.0, b.upper.clamp(floor, 1.0)));
    let lower = inside
        .iter()
        .rev()
        .map(|b| (b.x_ns / 1000.0, b.lower.clamp(floor, 1.0)));
    upper.chain(lower).collect()
}

/// One CPU's block maxima as an exceedance plot (the share of blocks
/// whose maximum exceeds x, log scale) with the fitted GEV's `1 − F(x)`,
/// its bootstrap band, and the bound.
pub fn tail_svg(
    cpu: u32,
    maxima_ns: &[f64],
    (fit, band): (&Gev, &[BandPoint]),
    bound_ns: f64,
) -> Result<String, ReportError> {
    ensure_fonts();
    let mut sorted: Vec<f64> = maxima_ns.iter().map(|x| x / 1000.0).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let bound = bound_ns / 1000.0;
    let lo = sorted.first().copied().unwrap_or(0.0);
    let data_top = sorted.last().copied().unwrap_or(1.0);
    let (shown, _) = on_scale(&[bound], data_top);
    let hi = shown.iter().copied().fold(data_top, f64::max) * 1.1;
    let bound_note = if shown.is_empty() {
        format!(", bound {} above the scale", us_list(&[bound]))
    } else {
        String::new()
    };
    let floor = (1.0 / (n + 1.0) / 1000.0).max(1e-12);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (960, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "CPU {cpu}: block maxima and the fitted GEV (ξ {:.3}{bound_note})",
                    fit.xi
                ),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(72)
            .build_cartesian_2d(lo..hi, (floor..1.0).log_scale())
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("block maximum (µs)")
            .y_desc("P(block maximum > x)")
            .label_style(("sans-serif", 13))
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(plot_err)?;
        // The band first, under the points and the curve.
        let outline = band_outline(band, (lo, hi), floor);
        if outline.len() >= 4 {
            let fill = COLOURS[1].mix(0.18).filled();
            chart
                .draw_series(std::iter::once(Polygon::new(outline, fill)))
                .map_err(plot_err)?
                .label("band (bootstrap)")
                .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 18, y + 4)], fill));
        }
        let observed = sorted
            .iter()
            .enumerate()
            .map(|(i, &x)| (x, 1.0 - (i as f64 + 1.0) / (n + 1.0)));
        chart
            .draw_series(observed.map(|p| Circle::new(p, 3, COLOURS[0].filled())))
            .map_err(plot_err)?
            .label("observed")
            .legend(|(x, y)| Circle::new((x + 9, y), 3, COLOURS[0].filled()));
        let curve: Vec<(f64, f64)> = (0..=400)
            .map(|i| lo + (hi - lo) * i as f64 / 400.0)
            .map(|x| (x, fit.exceedance(x * 1000.0)))
            .filter(|p| p.1 >= floor)
            .collect();
        chart
            .draw_series(LineSeries::new(curve, COLOURS[1].stroke_width(2)))
            .map_err(plot_err)?
            .label("fitted GEV")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], COLOURS[1].stroke_width(2))
            });
        for &b in &shown {
            chart
                .draw_series(LineSeries::new(
                    vec![(b, floor), (b, 1.0)],
                    RGBColor(150, 150, 150).stroke_width(1),
                ))
                .map_err(plot_err)?
                .label(format!("bound {}", us_list(&[b])))
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], RGBColor(150, 150, 150))
                });
        }
        legend_and_present(&root, &mut chart)?;
    }
    Ok(out)
}

/// Draws the series' legend and finishes the drawing.
fn legend_and_present<'a, DB: DrawingBackend + 'a, X, Y>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> Result<(), ReportError>
where
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_minute_keeps_its_largest_sample() {
        let mut s = vec![1000u64; 150];
        s[61] = 7000;
        s[149] = 3000;
        assert_eq!(per_minute_us(&s), vec![1.0, 7.0, 3.0]);
        // Up to ten minutes, each second is a point of its own.
        let (short, unit) = maxima_series(&s);
        assert_eq!((short.len(), short[61], unit), (150, 7.0, "second"));
        let (long, unit) = maxima_series(&[1000; 601]);
        assert_eq!((long.len(), unit), (11, "minute"));
    }

    #[test]
    fn the_figures_are_svg_with_their_series() {
        let svg = maxima_svg(
            &[(2, vec![10.0, 12.0]), (3, vec![11.0, 30.0])],
            &[50.0],
            "minute",
        )
        .unwrap();
        assert!(svg.contains("<svg") && svg.contains("CPU 3") && svg.contains("bound 50 µs"));
        let far = maxima_svg(&[(2, vec![10.0, 12.0])], &[10_000.0], "second").unwrap();
        assert!(far.contains("(bound 10 ms above the scale)"), "{far}");
        assert!(far.contains("largest sample of each second"), "{far}");
        let g = Gev {
            mu: 20_000.0,
            sigma: 1_000.0,
            xi: -0.1,
        };
        let maxima: Vec<f64> = (0..100).map(|i| 18_000.0 + 50.0 * i as f64).collect();
        let svg = tail_svg(2, &maxima, (&g, &[]), 40_000.0).unwrap();
        assert!(
            svg.contains("fitted GEV") && svg.contains("<circle"),
            "{svg}"
        );
        assert!(
            !svg.contains("band (bootstrap)"),
            "no band given, none drawn"
        );
        let band: Vec<BandPoint> = (0..10)
            .map(|i| 18_000.0 + 2_000.0 * i as f64)
            .map(|x| BandPoint {
                x_ns: x,
                lower: g.exceedance(x) * 0.5,
                upper: (g.exceedance(x) * 2.0).min(1.0),
            })
            .collect();
        let svg = tail_svg(2, &maxima, (&g, &band), 40_000.0).unwrap();
        assert!(
            svg.contains("band (bootstrap)") && svg.contains("<polygon"),
            "{svg}"
        );
    }
}
