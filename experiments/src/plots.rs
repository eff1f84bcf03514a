//! The plots of a results directory, made from its files alone (so that a merged directory plots
//! exactly like an unsharded one): time series of throughput, cwnd and RTT; delay CDFs; the
//! Pantheon-style throughput against 95th-percentile delay scatter (delay axis reversed); FCT by
//! flow size; and any metric against a sweep axis with 95 % confidence intervals.

use crate::data::{RunRecord, parse_delay_hist, parse_series};
use crate::metrics::bucket_labels;
use crate::recipe::{DelayKind, GroupBy, PlotSpec, SeriesKind};
use crate::results::{Plan, PlanPart, run_dir};
use crate::stats::{Summary, percentile, summarize};
use crate::svg::{Chart, Series, Style, XAxis, render};
use std::collections::BTreeMap;
use std::path::Path;

/// A rendered plot.
#[derive(Clone, Debug)]
pub struct Plot {
    /// File name under `plots/`.
    pub file: String,
    pub title: String,
    pub svg: String,
}

/// Metric summaries of one point.
pub type PointMetrics = BTreeMap<String, Summary>;

/// What the plots read.
pub struct Inputs<'a> {
    pub out: &'a Path,
    pub plan: &'a Plan,
    /// Finished runs by plan index.
    pub records: &'a [Option<RunRecord>],
    /// Summaries by `(part, point)`.
    pub summaries: &'a BTreeMap<(usize, usize), PointMetrics>,
}

const MAX_FLOWS: usize = 12;
const MAX_POINTS_PER_SERIES: usize = 1500;

fn decimate(v: Vec<(f64, f64)>, max: usize) -> Vec<(f64, f64)> {
    if v.len() <= max {
        return v;
    }
    let step = v.len().div_ceil(max);
    v.into_iter().step_by(step).collect()
}

/// A flow's group: its algorithm or class, with ` (reverse)` for a reverse flow (whose metrics
/// are not in the forward groups').
fn group_name(f: &crate::data::FlowRow, by: GroupBy) -> String {
    let g = match by {
        GroupBy::Algorithm => &f.algorithm,
        GroupBy::Class => &f.class,
    };
    if f.reverse {
        format!("{g} (reverse)")
    } else {
        g.clone()
    }
}

fn group_of(rec: &RunRecord, flow: usize, by: GroupBy) -> String {
    rec.flows
        .get(flow)
        .map(|f| group_name(f, by))
        .unwrap_or_default()
}

/// Groups present in the point's runs, in order of appearance.
fn groups(recs: &[&RunRecord], by: GroupBy) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for r in recs {
        for f in &r.flows {
            let g = group_name(f, by);
            if !out.contains(&g) {
                out.push(g);
            }
        }
    }
    out
}

impl Inputs<'_> {
    fn point_records(&self, part: usize, point: usize) -> Vec<&RunRecord> {
        self.plan
            .runs
            .iter()
            .filter(|r| r.part == part && r.point == point)
            .filter_map(|r| self.records.get(r.index).and_then(|x| x.as_ref()))
            .collect()
    }

    fn read(&self, rec: &RunRecord, file: &str) -> Option<String> {
        std::fs::read_to_string(run_dir(self.out, &rec.id).join(file)).ok()
    }
}

fn point_title(part: &PlanPart, point: usize) -> String {
    let p = &part.points[point];
    if p.label.is_empty() {
        part.name.clone()
    } else {
        format!("{} ({})", part.name, p.label)
    }
}

fn timeseries(
    inp: &Inputs,
    pi: usize,
    n: usize,
    y: SeriesKind,
    run: u32,
    points: usize,
) -> Vec<Plot> {
    let part = &inp.plan.parts[pi];
    let mut out = vec![];
    for (qi, point) in part.points.iter().enumerate().take(points) {
        let Some(rec) = inp
            .plan
            .runs
            .iter()
            .find(|r| r.part == pi && r.point == qi && r.run == run)
            .and_then(|r| inp.records.get(r.index).and_then(|x| x.as_ref()))
        else {
            continue;
        };
        let Some(text) = inp.read(rec, "series.csv") else {
            continue;
        };
        let rows = parse_series(&text);
        let (what, unit) = match y {
            SeriesKind::Throughput => ("throughput", "Mbit/s"),
            SeriesKind::Cwnd => ("cwnd", "KB"),
            SeriesKind::Rtt => ("RTT", "ms"),
        };
        // Throughput is averaged over bins (about 200 over the run) so that the per-step noise
        // does not hide the trend.
        let bin = if y == SeriesKind::Throughput {
            let span = rows.iter().map(|r| r.t_s).fold(0.0, f64::max);
            Some(nice_bin(span / 200.0))
        } else {
            None
        };
        let mut by_flow: BTreeMap<usize, Vec<(f64, f64)>> = BTreeMap::new();
        for r in &rows {
            let v = match y {
                SeriesKind::Throughput => r.goodput_mbps,
                SeriesKind::Cwnd => r.cwnd_kb,
                SeriesKind::Rtt => r.rtt_ms,
            };
            if y == SeriesKind::Rtt && v <= 0.0 {
                continue;
            }
            by_flow.entry(r.flow).or_default().push((r.t_s, v));
        }
        if by_flow.is_empty() {
            continue;
        }
        if let Some(b) = bin {
            for pts in by_flow.values_mut() {
                *pts = bin_mean(pts, b);
            }
        }
        let avg = bin
            .map(|b| format!(", {} ms means", crate::svg::fmt_num(b * 1e3)))
            .unwrap_or_default();
        let mut c = Chart::new(
            format!(
                "{what} over time: {}, run {run} (seed {}){avg}",
                point_title(part, qi),
                rec.seed
            ),
            "time (s)",
            format!("{what} ({unit})"),
        );
        let total = by_flow.len();
        for (flow, pts) in by_flow.into_iter().take(MAX_FLOWS) {
            let f = rec.flows.get(flow);
            let mut name = match f {
                Some(f) if f.class != f.algorithm => {
                    format!("flow {flow}: {} [{}]", f.algorithm, f.class)
                }
                Some(f) => format!("flow {flow}: {}", f.algorithm),
                None => format!("flow {flow}"),
            };
            if f.is_some_and(|f| f.reverse) {
                name.push_str(" (reverse)");
            }
            c.series.push(Series::new(
                name,
                decimate(pts, MAX_POINTS_PER_SERIES),
                Style::Line,
            ));
        }
        if total > MAX_FLOWS {
            c.note = Some(format!("first {MAX_FLOWS} of {total} flows"));
        }
        let kind = match y {
            SeriesKind::Throughput => "throughput",
            SeriesKind::Cwnd => "cwnd",
            SeriesKind::Rtt => "rtt",
        };
        let file = format!("{}-{n:02}-{kind}-{}.svg", part.name, point.id);
        c.id = file.trim_end_matches(".svg").to_string();
        out.push(Plot {
            file,
            title: c.title.clone(),
            svg: render(&c),
        });
    }
    out
}

/// A round bin width (s) at least `w`.
fn nice_bin(w: f64) -> f64 {
    [
        0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
    ]
    .into_iter()
    .find(|b| *b >= w)
    .unwrap_or(60.0)
}

/// Means of `(t, v)` over bins of width `b`, placed at each bin's end.
fn bin_mean(pts: &[(f64, f64)], b: f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = vec![];
    let mut cur: Option<(i64, f64, usize)> = None;
    for &(t, v) in pts {
        let k = ((t - 1e-9) / b).floor() as i64;
        match &mut cur {
            Some((ck, sum, n)) if *ck == k => {
                *sum += v;
                *n += 1;
            }
            _ => {
                if let Some((ck, sum, n)) = cur {
                    out.push(((ck + 1) as f64 * b, sum / n as f64));
                }
                cur = Some((k, v, 1));
            }
        }
    }
    if let Some((ck, sum, n)) = cur {
        out.push(((ck + 1) as f64 * b, sum / n as f64));
    }
    out
}

fn cdf_points(mut v: Vec<f64>) -> Vec<(f64, f64)> {
    v.sort_by(f64::total_cmp);
    let n = 400.min(v.len());
    if n == 0 {
        return vec![];
    }
    let mut pts = vec![(v[0], 0.0)];
    for k in 1..=n {
        let q = k as f64 / n as f64;
        pts.push((percentile(&v, q), q));
    }
    pts
}

fn delay_cdf(
    inp: &Inputs,
    pi: usize,
    n: usize,
    delay: DelayKind,
    by: GroupBy,
    points: usize,
) -> Vec<Plot> {
    let part = &inp.plan.parts[pi];
    match delay {
        DelayKind::Rtt => {
            let mut out = vec![];
            for (qi, point) in part.points.iter().enumerate().take(points) {
                let recs = inp.point_records(pi, qi);
                let mut pooled: BTreeMap<String, Vec<f64>> = BTreeMap::new();
                for rec in &recs {
                    let Some(text) = inp.read(rec, "series.csv") else {
                        continue;
                    };
                    for r in parse_series(&text) {
                        if r.rtt_ms > 0.0 {
                            pooled
                                .entry(group_of(rec, r.flow, by))
                                .or_default()
                                .push(r.rtt_ms);
                        }
                    }
                }
                if pooled.is_empty() {
                    continue;
                }
                let mut c = Chart::new(
                    format!("RTT CDF: {} ({} runs)", point_title(part, qi), recs.len()),
                    "RTT (ms)",
                    "fraction of samples",
                );
                c.y_range = Some((0.0, 1.0));
                for g in groups(&recs, by) {
                    if let Some(v) = pooled.remove(&g) {
                        c.series.push(Series::new(g, cdf_points(v), Style::Step));
                    }
                }
                c.note =
                    Some("RTT sampled every time-series step, all runs of the point pooled".into());
                let file = format!("{}-{n:02}-rtt-cdf-{}.svg", part.name, point.id);
                c.id = file.trim_end_matches(".svg").to_string();
                out.push(Plot {
                    file,
                    title: c.title.clone(),
                    svg: render(&c),
                });
            }
            out
        }
        DelayKind::Owd => {
            let mut c = Chart::new(
                format!("one-way delay CDF at the bottleneck: {}", part.name),
                "one-way delay (ms)",
                "fraction of packets",
            );
            c.y_range = Some((0.0, 1.0));
            for (qi, point) in part.points.iter().enumerate().take(points) {
                let mut hist: BTreeMap<(u64, u64), (f64, f64, u64)> = BTreeMap::new();
                for rec in inp.point_records(pi, qi) {
                    let Some(text) = inp.read(rec, "delay_hist.csv") else {
                        continue;
                    };
                    for (lo, hi, cnt) in parse_delay_hist(&text, "owd") {
                        let key = ((lo * 1e6) as u64, (hi * 1e6) as u64);
                        hist.entry(key).or_insert((lo, hi, 0)).2 += cnt;
                    }
                }
                let total: u64 = hist.values().map(|b| b.2).sum();
                if total == 0 {
                    continue;
                }
                let mut cum = 0;
                let mut pts = vec![];
                for (_, (lo, hi, cnt)) in hist {
                    if pts.is_empty() {
                        pts.push((lo, 0.0));
                    }
                    cum += cnt;
                    pts.push((hi, cum as f64 / total as f64));
                }
                let name = if point.label.is_empty() {
                    part.name.clone()
                } else {
                    point.label.clone()
                };
                c.series.push(Series::new(
                    name,
                    decimate(pts, MAX_POINTS_PER_SERIES),
                    Style::Line,
                ));
            }
            if c.series.is_empty() {
                return vec![];
            }
            c.note = Some(
                "per packet: propagation plus queueing delay at the bottleneck, runs pooled".into(),
            );
            let file = format!("{}-{n:02}-owd-cdf.svg", part.name);
            c.id = file.trim_end_matches(".svg").to_string();
            vec![Plot {
                file,
                title: c.title.clone(),
                svg: render(&c),
            }]
        }
    }
}

fn scatter(inp: &Inputs, pi: usize, n: usize, by: GroupBy) -> Vec<Plot> {
    let part = &inp.plan.parts[pi];
    let k = by.key();
    let all: Vec<&RunRecord> = (0..part.points.len())
        .flat_map(|q| inp.point_records(pi, q))
        .collect();
    if all.is_empty() {
        return vec![];
    }
    let use_owd = all.iter().all(|r| {
        r.metrics
            .keys()
            .any(|m| m.starts_with(&format!("owd_p95_ms:{k}=")))
    });
    let dmetric = if use_owd { "owd_p95_ms" } else { "rtt_p95_ms" };
    let mut c = Chart::new(
        format!("throughput and delay: {}", part.name),
        if use_owd {
            "95th percentile one-way delay (ms)"
        } else {
            "95th percentile RTT (ms)"
        },
        "mean throughput per flow (Mbit/s)",
    );
    c.x = XAxis::Linear { reversed: true };
    let mut color = 0;
    for (qi, point) in part.points.iter().enumerate() {
        let recs = inp.point_records(pi, qi);
        for g in groups(&recs, by) {
            let mut dots = vec![];
            for r in &recs {
                let d = r.metrics.get(&format!("{dmetric}:{k}={g}"));
                let t = r.metrics.get(&format!("goodput_mbps:{k}={g}"));
                let nf = r.metrics.get(&format!("flows:{k}={g}"));
                if let (Some(d), Some(t), Some(nf)) = (d, t, nf)
                    && *nf > 0.0
                {
                    dots.push((*d, t / nf));
                }
            }
            if dots.is_empty() {
                continue;
            }
            let name = if point.label.is_empty() {
                g.clone()
            } else {
                format!("{g} · {}", point.label)
            };
            let mx = dots.iter().map(|d| d.0).sum::<f64>() / dots.len() as f64;
            let my = dots.iter().map(|d| d.1).sum::<f64>() / dots.len() as f64;
            let mut each = Series::new("", dots, Style::Markers);
            each.opacity = 0.35;
            each.size = 3.0;
            each.color = Some(color);
            each.no_legend = true;
            c.series.push(each);
            let mut mean = Series::new(name, vec![(mx, my)], Style::Markers);
            mean.size = 6.5;
            mean.color = Some(color);
            mean.labels = Some(vec![g.clone()]);
            c.series.push(mean);
            color += 1;
        }
    }
    if c.series.is_empty() {
        return vec![];
    }
    c.note = Some("small dots: runs; large: their mean. Up and to the right is better.".into());
    let file = format!("{}-{n:02}-scatter.svg", part.name);
    c.id = file.trim_end_matches(".svg").to_string();
    vec![Plot {
        file,
        title: c.title.clone(),
        svg: render(&c),
    }]
}

fn fct(inp: &Inputs, pi: usize, n: usize, by: GroupBy) -> Vec<Plot> {
    let part = &inp.plan.parts[pi];
    let k = by.key();
    let labels = bucket_labels(&part.fct_buckets);
    let mut out = vec![];
    for (qi, point) in part.points.iter().enumerate().take(4) {
        let Some(sum) = inp.summaries.get(&(pi, qi)) else {
            continue;
        };
        let recs = inp.point_records(pi, qi);
        let mut c = Chart::new(
            format!("flow completion time by size: {}", point_title(part, qi)),
            "flow size",
            "FCT (ms)",
        );
        c.x = XAxis::Categories(labels.clone());
        c.y_log = true;
        let gs = groups(&recs, by);
        let width = 0.5 / gs.len().max(1) as f64;
        for (gi, g) in gs.iter().enumerate() {
            let off = (gi as f64 - (gs.len() as f64 - 1.0) / 2.0) * width;
            for (stat, dashed) in [("fct_mean_ms", false), ("fct_p99_ms", true)] {
                let mut pts = vec![];
                let mut errs = vec![];
                for (b, label) in labels.iter().enumerate() {
                    if let Some(s) = sum.get(&format!("{stat}:{k}={g},size={label}")) {
                        pts.push((b as f64 + off, s.mean));
                        errs.push(s.ci95.unwrap_or(0.0));
                    }
                }
                if pts.is_empty() {
                    continue;
                }
                let what = if dashed { "p99" } else { "mean" };
                let mut s = Series::new(format!("{g} {what}"), pts, Style::LineMarkers);
                s.yerr = Some(errs);
                s.color = Some(gi);
                s.dashed = dashed;
                c.series.push(s);
            }
        }
        if c.series.is_empty() {
            continue;
        }
        c.note = Some("log scale; error bars: 95% confidence interval over runs".into());
        let file = format!("{}-{n:02}-fct-{}.svg", part.name, point.id);
        c.id = file.trim_end_matches(".svg").to_string();
        out.push(Plot {
            file,
            title: c.title.clone(),
            svg: render(&c),
        });
    }
    out
}

fn metric_vs_axis(
    inp: &Inputs,
    pi: usize,
    n: usize,
    metrics: &[String],
    x: &str,
    series: Option<&str>,
    log_x: bool,
) -> Vec<Plot> {
    let part = &inp.plan.parts[pi];
    let value = |q: usize, axis: &str| -> Option<String> {
        part.points[q]
            .values
            .iter()
            .find(|(a, _)| a == axis)
            .map(|(_, v)| v.clone())
    };
    let mut xs: Vec<String> = vec![];
    for q in 0..part.points.len() {
        if let Some(v) = value(q, x)
            && !xs.contains(&v)
        {
            xs.push(v);
        }
    }
    if xs.is_empty() {
        return vec![];
    }
    let numeric: Option<Vec<f64>> = xs.iter().map(|v| v.parse::<f64>().ok()).collect();
    let others: Vec<&String> = {
        let mut o: Vec<&String> = vec![];
        if let Some(s) = series
            && let Some(a) = part.axes.iter().find(|a| *a == s)
        {
            o.push(a);
        }
        o.extend(
            part.axes
                .iter()
                .filter(|a| *a != x && Some(a.as_str()) != series),
        );
        o
    };
    // Metrics that differ only in their qualifier (goodput_mbps:alg=reno, goodput_mbps:alg=cubic)
    // share the axis label and are told apart by the qualifier.
    let bases: Vec<&str> = metrics
        .iter()
        .map(|m| m.split(':').next().unwrap_or(m))
        .collect();
    let same_base = bases.iter().all(|b| *b == bases[0]);
    let short = |m: &str| -> String {
        if same_base && metrics.len() > 1 {
            m.split_once(':')
                .map(|(_, q)| q.to_string())
                .unwrap_or_else(|| m.to_string())
        } else {
            m.to_string()
        }
    };
    let y_label = if same_base {
        bases[0].to_string()
    } else {
        "value".into()
    };
    let title_metrics = if same_base {
        bases[0].to_string()
    } else {
        metrics.join(", ")
    };
    let mut c = Chart::new(
        format!("{title_metrics} against {x}: {}", part.name),
        x,
        y_label,
    );
    c.x = match (&numeric, log_x) {
        (Some(_), true) => XAxis::Log,
        (Some(_), false) => XAxis::Linear { reversed: false },
        (None, _) => XAxis::Categories(xs.clone()),
    };
    let mut keys: Vec<String> = vec![];
    let mut members: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for q in 0..part.points.len() {
        let key = others
            .iter()
            .map(|a| format!("{a}={}", value(q, a).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(", ");
        if !keys.contains(&key) {
            keys.push(key.clone());
        }
        members.entry(key).or_default().push(q);
    }
    let mut color = 0;
    for m in metrics {
        for key in &keys {
            let mut pts = vec![];
            let mut errs = vec![];
            for &q in &members[key] {
                let Some(xv) = value(q, x) else { continue };
                let xpos = match &numeric {
                    Some(_) => match xv.parse::<f64>() {
                        Ok(v) => v,
                        Err(_) => continue,
                    },
                    None => xs.iter().position(|v| *v == xv).unwrap_or(0) as f64,
                };
                if let Some(s) = inp.summaries.get(&(pi, q)).and_then(|s| s.get(m)) {
                    pts.push((xpos, s.mean));
                    errs.push(s.ci95.unwrap_or(0.0));
                }
            }
            if pts.is_empty() {
                continue;
            }
            let mut order: Vec<usize> = (0..pts.len()).collect();
            order.sort_by(|a, b| pts[*a].0.total_cmp(&pts[*b].0));
            let pts: Vec<(f64, f64)> = order.iter().map(|&i| pts[i]).collect();
            let errs: Vec<f64> = order.iter().map(|&i| errs[i]).collect();
            let name = match (metrics.len() > 1, key.is_empty()) {
                (true, true) => short(m),
                (true, false) => format!("{} · {key}", short(m)),
                (false, true) => m.clone(),
                (false, false) => key.clone(),
            };
            let mut s = Series::new(name, pts, Style::LineMarkers);
            s.yerr = Some(errs);
            s.color = Some(color);
            color += 1;
            c.series.push(s);
        }
    }
    if c.series.is_empty() {
        return vec![];
    }
    if log_x
        && numeric
            .as_ref()
            .is_some_and(|v| v.iter().any(|x| *x <= 0.0))
    {
        c.note = Some("error bars: 95% CI over runs (Student t); points at x ≤ 0 are not shown on the log axis".into());
    } else {
        c.note = Some("error bars: 95% confidence interval over runs (Student t)".into());
    }
    let file = format!(
        "{}-{n:02}-{}-vs-{}.svg",
        part.name,
        crate::experiment::slug(&metrics.join("+")),
        crate::experiment::slug(x)
    );
    c.id = file.trim_end_matches(".svg").to_string();
    vec![Plot {
        file,
        title: c.title.clone(),
        svg: render(&c),
    }]
}

/// Every plot of part `pi`.
pub fn part_plots(inp: &Inputs, pi: usize) -> Vec<Plot> {
    let part = &inp.plan.parts[pi];
    let mut out = vec![];
    for (n, spec) in part.plots.iter().enumerate() {
        out.extend(match spec {
            PlotSpec::Timeseries { y, run, points } => timeseries(inp, pi, n, *y, *run, *points),
            PlotSpec::DelayCdf { delay, by, points } => delay_cdf(inp, pi, n, *delay, *by, *points),
            PlotSpec::Scatter { by } => scatter(inp, pi, n, *by),
            PlotSpec::Fct { by } => fct(inp, pi, n, *by),
            PlotSpec::Metric {
                metrics,
                x,
                series,
                log_x,
            } => metric_vs_axis(inp, pi, n, metrics, x, series.as_deref(), *log_x),
        });
    }
    out
}

/// Summaries of every metric of a point's finished runs.
pub fn summarize_point(recs: &[&RunRecord]) -> PointMetrics {
    let mut values: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in recs {
        for (k, v) in &r.metrics {
            values.entry(k.as_str()).or_default().push(*v);
        }
    }
    values
        .into_iter()
        .filter_map(|(k, v)| summarize(&v).map(|s| (k.to_string(), s)))
        .collect()
}
