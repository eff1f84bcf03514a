//! `ccp-exp`: validate, run, report, list and merge experiments described by YAML recipes.

use anyhow::{Context, Result};
use ccp_exp::backend::Bins;
use ccp_exp::recipe::{METRICS, Queue};
use ccp_exp::results::{Plan, Shard};
use ccp_exp::runner::RunOptions;
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Experiments as data: a YAML recipe names the backend, the link, the flows, the sweep, the
/// metrics and the plots; ccp-exp validates it (file:line:col messages), runs it (resumable,
/// shardable), and writes a results directory with one self-contained HTML report.
#[derive(Parser, Debug)]
#[command(name = "ccp-exp", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log filter (tracing env-filter syntax), e.g. info or ccp_exp=debug
    #[arg(long, default_value = "warn", global = true)]
    log_level: String,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check recipes and report every error with file, line, column and the expected form
    Validate {
        #[arg(required = true)]
        recipes: Vec<PathBuf>,
    },
    /// Run a recipe (or the runs of one shard) into a results directory, resuming what is there
    Run {
        recipe: PathBuf,
        /// Results directory (default: results/<recipe name>)
        #[arg(long)]
        out: Option<PathBuf>,
        /// Simulator runs at once (default: the number of cores); real-time runs go one at a time
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// Run only the runs i, i+n, i+2n, ... of the plan (0 <= i < n), e.g. --shard $SLURM_ARRAY_TASK_ID/8
        #[arg(long)]
        shard: Option<Shard>,
        /// Run only the part of this name (repeatable; `ccp-exp list RECIPE` shows the parts).
        /// The other parts' runs stay to do: the same command without --part runs them later
        #[arg(long = "part", value_name = "NAME")]
        parts: Vec<String>,
        /// Discard what the results directory holds and start over
        #[arg(long)]
        fresh: bool,
        /// Where ccp-agent and ccp-udp are (default: beside ccp-exp, then PATH)
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        /// Do not write the report at the end
        #[arg(long)]
        no_report: bool,
        /// No progress bars
        #[arg(long)]
        no_progress: bool,
    },
    /// (Re)write summary, plots and report.html of a results directory
    Report { dir: PathBuf },
    /// Without a recipe: backends, algorithms and their parameters, queues, metrics, plots.
    /// With one: its runs (and their shard)
    List {
        recipe: Option<PathBuf>,
        #[arg(long)]
        shard: Option<Shard>,
        /// Only the runs of the part of this name (repeatable)
        #[arg(long = "part", value_name = "NAME")]
        parts: Vec<String>,
    },
    /// Merge the results directories of the shards of one run, then write the report
    Merge {
        /// The merged results directory
        #[arg(long)]
        out: PathBuf,
        #[arg(required = true)]
        shards: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log redirected to a file stays plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ccp-exp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &Path) -> Result<ccp_exp::Experiment, ExitCode> {
    ccp_exp::load(path).map_err(|errs| {
        for e in errs.list() {
            eprintln!("{e}");
        }
        // The ccp-sim hint explains the errors before it; it is not one more.
        let hints = errs
            .list()
            .iter()
            .filter(|e| e.message.starts_with(ccp_exp::recipe::SIM_SCENARIO_HINT))
            .count();
        if hints > 0 {
            eprintln!(
                "{}: a ccp-sim scenario, not a ccp-exp recipe",
                path.display()
            );
        } else {
            eprintln!("{}: {} error(s)", path.display(), errs.list().len());
        }
        ExitCode::FAILURE
    })
}

fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Validate { recipes } => {
            let mut code = ExitCode::SUCCESS;
            for r in recipes {
                match load(&r) {
                    Ok(exp) => {
                        let points: usize = exp.parts.iter().map(|p| p.points.len()).sum();
                        let mut backends: Vec<&str> = exp
                            .parts
                            .iter()
                            .flat_map(|p| &p.points)
                            .map(|p| p.recipe.backend.name())
                            .collect();
                        backends.sort();
                        backends.dedup();
                        println!(
                            "{}: ok: {} part(s), {points} point(s), {} run(s) on {}",
                            r.display(),
                            exp.parts.len(),
                            exp.run_count(),
                            backends.join(", ")
                        );
                    }
                    Err(c) => code = c,
                }
            }
            Ok(code)
        }
        Command::Run {
            recipe,
            out,
            jobs,
            shard,
            parts,
            fresh,
            bin_dir,
            no_report,
            no_progress,
        } => {
            let exp = match load(&recipe) {
                Ok(e) => e,
                Err(c) => return Ok(c),
            };
            let out = out.unwrap_or_else(|| PathBuf::from("results").join(&exp.name));
            // Ctrl-C / SIGTERM: stop at once; finished runs stay, half-written ones are discarded
            // by the next invocation, child processes die with us (PR_SET_PDEATHSIG).
            let stop = Arc::new(AtomicBool::new(false));
            for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                signal_hook::flag::register(sig, stop.clone())?;
            }
            std::thread::spawn(move || {
                loop {
                    if stop.load(Ordering::SeqCst) {
                        eprintln!(
                            "\nccp-exp: interrupted; finished runs are kept: run the same command again to resume"
                        );
                        std::process::exit(130);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            });
            let opts = RunOptions {
                out: out.clone(),
                jobs,
                shard,
                parts: parts.clone(),
                fresh,
                bins: Bins { dir: bin_dir },
                progress: !no_progress && std::io::stderr().is_terminal(),
                command: std::env::args().collect::<Vec<_>>().join(" "),
                report: !no_report,
            };
            let o = ccp_exp::run(&exp, &opts)?;
            let of_parts = match parts.as_slice() {
                [] => String::new(),
                [one] => format!(" of part {one}"),
                many => format!(" of parts {}", many.join(", ")),
            };
            println!(
                "{}: {} run(s){of_parts}{}: {} run now, {} kept from before, {} failed, in {:.1} s",
                exp.name,
                o.selected,
                shard.map(|s| format!(" of shard {s}")).unwrap_or_default(),
                o.executed,
                o.skipped,
                o.failed.len(),
                o.wall_s
            );
            for (id, e) in &o.failed {
                println!("failed: {id}: {e}");
            }
            print_identical(&o.identical);
            println!("results: {}", out.display());
            if let Some(r) = &o.report {
                let abs = r.canonicalize().unwrap_or_else(|_| r.clone());
                println!("report: {}", abs.display());
            }
            Ok(if o.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Report { dir } => {
            let w = ccp_exp::report::write(&dir)
                .with_context(|| format!("writing the report of {}", dir.display()))?;
            print_identical(&w.identical);
            println!(
                "{} of {} runs, {} plots; report: {}",
                w.finished,
                w.planned,
                w.plots,
                w.path.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge { out, shards } => {
            let m = ccp_exp::results::merge(&out, &shards)?;
            let w = ccp_exp::report::write(&out)?;
            println!(
                "merged {} shard(s): {} run(s){}{}",
                shards.len(),
                m.runs,
                if m.duplicates > 0 {
                    format!(", {} present in several shards (first kept)", m.duplicates)
                } else {
                    String::new()
                },
                if m.missing.is_empty() {
                    String::new()
                } else {
                    format!(", {} missing", m.missing.len())
                }
            );
            for id in &m.missing {
                println!("missing: {id}");
            }
            print_identical(&w.identical);
            println!("report: {}", w.path.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::List {
            recipe: None,
            shard,
            parts,
        } => {
            if shard.is_some() || !parts.is_empty() {
                anyhow::bail!(
                    "--shard and --part select runs of a recipe: give one (ccp-exp list RECIPE)"
                );
            }
            list_capabilities();
            Ok(ExitCode::SUCCESS)
        }
        Command::List {
            recipe: Some(r),
            shard,
            parts,
        } => {
            let exp = match load(&r) {
                Ok(e) => e,
                Err(c) => return Ok(c),
            };
            let plan = Plan::of(&exp);
            let selected = plan.select_parts(&parts)?;
            let runs: Vec<_> = plan
                .runs
                .iter()
                .filter(|r| selected[r.part] && shard.is_none_or(|s| s.contains(r.index)))
                .collect();
            let of = if runs.len() == plan.runs.len() {
                String::new()
            } else {
                format!(" of {}", plan.runs.len())
            };
            println!(
                "{}: {} part(s) ({}), {} run(s){of}",
                exp.name,
                plan.parts.len(),
                plan.parts
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                runs.len()
            );
            for run in runs {
                let label = &plan.parts[run.part].points[run.point].label;
                println!(
                    "{:>4}  {:<48} seed {:<6} {:<4} {}",
                    run.index, run.id, run.seed, run.backend, label
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A note naming the points whose runs were one run repeated, if any.
fn print_identical(points: &[String]) {
    if points.is_empty() {
        return;
    }
    println!("note: these points' {}:", ccp_exp::report::IDENTICAL);
    for p in points {
        println!("  {p}");
    }
}

fn list_capabilities() {
    println!("backends:");
    for (b, why) in ccp_exp::experiment::backends() {
        match why {
            None => {
                println!("  {:<7} available      {}", b.name(), b.summary());
                if b == ccp_exp::recipe::Backend::Emu
                    && let Some(here) = ccp_exp::backend::emu::unavailable_here()
                {
                    println!(
                        "  {:<7}                but not as this user on this machine: {here}",
                        ""
                    );
                }
            }
            Some(w) => println!("  {:<7} NOT AVAILABLE  {w}", b.name()),
        }
    }
    println!("\nalgorithms (recipe: flows[].algorithm and flows[].params):");
    for a in ccp_algorithms::registry::all() {
        println!("  {:<8} {}", a.name, a.summary);
        for p in a.params {
            println!(
                "      {:<20} {:<8} default {:<10} {}",
                p.key,
                p.unit.label(),
                p.unit.show(p.default),
                p.help
            );
        }
    }
    println!("\nqueues (link.queue, link.queue_args in mahimahi's form):");
    for q in Queue::TYPES {
        let args = match *q {
            "infinite" => "",
            "droptail" | "drophead" => "packets=N | bytes=SIZE | bdp=X (sim)",
            "codel" => "packets=N | bytes=SIZE, target=MS (5), interval=MS (100)",
            "pie" => "packets=N | bytes=SIZE, qdelay_ref=MS (15), max_burst=MS (150)",
            _ => "min=, max= (packets or sizes), max_p=0.1, ecn=false, packets=|bytes= (sim only)",
        };
        let on = match *q {
            "infinite" | "droptail" => "sim, emu",
            "red" => "sim",
            _ => "emu",
        };
        println!("  {q:<9} {args:<66} backends: {on}");
    }
    println!(
        "\nmetrics (forward flows; qualify with :alg=NAME, :class=NAME, or :dir=reverse for the reverse flows; fct_* also :size=BUCKET):"
    );
    for chunk in METRICS.chunks(6) {
        println!("  {}", chunk.join(", "));
    }
    println!("\nplots (plots[].kind):");
    println!("  timeseries  y: throughput|cwnd|rtt, run: K, points: N");
    println!("  delay_cdf   delay: rtt|owd, by: algorithm|class, points: N");
    println!(
        "  scatter     by: algorithm|class   (throughput vs 95th percentile delay, delay axis reversed)"
    );
    println!("  fct         by: algorithm|class   (FCT mean and p99 by size bucket)");
    println!("  metric      metric: NAME or [NAMES], x: AXIS, series: AXIS, log_x: BOOL");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let (mut recipes, mut scenarios) = (vec![], vec![]);
    shipped_files(&dir, &mut recipes, &mut scenarios);
    for (title, files) in [
        (
            format!("recipes in {} (ccp-exp run FILE):", dir.display()),
            recipes,
        ),
        (
            "ccp-sim scenarios there (ccp-sim run FILE --out DIR):".to_string(),
            scenarios,
        ),
    ] {
        if !files.is_empty() {
            println!("\n{title}");
            print_grouped(&dir, files);
        }
    }
}

/// The shipped files under `dir`, recursively: ccp-exp recipes and ccp-sim scenarios (include
/// bases, in `base/` folders, are neither).
fn shipped_files(dir: &Path, recipes: &mut Vec<PathBuf>, scenarios: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for p in rd.flatten().map(|e| e.path()) {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "base") {
                shipped_files(&p, recipes, scenarios);
            }
        } else if p.extension().is_some_and(|x| x == "yaml") {
            let scenario = std::fs::read_to_string(&p)
                .ok()
                .and_then(|t| ccp_exp::tree::Node::parse(&p, &t).ok())
                .is_some_and(|root| ccp_exp::recipe::sim_scenario_hint(&p, &root).is_some());
            if scenario {
                scenarios.push(p);
            } else {
                recipes.push(p);
            }
        }
    }
}

/// `files` (under `root`) one folder a line: `folder/: a.yaml, b.yaml`, wrapped.
fn print_grouped(root: &Path, mut files: Vec<PathBuf>) {
    // The top folder's files first, then each folder's.
    files.sort_by_key(|f| {
        (
            f.parent().map(Path::to_path_buf),
            f.file_name().map(|n| n.to_os_string()),
        )
    });
    let mut groups: Vec<(String, Vec<String>)> = vec![];
    for f in &files {
        let rel = f.strip_prefix(root).unwrap_or(f);
        let folder = rel
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match groups.last_mut() {
            Some((g, names)) if *g == folder => names.push(name),
            _ => groups.push((folder, vec![name])),
        }
    }
    for (folder, names) in groups {
        let mut line = if folder.is_empty() {
            "  ".to_string()
        } else {
            format!("  {folder}/: ")
        };
        // Continuation lines are indented past the first line's two spaces.
        let indent = " ".repeat(line.chars().count().max(4));
        for (i, n) in names.iter().enumerate() {
            let item = if i + 1 < names.len() {
                format!("{n},")
            } else {
                n.clone()
            };
            if line.chars().count() + item.len() > 100 && !line.trim_end().ends_with(':') {
                println!("{}", line.trim_end());
                line = indent.clone();
            }
            line.push_str(&item);
            line.push(' ');
        }
        println!("{}", line.trim_end());
    }
}
