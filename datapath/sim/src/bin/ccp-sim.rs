//! `ccp-sim`: run a simulation scenario (a YAML/JSON file or a built-in example) with the real
//! agent in virtual time and write its outputs; print the built-in examples.

use anyhow::{Context, Result, bail};
use ccp_sim::scenario::{EXAMPLES, example};
use ccp_sim::{Scenario, check, run, write_outputs};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// A deterministic discrete-event simulator running the CCP agent and its algorithms in virtual
/// time. The same scenario and seed always produce the same output files.
#[derive(Parser, Debug)]
#[command(name = "ccp-sim", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,

    /// Log filter for the agent and the simulator (tracing env-filter syntax)
    #[arg(long, default_value = "warn", global = true)]
    log_level: String,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario file, or a built-in example by name, and write its outputs
    Run {
        /// Scenario file (YAML or JSON), or the name of a built-in example
        scenario: String,
        /// Output directory
        #[arg(long)]
        out: PathBuf,
        /// Seed (default: the scenario's)
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Print a built-in example scenario as YAML
    Example {
        /// One of: dumbbell, parking-lot, leaf-spine, incast, cellular
        name: String,
    },
    /// Check a scenario file as `run` would before simulating (its fields, every algorithm and
    /// parameter it names, its topology, traces and workload files) and exit
    Check { scenario: PathBuf },
}

fn load(arg: &str) -> Result<Scenario> {
    let p = PathBuf::from(arg);
    if p.exists() {
        return Ok(Scenario::load(&p)?);
    }
    match example(arg) {
        Some(s) => Ok(s),
        None => bail!(
            "{arg}: no such file, and not a built-in example ({})",
            EXAMPLES.join(", ")
        ),
    }
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
    match run_command(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccp-sim: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_command(command: Command) -> Result<()> {
    match command {
        Command::Example { name } => {
            let s = example(&name).with_context(|| {
                format!("no example named {name}; examples: {}", EXAMPLES.join(", "))
            })?;
            print!("{}", s.to_yaml());
        }
        Command::Check { scenario } => {
            let s = Scenario::load(&scenario)?;
            check(&s).with_context(|| scenario.display().to_string())?;
            let plural = |n: usize, one: &str, many: &str| {
                format!("{n} {}", if n == 1 { one } else { many })
            };
            println!(
                "{}: valid ({} listed, {})",
                scenario.display(),
                plural(s.flows.len(), "flow", "flows"),
                plural(s.workloads.len(), "generator", "generators")
            );
        }
        Command::Run {
            scenario,
            out,
            seed,
        } => {
            let s = load(&scenario)?;
            let t0 = Instant::now();
            let r = run(&s, seed)?;
            let wall = t0.elapsed().as_secs_f64();
            write_outputs(&r, &out)?;
            let sim_s = r.end_ns as f64 / 1e9;
            let done = r.flows.iter().filter(|f| f.completed).count();
            eprintln!(
                "{}: {:.3} s simulated in {:.3} s wall ({:.2} s wall per simulated s), {} events ({:.2} M events/s), {} flows ({} completed), seed {}; outputs in {}",
                if s.name.is_empty() {
                    &scenario
                } else {
                    &s.name
                },
                sim_s,
                wall,
                if sim_s > 0.0 { wall / sim_s } else { 0.0 },
                r.counters.events,
                r.counters.events as f64 / wall.max(1e-9) / 1e6,
                r.flows.len(),
                done,
                r.seed,
                out.display()
            );
        }
    }
    Ok(())
}
