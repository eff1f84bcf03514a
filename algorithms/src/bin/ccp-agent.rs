//! `ccp-agent`: the congestion control plane agent. One process per host; it serves every flow of
//! every datapath on the host and hosts every algorithm of the library.

use anyhow::{Context, Result, bail};
use ccp_algorithms::ReportPeriod;
use ccp_algorithms::adapter::{TimeSource, WallTime};
use ccp_algorithms::agent::ipc::{Screened, UnixIpc};
use ccp_algorithms::agent::pricing::{Pricing, PricingPolicy};
use ccp_algorithms::agent::rules::Rules;
use ccp_algorithms::agent::{
    AgentCore, Pool, check_default_settings, log_reload, parse_param_settings,
};
use ccp_algorithms::aggregator::{AggregatorSource, JcceSource, with_source};
use ccp_algorithms::params::ParamSet;
use ccp_algorithms::registry;
use ccp_files::socket_path::{SocketKind, SocketPathClaim};
use clap::{Parser, Subcommand, ValueEnum};
use portus::ipc::{BackendBuilder, Blocking, Ipc};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::{error, info};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum IpcKind {
    /// Unix datagram socket (userspace datapaths: udp, emulator, simulator tools)
    Unix,
    /// Netlink (ccp-kernel built with netlink IPC)
    Netlink,
    /// /dev/ccpkp character device (ccp-kernel built with the char device)
    Char,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// The congestion control plane agent: hosts every algorithm of the library and serves every
/// flow of the host's datapaths over the libccp protocol.
///
/// A flow's algorithm comes from the first matching rule (--rules), else the name its datapath
/// asked for, else --default-alg. Algorithm parameters are set with `--param ALG.KEY=VALUE` or
/// the shorthand `--ALG.KEY VALUE` (see `ccp-agent algorithms` for every key, unit and default).
/// SIGHUP reloads the rule file without dropping flows; SIGINT/SIGTERM stop the agent.
#[derive(Parser, Debug)]
#[command(name = "ccp-agent", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// IPC mechanism to the datapaths
    #[arg(long, value_enum, default_value = "unix")]
    ipc: IpcKind,

    /// Path of the agent's unix socket (with --ipc unix); datapaths send to it. A socket left
    /// there by an agent that died is replaced; a live one is refused. The agent holds
    /// PATH.lock beside it while it runs, and removes both when it stops
    #[arg(long, default_value = "/tmp/ccp/agent.sock")]
    socket: PathBuf,

    /// Algorithm for flows that name none (or an unknown one) and match no rule
    #[arg(long, default_value = "cubic")]
    default_alg: String,

    /// Algorithm parameter, ALG.KEY=VALUE (repeatable), e.g. cubic.beta=0.8 or reno.init-cwnd=20
    #[arg(long = "param", value_name = "ALG.KEY=VALUE")]
    params: Vec<String>,

    /// Rule file (YAML) choosing algorithms and parameters by address, port and requested name
    #[arg(long)]
    rules: Option<PathBuf>,

    /// Log format
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,

    /// Log filter (tracing env-filter syntax), e.g. info, or info,ccp_algorithms::mi=debug to log
    /// every monitor interval of the online learners (rate, throughput, loss, RTT gradient, utility)
    #[arg(long, default_value = "info")]
    log_level: String,

    /// Write the agent's counters as JSON to this file when it stops
    #[arg(long)]
    stats: Option<PathBuf>,

    /// Report period for every flow: per-ack, per-rtt or a duration such as 10ms (default: each
    /// algorithm chooses; most report once per smoothed RTT)
    #[arg(long, value_parser = parse_report)]
    report: Option<ReportPeriod>,

    /// Pricing policy (YAML): classes of service (theta, omega) of priced flows (paccp) by VM and
    /// flow, VBP or FBP, and the price constants; the agent keeps bills per VM and flow
    #[arg(long)]
    pricing: Option<PathBuf>,

    /// Write the bills as JSON to this file when the agent stops (with --pricing)
    #[arg(long, requires = "pricing")]
    bill: Option<PathBuf>,

    /// Control socket (unix stream) for run-time commands: `ccp-agent ctl --ctl PATH ...`
    /// (`flows`, `set-params FLOW KEY=VALUE ...`, `set-algorithm FLOW NAME[:KEY=VALUE,...]`, and
    /// with --pricing `set-class`, `bill`)
    #[arg(long)]
    ctl: Option<PathBuf>,

    /// JCCE service (host:port) that vivace-distributed flows publish to; without it they run as
    /// plain vivace
    #[arg(long, requires = "jcce_key_file")]
    jcce: Option<String>,

    /// The JointCloud's JCCE key (hex, as `jcce keygen` writes it), with --jcce
    #[arg(long, requires = "jcce")]
    jcce_key_file: Option<PathBuf>,
}

fn parse_report(s: &str) -> Result<ReportPeriod, String> {
    match s {
        "per-ack" => Ok(ReportPeriod::PerAck),
        "per-rtt" => Ok(ReportPeriod::PerRtt),
        d => ccp_units::parse_duration_with_unit(d)
            .map(|t| ReportPeriod::Micros(t.as_micros() as u64))
            .map_err(|e| format!("{e}; or per-ack, per-rtt")),
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List every algorithm with its parameters, units and defaults
    Algorithms,
    /// Check a rule file and exit (non-zero with file:line:col messages if it is bad)
    CheckRules { file: PathBuf },
    /// Check a pricing policy and exit
    CheckPricing { file: PathBuf },
    /// Send a command to a running agent's control socket and print its answer: `flows` (live
    /// flows as JSON: id, addresses, algorithm, parameters), `set-params FLOW KEY=VALUE ...`
    /// (change a live flow's parameters at its next report; FLOW is SRC_IP:SRC_PORT or an id
    /// from `flows`; e.g. `set-params 10.0.0.1:40000 min=50mbit`; only algorithms that take
    /// live changes, such as hercules and paccp), `set-algorithm FLOW NAME[:KEY=VALUE,...]`
    /// (hand a live flow to another algorithm at its next report, e.g. `set-algorithm 1 vegas`
    /// or `set-algorithm 10.0.0.1:40000 cubic:beta=0.8`; it continues from the flow's window or
    /// rate and smallest RTT instead of restarting; not for priced flows), and with --pricing
    /// `set-class 10.0.0.1:40000 ds --weight 2`, `set-class RULE mrg --theta 1gbit`,
    /// `set-class vm:NAME be`, or `bill`
    Ctl {
        /// The agent's control socket (its --ctl)
        #[arg(long = "ctl", default_value = "/tmp/ccp/agent.ctl")]
        socket: PathBuf,
        /// The command and its arguments
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
}

/// Send one command line to the control socket at `path`; returns the agent's answer.
fn ctl_send(path: &PathBuf, command: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(path).with_context(|| {
        format!(
            "cannot reach the agent's control socket {} (was the agent started with --ctl {0}?)",
            path.display()
        )
    })?;
    s.write_all(command.as_bytes())?;
    s.write_all(b"\n")?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer)
}

/// The longest control command line read (bytes).
const CTL_LINE_MAX: u64 = 64 * 1024;

/// Serve the control socket: one command line per connection, one answer (`ok ...`, `error:
/// ...`, or JSON for `flows` and `bill`). The returned claim holds the path; dropping it
/// removes the socket file.
fn serve_ctl(path: &PathBuf, core: Arc<AgentCore>) -> Result<SocketPathClaim> {
    use std::io::{BufRead, BufReader, Read, Write};
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).ok();
    }
    // Replace only a control socket left by an agent that died: never a live one, nor a file.
    let mut claim = SocketPathClaim::claim(path, SocketKind::Stream).map_err(|why| {
        anyhow::anyhow!(
            "the control socket path {} {why}; refusing to replace it",
            path.display()
        )
    })?;
    let listener = std::os::unix::net::UnixListener::bind(path)
        .with_context(|| format!("cannot bind the control socket {}", path.display()))?;
    claim
        .bound()
        .with_context(|| format!("cannot read the control socket {}", path.display()))?;
    info!(ctl = %path.display(), "control socket listening");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            // One connection at a time: a client that never ends its line must not hold the
            // socket, nor grow the line without bound.
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let _ = conn.set_write_timeout(Some(std::time::Duration::from_secs(2)));
            let mut line = String::new();
            if BufReader::new((&conn).take(CTL_LINE_MAX))
                .read_line(&mut line)
                .is_err()
            {
                continue;
            }
            if line.len() as u64 >= CTL_LINE_MAX && !line.ends_with('\n') {
                let _ = conn.write_all(
                    format!("error: command longer than {CTL_LINE_MAX} bytes\n").as_bytes(),
                );
                continue;
            }
            let answer = match core.command(line.trim()) {
                Ok(a) => {
                    info!(command = line.trim(), "control command");
                    if a.starts_with('{') {
                        a
                    } else {
                        format!("ok {a}")
                    }
                }
                Err(e) => format!("error: {e}"),
            };
            let _ = conn.write_all(answer.as_bytes());
            let _ = conn.write_all(b"\n");
        }
    });
    Ok(claim)
}

/// Rewrite `--ALG.KEY=V` and `--ALG.KEY V` into `--param ALG.KEY=V`. No option of the agent
/// has a dot in its name, so every `--X.Y` is taken for a parameter: a misspelt algorithm then
/// meets the registry's did-you-mean rather than clap's "unexpected argument". A value is never
/// taken from the next option (`--cubic.beta --rules r.yaml` gives `cubic.beta` no value).
fn expand_shorthand(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        let is_param = a.strip_prefix("--").and_then(|rest| {
            let name = rest.split('=').next().unwrap_or("");
            let (alg, key) = name.split_once('.')?;
            (!alg.is_empty()).then(|| (name.to_string(), key.is_empty()))
        });
        match is_param {
            Some((name, false)) => {
                let value = match a.split_once('=') {
                    Some((_, v)) => v.to_string(),
                    None => match it.peek() {
                        Some(next) if !next.starts_with("--") => it.next().unwrap_or_default(),
                        _ => String::new(),
                    },
                };
                out.push("--param".into());
                out.push(format!("{name}={value}"));
            }
            _ => out.push(a),
        }
    }
    out
}

fn parse_params(list: &[String]) -> Result<HashMap<&'static str, ParamSet>> {
    parse_param_settings(list).map_err(|e| anyhow::anyhow!("--param {e}"))
}

fn list_algorithms() {
    for spec in registry::all() {
        println!("{} — {}", spec.name, spec.summary);
        for p in spec.params {
            println!(
                "    --{}.{:<20} {:<8} default {:<12} {} [{}]",
                spec.name,
                p.key,
                p.unit.label(),
                p.unit.show(p.default),
                p.help,
                p.source
            );
        }
    }
}

fn init_logs(cli: &Cli) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level)
        .map_err(|e| anyhow::anyhow!("--log-level {:?}: {e}", cli.log_level))?;
    // Colours only on a terminal: experiment runs send the log to a file.
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Json => b.json().flatten_event(true).init(),
        LogFormat::Text => b.init(),
    }
    Ok(())
}

/// The JCCE client of vivace-distributed flows (`--jcce`, `--jcce-key-file`).
fn jcce_source(cli: &Cli) -> Result<Option<Arc<dyn AggregatorSource>>> {
    let (Some(addr), Some(path)) = (&cli.jcce, &cli.jcce_key_file) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the JCCE key file {}", path.display()))?;
    let key = jcce::Key::from_hex(&text)
        .map_err(|e| anyhow::anyhow!("JCCE key file {}: {e}", path.display()))?;
    let client = jcce::Client::start(jcce::ClientConfig::new(addr.clone(), key))
        .with_context(|| format!("cannot start the JCCE client for {addr}"))?;
    info!(jcce = %addr, "vivace-distributed flows publish to JCCE");
    Ok(Some(Arc::new(JcceSource::new(client))))
}

fn run_with<I: Ipc>(ipc: I, core: Arc<AgentCore>, stop: Arc<AtomicBool>) -> Result<()>
where
    I::Addr: Send,
{
    let screened = Screened::new(ipc, core.screen.clone());
    portus::RunBuilder::new(BackendBuilder { sock: screened })
        .default_alg(Pool(core))
        .with_stop_handle(stop)
        .run()
        .map_err(|e| anyhow::anyhow!("agent loop ended: {e:?}"))
}

fn write_stats(path: &Path, core: &AgentCore) -> Result<()> {
    use std::sync::atomic::Ordering::Relaxed;
    let c = &core.counters;
    let i = &core.screen.counters;
    let v = serde_json::json!({
        "flows_created": c.flows_created.load(Relaxed),
        "flows_closed": c.flows_closed.load(Relaxed),
        "reports": c.reports.load(Relaxed),
        "bad_reports": c.bad_reports.load(Relaxed),
        "updates": c.updates.load(Relaxed),
        "update_errors": c.update_errors.load(Relaxed),
        "datagrams": i.datagrams.load(Relaxed),
        "malformed_datagrams": i.malformed.load(Relaxed),
        "refused_messages": i.refused.load(Relaxed),
        "version_mismatches": i.version_mismatches.load(Relaxed),
        "send_failures": i.send_failures.load(Relaxed),
        "flows_per_algorithm": core.algorithm_counts(),
    });
    ccp_files::write_bytes(path, serde_json::to_vec_pretty(&v)?)?;
    Ok(())
}

fn main() -> Result<()> {
    let args = expand_shorthand(std::env::args().collect());
    let cli = Cli::parse_from(args);
    match &cli.command {
        Some(Command::Algorithms) => {
            list_algorithms();
            return Ok(());
        }
        Some(Command::CheckRules { file }) => {
            let r = Rules::load(file).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}: {} rules, all valid", file.display(), r.rules.len());
            return Ok(());
        }
        Some(Command::CheckPricing { file }) => {
            let p = PricingPolicy::load(file).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!(
                "{}: {} VMs, {} flow classes, all valid",
                file.display(),
                p.vms.len(),
                p.flows.len()
            );
            return Ok(());
        }
        Some(Command::Ctl { socket, command }) => {
            let answer = ctl_send(socket, &command.join(" "))?;
            print!("{answer}");
            if answer.starts_with("error:") {
                std::process::exit(1);
            }
            return Ok(());
        }
        None => {}
    }
    init_logs(&cli)?;
    let default_alg =
        registry::lookup(&cli.default_alg).map_err(|e| anyhow::anyhow!("--default-alg: {e}"))?;
    let base = parse_params(&cli.params)?;
    check_default_settings(default_alg, &base).map_err(|e| anyhow::anyhow!("--param: {e}"))?;
    let rules = match &cli.rules {
        Some(p) => Rules::load(p).map_err(|e| anyhow::anyhow!("{e}"))?,
        None => Rules::default(),
    };
    info!(
        rules = rules.rules.len(),
        default = default_alg.name,
        algorithms = ?registry::all().iter().map(|a| a.name).collect::<Vec<_>>(),
        "ccp-agent starting"
    );
    let time: Arc<dyn TimeSource> = Arc::new(WallTime::default());
    let mut core = AgentCore::new(default_alg, base, rules, cli.rules.clone(), time.clone())
        .with_report_period(cli.report);
    if let Some(path) = &cli.pricing {
        let policy = PricingPolicy::load(path).map_err(|e| anyhow::anyhow!("{e}"))?;
        info!(
            vms = policy.vms.len(),
            flow_classes = policy.flows.len(),
            "pricing policy loaded"
        );
        core = core.with_pricing(Arc::new(Pricing::new(policy, time)));
    }
    let core = Arc::new(core);
    let ctl_claim = match &cli.ctl {
        Some(path) => Some(serve_ctl(path, core.clone())?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(true));

    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])?;
    {
        let core = core.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            for sig in signals.forever() {
                if sig == signal_hook::consts::SIGHUP {
                    log_reload(&core);
                } else {
                    info!(signal = sig, "stopping");
                    stop.store(false, Ordering::SeqCst);
                }
            }
        });
    }

    let jcce = jcce_source(&cli)?;
    // Flows are built on this thread by the portus loop: vivace-distributed flows find JCCE here.
    let result = with_source(jcce, || match cli.ipc {
        IpcKind::Unix => {
            let ipc =
                UnixIpc::bind(&cli.socket, core.screen.counters.clone()).with_context(|| {
                    format!("cannot bind the agent socket at {}", cli.socket.display())
                })?;
            info!(socket = %cli.socket.display(), "listening");
            run_with(ipc, core.clone(), stop.clone())
        }
        IpcKind::Netlink => {
            let ipc = portus::ipc::netlink::Socket::<Blocking>::new().map_err(|e| {
                anyhow::anyhow!("cannot open the netlink socket (is ccp-kernel loaded?): {e:?}")
            })?;
            run_with(ipc, core.clone(), stop.clone())
        }
        IpcKind::Char => {
            let ipc = portus::ipc::kp::Socket::<Blocking>::new().map_err(|e| {
                anyhow::anyhow!(
                    "cannot open /dev/ccpkp (is ccp-kernel loaded with the char device?): {e:?}"
                )
            })?;
            run_with(ipc, core.clone(), stop.clone())
        }
    });
    if let Some(p) = &cli.stats
        && let Err(e) = write_stats(p, &core)
    {
        error!(path = %p.display(), error = %e, "could not write stats");
    }
    if let (Some(path), Some(p)) = (&cli.bill, core.pricing()) {
        let written = serde_json::to_vec_pretty(&p.bill())
            .map_err(anyhow::Error::from)
            .and_then(|b| ccp_files::write_bytes(path, b).map_err(anyhow::Error::from));
        if let Err(e) = written {
            error!(path = %path.display(), error = %e, "could not write the bill");
        }
    }
    drop(ctl_claim);
    if !stop.load(Ordering::SeqCst) {
        info!("ccp-agent stopped");
        return Ok(());
    }
    match result {
        Ok(()) => Ok(()),
        Err(e) => bail!(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error `--param TEXT` is refused with.
    fn param_error(text: &str) -> String {
        parse_params(&[text.into()]).unwrap_err().to_string()
    }

    #[test]
    fn options_that_would_do_nothing_are_refused() {
        // --bill writes the pricing's bills: without --pricing it is refused, not ignored.
        let e = Cli::try_parse_from(["ccp-agent", "--bill", "b.json"]).unwrap_err();
        assert!(e.to_string().contains("--pricing"), "{e}");
        assert!(
            Cli::try_parse_from(["ccp-agent", "--bill", "b.json", "--pricing", "p.yaml"]).is_ok()
        );
        // A mistyped log filter is an error, not a silent `info`.
        let cli = Cli::try_parse_from(["ccp-agent", "--log-level", "ccp=debgu["]).unwrap();
        let e = init_logs(&cli).unwrap_err().to_string();
        assert!(e.contains("--log-level"), "{e}");
    }

    #[test]
    fn shorthand_becomes_param() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            expand_shorthand(v(&[
                "a",
                "--reno.init-cwnd",
                "20",
                "--cubic.beta=0.8",
                "--rules",
                "x"
            ])),
            v(&[
                "a",
                "--param",
                "reno.init-cwnd=20",
                "--param",
                "cubic.beta=0.8",
                "--rules",
                "x"
            ])
        );
        // A value is not taken from the next option; a misspelt algorithm reaches the registry.
        assert_eq!(
            expand_shorthand(v(&[
                "a",
                "--cubic.beta",
                "--rules",
                "x",
                "--cubicc.beta",
                "0.8"
            ])),
            v(&[
                "a",
                "--param",
                "cubic.beta=",
                "--rules",
                "x",
                "--param",
                "cubicc.beta=0.8"
            ])
        );
        let e = param_error("cubicc.beta=0.8");
        assert!(e.contains("did you mean \"cubic\""), "{e}");
        let e = param_error("cubic.beta=");
        assert!(e.contains("cubic.beta"), "{e}");
    }

    #[test]
    fn bad_params_are_refused() {
        let e = param_error("reno.init-cwnd=10ms");
        assert!(e.contains("number of packets"), "{e}");
        let e = param_error("renoo.init-cwnd=10");
        assert!(e.contains("did you mean \"reno\""), "{e}");
        let e = param_error("reno=10");
        assert!(e.contains("ALG.KEY=VALUE"), "{e}");
    }
}
