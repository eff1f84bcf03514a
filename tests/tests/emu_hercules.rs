//! Hercules against the kernel's own Cubic and BBR on the emulator (`ccp-emu`), the paper's
//! Fig. 12 setting scaled to a 30-s run: two Hercules flows requiring 100 and 5 Mbit/s (`ccp-udp`
//! with the real `ccp-agent`) and one kernel TCP flow (`TCP_CONGESTION` set on its socket), all
//! at once, each from its own sender host, across one emulated bottleneck of 95 Mbit/s with
//! 10 ms each way (20 ms base RTT) and a 1-BDP drop-tail buffer (158 packets of 1500 bytes).
//! Rates are the flows' delivered bytes over 10–28 s after the start (ccp-udp: its trace;
//! kernel: what the receiving application read). About 65 s in all (two cases in real time).
//!
//! Needs root and `/dev/net/tun` (namespaces, TUN devices) and the release binaries
//! (`cargo build --release --bins`); without them the test says why and skips. The testbed's
//! drop removes every namespace, device and process.

use ccp_emu::sys::set_congestion;
use ccp_emu::testbed::RECEIVER_ADDR;
use ccp_emu::{DelayConfig, EmuError, LinkConfig, QueueConfig, Testbed, TestbedConfig, cleanup};
use ccp_tests::{Agent, workspace_bin};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Bottleneck rate, bit/s.
const RATE_BPS: u64 = 95_000_000;
const ONE_WAY_MS: u64 = 10;
/// 1 BDP: 95 Mbit/s × 20 ms = 237.5 KB ≈ 158 packets of 1500 bytes.
const BUFFER_PACKETS: u32 = 158;
const FLOW_SECS: f64 = 30.0;
const FROM_S: f64 = 10.0;
const TO_S: f64 = 28.0;
const PREFIX: &str = "emuhc";

fn skip_reason() -> Option<String> {
    if !ccp_emu::sys::is_root() {
        return Some("needs root (creates network namespaces and TUN devices)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("needs /dev/net/tun".into());
    }
    for bin in ["ccp-agent", "ccp-udp"] {
        if let Err(e) = workspace_bin(bin) {
            return Some(format!("{e:#}"));
        }
    }
    for cc in ["cubic", "bbr"] {
        let ok = TcpListener::bind("127.0.0.1:0").is_ok_and(|l| set_congestion(&l, cc).is_ok());
        if !ok {
            return Some(format!("the kernel has no {cc} congestion control"));
        }
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

/// A Hercules flow over ccp-udp from sender `host` to `port`: its receiver and sender processes
/// and the sender's JSON output.
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
    let t0 = Instant::now();
    while !std::fs::read_to_string(&recv_err)
        .unwrap_or_default()
        .contains("listening on ")
    {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err("ccp-udp recv did not start".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
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

/// The rates (Mbit/s) of Hercules 100, Hercules 5 and the kernel's `cc`, all at once.
fn run_case(
    tb: &Testbed,
    agent: &Agent,
    dir: &Path,
    cc: &'static str,
    port: u16,
) -> Result<[f64; 3], String> {
    let listener = tb
        .receiver()
        .run_inside(move || TcpListener::bind((RECEIVER_ADDR, port)).map_err(sys_err("bind")))
        .map_err(|e| e.to_string())?;
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
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
    });
    let big = start_udp(tb, agent, dir, 0, "hercules:min=100mbit", port + 1)?;
    let small = start_udp(tb, agent, dir, 1, "hercules:min=5mbit", port + 2)?;
    let stream = tb.senders()[2]
        .run_inside(move || {
            let s = TcpStream::connect((RECEIVER_ADDR, port)).map_err(sys_err("connect"))?;
            set_congestion(&s, cc).map_err(sys_err("setsockopt(TCP_CONGESTION)"))?;
            Ok(s)
        })
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        let chunk = vec![0x5au8; 1 << 16];
        let end = t0 + Duration::from_secs_f64(FLOW_SECS);
        while Instant::now() < end {
            writer.write_all(&chunk)?;
        }
        writer.shutdown(Shutdown::Write)
    });
    let at = |s: f64| {
        std::thread::sleep(
            (t0 + Duration::from_secs_f64(s)).saturating_duration_since(Instant::now()),
        );
        received.load(Ordering::Relaxed)
    };
    let (a, b) = (at(FROM_S), at(TO_S));
    let kernel = (b - a) as f64 * 8.0 / (TO_S - FROM_S) / 1e6;
    let big = udp_rate(big)?;
    let small = udp_rate(small)?;
    sender
        .join()
        .map_err(|_| "sender panicked".to_string())?
        .map_err(|e| e.to_string())?;
    reader
        .join()
        .map_err(|_| "reader panicked".to_string())?
        .map_err(|e| e.to_string())?;
    Ok([big, small, kernel])
}

#[test]
fn hercules_shares_with_the_kernels_cubic_and_bbr_on_the_emulator() {
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
        command_line: "tests/emu_hercules.rs".into(),
        ..Default::default()
    })
    .unwrap();
    let agent = Agent::start(dir.path(), &[]).unwrap();
    let mut out = vec![];
    for (i, cc) in ["cubic", "bbr"].into_iter().enumerate() {
        let x = run_case(&tb, &agent, dir.path(), cc, 5400 + 10 * i as u16)
            .unwrap_or_else(|e| panic!("{cc}: {e}; agent log: {}", agent.logs()));
        eprintln!(
            "hercules 100, hercules 5, kernel {cc}, {FROM_S}-{TO_S} s: {x:.2?} Mbit/s (ratio {:.2})",
            x[0] / x[2]
        );
        out.push((cc, x));
        std::thread::sleep(Duration::from_millis(500));
    }
    agent.stop().unwrap();
    drop(tb);
    for (cc, x) in out {
        let total = x.iter().sum::<f64>();
        // Payload rate of 95 Mbit/s in 1500-byte packets: about 91.7 Mbit/s.
        assert!(total >= 0.85 * 91.7, "{cc}: total {total:.2} Mbit/s");
        // Every flow keeps a share (none starves).
        assert!(x.iter().all(|r| *r >= 5.0), "{cc}: {x:.2?}");
        // Same requirement, similar rate (the paper's Fig. 12). Measured: 35.75 against the
        // kernel cubic's 42.11 Mbit/s (0.85), 33.68 against the kernel bbr's 47.86 (0.70); one
        // real-time run each, so the bound leaves room for run-to-run spread.
        let ratio = x[0] / x[2];
        assert!((0.6..=1.67).contains(&ratio), "{cc}: ratio {ratio:.2}");
    }
}
