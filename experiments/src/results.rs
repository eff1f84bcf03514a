//! The results directory: its layout, the plan of runs (and its deterministic shards), atomic
//! writes, resuming, and merging shard directories.
//!
//! ```text
//! <out>/
//!   recipe.yaml            the recipe file as given
//!   recipe.resolved.yaml   with its includes merged
//!   plan.json              parts, points, plots and every run (id, seed); identical for every shard
//!   environment.json       versions, machine, invocations with times (the only file that varies)
//!   runs/<part>/<point>/r<k>/
//!       run.json           point, seed, run-level metrics, per-flow rows
//!       flows.csv          per-flow rows
//!       series.csv         t_s,flow,goodput_mbps,cwnd_kb,rtt_ms
//!       delay_hist.csv     per-packet delay at the bottleneck (simulator)
//!       raw/               the backend's own outputs
//!   summary.json, summary.csv   mean, std, 95 % CI of every metric per point
//!   plots/*.svg
//!   report.html            one self-contained page: tables, inline plots, the recipe
//! ```
//!
//! A run is written into `runs/<part>/<point>/.tmp-r<k>-<pid>` and renamed to `r<k>` when
//! complete, so a directory `r<k>` is always a finished run and an interrupted sweep resumes by
//! skipping them; leftover `.tmp-*` directories are removed.

use crate::error::ExpError;
use crate::experiment::Experiment;
use crate::recipe::PlotSpec;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Version of the results format.
pub const FORMAT: u32 = 1;

/// A point of a part, as the plan records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanPoint {
    pub id: String,
    pub label: String,
    /// `(axis, value)` in axis order.
    pub values: Vec<(String, String)>,
    pub backend: String,
    pub seeds: Vec<u64>,
}

/// A part, as the plan records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanPart {
    pub name: String,
    pub description: String,
    pub axes: Vec<String>,
    pub points: Vec<PlanPoint>,
    pub plots: Vec<PlotSpec>,
    /// Metrics of the report's tables.
    pub table: Vec<String>,
    pub fct_buckets: Vec<u64>,
}

/// One run of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanRun {
    /// Position in the plan (shards are taken by this index).
    pub index: usize,
    /// `part/point/r<k>`, also its directory under `runs/`.
    pub id: String,
    pub part: usize,
    pub point: usize,
    pub run: u32,
    pub seed: u64,
    pub backend: String,
}

/// `plan.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub format: u32,
    pub name: String,
    pub description: String,
    /// Hash of the resolved recipe.
    pub hash: String,
    pub parts: Vec<PlanPart>,
    pub runs: Vec<PlanRun>,
}

impl Plan {
    /// The plan of an experiment: parts in order, points in sweep order, runs in seed order.
    pub fn of(exp: &Experiment) -> Plan {
        let mut parts = vec![];
        let mut runs = vec![];
        for (pi, part) in exp.parts.iter().enumerate() {
            let mut points = vec![];
            for (qi, point) in part.points.iter().enumerate() {
                let backend = point.recipe.backend.name().to_string();
                for (k, seed) in point.recipe.seeds.iter().enumerate() {
                    runs.push(PlanRun {
                        index: runs.len(),
                        id: format!("{}/{}/r{k}", part.name, point.id),
                        part: pi,
                        point: qi,
                        run: k as u32,
                        seed: *seed,
                        backend: backend.clone(),
                    });
                }
                points.push(PlanPoint {
                    id: point.id.clone(),
                    label: point.label.clone(),
                    values: point.values.clone(),
                    backend,
                    seeds: point.recipe.seeds.clone(),
                });
            }
            let first = &part.points[0].recipe;
            parts.push(PlanPart {
                name: part.name.clone(),
                description: part.description.clone(),
                axes: part.axes.clone(),
                points,
                plots: part.plots.clone(),
                table: first.metrics.table.clone(),
                fct_buckets: first.metrics.fct_buckets.clone(),
            });
        }
        Plan {
            format: FORMAT,
            name: exp.name.clone(),
            description: exp.description.clone(),
            hash: exp.hash.clone(),
            parts,
            runs,
        }
    }

    /// As JSON text (what `plan.json` holds).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Read `plan.json` of `dir`.
    pub fn load(dir: &Path) -> Result<Plan, ExpError> {
        let p = dir.join("plan.json");
        let text = std::fs::read_to_string(&p).map_err(|e| ExpError::io(&p, e))?;
        serde_json::from_str(&text).map_err(|e| ExpError::Json { path: p, source: e })
    }
}

impl Plan {
    /// Which parts `names` selects, as a mask over the plan's parts: every part when `names` is
    /// empty. A name that is not a part of the recipe is an error that lists the parts.
    pub fn select_parts(&self, names: &[String]) -> Result<Vec<bool>, ExpError> {
        let mut mask = vec![names.is_empty(); self.parts.len()];
        for name in names {
            match self.parts.iter().position(|p| &p.name == name) {
                Some(i) => mask[i] = true,
                None => {
                    let known = self.parts.iter().map(|p| p.name.as_str());
                    let hint = ccp_algorithms::params::did_you_mean(name, known.clone())
                        .map(|n| format!(" (did you mean {n:?}?)"))
                        .unwrap_or_default();
                    return Err(ExpError::Usage(format!(
                        "--part {name}: {} has no part {name:?}{hint}; its parts: {}",
                        self.name,
                        known.collect::<Vec<_>>().join(", ")
                    )));
                }
            }
        }
        Ok(mask)
    }
}

/// A deterministic slice of a plan: run `i` belongs to shard `i mod count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 0-based.
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("{s:?}: expected I/N with 0 <= I < N, e.g. 0/4 (shards count from 0)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Whether plan run `index` belongs to this shard.
    pub fn contains(&self, index: usize) -> bool {
        index % self.count == self.index
    }
}

/// Write `text` to `path` atomically (a temporary file beside it, then a rename).
pub fn write_atomic(path: &Path, text: &[u8]) -> Result<(), ExpError> {
    ccp_files::write_bytes(path, text).map_err(|e| ExpError::io(path, e))
}

/// Directory of a finished run.
pub fn run_dir(out: &Path, id: &str) -> PathBuf {
    out.join("runs").join(id)
}

/// Whether run `id` has finished (its directory exists only once complete).
pub fn is_done(out: &Path, id: &str) -> bool {
    run_dir(out, id).join("run.json").is_file()
}

/// The temporary directory a run is written into before it is renamed.
pub fn tmp_dir(out: &Path, id: &str) -> PathBuf {
    let d = run_dir(out, id);
    let name = d
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    d.with_file_name(format!(".tmp-{name}-{}", std::process::id()))
}

/// Remove half-written runs (`.tmp-*` directories) under `runs/`; returns how many.
pub fn remove_partial(out: &Path) -> usize {
    fn walk(d: &Path, n: &mut usize) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            if e.file_name().to_string_lossy().starts_with(".tmp-") {
                if std::fs::remove_dir_all(&p).is_ok() {
                    *n += 1;
                }
            } else {
                walk(&p, n);
            }
        }
    }
    let mut n = 0;
    walk(&out.join("runs"), &mut n);
    n
}

/// Files a results directory holds besides `runs/` (removed by `--fresh`).
const TOP_FILES: &[&str] = &[
    "recipe.yaml",
    "recipe.resolved.yaml",
    "plan.json",
    "environment.json",
    "summary.json",
    "summary.csv",
    "report.html",
];

/// Make `out` ready for `exp`: a new directory, or one holding the same plan (resume). A
/// directory holding another plan is refused unless `fresh`, which empties it first. With
/// `fresh`, a directory holding the same plan loses only the runs of the parts `selected`
/// ([`Plan::select_parts`]; every part when all are), so one part can be measured again.
/// Returns the number of half-written runs discarded.
pub fn prepare(
    out: &Path,
    exp: &Experiment,
    plan: &Plan,
    fresh: bool,
    selected: &[bool],
) -> Result<usize, ExpError> {
    let plan_path = out.join("plan.json");
    let text = plan.to_json();
    let same_plan = match std::fs::read_to_string(&plan_path) {
        Ok(old) => old == text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(ExpError::io(&plan_path, e)),
    };
    if fresh && same_plan && !selected.iter().all(|&s| s) {
        for (part, _) in plan.parts.iter().zip(selected).filter(|(_, s)| **s) {
            let p = out.join("runs").join(&part.name);
            if p.exists() {
                std::fs::remove_dir_all(&p).map_err(|e| ExpError::io(&p, e))?;
            }
        }
    } else if fresh {
        for f in TOP_FILES {
            let _ = std::fs::remove_file(out.join(f));
        }
        for d in ["runs", "plots"] {
            let p = out.join(d);
            if p.exists() {
                std::fs::remove_dir_all(&p).map_err(|e| ExpError::io(&p, e))?;
            }
        }
    } else if plan_path.exists() {
        if !same_plan {
            return Err(ExpError::Results(format!(
                "{} holds the results of another recipe or version of this one (its plan.json differs); use --fresh to start over there, or another --out",
                out.display()
            )));
        }
    } else if out.exists()
        && std::fs::read_dir(out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
        && !out.join("runs").exists()
    {
        return Err(ExpError::Results(format!(
            "{} exists and is not a results directory; choose another --out",
            out.display()
        )));
    }
    std::fs::create_dir_all(out.join("runs")).map_err(|e| ExpError::io(out, e))?;
    write_atomic(&out.join("recipe.yaml"), exp.source.as_bytes())?;
    write_atomic(&out.join("recipe.resolved.yaml"), exp.resolved.as_bytes())?;
    write_atomic(&plan_path, text.as_bytes())?;
    Ok(remove_partial(out))
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), ExpError> {
    std::fs::create_dir_all(to).map_err(|e| ExpError::io(to, e))?;
    for e in std::fs::read_dir(from).map_err(|e| ExpError::io(from, e))? {
        let e = e.map_err(|e| ExpError::io(from, e))?;
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_tree(&p, &t)?;
        } else {
            std::fs::copy(&p, &t).map_err(|e| ExpError::io(&p, e))?;
        }
    }
    Ok(())
}

/// What a merge did.
#[derive(Clone, Debug, Default)]
pub struct MergeOutcome {
    pub runs: usize,
    pub missing: Vec<String>,
    pub duplicates: usize,
}

/// Merge shard directories `inputs` into `out`: they must hold the same plan; finished runs are
/// copied (a run present in several shards is taken from the first), environments are
/// concatenated.
pub fn merge(out: &Path, inputs: &[PathBuf]) -> Result<MergeOutcome, ExpError> {
    if inputs.is_empty() {
        return Err(ExpError::Results(
            "nothing to merge: name the shard directories".into(),
        ));
    }
    let first = inputs[0].join("plan.json");
    let plan_text = std::fs::read_to_string(&first).map_err(|e| ExpError::io(&first, e))?;
    for i in &inputs[1..] {
        let p = i.join("plan.json");
        let t = std::fs::read_to_string(&p).map_err(|e| ExpError::io(&p, e))?;
        if t != plan_text {
            return Err(ExpError::Results(format!(
                "{} and {} hold different plans (another recipe, or another version of it); only shards of one run merge",
                inputs[0].display(),
                i.display()
            )));
        }
    }
    let plan: Plan = serde_json::from_str(&plan_text).map_err(|e| ExpError::Json {
        path: first.clone(),
        source: e,
    })?;
    if out.join("plan.json").exists() {
        let t = std::fs::read_to_string(out.join("plan.json")).unwrap_or_default();
        if t != plan_text {
            return Err(ExpError::Results(format!(
                "{} already holds another plan; choose another --out",
                out.display()
            )));
        }
    }
    std::fs::create_dir_all(out.join("runs")).map_err(|e| ExpError::io(out, e))?;
    for f in ["recipe.yaml", "recipe.resolved.yaml", "plan.json"] {
        let src = inputs[0].join(f);
        let text = std::fs::read(&src).map_err(|e| ExpError::io(&src, e))?;
        write_atomic(&out.join(f), &text)?;
    }
    let mut outcome = MergeOutcome::default();
    for r in &plan.runs {
        let mut found = false;
        for i in inputs {
            if !is_done(i, &r.id) {
                continue;
            }
            if found {
                outcome.duplicates += 1;
                continue;
            }
            found = true;
            if !is_done(out, &r.id) {
                let tmp = tmp_dir(out, &r.id);
                let _ = std::fs::remove_dir_all(&tmp);
                copy_tree(&run_dir(i, &r.id), &tmp)?;
                std::fs::rename(&tmp, run_dir(out, &r.id))
                    .map_err(|e| ExpError::io(&run_dir(out, &r.id), e))?;
            }
        }
        if found || is_done(out, &r.id) {
            outcome.runs += 1;
        } else {
            outcome.missing.push(r.id.clone());
        }
    }
    let mut env = crate::env::load(out);
    for i in inputs {
        env.invocations.extend(crate::env::load(i).invocations);
    }
    let mut text = serde_json::to_string_pretty(&env).unwrap_or_default();
    text.push('\n');
    write_atomic(&out.join("environment.json"), text.as_bytes())?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_plan() {
        let shards: Vec<Shard> = (0..3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        for run in 0..10 {
            assert_eq!(shards.iter().filter(|s| s.contains(run)).count(), 1);
        }
        assert!("3/3".parse::<Shard>().is_err());
        assert!("1/0".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
        assert_eq!("2/5".parse::<Shard>().unwrap().to_string(), "2/5");
    }
}
