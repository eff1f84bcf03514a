//! A small SVG chart writer: lines, steps, markers, error bars and labels on linear,
//! logarithmic, reversed or categorical x axes, with "nice" ticks and a legend. Output is plain
//! SVG text with no scripts or external references, deterministic for the same input.

use std::fmt::Write as _;

/// Colours of series, in order (Tableau 10).
pub const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Line,
    /// A staircase (CDFs).
    Step,
    Markers,
    LineMarkers,
}

/// One series.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Half-widths of vertical error bars, one per point.
    pub yerr: Option<Vec<f64>>,
    /// A text beside each point.
    pub labels: Option<Vec<String>>,
    pub style: Style,
    /// Marker radius, px.
    pub size: f64,
    /// Opacity 0..1.
    pub opacity: f64,
    /// Colour index into [`PALETTE`] (default: the series' position).
    pub color: Option<usize>,
    /// Dashed line.
    pub dashed: bool,
    /// Leave out of the legend.
    pub no_legend: bool,
}

impl Series {
    /// A series of `points` drawn as `style`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>, style: Style) -> Series {
        Series {
            name: name.into(),
            points,
            yerr: None,
            labels: None,
            style,
            size: 3.0,
            opacity: 1.0,
            color: None,
            dashed: false,
            no_legend: false,
        }
    }
}

/// The x axis.
#[derive(Clone, Debug, PartialEq)]
pub enum XAxis {
    Linear {
        reversed: bool,
    },
    Log,
    /// Points sit at 0, 1, 2... under these labels.
    Categories(Vec<String>),
}

/// A chart.
#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: XAxis,
    /// Start the y axis at zero.
    pub y_zero: bool,
    /// Fixed y range.
    pub y_range: Option<(f64, f64)>,
    pub series: Vec<Series>,
    pub width: f64,
    pub height: f64,
    /// A note under the chart.
    pub note: Option<String>,
    /// Unique within a page (SVGs inlined together must not share clip-path ids).
    pub id: String,
    /// Logarithmic y axis (values ≤ 0 are not drawn).
    pub y_log: bool,
}

impl Chart {
    /// An empty chart.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Chart {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x: XAxis::Linear { reversed: false },
            y_zero: true,
            y_range: None,
            series: vec![],
            width: 570.0,
            height: 360.0,
            note: None,
            id: "plot".into(),
            y_log: false,
        }
    }
}

/// Escape text for SVG/HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Format a tick value compactly.
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-4..1e6).contains(&a) {
        let t = format!("{v:.1e}");
        return t.replace(".0e", "e");
    }
    let s = if a < 1e-3 {
        format!("{v:.5}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    };
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// About `n` round tick values covering `[lo, hi]`.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).ceil() * step;
    let mut out = vec![];
    let mut k = 0;
    loop {
        let v = start + k as f64 * step;
        if v > hi + step * 1e-9 {
            break;
        }
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        k += 1;
        if k > 100 {
            break;
        }
    }
    out
}

fn range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    (lo <= hi).then_some((lo, hi))
}

/// Pad a range so that it is not empty and has some room.
fn pad(lo: f64, hi: f64, zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (lo, hi);
    if zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo < 1e-12 {
        let d = if hi.abs() > 0.0 { hi.abs() * 0.1 } else { 1.0 };
        lo -= d;
        hi += d;
    }
    let ticks = nice_ticks(lo, hi, 5);
    let step = if ticks.len() >= 2 {
        ticks[1] - ticks[0]
    } else {
        (hi - lo) / 5.0
    };
    let nlo = (lo / step).floor() * step;
    let nhi = (hi / step).ceil() * step;
    (
        if zero && lo >= 0.0 {
            0.0_f64.max(nlo)
        } else {
            nlo
        },
        nhi,
    )
}

/// Render `c` as an SVG document.
pub fn render(c: &Chart) -> String {
    let (w, h) = (c.width, c.height);
    let legend: Vec<(usize, &Series)> = c
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.no_legend && !s.name.is_empty())
        .collect();
    let legend_w = if legend.is_empty() {
        0.0
    } else {
        let longest = legend
            .iter()
            .map(|(_, s)| s.name.chars().count())
            .max()
            .unwrap_or(0);
        (longest as f64 * 6.6 + 34.0).clamp(80.0, 240.0)
    };
    let (ml, mr, mt, mb) = (
        64.0,
        16.0 + legend_w,
        34.0,
        if c.note.is_some() { 64.0 } else { 48.0 },
    );
    let pw = (w - ml - mr).max(50.0);
    let ph = (h - mt - mb).max(50.0);

    let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (xlo, xhi) = match &c.x {
        XAxis::Categories(cats) => (-0.5, cats.len().max(1) as f64 - 0.5),
        XAxis::Log => {
            // Some room on each side, so that end points are not on the frame.
            let (lo, hi) = range(xs.filter(|x| *x > 0.0)).unwrap_or((1.0, 10.0));
            let (lo, hi) = (lo / 1.5, hi * 1.5);
            (lo, hi.max(lo * 10.0))
        }
        XAxis::Linear { .. } => {
            let (lo, hi) = range(xs).unwrap_or((0.0, 1.0));
            if hi - lo < 1e-12 {
                (lo - 1.0, hi + 1.0)
            } else {
                let ticks = nice_ticks(lo, hi, 6);
                let step = if ticks.len() >= 2 {
                    ticks[1] - ticks[0]
                } else {
                    hi - lo
                };
                let (a, b) = ((lo / step).floor() * step, (hi / step).ceil() * step);
                // Markers get some room from the frame; lines over time do not need it.
                let markers = c
                    .series
                    .iter()
                    .any(|s| matches!(s.style, Style::Markers | Style::LineMarkers));
                let pad = if markers { (b - a) * 0.04 } else { 0.0 };
                (a - pad, b + pad)
            }
        }
    };
    let (ylo, yhi) = match c.y_range {
        Some(r) => r,
        None if c.y_log => {
            let ys = c.series.iter().flat_map(|s| {
                s.points.iter().enumerate().map(move |(i, p)| {
                    let e = s
                        .yerr
                        .as_ref()
                        .and_then(|e| e.get(i))
                        .copied()
                        .unwrap_or(0.0);
                    (p.1, p.1 + e)
                })
            });
            let lo = range(ys.clone().map(|y| y.0).filter(|y| *y > 0.0)).map_or(1.0, |r| r.0);
            let hi = range(ys.map(|y| y.1).filter(|y| *y > 0.0)).map_or(10.0, |r| r.1);
            let lo = 10f64.powf((lo / 1.2).log10().floor());
            let hi = 10f64.powf((hi * 1.2).log10().ceil());
            (lo, hi.max(lo * 10.0))
        }
        None => {
            let ys = c.series.iter().flat_map(|s| {
                s.points.iter().enumerate().flat_map(move |(i, p)| {
                    let e = s
                        .yerr
                        .as_ref()
                        .and_then(|e| e.get(i))
                        .copied()
                        .unwrap_or(0.0);
                    [p.1 - e, p.1 + e]
                })
            });
            let (lo, hi) = range(ys).unwrap_or((0.0, 1.0));
            pad(lo, hi, c.y_zero)
        }
    };
    let reversed = matches!(c.x, XAxis::Linear { reversed: true });
    let fx = |x: f64| -> f64 {
        let f = match c.x {
            XAxis::Log => {
                if x <= 0.0 {
                    return f64::NAN;
                }
                (x.log10() - xlo.log10()) / (xhi.log10() - xlo.log10())
            }
            _ => (x - xlo) / (xhi - xlo),
        };
        let f = if reversed { 1.0 - f } else { f };
        ml + f * pw
    };
    let fy = |y: f64| -> f64 {
        if c.y_log {
            let y = y.max(ylo);
            mt + ph - (y.log10() - ylo.log10()) / (yhi.log10() - ylo.log10()) * ph
        } else {
            mt + ph - (y - ylo) / (yhi - ylo) * ph
        }
    };

    let id = esc(&c.id);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="Helvetica,Arial,sans-serif" font-size="12"><rect width="{w}" height="{h}" fill="#fff"/>"##
    );
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"##,
        ml + pw / 2.0,
        esc(&c.title)
    );
    // Grid and ticks.
    let yticks: Vec<f64> = if c.y_log {
        let mut v = vec![];
        let mut e = ylo.log10().ceil() as i32;
        while 10f64.powi(e) <= yhi * 1.000001 {
            v.push(10f64.powi(e));
            e += 1;
        }
        v
    } else {
        nice_ticks(ylo, yhi, 5)
    };
    for t in yticks {
        let y = fy(t);
        let _ = write!(
            s,
            r##"<line x1="{ml:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            ml + pw,
            ml - 6.0,
            y + 4.0,
            fmt_num(t)
        );
    }
    let xticks: Vec<(f64, String)> = match &c.x {
        XAxis::Categories(cats) => cats
            .iter()
            .enumerate()
            .map(|(i, l)| (i as f64, l.clone()))
            .collect(),
        XAxis::Log => {
            let mut v = vec![];
            let mut e = xlo.log10().ceil() as i32;
            while 10f64.powi(e) <= xhi * 1.000001 {
                v.push((10f64.powi(e), fmt_num(10f64.powi(e))));
                e += 1;
            }
            v
        }
        XAxis::Linear { .. } => nice_ticks(xlo, xhi, 6)
            .into_iter()
            .map(|t| (t, fmt_num(t)))
            .collect(),
    };
    for (t, label) in &xticks {
        let x = fx(*t);
        if !x.is_finite() {
            continue;
        }
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{mt:.1}" x2="{x:.1}" y2="{:.1}" stroke="#f0f0f0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            mt + ph,
            mt + ph + 16.0,
            esc(label)
        );
    }
    let _ = write!(
        s,
        r##"<rect x="{ml:.1}" y="{mt:.1}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#999"/>"##
    );
    let xl = if reversed {
        format!("{} (reversed: better →)", c.x_label)
    } else {
        c.x_label.clone()
    };
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
        ml + pw / 2.0,
        mt + ph + 34.0,
        esc(&xl)
    );
    let _ = write!(
        s,
        r##"<text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
        mt + ph / 2.0,
        esc(&c.y_label)
    );
    if let Some(n) = &c.note {
        let _ = write!(
            s,
            r##"<text x="{ml:.1}" y="{:.1}" font-size="11" fill="#666">{}</text>"##,
            h - 8.0,
            esc(n)
        );
    }
    // Series, clipped to the plot area.
    let _ = write!(
        s,
        r##"<clipPath id="{id}"><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/></clipPath><g clip-path="url(#{id})">"##,
        ml - 8.0,
        mt - 6.0,
        pw + 16.0,
        ph + 12.0
    );
    for (i, se) in c.series.iter().enumerate() {
        let color = PALETTE[se.color.unwrap_or(i) % PALETTE.len()];
        let pts: Vec<(f64, f64, usize)> = se
            .points
            .iter()
            .enumerate()
            .map(|(k, p)| (fx(p.0), fy(p.1), k))
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        let dash = if se.dashed {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        if matches!(se.style, Style::Line | Style::LineMarkers | Style::Step) && pts.len() >= 2 {
            let mut d = String::new();
            for (k, (x, y, _)) in pts.iter().enumerate() {
                if k == 0 {
                    let _ = write!(d, "M{x:.1},{y:.1}");
                } else if se.style == Style::Step {
                    let _ = write!(d, "H{x:.1}V{y:.1}");
                } else {
                    let _ = write!(d, "L{x:.1},{y:.1}");
                }
            }
            let _ = write!(
                s,
                r##"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6" stroke-opacity="{:.2}"{dash}/>"##,
                se.opacity
            );
        }
        if let Some(errs) = &se.yerr {
            for (x, _, k) in &pts {
                let (Some(e), Some(p)) = (errs.get(*k), se.points.get(*k)) else {
                    continue;
                };
                if !e.is_finite() || *e <= 0.0 {
                    continue;
                }
                let (y1, y2) = (fy(p.1 - e), fy(p.1 + e));
                let _ = write!(
                    s,
                    r##"<path d="M{x:.1},{y1:.1}V{y2:.1}M{:.1},{y1:.1}H{:.1}M{:.1},{y2:.1}H{:.1}" stroke="{color}" stroke-width="1.2"/>"##,
                    x - 4.0,
                    x + 4.0,
                    x - 4.0,
                    x + 4.0
                );
            }
        }
        if matches!(se.style, Style::Markers | Style::LineMarkers) {
            for (x, y, _) in &pts {
                let _ = write!(
                    s,
                    r##"<circle cx="{x:.1}" cy="{y:.1}" r="{:.1}" fill="{color}" fill-opacity="{:.2}"/>"##,
                    se.size, se.opacity
                );
            }
        }
        if let Some(labels) = &se.labels {
            for (x, y, k) in &pts {
                if let Some(l) = labels.get(*k) {
                    let _ = write!(
                        s,
                        r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="{color}">{}</text>"##,
                        x + se.size + 3.0,
                        y - se.size - 2.0,
                        esc(l)
                    );
                }
            }
        }
    }
    s.push_str("</g>");
    // Legend.
    for (row, (i, se)) in legend.iter().enumerate() {
        let color = PALETTE[se.color.unwrap_or(*i) % PALETTE.len()];
        let x = ml + pw + 12.0;
        let y = mt + 10.0 + row as f64 * 18.0;
        if y > h - 10.0 {
            break;
        }
        let dash = if se.dashed {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-width="3"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"##,
            x + 18.0,
            x + 24.0,
            y + 4.0,
            esc(&se.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            nice_ticks(0.0, 100.0, 5),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(nice_ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(120.0), "120");
        assert_eq!(fmt_num(2.5e-5), "2.5e-5");
        assert_eq!(fmt_num(2e-5), "2e-5");
        assert_eq!(fmt_num(0.0002), "0.0002");
    }

    #[test]
    fn renders_every_element_and_escapes() {
        let mut c = Chart::new("a < b", "x", "y");
        c.x = XAxis::Linear { reversed: true };
        let mut s = Series::new("s&1", vec![(1.0, 2.0), (2.0, 3.0)], Style::LineMarkers);
        s.yerr = Some(vec![0.5, 0.5]);
        s.labels = Some(vec!["p".into(), "q".into()]);
        c.series.push(s);
        c.series.push(Series::new(
            "cdf",
            vec![(0.0, 0.0), (1.0, 1.0)],
            Style::Step,
        ));
        let svg = render(&c);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt; b") && svg.contains("s&amp;1"));
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("reversed"));
        assert!(svg.contains("H") && svg.contains("V"));
        // Same input, same bytes.
        assert_eq!(svg, render(&c));
        let mut c = Chart::new("cats", "x", "y");
        c.x = XAxis::Categories(vec!["reno".into(), "cubic".into()]);
        c.series.push(Series::new(
            "m",
            vec![(0.0, 1.0), (1.0, 2.0)],
            Style::Markers,
        ));
        let svg = render(&c);
        assert!(svg.contains(">reno<") && svg.contains(">cubic<"));
        let mut c = Chart::new("log", "x", "y");
        c.x = XAxis::Log;
        c.series.push(Series::new(
            "m",
            vec![(0.001, 1.0), (0.1, 2.0)],
            Style::LineMarkers,
        ));
        assert!(render(&c).contains(">0.001<"));
    }
}
