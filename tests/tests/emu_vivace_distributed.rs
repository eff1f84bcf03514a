//! Vivace-Distributed against the kernel's CUBIC on the emulator (`ccp-emu`), the paper's TCP
//! friendliness setting (seeds/000 §7.6, Fig. 11) with the real JCCE service: one
//! vivace-distributed flow (`ccp-udp` with the real `ccp-agent`, `--jcce`) and 1 or 2 kernel
//! CUBIC flows (`TCP_CONGESTION` on their sockets), each from its own sender host, across one
//! bottleneck of 100 Mbit/s, 15 ms each way (30 ms base RTT) and a 75 KB drop-tail buffer (50
//! packets of 1500 bytes). `jcce serve` runs on the testbed's service host, 1 ms each way from
//! every host over a side path that does not cross the bottleneck; the agent runs inside the
//! first sender host and reaches it over that path, and so do the CUBIC flows' receivers (from
//! the receiver host), which publish what they read over the last 40 ms every 10 ms to the same
//! group (`jcce::publisher`; the paper's receivers publish "the throughput in this interval",
//! §3). Rates are delivered bytes over 8–20 s of each 20 s case (ccp-udp: its trace; kernel:
//! what the receiving application read). About 50 s in all.
//!
//! Needs root and `/dev/net/tun` (namespaces, TUN devices) and the release binaries
//! (`cargo build --release --bins`); without them the test says why and skips. The testbed's
//! drop removes every namespace, device and process, the service and the agent with them.

use ccp_algorithms::aggregator::jcce;
use ccp_algorithms::aggregator::jcce::publisher::ReceiverPublisher;
use ccp_emu::testbed::SERVICE_ADDR;
use ccp_emu::{ServiceHostConfig, Testbed, TestbedConfig, cleanup};
use ccp_tests::emu_support::{self, join, tcp_connect, tcp_send_until, tcp_sink, wait_for_text};
use ccp_tests::{Agent, workspace_bin};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Bottleneck rate, bit/s.
const RATE_BPS: u64 = 100_000_000;
const ONE_WAY_MS: u64 = 15;
/// 75 KB in packets of 1500 bytes.
const BUFFER_PACKETS: u32 = 50;
const FLOW_SECS: f64 = 20.0;
const FROM_S: f64 = 8.0;
const TO_S: f64 = 20.0;
const GROUP: u64 = 7;
const PREFIX: &str = "emuvd";
/// One-way delay between every host and the JCCE service host (the simulator's default; the
/// paper gives none).
const JCCE_MS: u64 = 1;
const JCCE_PORT: u16 = 7700;

fn skip_reason() -> Option<String> {
    emu_support::skip_reason(&["ccp-agent", "ccp-udp", "jcce"], &["cubic"])
}

/// `jcce serve` on the service host, killed when dropped.
struct Service {
    child: Child,
    addr: String,
    key: PathBuf,
    log: PathBuf,
}

impl Service {
    fn start(tb: &Testbed, dir: &Path) -> Result<Service, String> {
        let bin = workspace_bin("jcce").map_err(|e| e.to_string())?;
        let key = dir.join("jointcloud.key");
        let ok = Command::new(&bin)
            .args(["keygen", "--out"])
            .arg(&key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        if !ok.success() {
            return Err("jcce keygen failed".into());
        }
        let addr = format!("{SERVICE_ADDR}:{JCCE_PORT}");
        let log = dir.join("jcce.log");
        let f = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let host = tb.service().ok_or("no service host")?;
        let child = tb
            .spawn(
                host,
                Command::new(&bin)
                    .args(["serve", "--listen", &addr, "--key-file"])
                    .arg(&key)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(f),
            )
            .map_err(|e| e.to_string())?;
        let s = Service {
            child,
            addr,
            key,
            log,
        };
        wait_for_text(&s.log, "jcce serving on", "jcce serve")?;
        Ok(s)
    }
}

/// The agent inside the first sender host (its unix socket is a file, which the senders'
/// `ccp-udp` reach from their own namespaces), so it reaches JCCE over the emulated network.
fn agent_in_sender(tb: &Testbed, dir: &Path, args: &[&str]) -> Result<Agent, String> {
    Agent::start_with(dir, args, |c| Ok(tb.spawn(&tb.senders()[0], c)?)).map_err(|e| e.to_string())
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one case measured.
struct Case {
    /// vivace-distributed, Mbit/s.
    vd: f64,
    /// Each kernel CUBIC flow, Mbit/s.
    cubic: Vec<f64>,
    /// Publications the CUBIC flows' receivers made, and whether JCCE answered them.
    published: u64,
    answered: bool,
}

/// One vivace-distributed flow against `n` kernel CUBIC flows whose receivers publish to the
/// group, all at once.
fn run_case(
    tb: &Testbed,
    agent: &Agent,
    service: &Service,
    dir: &Path,
    n: usize,
    port: u16,
) -> Result<Case, String> {
    let key_hex = std::fs::read_to_string(&service.key).map_err(|e| e.to_string())?;
    let key = jcce::Key::from_hex(key_hex.trim()).map_err(|e| e.to_string())?;
    // The receivers' client lives in the receiver host: its thread, and so its socket, are
    // made there.
    let cfg = jcce::ClientConfig::new(service.addr.clone(), key);
    let client = tb
        .receiver()
        .run_inside(|| {
            jcce::Client::start(cfg).map_err(|e| ccp_emu::EmuError::sys("JCCE client", e))
        })
        .map_err(|e| e.to_string())?;
    let mut counters = vec![];
    let mut readers = vec![];
    for i in 0..n {
        let p = port + i as u16;
        let (received, reader) = tcp_sink(tb, p)?;
        readers.push(reader);
        counters.push(received);
    }
    // The receivers' publisher: every 10 ms, each CUBIC flow's bytes read over the last 40 ms.
    let publisher =
        ReceiverPublisher::start(&client, GROUP, counters.clone()).map_err(|e| e.to_string())?;
    let udp = emu_support::start_udp(
        tb,
        agent,
        dir,
        0,
        &format!("vivace-distributed:group={GROUP}"),
        port + 50,
        FLOW_SECS,
    )?;
    let t0 = Instant::now();
    let mut senders = vec![];
    for i in 0..n {
        let p = port + i as u16;
        let stream = tcp_connect(tb, 1 + i, p, "cubic")?;
        senders.push(tcp_send_until(
            &stream,
            t0 + Duration::from_secs_f64(FLOW_SECS),
        )?);
    }
    let at = |s: f64| {
        std::thread::sleep(
            (t0 + Duration::from_secs_f64(s)).saturating_duration_since(Instant::now()),
        );
        counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect::<Vec<_>>()
    };
    let (a, b) = (at(FROM_S), at(TO_S));
    let cubic: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(a, b)| (b - a) as f64 * 8.0 / (TO_S - FROM_S) / 1e6)
        .collect();
    let vd = emu_support::udp_rate(udp, FROM_S, TO_S)?;
    for s in senders {
        join(s, "sender")?;
    }
    for r in readers {
        join(r, "reader")?;
    }
    let report = publisher.stop();
    Ok(Case {
        vd,
        cubic,
        published: report.published,
        answered: report.answered,
    })
}

#[test]
fn vivace_distributed_shares_with_the_kernels_cubic_through_the_real_jcce_service() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    cleanup::sweep(PREFIX).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tb = Testbed::new(TestbedConfig {
        name_prefix: PREFIX.into(),
        command_line: "tests/emu_vivace_distributed.rs".into(),
        service: Some(ServiceHostConfig {
            one_way: Duration::from_millis(JCCE_MS),
        }),
        ..TestbedConfig::dumbbell(
            3,
            RATE_BPS,
            BUFFER_PACKETS,
            Duration::from_millis(ONE_WAY_MS),
        )
    })
    .unwrap();
    let service = Service::start(&tb, dir.path()).unwrap();
    let key = service.key.to_string_lossy().to_string();
    let agent = agent_in_sender(
        &tb,
        dir.path(),
        &["--jcce", &service.addr, "--jcce-key-file", &key],
    )
    .unwrap();
    let mut out = vec![];
    for (i, n) in [1usize, 2].into_iter().enumerate() {
        let c = run_case(&tb, &agent, &service, dir.path(), n, 5600 + 100 * i as u16)
            .unwrap_or_else(|e| panic!("{n} cubic: {e}; agent log: {}", agent.logs()));
        let mean = c.cubic.iter().sum::<f64>() / n as f64;
        eprintln!(
            "vivace-distributed vs {n} kernel cubic, {FROM_S}-{TO_S} s: {:.2} vs {:.2?} Mbit/s (ratio {:.2}); receivers published {} times",
            c.vd,
            c.cubic,
            c.vd / mean,
            c.published
        );
        out.push((n, c));
        std::thread::sleep(Duration::from_millis(500));
    }
    let logs = agent.logs();
    agent.stop().unwrap();
    drop(service);
    drop(tb);
    // The flow used the service's aggregate, not the plain-Vivace fallback.
    assert!(logs.contains("JCCE aggregate in use"), "agent log: {logs}");
    for (n, c) in out {
        assert!(
            c.answered && c.published > 100,
            "{n} cubic: receivers not answered"
        );
        let mean = c.cubic.iter().sum::<f64>() / n as f64;
        let total = c.vd + c.cubic.iter().sum::<f64>();
        // Payload rate of 100 Mbit/s in 1500-byte packets: about 96.5 Mbit/s.
        assert!(total >= 0.8 * 96.5, "{n} cubic: total {total:.2} Mbit/s");
        // Every flow keeps a share: neither starves the other (the paper: a ratio of about 1;
        // with the CUBIC flows outside the group the simulator gives 4-140). Measured in three
        // real-time runs with JCCE on loopback: 0.20, 0.22, 0.21 (1 flow), 0.44, 0.34, 0.53 (2
        // flows); on the service host, 1 ms each way: 0.21 and 0.43; without the RTT gradient's
        // significance test (vivace-distributed's default since): 0.25 and 0.22. In the group
        // vivace-distributed is about as meek as vivace, as in the simulator (0.05-0.38), held
        // back by the RTT-gradient penalty of CUBIC's queue (with `latency-filter=0.025`: 0.49,
        // 0.85). The bound leaves room for run-to-run spread.
        assert!(c.vd >= 5.0, "{n} cubic: vivace-distributed {:.2}", c.vd);
        assert!(
            c.cubic.iter().all(|r| *r >= 5.0),
            "{n} cubic: {:.2?}",
            c.cubic
        );
        let ratio = c.vd / mean;
        assert!((0.1..=4.0).contains(&ratio), "{n} cubic: ratio {ratio:.2}");
    }
}
