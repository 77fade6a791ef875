//! The soak's SVG: two stacked line charts over time (memory in MiB; objects and watchers), and
//! a tick per divergence check along the time axis (green: agreed, red: diverged, grey:
//! skipped as the control plane was unavailable).
//!
//! Decision: written by hand (polylines, a few labels) rather than with a plotting crate: the
//! chart is simple and a crate would be compiled for one picture.

use std::fmt::Write;

/// One line of a chart.
pub struct Line<'a> {
    pub name: &'a str,
    pub color: &'a str,
    /// (seconds, value)
    pub points: Vec<(f64, f64)>,
}

const WIDTH: f64 = 900.0;
const PANEL: f64 = 220.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 30.0;

/// The whole picture: `panels` (title, lines) one under the other, `checks` (seconds, agreed;
/// `None`: skipped, the control plane did not answer).
pub fn svg(title: &str, panels: &[(&str, Vec<Line>)], checks: &[(f64, Option<bool>)]) -> String {
    let end = panels
        .iter()
        .flat_map(|(_, lines)| lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)))
        .chain(checks.iter().map(|c| c.0))
        .fold(1.0_f64, f64::max);
    let height = TOP + panels.len() as f64 * (PANEL + 40.0) + 40.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"18\" font-size=\"14\">{title}</text>\n"
    );
    for (i, (name, lines)) in panels.iter().enumerate() {
        let y0 = TOP + i as f64 * (PANEL + 40.0);
        panel(&mut out, name, lines, y0, end);
    }
    let axis = TOP + panels.len() as f64 * (PANEL + 40.0);
    let plot_width = WIDTH - LEFT - 20.0;
    for (t, agreed) in checks {
        let x = LEFT + t / end * plot_width;
        let color = match agreed {
            Some(true) => "green",
            Some(false) => "red",
            None => "grey",
        };
        let _ = writeln!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{color}\"/>",
            axis - 8.0,
            axis
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{LEFT}\" y=\"{:.1}\">divergence checks (green: the apiserver, informerd and every subscriber agreed; grey: skipped, the control plane was unavailable); time axis 0 to {:.0} min</text>",
        axis + 16.0,
        end / 60.0
    );
    out + "</svg>\n"
}

fn panel(out: &mut String, name: &str, lines: &[Line], y0: f64, end: f64) {
    let top = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(1.0_f64, f64::max)
        * 1.1;
    let plot_width = WIDTH - LEFT - 20.0;
    let _ = writeln!(
        out,
        "<rect x=\"{LEFT}\" y=\"{y0}\" width=\"{plot_width}\" height=\"{PANEL}\" fill=\"none\" stroke=\"#999\"/>\n<text x=\"4\" y=\"{:.1}\">{top:.0}</text>\n<text x=\"4\" y=\"{:.1}\">0</text>",
        y0 + 10.0,
        y0 + PANEL
    );
    for (i, line) in lines.iter().enumerate() {
        let points: Vec<String> = line
            .points
            .iter()
            .map(|(t, v)| {
                format!(
                    "{:.1},{:.1}",
                    LEFT + t / end * plot_width,
                    y0 + PANEL - v / top * PANEL
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{}\">{} {}</text>",
            line.color,
            points.join(" "),
            LEFT + 10.0 + i as f64 * 180.0,
            y0 + PANEL + 16.0,
            line.color,
            name,
            line.name
        );
    }
}

/// The least-squares slope of `points` (value per second).
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (num, den) = points.iter().fold((0.0, 0.0), |(num, den), (x, y)| {
        (num + (x - mx) * (y - my), den + (x - mx) * (x - mx))
    });
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

#[test]
fn the_slope_of_a_line_is_its_rate() {
    let points: Vec<(f64, f64)> = (0..10).map(|t| (t as f64, 3.0 * t as f64 + 7.0)).collect();
    assert!((slope(&points) - 3.0).abs() < 1e-9);
    assert_eq!(slope(&[(1.0, 5.0), (2.0, 5.0), (3.0, 5.0)]), 0.0);
    assert_eq!(slope(&[(1.0, 5.0)]), 0.0);
}
