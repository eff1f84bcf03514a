//! End to end with the real binaries: `ccp-agent`, `ccp-quic recv` and `ccp-quic send` — QUIC
//! flows (s2n-quic) whose congestion controller is the agent through libccp.
//!
//! * `loopback_four_algorithms_arrive_intact_under_the_agent`: one flow each of reno, cubic,
//!   vivace and hercules, chosen per flow at the agent, at once over loopback: every stream is
//!   the flow's pattern (the receiver's hash equals the pattern's, computed here), the agent
//!   created each flow with the algorithm it asked for, and it was the agent's window and rate
//!   that governed the flow (controller `ccp-agent` throughout, many ACK invocations, window or
//!   rate changes, no fallback).
//! * `loopback_pacing_follows_the_agents_rate`: a bounded hercules flow (minimum 40 Mbit/s, so
//!   never above b = 60 Mbit/s) on loopback, where the window alone would allow Gbit/s: its
//!   goodput stays under b and reaches most of the pacing rate the agent set — the QUIC stack
//!   obeys the rate through the controller's earliest departure time.
//! * `loopback_max_ack_delay_sets_the_ack_rate`: the same paced flow against a receiver with
//!   `--max-ack-delay 25ms` (QUIC's default) and `1ms` (ccp-quic's): the receiver sends several
//!   times more ACK frames per packet at 1 ms, at most one per 5 packets at 25 ms.
//! * `emulated_link_four_algorithms_intact_and_near_capacity`: the same four algorithms one
//!   after the other over a `ccp-emu` link of 20 Mbit/s with 10 ms each way and a drop-tail
//!   buffer of 100 packets: intact, the window-based flows' goodput near what the link can
//!   carry, and the online learners near it once started (their second half; see below). Needs
//!   root and `/dev/net/tun` (skips with the reason otherwise); the testbed's drop removes its
//!   namespaces, devices and processes, also when an assertion fails.
//!
//! Measured on the project's 2-core machine (five runs of the test): over the emulated link
//! reno and cubic 97 % of the 19.1 Mbit/s of stream content the link carries (6-MB flows),
//! vivace 93 % and hercules 85 % (12-MB flows; hercules's slow start stops at 1.5 times its
//! default 1 Mbit/s minimum and probing does the rest); the learners 92–93 % of the 19.6 Mbit/s
//! of QUIC packets it carries in their second half. On loopback the bounded hercules flow made
//! 54.5–54.7 Mbit/s for a mean pacing rate of 58.5–58.6 Mbit/s.
//!
//! The tests run one at a time (`ccp_tests::one_at_a_time`); the whole file takes about 30 s.
//! Run side by side, the emulated link's forwarding threads (SCHED_FIFO) and the loopback test's
//! four flows at full speed shared the machine's two cores, and in one CI run the loopback
//! test's reno flow fell back to the built-in Reno: the datapath leaves the agent when its
//! messages go unanswered for more than 50 ms on loopback.
//!
//! The learners' start-up: Vivace's slow start ends at the first MI whose utility falls, and an
//! MI of 8–18 packets at 1–9 Mbit/s, on an empty queue, fits an RTT gradient above the 0.01
//! filter if its packets leave in pairs (the second queues one packet time, 0.6 ms, behind the
//! first at the bottleneck). Under s2n-quic's own millisecond timer 30 % of the packets of an
//! 8–11 Mbit/s flow left in pairs, slow start ended early in about half the runs, and one run
//! in about 130 here (and one in CI) averaged 47 % of the link; the learners then carried
//! 12 MB and their whole flow was asked only for 40 %. The sender now wakes on a precise timer
//! (`ccp_quic::io`): in 32 runs of a 4-s vivace flow on this link slow start ended at the right
//! MI in 31 (15 of 32 on the millisecond timer, side by side), so the learners' whole flow is
//! asked for 70 %. They keep their 12 MB so that a late start still leaves a second half to
//! measure (docs/results/datapaths.md, "Vivace's slow start over `ccp-quic`").

use ccp_emu::testbed::RECEIVER_ADDR;
use ccp_emu::{Testbed, TestbedConfig, cleanup};
use ccp_tests::emu_support;
use ccp_tests::{Agent, listening_addr, workspace_bin};
use ccp_udp::pattern::{hash_hex, stream_hash};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (and reaped) when dropped, so a failing assertion leaves nothing.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Wait at most `timeout` for the process to exit; whether it succeeded.
    fn wait(&mut self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            match self.0.try_wait() {
                Ok(Some(s)) => return s.success(),
                Ok(None) if t0.elapsed() > timeout => return false,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => return false,
            }
        }
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("summary is JSON")
}

fn flows(v: &Value) -> &Vec<Value> {
    v["flows"].as_array().expect("summary has flows")
}

/// A flow's acknowledged bytes over the second half of its sender's trace (`--trace-interval`),
/// Mbit/s: the rate it held once started.
fn second_half_mbps(flow: &Value) -> f64 {
    let end = flow["trace"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|p| p["t_s"].as_f64())
        .expect("the sender traced the flow");
    emu_support::trace_rate(flow, end / 2.0, end).expect("trace points past the middle")
}

/// One run: a receiver for `n` flows started by `launch`, then a sender with `flow_specs`;
/// returns the sender's and the receiver's summaries.
struct Run {
    sent: Value,
    got: Value,
}

fn run(
    dir: &Path,
    name: &str,
    agent: &Agent,
    listen: &str,
    flow_specs: &[&str],
    recv_args: &[&str],
    launch: &dyn Fn(&mut Command) -> Child,
) -> Run {
    let quic = workspace_bin("ccp-quic").unwrap();
    let cert = dir.join(format!("{name}-cert.pem"));
    let recv_json = dir.join(format!("{name}-recv.json"));
    let send_json = dir.join(format!("{name}-send.json"));
    let recv_err = dir.join(format!("{name}-recv.err"));
    let send_err = dir.join(format!("{name}-send.err"));
    let mut recv = Proc(launch(
        Command::new(&quic)
            .args(["recv", "--listen", listen, "--flows"])
            .arg(flow_specs.len().to_string())
            .arg("--cert-out")
            .arg(&cert)
            .arg("--json")
            .arg(&recv_json)
            .args(["--idle-timeout", "60s"])
            .args(recv_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&recv_err).unwrap()),
    ));
    let t0 = Instant::now();
    let addr = loop {
        let text = std::fs::read_to_string(&recv_err).unwrap_or_default();
        if let Some(a) = listening_addr(&text) {
            break a.to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10) && matches!(recv.0.try_wait(), Ok(None)),
            "ccp-quic recv did not start: {text}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut send_cmd = Command::new(&quic);
    send_cmd
        .args(["send", "--to", &addr, "--cert"])
        .arg(&cert)
        .args(["--agent", s(&agent.socket)])
        .args(["--trace-interval", "10ms", "--json"])
        .arg(&send_json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&send_err).unwrap());
    for f in flow_specs {
        send_cmd.args(["--flow", f]);
    }
    let mut send = Proc(launch(&mut send_cmd));
    let ok = send.wait(Duration::from_secs(120));
    assert!(
        ok,
        "ccp-quic send failed: {}\nreceiver: {}",
        std::fs::read_to_string(&send_err).unwrap_or_default(),
        std::fs::read_to_string(&recv_err).unwrap_or_default()
    );
    let rok = recv.wait(Duration::from_secs(30));
    assert!(
        rok,
        "ccp-quic recv failed: {}",
        std::fs::read_to_string(&recv_err).unwrap_or_default()
    );
    Run {
        sent: read_json(&send_json),
        got: read_json(&recv_json),
    }
}

/// Every stream arrived whole and is the flow's pattern; every flow was under the agent with
/// the algorithm it asked for.
fn check_intact_and_agent_controlled(r: &Run, agent: &Agent, algs: &[&str], bytes: u64) {
    assert_eq!(flows(&r.got).len(), algs.len(), "{}", r.got);
    for f in flows(&r.got) {
        assert_eq!(f["intact"], true, "{f}");
        assert_eq!(f["bytes"].as_u64(), Some(bytes), "{f}");
        // The content is the flow's pattern, computed here independently of both ends.
        let id = f["flow_id"].as_u64().unwrap() as u32;
        assert_eq!(
            f["hash"].as_str(),
            Some(hash_hex(stream_hash(id, bytes)).as_str()),
            "{f}"
        );
    }
    for f in flows(&r.sent) {
        let alg = f["algorithm"].as_str().unwrap();
        assert_eq!(f["receiver_intact"], true, "{alg}: {f}");
        assert_eq!(f["controllers"], serde_json::json!(["ccp-agent"]), "{alg}");
        // The flow's window and rate came from the agent's program: many ACK invocations, and
        // the agent changed them while the flow ran.
        let acks = f["ack_invocations"].as_u64().unwrap();
        let changes = f["control_changes"].as_u64().unwrap();
        assert!(acks >= 50, "{alg}: only {acks} invocations");
        assert!(changes >= 3, "{alg}: the agent changed nothing ({changes})");
        assert!(
            f["trace"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["controller"] == "ccp-agent"),
            "{alg}: a trace sample not under the agent"
        );
    }
    assert_eq!(r.sent["ccp"]["fallbacks"], 0, "{}", r.sent["ccp"]);
    assert!(r.sent["ccp"]["agent_messages"].as_u64().unwrap() > 0);
    let created = agent.events("flow created");
    for alg in algs {
        assert!(
            created.iter().any(|e| e["algorithm"] == *alg),
            "the agent created no {alg} flow: {created:?}"
        );
    }
}

const ALGS: [&str; 4] = ["reno", "cubic", "vivace", "hercules"];

#[test]
fn loopback_four_algorithms_arrive_intact_under_the_agent() {
    let _one = ccp_tests::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &["--log-level", "info"]).unwrap();
    let bytes = 16_000_000u64;
    let specs: Vec<String> = ALGS
        .iter()
        .map(|a| format!("alg={a},bytes={bytes}"))
        .collect();
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let r = run(dir.path(), "lo", &agent, "127.0.0.1:0", &specs, &[], &|c| {
        c.spawn().unwrap()
    });
    check_intact_and_agent_controlled(&r, &agent, &ALGS, bytes);
    for f in flows(&r.sent) {
        eprintln!(
            "loopback {}: {:.0} Mbit/s, {} lost, {} ack / {} tick invocations, {} changes",
            f["algorithm"],
            f["goodput_mbps"].as_f64().unwrap(),
            f["lost_packets"],
            f["ack_invocations"],
            f["ticks"],
            f["control_changes"]
        );
    }
}

#[test]
fn loopback_pacing_follows_the_agents_rate() {
    let _one = ccp_tests::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]).unwrap();
    let r = run(
        dir.path(),
        "pace",
        &agent,
        "127.0.0.1:0",
        &["alg=hercules:min=40mbit;bounded=true,time=3s"],
        &[],
        &|c| c.spawn().unwrap(),
    );
    let f = &flows(&r.sent)[0];
    assert_eq!(f["receiver_intact"], true, "{f}");
    assert_eq!(flows(&r.got)[0]["intact"], true);
    let goodput = f["goodput_mbps"].as_f64().unwrap();
    // The pacing rate the agent set, averaged over the trace after the first second (start-up
    // left out), in Mbit/s of UDP payload.
    let rates: Vec<f64> = f["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["t_s"].as_f64().unwrap() >= 1.0)
        .filter_map(|t| t["pacing_rate_Bps"].as_f64())
        .map(|r| r * 8.0 / 1e6)
        .collect();
    assert!(!rates.is_empty(), "the agent set no pacing rate: {f}");
    let mean_rate = rates.iter().sum::<f64>() / rates.len() as f64;
    eprintln!(
        "bounded hercules on loopback: goodput {goodput:.1} Mbit/s, mean pacing rate {mean_rate:.1} Mbit/s, window {} bytes",
        f["trace"][f["trace"].as_array().unwrap().len() / 2]["cwnd_bytes"]
    );
    // Bounded at b = 1.5 × 40 Mbit/s: the stack never ran ahead of the agent's rate, although
    // loopback carries Gbit/s (goodput counts stream bytes, a few percent below UDP payload).
    assert!(
        mean_rate <= 60.0 * 1.001,
        "the agent's rate {mean_rate:.1} above b"
    );
    assert!(
        goodput <= 60.0,
        "goodput {goodput:.1} Mbit/s above the bound"
    );
    // And the stack used most of the rate (start-up, the verdict's round trip and QUIC's
    // overhead of about 3 % included).
    assert!(
        goodput >= 0.7 * mean_rate,
        "goodput {goodput:.1} Mbit/s for a pacing rate of {mean_rate:.1} Mbit/s"
    );
}

#[test]
fn loopback_max_ack_delay_sets_the_ack_rate() {
    // The same paced flow (bounded hercules, at most 15 Mbit/s, about 1,300 packets/s) against a
    // receiver at QUIC's default max_ack_delay and at 1 ms (ccp-quic's default). At 25 ms
    // s2n-quic acknowledges every 10th packet (its fixed packet tolerance); at 1 ms its ACK
    // timer, which counts a deadline within its 1-ms granularity as passed, fires at the next
    // packet that arrives on its own. On loopback the sender's 1-ms send timer releases packets
    // in small bunches, which the receiver acknowledges together.
    let _one = ccp_tests::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]).unwrap();
    let mut per_packet = vec![];
    for delay in ["25ms", "1ms"] {
        let r = run(
            dir.path(),
            &format!("ackdelay-{delay}"),
            &agent,
            "127.0.0.1:0",
            &["alg=hercules:min=10mbit;bounded=true,time=2s"],
            &["--max-ack-delay", delay],
            &|c| c.spawn().unwrap(),
        );
        let f = &flows(&r.sent)[0];
        assert_eq!(f["receiver_intact"], true, "{f}");
        let acks = f["acks"].as_f64().unwrap();
        let sent = f["sent_packets"].as_f64().unwrap();
        assert!(sent > 1000.0, "max_ack_delay {delay}: {sent} packets sent");
        eprintln!(
            "max_ack_delay {delay}: {acks} ACK frames for {sent} packets ({:.2} per packet)",
            acks / sent
        );
        per_packet.push(acks / sent);
    }
    // One ACK per 10 packets plus the few the flow's start and end add; several times more at
    // 1 ms (measured in four runs: 0.12–0.13 and 0.42–0.47 ACK frames per packet; fewer at
    // 1 ms when a loaded receiver reads several packets at once).
    assert!(
        per_packet[0] <= 0.2,
        "25 ms: {:.2} ACKs per packet",
        per_packet[0]
    );
    assert!(
        per_packet[1] >= 2.0 * per_packet[0],
        "1 ms: {:.2} ACKs per packet against {:.2} at 25 ms",
        per_packet[1],
        per_packet[0]
    );
}

/// Link rate, bit/s.
const EMU_RATE_BPS: u64 = 20_000_000;
/// Emulator name prefix (interfaces, namespace inits).
const PREFIX: &str = "quice";

fn emu_skip_reason() -> Option<String> {
    emu_support::skip_reason(&["ccp-agent", "ccp-quic"], &[])
}

#[test]
fn emulated_link_four_algorithms_intact_and_near_capacity() {
    if let Some(why) = emu_skip_reason() {
        eprintln!("skipping emulated_link_four_algorithms_intact_and_near_capacity: {why}");
        return;
    }
    let _one = ccp_tests::one_at_a_time();
    cleanup::sweep(PREFIX).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &["--log-level", "info"]).unwrap();
    // The learners carry twice the bytes, so that their start-up leaves a second half to
    // measure (module documentation).
    let bytes_of = |alg: &str| match alg {
        "reno" | "cubic" => 6_000_000u64,
        _ => 12_000_000u64,
    };
    let mut goodputs: Vec<(String, f64, f64, f64)> = vec![];
    {
        let tb = Testbed::new(TestbedConfig {
            name_prefix: PREFIX.into(),
            command_line: "tests/quic_e2e.rs".into(),
            ..TestbedConfig::dumbbell(1, EMU_RATE_BPS, 100, Duration::from_millis(10))
        })
        .unwrap();
        for (i, alg) in ALGS.iter().enumerate() {
            let listen = format!("{RECEIVER_ADDR}:{}", 5400 + i);
            let bytes = bytes_of(alg);
            let spec = format!("alg={alg},bytes={bytes}");
            let r = {
                let tb = &tb;
                let mut first = true;
                let launch = std::cell::RefCell::new(move |c: &mut Command| {
                    // The receiver runs on the receiver host, the sender on the sender host.
                    let host = if first {
                        tb.receiver()
                    } else {
                        &tb.senders()[0]
                    };
                    first = false;
                    tb.spawn(host, c).unwrap()
                });
                run(
                    dir.path(),
                    &format!("emu-{alg}"),
                    &agent,
                    &listen,
                    &[spec.as_str()],
                    &[],
                    &|c| (launch.borrow_mut())(c),
                )
            };
            check_intact_and_agent_controlled(&r, &agent, &[alg], bytes);
            let f = &flows(&r.sent)[0];
            goodputs.push((
                alg.to_string(),
                f["goodput_mbps"].as_f64().unwrap(),
                second_half_mbps(f),
                f["rtt_p50_ms"].as_f64().unwrap(),
            ));
            std::thread::sleep(Duration::from_millis(300));
        }
        drop(tb);
    }
    let leftovers = (
        cleanup::find_inits(PREFIX),
        cleanup::find_interfaces(PREFIX),
    );
    // Payload capacity: 1476-byte IP packets (1448 bytes of QUIC packet) take 1480 bytes on the
    // emulated wire; about 37 of the 1448 are QUIC's (short header, STREAM frame header, AEAD
    // tag), so the link carries at most 20 × 1411 / 1480 = 19.1 Mbit/s of stream content.
    let capacity = EMU_RATE_BPS as f64 / 1e6 * 1411.0 / 1480.0;
    // The trace counts acknowledged QUIC packets (1448 bytes each), of which the link carries
    // 20 × 1448 / 1480 = 19.6 Mbit/s.
    let packet_capacity = EMU_RATE_BPS as f64 / 1e6 * 1448.0 / 1480.0;
    for (alg, g, half, rtt) in &goodputs {
        eprintln!(
            "emulated 20 Mbit/s, 20 ms: {alg}: {g:.1} Mbit/s = {:.0} % of {capacity:.1}, second half {half:.1} Mbit/s = {:.0} % of {packet_capacity:.1}, rtt p50 {rtt:.1} ms",
            g / capacity * 100.0,
            half / packet_capacity * 100.0
        );
    }
    for (alg, g, half, _) in &goodputs {
        // Start-up and the verdict's round trip are inside the flow's time: window-based
        // flows come close to the link. The online learners start from a rate of their own and
        // move by gradient steps, so their whole flow is asked for less and their second half
        // to be near the link (module documentation).
        let floor = match alg.as_str() {
            "reno" | "cubic" => 0.75,
            _ => 0.7,
        };
        assert!(
            *g >= floor * capacity && *g <= capacity * 1.02,
            "{alg}: {g:.1} Mbit/s on a {capacity:.1} Mbit/s link"
        );
        // Trace points come every 10 ms and ACKs in batches: 5 % above the link is timing.
        assert!(
            *half >= 0.85 * packet_capacity && *half <= packet_capacity * 1.05,
            "{alg}: {half:.1} Mbit/s of QUIC packets in its second half on a {packet_capacity:.1} Mbit/s link"
        );
    }
    assert!(
        leftovers.0.is_empty() && leftovers.1.is_empty(),
        "left behind: {leftovers:?}"
    );
}
