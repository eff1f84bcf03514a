//! `ccp-udp`: reliable bulk transfers over UDP whose congestion control is the CCP agent's.

use anyhow::{Context, Result, bail};
use ccp_udp::cc::{FlowController, FlowMeta};
use ccp_udp::cli::{
    CcpArgs, FlowArgs, FlowsOut, LogArgs, OutputArgs, parse_peer, positive_duration,
    print_ccp_counters, stop_flag, write_json,
};
use ccp_udp::packet::{MAX_MSS, MIN_MSS};
use ccp_udp::relay::{RelayConfig, run_relay};
use ccp_udp::reno::BuiltinReno;
use ccp_udp::summary::{ReceiverSummary, SenderSummary};
use ccp_udp::{ReceiverConfig, SenderConfig, run_receiver, run_sender, run_sender_announcing};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Reliable bulk transfers over UDP, congestion-controlled by ccp-agent through libccp.
///
/// Start `ccp-agent`, then `ccp-udp recv` on the receiving host and `ccp-udp send` on the
/// sending one. Each sending flow is a libccp connection: the agent chooses its algorithm (the
/// one the flow names with --alg, or by the agent's rules) and sets its window and pacing rate.
/// If the agent goes away, flows continue under a built-in Reno and return to the agent when it
/// comes back.
#[derive(Parser, Debug)]
#[command(name = "ccp-udp", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Receive flows, verify each byte stream against the sender's hash, print a summary
    Recv(RecvArgs),
    /// Send one or more flows under CCP control
    Send(Box<SendArgs>),
    /// Relay UDP between a client and a server, dropping, reordering and duplicating packets
    Relay(RelayArgs),
}

#[derive(Args, Debug)]
struct RecvArgs {
    /// Address to listen on
    #[arg(long, default_value = "0.0.0.0:4433")]
    listen: SocketAddr,
    /// Exit after this many flows have finished (default: run until Ctrl-C)
    #[arg(long)]
    flows: Option<usize>,
    /// Exit after this long without any packet, e.g. 30s
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit)]
    idle_timeout: Option<Duration>,
    /// Write the per-flow summaries as JSON here
    #[arg(long)]
    json: Option<PathBuf>,
    /// Do not use UDP GRO
    #[arg(long)]
    no_gro: bool,
}

#[derive(Args, Debug)]
struct SendArgs {
    /// Receiver address: IP:PORT or HOST:PORT
    #[arg(long, value_parser = parse_peer)]
    to: SocketAddr,
    #[command(flatten)]
    flows: FlowArgs,
    #[command(flatten)]
    ccp: CcpArgs,
    /// Payload bytes per packet
    #[arg(long, default_value_t = 1448,
          value_parser = clap::value_parser!(u32).range(MIN_MSS as i64..=MAX_MSS as i64))]
    mss: u32,
    /// Initial window, packets
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    init_cwnd: u32,
    #[command(flatten)]
    out: OutputArgs,
    /// Announce each flow's source address as it starts: one JSON line per flow,
    /// {"flow":N,"flow_id":ID,"src":"IP:PORT","at_us":T}, written to this file (created empty
    /// first) once the flow's socket is bound, before its HELLO, while the others run. N is the
    /// flow's index as in the summaries (--json), SRC the address the agent knows it by, T µs
    /// since the sender started
    #[arg(long, value_name = "FILE")]
    flows_out: Option<PathBuf>,
    /// Do not use UDP GSO
    #[arg(long)]
    no_gso: bool,
    /// Do not mark packets ECN-capable
    #[arg(long)]
    no_ecn: bool,
    /// Give up if no receiver answers within this time
    #[arg(long, value_parser = positive_duration, default_value = "5s")]
    handshake_timeout: Duration,
    /// Window of the one-way delay's base: the excess handed to the agent and traced is over
    /// the smallest one-way delay of the last this-long (0: of the flow's whole life). 10 s
    /// bounds what a 100 ppm clock-rate difference between the hosts adds to 1 ms and keeps
    /// queues standing under 9 s; 0 suits hosts that share a clock (loopback, emulator)
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit, default_value = "10s")]
    owd_base_window: Duration,
}

#[derive(Args, Debug)]
struct RelayArgs {
    /// Address clients send to
    #[arg(long)]
    listen: SocketAddr,
    /// Server address packets are relayed to: IP:PORT or HOST:PORT
    #[arg(long, value_parser = parse_peer)]
    to: SocketAddr,
    /// Drop probability per packet and direction, 0..1
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Probability a packet is held back and delivered after later ones, 0..1
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Duplication probability, 0..1
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Extra one-way delay, e.g. 10ms
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit, default_value = "0ms")]
    delay: Duration,
    /// Random seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn print_sender(s: &SenderSummary) {
    println!(
        "flow {:>3} [{} -> {}]: {:.1} MB in {:.2} s = {:.1} Mbit/s, rtt p50/p95/p99 {:.2}/{:.2}/{:.2} ms, {} retransmitted, {} lost, {} timeouts",
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
        s.retransmitted_packets,
        s.lost_packets,
        s.timeouts,
    );
}

fn print_receiver(r: &ReceiverSummary) {
    println!(
        "flow {:>3}: {:.1} MB, {:.1} Mbit/s, {}, longest stall {:.0} ms, {} duplicates",
        r.flow,
        r.bytes as f64 / 1e6,
        r.goodput_mbps,
        match (r.intact, r.completed) {
            (true, _) => "intact (hash matches)",
            (false, true) => "CORRUPT (hash or length mismatch)",
            (false, false) => "INCOMPLETE (no FIN, or a hole before it: the sender stopped early)",
        },
        r.longest_stall_ms,
        r.duplicates,
    );
}

fn send(a: SendArgs) -> Result<()> {
    let stop = stop_flag()?;
    let flows = a.flows.specs()?;
    let cfg = SenderConfig {
        dest: a.to,
        mss: a.mss,
        init_cwnd_pkts: a.init_cwnd,
        flows,
        handshake_timeout: a.handshake_timeout,
        trace_interval: a.out.trace_interval,
        ecn: !a.no_ecn,
        gso: !a.no_gso,
        owd_base_window: a.owd_base_window,
        rtt_from: a.out.rtt_from,
        ..SenderConfig::default()
    };
    let plane = a.ccp.start()?;
    let make = |m: &FlowMeta| -> Box<dyn FlowController> {
        match &plane {
            Some(p) => p.controller(m),
            None => Box::new(BuiltinReno::new(m.mss, m.init_cwnd)),
        }
    };
    let summaries = match &a.flows_out {
        Some(path) => {
            let out = FlowsOut::create(path)?;
            run_sender_announcing(&cfg, &make, &stop, &|s| out.announce(s))?
        }
        None => run_sender(&cfg, &make, &stop)?,
    };
    for s in &summaries {
        print_sender(s);
    }
    if let Some(p) = &plane {
        print_ccp_counters(&p.counters());
    }
    if let Some(path) = &a.out.json {
        let counters = plane.as_ref().map(|p| p.counters());
        write_json(
            path,
            &serde_json::json!({ "flows": summaries, "ccp": counters }),
        )?;
    }
    if let Some(path) = &a.out.csv {
        ccp_udp::summary::write_trace_csv(path, &summaries)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn recv(a: RecvArgs) -> Result<()> {
    let stop = stop_flag()?;
    let cfg = ReceiverConfig {
        bind: a.listen,
        expect_flows: a.flows,
        idle_timeout: a.idle_timeout,
        gro: !a.no_gro,
    };
    let summaries = run_receiver(&cfg, &stop, &mut |addr| eprintln!("listening on {addr}"))?;
    for r in &summaries {
        print_receiver(r);
    }
    if let Some(path) = &a.json {
        write_json(path, &serde_json::json!({ "flows": summaries }))?;
    }
    if summaries.iter().any(|r| r.completed && !r.intact) {
        bail!("at least one flow arrived corrupt");
    }
    if summaries.iter().any(|r| !r.completed) {
        bail!("at least one flow did not complete");
    }
    Ok(())
}

fn relay(a: RelayArgs) -> Result<()> {
    let stop = stop_flag()?;
    for (name, p) in [
        ("--loss", a.loss),
        ("--reorder", a.reorder),
        ("--duplicate", a.duplicate),
    ] {
        if !(0.0..=1.0).contains(&p) {
            bail!("{name} {p}: expected a probability between 0 and 1");
        }
    }
    let cfg = RelayConfig {
        listen: a.listen,
        upstream: a.to,
        loss: a.loss,
        reorder: a.reorder,
        duplicate: a.duplicate,
        delay: a.delay,
        seed: a.seed,
    };
    let stats = run_relay(&cfg, &stop, &mut |addr| {
        eprintln!("relaying {addr} -> {}", a.to)
    })?;
    println!("{}", serde_json::to_string(&stats)?);
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    cli.log.init()?;
    match cli.command {
        Command::Send(a) => send(*a),
        Command::Recv(a) => recv(a),
        Command::Relay(a) => relay(a),
    }
}
