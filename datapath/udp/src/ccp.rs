//! The CCP integration: every flow of the transport is a libccp connection driven by `ccp-agent`,
//! with a built-in Reno that takes over while the agent is away.
//!
//! One [`ControlPlane`] per process owns the datapath side of libccp: either the real C libccp
//! (the `libccp` crate, the same code ccp-kernel embeds; the default) or the project's engine
//! (`--backend engine`). It binds a unix datagram socket, announces the datapath to the agent, and
//! runs a thread that feeds the agent's messages into libccp. Each flow gets a
//! [`FlowController`] that turns the transport's per-ACK samples into libccp primitives and
//! invokes the installed datapath program on every ACK and on ticks. The engine backend also
//! hands the program the relative one-way delay the sender measures with every RTT sample
//! (the extended primitive `Flow.owd_us`); the C libccp has no such primitive, so under it a
//! program's `owd_us` register keeps its "not measured" default.
//!
//! # Fallback
//! The agent answers every report (see the adapter in `ccp-algorithms`). When the agent cannot
//! be reached (no socket, nobody bound to it), or it has left messages unanswered for longer than
//! the silence timeout (four smoothed RTTs, at least `silence_timeout` and at most 1 s), every flow under the
//! agent switches to [`BuiltinReno`], resuming from its current window, and the switch is
//! logged. A message that finds a live agent's queue full for the 5-ms write timeout is dropped
//! and counted (`send_failures`), not taken for the agent's loss: a loaded machine that starves
//! the agent for a moment must not end its control of every flow. Every
//! `probe_interval` the control plane checks whether an agent socket exists again; if so it
//! announces itself and re-creates the waiting flows at the agent. A flow returns to the agent
//! when the agent's datapath program first runs on it (the agent installed it and set its
//! window); until then the built-in Reno keeps it going. ccp-kernel has no such fallback.
//!
//! The C libccp is not thread-safe, so the backend lives behind one mutex shared by the flow
//! threads and the IPC thread.

use crate::cc::{AckSample, FlowController, FlowMeta};
use crate::reno::BuiltinReno;
use ccp_engine::{
    DatapathOps, Engine, EngineConfig, ExtPrimitives, FlowInfo, Primitives, WallClock,
};
use ccp_files::socket_path::{SocketKind, SocketPathClaim, SocketPathError};
use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// Which libccp implementation runs the datapath programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The C libccp through the `libccp` crate (wall clock, at most 1024 connections).
    Libccp,
    /// The project's own engine (`ccp-engine`).
    Engine,
}

impl std::str::FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "libccp" => Ok(BackendKind::Libccp),
            "engine" => Ok(BackendKind::Engine),
            _ => Err(format!("unknown backend {s:?}: expected libccp or engine")),
        }
    }
}

/// How to reach the agent, and the fallback's timing.
#[derive(Clone, Debug)]
pub struct CcpConfig {
    /// The agent's unix socket.
    pub agent_socket: PathBuf,
    /// This datapath's socket; default: `ccp-udp-<pid>.sock` beside the agent's.
    pub local_socket: Option<PathBuf>,
    pub backend: BackendKind,
    /// Shortest silence that counts as the agent being gone.
    pub silence_timeout: Duration,
    /// How often to look for a returning agent.
    pub probe_interval: Duration,
}

impl Default for CcpConfig {
    fn default() -> Self {
        CcpConfig {
            agent_socket: PathBuf::from("/tmp/ccp/agent.sock"),
            local_socket: None,
            backend: BackendKind::Libccp,
            silence_timeout: Duration::from_millis(50),
            probe_interval: Duration::from_millis(200),
        }
    }
}

/// Errors starting the control plane.
#[derive(Debug, thiserror::Error)]
pub enum CcpError {
    #[error("cannot bind the datapath socket {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("libccp: {0}")]
    Libccp(String),
    #[error(
        "the datapath socket {0} is the agent's: give the datapath a path of its own (or none)"
    )]
    SameAsAgent(PathBuf),
    #[error("the datapath socket path {path} {why}; {}", why.hint())]
    PathTaken { path: PathBuf, why: SocketPathError },
}

/// Counters of the control plane (also in the sender's summary).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CcpCounters {
    /// Messages received from the agent.
    pub agent_messages: u64,
    /// Messages sent to the agent.
    pub sent: u64,
    /// Messages that could not be delivered to the agent.
    pub send_failures: u64,
    /// Flow switches from the agent to the built-in Reno.
    pub fallbacks: u64,
    /// Flow switches back to the agent.
    pub returns: u64,
}

/// The window and rate a backend's callbacks set for one connection.
#[derive(Debug, Default)]
struct Cell {
    cwnd: AtomicU32,
    rate: AtomicU32,
    /// How many times libccp set the window (the datapath program ran).
    sets: AtomicU64,
}

impl Cell {
    fn set_cwnd(&self, cwnd: u32) {
        self.cwnd.store(cwnd, Ordering::Relaxed);
        self.sets.fetch_add(1, Ordering::Relaxed);
    }
}

/// The agent link as seen by sends and receives.
struct Link {
    sock: UnixDatagram,
    agent: PathBuf,
    base: Instant,
    /// µs since `base` + 1 of the first message sent after the agent last spoke; 0 = none.
    unanswered_since: AtomicU64,
    send_failed: AtomicBool,
    sent: AtomicU64,
    send_failures: AtomicU64,
    received: AtomicU64,
}

impl Link {
    fn new(sock: UnixDatagram, agent: PathBuf) -> Link {
        Link {
            sock,
            agent,
            base: Instant::now(),
            unanswered_since: AtomicU64::new(0),
            send_failed: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            send_failures: AtomicU64::new(0),
            received: AtomicU64::new(0),
        }
    }

    fn send(&self, msg: &[u8]) -> std::io::Result<()> {
        match self.sock.send_to(msg, &self.agent) {
            Ok(_) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
                let now = self.base.elapsed().as_micros() as u64 + 1;
                let _ = self.unanswered_since.compare_exchange(
                    0,
                    now,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                Ok(())
            }
            Err(e) => {
                self.send_failures.fetch_add(1, Ordering::Relaxed);
                // A full queue at a live agent (the 5-ms write timeout ran out) loses this one
                // message; the silence timeout decides whether the agent is gone. Anything else
                // (no socket, nobody bound to it) means the agent cannot be reached.
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) {
                    self.send_failed.store(true, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }

    fn heard(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.unanswered_since.store(0, Ordering::Relaxed);
    }

    /// How long the agent has left a message unanswered.
    fn silence(&self) -> Duration {
        match self.unanswered_since.load(Ordering::Relaxed) {
            0 => Duration::ZERO,
            t => self
                .base
                .elapsed()
                .saturating_sub(Duration::from_micros(t - 1)),
        }
    }
}

/// libccp's datapath callbacks for the C library.
struct LibccpOps(Arc<Link>);

impl libccp::DatapathOps for LibccpOps {
    fn send_msg(&mut self, msg: &[u8]) {
        // The C library cannot learn about the failure; the link records it for the fallback.
        let _ = self.0.send(msg);
    }
}

/// libccp's per-connection callbacks for the C library.
struct LibccpConn(Arc<Cell>);

impl libccp::CongestionOps for LibccpConn {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.0.set_cwnd(cwnd);
    }
    fn set_rate_abs(&mut self, rate: u32) {
        self.0.rate.store(rate, Ordering::Relaxed);
    }
}

/// The engine's callbacks.
struct EngineOps<'a> {
    link: &'a Link,
    cells: &'a HashMap<u32, Arc<Cell>>,
}

impl DatapathOps for EngineOps<'_> {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        self.link.send(msg)
    }
    fn set_cwnd(&mut self, sid: u32, cwnd: u32) {
        if let Some(c) = self.cells.get(&sid) {
            c.set_cwnd(cwnd);
        }
    }
    fn set_rate_abs(&mut self, sid: u32, rate: u32) {
        if let Some(c) = self.cells.get(&sid) {
            c.rate.store(rate, Ordering::Relaxed);
        }
    }
}

enum Backend {
    Libccp {
        dp: &'static libccp::Datapath,
        conns: HashMap<u64, libccp::Connection<'static, LibccpConn>>,
    },
    Engine {
        engine: Engine<WallClock>,
        sids: HashMap<u64, u32>,
        cells: HashMap<u32, Arc<Cell>>,
    },
}

/// Result of one invocation of libccp.
enum Invoked {
    Ok,
    /// libccp refused (no program yet, create pending, ...): not a reason to leave the agent.
    NotYet,
    /// The agent is unusable (engine fallback timer, version mismatch).
    Gone(String),
}

impl Backend {
    fn recv(&mut self, link: &Link, msg: &mut [u8]) {
        match self {
            Backend::Libccp { dp, .. } => {
                if let Err(e) = dp.recv_msg(msg) {
                    debug!(error = %e, "libccp rejected an agent message");
                }
            }
            Backend::Engine { engine, cells, .. } => {
                let mut ops = EngineOps { link, cells };
                if let Err(e) = engine.read_msg(&mut ops, msg) {
                    match e {
                        ccp_engine::Error::VersionMismatch { .. } => {
                            warn!(error = %e, "agent refused")
                        }
                        _ => debug!(error = %e, "engine rejected an agent message"),
                    }
                }
            }
        }
    }

    /// Announce the datapath again (the engine resends READY; the C library cannot, and the
    /// agent installs its programs on the first Create from an unknown datapath instead).
    fn reannounce(&mut self, link: &Link) {
        if let Backend::Engine { engine, cells, .. } = self {
            let mut ops = EngineOps { link, cells };
            let _ = engine.init(&mut ops);
        }
    }

    fn start(&mut self, link: &Link, key: u64, meta: &FlowMeta, cell: Arc<Cell>) -> bool {
        let alg = truncate_alg(&meta.algorithm);
        match self {
            Backend::Libccp { dp, conns } => {
                let info = libccp::FlowInfo::default()
                    .with_init_cwnd(meta.init_cwnd)
                    .with_mss(meta.mss)
                    .with_four_tuple(
                        meta.src_ip,
                        u32::from(meta.src_port),
                        meta.dst_ip,
                        u32::from(meta.dst_port),
                    );
                let info = match info.with_cong_alg(alg) {
                    Ok(i) => i,
                    Err(_) => return false,
                };
                match libccp::Connection::start(dp, LibccpConn(cell), info) {
                    Ok(c) => {
                        conns.insert(key, c);
                        true
                    }
                    Err(e) => {
                        warn!(error = %e, "libccp could not start a connection");
                        false
                    }
                }
            }
            Backend::Engine {
                engine,
                sids,
                cells,
            } => {
                let info = FlowInfo {
                    init_cwnd: meta.init_cwnd,
                    mss: meta.mss,
                    src_ip: meta.src_ip,
                    src_port: u32::from(meta.src_port),
                    dst_ip: meta.dst_ip,
                    dst_port: u32::from(meta.dst_port),
                    cong_alg: alg.to_string(),
                };
                let mut ops = EngineOps { link, cells };
                match engine.connection_start(&mut ops, info) {
                    Ok(sid) => {
                        sids.insert(key, sid);
                        cells.insert(sid, cell);
                        true
                    }
                    Err(e) => {
                        warn!(error = %e, "engine could not start a connection");
                        false
                    }
                }
            }
        }
    }

    fn stop(&mut self, link: &Link, key: u64) {
        match self {
            Backend::Libccp { conns, .. } => {
                conns.remove(&key);
            }
            Backend::Engine {
                engine,
                sids,
                cells,
            } => {
                if let Some(sid) = sids.remove(&key) {
                    let mut ops = EngineOps { link, cells };
                    let _ = engine.connection_free(&mut ops, sid);
                    cells.remove(&sid);
                }
            }
        }
    }

    /// Runs the flow's program on `s`; `owd_us` is the ACK's relative one-way delay (the engine
    /// takes it as `Flow.owd_us`; the C libccp cannot).
    fn invoke(
        &mut self,
        link: &Link,
        key: u64,
        s: &AckSample,
        owd_us: Option<u64>,
        cwnd: u32,
        rate: u64,
    ) -> Invoked {
        match self {
            Backend::Libccp { conns, .. } => {
                let Some(c) = conns.get_mut(&key) else {
                    return Invoked::NotYet;
                };
                c.load_primitives(
                    libccp::Primitives::default()
                        .with_bytes_acked(s.bytes_acked)
                        .with_packets_acked(s.packets_acked)
                        .with_bytes_misordered(s.bytes_misordered)
                        .with_packets_misordered(s.packets_misordered)
                        .with_ecn_bytes(s.ecn_bytes)
                        .with_ecn_packets(s.ecn_packets)
                        .with_lost_pkts_sample(s.lost_pkts)
                        .with_was_timeout(s.was_timeout)
                        .with_rtt_sample_us(s.rtt_us)
                        .with_rate_outgoing(s.rate_outgoing)
                        .with_rate_incoming(s.rate_incoming)
                        .with_bytes_in_flight(s.bytes_in_flight)
                        .with_packets_in_flight(s.packets_in_flight)
                        .with_snd_cwnd(cwnd)
                        .with_snd_rate(rate)
                        .with_bytes_pending(s.bytes_pending),
                );
                match c.invoke() {
                    Ok(()) => Invoked::Ok,
                    Err(libccp::LibccpError::LibccpFallbackTimedOut) => {
                        Invoked::Gone("libccp fallback timer".into())
                    }
                    Err(_) => Invoked::NotYet,
                }
            }
            Backend::Engine {
                engine,
                sids,
                cells,
            } => {
                let Some(&sid) = sids.get(&key) else {
                    return Invoked::NotYet;
                };
                let p = Primitives {
                    bytes_acked: s.bytes_acked,
                    packets_acked: s.packets_acked,
                    bytes_misordered: s.bytes_misordered,
                    packets_misordered: s.packets_misordered,
                    ecn_bytes: s.ecn_bytes,
                    ecn_packets: s.ecn_packets,
                    lost_pkts_sample: s.lost_pkts,
                    was_timeout: s.was_timeout,
                    rtt_sample_us: s.rtt_us,
                    rate_outgoing: s.rate_outgoing,
                    rate_incoming: s.rate_incoming,
                    bytes_in_flight: s.bytes_in_flight,
                    packets_in_flight: s.packets_in_flight,
                    snd_cwnd: cwnd,
                    snd_rate: rate,
                    bytes_pending: s.bytes_pending,
                };
                let mut ops = EngineOps { link, cells };
                let ext = ExtPrimitives { owd_us };
                match engine.invoke_ext(&mut ops, sid, &p, &ext) {
                    Ok(()) => Invoked::Ok,
                    Err(e @ ccp_engine::Error::VersionMismatch { .. }) => {
                        Invoked::Gone(e.to_string())
                    }
                    Err(_) => Invoked::NotYet,
                }
            }
        }
    }
}

/// Who controls a flow.
enum Mode {
    Agent,
    Fallback(BuiltinReno),
    /// Re-created at the agent, waiting for its program; the Reno still drives.
    Probing(BuiltinReno, Instant),
}

struct FlowEntry {
    meta: FlowMeta,
    cell: Arc<Cell>,
    mode: Mode,
    sets_at_probe: u64,
    srtt_us: f64,
}

struct Shared {
    cfg: CcpConfig,
    link: Arc<Link>,
    backend: Backend,
    flows: HashMap<u64, FlowEntry>,
    next_key: u64,
    last_probe: Instant,
    fallbacks: u64,
    returns: u64,
}

fn truncate_alg(alg: &str) -> &str {
    if alg.len() <= 63 {
        return alg;
    }
    let mut end = 63;
    while !alg.is_char_boundary(end) {
        end -= 1;
    }
    warn!(
        algorithm = alg,
        "algorithm name longer than libccp's 63 bytes; truncated"
    );
    &alg[..end]
}

impl Shared {
    /// Leave the agent if it cannot be reached or has gone silent; look for its return.
    fn check_link(&mut self, now: Instant) {
        let under_agent = self
            .flows
            .values()
            .filter(|f| matches!(f.mode, Mode::Agent | Mode::Probing(..)))
            .count();
        if under_agent > 0 {
            let srtt = self.flows.values().map(|f| f.srtt_us).fold(0.0, f64::max);
            let timeout = self
                .cfg
                .silence_timeout
                .max(Duration::from_micros((4.0 * srtt) as u64))
                .min(Duration::from_secs(1));
            let silence = self.link.silence();
            let failed = self.link.send_failed.swap(false, Ordering::Relaxed);
            if failed || silence > timeout {
                let why = if failed {
                    format!("cannot reach the agent at {}", self.link.agent.display())
                } else {
                    format!(
                        "the agent left messages unanswered for {} ms",
                        silence.as_millis()
                    )
                };
                let mut n = 0;
                let keys: Vec<u64> = self.flows.keys().copied().collect();
                for key in keys {
                    let Some(f) = self.flows.get_mut(&key) else {
                        continue;
                    };
                    let reno = match std::mem::replace(&mut f.mode, Mode::Agent) {
                        Mode::Agent => {
                            let cwnd = f.cell.cwnd.load(Ordering::Relaxed).max(2 * f.meta.mss);
                            n += 1;
                            BuiltinReno::resume(f.meta.mss, cwnd, u64::from(cwnd))
                        }
                        Mode::Probing(r, _) | Mode::Fallback(r) => r,
                    };
                    f.mode = Mode::Fallback(reno);
                    self.backend.stop(&self.link, key);
                }
                self.link.unanswered_since.store(0, Ordering::Relaxed);
                self.fallbacks += n;
                if n > 0 {
                    warn!(reason = %why, flows = n, "agent lost: flows continue under the built-in reno");
                }
                self.last_probe = now;
            }
        }
        // Probing flows that the agent never took over go back to waiting.
        for f in self.flows.values_mut() {
            if let Mode::Probing(_, since) = &f.mode
                && now.duration_since(*since) > Duration::from_secs(1)
                && let Mode::Probing(r, _) = std::mem::replace(&mut f.mode, Mode::Agent)
            {
                f.mode = Mode::Fallback(r);
            }
        }
        let waiting: Vec<u64> = self
            .flows
            .iter()
            .filter(|(_, f)| matches!(f.mode, Mode::Fallback(_)))
            .map(|(k, _)| *k)
            .collect();
        if !waiting.is_empty() && now.duration_since(self.last_probe) >= self.cfg.probe_interval {
            self.last_probe = now;
            if !self.link.agent.exists() {
                return;
            }
            self.link.send_failed.store(false, Ordering::Relaxed);
            self.backend.reannounce(&self.link);
            for key in waiting {
                self.backend.stop(&self.link, key);
                let Some(f) = self.flows.get_mut(&key) else {
                    continue;
                };
                let cell = Arc::new(Cell::default());
                if self.backend.start(&self.link, key, &f.meta, cell.clone())
                    && let Mode::Fallback(r) = std::mem::replace(&mut f.mode, Mode::Agent)
                {
                    f.cell = cell;
                    f.sets_at_probe = 0;
                    f.mode = Mode::Probing(r, now);
                }
            }
            debug!("probing for the agent");
        }
    }
}

/// The datapath side of CCP for one process.
pub struct ControlPlane {
    shared: Arc<Mutex<Shared>>,
    link: Arc<Link>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// This datapath's socket path, held for the control plane's life (dropping it removes the
    /// socket file).
    local: SocketPathClaim,
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ControlPlane {
    /// Bind the datapath socket, announce the datapath to the agent and start the IPC thread.
    /// A missing agent is not an error: flows start under the built-in Reno and move to the
    /// agent when it appears.
    pub fn start(cfg: CcpConfig) -> Result<ControlPlane, CcpError> {
        let local = cfg.local_socket.clone().unwrap_or_else(|| {
            cfg.agent_socket
                .parent()
                .unwrap_or(Path::new("/tmp"))
                .join(format!("ccp-udp-{}.sock", std::process::id()))
        });
        if local == cfg.agent_socket {
            return Err(CcpError::SameAsAgent(local));
        }
        if let Some(dir) = local.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let mut claim = SocketPathClaim::claim(&local, SocketKind::Datagram).map_err(|why| {
            CcpError::PathTaken {
                path: local.clone(),
                why,
            }
        })?;
        let sock = UnixDatagram::bind(&local).map_err(|source| CcpError::Bind {
            path: local.clone(),
            source,
        })?;
        claim.bound().map_err(|source| CcpError::Bind {
            path: local.clone(),
            source,
        })?;
        // A stopped agent must not freeze the flows: sends wait at most a few ms.
        let _ = sock.set_write_timeout(Some(Duration::from_millis(5)));
        let recv_sock = sock.try_clone().map_err(|source| CcpError::Bind {
            path: local.clone(),
            source,
        })?;
        let _ = recv_sock.set_read_timeout(Some(Duration::from_millis(20)));
        let link = Arc::new(Link::new(sock, cfg.agent_socket.clone()));
        if !cfg.agent_socket.exists() {
            warn!(
                agent = %cfg.agent_socket.display(),
                "no ccp-agent socket there; flows start under the built-in reno and move to the agent when it appears"
            );
        }
        let id = std::process::id();
        let backend = match cfg.backend {
            BackendKind::Libccp => {
                let dp = libccp::DatapathBuilder::default()
                    .with_ops(LibccpOps(link.clone()))
                    .with_id(id)
                    .init()
                    .map_err(|e| CcpError::Libccp(e.to_string()))?;
                // One datapath per process, alive for the whole process.
                Backend::Libccp {
                    dp: Box::leak(Box::new(dp)),
                    conns: HashMap::new(),
                }
            }
            BackendKind::Engine => {
                let mut engine = Engine::new(
                    WallClock::default(),
                    EngineConfig {
                        id,
                        // The control plane handles the agent's absence itself.
                        fallback_timeout_us: 3_600_000_000,
                        ..EngineConfig::default()
                    },
                );
                let cells = HashMap::new();
                let _ = engine.init(&mut EngineOps {
                    link: &link,
                    cells: &cells,
                });
                Backend::Engine {
                    engine,
                    sids: HashMap::new(),
                    cells,
                }
            }
        };
        let shared = Arc::new(Mutex::new(Shared {
            cfg: cfg.clone(),
            link: link.clone(),
            backend,
            flows: HashMap::new(),
            next_key: 1,
            last_probe: Instant::now(),
            fallbacks: 0,
            returns: 0,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let shared = shared.clone();
            let stop = stop.clone();
            let link = link.clone();
            std::thread::Builder::new()
                .name("ccp-ipc".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    while !stop.load(Ordering::Relaxed) {
                        let n = match recv_sock.recv(&mut buf) {
                            Ok(n) => n,
                            Err(_) => continue,
                        };
                        link.heard();
                        let mut sh = lock(&shared);
                        let sh = &mut *sh;
                        sh.backend.recv(&sh.link, &mut buf[..n]);
                    }
                })
                .ok()
        };
        info!(socket = %local.display(), agent = %cfg.agent_socket.display(), backend = ?cfg.backend, "ccp datapath ready");
        Ok(ControlPlane {
            shared,
            link,
            stop,
            thread,
            local: claim,
        })
    }

    /// A controller for a new flow, created at the agent now (or under the fallback if the agent
    /// is away).
    pub fn controller(&self, meta: &FlowMeta) -> Box<dyn FlowController> {
        let mut sh = lock(&self.shared);
        let sh = &mut *sh;
        let key = sh.next_key;
        sh.next_key += 1;
        let cell = Arc::new(Cell::default());
        cell.cwnd.store(meta.init_cwnd, Ordering::Relaxed);
        let started = sh.link.agent.exists() && sh.backend.start(&sh.link, key, meta, cell.clone());
        let mode = if started {
            Mode::Agent
        } else {
            Mode::Fallback(BuiltinReno::new(meta.mss, meta.init_cwnd))
        };
        sh.flows.insert(
            key,
            FlowEntry {
                meta: meta.clone(),
                cell,
                mode,
                sets_at_probe: 0,
                srtt_us: 0.0,
            },
        );
        Box::new(CcpFlow {
            shared: self.shared.clone(),
            key,
            cwnd: meta.init_cwnd,
            rate: None,
            name: if started {
                "ccp-agent"
            } else {
                "fallback:reno"
            },
        })
    }

    /// Counters so far.
    pub fn counters(&self) -> CcpCounters {
        let sh = lock(&self.shared);
        CcpCounters {
            agent_messages: self.link.received.load(Ordering::Relaxed),
            sent: self.link.sent.load(Ordering::Relaxed),
            send_failures: self.link.send_failures.load(Ordering::Relaxed),
            fallbacks: sh.fallbacks,
            returns: sh.returns,
        }
    }

    /// This datapath's socket.
    pub fn socket(&self) -> &Path {
        self.local.path()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One flow's controller under the control plane.
struct CcpFlow {
    shared: Arc<Mutex<Shared>>,
    key: u64,
    cwnd: u32,
    rate: Option<u64>,
    name: &'static str,
}

impl CcpFlow {
    fn step(&mut self, s: &AckSample, owd_us: Option<u64>, tick: bool) {
        let now = Instant::now();
        let mut guard = lock(&self.shared);
        let sh = &mut *guard;
        if s.rtt_us > 0
            && let Some(f) = sh.flows.get_mut(&self.key)
        {
            f.srtt_us = if f.srtt_us == 0.0 {
                s.rtt_us as f64
            } else {
                0.875 * f.srtt_us + 0.125 * s.rtt_us as f64
            };
        }
        sh.check_link(now);
        let Some(f) = sh.flows.get_mut(&self.key) else {
            return;
        };
        let rate_now = self.rate.unwrap_or(0);
        match &mut f.mode {
            Mode::Agent => match sh
                .backend
                .invoke(&sh.link, self.key, s, owd_us, self.cwnd, rate_now)
            {
                Invoked::Gone(why) => {
                    warn!(reason = %why, "flow leaves the agent");
                    sh.link.send_failed.store(true, Ordering::Relaxed);
                }
                Invoked::Ok | Invoked::NotYet => {
                    self.cwnd = f.cell.cwnd.load(Ordering::Relaxed).max(1);
                    let r = f.cell.rate.load(Ordering::Relaxed);
                    self.rate = (r > 0).then_some(u64::from(r));
                    self.name = "ccp-agent";
                }
            },
            Mode::Fallback(reno) => {
                feed(reno, s, tick);
                self.cwnd = reno.cwnd();
                self.rate = reno.pacing_rate();
                self.name = "fallback:reno";
            }
            Mode::Probing(reno, _) => {
                feed(reno, s, tick);
                let reno_cwnd = reno.cwnd();
                let _ = sh
                    .backend
                    .invoke(&sh.link, self.key, s, owd_us, reno_cwnd, 0);
                if f.cell.sets.load(Ordering::Relaxed) > f.sets_at_probe {
                    // The agent's program runs on this flow: hand control back.
                    f.mode = Mode::Agent;
                    sh.returns += 1;
                    info!(
                        flow = self.key,
                        "agent is back: flow returns to ccp-agent control"
                    );
                    self.cwnd = f.cell.cwnd.load(Ordering::Relaxed).max(1);
                    let r = f.cell.rate.load(Ordering::Relaxed);
                    self.rate = (r > 0).then_some(u64::from(r));
                    self.name = "ccp-agent";
                } else {
                    self.cwnd = reno_cwnd;
                    self.rate = None;
                    self.name = "fallback:reno";
                }
            }
        }
    }
}

fn feed(reno: &mut BuiltinReno, s: &AckSample, tick: bool) {
    if tick {
        reno.on_tick(s);
    } else {
        reno.on_ack(s);
    }
}

impl FlowController for CcpFlow {
    fn on_ack(&mut self, s: &AckSample) {
        self.step(s, None, false);
    }

    fn on_ack_with_owd(&mut self, s: &AckSample, owd_us: u64) {
        self.step(s, Some(owd_us), false);
    }

    fn on_tick(&mut self, s: &AckSample) {
        self.step(s, None, true);
    }

    fn cwnd(&self) -> u32 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        self.rate
    }

    fn controller_name(&self) -> String {
        self.name.to_string()
    }

    fn close(&mut self) {
        let mut guard = lock(&self.shared);
        let sh = &mut *guard;
        sh.backend.stop(&sh.link, self.key);
        sh.flows.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_at_a_live_agent_drops_the_message_but_does_not_lose_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let agent_path = dir.path().join("agent.sock");
        // An agent that is bound but never reads: its queue fills.
        let _agent = UnixDatagram::bind(&agent_path).unwrap();
        let sock = UnixDatagram::bind(dir.path().join("dp.sock")).unwrap();
        sock.set_write_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let l = Link::new(sock, agent_path);
        let msg = [0u8; 512];
        let mut full = false;
        for _ in 0..100_000 {
            if l.send(&msg).is_err() {
                full = true;
                break;
            }
        }
        assert!(full, "the agent's queue never filled");
        assert_eq!(l.send_failures.load(Ordering::Relaxed), 1);
        assert!(!l.send_failed.load(Ordering::Relaxed));
        // The messages it did take started the silence clock, which decides instead.
        assert!(l.unanswered_since.load(Ordering::Relaxed) > 0);
    }

    #[test]
    fn no_agent_at_the_socket_path_loses_the_agent_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let sock = UnixDatagram::bind(dir.path().join("dp.sock")).unwrap();
        let l = Link::new(sock, dir.path().join("no-agent.sock"));
        assert!(l.send(&[0u8; 16]).is_err());
        assert!(l.send_failed.load(Ordering::Relaxed));
        // A socket file nobody is bound to any more (a killed agent) is the same.
        let gone = dir.path().join("gone.sock");
        drop(UnixDatagram::bind(&gone).unwrap());
        let l = Link::new(
            UnixDatagram::bind(dir.path().join("dp2.sock")).unwrap(),
            gone,
        );
        assert!(l.send(&[0u8; 16]).is_err());
        assert!(l.send_failed.load(Ordering::Relaxed));
    }

    #[test]
    fn the_datapath_socket_never_replaces_a_live_socket_and_takes_over_a_stale_one() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent.sock");
        let _live = UnixDatagram::bind(&agent).unwrap();
        let start = |local: &Path| {
            ControlPlane::start(CcpConfig {
                agent_socket: agent.clone(),
                local_socket: Some(local.to_path_buf()),
                ..CcpConfig::default()
            })
        };
        // The agent's own path (an easy slip: both programs take --socket).
        let e = start(&agent).err().unwrap();
        assert!(matches!(e, CcpError::SameAsAgent(_)), "{e}");
        assert!(agent.exists());
        // Another process's live socket stays (every case of the probe is tested in
        // ccp_files::socket_path; this checks the error reaches the user with the path).
        let other = dir.path().join("other.sock");
        let _other = UnixDatagram::bind(&other).unwrap();
        let e = start(&other).err().unwrap();
        assert!(matches!(e, CcpError::PathTaken { .. }), "{e}");
        assert!(e.to_string().contains("another process is bound"), "{e}");
        assert!(e.to_string().contains(&*other.to_string_lossy()), "{e}");
        // A socket left by a process that died is taken over.
        let stale = dir.path().join("stale.sock");
        drop(UnixDatagram::bind(&stale).unwrap());
        assert!(start(&stale).is_ok());
    }
}
