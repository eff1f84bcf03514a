//! `ccp-bpf`: load the BPF congestion control, run the daemon that connects it to `ccp-agent`,
//! unload it.
//!
//! ```text
//! ccp-bpf load      # register ccp_bpf and pin it (idempotent)
//! ccp-bpf daemon    # samples -> agent -> cwnd/rate, until SIGINT/SIGTERM (restartable)
//! ccp-bpf run       # load if needed, daemon, unload at exit if it loaded
//! ccp-bpf status    # the BPF program's counters as JSON
//! ccp-bpf unload    # unregister and remove the pins (idempotent)
//! ```

use anyhow::{Result, bail};
use ccp_bpf::daemon::{DaemonConfig, run};
use ccp_bpf::{
    DEFAULT_NAME, DEFAULT_PIN_DIR, LoadOptions, Loaded, Pins, load, read_counters, unload,
};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

#[derive(Parser, Debug)]
#[command(
    name = "ccp-bpf",
    version,
    about = "Kernel TCP under ccp-agent through a BPF struct_ops congestion control"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
    /// bpffs directory holding the pinned registration and maps
    #[arg(long, global = true, default_value = DEFAULT_PIN_DIR)]
    pin_dir: PathBuf,
    /// Log filter (tracing env-filter syntax)
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
}

#[derive(Args, Debug, Clone)]
struct LoadArgs {
    /// Congestion control name (at most 15 bytes), what TCP_CONGESTION / iperf3 -C select
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// Fallback timeout: a socket whose daemon entry is older runs Reno in BPF, ms
    #[arg(long, default_value_t = 100)]
    fallback_ms: u64,
}

#[derive(Args, Debug, Clone)]
struct DaemonArgs {
    /// The agent's unix socket
    #[arg(long, default_value = "/tmp/ccp/agent.sock")]
    agent_socket: PathBuf,
    /// The daemon's own unix socket (default: ccp-udp-<pid>.sock beside the agent's)
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Algorithm the sockets ask the agent for ("" = the agent's default and rules)
    #[arg(long, default_value = "")]
    alg: String,
    /// Write the daemon's counters as JSON to this file (every 200 ms and at exit)
    #[arg(long)]
    stats: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Register the congestion control and pin it (does nothing if already pinned)
    Load(LoadArgs),
    /// Unregister and remove the pins (does nothing if nothing is pinned)
    Unload,
    /// Print the BPF program's counters as JSON
    Status,
    /// Run the daemon against an already loaded registration
    Daemon(DaemonArgs),
    /// Load if needed, run the daemon, and unload at exit if this command loaded
    Run {
        #[command(flatten)]
        load: LoadArgs,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
}

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

fn daemon_cfg(pins: &Pins, d: &DaemonArgs) -> DaemonConfig {
    DaemonConfig {
        pins: pins.clone(),
        agent_socket: d.agent_socket.clone(),
        local_socket: d.socket.clone(),
        algorithm: d.alg.clone(),
        stats: d.stats.clone(),
    }
}

fn do_load(pins: &Pins, l: &LoadArgs) -> Result<Loaded> {
    let r = load(&LoadOptions {
        pins: pins.clone(),
        name: l.name.clone(),
        fallback_ns: l.fallback_ms * 1_000_000,
    })?;
    match r {
        Loaded::Now => println!("registered {} (pinned at {})", l.name, pins.dir.display()),
        Loaded::Already => println!("already loaded at {}", pins.dir.display()),
    }
    Ok(r)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log redirected to a file stays plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let pins = Pins::new(&cli.pin_dir);
    match &cli.command {
        Cmd::Load(l) => {
            do_load(&pins, l)?;
        }
        Cmd::Unload => {
            if unload(&pins)? {
                println!("unloaded {}", pins.dir.display());
            } else {
                println!("nothing loaded at {}", pins.dir.display());
            }
        }
        Cmd::Status => {
            let c = read_counters(&pins)?;
            println!("{}", serde_json::to_string_pretty(&c)?);
        }
        Cmd::Daemon(d) => {
            if !pins.loaded() {
                bail!(
                    "nothing loaded at {} (run ccp-bpf load first)",
                    pins.dir.display()
                );
            }
            run(&daemon_cfg(&pins, d), stop_flag()?)?;
        }
        Cmd::Run { load: l, daemon: d } => {
            let stop = stop_flag()?;
            let loaded = do_load(&pins, l)?;
            let r = run(&daemon_cfg(&pins, d), stop);
            if loaded == Loaded::Now {
                unload(&pins)?;
            }
            r?;
        }
    }
    Ok(())
}
