//! Helpers shared by the end-to-end tests and benchmarks: start the real `ccp-agent` binary,
//! and a minimal datapath on the project's engine that talks to it over a unix socket.

use anyhow::{Context, Result, bail};
use ccp_engine::{DatapathOps, Engine, EngineConfig, FlowInfo, Primitives, WallClock};
use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod emu_support;
pub mod vivace_link;

/// Runs the calling test alone among the tests of its file that call this too (the guard holds
/// a lock until it is dropped; a test that panicked while holding it does not block the others).
/// For tests whose measurements or deadlines would suffer from sharing the machine's cores with
/// each other, or that share one testbed name prefix.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The address a receiver logged as "listening on ADDR", from finished lines only: the log may be
/// read while the receiver is half-way through that line.
pub fn listening_addr(log: &str) -> Option<&str> {
    log.split_inclusive('\n')
        .filter_map(|l| l.strip_suffix('\n'))
        .find_map(|l| l.strip_prefix("listening on "))
        .map(str::trim)
}

/// Path of a binary of this workspace, built in the same profile as the running test.
pub fn workspace_bin(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // target/<profile>/deps/<test-binary>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("cannot locate the target directory")?;
    let p = profile_dir.join(name);
    if !p.exists() {
        bail!(
            "{} is not built; run `cargo build --workspace --bins` with the same profile first (make test does)",
            p.display()
        );
    }
    Ok(p)
}

/// A running `ccp-agent`, killed when dropped.
pub struct Agent {
    pub child: Child,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Agent {
    /// Start the agent with a unix socket in `dir` and extra arguments; logs (JSON) go to
    /// `dir/agent.log`. Waits until the socket exists.
    pub fn start(dir: &Path, args: &[&str]) -> Result<Agent> {
        Agent::start_with(dir, args, |c| Ok(c.spawn()?))
    }

    /// [`Agent::start`], with `spawn` starting the prepared command (e.g. inside an emulated
    /// host: the socket is a file, reachable from every network namespace).
    pub fn start_with(
        dir: &Path,
        args: &[&str],
        spawn: impl FnOnce(&mut Command) -> Result<Child>,
    ) -> Result<Agent> {
        let socket = dir.join("agent.sock");
        let log = dir.join("agent.log");
        let logf = std::fs::File::create(&log)?;
        let child = spawn(
            Command::new(workspace_bin("ccp-agent")?)
                .arg("--socket")
                .arg(&socket)
                .args(["--log-format", "json"])
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(logf),
        )?;
        let mut a = Agent { child, socket, log };
        let t0 = Instant::now();
        while !a.socket.exists() {
            if let Some(status) = a.child.try_wait()? {
                bail!("agent exited early ({status}): {}", a.logs());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("agent socket did not appear: {}", a.logs());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(a)
    }

    /// The agent's log so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The JSON log records whose message is `msg`.
    pub fn events(&self, msg: &str) -> Vec<serde_json::Value> {
        self.logs()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("message").and_then(|m| m.as_str()) == Some(msg))
            .collect()
    }

    /// Send a signal to the agent.
    pub fn signal(&self, sig: nix::sys::signal::Signal) -> Result<()> {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig)?;
        Ok(())
    }

    /// Stop with SIGTERM and wait.
    pub fn stop(mut self) -> Result<std::process::ExitStatus> {
        self.signal(nix::sys::signal::Signal::SIGTERM)?;
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait()? {
                return Ok(s);
            }
            if t0.elapsed() > Duration::from_secs(5) {
                self.child.kill()?;
                bail!("agent did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the datapath side observed.
#[derive(Default)]
pub struct Observed {
    /// Every set_cwnd call per flow, in order.
    pub cwnd: HashMap<u32, Vec<u32>>,
    /// Every set_rate_abs call per flow, in order.
    pub rate: HashMap<u32, Vec<u32>>,
    /// Messages sent to the agent.
    pub sent: u64,
}

struct Ops<'a> {
    sock: &'a UnixDatagram,
    agent: &'a Path,
    seen: &'a mut Observed,
}

impl DatapathOps for Ops<'_> {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        self.seen.sent += 1;
        self.sock.send_to(msg, self.agent).map(|_| ())
    }
    fn set_cwnd(&mut self, sid: u32, cwnd: u32) {
        self.seen.cwnd.entry(sid).or_default().push(cwnd);
    }
    fn set_rate_abs(&mut self, sid: u32, rate: u32) {
        self.seen.rate.entry(sid).or_default().push(rate);
    }
}

/// A datapath on the project's engine, over a unix socket, driven by the test.
pub struct TestDatapath {
    pub sock: UnixDatagram,
    pub path: PathBuf,
    pub agent: PathBuf,
    pub engine: Engine<WallClock>,
    pub seen: Observed,
    buf: Vec<u8>,
}

impl TestDatapath {
    /// Bind `dir/name.sock` and announce the datapath to the agent at `agent`.
    pub fn connect(dir: &Path, name: &str, agent: &Path) -> Result<TestDatapath> {
        let path = dir.join(format!("{name}.sock"));
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path)?;
        sock.set_nonblocking(true)?;
        let mut dp = TestDatapath {
            sock,
            path,
            agent: agent.to_path_buf(),
            engine: Engine::new(WallClock::default(), EngineConfig::default()),
            seen: Observed::default(),
            buf: vec![0u8; 1 << 16],
        };
        let (engine, mut ops) = dp.split();
        engine.init(&mut ops)?;
        Ok(dp)
    }

    /// Announce the (possibly replaced) engine to the agent again.
    pub fn reinit(&mut self) -> Result<()> {
        let (engine, mut ops) = self.split();
        engine.init(&mut ops)?;
        Ok(())
    }

    fn split(&mut self) -> (&mut Engine<WallClock>, Ops<'_>) {
        (
            &mut self.engine,
            Ops {
                sock: &self.sock,
                agent: &self.agent,
                seen: &mut self.seen,
            },
        )
    }

    /// Start a flow; returns its socket id.
    pub fn start_flow(&mut self, info: FlowInfo) -> Result<u32> {
        let (engine, mut ops) = self.split();
        Ok(engine.connection_start(&mut ops, info)?)
    }

    /// End a flow.
    pub fn end_flow(&mut self, sid: u32) -> Result<()> {
        let (engine, mut ops) = self.split();
        Ok(engine.connection_free(&mut ops, sid)?)
    }

    /// One ACK (or timer tick) of flow `sid`.
    pub fn invoke(&mut self, sid: u32, p: &Primitives) -> Result<(), ccp_engine::Error> {
        let (engine, mut ops) = self.split();
        engine.invoke(&mut ops, sid, p)
    }

    /// Feed every pending agent message to the engine; returns how many were read.
    pub fn poll(&mut self) -> usize {
        let mut n = 0;
        loop {
            let len = match self.sock.recv(&mut self.buf) {
                Ok(len) => len,
                Err(_) => return n,
            };
            n += 1;
            let msg = self.buf[..len].to_vec();
            let (engine, mut ops) = self.split();
            let _ = engine.read_msg(&mut ops, &msg);
        }
    }

    /// Poll until `cond` holds or `timeout` passes.
    pub fn poll_until(&mut self, timeout: Duration, mut cond: impl FnMut(&Self) -> bool) -> bool {
        let t0 = Instant::now();
        loop {
            self.poll();
            if cond(self) {
                return true;
            }
            if t0.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for TestDatapath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Primitives of one ACK carrying `acked` bytes with an RTT sample, the flow's current window and
/// `inflight` bytes.
pub fn ack(acked: u32, rtt_us: u64, cwnd: u32, inflight: u32) -> Primitives {
    Primitives {
        bytes_acked: acked,
        packets_acked: acked / 1448,
        rtt_sample_us: rtt_us,
        bytes_in_flight: inflight,
        packets_in_flight: inflight / 1448,
        snd_cwnd: cwnd,
        ..Primitives::default()
    }
}

/// A running `ccp-udp recv`, killed when dropped.
pub struct UdpReceiver {
    pub child: Child,
    pub addr: std::net::SocketAddr,
    pub json: PathBuf,
    pub stderr: PathBuf,
}

impl UdpReceiver {
    /// Start a receiver on an ephemeral loopback port that exits after `flows` flows and writes
    /// its summary to `dir/<name>.json`.
    pub fn start(dir: &Path, name: &str, flows: usize, extra: &[&str]) -> Result<UdpReceiver> {
        let json = dir.join(format!("{name}.json"));
        let stderr = dir.join(format!("{name}.err"));
        let child = Command::new(workspace_bin("ccp-udp")?)
            .args([
                "recv",
                "--listen",
                "127.0.0.1:0",
                "--flows",
                &flows.to_string(),
            ])
            .arg("--json")
            .arg(&json)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()?;
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(&stderr).unwrap_or_default();
            if let Some(addr) = listening_addr(&text) {
                let addr = addr.parse()?;
                return Ok(UdpReceiver {
                    child,
                    addr,
                    json,
                    stderr,
                });
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("receiver did not start: {text}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait for the receiver to exit (at most `timeout`) and return its summary JSON.
    pub fn finish(mut self, timeout: Duration) -> Result<serde_json::Value> {
        let t0 = Instant::now();
        while self.child.try_wait()?.is_none() {
            if t0.elapsed() > timeout {
                bail!(
                    "receiver did not finish in {timeout:?}: {}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(&self.json).with_context(|| {
            format!(
                "no summary: {}",
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            )
        })?;
        Ok(serde_json::from_str(&text)?)
    }
}

impl Drop for UdpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `ccp-udp send` with `args` to completion (at most `timeout`); returns (success, stdout,
/// stderr, summary JSON if `--json` was given and written).
pub fn udp_send(args: &[&str], timeout: Duration) -> Result<(bool, String, String)> {
    let mut child = Command::new(workspace_bin("ccp-udp")?)
        .arg("send")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let t0 = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let out = child.wait_with_output()?;
            bail!(
                "sender did not finish in {timeout:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
