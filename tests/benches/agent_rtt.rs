//! Agent round trip: a datapath on the engine sends a report, the agent's controller decides, the
//! update reaches the datapath; over the unix socket, with 1, 100, 1,000 and 10,000 flows served at
//! once, next to the raw unix datagram round trip measured in the same run.
//!
//! Run: `cargo bench -p ccp-tests --bench agent_rtt` (after `cargo build --release --bins`).
//! Each sample: one flow (cycling over all flows) reports a loss; the time until the agent's
//! UPDATE_FIELDS for that flow arrives is the round trip.

use ccp_engine::{DatapathOps, Engine, EngineConfig, FlowInfo, Primitives, WallClock};
use ccp_tests::Agent;
use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MSS: u32 = 1448;
const UPDATE_FIELDS: u16 = 3;
const CHANGE_PROG: u16 = 4;

struct Ops<'a> {
    sock: &'a UnixDatagram,
    agent: &'a Path,
}

impl DatapathOps for Ops<'_> {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        self.sock.send_to(msg, self.agent).map(|_| ())
    }
    fn set_cwnd(&mut self, _: u32, _: u32) {}
    fn set_rate_abs(&mut self, _: u32, _: u32) {}
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn big_buffers(s: &UnixDatagram) {
    let fd = s.as_fd();
    let _ = nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::RcvBufForce, &(32 << 20));
    let _ = nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::SndBufForce, &(32 << 20));
}

/// Raw unix datagram ping-pong against an echo thread.
fn raw_rtt(dir: &Path, samples: usize) -> Vec<f64> {
    let server_path = dir.join("echo.sock");
    let client_path = dir.join("echo-client.sock");
    let server = UnixDatagram::bind(&server_path).unwrap();
    let client = UnixDatagram::bind(&client_path).unwrap();
    let t = std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        for _ in 0..samples {
            let (n, from) = server.recv_from(&mut buf).unwrap();
            server
                .send_to(&buf[..n], from.as_pathname().unwrap())
                .unwrap();
        }
    });
    let msg = [7u8; 40];
    let mut buf = [0u8; 256];
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t0 = Instant::now();
        client.send_to(&msg, &server_path).unwrap();
        client.recv(&mut buf).unwrap();
        out.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    t.join().unwrap();
    out
}

fn header(buf: &[u8]) -> Option<(u16, u32)> {
    (buf.len() >= 8).then(|| {
        (
            u16::from_le_bytes([buf[0], buf[1]]),
            u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]),
        )
    })
}

fn agent_rtt(dir: &Path, agent_sock: &PathBuf, flows: usize, samples: usize) -> (Vec<f64>, f64) {
    let path = dir.join(format!("dp-{flows}.sock"));
    let sock = UnixDatagram::bind(&path).unwrap();
    big_buffers(&sock);
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut engine = Engine::new(WallClock::default(), EngineConfig::default());
    let mut buf = vec![0u8; 1 << 16];
    let mut ops = Ops {
        sock: &sock,
        agent: agent_sock,
    };
    engine.init(&mut ops).unwrap();
    // Wait for the agent's VERSION and program installs.
    while engine.agent_version().is_none() {
        let n = sock.recv(&mut buf).expect("agent answers READY");
        let _ = engine.read_msg(&mut ops, &buf[..n]);
    }
    // Create the flows in batches, draining the agent's program changes.
    let mut sids = Vec::with_capacity(flows);
    let mut programmed = 0usize;
    for chunk in 0..flows.div_ceil(200) {
        for i in 0..200.min(flows - chunk * 200) {
            let idx = chunk * 200 + i;
            let info = FlowInfo {
                init_cwnd: 10 * MSS,
                mss: MSS,
                src_ip: 0x0a00_0001,
                src_port: (10_000 + idx) as u32,
                dst_ip: 0x0a00_0002,
                dst_port: 5201,
                cong_alg: "reno".into(),
            };
            sids.push(engine.connection_start(&mut ops, info).unwrap());
        }
        while programmed < sids.len() {
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e) => panic!(
                    "agent installs programs: {e}: {}",
                    std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default()
                ),
            };
            if header(&buf[..n]).map(|h| h.0) == Some(CHANGE_PROG) {
                programmed += 1;
            }
            let _ = engine.read_msg(&mut ops, &buf[..n]);
        }
    }
    // Apply the staged program on every flow once.
    let idle = Primitives {
        snd_cwnd: 10 * MSS,
        ..Primitives::default()
    };
    for &sid in &sids {
        engine.invoke(&mut ops, sid, &idle).unwrap();
    }
    let loss = Primitives {
        bytes_acked: MSS,
        packets_acked: 1,
        lost_pkts_sample: 1,
        rtt_sample_us: 1000,
        snd_cwnd: 10 * MSS,
        bytes_in_flight: 5 * MSS,
        ..Primitives::default()
    };
    let mut out = Vec::with_capacity(samples);
    let t_all = Instant::now();
    for i in 0..samples {
        let sid = sids[i % sids.len()];
        let t0 = Instant::now();
        engine.invoke(&mut ops, sid, &loss).unwrap();
        loop {
            let n = sock.recv(&mut buf).expect("agent answers the report");
            let h = header(&buf[..n]);
            let _ = engine.read_msg(&mut ops, &buf[..n]);
            if h == Some((UPDATE_FIELDS, sid)) {
                break;
            }
        }
        out.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let rate = samples as f64 / t_all.elapsed().as_secs_f64();
    for sid in sids {
        let _ = engine.connection_free(&mut ops, sid);
    }
    let _ = std::fs::remove_file(&path);
    (out, rate)
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(
        dir.path(),
        &["--default-alg", "reno", "--log-level", "warn"],
    )
    .expect("start ccp-agent (cargo build --release --bins first)");
    let samples = 20_000;
    let mut raw = raw_rtt(dir.path(), samples);
    let (r50, r99) = (percentile(&mut raw, 0.5), percentile(&mut raw, 0.99));
    println!("raw unix datagram round trip: p50 {r50:.1} us  p99 {r99:.1} us  ({samples} samples)");
    println!(
        "{:>7} {:>10} {:>10} {:>14} {:>12}",
        "flows", "p50 us", "p99 us", "p99 / raw p99", "reports/s"
    );
    for flows in [1usize, 100, 1_000, 10_000] {
        let (mut v, rate) = agent_rtt(dir.path(), &agent.socket, flows, samples);
        let (p50, p99) = (percentile(&mut v, 0.5), percentile(&mut v, 0.99));
        println!(
            "{flows:>7} {p50:>10.1} {p99:>10.1} {:>14.2} {rate:>12.0}",
            p99 / r99
        );
    }
    let _ = agent.stop();
}
