//! Loopback benchmark of the BPF datapath (root only): how many samples per second the ring
//! buffer carries at line rate, and the goodput of one bulk TCP flow under `ccp_bpf` with the
//! agent's cubic relative to the kernel's own cubic on the same loopback (CCP paper, §6: 41 vs
//! 43 Gbit/s with 10 ms reports on ccp-kernel).
//!
//! `cargo bench -p ccp-bpf --bench loopback [-- SECONDS RUNS]` (defaults 5 s, 3 runs per case,
//! alternating kernel and ccp_bpf flows). Cases: the agent's default report period (once per
//! smoothed RTT) and `--report 10ms`. On loopback (64 KiB MTU, segmentation offloads) one ACK
//! covers tens of kilobytes, so the sample rate is far below a 1500-byte link's at the same
//! goodput.

use ccp_bpf::harness::{PrivateBpffs, count_bytes, set_congestion, transfer};
use ccp_bpf::{LoadOptions, load, read_counters};
use ccp_tests::Agent;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WARMUP: f64 = 1.0;

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A connected pair on the host's loopback.
fn pair() -> (TcpListener, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (l, s)
}

fn flow(cc: &str, secs: f64) -> f64 {
    let (l, s) = pair();
    let (received, reader) = count_bytes(l);
    set_congestion(&s, cc).unwrap_or_else(|e| panic!("TCP_CONGESTION {cc}: {e}"));
    let t = transfer(s, &received, secs, WARMUP, |_| {}).unwrap();
    let _ = reader.join();
    t.goodput_bps
}

/// CPU time (user + system) of process `pid` so far, seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the 3rd field overall.
    let rest = stat.rsplit_once(')').map(|r| r.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    // SAFETY: plain sysconf.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

fn daemon_bin() -> std::path::PathBuf {
    ccp_tests::workspace_bin("ccp-bpf")
        .expect("build ccp-bpf first (cargo build --release -p ccp-bpf)")
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let secs: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let runs: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        println!("loopback bench skipped: needs root (BPF struct_ops)");
        return;
    }
    if let Err(e) = ccp_bpf::kernel_supported() {
        println!("loopback bench skipped: {e}");
        return;
    }
    let bpffs = PrivateBpffs::new("bench").expect("mount a private bpffs");
    let name = format!("ccpb{}", std::process::id() % 100_000);
    load(&LoadOptions {
        pins: bpffs.pins.clone(),
        name: name.clone(),
        fallback_ns: 100_000_000,
    })
    .expect("load");
    let dir = tempfile::tempdir().unwrap();
    println!(
        "loopback, one bulk flow, {secs} s per flow (goodput after {WARMUP} s), {runs} runs per case"
    );
    for (label, report) in [("per-RTT reports", None), ("10 ms reports", Some("10ms"))] {
        let adir = dir.path().join(label.replace(' ', "-"));
        std::fs::create_dir_all(&adir).unwrap();
        let mut agent_args = vec!["--default-alg", "cubic"];
        if let Some(r) = report {
            agent_args.extend(["--report", r]);
        }
        let agent = Agent::start(&adir, &agent_args).unwrap();
        let stats = adir.join("daemon.json");
        let daemon = Kill(
            Command::new(daemon_bin())
                .arg("--pin-dir")
                .arg(&bpffs.pins.dir)
                .arg("daemon")
                .arg("--agent-socket")
                .arg(&agent.socket)
                .arg("--socket")
                .arg(adir.join("dp.sock"))
                .args(["--alg", "cubic", "--log-level", "warn"])
                .arg("--stats")
                .arg(&stats)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(300));
        let (mut k, mut c, mut sps, mut drops, mut fallback) = (vec![], vec![], vec![], 0, 0);
        let (mut cpu_daemon, mut cpu_agent) = (vec![], vec![]);
        let (dpid, apid) = (daemon.0.id(), agent.child.id());
        for _ in 0..runs {
            k.push(flow("cubic", secs));
            let c0 = read_counters(&bpffs.pins).unwrap();
            let (d0, a0) = (cpu_s(dpid), cpu_s(apid));
            let t0 = Instant::now();
            c.push(flow(&name, secs));
            let dt = t0.elapsed().as_secs_f64();
            let c1 = read_counters(&bpffs.pins).unwrap();
            cpu_daemon.push((cpu_s(dpid) - d0) / dt);
            cpu_agent.push((cpu_s(apid) - a0) / dt);
            sps.push((c1.samples - c0.samples) as f64 / dt);
            drops += c1.dropped - c0.dropped;
            fallback += c1.fallback - c0.fallback;
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let ratios: Vec<f64> = k.iter().zip(&c).map(|(k, c)| c / k).collect();
        let show = |v: &[f64], scale: f64| {
            v.iter()
                .map(|x| format!("{:.1}", x / scale))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("{label}:");
        println!(
            "  kernel cubic      {:>6.1} Gbit/s  [{}]",
            mean(&k) / 1e9,
            show(&k, 1e9)
        );
        println!(
            "  {name:<12} cubic {:>6.1} Gbit/s  [{}]",
            mean(&c) / 1e9,
            show(&c, 1e9)
        );
        println!(
            "  ratio ccp_bpf/kernel {:.3}  [{}]",
            mean(&ratios),
            show(&ratios, 1.0)
        );
        println!(
            "  ring buffer: {:.0} samples/s [{}], dropped {drops}, fallback ACKs {fallback}",
            mean(&sps),
            show(&sps, 1.0)
        );
        println!(
            "  CPU during the ccp_bpf flows: daemon {:.0} % [{}], agent {:.0} % [{}] of one core",
            mean(&cpu_daemon) * 100.0,
            show(&cpu_daemon, 0.01),
            mean(&cpu_agent) * 100.0,
            show(&cpu_agent, 0.01)
        );
        let _ = agent.stop();
    }
}
