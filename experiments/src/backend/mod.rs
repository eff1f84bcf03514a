//! Backends: how one run of one recipe point executes and comes back as [`RunData`].
//!
//! * [`sim`]: `ccp-sim` in this process (virtual time; several at once).
//! * [`udp`]: the `ccp-agent`, `ccp-udp recv`, `ccp-udp relay` and `ccp-udp send` binaries on
//!   loopback (wall-clock time; one at a time).
//! * [`emu`]: the same binaries on either side of a `ccp-emu` testbed (mahimahi-compatible
//!   emulated link in network namespaces; wall-clock time; needs root).
//! * [`quic`]: the emu backend's testbed with `ccp-quic` (QUIC, s2n-quic) carrying the flows.
//!
//! On emu and quic, flows written `kernel:NAME` are Linux TCP connections across the same
//! testbed with the kernel's congestion control NAME (see `kernel.rs`).
//!
//! `kernel` is recognised by recipes but not available in this build
//! ([`crate::recipe::Backend::unavailable`] says why).

mod commands;
pub mod emu;
mod kernel;
pub mod quic;
pub mod sim;
pub mod udp;

use crate::data::RunData;
use crate::recipe::{Backend, Recipe};
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

/// A failed run.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("simulator: {0}")]
    Sim(#[from] ccp_sim::SimError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Process(String),
    #[error("{0}")]
    Unavailable(String),
}

impl BackendError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> BackendError {
        BackendError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Where the project's binaries are (for wall-clock backends).
#[derive(Clone, Debug, Default)]
pub struct Bins {
    /// A directory to look in first (`--bin-dir`).
    pub dir: Option<PathBuf>,
}

impl Bins {
    /// Path of binary `name`: in `--bin-dir`, beside the running executable, or on `PATH`.
    pub fn find(&self, name: &str) -> Result<PathBuf, BackendError> {
        let mut tried = vec![];
        let mut dirs: Vec<PathBuf> = vec![];
        if let Some(d) = &self.dir {
            dirs.push(d.clone());
        }
        if let Ok(exe) = std::env::current_exe()
            && let Some(d) = exe.parent()
        {
            dirs.push(d.to_path_buf());
            // Test binaries live in target/<profile>/deps.
            if d.ends_with("deps")
                && let Some(p) = d.parent()
            {
                dirs.push(p.to_path_buf());
            }
        }
        if let Some(path) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&path));
        }
        for d in dirs {
            let p = d.join(name);
            if p.is_file() {
                return Ok(p);
            }
            tried.push(d.display().to_string());
        }
        Err(BackendError::Unavailable(format!(
            "{name} not found (looked in {}); build it with `cargo build --release --bins` or pass --bin-dir",
            tried.into_iter().take(4).collect::<Vec<_>>().join(", ")
        )))
    }
}

/// What a backend needs to run one run.
pub struct RunContext<'a> {
    pub recipe: &'a Recipe,
    pub seed: u64,
    /// A name for the run (scenario name, logs).
    pub name: String,
    /// The run's (temporary) directory; backends write raw outputs under `raw/`.
    pub dir: &'a Path,
    pub bins: &'a Bins,
    /// Progress of a wall-clock run (position in ms of its duration).
    pub progress: Option<&'a ProgressBar>,
}

/// Run one run.
pub fn run(ctx: &RunContext) -> Result<RunData, BackendError> {
    let mut data = match ctx.recipe.backend {
        Backend::Sim => sim::run(ctx),
        Backend::Udp => udp::run(ctx),
        Backend::Emu => emu::run(ctx),
        Backend::Quic => quic::run(ctx),
        b => Err(BackendError::Unavailable(
            b.unavailable().unwrap_or("unavailable").to_string(),
        )),
    }?;
    // The uplink's capacity over time (`link.schedule`), for the metrics.
    data.capacity_steps = ctx
        .recipe
        .link
        .uplink
        .schedule
        .iter()
        .map(|s| (s.at_us as f64 / 1e6, s.rate as f64 * 8.0))
        .collect();
    // The downlink's, for the reverse flows' metrics (`:dir=reverse`).
    if ctx.recipe.flows.iter().any(|f| f.reverse) {
        data.down_capacity_bps = downlink_capacity_bps(ctx.recipe)?;
    }
    Ok(data)
}

/// The downlink's capacity, bit/s: its rate (with `link.schedule`, the mean over the run), or
/// its trace's mean rate.
pub fn downlink_capacity_bps(r: &Recipe) -> Result<Option<f64>, BackendError> {
    let down = &r.link.downlink;
    if let Some(rate) = down.mean_rate(0, r.duration_us) {
        return Ok(Some(rate * 8.0));
    }
    match &down.trace {
        Some(t) => Ok(Some(
            ccp_sim::trace::Trace::load(t)?.mean_rate() as f64 * 8.0,
        )),
        None => Ok(None),
    }
}

/// Environment variable that replaces the agents' log filter (e.g.
/// `info,ccp_algorithms::mi=debug` to log every monitor interval of the online learners).
pub const AGENT_LOG_ENV: &str = "CCP_EXP_AGENT_LOG";

/// The `--log-level` of every agent a run starts: warnings, and every algorithm's mode changes
/// (e.g. vivace-distributed's "JCCE aggregate in use"), into the run's `raw/agent.log`; or
/// [`AGENT_LOG_ENV`] when it is set and not empty.
pub(crate) fn agent_log_level() -> String {
    log_level_from(AGENT_LOG_ENV, || {
        format!("warn,{}=info", ccp_algorithms::MODE_LOG)
    })
}

/// The filter environment variable `env` sets, or `default` when it is unset or empty.
fn log_level_from(env: &str, default: impl FnOnce() -> String) -> String {
    match std::env::var(env) {
        Ok(v) if !v.trim().is_empty() => v,
        _ => default(),
    }
}

/// Environment variable that replaces the log filter of every datapath process a run starts
/// (`ccp-udp` and `ccp-quic` senders and receivers; e.g. `info,ccp_udp::arrival=debug` logs how
/// long received datagrams waited in each socket before they were read).
pub const DATAPATH_LOG_ENV: &str = "CCP_EXP_DATAPATH_LOG";

/// The `--log-level` of a datapath process whose own is `default`, or [`DATAPATH_LOG_ENV`] when
/// it is set and not empty. The processes log to the run's `raw/*.err`.
pub(crate) fn datapath_log_level(default: &str) -> String {
    log_level_from(DATAPATH_LOG_ENV, || default.to_string())
}

/// Checks the log filters that [`AGENT_LOG_ENV`] and [`DATAPATH_LOG_ENV`] set, before anything
/// runs: a filter the processes refuse would fail every run, each with its own message.
pub(crate) fn check_log_filters() -> Result<(), String> {
    for env in [AGENT_LOG_ENV, DATAPATH_LOG_ENV] {
        if let Ok(v) = std::env::var(env) {
            check_log_filter(env, &v)?;
        }
    }
    Ok(())
}

/// [`check_log_filters`] for one variable `env` set to `value` (empty: not set).
fn check_log_filter(env: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Ok(());
    }
    tracing_subscriber::EnvFilter::try_new(value)
        .map(|_| ())
        .map_err(|e| {
            format!("${env} is {value:?}, not a log filter ({e}); e.g. info,ccp_udp::arrival=debug")
        })
}

/// The algorithm name of a requested string (`cubic:beta=0.8` -> `cubic`).
pub fn algorithm_of(requested: &str) -> String {
    requested.split(':').next().unwrap_or("").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::{DATAPATH_LOG_ENV, check_log_filter};

    #[test]
    fn log_filters_from_the_environment_are_checked() {
        assert!(check_log_filter(DATAPATH_LOG_ENV, "").is_ok());
        assert!(check_log_filter(DATAPATH_LOG_ENV, "info,ccp_udp::arrival=debug").is_ok());
        let e = check_log_filter(DATAPATH_LOG_ENV, "info,ccp_udp=debgu[").unwrap_err();
        assert!(e.contains("$CCP_EXP_DATAPATH_LOG"), "{e}");
        assert!(e.contains("debgu["), "{e}");
    }
}
