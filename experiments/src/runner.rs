//! Executing a plan: the runs of a shard that are not finished yet, simulator runs in parallel
//! (up to `--jobs`, default the number of cores), wall-clock runs (udp, emu, quic) one at a time afterwards
//! with nothing else running, each written into a temporary directory and renamed when
//! complete; progress bars on the terminal; the report at the end.

use crate::backend::{self, Bins, RunContext};
use crate::data::{FLOW_COLUMNS, RunRecord, delay_hist_csv, series_csv};
use crate::env::{Environment, Invocation, Machine, now_unix};
use crate::error::ExpError;
use crate::experiment::Experiment;
use crate::results::{self, Plan, PlanRun, Shard, write_atomic};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub out: PathBuf,
    /// Parallel simulator runs (0: the number of cores).
    pub jobs: usize,
    pub shard: Option<Shard>,
    /// Run only the parts of these names (every part when empty).
    pub parts: Vec<String>,
    /// Empty the results directory first.
    pub fresh: bool,
    pub bins: Bins,
    /// Draw progress bars (when stderr is a terminal).
    pub progress: bool,
    /// The command line, for `environment.json`.
    pub command: String,
    /// Write the report at the end.
    pub report: bool,
}

/// What a `run` did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Runs of the shard and parts selected (or of the plan).
    pub selected: usize,
    pub executed: usize,
    /// Finished before this invocation (resumed).
    pub skipped: usize,
    /// `(run id, error)`.
    pub failed: Vec<(String, String)>,
    /// Half-written runs discarded.
    pub discarded: usize,
    pub report: Option<PathBuf>,
    /// Points whose runs were one run repeated ([`crate::report::Written::identical`]).
    pub identical: Vec<String>,
    pub wall_s: f64,
}

/// Prints a line above the progress bars (or plainly when they are hidden).
pub struct Console {
    mp: MultiProgress,
}

impl Console {
    /// Bars on stderr if `progress`, else none.
    pub fn new(progress: bool) -> Console {
        let target = if progress {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Console {
            mp: MultiProgress::with_draw_target(target),
        }
    }

    /// Print a line to stderr.
    pub fn say(&self, line: &str) {
        if self.mp.is_hidden() {
            eprintln!("{line}");
        } else {
            let _ = self.mp.println(line);
        }
    }
}

fn one_line(rec: &RunRecord) -> String {
    let m = &rec.metrics;
    let mut parts = vec![];
    if let Some(g) = m.get("goodput_mbps") {
        parts.push(format!("{g:.1} Mbit/s"));
    }
    if let Some(u) = m.get("utilization") {
        parts.push(format!("util {:.0}%", u * 100.0));
    }
    if let Some(r) = m.get("rtt_p95_ms") {
        parts.push(format!("rtt p95 {r:.1} ms"));
    }
    if let Some(j) = m.get("jain") {
        parts.push(format!("jain {j:.3}"));
    }
    if let Some(f) = m.get("fct_mean_ms") {
        parts.push(format!("fct {f:.1} ms"));
    }
    parts.join(", ")
}

/// Run one run of the plan into its directory.
fn run_one(
    exp: &Experiment,
    plan: &Plan,
    r: &PlanRun,
    out: &Path,
    bins: &Bins,
    progress: Option<&ProgressBar>,
) -> Result<RunRecord, ExpError> {
    let part = &exp.parts[r.part];
    let point = &part.points[r.point];
    let recipe = &point.recipe;
    let tmp = results::tmp_dir(out, &r.id);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| ExpError::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| ExpError::io(&tmp, e))?;
    let result = (|| -> Result<RunRecord, ExpError> {
        let ctx = RunContext {
            recipe,
            seed: r.seed,
            name: r.id.clone(),
            dir: &tmp,
            bins,
            progress,
        };
        let data = backend::run(&ctx)?;
        let (metrics, rows) = crate::metrics::compute(&data, &recipe.metrics);
        let pp = &plan.parts[r.part].points[r.point];
        let rec = RunRecord {
            id: r.id.clone(),
            part: part.name.clone(),
            point: point.id.clone(),
            point_label: point.label.clone(),
            axes: pp.values.iter().cloned().collect(),
            run: r.run,
            seed: r.seed,
            backend: r.backend.clone(),
            end_s: crate::stats::round_sig(data.end_s, 9),
            // Over the window the metrics measure (a rate schedule's time-weighted mean).
            capacity_mbps: data
                .mean_capacity(recipe.metrics.warmup_us as f64 / 1e6, data.end_s)
                .map(|c| crate::stats::round_sig(c / 1e6, 9)),
            metrics,
            flows: rows,
            notes: data.notes.clone(),
        };
        let mut json = serde_json::to_string_pretty(&rec).unwrap_or_default();
        json.push('\n');
        let w = |name: &str, text: &[u8]| -> Result<(), ExpError> {
            let p = tmp.join(name);
            std::fs::write(&p, text).map_err(|e| ExpError::io(&p, e))
        };
        w("run.json", json.as_bytes())?;
        // A run with reverse flows gets a last column, `direction` (forward or reverse).
        let directions = rec.flows.iter().any(|f| f.reverse);
        let mut csv = FLOW_COLUMNS.join(",");
        if directions {
            csv.push_str(",direction");
        }
        csv.push('\n');
        for f in &rec.flows {
            csv.push_str(&f.csv());
            if directions {
                csv.push_str(if f.reverse { ",reverse" } else { ",forward" });
            }
            csv.push('\n');
        }
        w("flows.csv", csv.as_bytes())?;
        w("series.csv", series_csv(&data.series).as_bytes())?;
        if let Some(h) = delay_hist_csv(&data) {
            w("delay_hist.csv", h.as_bytes())?;
        }
        let dest = results::run_dir(out, &r.id);
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(|e| ExpError::io(&dest, e))?;
        }
        std::fs::rename(&tmp, &dest).map_err(|e| ExpError::io(&dest, e))?;
        Ok(rec)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// Run `exp` into `opts.out` (resuming what is there), then write the report.
pub fn run(exp: &Experiment, opts: &RunOptions) -> Result<Outcome, ExpError> {
    let t0 = Instant::now();
    let started = now_unix();
    let plan = Plan::of(exp);
    // Before the results directory is touched: a bad selection leaves nothing behind.
    let parts = plan.select_parts(&opts.parts)?;
    crate::backend::check_log_filters().map_err(ExpError::Usage)?;
    let discarded = results::prepare(&opts.out, exp, &plan, opts.fresh, &parts)?;
    let console = Console::new(opts.progress);
    let mut outcome = Outcome {
        discarded,
        ..Outcome::default()
    };
    if discarded > 0 {
        console.say(&format!(
            "discarded {discarded} half-written run(s) of an interrupted invocation"
        ));
    }
    let selected: Vec<&PlanRun> = plan
        .runs
        .iter()
        .filter(|r| parts[r.part] && opts.shard.is_none_or(|s| s.contains(r.index)))
        .collect();
    outcome.selected = selected.len();
    let (done, todo): (Vec<&PlanRun>, Vec<&PlanRun>) = selected
        .iter()
        .partition(|r| results::is_done(&opts.out, &r.id));
    outcome.skipped = done.len();
    if !done.is_empty() {
        console.say(&format!(
            "{} of {} runs already finished in {}; running the other {}",
            done.len(),
            selected.len(),
            opts.out.display(),
            todo.len()
        ));
    }
    if todo
        .iter()
        .any(|r| r.backend == "emu" || r.backend == "quic")
        && let Some(why) = crate::backend::emu::unavailable_here()
    {
        return Err(ExpError::Backend(
            crate::backend::BackendError::Unavailable(why),
        ));
    }
    let mut machine = Machine::here();
    if todo
        .iter()
        .any(|r| matches!(r.backend.as_str(), "udp" | "emu" | "quic"))
    {
        for b in ["ccp-agent", "ccp-udp"] {
            let p = opts.bins.find(b)?;
            machine.add_binary(b, &p);
        }
    }
    if todo.iter().any(|r| r.backend == "quic") {
        let p = opts.bins.find("ccp-quic")?;
        machine.add_binary("ccp-quic", &p);
    }

    let (parallel, serial): (Vec<&PlanRun>, Vec<&PlanRun>) = todo
        .iter()
        .partition(|r| crate::recipe::Backend::from_name(&r.backend).is_some_and(|b| b.parallel()));
    let overall = console.mp.add(ProgressBar::new(todo.len() as u64));
    overall.set_style(
        ProgressStyle::with_template(
            "{prefix:.bold} [{bar:32.cyan/blue}] {pos}/{len} runs  {elapsed_precise} (eta {eta})  {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    overall.set_prefix(exp.name.clone());
    overall.enable_steady_tick(std::time::Duration::from_millis(200));
    let total = todo.len();
    let counter = AtomicUsize::new(0);
    let failures: Mutex<Vec<(String, String)>> = Mutex::new(vec![]);
    let report_line = |r: &PlanRun, res: &Result<RunRecord, ExpError>, secs: f64| {
        let k = counter.fetch_add(1, Ordering::SeqCst) + 1;
        match res {
            Ok(rec) => console.say(&format!(
                "[{k}/{total}] {} (seed {}): {} [{secs:.1} s]",
                r.id,
                r.seed,
                one_line(rec)
            )),
            Err(e) => {
                console.say(&format!(
                    "[{k}/{total}] {} (seed {}) FAILED: {e}",
                    r.id, r.seed
                ));
                if let Ok(mut f) = failures.lock() {
                    f.push((r.id.clone(), e.to_string()));
                }
            }
        }
        overall.inc(1);
    };

    // Simulator runs: a pool of workers over a shared index.
    let jobs = if opts.jobs == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.jobs
    }
    .min(parallel.len().max(1));
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(r) = parallel.get(i) else { break };
                    overall.set_message(r.id.clone());
                    tracing::debug!(run = %r.id, seed = r.seed, "start");
                    let t = Instant::now();
                    let res = run_one(exp, &plan, r, &opts.out, &opts.bins, None);
                    report_line(r, &res, t.elapsed().as_secs_f64());
                }
            });
        }
    });

    // Wall-clock runs, one at a time.
    for r in &serial {
        overall.set_message(r.id.clone());
        let part = &exp.parts[r.part];
        let dur_ms = part.points[r.point].recipe.duration_us / 1000;
        let bar = console.mp.add(ProgressBar::new(dur_ms.max(1)));
        bar.set_style(
            ProgressStyle::with_template(
                "  {msg} [{bar:32.green/white}] {percent:>3}% of {len} ms",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(format!("{} (real time)", r.id));
        let t = Instant::now();
        let res = run_one(exp, &plan, r, &opts.out, &opts.bins, Some(&bar));
        bar.finish_and_clear();
        console.mp.remove(&bar);
        report_line(r, &res, t.elapsed().as_secs_f64());
    }
    overall.finish_and_clear();
    outcome.executed = total;
    outcome.failed = failures.into_inner().unwrap_or_default();
    outcome.executed -= outcome.failed.len();
    outcome.wall_s = t0.elapsed().as_secs_f64();

    let mut env: Environment = crate::env::load(&opts.out);
    env.invocations.push(Invocation {
        command: opts.command.clone(),
        shard: opts.shard.map(|s| s.to_string()),
        parts: opts.parts.clone(),
        started_unix: started,
        finished_unix: now_unix(),
        wall_s: crate::stats::round_sig(outcome.wall_s, 4),
        executed: outcome.executed,
        skipped: outcome.skipped,
        failed: outcome.failed.len(),
        machine,
    });
    let mut text = serde_json::to_string_pretty(&env).unwrap_or_default();
    text.push('\n');
    write_atomic(&opts.out.join("environment.json"), text.as_bytes())?;
    if opts.report {
        let w = crate::report::write(&opts.out)?;
        outcome.report = Some(w.path);
        outcome.identical = w.identical;
    }
    Ok(outcome)
}
