//! Charts (plotters), as SVG and as PNG. Sweep charts: throughput in the top panel, p50 and
//! p99 latency in the next one, and, when the runs measured it, the CPU time per committed
//! transaction in a third, against the swept parameter, one curve per protocol. Drill
//! timelines ([`write_timeline_charts`]): commits, aborts and unknown answers per second over
//! time on top, the p99 latency per second below, a dashed line at every inject and heal.
//!
//! Text in the PNG needs a TrueType font: the first of `$REDT_FONT`, DejaVu Sans, Liberation
//! Sans or FreeSans found on the system is used (Debian's `fonts-dejavu-core`). Without one
//! the charts are skipped with an error naming the variable.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One point of a sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChartPoint {
    /// The parameter's value.
    pub x: f64,
    /// Committed transactions per second.
    pub throughput: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// CPU time per committed transaction, µs; `None` when not measured.
    pub cpu_us_per_committed: Option<f64>,
    /// Aborted attempts over all attempts, 0 to 1; `None` when not known (an overlay CSV
    /// without the column).
    pub abort_rate: Option<f64>,
}

/// One curve per panel: the points of one run of the sweep (one protocol).
#[derive(Clone, Debug, PartialEq)]
pub struct ChartSeries {
    /// The legend (the protocol's name).
    pub name: String,
    /// The points, in x order.
    pub points: Vec<ChartPoint>,
}

/// What a chart shows.
#[derive(Clone, Debug)]
pub struct ChartSpec {
    /// Title over both panels.
    pub title: String,
    /// Lines under the title: the configuration.
    pub subtitle: String,
    /// The x axis label (`inter-DC RTT (ms)`).
    pub x_label: String,
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

/// Registers a system font as `sans-serif` once; the path used, or why none.
fn font() -> Result<PathBuf, String> {
    static FONT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let mut candidates: Vec<PathBuf> = std::env::var_os("REDT_FONT").map(PathBuf::from).into_iter().collect();
        candidates.extend(FONT_PATHS.iter().map(PathBuf::from));
        for p in candidates {
            if let Ok(bytes) = std::fs::read(&p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(p);
                }
            }
        }
        Err("no TrueType font found for the chart text: set REDT_FONT to a .ttf file (e.g. DejaVuSans.ttf from \
             Debian's fonts-dejavu-core)"
            .into())
    })
    .clone()
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-9 {
        return (lo - 0.5, hi + 0.5);
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

/// Colours of the curves of a multi-series chart, one per series in order (then again).
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// One latency curve of the bottom panel: its legend, colour, whether dashed, and its value.
struct LatencyCurve<'a> {
    label: String,
    color: RGBColor,
    dashed: bool,
    points: &'a [ChartPoint],
    value: fn(&ChartPoint) -> f64,
}

/// An x axis label: a whole number without decimals, else two.
fn fmt_x(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// One panel of one value per series against x (throughput, CPU per transaction): a line
/// and dots per series in the palette's colours, its legend the series' name (`single_label`
/// when there is one series), the y axis from 0 to 15% above the largest value. Points whose
/// `value` is `None` are left out.
fn value_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    spec: &ChartSpec,
    series: &[ChartSeries],
    (x0, x1): (f64, f64),
    y_desc: &str,
    single_label: &str,
    value: fn(&ChartPoint) -> Option<f64>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let y_max = series.iter().flat_map(|s| &s.points).filter_map(value).fold(0.0, f64::max).max(1.0) * 1.15;
    // A fraction's axis (0 to 1.15) needs decimals; counts and µs do not.
    let decimals = if y_max < 10.0 { 2 } else { 0 };
    let mut c = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..y_max)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc(&spec.x_label)
        .y_desc(y_desc)
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&|y| format!("{y:.decimals$}"))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    for (i, s) in series.iter().enumerate() {
        let col = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = s.points.iter().filter_map(|p| Some((p.x, value(p)?))).collect();
        let label = if series.len() == 1 { single_label.to_string() } else { s.name.clone() };
        c.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        c.draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.filled()))).map_err(e)?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(e)?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    spec: &ChartSpec,
    series: &[ChartSeries],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let all = || series.iter().flat_map(|s| s.points.iter());
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(&spec.title, ("sans-serif", 22)).map_err(e)?;
    let lines: Vec<&str> = spec.subtitle.lines().collect();
    let (sub, body) = root.split_vertically(8 + 17 * lines.len() as u32);
    let style = ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90));
    for (i, l) in lines.iter().enumerate() {
        sub.draw_text(l, &style, (60, 4 + 17 * i as i32)).map_err(e)?;
    }
    let with_cpu = all().any(|p| p.cpu_us_per_committed.is_some());
    let with_aborts = all().any(|p| p.abort_rate.is_some());
    let areas = body.split_evenly((panels(series), 1));
    let mut areas = areas.iter();
    let mut next = || areas.next().expect("one area per panel");
    let (x0, x1) = range(all().map(|p| p.x));
    let single = series.len() == 1;
    let color = |i: usize| PALETTE[i % PALETTE.len()];

    let panel =
        |area: &DrawingArea<DB, Shift>, y_desc: &str, single_label: &str, value: fn(&ChartPoint) -> Option<f64>| {
            value_panel(area, spec, series, (x0, x1), y_desc, single_label, value)
        };
    panel(next(), "committed txn/s", "throughput", |p| Some(p.throughput))?;
    if with_aborts {
        panel(next(), "abort rate (of attempts)", "abort rate", |p| p.abort_rate)?;
    }

    let bottom = next();
    let l_max = all().map(|p| p.p99_ms.max(p.p50_ms)).fold(0.0, f64::max).max(1.0) * 1.15;
    let mut c = ChartBuilder::on(bottom)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..l_max)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc(&spec.x_label)
        .y_desc("latency (ms)")
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    // One series: p50 green and p99 red, both solid. Several: each series in its own
    // colour, p50 solid and p99 dashed.
    let mut curves = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let (p50, p99) = if single {
            (("p50".to_string(), RGBColor(44, 160, 44)), ("p99".to_string(), RGBColor(214, 39, 40)))
        } else {
            ((format!("{} p50", s.name), color(i)), (format!("{} p99", s.name), color(i)))
        };
        curves.push(LatencyCurve { label: p50.0, color: p50.1, dashed: false, points: &s.points, value: |p| p.p50_ms });
        curves.push(LatencyCurve {
            label: p99.0,
            color: p99.1,
            dashed: !single,
            points: &s.points,
            value: |p| p.p99_ms,
        });
    }
    for k in curves {
        let (col, f) = (k.color, k.value);
        let pts = k.points.iter().map(|p| (p.x, f(p)));
        let drawn = if k.dashed {
            c.draw_series(DashedLineSeries::new(pts, 8, 5, col.stroke_width(2))).map_err(e)?
        } else {
            c.draw_series(LineSeries::new(pts, col.stroke_width(2))).map_err(e)?
        };
        let dashed = k.dashed;
        drawn.label(k.label).legend(move |(x, y)| {
            let end = if dashed { x + 8 } else { x + 20 };
            PathElement::new(vec![(x, y), (end, y)], col.stroke_width(2))
        });
        c.draw_series(k.points.iter().map(|p| Circle::new((p.x, f(p)), if k.dashed { 3 } else { 4 }, col.filled())))
            .map_err(e)?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(e)?;
    if with_cpu {
        panel(next(), "CPU µs per committed txn", "CPU per committed txn", |p| p.cpu_us_per_committed)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// The panels a chart of `series` has: throughput and latency always, the abort rate and
/// the CPU per committed transaction when some point has them.
fn panels(series: &[ChartSeries]) -> usize {
    let all = || series.iter().flat_map(|s| &s.points);
    2 + usize::from(all().any(|p| p.abort_rate.is_some()))
        + usize::from(all().any(|p| p.cpu_us_per_committed.is_some()))
}

/// Size of both images, in pixels, with `panels` panels (320 px each, 120 px of titles).
pub fn size(panels: usize) -> (u32, u32) {
    (900, 120 + 320 * panels as u32)
}

/// Writes the chart of `series` as SVG to `svg` and as PNG to `png`. One series is drawn as
/// before protocols were compared (legends `throughput`, `p50`, `p99`); several get a
/// colour each, their name in the legends, p50 solid and p99 dashed.
///
/// # Errors
/// No font for the text, or a drawing or file error.
pub fn write_charts(spec: &ChartSpec, series: &[ChartSeries], svg: &Path, png: &Path) -> Result<(), String> {
    font()?;
    let size = size(panels(series));
    draw(SVGBackend::new(svg, size).into_drawing_area(), spec, series)
        .map_err(|e| format!("{}: {e}", svg.display()))?;
    draw(BitMapBackend::new(png, size).into_drawing_area(), spec, series).map_err(|e| format!("{}: {e}", png.display()))
}

/// A drill's timeline (see [`write_timeline_charts`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimelineSeries {
    /// Width of one bucket, s.
    pub bucket_s: f64,
    /// Commits per second in each bucket, from time 0.
    pub committed_per_s: Vec<f64>,
    /// Aborts per second in each bucket.
    pub aborted_per_s: Vec<f64>,
    /// Unknown answers per second in each bucket.
    pub unknown_per_s: Vec<f64>,
    /// `(time s, p99 ms)` per second (the middle of the second).
    pub p99_ms: Vec<(f64, f64)>,
    /// `(time s, label)` of every inject and heal.
    pub markers: Vec<(f64, String)>,
}

/// Colour of the event markers.
const MARKER: RGBColor = RGBColor(110, 110, 110);

fn draw_timeline<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    spec: &ChartSpec,
    s: &TimelineSeries,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(&spec.title, ("sans-serif", 22)).map_err(e)?;
    let lines: Vec<&str> = spec.subtitle.lines().collect();
    let (sub, body) = root.split_vertically(8 + 17 * lines.len() as u32);
    let style = ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90));
    for (i, l) in lines.iter().enumerate() {
        sub.draw_text(l, &style, (60, 4 + 17 * i as i32)).map_err(e)?;
    }
    let (top, bottom) = body.split_vertically(body.dim_in_pixel().1 * 3 / 5);
    let n = s.committed_per_s.len().max(s.aborted_per_s.len()).max(s.unknown_per_s.len());
    let x_max = (n as f64 * s.bucket_s).max(s.markers.iter().map(|m| m.0).fold(0.0, f64::max)).max(1.0);
    let at = |i: usize| i as f64 * s.bucket_s;
    let y_max =
        s.committed_per_s.iter().chain(&s.aborted_per_s).chain(&s.unknown_per_s).copied().fold(0.0, f64::max).max(1.0)
            * 1.6;
    let mut c = ChartBuilder::on(&top)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc(&spec.x_label)
        .y_desc("per second (100 ms steps)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    let curves: [(&str, RGBColor, &Vec<f64>); 3] = [
        ("committed/s", PALETTE[0], &s.committed_per_s),
        ("aborted/s", PALETTE[1], &s.aborted_per_s),
        ("unknown/s", PALETTE[4], &s.unknown_per_s),
    ];
    for (label, col, v) in curves {
        c.draw_series(LineSeries::new(v.iter().enumerate().map(|(i, &y)| (at(i), y)), col.stroke_width(2)))
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
    }
    for (i, (t, label)) in s.markers.iter().enumerate() {
        c.draw_series(DashedLineSeries::new([(*t, 0.0), (*t, y_max)], 6, 4, MARKER.stroke_width(1))).map_err(e)?;
        // Labels step down so that close marks stay readable, below the legend's band and
        // above the curves (which stay under 1/1.6 of the height).
        let y = y_max * (0.84 - 0.05 * (i % 4) as f64);
        c.draw_series(std::iter::once(Text::new(
            format!(" {label}"),
            (*t, y),
            ("sans-serif", 12).into_font().color(&MARKER),
        )))
        .map_err(e)?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(e)?;

    if s.p99_ms.is_empty() {
        let style = ("sans-serif", 15).into_font().color(&MARKER);
        bottom
            .draw_text("p99 latency: none measured (the commits were counted from the nodes' status)", &style, (90, 40))
            .map_err(e)?;
        root.present().map_err(e)?;
        return Ok(());
    }
    let l_max = s.p99_ms.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.15;
    let mut c = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..l_max)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc(&spec.x_label)
        .y_desc("p99 latency (ms)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    let red = RGBColor(214, 39, 40);
    // One line per run of consecutive seconds: a second without commits leaves a gap.
    let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
    for &p in &s.p99_ms {
        match runs.last_mut() {
            Some(r) if r.last().is_some_and(|q| p.0 - q.0 <= 1.0 + 1e-9) => r.push(p),
            _ => runs.push(vec![p]),
        }
    }
    for (i, r) in runs.into_iter().enumerate() {
        let drawn = c.draw_series(LineSeries::new(r, red.stroke_width(2))).map_err(e)?;
        if i == 0 {
            drawn
                .label("p99 per second")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(2)));
        }
    }
    c.draw_series(s.p99_ms.iter().map(|&p| Circle::new(p, 3, red.filled()))).map_err(e)?;
    for (t, _) in &s.markers {
        c.draw_series(DashedLineSeries::new([(*t, 0.0), (*t, l_max)], 6, 4, MARKER.stroke_width(1))).map_err(e)?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// Size of a timeline chart, in pixels.
pub const TIMELINE_SIZE: (u32, u32) = (1100, 720);

/// Writes the timeline chart of `series` as SVG to `svg` and as PNG to `png`.
///
/// # Errors
/// No font for the text, or a drawing or file error.
pub fn write_timeline_charts(spec: &ChartSpec, series: &TimelineSeries, svg: &Path, png: &Path) -> Result<(), String> {
    font()?;
    draw_timeline(SVGBackend::new(svg, TIMELINE_SIZE).into_drawing_area(), spec, series)
        .map_err(|e| format!("{}: {e}", svg.display()))?;
    draw_timeline(BitMapBackend::new(png, TIMELINE_SIZE).into_drawing_area(), spec, series)
        .map_err(|e| format!("{}: {e}", png.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_svg_and_png() {
        if font().is_err() {
            eprintln!("no system font: chart test skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (svg, png) = (dir.path().join("c.svg"), dir.path().join("c.png"));
        let pts: Vec<ChartPoint> = [10.0, 20.0, 40.0]
            .iter()
            .map(|&x| ChartPoint {
                x,
                throughput: 1000.0 / x,
                p50_ms: x,
                p99_ms: 2.0 * x,
                cpu_us_per_committed: None,
                abort_rate: None,
            })
            .collect();
        let spec = ChartSpec { title: "t".into(), subtitle: "s".into(), x_label: "RTT (ms)".into() };
        let one = [ChartSeries { name: "redt".into(), points: pts.clone() }];
        write_charts(&spec, &one, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg") && text.contains("committed txn/s") && text.contains("throughput"));
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        // One curve per protocol, named in the legends.
        let slower: Vec<ChartPoint> =
            pts.iter().map(|p| ChartPoint { throughput: p.throughput / 2.0, p99_ms: 3.0 * p.x, ..*p }).collect();
        let two = [one[0].clone(), ChartSeries { name: "2pc-paxos".into(), points: slower }];
        write_charts(&spec, &two, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        for label in ["redt", "2pc-paxos", "redt p50", "2pc-paxos p99"] {
            assert!(text.contains(&format!(">\n{label}\n<")), "legend {label}");
        }
        assert!(!text.contains("CPU µs per committed txn"), "no CPU panel without CPU figures");
        // With CPU figures: a third panel, in a taller image.
        let costed: Vec<ChartPoint> =
            pts.iter().map(|p| ChartPoint { cpu_us_per_committed: Some(100.0 * p.x), ..*p }).collect();
        write_charts(&spec, &[ChartSeries { name: "redt".into(), points: costed }], &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("CPU µs per committed txn") && text.contains("CPU per committed txn"));
        assert!(text.contains(&format!("height=\"{}\"", size(3).1)), "taller with three panels");
        assert!(!text.contains("abort rate (of attempts)"), "no abort panel without abort rates");
        // With abort rates too: a fourth panel, its axis in fractions.
        let aborting: Vec<ChartPoint> = pts
            .iter()
            .map(|p| ChartPoint { cpu_us_per_committed: Some(100.0 * p.x), abort_rate: Some(p.x / 200.0), ..*p })
            .collect();
        write_charts(&spec, &[ChartSeries { name: "redt".into(), points: aborting }], &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("abort rate (of attempts)"), "abort panel");
        assert!(text.contains(">\n0.50\n<") || text.contains(">\n0.40\n<"), "the abort axis in fractions");
        assert!(text.contains(&format!("height=\"{}\"", size(4).1)), "taller with four panels");
    }

    #[test]
    fn writes_a_timeline_with_event_marks() {
        if font().is_err() {
            eprintln!("no system font: chart test skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (svg, png) = (dir.path().join("t.svg"), dir.path().join("t.png"));
        let series = TimelineSeries {
            bucket_s: 0.1,
            committed_per_s: (0..50).map(|i| if (20..30).contains(&i) { 300.0 } else { 1000.0 }).collect(),
            aborted_per_s: vec![20.0; 50],
            unknown_per_s: vec![0.0; 50],
            p99_ms: (0..5).map(|s| (s as f64 + 0.5, 10.0 + s as f64)).collect(),
            markers: vec![(2.0, "kill-node dc3-n1".into()), (3.0, "heal kill-node dc3-n1".into())],
        };
        let spec =
            ChartSpec { title: "drill".into(), subtitle: "kill-node dc3-n1 at 2s".into(), x_label: "time (s)".into() };
        write_timeline_charts(&spec, &series, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        for label in ["committed/s", "aborted/s", "p99 per second", "kill-node dc3-n1", "heal kill-node dc3-n1"] {
            assert!(text.contains(label), "{label}");
        }
        assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    }
}
