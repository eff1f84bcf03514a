//! `ccp-quic`: bulk transfers over QUIC (s2n-quic) whose congestion control is the CCP agent's.

use anyhow::{Context, Result, bail};
use ccp_quic::controller::Factory;
use ccp_quic::summary::{ReceiverSummary, SenderSummary};
use ccp_quic::{ReceiverConfig, SenderConfig, run_receiver, run_sender};
use ccp_udp::cc::{FlowController, FlowMeta};
use ccp_udp::cli::{
    CcpArgs, FlowArgs, LogArgs, OutputArgs, parse_peer, positive_duration, print_ccp_counters,
    stop_flag, write_json,
};
use ccp_udp::reno::BuiltinReno;
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
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
///
/// The receiver checks every stream byte against the flow's known pattern. A sized flow
/// (--bytes) ends with its length and hash, checked end to end. A timed flow (--time) stops
/// at its duration: the sender resets the stream, abandoning what it still buffers (up to
/// 2 MiB), so the flow puts no new data on the wire after its duration; the bytes delivered
/// are the verified prefix the receiver read, on which both summaries agree.
#[derive(Parser, Debug)]
#[command(name = "ccp-quic", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Receive flows, verify each stream against its pattern (and a sized flow's length and
    /// hash), print a summary
    Recv(RecvArgs),
    /// Send one or more flows under CCP control
    Send(Box<SendArgs>),
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
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit)]
    idle_timeout: Option<Duration>,
    /// Write the per-flow summaries as JSON here (each with its `arrivals`: the content bytes
    /// that had reached the receiver, beyond a hole too, every 10 ms while data came)
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
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit, default_value = "1ms")]
    max_ack_delay: Duration,
}

#[derive(Args, Debug)]
struct SendArgs {
    /// Receiver address: IP:PORT or HOST:PORT
    #[arg(long, value_parser = parse_peer)]
    to: SocketAddr,
    /// The receiver's certificate (written by `recv --cert-out`); waits up to
    /// --handshake-timeout for the file to appear
    #[arg(long)]
    cert: PathBuf,
    #[command(flatten)]
    flows: FlowArgs,
    #[command(flatten)]
    ccp: CcpArgs,
    /// Maximum UDP payload per datagram (QUIC packet size), bytes; at least 1200
    #[arg(long, default_value_t = 1448, value_parser = clap::value_parser!(u32).range(ccp_quic::sender::MIN_MSS as i64..))]
    mss: u32,
    /// Initial window, packets
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    init_cwnd: u32,
    #[command(flatten)]
    out: OutputArgs,
    /// Write every data packet sent and every RTT sample as CSV here (flow_id, event "sent" or
    /// "rtt", time_us, packet_sent_us, bytes, rtt_us; µs on s2n-quic's clock from the flow's
    /// first data packet). Packets sent in one batch share a send time: the pacing's bursts
    #[arg(long)]
    packet_trace: Option<PathBuf>,
    /// Wake the sender's endpoints on s2n-quic's own millisecond timer instead of the precise
    /// one: paced packets due within a millisecond of each other then leave together (for
    /// comparing the two)
    #[arg(long)]
    coarse_timer: bool,
    /// With the precise timer, let a packet leave up to this long before its departure time
    /// together with the one whose time woke the sender (fewer wake-ups at high pacing rates,
    /// at most this much early); at most 1ms
    #[arg(long, value_parser = ccp_units::parse_duration_with_unit, default_value = "100us")]
    pacing_slack: Duration,
    /// Give up if no receiver answers within this time
    #[arg(long, value_parser = positive_duration, default_value = "5s")]
    handshake_timeout: Duration,
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
        match (r.intact, r.ended_by.as_str()) {
            (true, "trailer") => "intact (pattern, length and hash match)",
            (true, "deadline") => "intact (timed flow ended at its duration, every byte checked)",
            (true, _) => "intact (stopped by the sender, every byte checked)",
            (false, _) => "CORRUPT or incomplete (pattern, hash or length mismatch)",
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
    if a.pacing_slack > ccp_quic::io::K_GRANULARITY {
        bail!(
            "--pacing-slack {:?}: at most {:?} (s2n-quic's timer granularity)",
            a.pacing_slack,
            ccp_quic::io::K_GRANULARITY
        );
    }
    let stop = stop_flag()?;
    let flows = a.flows.specs()?;
    let cfg = SenderConfig {
        dest: a.to,
        cert_pem: read_cert(&a.cert, a.handshake_timeout)?,
        mss: a.mss,
        init_cwnd_pkts: a.init_cwnd,
        flows,
        handshake_timeout: a.handshake_timeout,
        trace_interval: a.out.trace_interval,
        rtt_from: a.out.rtt_from,
        packet_trace: a.packet_trace.is_some(),
        coarse_timer: a.coarse_timer,
        pacing_slack: a.pacing_slack,
        ..SenderConfig::default()
    };
    let plane = a.ccp.start()?.map(Arc::new);
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
        ccp_quic::summary::write_trace_csv(path, &summaries)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.packet_trace {
        ccp_quic::summary::write_packet_csv(path, &summaries)
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
    cli.log.init()?;
    match cli.command {
        Command::Send(a) => send(*a),
        Command::Recv(a) => recv(a),
    }
}
