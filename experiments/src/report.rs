//! The report of a results directory, made from its files alone: `summary.json` and
//! `summary.csv` (mean, standard deviation and 95 % confidence interval of every metric per
//! sweep point), `plots/*.svg`, and `report.html`, one self-contained page (inline SVG, inline
//! CSS, no scripts, no external references) with the tables, the plots, the recipe and the
//! environment. The same files give the same bytes, so a merged directory reports exactly like
//! an unsharded one.

use crate::data::RunRecord;
use crate::env::Machine;
use crate::error::ExpError;
use crate::plots::{Inputs, Plot, PointMetrics, part_plots, summarize_point};
use crate::results::{Plan, PlanPart, is_done, run_dir, write_atomic};
use crate::stats::{Summary, round_sig};
use crate::svg::esc;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What `write` produced.
#[derive(Clone, Debug)]
pub struct Written {
    /// `report.html`.
    pub path: PathBuf,
    pub finished: usize,
    pub planned: usize,
    pub plots: usize,
    /// `PART/POINT` of every point whose finished runs (two or more) gave the same value of every
    /// metric: neither the path nor the algorithms drew anything at random, so its runs are one
    /// run repeated and its standard deviation says nothing.
    pub identical: Vec<String>,
}

/// What the report and `ccp-exp` say of points whose runs are one run repeated.
pub const IDENTICAL: &str = "runs are identical in every metric (nothing in the path or the \
algorithms is random, so more runs add nothing)";

/// A warning paragraph: `head (n): a, b, …` with at most 20 of `items` shown.
fn warn_list(h: &mut String, head: &str, items: &[impl AsRef<str>]) {
    let shown: Vec<String> = items.iter().take(20).map(|m| esc(m.as_ref())).collect();
    let _ = writeln!(
        h,
        "<p class=warn>{} ({}): {}{}</p>",
        esc(head),
        items.len(),
        shown.join(", "),
        if items.len() > 20 { ", …" } else { "" }
    );
}

/// Whether a point's summaries come from two or more runs that agree on every metric.
fn identical_runs(s: &PointMetrics) -> bool {
    !s.is_empty() && s.values().all(|v| v.n >= 2 && v.min == v.max)
}

fn r(s: &Summary) -> Summary {
    Summary {
        n: s.n,
        mean: round_sig(s.mean, 6),
        std: s.std.map(|v| round_sig(v, 6)),
        ci95: s.ci95.map(|v| round_sig(v, 6)),
        min: round_sig(s.min, 6),
        max: round_sig(s.max, 6),
    }
}

/// Read every finished run of `plan` in `out`.
pub fn load_records(out: &Path, plan: &Plan) -> Result<Vec<Option<RunRecord>>, ExpError> {
    plan.runs
        .iter()
        .map(|r| {
            if !is_done(out, &r.id) {
                return Ok(None);
            }
            let p = run_dir(out, &r.id).join("run.json");
            let text = std::fs::read_to_string(&p).map_err(|e| ExpError::io(&p, e))?;
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| ExpError::Json { path: p, source: e })
        })
        .collect()
}

fn cell(s: Option<&Summary>) -> String {
    match s {
        None => "<td class=na>–</td>".into(),
        Some(s) => {
            let ci = s
                .ci95
                .map(|c| format!(" <span class=ci>± {}</span>", crate::svg::fmt_num(c)))
                .unwrap_or_default();
            format!("<td>{}{ci}</td>", crate::svg::fmt_num(s.mean))
        }
    }
}

/// Columns of the summary table: the part's table metrics that some point has (`ratio` stands
/// for every `ratio:*` metric present).
fn columns(part: &PlanPart, sums: &[&PointMetrics]) -> Vec<String> {
    let mut cols = vec![];
    for t in &part.table {
        if t == "ratio" {
            let mut rs: Vec<String> = sums
                .iter()
                .flat_map(|s| s.keys().filter(|k| k.starts_with("ratio:")).cloned())
                .collect();
            rs.sort();
            rs.dedup();
            cols.extend(rs);
        } else if sums.iter().any(|s| s.contains_key(t)) {
            cols.push(t.clone());
        }
    }
    cols
}

const GROUP_COLUMNS: &[&str] = &[
    "flows",
    "goodput_mbps",
    "rtt_p95_ms",
    "owd_p95_ms",
    "loss_rate",
    "jain",
    "fct_mean_ms",
    "fct_p99_ms",
    "convergence_s",
    "satisfaction_mean",
    "deadline_meet_rate",
];

const CSS: &str = "body{font-family:Helvetica,Arial,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}\
h1{margin-bottom:4px}h2{border-bottom:2px solid #4e79a7;padding-bottom:4px;margin-top:36px}\
table{border-collapse:collapse;margin:10px 0;font-size:13px}th,td{border:1px solid #ddd;padding:4px 8px;text-align:right}\
th{background:#f3f6fa}td.l,th.l{text-align:left}td.na{color:#bbb}.ci{color:#777;font-size:11px}\
.meta{color:#555}figure{display:inline-block;margin:8px 12px 8px 0;vertical-align:top}\
figcaption{font-size:11px;color:#777}pre{background:#f7f7f7;padding:12px;overflow:auto;font-size:12px}\
.warn{color:#b00}nav a{margin-right:12px}";

/// Write `summary.json`, `summary.csv`, `plots/` and `report.html` for `out`.
pub fn write(out: &Path) -> Result<Written, ExpError> {
    let plan = Plan::load(out)?;
    let records = load_records(out, &plan)?;
    let finished = records.iter().filter(|r| r.is_some()).count();

    let mut sums: BTreeMap<(usize, usize), PointMetrics> = BTreeMap::new();
    for (pi, part) in plan.parts.iter().enumerate() {
        for qi in 0..part.points.len() {
            let recs: Vec<&RunRecord> = plan
                .runs
                .iter()
                .filter(|r| r.part == pi && r.point == qi)
                .filter_map(|r| records[r.index].as_ref())
                .collect();
            let s: PointMetrics = summarize_point(&recs)
                .iter()
                .map(|(k, v)| (k.clone(), r(v)))
                .collect();
            sums.insert((pi, qi), s);
        }
    }

    // summary.json / summary.csv
    let mut parts_json = vec![];
    let mut identical = vec![];
    let mut csv = String::from("part,point,label,metric,n,mean,std,ci95,min,max\n");
    for (pi, part) in plan.parts.iter().enumerate() {
        let mut points = vec![];
        for (qi, p) in part.points.iter().enumerate() {
            let s = &sums[&(pi, qi)];
            let runs = plan
                .runs
                .iter()
                .filter(|r| r.part == pi && r.point == qi)
                .count();
            let done = plan
                .runs
                .iter()
                .filter(|r| r.part == pi && r.point == qi && records[r.index].is_some())
                .count();
            let same = identical_runs(s);
            if same {
                identical.push(format!("{}/{}", part.name, p.id));
            }
            points.push(json!({
                "id": p.id,
                "label": p.label,
                "axes": p.values.iter().cloned().collect::<BTreeMap<_, _>>(),
                "backend": p.backend,
                "runs": runs,
                "finished": done,
                "identical_runs": same,
                "metrics": s,
            }));
            for (k, v) in s {
                let o = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
                let _ = writeln!(
                    csv,
                    "{},{},{},{},{},{},{},{},{},{}",
                    crate::data::csv_field(&part.name),
                    crate::data::csv_field(&p.id),
                    crate::data::csv_field(&p.label),
                    crate::data::csv_field(k),
                    v.n,
                    v.mean,
                    o(v.std),
                    o(v.ci95),
                    v.min,
                    v.max
                );
            }
        }
        parts_json.push(json!({"name": part.name, "axes": part.axes, "points": points}));
    }
    let summary = json!({
        "name": plan.name,
        "hash": plan.hash,
        "runs": {"planned": plan.runs.len(), "finished": finished},
        "parts": parts_json,
    });
    let mut text = serde_json::to_string_pretty(&summary).unwrap_or_default();
    text.push('\n');
    write_atomic(&out.join("summary.json"), text.as_bytes())?;
    write_atomic(&out.join("summary.csv"), csv.as_bytes())?;

    // Plots.
    let inputs = Inputs {
        out,
        plan: &plan,
        records: &records,
        summaries: &sums,
    };
    let plots_dir = out.join("plots");
    std::fs::create_dir_all(&plots_dir).map_err(|e| ExpError::io(&plots_dir, e))?;
    let mut all_plots: Vec<Vec<Plot>> = vec![];
    let mut names = vec![];
    for pi in 0..plan.parts.len() {
        let ps = part_plots(&inputs, pi);
        for p in &ps {
            write_atomic(&plots_dir.join(&p.file), p.svg.as_bytes())?;
            names.push(p.file.clone());
        }
        all_plots.push(ps);
    }
    if let Ok(rd) = std::fs::read_dir(&plots_dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.ends_with(".svg") && !names.contains(&n) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    // report.html
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>{} — ccp-exp report</title><style>{CSS}</style></head><body>\n",
        esc(&plan.name)
    );
    let _ = writeln!(h, "<h1>{}</h1>", esc(&plan.name));
    if !plan.description.is_empty() {
        let _ = writeln!(h, "<p>{}</p>", esc(&plan.description));
    }
    let _ = writeln!(
        h,
        "<p class=meta>{finished} of {} runs finished · {} part(s) · recipe hash {} · made by ccp-exp from the files of this directory</p>",
        plan.runs.len(),
        plan.parts.len(),
        esc(&plan.hash)
    );
    if finished < plan.runs.len() {
        let missing: Vec<&str> = plan
            .runs
            .iter()
            .filter(|r| records[r.index].is_none())
            .map(|r| r.id.as_str())
            .collect();
        warn_list(&mut h, "Not finished", &missing);
    }
    if !identical.is_empty() {
        warn_list(&mut h, &format!("Points whose {IDENTICAL}"), &identical);
    }
    if plan.parts.len() > 1 {
        h.push_str("<nav>");
        for p in &plan.parts {
            let _ = write!(h, "<a href=\"#part-{0}\">{0}</a>", esc(&p.name));
        }
        h.push_str(
            "<a href=\"#recipe\">recipe</a><a href=\"#environment\">environment</a></nav>\n",
        );
    }
    for (pi, part) in plan.parts.iter().enumerate() {
        let _ = writeln!(h, "<h2 id=\"part-{0}\">{0}</h2>", esc(&part.name));
        if !part.description.is_empty() {
            let _ = writeln!(h, "<p>{}</p>", esc(&part.description));
        }
        let mut backends: Vec<&str> = part.points.iter().map(|p| p.backend.as_str()).collect();
        backends.dedup();
        let runs_per: Vec<usize> = part.points.iter().map(|p| p.seeds.len()).collect();
        let _ = writeln!(
            h,
            "<p class=meta>backend {} · {} point(s){} · {} run(s) per point · mean <span class=ci>± 95% confidence interval (Student t)</span> over runs</p>",
            esc(&backends.join(", ")),
            part.points.len(),
            if part.axes.is_empty() {
                String::new()
            } else {
                format!(" over {}", esc(&part.axes.join(" × ")))
            },
            runs_per.first().copied().unwrap_or(0)
        );
        let point_sums: Vec<&PointMetrics> =
            (0..part.points.len()).map(|q| &sums[&(pi, q)]).collect();
        let cols = columns(part, &point_sums);
        h.push_str("<table><tr>");
        if part.axes.is_empty() {
            h.push_str("<th class=l>point</th>");
        }
        for a in &part.axes {
            let _ = write!(h, "<th class=l>{}</th>", esc(a));
        }
        h.push_str("<th>runs</th>");
        for c in &cols {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        h.push_str("</tr>\n");
        for (qi, p) in part.points.iter().enumerate() {
            h.push_str("<tr>");
            if part.axes.is_empty() {
                let _ = write!(h, "<td class=l>{}</td>", esc(&p.id));
            }
            for (_, v) in &p.values {
                let _ = write!(h, "<td class=l>{}</td>", esc(v));
            }
            let done = plan
                .runs
                .iter()
                .filter(|r| r.part == pi && r.point == qi && records[r.index].is_some())
                .count();
            let _ = write!(h, "<td>{done}/{}</td>", p.seeds.len());
            for c in &cols {
                h.push_str(&cell(point_sums[qi].get(c)));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");

        // Per group.
        for (by, key) in [("algorithm", "alg"), ("class", "class")] {
            let mut rows = vec![];
            for (qi, p) in part.points.iter().enumerate() {
                let s = point_sums[qi];
                let mut gs: Vec<String> = s
                    .keys()
                    .filter_map(|k| k.strip_prefix(&format!("flows:{key}=")))
                    .map(str::to_string)
                    .collect();
                gs.dedup();
                for g in gs {
                    rows.push((p, qi, g));
                }
            }
            let distinct: Vec<&String> = {
                let mut d: Vec<&String> = rows.iter().map(|r| &r.2).collect();
                d.sort();
                d.dedup();
                d
            };
            if distinct.len() < 2 {
                continue;
            }
            let gcols: Vec<&str> = GROUP_COLUMNS
                .iter()
                .copied()
                .filter(|c| {
                    rows.iter()
                        .any(|(_, qi, g)| point_sums[*qi].contains_key(&format!("{c}:{key}={g}")))
                })
                .collect();
            let _ = writeln!(h, "<h3>By {by}</h3><table><tr>");
            if !part.axes.is_empty() {
                h.push_str("<th class=l>point</th>");
            }
            let _ = write!(h, "<th class=l>{by}</th>");
            for c in &gcols {
                let _ = write!(h, "<th>{c}</th>");
            }
            h.push_str("</tr>\n");
            for (p, qi, g) in &rows {
                h.push_str("<tr>");
                if !part.axes.is_empty() {
                    let _ = write!(h, "<td class=l>{}</td>", esc(&p.label));
                }
                let _ = write!(h, "<td class=l>{}</td>", esc(g));
                for c in &gcols {
                    h.push_str(&cell(point_sums[*qi].get(&format!("{c}:{key}={g}"))));
                }
                h.push_str("</tr>\n");
            }
            h.push_str("</table>\n");
        }
        for p in &all_plots[pi] {
            let _ = writeln!(
                h,
                "<figure>{}<figcaption>plots/{}</figcaption></figure>",
                p.svg.trim_end(),
                esc(&p.file)
            );
        }
    }

    let _ = writeln!(h, "<h2 id=recipe>Recipe</h2>");
    let resolved = std::fs::read_to_string(out.join("recipe.resolved.yaml")).unwrap_or_default();
    let _ = writeln!(
        h,
        "<p class=meta>With its includes merged (recipe.resolved.yaml; the file as given is recipe.yaml).</p><pre>{}</pre>",
        esc(&resolved)
    );
    let _ = writeln!(h, "<h2 id=environment>Environment</h2>");
    let env = crate::env::load(out);
    let mut m: Machine = env
        .invocations
        .last()
        .map(|i| i.machine.clone())
        .unwrap_or_default();
    for i in &env.invocations {
        m.binaries.extend(i.machine.binaries.clone());
    }
    h.push_str("<table>");
    let o = |x: &Option<String>| x.clone().unwrap_or_else(|| "unknown".into());
    let mut rows: Vec<(String, String)> = vec![
        ("ccp-exp".into(), m.ccp_exp.clone()),
        ("git commit".into(), o(&m.git_commit)),
        ("rustc".into(), m.rustc.clone()),
        ("kernel".into(), o(&m.kernel)),
        ("os".into(), o(&m.os)),
        ("arch".into(), m.arch.clone()),
        ("cpus".into(), m.cpus.to_string()),
        ("cpu".into(), o(&m.cpu_model)),
    ];
    for (k, v) in &m.binaries {
        rows.push((k.clone(), v.clone()));
    }
    for (k, v) in rows {
        let _ = write!(
            h,
            "<tr><th class=l>{}</th><td class=l>{}</td></tr>",
            esc(&k),
            esc(&v)
        );
    }
    h.push_str("</table>\n<p class=meta>Times of every invocation (and of each shard) are in environment.json.</p>\n");
    h.push_str("<h2>Files</h2><pre>recipe.yaml  recipe.resolved.yaml  plan.json  environment.json\nsummary.json  summary.csv  plots/*.svg  report.html\nruns/&lt;part&gt;/&lt;point&gt;/r&lt;k&gt;/{run.json, flows.csv, series.csv, delay_hist.csv, raw/}</pre>\n");
    h.push_str("</body></html>\n");
    let path = out.join("report.html");
    write_atomic(&path, h.as_bytes())?;
    Ok(Written {
        path,
        finished,
        planned: plan.runs.len(),
        plots: names.len(),
        identical,
    })
}
