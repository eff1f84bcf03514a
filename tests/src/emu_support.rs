//! Helpers shared by the emulator tests (`tests/emu_*.rs`): skip checks, child processes, a
//! `ccp-udp` flow with the real agent, and kernel TCP flows between testbed hosts whose rates
//! are what the receiving application read.

use crate::{Agent, workspace_bin};
use ccp_emu::sys::set_congestion;
use ccp_emu::tcp::{self, SinkEnd};
use ccp_emu::testbed::RECEIVER_ADDR;
use ccp_emu::{EmuError, Testbed};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Why an emulator test cannot run here, if it cannot: it needs root, `/dev/net/tun`, the
/// workspace binaries `bins` and the kernel congestion controls `ccs`.
pub fn skip_reason(bins: &[&str], ccs: &[&str]) -> Option<String> {
    if !ccp_emu::sys::is_root() {
        return Some("needs root (creates network namespaces and TUN devices)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("needs /dev/net/tun".into());
    }
    for bin in bins {
        if let Err(e) = workspace_bin(bin) {
            return Some(format!("{e:#}"));
        }
    }
    for cc in ccs {
        let ok = TcpListener::bind("127.0.0.1:0").is_ok_and(|l| set_congestion(&l, cc).is_ok());
        if !ok {
            return Some(format!("the kernel has no {cc} congestion control"));
        }
    }
    None
}

/// Maps an I/O error of the system call `what` to the emulator's error.
pub fn sys_err(what: &str) -> impl FnOnce(std::io::Error) -> EmuError + '_ {
    move |e| EmuError::sys(what, e)
}

/// Waits for `child` to exit successfully; kills it after `timeout`.
pub fn wait_for(child: &mut Child, what: &str, timeout: Duration) -> Result<(), String> {
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

/// Waits (up to 10 s) until the file at `path` contains `text`: `what` has started.
pub fn wait_for_text(path: &Path, text: &str, what: &str) -> Result<(), String> {
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

/// A flow over ccp-udp from a sender host to the receiver: its receiver and sender processes
/// and the sender's JSON output.
pub struct UdpFlow {
    pub recv: Child,
    pub send: Child,
    pub json: PathBuf,
}

/// Starts `ccp-udp recv` on the receiver at `port` and, once it listens, `ccp-udp send` with
/// algorithm `alg` for `flow_secs` seconds from sender `host`, driven by `agent`, with a trace
/// every 100 ms. Files go to `dir`.
pub fn start_udp(
    tb: &Testbed,
    agent: &Agent,
    dir: &Path,
    host: usize,
    alg: &str,
    port: u16,
    flow_secs: f64,
) -> Result<UdpFlow, String> {
    start_udp_with(tb, agent, dir, host, alg, port, flow_secs, &[])
}

/// [`start_udp`] with extra arguments of `ccp-udp send` (e.g. `--backend engine`).
#[allow(clippy::too_many_arguments)]
pub fn start_udp_with(
    tb: &Testbed,
    agent: &Agent,
    dir: &Path,
    host: usize,
    alg: &str,
    port: u16,
    flow_secs: f64,
    send_args: &[&str],
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
                .args(send_args)
                .args(["--time", &format!("{}ms", (flow_secs * 1e3) as u64)])
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

/// Mbit/s a ccp-udp flow delivered between `from_s` and `to_s` (seconds after its start), from
/// its trace; waits for both processes to finish first.
pub fn udp_rate(mut f: UdpFlow, from_s: f64, to_s: f64) -> Result<f64, String> {
    wait_for(&mut f.send, "ccp-udp send", Duration::from_secs(30))?;
    wait_for(&mut f.recv, "ccp-udp recv", Duration::from_secs(10))?;
    let text = std::fs::read_to_string(&f.json).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    trace_rate(&v["flows"][0], from_s, to_s)
        .ok_or_else(|| format!("no trace in the window: {text:.300}"))
}

/// Mbit/s a flow delivered between `from_s` and `to_s` (seconds after its start), from the
/// `trace` of its entry in a ccp-udp or ccp-quic sender summary (`--trace-interval`): the
/// delivered bytes between the first and the last trace point in the window. `None` without
/// two distinct points there.
pub fn trace_rate(flow: &serde_json::Value, from_s: f64, to_s: f64) -> Option<f64> {
    let trace: Vec<(f64, f64)> = flow["trace"]
        .as_array()?
        .iter()
        .filter_map(|s| Some((s["t_s"].as_f64()?, s["delivered_bytes"].as_f64()?)))
        .filter(|s| (from_s..=to_s).contains(&s.0))
        .collect();
    match (trace.first(), trace.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => Some((b.1 - a.1) * 8.0 / (b.0 - a.0) / 1e6),
        _ => None,
    }
}

/// A kernel TCP receiver on the receiver host at `port`: a thread that accepts one connection
/// and reads it to the end, and the count of bytes it has read so far.
pub fn tcp_sink(
    tb: &Testbed,
    port: u16,
) -> Result<(Arc<AtomicU64>, JoinHandle<std::io::Result<SinkEnd>>), String> {
    let listener = tcp::listen(tb.receiver(), port).map_err(|e| e.to_string())?;
    let received = Arc::new(AtomicU64::new(0));
    let reader = tcp::sink(listener, received.clone(), None);
    Ok((received, reader))
}

/// A kernel TCP connection from sender `host` to the receiver's `port`, with the kernel's
/// congestion control `cc` set on its socket (`TCP_CONGESTION`).
pub fn tcp_connect(tb: &Testbed, host: usize, port: u16, cc: &str) -> Result<TcpStream, String> {
    tcp::connect(
        &tb.senders()[host],
        SocketAddrV4::new(RECEIVER_ADDR, port),
        cc,
    )
    .map_err(|e| e.to_string())
}

/// A thread that writes to `stream` as fast as it can until `end`, then shuts its write side;
/// it returns the bytes written.
pub fn tcp_send_until(
    stream: &TcpStream,
    end: Instant,
) -> Result<JoinHandle<std::io::Result<u64>>, String> {
    tcp::send(stream, end, None).map_err(|e| e.to_string())
}

/// Joins a flow's thread, naming it `what` in the error.
pub fn join<T>(h: JoinHandle<std::io::Result<T>>, what: &str) -> Result<(), String> {
    h.join()
        .map_err(|_| format!("{what} panicked"))?
        .map(|_| ())
        .map_err(|e| e.to_string())
}
