//! PolyCC on the emulator (`ccp-emu`): real `ccp-udp` flows driven by the real `ccp-agent` in
//! network namespaces, in real time, against BBR alone on the same emulated path.
//!
//! * Scenario 1 (paper §3.1): 20 Mbit/s, a drop-tail buffer of one BDP (250 KB, 166 packets of
//!   1504 bytes), mean RTT 100 ms with a deviation of ±J: each direction has a one-way delay of
//!   50 − J/2 ms plus the emulator's jitter of up to J ms (smooth, order-preserving), so the RTT
//!   ranges over [100 − J, 100 + J] ms as in the paper. Pilot bbr, copilot cubic, max(cwnd).
//! * Scenario 2 (paper §3.2): 20 Mbit/s halved to 10 Mbit/s 5 s into the flow, 100 ms RTT, the
//!   same buffer. Pilot bbr, copilot copa, min(rate); the convergence time of the flow's bytes in
//!   flight (500-ms means at most 1.5 × the new BDP from then on), as in the simulator checks.
//!
//! The tests that run by default are short (one jitter, ±100 ms, and the halving: four flows of
//! 15–20 s, about 75 s); `emu_polycc_full_jitter_sweep` (ignored: about 3 minutes) runs every
//! jitter of the paper. Figures are in docs/results/polycc.md.
//!
//! Needs root and `/dev/net/tun`, and the release binaries (`cargo build --release --bins`);
//! without them every test says why and skips. The testbed's drop removes every namespace,
//! device and process.

use ccp_emu::testbed::RECEIVER_ADDR;
use ccp_emu::trace::Schedule;
use ccp_emu::{DelayConfig, LinkConfig, QueueConfig, Testbed, TestbedConfig, cleanup};
use ccp_tests::emu_support;
use ccp_tests::{Agent, workspace_bin};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bottleneck rate, bytes/s (20 Mbit/s).
const RATE: u64 = 20_000_000 / 8;
/// One BDP at 20 Mbit/s and 100 ms, in 1504-byte packets.
const BUFFER_PACKETS: u32 = 166;
const BBR_CUBIC_MAX_CWND: &str = "polycc:pilot=bbr,copilots=cubic,fuse=max,on=cwnd";
const BBR_COPA_MIN_RATE: &str = "polycc:pilot=bbr,copilots=copa,fuse=min,on=rate";
/// Name prefix of the testbeds' interfaces and namespace inits.
const PREFIX: &str = "emupcc";

fn skip_reason() -> Option<String> {
    emu_support::skip_reason(&["ccp-agent", "ccp-udp"], &[])
}

/// One trace sample of a ccp-udp flow: (seconds since the handshake, bytes in flight, delivered
/// bytes).
type Sample = (f64, f64, f64);

/// Run `alg` for `secs` over `tb` under `agent`; returns the flow's trace and the instant the
/// sender was started.
fn flow(
    tb: &Testbed,
    agent: &Agent,
    dir: &Path,
    alg: &str,
    port: u16,
    secs: u64,
) -> (Vec<Sample>, Instant) {
    let udp = workspace_bin("ccp-udp").unwrap();
    let tag = format!("{port}");
    let recv_json = dir.join(format!("recv-{tag}.json"));
    let send_json = dir.join(format!("send-{tag}.json"));
    let recv_err = dir.join(format!("recv-{tag}.err"));
    let send_err = dir.join(format!("send-{tag}.err"));
    let to = format!("{RECEIVER_ADDR}:{port}");
    let mut recv = tb
        .spawn(
            tb.receiver(),
            Command::new(&udp)
                .args(["recv", "--listen", &to, "--flows", "1", "--json"])
                .arg(&recv_json)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&recv_err).unwrap()),
        )
        .unwrap();
    let t0 = Instant::now();
    while !std::fs::read_to_string(&recv_err)
        .unwrap_or_default()
        .contains("listening on ")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "ccp-udp recv did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    let send = tb
        .spawn(
            &tb.senders()[0],
            Command::new(&udp)
                .args(["send", "--to", &to, "--alg", alg])
                .args(["--time", &format!("{secs}s")])
                .arg("--agent")
                .arg(&agent.socket)
                .arg("--socket")
                .arg(dir.join(format!("dp-{tag}.sock")))
                .args(["--trace-interval", "10ms", "--log-level", "warn", "--json"])
                .arg(&send_json)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&send_err).unwrap()),
        )
        .unwrap();
    let out = send.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ccp-udp send {alg}: {}: {}",
        out.status,
        std::fs::read_to_string(&send_err).unwrap_or_default()
    );
    let _ = recv.wait();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&send_json).unwrap()).unwrap();
    let f = &v["flows"][0];
    let controllers: Vec<&str> = f["controllers"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(controllers, ["ccp-agent"], "{alg}: the agent was in charge");
    let trace = f["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            Some((
                s["t_s"].as_f64()?,
                s["bytes_in_flight"].as_f64()?,
                s["delivered_bytes"].as_f64()?,
            ))
        })
        .collect();
    (trace, started)
}

/// Goodput over [from, to] seconds of the flow, Mbit/s.
fn goodput_mbit(trace: &[Sample], from: f64, to: f64) -> f64 {
    let inside: Vec<&Sample> = trace
        .iter()
        .filter(|s| (from..=to).contains(&s.0))
        .collect();
    let (a, b) = (inside.first().unwrap(), inside.last().unwrap());
    (b.2 - a.2) * 8.0 / (b.0 - a.0) / 1e6
}

/// Seconds after `at` until every 500-ms mean of the bytes in flight stays at most `limit`.
fn convergence_s(trace: &[Sample], at: f64, limit: f64) -> f64 {
    let after: Vec<&Sample> = trace.iter().filter(|s| s.0 >= at).collect();
    let end = after.last().unwrap().0;
    let mut settled = at;
    for (i, s) in after.iter().enumerate() {
        if s.0 + 0.5 > end {
            break;
        }
        let w: Vec<f64> = after[i..]
            .iter()
            .take_while(|u| u.0 < s.0 + 0.5)
            .map(|u| u.1)
            .collect();
        if w.iter().sum::<f64>() / w.len() as f64 > limit {
            settled = s.0 + 0.5;
        }
    }
    settled - at
}

/// A testbed with a 20 Mbit/s (or `schedule`) bottleneck, one-way `delay_ms` and `jitter_ms`.
fn testbed(name: &str, delay_ms: u64, jitter_ms: u64, schedule: Option<&str>) -> Testbed {
    let service = match schedule {
        Some(s) => LinkConfig {
            service: ccp_emu::link::Service::Rate(Schedule::parse(s).unwrap()),
            ..LinkConfig::rate(RATE)
        },
        None => LinkConfig::rate(RATE),
    };
    Testbed::new(TestbedConfig {
        senders: 1,
        uplink: Some(service.with_queue(QueueConfig::droptail_packets(BUFFER_PACKETS))),
        downlink: None,
        delay: DelayConfig {
            delay: Duration::from_millis(delay_ms),
            jitter: Duration::from_millis(jitter_ms),
            // The emulator's default: the delay moves smoothly, RTT within 100 ± J ms.
            ..DelayConfig::default()
        },
        name_prefix: PREFIX.into(),
        command_line: format!("tests/emu_polycc.rs {name}"),
        ..Default::default()
    })
    .unwrap()
}

/// BBR alone and PolyCC (bbr + cubic, max cwnd) at RTT deviation ±`j` ms: goodput over
/// 5–`secs` s, Mbit/s.
fn jitter_point(dir: &Path, agent: &Agent, j: u64, secs: u64) -> (f64, f64) {
    let tb = testbed(&format!("jitter {j}"), 50 - j / 2, j, None);
    let (b, _) = flow(&tb, agent, dir, "bbr", 5400 + j as u16, secs);
    std::thread::sleep(Duration::from_millis(500));
    let (p, _) = flow(&tb, agent, dir, BBR_CUBIC_MAX_CWND, 5600 + j as u16, secs);
    let to = secs as f64 - 0.5;
    (goodput_mbit(&b, 5.0, to), goodput_mbit(&p, 5.0, to))
}

fn with_agent(f: impl FnOnce(&Path, &Agent)) {
    // One emulated testbed at a time: the tests of this file share the prefix.
    let _one = ccp_tests::one_at_a_time();
    cleanup::sweep(PREFIX).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]).unwrap();
    f(dir.path(), &agent);
    agent.stop().unwrap();
}

#[test]
fn emu_polycc_keeps_goodput_where_bbr_collapses_under_rtt_jitter() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    with_agent(|dir, agent| {
        // ±100 ms: the RTT spans 0-200 ms. BBR's share depends on the smallest RTT its min-RTT
        // filter happened to catch, so it scatters from run to run: sixteen runs gave bbr
        // 0.79-18.97 Mbit/s (gains 1.01-24.7×, docs/results/polycc.md; 11.4 and 1.72-1.73× in
        // the two after BBR's loss-recovery fix) and PolyCC 18.6-19.9 Mbit/s every time. BBR's
        // collapse is not reliable here, so this test asks what held every time: PolyCC keeps
        // the link and never falls below BBR alone. The paper's direction (the gain grows with
        // jitter, ≥ 1.82× from ±70 ms) is asserted over eight seeds on the simulator
        // (tests/polycc.rs); at ±70 ms the emulator's gain was 1.07-2.29× (the ignored sweep;
        // 1.25× after BBR's loss-recovery fix, 1.90-2.29× in the first runs).
        let (bbr, poly) = jitter_point(dir, agent, 100, 20);
        eprintln!(
            "emu ±100 ms: bbr {bbr:.2} Mbit/s, polycc {poly:.2} Mbit/s, gain {:.2}",
            poly / bbr
        );
        assert!(poly >= 0.95 * bbr, "{poly} vs {bbr}");
        assert!(poly > 0.85 * 20.0, "{poly}");
    });
}

#[test]
#[ignore = "the paper's whole jitter sweep on the emulator: about 3 minutes"]
fn emu_polycc_full_jitter_sweep() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    with_agent(|dir, agent| {
        // POLYCC_EMU_JITTERS=70,100 runs only those points.
        let points: Vec<u64> = std::env::var("POLYCC_EMU_JITTERS")
            .map(|v| v.split(',').filter_map(|j| j.trim().parse().ok()).collect())
            .unwrap_or_else(|_| vec![20, 50, 70, 100]);
        for j in points {
            let (bbr, poly) = jitter_point(dir, agent, j, 20);
            eprintln!(
                "emu ±{j} ms: bbr {bbr:.2} Mbit/s, polycc {poly:.2} Mbit/s, gain {:.2}",
                poly / bbr
            );
        }
    });
}

#[test]
fn emu_a_copa_copilot_speeds_up_bbr_after_the_bandwidth_halves() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    with_agent(|dir, agent| {
        let new_bdp = 10e6 / 8.0 * 0.1;
        let mut conv = vec![];
        for (i, alg) in ["bbr", BBR_COPA_MIN_RATE].into_iter().enumerate() {
            // The schedule counts from the testbed's start; the flow starts about then, and
            // the step is placed 5 s into the flow from the measured offset.
            let tb_start = Instant::now();
            let tb = testbed(alg, 50, 0, Some("0s:20mbit,6s:10mbit"));
            let (trace, started) = flow(&tb, agent, dir, alg, 5800 + i as u16, 16);
            let step = 6.0 - started.duration_since(tb_start).as_secs_f64();
            let c = convergence_s(&trace, step, 1.5 * new_bdp);
            eprintln!(
                "emu halving at {step:.2} s: {alg}: convergence {c:.2} s, goodput after {:.2} \
                 Mbit/s",
                goodput_mbit(&trace, step, 15.5)
            );
            conv.push(c);
            drop(tb);
        }
        assert!(conv[1] < 0.7 * conv[0], "{conv:?}");
    });
}
