//! Vivace-Distributed against the kernel's CUBIC on the emulator (`ccp-emu`), the paper's TCP
//! friendliness setting (seeds/000 §7.6, Fig. 11) with the real JCCE service: one
//! vivace-distributed flow (`ccp-udp` with the real `ccp-agent`, `--jcce`) and 1 or 2 kernel
//! CUBIC flows (`TCP_CONGESTION` on their sockets), each from its own sender host, across one
//! bottleneck of 100 Mbit/s, 15 ms each way (30 ms base RTT) and a 75 KB drop-tail buffer (50
//! packets of 1500 bytes). `jcce serve` runs on the host side; the agent reaches it over
//! loopback, and so do the CUBIC flows' receivers, which publish what they read over the last
//! 40 ms every 10 ms to the same group (the paper's receivers publish "the throughput in this
//! interval", §3). Rates are delivered bytes over 8–20 s of each 20 s case (ccp-udp: its
//! trace; kernel: what the receiving application read). About 50 s in all.
//!
//! Needs root and `/dev/net/tun` (namespaces, TUN devices) and the release binaries
//! (`cargo build --release --bins`); without them the test says why and skips. The testbed's
//! drop removes every namespace, device and process; the service and the agent are this
//! test's children and are stopped with it.

use ccp_algorithms::aggregator::jcce;
use ccp_emu::sys::set_congestion;
use ccp_emu::testbed::RECEIVER_ADDR;
use ccp_emu::{DelayConfig, EmuError, LinkConfig, QueueConfig, Testbed, TestbedConfig, cleanup};
use ccp_tests::{Agent, workspace_bin};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

fn skip_reason() -> Option<String> {
    if !ccp_emu::sys::is_root() {
        return Some("needs root (creates network namespaces and TUN devices)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("needs /dev/net/tun".into());
    }
    for bin in ["ccp-agent", "ccp-udp", "jcce"] {
        if let Err(e) = workspace_bin(bin) {
            return Some(format!("{e:#}"));
        }
    }
    let ok = TcpListener::bind("127.0.0.1:0").is_ok_and(|l| set_congestion(&l, "cubic").is_ok());
    if !ok {
        return Some("the kernel has no cubic congestion control".into());
    }
    None
}

fn sys_err(what: &str) -> impl FnOnce(std::io::Error) -> EmuError + '_ {
    move |e| EmuError::sys(what, e)
}

fn wait_for(child: &mut Child, what: &str, timeout: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => return Err(format!("{what} exited with {s}")),
            Ok(None) if t0.elapsed() > timeout => {
                let _ = child.kill();
                return Err(format!("{what} did not finish"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}

fn wait_for_text(path: &Path, text: &str, what: &str) -> Result<(), String> {
    let t0 = Instant::now();
    while !std::fs::read_to_string(path)
        .unwrap_or_default()
        .contains(text)
    {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!("{what} did not start"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// `jcce serve` on the host side, killed when dropped.
struct Service {
    child: Child,
    addr: String,
    key: PathBuf,
    log: PathBuf,
}

impl Service {
    fn start(dir: &Path) -> Result<Service, String> {
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
        // A free UDP port on loopback.
        let port = UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let addr = format!("127.0.0.1:{port}");
        let log = dir.join("jcce.log");
        let f = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = Command::new(&bin)
            .args(["serve", "--listen", &addr, "--key-file"])
            .arg(&key)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(f)
            .spawn()
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

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The vivace-distributed flow over ccp-udp from sender `host` to `port`.
struct UdpFlow {
    recv: Child,
    send: Child,
    json: PathBuf,
}

fn start_udp(
    tb: &Testbed,
    agent: &Agent,
    dir: &Path,
    host: usize,
    alg: &str,
    port: u16,
) -> Result<UdpFlow, String> {
    let udp = workspace_bin("ccp-udp").map_err(|e| e.to_string())?;
    let to = format!("{RECEIVER_ADDR}:{port}");
    let recv_err = dir.join(format!("recv-{port}.err"));
    let f = std::fs::File::create(&recv_err).map_err(|e| e.to_string())?;
    let recv = tb
        .spawn(
            tb.receiver(),
            Command::new(&udp)
                .args(["recv", "--listen", &to, "--flows", "1"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(f),
        )
        .map_err(|e| e.to_string())?;
    wait_for_text(&recv_err, "listening on ", "ccp-udp recv")?;
    let json = dir.join(format!("send-{port}.json"));
    let send = tb
        .spawn(
            &tb.senders()[host],
            Command::new(&udp)
                .args(["send", "--to", &to, "--alg", alg])
                .args(["--time", &format!("{}ms", (FLOW_SECS * 1e3) as u64)])
                .arg("--agent")
                .arg(&agent.socket)
                .arg("--socket")
                .arg(dir.join(format!("dp-{port}.sock")))
                .args(["--trace-interval", "100ms", "--log-level", "warn", "--json"])
                .arg(&json)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .map_err(|e| e.to_string())?;
    Ok(UdpFlow { recv, send, json })
}

/// Mbit/s a ccp-udp flow delivered in the window, from its trace.
fn udp_rate(mut f: UdpFlow) -> Result<f64, String> {
    wait_for(&mut f.send, "ccp-udp send", Duration::from_secs(30))?;
    wait_for(&mut f.recv, "ccp-udp recv", Duration::from_secs(10))?;
    let text = std::fs::read_to_string(&f.json).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let trace: Vec<(f64, f64)> = v["flows"][0]["trace"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| Some((s["t_s"].as_f64()?, s["delivered_bytes"].as_f64()?)))
                .filter(|s| (FROM_S..=TO_S).contains(&s.0))
                .collect()
        })
        .unwrap_or_default();
    match (trace.first(), trace.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => Ok((b.1 - a.1) * 8.0 / (b.0 - a.0) / 1e6),
        _ => Err(format!("no trace in the window: {text:.300}")),
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
    let client = jcce::Client::start(jcce::ClientConfig::new(service.addr.clone(), key))
        .map_err(|e| e.to_string())?;
    let mut counters = vec![];
    let mut readers = vec![];
    for i in 0..n {
        let p = port + i as u16;
        let listener = tb
            .receiver()
            .run_inside(move || TcpListener::bind((RECEIVER_ADDR, p)).map_err(sys_err("bind")))
            .map_err(|e| e.to_string())?;
        let received = Arc::new(AtomicU64::new(0));
        let counter = received.clone();
        readers.push(std::thread::spawn(move || -> std::io::Result<()> {
            let (mut s, _) = listener.accept()?;
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match s.read(&mut buf)? {
                    0 => return Ok(()),
                    n => {
                        counter.fetch_add(n as u64, Ordering::Relaxed);
                    }
                }
            }
        }));
        counters.push(received);
    }
    // The receivers' publisher: every 10 ms, each CUBIC flow's bytes read over the last 40 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let members: Vec<jcce::Member> = (0..n).map(|_| client.member(GROUP)).collect();
    let publisher = {
        let (stop, counters) = (stop.clone(), counters.clone());
        std::thread::spawn(move || -> (u64, bool) {
            let mut history: Vec<std::collections::VecDeque<(Instant, u64)>> =
                vec![Default::default(); counters.len()];
            let (mut mi, mut published) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                let now = Instant::now();
                mi += 1;
                for (i, c) in counters.iter().enumerate() {
                    let h = &mut history[i];
                    h.push_back((now, c.load(Ordering::Relaxed)));
                    while h.len() > 1 && now.duration_since(h[0].0) > Duration::from_millis(40) {
                        h.pop_front();
                    }
                    let (t0, b0) = h[0];
                    let dt = now.duration_since(t0).as_secs_f64();
                    if dt > 0.0 {
                        let bps = (h[h.len() - 1].1 - b0) as f64 / dt;
                        members[i].publish(mi, bps as u64);
                        published += 1;
                    }
                }
            }
            let answered = members.iter().all(|m| m.latest().is_some());
            (published, answered)
        })
    };
    let udp = start_udp(
        tb,
        agent,
        dir,
        0,
        &format!("vivace-distributed:group={GROUP}"),
        port + 50,
    )?;
    let t0 = Instant::now();
    let mut senders = vec![];
    for i in 0..n {
        let p = port + i as u16;
        let stream = tb.senders()[1 + i]
            .run_inside(move || {
                let s = TcpStream::connect((RECEIVER_ADDR, p)).map_err(sys_err("connect"))?;
                set_congestion(&s, "cubic").map_err(sys_err("setsockopt(TCP_CONGESTION)"))?;
                Ok(s)
            })
            .map_err(|e| e.to_string())?;
        let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
        senders.push(std::thread::spawn(move || -> std::io::Result<()> {
            let chunk = vec![0x5au8; 1 << 16];
            let end = t0 + Duration::from_secs_f64(FLOW_SECS);
            while Instant::now() < end {
                writer.write_all(&chunk)?;
            }
            writer.shutdown(Shutdown::Write)
        }));
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
    let vd = udp_rate(udp)?;
    for s in senders {
        s.join()
            .map_err(|_| "sender panicked".to_string())?
            .map_err(|e| e.to_string())?;
    }
    for r in readers {
        r.join()
            .map_err(|_| "reader panicked".to_string())?
            .map_err(|e| e.to_string())?;
    }
    stop.store(true, Ordering::Relaxed);
    let (published, answered) = publisher
        .join()
        .map_err(|_| "publisher panicked".to_string())?;
    Ok(Case {
        vd,
        cubic,
        published,
        answered,
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
        senders: 3,
        uplink: Some(
            LinkConfig::rate(RATE_BPS / 8)
                .with_queue(QueueConfig::droptail_packets(BUFFER_PACKETS)),
        ),
        downlink: None,
        delay: DelayConfig::fixed(Duration::from_millis(ONE_WAY_MS)),
        name_prefix: PREFIX.into(),
        command_line: "tests/emu_vivace_distributed.rs".into(),
        ..Default::default()
    })
    .unwrap();
    let service = Service::start(dir.path()).unwrap();
    let key = service.key.to_string_lossy().to_string();
    let agent = Agent::start(
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
        // with the CUBIC flows outside the group the simulator gives 12-184). Measured in two
        // real-time runs: 0.20, 0.22 (1 flow), 0.44, 0.34 (2 flows): in the group
        // vivace-distributed is about as meek as vivace, as in the simulator (0.05-0.38). The
        // bound leaves room for run-to-run spread.
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
