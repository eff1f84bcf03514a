//! `ccp-quic`: bulk transfers over QUIC (s2n-quic) whose congestion control is the CCP agent's.

use anyhow::{Context, Result, bail};
use ccp_quic::controller::Factory;
use ccp_quic::summary::{ReceiverSummary, SenderSummary};
use ccp_quic::{ReceiverConfig, SenderConfig, run_receiver, run_sender};
use ccp_udp::cc::{FlowController, FlowMeta};
use ccp_udp::ccp::{BackendKind, CcpConfig, ControlPlane};
use ccp_udp::reno::BuiltinReno;
use ccp_udp::{Amount, FlowSpec};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Bulk transfers over QUIC (s2n-quic, TLS 1.3 by rustls), congestion-controlled by ccp-agent
/// through libccp.
///
/// Start `ccp-agent`, then `ccp-quic recv --cert-out FILE` on the receiving host and
/// `ccp-quic send --cert FILE` on the sending one. The receiver makes a fresh self-signed
/// certificate at every start; the sender trusts exactly that one. Each sending flow is its own
/// QUIC connection and a libccp connection: the agent chooses its algorithm (the one the flow
/// names with --alg, or by the agent's rules) and sets its window and pacing rate, which the
/// QUIC stack obeys. If the agent goes away, flows continue under a built-in Reno and return to
/// the agent when it comes back. Options and JSON summaries follow `ccp-udp`'s.
#[derive(Parser, Debug)]
#[command(name = "ccp-quic", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format
    #[arg(long, value_enum, default_value = "text", global = true)]
    log_format: LogFormat,
    /// Log filter (tracing env-filter syntax)
    #[arg(long, default_value = "info", global = true)]
    log_level: String,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Receive flows, verify each stream against the sender's hash, print a summary
    Recv(RecvArgs),
    /// Send one or more flows under CCP control
    Send(SendArgs),
}

#[derive(Args, Debug)]
struct RecvArgs {
    /// Address to listen on
    #[arg(long, default_value = "0.0.0.0:4433")]
    listen: SocketAddr,
    /// Write the receiver's (fresh, self-signed) certificate here, PEM, for `send --cert`
    #[arg(long)]
    cert_out: Option<PathBuf>,
    /// Exit after this many flows have finished (default: run until Ctrl-C)
    #[arg(long)]
    flows: Option<usize>,
    /// Exit after this long without a new connection or data, e.g. 30s
    #[arg(long, value_parser = ccp_units::parse_duration)]
    idle_timeout: Option<Duration>,
    /// Write the per-flow summaries as JSON here
    #[arg(long)]
    json: Option<PathBuf>,
    /// Largest IP MTU to accept, bytes
    #[arg(long, default_value_t = 1500)]
    max_mtu: u16,
    /// Acknowledge an ack-eliciting packet within this time, whole milliseconds (the QUIC
    /// max_ack_delay transport parameter, RFC 9000 §13.2.1/§18.2). s2n-quic also acknowledges
    /// every 10th packet at once and treats a deadline within 1 ms as due, so 1ms acknowledges
    /// nearly every packet: the feedback the agent's algorithms expect. 25ms is RFC 9000's
    /// default (one ACK per 10 packets in bulk transfer)
    #[arg(long, value_parser = ccp_units::parse_duration, default_value = "1ms")]
    max_ack_delay: Duration,
}

#[derive(Args, Debug)]
struct SendArgs {
    /// Receiver address
    #[arg(long)]
    to: SocketAddr,
    /// The receiver's certificate (written by `recv --cert-out`); waits up to
    /// --handshake-timeout for the file to appear
    #[arg(long)]
    cert: PathBuf,
    /// Bytes per flow, e.g. 100M or 1GiB
    #[arg(long, value_parser = ccp_units::parse_bytes, conflicts_with = "time")]
    bytes: Option<u64>,
    /// Duration per flow instead of a size, e.g. 30s
    #[arg(long, value_parser = ccp_units::parse_duration)]
    time: Option<Duration>,
    /// Number of flows like the above
    #[arg(long, default_value_t = 1)]
    flows: usize,
    /// Algorithm the flows ask the agent for, optionally with parameters: cubic or
    /// cubic:beta=0.8 (default: the agent's choice)
    #[arg(long, default_value = "")]
    alg: String,
    /// A flow of its own, repeatable: alg=NAME[:k=v;k=v],bytes=SIZE|time=DUR[,start=DUR][,cap=RATE]
    /// e.g. --flow alg=cubic:beta=0.8,bytes=50M (replaces --flows/--bytes/--time)
    #[arg(long = "flow", value_name = "SPEC")]
    flow_specs: Vec<String>,
    /// The agent's unix socket
    #[arg(long, default_value = "/tmp/ccp/agent.sock")]
    agent: PathBuf,
    /// This datapath's unix socket (default: beside the agent's)
    #[arg(long)]
    socket: Option<PathBuf>,
    /// libccp implementation: the C libccp (as in ccp-kernel) or the project's engine
    #[arg(long, default_value = "libccp")]
    backend: BackendKind,
    /// No agent at all: every flow runs the built-in Reno
    #[arg(long)]
    no_ccp: bool,
    /// Maximum UDP payload per datagram (QUIC packet size), bytes; at least 1200
    #[arg(long, default_value_t = 1448)]
    mss: u32,
    /// Initial window, packets
    #[arg(long, default_value_t = 10)]
    init_cwnd: u32,
    /// Write the per-flow summaries (with traces) as JSON here
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the cwnd/rate trace of every flow as CSV here
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Trace sampling interval, e.g. 10ms
    #[arg(long, value_parser = ccp_units::parse_duration, default_value = "10ms")]
    trace_interval: Duration,
    /// Give up if no receiver answers within this time
    #[arg(long, value_parser = ccp_units::parse_duration, default_value = "5s")]
    handshake_timeout: Duration,
}

fn init_logs(cli: &Cli) {
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Json => b.json().flatten_event(true).init(),
        LogFormat::Text => b.init(),
    }
}

/// Stop on Ctrl-C / SIGTERM.
fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

fn parse_flow_spec(spec: &str) -> Result<FlowSpec> {
    let mut f = FlowSpec {
        amount: Amount::Bytes(0),
        algorithm: String::new(),
        start_after: Duration::ZERO,
        rate_cap: None,
    };
    let mut amount = None;
    for part in spec.split(',') {
        let (k, v) = part
            .split_once('=')
            .with_context(|| format!("--flow {spec:?}: expected key=value pairs, got {part:?}"))?;
        let bad = |e: String| anyhow::anyhow!("--flow {spec:?}: {k}: {e}");
        match k.trim() {
            // Parameters inside alg= are separated by ';' (',' separates the fields here).
            "alg" => f.algorithm = v.trim().replace(';', ","),
            "bytes" => amount = Some(Amount::Bytes(ccp_units::parse_bytes(v).map_err(bad)?)),
            "time" => amount = Some(Amount::Duration(ccp_units::parse_duration(v).map_err(bad)?)),
            "start" => f.start_after = ccp_units::parse_duration(v).map_err(bad)?,
            "cap" => f.rate_cap = Some(ccp_units::parse_rate(v).map_err(bad)?),
            other => bail!(
                "--flow {spec:?}: unknown key {other:?}; expected alg, bytes, time, start, cap"
            ),
        }
    }
    f.amount =
        amount.with_context(|| format!("--flow {spec:?}: needs bytes=SIZE or time=DURATION"))?;
    Ok(f)
}

fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(v)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn print_sender(s: &SenderSummary) {
    println!(
        "flow {:>3} [{} -> {}]: {:.1} MB in {:.2} s = {:.1} Mbit/s, rtt p50/p95/p99 {:.2}/{:.2}/{:.2} ms, {} packets lost, {} ack / {} tick invocations, receiver: {}",
        s.flow,
        if s.algorithm.is_empty() {
            "agent default"
        } else {
            &s.algorithm
        },
        s.controllers.join(" -> "),
        s.bytes as f64 / 1e6,
        s.duration_s,
        s.goodput_mbps,
        s.rtt_p50_ms,
        s.rtt_p95_ms,
        s.rtt_p99_ms,
        s.lost_packets,
        s.ack_invocations,
        s.ticks,
        match s.receiver_intact {
            Some(true) => "intact",
            Some(false) => "CORRUPT",
            None => "no verdict",
        },
    );
}

fn print_receiver(r: &ReceiverSummary) {
    println!(
        "flow {:>3}: {:.1} MB, {:.1} Mbit/s, {}, longest stall {:.0} ms{}",
        r.flow,
        r.bytes as f64 / 1e6,
        r.goodput_mbps,
        if r.intact {
            "intact (hash matches)"
        } else {
            "CORRUPT or incomplete (hash or length mismatch)"
        },
        r.longest_stall_ms,
        r.error
            .as_ref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default(),
    );
}

/// The certificate file, waiting up to `wait` for a receiver started at the same time to
/// write it.
fn read_cert(path: &Path, wait: Duration) -> Result<String> {
    let t0 = Instant::now();
    while !path.exists() && t0.elapsed() < wait {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(ccp_quic::tls::read_cert(path)?)
}

fn send(a: SendArgs) -> Result<()> {
    let stop = stop_flag()?;
    let flows: Vec<FlowSpec> = if a.flow_specs.is_empty() {
        let amount = match (a.bytes, a.time) {
            (Some(b), _) => Amount::Bytes(b),
            (None, Some(t)) => Amount::Duration(t),
            (None, None) => {
                bail!("say how much to send: --bytes SIZE or --time DURATION (or --flow specs)")
            }
        };
        if a.flows == 0 {
            bail!("--flows must be at least 1");
        }
        (0..a.flows)
            .map(|_| FlowSpec {
                amount,
                algorithm: a.alg.clone(),
                start_after: Duration::ZERO,
                rate_cap: None,
            })
            .collect()
    } else {
        a.flow_specs
            .iter()
            .map(|s| parse_flow_spec(s))
            .collect::<Result<_>>()?
    };
    let cfg = SenderConfig {
        dest: a.to,
        cert_pem: read_cert(&a.cert, a.handshake_timeout)?,
        mss: a.mss,
        init_cwnd_pkts: a.init_cwnd,
        flows,
        handshake_timeout: a.handshake_timeout,
        trace_interval: a.trace_interval,
        ..SenderConfig::default()
    };
    let plane = if a.no_ccp {
        None
    } else {
        Some(Arc::new(ControlPlane::start(CcpConfig {
            agent_socket: a.agent.clone(),
            local_socket: a.socket.clone(),
            backend: a.backend,
            ..CcpConfig::default()
        })?))
    };
    let factory: Factory = {
        let plane = plane.clone();
        Arc::new(move |m: &FlowMeta| -> Box<dyn FlowController> {
            match &plane {
                Some(p) => p.controller(m),
                None => Box::new(BuiltinReno::new(m.mss, m.init_cwnd)),
            }
        })
    };
    let summaries = run_sender(&cfg, factory, &stop)?;
    for s in &summaries {
        print_sender(s);
    }
    if let Some(p) = &plane {
        let c = p.counters();
        println!(
            "ccp: {} messages to the agent, {} from it, {} undeliverable, {} fallbacks, {} returns",
            c.sent, c.agent_messages, c.send_failures, c.fallbacks, c.returns
        );
    }
    if let Some(path) = &a.json {
        let counters = plane.as_ref().map(|p| p.counters());
        write_json(
            path,
            &serde_json::json!({ "flows": summaries, "ccp": counters }),
        )?;
    }
    if let Some(path) = &a.csv {
        ccp_quic::summary::write_trace_csv(path, &summaries)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if summaries.iter().any(|s| s.receiver_intact == Some(false)) {
        bail!("the receiver reports a corrupt stream");
    }
    Ok(())
}

fn recv(a: RecvArgs) -> Result<()> {
    let stop = stop_flag()?;
    let id = ccp_quic::tls::self_signed()?;
    if let Some(p) = &a.cert_out {
        ccp_quic::tls::write_cert(p, &id.cert_pem)?;
    }
    let cfg = ReceiverConfig {
        bind: a.listen,
        expect_flows: a.flows,
        idle_timeout: a.idle_timeout,
        max_mtu: a.max_mtu,
        max_ack_delay: a.max_ack_delay,
    };
    let summaries = run_receiver(&cfg, &id, &stop, &mut |addr| {
        eprintln!("listening on {addr}")
    })?;
    for r in &summaries {
        print_receiver(r);
    }
    if let Some(path) = &a.json {
        write_json(path, &serde_json::json!({ "flows": summaries }))?;
    }
    if summaries.iter().any(|r| !r.intact) {
        bail!("at least one flow arrived corrupt or incomplete");
    }
    if let Some(n) = a.flows
        && summaries.len() < n
    {
        bail!("{} of {n} flows finished", summaries.len());
    }
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    init_logs(&cli);
    match cli.command {
        Command::Send(a) => send(a),
        Command::Recv(a) => recv(a),
    }
}
