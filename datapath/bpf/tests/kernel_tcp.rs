//! Kernel TCP under the agent through the BPF datapath, over the emulator (root only).
//!
//! One sender and one receiver host in their own network namespaces, a 40 Mbit/s bottleneck with
//! a 10 ms one-way delay and a 200-packet drop-tail queue. The same bulk transfer runs under the
//! kernel's own reno and cubic and under `ccp_bpf` with the agent running reno and then cubic;
//! then once more under the agent's cubic while the daemon is killed and restarted.
//!
//! What must hold:
//! * under ccp_bpf the kernel's window is the one the agent decided (the daemon's last written
//!   window and the socket's `snd_cwnd` agree, the BPF program applied the daemon's entry on
//!   almost every ACK, and the window moves), and the goodput is within 25% of the kernel's own
//!   algorithm on the same link (both fill the link; the ratio is printed);
//! * with the daemon killed the transfer goes on under the BPF Reno fallback (no daemon entry
//!   applied, goodput at least half the link's), and a restarted daemon takes the socket back.
//!
//! The registration uses a private BPF filesystem and its own name, and is removed (with the
//! namespaces and processes) on every exit path. Without root, /dev/net/tun, BTF or BPF
//! struct_ops the test prints why and passes.

use ccp_bpf::harness::{PrivateBpffs, count_bytes, set_congestion, transfer};
use ccp_bpf::{LoadOptions, load, read_counters};
use ccp_emu::testbed::RECEIVER_ADDR;
use ccp_emu::{Testbed, TestbedConfig, cleanup};
use ccp_tests::Agent;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RATE_BPS: u64 = 40_000_000;
const ONE_WAY_MS: u64 = 10;
const BUFFER_PACKETS: u32 = 200;
const FLOW_SECS: f64 = 4.0;
const WARMUP_SECS: f64 = 1.0;
const PREFIX: &str = "ccpbpf";

fn skip_reason() -> Option<String> {
    if !ccp_emu::sys::is_root() {
        return Some("needs root (BPF struct_ops, network namespaces, TUN devices)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("needs /dev/net/tun".into());
    }
    if let Err(e) = ccp_bpf::kernel_supported() {
        return Some(e.to_string());
    }
    None
}

/// The daemon, killed when dropped.
struct Daemon(Child);

impl Daemon {
    fn start(bpffs: &PrivateBpffs, agent: &Agent, dir: &Path, alg: &str, stats: &Path) -> Daemon {
        let child = Command::new(env!("CARGO_BIN_EXE_ccp-bpf"))
            .arg("--pin-dir")
            .arg(&bpffs.pins.dir)
            .arg("daemon")
            .arg("--agent-socket")
            .arg(&agent.socket)
            .arg("--socket")
            .arg(dir.join(format!("dp-{alg}.sock")))
            .args(["--alg", alg])
            .arg("--stats")
            .arg(stats)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("daemon-{alg}.log"))).unwrap())
            .spawn()
            .expect("spawn ccp-bpf daemon");
        // Running once it wrote its first stats.
        let t0 = Instant::now();
        while !stats.exists() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon(child)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stats(p: &Path) -> serde_json::Value {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// A connected sender socket with congestion control `cc`, and the receiver's byte counter.
fn connect(
    tb: &Testbed,
    cc: &str,
    port: u16,
) -> (
    TcpStream,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    std::thread::JoinHandle<()>,
) {
    let listener = tb
        .receiver()
        .run_inside(move || Ok(TcpListener::bind((RECEIVER_ADDR, port)).unwrap()))
        .unwrap();
    let (received, reader) = count_bytes(listener);
    let cc = cc.to_string();
    let s = tb.senders()[0]
        .run_inside(move || {
            let s = TcpStream::connect((RECEIVER_ADDR, port)).unwrap();
            set_congestion(&s, &cc).unwrap_or_else(|e| panic!("TCP_CONGESTION {cc}: {e}"));
            Ok(s)
        })
        .unwrap();
    (s, received, reader)
}

/// A kernel flow: goodput after the warm-up, bit/s.
fn kernel_flow(tb: &Testbed, cc: &str, port: u16) -> f64 {
    let (s, received, reader) = connect(tb, cc, port);
    let t = transfer(s, &received, FLOW_SECS, WARMUP_SECS, |_| {}).unwrap();
    let _ = reader.join();
    t.goodput_bps
}

/// Snapshots of the daemon's view of the one live socket: (written window, kernel window, who).
fn flow_snapshot(v: &serde_json::Value) -> Option<(u64, u64, String)> {
    let flows = v["flows"].as_object()?;
    let f = flows.values().next()?;
    Some((
        f["cwnd_bytes"].as_u64()?,
        f["kernel_cwnd_bytes"].as_u64()?,
        f["controller"].as_str()?.to_string(),
    ))
}

struct CcpRun {
    goodput_bps: f64,
    agree: usize,
    snapshots: usize,
    distinct: usize,
    applied: u64,
    fallback: u64,
}

fn ccp_flow(
    tb: &Testbed,
    name: &str,
    port: u16,
    stats_path: &Path,
    bpffs: &PrivateBpffs,
) -> CcpRun {
    let c0 = read_counters(&bpffs.pins).unwrap();
    let (s, received, reader) = connect(tb, name, port);
    let mut snaps = vec![];
    let t = transfer(s, &received, FLOW_SECS, WARMUP_SECS, |t| {
        if t >= WARMUP_SECS
            && let Some(x) = flow_snapshot(&stats(stats_path))
        {
            snaps.push(x);
        }
    })
    .unwrap();
    let _ = reader.join();
    let c1 = read_counters(&bpffs.pins).unwrap();
    // The stats file is rewritten every 200 ms; count each distinct snapshot once.
    snaps.dedup();
    let agree = snaps
        .iter()
        .filter(|(w, k, who)| who == "ccp-agent" && w.abs_diff(*k) <= 1500 + w / 20)
        .count();
    let mut windows: Vec<u64> = snaps.iter().map(|s| s.0).collect();
    windows.sort_unstable();
    windows.dedup();
    CcpRun {
        goodput_bps: t.goodput_bps,
        agree,
        snapshots: snaps.len(),
        distinct: windows.len(),
        applied: c1.applied - c0.applied,
        fallback: c1.fallback - c0.fallback,
    }
}

#[test]
fn kernel_tcp_under_the_agent_through_bpf() {
    if let Some(why) = skip_reason() {
        println!("skipping kernel_tcp: {why}");
        return;
    }
    let bpffs = PrivateBpffs::new("test").expect("mount a private bpffs");
    let name = format!("ccpt{}", std::process::id() % 100_000);
    match load(&LoadOptions {
        pins: bpffs.pins.clone(),
        name: name.clone(),
        fallback_ns: 100_000_000,
    }) {
        Ok(_) => {}
        Err(e) if e.to_string().contains("load the BPF programs") => {
            println!("skipping kernel_tcp: BPF struct_ops congestion control unavailable: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    }
    assert!(ccp_bpf::registered(&name), "{name} not registered");
    let _ = cleanup::sweep(PREFIX);
    let dir = tempfile::tempdir().unwrap();
    let t_all = Instant::now();
    {
        let tb = Testbed::new(TestbedConfig {
            name_prefix: PREFIX.into(),
            command_line: "datapath/bpf/tests/kernel_tcp.rs".into(),
            ..TestbedConfig::dumbbell(
                1,
                RATE_BPS,
                BUFFER_PACKETS,
                Duration::from_millis(ONE_WAY_MS),
            )
        })
        .expect("testbed");
        let agent_stats = dir.path().join("agent.json");
        let agent = Agent::start(dir.path(), &["--stats", agent_stats.to_str().unwrap()]).unwrap();

        let mut port = 5400;
        for alg in ["reno", "cubic"] {
            port += 1;
            let kernel = kernel_flow(&tb, alg, port);
            let stats_path = dir.path().join(format!("daemon-{alg}.json"));
            let daemon = Daemon::start(&bpffs, &agent, dir.path(), alg, &stats_path);
            port += 1;
            let r = ccp_flow(&tb, &name, port, &stats_path, &bpffs);
            drop(daemon);
            let ratio = r.goodput_bps / kernel;
            println!(
                "{alg}: kernel {:.1} Mbit/s, {name} under the agent {:.1} Mbit/s, ratio {ratio:.3}; \
                 window agreed in {}/{} snapshots, {} distinct windows; BPF applied the daemon's entry on {} ACKs, Reno fallback on {}",
                kernel / 1e6,
                r.goodput_bps / 1e6,
                r.agree,
                r.snapshots,
                r.distinct,
                r.applied,
                r.fallback
            );
            assert!(
                r.snapshots >= 5 && r.agree * 10 >= r.snapshots * 8,
                "{alg}: the socket's window was the agent's in only {}/{} snapshots",
                r.agree,
                r.snapshots
            );
            assert!(r.distinct >= 3, "{alg}: the agent's window never moved");
            assert!(
                r.applied > 0 && r.fallback * 20 <= r.applied,
                "{alg}: daemon entries applied on {} ACKs, fallback on {}",
                r.applied,
                r.fallback
            );
            assert!(
                (0.75..=1.25).contains(&ratio),
                "{alg}: goodput under the agent {:.1} Mbit/s vs the kernel's {:.1} Mbit/s (ratio {ratio:.3})",
                r.goodput_bps / 1e6,
                kernel / 1e6
            );
        }

        // Kill the daemon mid-transfer, restart it.
        let stats1 = dir.path().join("daemon-kill1.json");
        let stats2 = dir.path().join("daemon-kill2.json");
        let mut daemon = Some(Daemon::start(&bpffs, &agent, dir.path(), "cubic", &stats1));
        port += 1;
        let (s, received, reader) = connect(&tb, &name, port);
        let mut marks: Vec<(f64, ccp_bpf::BpfCounters)> = vec![];
        let mut restarted = None;
        let t = transfer(s, &received, 6.0, WARMUP_SECS, |t| {
            if t >= 2.0 && daemon.is_some() {
                let mut d = daemon.take().unwrap();
                let _ = d.0.kill();
                let _ = d.0.wait();
            }
            if t >= 4.0 && restarted.is_none() {
                let _ = std::fs::remove_file(&stats2);
                restarted = Some(Daemon::start(&bpffs, &agent, dir.path(), "cubic", &stats2));
            }
            marks.push((t, read_counters(&bpffs.pins).unwrap()));
        })
        .unwrap();
        let _ = reader.join();
        let at = |x: f64| {
            marks
                .iter()
                .find(|(t, _)| *t >= x)
                .map(|m| m.1)
                .unwrap_or(marks.last().unwrap().1)
        };
        let (dead0, dead1, back0, back1) = (at(2.3), at(3.9), at(4.6), at(6.0));
        let dead_goodput: f64 = {
            let p: Vec<f64> = t
                .periods
                .iter()
                .filter(|(s, _)| (2.3..3.9).contains(s))
                .map(|p| p.1)
                .collect();
            p.iter().sum::<f64>() / p.len().max(1) as f64
        };
        let back = stats(&stats2);
        let back_snap = flow_snapshot(&back);
        println!(
            "daemon killed at 2.0 s, restarted at 4.0 s: goodput with it dead {:.1} Mbit/s; \
             dead 2.3-3.9 s: applied {} fallback {}; back 4.6-6.0 s: applied {} fallback {}; restarted daemon: {:?}",
            dead_goodput / 1e6,
            dead1.applied - dead0.applied,
            dead1.fallback - dead0.fallback,
            back1.applied - back0.applied,
            back1.fallback - back0.fallback,
            back_snap
        );
        drop(restarted);
        assert_eq!(
            dead1.applied - dead0.applied,
            0,
            "daemon entries applied while the daemon was dead"
        );
        assert!(dead1.fallback > dead0.fallback, "no BPF fallback ACKs");
        assert!(
            dead_goodput >= 0.5 * RATE_BPS as f64 * 1448.0 / 1500.0,
            "the transfer stalled under the fallback: {:.1} Mbit/s",
            dead_goodput / 1e6
        );
        assert!(
            back1.applied > back0.applied
                && (back1.fallback - back0.fallback) * 20 <= back1.applied - back0.applied,
            "the restarted daemon did not take the socket back"
        );
        assert_eq!(back["flows_created"], 1, "{back}");
        assert!(
            back_snap.is_some_and(|s| s.2 == "ccp-agent"),
            "restarted daemon: {back}"
        );

        let logs = agent.logs();
        agent.stop().unwrap();
        let v = stats(&agent_stats);
        assert!(
            v["flows_per_algorithm"]["reno"].as_u64() >= Some(1),
            "{v}: {logs}"
        );
        assert!(
            v["flows_per_algorithm"]["cubic"].as_u64() >= Some(3),
            "{v}: {logs}"
        );
        drop(tb);
    }
    // Nothing left behind: namespaces, interfaces, the registration.
    drop(bpffs);
    let t0 = Instant::now();
    while ccp_bpf::registered(&name) {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "{name} still registered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    while !(cleanup::find_inits(PREFIX).is_empty() && cleanup::find_interfaces(PREFIX).is_empty()) {
        assert!(t0.elapsed() < Duration::from_secs(3), "testbed left behind");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("kernel_tcp: {:.1} s", t_all.elapsed().as_secs_f64());
}
