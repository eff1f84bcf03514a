//! The sending side: configuration, [`run_sender`] (one thread and one connected UDP socket per
//! flow) and the per-flow state machine — HELLO handshake, segmentation of the pattern stream
//! into DATA packets, GSO batching, the congestion window and pacing rate of the flow's
//! [`FlowController`], ACK processing, loss detection and recovery, the samples handed to the
//! controller, the trace and the summary.
//!
//! Loss recovery follows RFC 9002: every transmission gets a fresh packet number, so RTT samples
//! are unambiguous; a packet is lost when a packet 3 numbers later was acknowledged or when it
//! is older than 9/8·max(srtt, latest RTT) while a later one was acknowledged. The probe timer
//! (srtt + max(4·rttvar, 1 ms) + max ACK delay, doubled per expiry) first sends one tail-loss
//! probe; if that expires too it is a retransmission timeout: everything in flight is declared
//! lost, the controller sees `was_timeout`, and the lost ranges are sent again.
//!
//! What a controller sees (one [`AckSample`] per ACK datagram, plus timer-detected losses and
//! ticks):
//! * `bytes_acked`: the advance of the receiver's contiguous stream offset. Over a completed
//!   transfer the sum is exactly the stream length; the FIN carries no stream bytes.
//! * `packets_acked`: packets whose stream range is now entirely below that offset, counted once
//!   each when they get there (packets SACKed earlier are counted when the hole before them
//!   fills); the FIN packet counts as one packet.
//! * `bytes_misordered` / `packets_misordered`: payload and packets newly acknowledged beyond the
//!   contiguous offset (SACKed).
//! * `ecn_packets`: new ECN-CE marks the receiver counted; `ecn_bytes` = that × MSS.
//! * `lost_pkts`: packets newly declared lost; `was_timeout` on a retransmission timeout.
//! * `rtt_us`: the ack-delay-adjusted RTT of the ACK's largest acknowledged packet if that
//!   packet is newly acknowledged (RFC 9002 §5.1), else 0 (an ACK that only fills a hole).
//! * with every RTT sample, the relative one-way delay of the same packet
//!   ([`FlowController::on_ack_with_owd`]): the ACK's receive timestamp minus its echoed send
//!   timestamp, minus the smallest such difference of the last
//!   [`SenderConfig::owd_base_window`] (10 s; [`OneWayDelay`]), µs.
//! * `rate_incoming`: a delivery-rate sample as BBR takes it (draft-cheng-iccrg-delivery-rate-
//!   estimation): bytes delivered between sending and acknowledging the most recently sent newly
//!   acknowledged packet, over the longer of the send and ACK intervals (over the last
//!   max(srtt, 1 ms) when no sample applies); `rate_outgoing`: the same bytes over the send
//!   interval alone, the rate at which that packet's round was sent (sent bytes per second over
//!   the last max(srtt, 1 ms) when no sample applies). So `min(rate_incoming, rate_outgoing)` is
//!   the delivery-rate sample, as from the simulator, whose `rate_incoming` is the ACK rate.
//! * gauges: bytes and packets in flight, `bytes_pending` = stream bytes not yet sent plus
//!   bytes queued for retransmission (`u32::MAX` while a duration-mode flow runs without a
//!   rate cap: its supply is unlimited).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet, VecDeque};
use std::io as stdio;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::Xxh3Default;

use crate::arrival::ArrivalClock;
use crate::cc::{AckSample, FlowController, FlowMeta};
use crate::error::{Error, HumanDuration};
use crate::io::{self as sio, RecvBatch, SendMsg};
use crate::pacing::{Pacer, RateWindow};
use crate::packet::{
    self, Ack, DATA_HEADER_LEN, DataHeader, HASH_LEN, Hello, MAX_MSS, MAX_WIRE_U48, MIN_MSS,
    Packet, flags,
};
use crate::pattern;
use crate::rtt::{DEFAULT_OWD_BASE_WINDOW_US, OneWayDelay, RttEstimator};
use crate::summary::{SenderSummary, TraceSample, mbps, percentile};

/// Port a receiver listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 4433;
/// Packet-reordering threshold for loss detection (RFC 9002 kPacketThreshold).
pub const PACKET_THRESHOLD: u64 = 3;
/// First HELLO retry interval; doubles up to one second.
const HELLO_RETRY: Duration = Duration::from_millis(100);
/// A flow whose receiver sends no ACK for this long (while data is outstanding) fails.
const MIN_DEAD_PEER: Duration = Duration::from_secs(10);
/// After the stop flag, how long a flow waits for the receiver to confirm the shortened stream.
const STOP_GRACE_US: u64 = 2_000_000;
/// Most packets in flight, whatever the window (bounds the sent-packet table).
const MAX_PKTS_IN_FLIGHT: u64 = 1 << 20;
/// RTT samples kept for percentiles (reservoir sampling beyond).
const RTT_RESERVOIR: usize = 1 << 20;
/// Waits shorter than this (µs) spin instead of sleeping in `ppoll`.
const SPIN_US: u64 = 50;
/// Socket buffers asked for.
const SNDBUF: usize = 8 << 20;
const RCVBUF: usize = 4 << 20;

/// How much a flow sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    /// A stream of this many bytes.
    Bytes(u64),
    /// As much as possible for this long (measured from the end of the handshake).
    Duration(Duration),
}

/// One flow of a sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Size or duration.
    pub amount: Amount,
    /// Algorithm to ask for ("" for the controller's default).
    pub algorithm: String,
    /// Delay before the flow's handshake.
    pub start_after: Duration,
    /// Application rate cap, bytes/s: the stream is produced no faster than this.
    pub rate_cap: Option<u64>,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            amount: Amount::Bytes(100 << 20),
            algorithm: String::new(),
            start_after: Duration::ZERO,
            rate_cap: None,
        }
    }
}

/// How a sender runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    /// Receiver address.
    pub dest: SocketAddr,
    /// Local address to send from (None: chosen by the kernel).
    pub bind_ip: Option<IpAddr>,
    /// Payload bytes per packet ([`MIN_MSS`]..=[`MAX_MSS`]).
    pub mss: u32,
    /// Initial window handed to controllers, packets.
    pub init_cwnd_pkts: u32,
    /// The flows, each on its own thread and socket.
    pub flows: Vec<FlowSpec>,
    /// How long to wait for the receiver's HELLO_ACK.
    pub handshake_timeout: Duration,
    /// Trace sampling period (zero: no trace).
    pub trace_interval: Duration,
    /// Mark packets ECT(0).
    pub ecn: bool,
    /// Use UDP GSO where the kernel allows.
    pub gso: bool,
    /// Span of the sliding window whose smallest one-way delay is the base of the relative
    /// one-way delay (zero: the flow's whole life). Default 10 s: at a clock-rate difference of
    /// 100 ppm between the hosts a base at most 10 s old reads at most 1 ms of drift as
    /// queueing, and a queue standing for under 9 s is not taken into the base (see
    /// [`crate::rtt::DEFAULT_OWD_BASE_WINDOW_US`]; LEDBAT's base-delay history, RFC 6817
    /// §3.4.2).
    pub owd_base_window: Duration,
    /// RTT samples taken before this time, on the sender's clock (the clock of
    /// [`FlowSpec::start_after`]), are left out of the summary's RTT percentiles: a warm-up
    /// (zero: every sample counts). The smallest RTT still counts every sample.
    pub rtt_from: Duration,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            dest: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)),
            bind_ip: None,
            mss: 1448,
            init_cwnd_pkts: 10,
            flows: vec![FlowSpec::default()],
            handshake_timeout: Duration::from_secs(5),
            trace_interval: Duration::from_millis(10),
            ecn: true,
            gso: true,
            owd_base_window: Duration::from_micros(DEFAULT_OWD_BASE_WINDOW_US),
            rtt_from: Duration::ZERO,
        }
    }
}

impl SenderConfig {
    /// Checks the configuration; the error names the offending field.
    pub fn validate(&self) -> Result<(), Error> {
        if !(MIN_MSS..=MAX_MSS).contains(&self.mss) {
            return Err(Error::Config(format!(
                "the MSS, {} bytes, is outside {MIN_MSS}..={MAX_MSS} bytes",
                self.mss
            )));
        }
        if self.init_cwnd_pkts == 0 {
            return Err(Error::Config(
                "the initial window must be at least 1 packet".into(),
            ));
        }
        if self.flows.is_empty() {
            return Err(Error::Config("no flows to send".into()));
        }
        if self.handshake_timeout.is_zero() {
            return Err(Error::Config(
                "the handshake timeout must be positive".into(),
            ));
        }
        if self.dest.port() == 0 {
            return Err(Error::Config(format!(
                "destination {} has port 0",
                self.dest
            )));
        }
        if let Some(ip) = self.bind_ip
            && ip.is_ipv4() != self.dest.is_ipv4()
        {
            return Err(Error::Config(format!(
                "bind address {ip} and destination {} are of different IP versions",
                self.dest
            )));
        }
        for (i, f) in self.flows.iter().enumerate() {
            match f.amount {
                Amount::Bytes(b) if b > MAX_WIRE_U48 => {
                    return Err(Error::Config(format!(
                        "flow {i}: {b} bytes exceed the 2^48-byte stream limit"
                    )));
                }
                Amount::Duration(d) if d.is_zero() => {
                    return Err(Error::Config(format!(
                        "flow {i}: duration must be positive"
                    )));
                }
                _ => {}
            }
            if f.rate_cap == Some(0) {
                return Err(Error::Config(format!(
                    "flow {i}: rate cap must be positive"
                )));
            }
        }
        Ok(())
    }
}

/// Makes a controller for a flow (called on the flow's thread after its handshake).
pub type ControllerFactory<'a> = dyn Fn(&FlowMeta) -> Box<dyn FlowController> + Sync + 'a;

/// A flow's start, as [`run_sender_announcing`] reports it: once the flow's socket is bound and
/// connected, before its first HELLO, so before the agent can know the flow.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowStart {
    /// Index of the flow in [`SenderConfig::flows`] (its summary's `flow`).
    pub flow: usize,
    /// The flow's id (its summary's `flow_id`).
    pub flow_id: u32,
    /// The flow's source address, which the agent knows it by (its summary's `local`).
    pub src: SocketAddr,
    /// When the socket was bound, µs since the sender started (the clock of
    /// [`FlowSpec::start_after`]).
    pub at_us: u64,
}

/// Told of every flow's start, on the flow's thread; an error fails the flow.
pub type StartHook<'a> = dyn Fn(&FlowStart) -> stdio::Result<()> + Sync + 'a;

/// Runs every flow of `cfg` to completion (or until `stop`) and returns their summaries in the
/// order of `cfg.flows`. If any flow fails, the others are stopped and the first failure (in
/// flow order) is returned.
pub fn run_sender(
    cfg: &SenderConfig,
    make: &(dyn Fn(&FlowMeta) -> Box<dyn FlowController> + Sync),
    stop: &AtomicBool,
) -> Result<Vec<SenderSummary>, Error> {
    run_sender_announcing(cfg, make, stop, &|_| Ok(()))
}

/// [`run_sender`], telling `announce` of each flow's start ([`FlowStart`]: its index and source
/// address) as soon as its socket is bound, while the flows run. A failed announcement fails
/// its flow (and so the sender).
pub fn run_sender_announcing(
    cfg: &SenderConfig,
    make: &(dyn Fn(&FlowMeta) -> Box<dyn FlowController> + Sync),
    stop: &AtomicBool,
    announce: &StartHook<'_>,
) -> Result<Vec<SenderSummary>, Error> {
    cfg.validate()?;
    let epoch = Instant::now();
    let ids = flow_ids(cfg.flows.len());
    let abort = AtomicBool::new(false);
    let results: Vec<Result<SenderSummary, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let abort = &abort;
                std::thread::Builder::new()
                    .name(format!("ccp-udp-flow-{i}"))
                    .spawn_scoped(s, move || {
                        let r = run_flow(cfg, i, id, make, stop, abort, epoch, announce);
                        if r.is_err() {
                            abort.store(true, Ordering::Relaxed);
                        }
                        r
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|p| {
                    Err(Error::Internal(format!(
                        "a flow thread panicked: {}",
                        panic_message(&p)
                    )))
                }),
                Err(e) => Err(Error::io("spawning a flow thread", e)),
            })
            .collect()
    });
    results.into_iter().collect()
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Random, distinct, non-zero flow ids.
fn flow_ids(n: usize) -> Vec<u32> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let id: u32 = rand::random();
        if id != 0 && seen.insert(id) {
            out.push(id);
        }
    }
    out
}

fn ipv4_host_order(ip: IpAddr) -> u32 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(0, u32::from),
    }
}

/// One flow from socket to summary; its start (bound socket) is announced before its HELLO.
#[allow(clippy::too_many_arguments)]
fn run_flow(
    cfg: &SenderConfig,
    index: usize,
    flow_id: u32,
    make: &ControllerFactory<'_>,
    stop: &AtomicBool,
    abort: &AtomicBool,
    epoch: Instant,
    announce: &StartHook<'_>,
) -> Result<SenderSummary, Error> {
    let spec = &cfg.flows[index];
    let halted = || stop.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed);
    // Wait for the flow's start, staying responsive to stop.
    let start_at = Instant::now() + spec.start_after;
    while Instant::now() < start_at {
        if halted() {
            return Ok(unstarted_summary(cfg, index, flow_id, None));
        }
        std::thread::sleep((start_at - Instant::now()).min(Duration::from_millis(20)));
    }
    let bind_ip = cfg.bind_ip.unwrap_or(if cfg.dest.is_ipv4() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    });
    let sock = UdpSocket::bind(SocketAddr::new(bind_ip, 0))
        .map_err(|e| Error::io(format!("binding a sender socket to {bind_ip}"), e))?;
    sock.connect(cfg.dest)
        .map_err(|e| Error::io(format!("connecting a sender socket to {}", cfg.dest), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| Error::io("setting the sender socket non-blocking", e))?;
    let local = sock
        .local_addr()
        .map_err(|e| Error::io("reading the sender's address", e))?;
    sio::set_buffers(&sock, SNDBUF, RCVBUF);
    // Before the handshake: the kernel turns stamping on asynchronously the first time a socket
    // asks, and it is on by the first data ACK.
    let rx_stamps = sio::enable_rx_timestamps(&sock);
    let gso = cfg.gso && sio::gso_supported(&sock);
    if cfg.ecn
        && let Err(e) = sio::set_tos(&sock, cfg.dest.is_ipv6(), sio::ECN_ECT0)
    {
        tracing::debug!("ECN marking unavailable: {e}");
    }
    sio::set_timer_slack_ns(1_000);
    announce(&FlowStart {
        flow: index,
        flow_id,
        src: local,
        at_us: epoch.elapsed().as_micros() as u64,
    })
    .map_err(|e| Error::io(format!("announcing flow {index}'s start ({local})"), e))?;

    let hs = match handshake(&sock, cfg, flow_id, &halted)? {
        Some(hs) => hs,
        None => return Ok(unstarted_summary(cfg, index, flow_id, Some(local))),
    };
    tracing::debug!(
        flow = format_args!("{flow_id:08x}"),
        %local,
        rtt_us = hs.rtt_us,
        gso,
        "handshake done"
    );
    let meta = FlowMeta {
        mss: cfg.mss,
        init_cwnd: cfg.init_cwnd_pkts.saturating_mul(cfg.mss),
        src_ip: ipv4_host_order(local.ip()),
        src_port: local.port(),
        dst_ip: ipv4_host_order(cfg.dest.ip()),
        dst_port: cfg.dest.port(),
        algorithm: spec.algorithm.clone(),
    };
    let ctrl = make(&meta);
    let mut flow = FlowSender::new(cfg, index, flow_id, sock, local, gso, rx_stamps, ctrl, hs);
    flow.rtt_from_us = (epoch + cfg.rtt_from)
        .saturating_duration_since(flow.epoch)
        .as_micros() as u64;
    let r = flow.run(stop, abort);
    flow.ctrl.close();
    r?;
    Ok(flow.summary())
}

/// The summary of a flow stopped before its handshake completed; `local`: its address if its
/// socket was bound.
fn unstarted_summary(
    cfg: &SenderConfig,
    index: usize,
    flow_id: u32,
    local: Option<SocketAddr>,
) -> SenderSummary {
    let spec = &cfg.flows[index];
    SenderSummary {
        flow: index,
        flow_id,
        algorithm: spec.algorithm.clone(),
        controllers: Vec::new(),
        local: local.map(|a| a.to_string()).unwrap_or_default(),
        remote: cfg.dest.to_string(),
        mss: cfg.mss,
        bytes: 0,
        duration_s: 0.0,
        goodput_mbps: 0.0,
        handshake_rtt_ms: 0.0,
        rtt_min_ms: 0.0,
        rtt_p50_ms: 0.0,
        rtt_p95_ms: 0.0,
        rtt_p99_ms: 0.0,
        rtt_samples: Some(0),
        srtt_ms: 0.0,
        owd_excess_mean_us: None,
        sent_packets: 0,
        sent_bytes: 0,
        retransmitted_packets: 0,
        retransmitted_bytes: 0,
        lost_packets: 0,
        timeouts: 0,
        probes: 0,
        acks: 0,
        ignored_datagrams: 0,
        ecn_ce_packets: 0,
        gso: false,
        ack_timestamps: false,
        hash: pattern::hash_hex(Xxh3Default::new().digest128()),
        completed: false,
        receiver_intact: None,
        stopped_early: true,
        trace: Vec::new(),
    }
}

struct Handshake {
    rtt_us: u64,
    ignored: u64,
}

/// Sends HELLOs with backoff until a matching HELLO_ACK arrives. `Ok(None)`: stopped.
fn handshake(
    sock: &UdpSocket,
    cfg: &SenderConfig,
    flow_id: u32,
    halted: &dyn Fn() -> bool,
) -> Result<Option<Handshake>, Error> {
    let fd = sock.as_raw_fd();
    let start = Instant::now();
    let deadline = start + cfg.handshake_timeout;
    let mut next_hello = start;
    let mut retry = HELLO_RETRY;
    let mut ignored = 0u64;
    let mut buf = [0u8; 2048];
    let refused = || Error::Refused { addr: cfg.dest };
    loop {
        if halted() {
            return Ok(None);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::NoAnswer {
                addr: cfg.dest,
                timeout: cfg.handshake_timeout,
                ignored,
            });
        }
        if now >= next_hello {
            let h = Hello {
                flow_id,
                mss: cfg.mss,
                ts: now.duration_since(start).as_micros() as u32,
            };
            let n = packet::encode_hello(&mut buf, &h, false);
            match sock.send(&buf[..n]) {
                Ok(_) => {}
                Err(e) if sio::is_refused(&e) => return Err(refused()),
                Err(e) if sio::is_transient_send_error(&e) => {}
                Err(e) => return Err(Error::io(format!("sending HELLO to {}", cfg.dest), e)),
            }
            next_hello = now + retry;
            retry = (retry * 2).min(Duration::from_secs(1));
        }
        let wake = next_hello
            .min(deadline)
            .min(now + Duration::from_millis(50));
        sio::wait(
            fd,
            false,
            Some(wake.saturating_duration_since(Instant::now())),
        )
        .map_err(|e| Error::io("waiting for HELLO_ACK", e))?;
        loop {
            match sock.recv(&mut buf) {
                Ok(n) => match packet::decode(&buf[..n]) {
                    Ok(Packet::HelloAck(h)) if h.flow_id == flow_id && h.mss == cfg.mss => {
                        let now_ts = start.elapsed().as_micros() as u32;
                        let rtt = u64::from(now_ts.wrapping_sub(h.ts)).max(1);
                        return Ok(Some(Handshake {
                            rtt_us: rtt,
                            ignored,
                        }));
                    }
                    _ => ignored += 1,
                },
                Err(e) if e.kind() == stdio::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == stdio::ErrorKind::Interrupted => {}
                Err(e) if sio::is_refused(&e) => return Err(refused()),
                Err(e) => return Err(Error::io(format!("receiving from {}", cfg.dest), e)),
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PktState {
    InFlight,
    Acked,
    Lost,
}

/// One transmitted packet; its packet number is its index in the table plus the table's base.
#[derive(Clone, Copy, Debug)]
struct SentPkt {
    offset: u64,
    len: u32,
    time_us: u64,
    state: PktState,
    fin: bool,
    /// Delivery-rate sampling state when the packet was sent (draft-cheng-iccrg-delivery-rate-
    /// estimation): bytes delivered so far, when the last of them was delivered, and the send
    /// time of the packet whose delivery was last acknowledged.
    delivered: u64,
    delivered_time_us: u64,
    first_sent_us: u64,
}

impl SentPkt {
    fn end(&self) -> u64 {
        self.offset + u64::from(self.len)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SegKind {
    New,
    Retx,
    Fin,
}

/// A packet placed in the send batch but not yet handed to the kernel.
#[derive(Clone, Copy, Debug)]
struct PendingSeg {
    pn: u64,
    offset: u64,
    len: u32,
    kind: SegKind,
    probe: bool,
    /// Probe copy of an in-flight range (not taken from the retransmission queue).
    copy: bool,
    msg: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FinState {
    /// The stream has not ended.
    Open,
    /// Ended; the FIN must be (re)sent.
    Pending,
    InFlight,
    Acked,
}

/// Why the send loop stopped adding packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    /// Batch full: send more right away.
    Batch,
    /// Window full: wait for ACKs.
    Cwnd,
    /// Pacing: wait this many µs.
    Pacing(u64),
    /// Application rate cap: wait this many µs.
    App(u64),
    /// Socket buffer full: wait until writable.
    Socket,
    /// Nothing to send.
    Idle,
}

struct FlowSender<'a> {
    index: usize,
    flow_id: u32,
    seed: u64,
    mss: u32,
    dest: SocketAddr,
    local: SocketAddr,
    algorithm: String,
    duration_us: Option<u64>,
    rate_cap: Option<u64>,
    sock: UdpSocket,
    gso: bool,
    epoch: Instant,
    ctrl: Box<dyn FlowController + 'a>,

    // Stream.
    next_offset: u64,
    committed_offset: u64,
    final_len: Option<u64>,
    fin_state: FinState,
    fin_sent_before: bool,
    hasher: Box<Xxh3Default>,
    final_hash: Option<u128>,

    // Packets.
    pn_next: u64,
    base_pn: u64,
    sent: VecDeque<SentPkt>,
    bytes_in_flight: u64,
    pkts_in_flight: u64,
    retx: BTreeMap<u64, u32>,
    retx_bytes: u64,
    probe_pending: bool,

    // Acknowledgements and recovery.
    cum_acked: u64,
    sacked_ends: BinaryHeap<Reverse<u64>>,
    largest_acked: Option<u64>,
    loss_scan_from: u64,
    loss_time: Option<u64>,
    pto_count: u32,
    last_eliciting_us: u64,
    ecn_ce: u64,
    rtt: RttEstimator,
    last_ack_rx_us: u64,
    dead_peer_us: u64,
    /// When each ACK datagram arrived, by the kernel's receive timestamp where there is one.
    /// ACK times make the RTT samples and the delivery-rate samples, whose maximum is BBR's
    /// bandwidth estimate. Timed when read, an ACK that waited while the sender was sending or
    /// descheduled would shorten the interval of the next sample and inflate it.
    arrivals: ArrivalClock,

    // Rates.
    pacer: Pacer,
    delivered: u64,
    /// When `delivered` last grew, µs.
    delivered_time_us: u64,
    /// Send time of the packet whose delivery was acknowledged last, µs.
    first_sent_us: u64,
    sent_cum: u64,
    delivery_rate: RateWindow,
    send_rate: RateWindow,
    rate_in: u64,
    rate_out: u64,

    // Controller bookkeeping.
    last_invoke_us: u64,
    controllers: Vec<String>,

    // Statistics.
    sent_packets: u64,
    sent_bytes: u64,
    retx_packets: u64,
    retx_bytes_total: u64,
    lost_packets: u64,
    timeouts: u64,
    probes: u64,
    acks: u64,
    ignored: u64,
    handshake_rtt_us: u64,
    rtt_samples: Vec<u32>,
    rtt_seen: u64,
    /// The flow's time (µs since `epoch`) from which RTT samples enter the percentiles.
    rtt_from_us: u64,
    owd: OneWayDelay,
    rng_state: u64,
    trace: Vec<TraceSample>,
    trace_interval_us: u64,
    next_trace_us: u64,

    // End.
    completed: bool,
    receiver_intact: Option<bool>,
    stopped_early: bool,
    stop_deadline_us: Option<u64>,
    done_us: u64,

    // Buffers.
    out: Vec<u8>,
    msgs: Vec<SendMsg>,
    msg_open: bool,
    segs: Vec<PendingSeg>,
    rx: RecvBatch,
}

impl<'a> FlowSender<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        cfg: &SenderConfig,
        index: usize,
        flow_id: u32,
        sock: UdpSocket,
        local: SocketAddr,
        gso: bool,
        rx_stamps: bool,
        ctrl: Box<dyn FlowController + 'a>,
        hs: Handshake,
    ) -> Self {
        let spec = &cfg.flows[index];
        let mut rtt = RttEstimator::default();
        rtt.update(hs.rtt_us, 0);
        let (final_len, fin_state, duration_us) = match spec.amount {
            Amount::Bytes(b) => (Some(b), FinState::Pending, None),
            Amount::Duration(d) => (None, FinState::Open, Some(d.as_micros() as u64)),
        };
        let dead_peer = MIN_DEAD_PEER.max(cfg.handshake_timeout * 2);
        let mut f = FlowSender {
            index,
            flow_id,
            seed: pattern::seed(flow_id),
            mss: cfg.mss,
            dest: cfg.dest,
            local,
            algorithm: spec.algorithm.clone(),
            duration_us,
            rate_cap: spec.rate_cap,
            sock,
            gso,
            epoch: Instant::now(),
            ctrl,
            next_offset: 0,
            committed_offset: 0,
            final_len,
            fin_state,
            fin_sent_before: false,
            hasher: Box::new(Xxh3Default::new()),
            final_hash: None,
            pn_next: 0,
            base_pn: 0,
            sent: VecDeque::with_capacity(1024),
            bytes_in_flight: 0,
            pkts_in_flight: 0,
            retx: BTreeMap::new(),
            retx_bytes: 0,
            probe_pending: false,
            cum_acked: 0,
            sacked_ends: BinaryHeap::new(),
            largest_acked: None,
            loss_scan_from: 0,
            loss_time: None,
            pto_count: 0,
            last_eliciting_us: 0,
            ecn_ce: 0,
            rtt,
            last_ack_rx_us: 0,
            dead_peer_us: dead_peer.as_micros() as u64,
            arrivals: ArrivalClock::new(rx_stamps),
            pacer: Pacer::new(0, 0),
            delivered: 0,
            delivered_time_us: 0,
            first_sent_us: 0,
            sent_cum: 0,
            delivery_rate: RateWindow::default(),
            send_rate: RateWindow::default(),
            rate_in: 0,
            rate_out: 0,
            last_invoke_us: 0,
            controllers: Vec::new(),
            sent_packets: 0,
            sent_bytes: 0,
            retx_packets: 0,
            retx_bytes_total: 0,
            lost_packets: 0,
            timeouts: 0,
            probes: 0,
            acks: 0,
            ignored: hs.ignored,
            handshake_rtt_us: hs.rtt_us,
            rtt_samples: Vec::new(),
            rtt_seen: 0,
            rtt_from_us: 0,
            owd: OneWayDelay::new(cfg.owd_base_window.as_micros() as u64),
            rng_state: u64::from(flow_id) | 1,
            trace: Vec::new(),
            trace_interval_us: cfg.trace_interval.as_micros() as u64,
            next_trace_us: 0,
            completed: false,
            receiver_intact: None,
            stopped_early: false,
            stop_deadline_us: None,
            done_us: 0,
            out: vec![0; 640 * 1024],
            msgs: Vec::with_capacity(sio::MAX_SEND_MSGS),
            msg_open: false,
            segs: Vec::with_capacity(1024),
            rx: RecvBatch::new(64, 2048),
        };
        f.note_controller();
        f
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    fn max_segs_per_msg(&self) -> usize {
        if self.gso {
            let wire = DATA_HEADER_LEN + self.mss as usize;
            (sio::MAX_GSO_BYTES / wire).clamp(1, sio::MAX_GSO_SEGMENTS)
        } else {
            1
        }
    }

    fn max_msgs(&self) -> usize {
        if self.gso { 8 } else { sio::MAX_SEND_MSGS }
    }

    fn run(&mut self, stop: &AtomicBool, abort: &AtomicBool) -> Result<(), Error> {
        loop {
            let now = self.now_us();
            if abort.load(Ordering::Relaxed) {
                self.stopped_early = true;
                return Ok(());
            }
            if stop.load(Ordering::Relaxed) && self.stop_deadline_us.is_none() {
                self.stop_deadline_us = Some(now + STOP_GRACE_US);
                if self.final_len.is_none_or(|l| l > self.next_offset) {
                    self.stopped_early = true;
                    self.end_stream(self.next_offset);
                }
            }
            self.receive()?;
            if self.completed {
                return Ok(());
            }
            let now = self.now_us();
            self.on_timers(now);
            if let Some(d) = self.duration_us
                && now >= d
                && self.final_len.is_none()
            {
                self.end_stream(self.next_offset);
            }
            if now
                >= self
                    .last_invoke_us
                    .saturating_add(self.ctrl.tick_us().max(1))
            {
                self.invoke(AckSample::default(), None, now, true);
            }
            if self.trace_interval_us > 0 && now >= self.next_trace_us {
                self.take_trace(now);
                self.next_trace_us = (self.next_trace_us + self.trace_interval_us).max(now);
            }
            if let Some(d) = self.stop_deadline_us
                && now >= d
            {
                return Ok(());
            }
            if self.awaiting_peer() && now > self.last_ack_rx_us + self.dead_peer_us {
                return Err(self.peer_lost(format!(
                    "no ACK for {}",
                    HumanDuration(Duration::from_micros(self.dead_peer_us))
                )));
            }
            let limit = self.send_burst(now)?;
            if limit == Limit::Batch {
                continue;
            }
            // Sleep until something can happen.
            let now = self.now_us();
            let mut wake = now + 50_000;
            wake = wake.min(
                self.last_invoke_us
                    .saturating_add(self.ctrl.tick_us().max(1)),
            );
            if self.trace_interval_us > 0 {
                wake = wake.min(self.next_trace_us);
            }
            if let Some(t) = self.loss_time {
                wake = wake.min(t);
            }
            if self.awaiting_peer() {
                wake = wake.min(self.pto_deadline());
                wake = wake.min(self.last_ack_rx_us + self.dead_peer_us + 1);
            }
            if let Some(d) = self.duration_us
                && self.final_len.is_none()
            {
                wake = wake.min(d);
            }
            if let Some(d) = self.stop_deadline_us {
                wake = wake.min(d);
            }
            match limit {
                Limit::Pacing(w) | Limit::App(w) => wake = wake.min(now.saturating_add(w)),
                Limit::Batch => wake = now,
                Limit::Cwnd | Limit::Socket | Limit::Idle => {}
            }
            if wake > now + SPIN_US {
                sio::wait(
                    self.sock.as_raw_fd(),
                    limit == Limit::Socket,
                    Some(Duration::from_micros(wake - now)),
                )
                .map_err(|e| Error::io("waiting on the sender socket", e))?;
            } else {
                // Shorter than a system call's wake-up latency: spin.
                while self.now_us() < wake {
                    std::hint::spin_loop();
                }
            }
        }
    }

    fn peer_lost(&self, reason: String) -> Error {
        Error::PeerLost {
            addr: self.dest,
            flow_id: self.flow_id,
            reason,
            elapsed: self.epoch.elapsed(),
        }
    }

    /// Ends the stream at `len` bytes (or shortens it to that): no new data beyond, FIN to send.
    fn end_stream(&mut self, len: u64) {
        if self.final_len.is_none_or(|l| len < l) {
            self.final_len = Some(len);
        }
        if self.fin_state == FinState::Open {
            self.fin_state = FinState::Pending;
        }
    }

    fn note_controller(&mut self) {
        let name = self.ctrl.controller_name();
        if !self.controllers.contains(&name) {
            self.controllers.push(name);
        }
    }

    /// Whether the flow waits for the receiver: packets in flight, or the FIN acknowledged
    /// but the stream's completion not yet confirmed.
    fn awaiting_peer(&self) -> bool {
        self.pkts_in_flight > 0 || (self.fin_state == FinState::Acked && !self.completed)
    }

    fn pto_deadline(&self) -> u64 {
        let period = self.rtt.pto() << self.pto_count.min(10);
        self.last_eliciting_us + period.min(30_000_000)
    }

    fn bytes_pending(&self) -> u32 {
        let unsent = match (self.final_len, self.rate_cap) {
            (Some(l), _) => l.saturating_sub(self.committed_offset),
            (None, Some(_)) => self.app_available(self.now_us()),
            (None, None) => return u32::MAX,
        };
        (unsent + self.retx_bytes).min(u64::from(u32::MAX)) as u32
    }

    /// Stream bytes the application has produced but not sent (rate-capped flows).
    fn app_available(&self, now: u64) -> u64 {
        match self.rate_cap {
            Some(r) => {
                let produced =
                    (u128::from(r) * u128::from(now) / 1_000_000) as u64 + u64::from(self.mss);
                produced.saturating_sub(self.next_offset)
            }
            None => u64::MAX,
        }
    }

    /// Hands `s` to the controller (with the relative one-way delay `owd_us` of its RTT sample,
    /// if any), as a tick with `tick`.
    fn invoke(&mut self, mut s: AckSample, owd_us: Option<u64>, now: u64, tick: bool) {
        s.bytes_in_flight = self.bytes_in_flight.min(u64::from(u32::MAX)) as u32;
        s.packets_in_flight = self.pkts_in_flight.min(u64::from(u32::MAX)) as u32;
        s.bytes_pending = self.bytes_pending();
        s.rate_incoming = self.rate_in;
        s.rate_outgoing = self.rate_out;
        match (tick, owd_us) {
            (true, _) => self.ctrl.on_tick(&s),
            (false, Some(d)) => self.ctrl.on_ack_with_owd(&s, d),
            (false, None) => self.ctrl.on_ack(&s),
        }
        self.last_invoke_us = now;
        self.note_controller();
    }

    /// Stream bytes the receiver has acknowledged: everything below the contiguous offset,
    /// and above it the union of the acknowledged packets' byte ranges (a retransmission and
    /// its original may both be acknowledged; their bytes count once). O(n log n) in the
    /// packets above the offset, once per trace sample.
    fn received_bytes(&self) -> u64 {
        let cum = self.cum_acked;
        let mut above: Vec<(u64, u64)> = self
            .sent
            .iter()
            .filter(|p| p.state == PktState::Acked && p.end() > cum)
            .map(|p| (p.offset.max(cum), p.end()))
            .collect();
        above.sort_unstable();
        union_len(cum, &above)
    }

    fn take_trace(&mut self, now: u64) {
        self.trace.push(TraceSample {
            t_s: now as f64 / 1e6,
            cwnd_bytes: self.ctrl.cwnd(),
            pacing_rate_bytes_per_s: self.ctrl.pacing_rate(),
            srtt_us: self.rtt.smoothed(),
            bytes_in_flight: self.bytes_in_flight,
            delivered_bytes: self.cum_acked,
            received_bytes: Some(self.received_bytes()),
            controller: self.ctrl.controller_name(),
            owd_excess_us: self.owd.take_interval_mean(),
        });
    }

    // ---------------------------------------------------------------- receiving

    fn receive(&mut self) -> Result<(), Error> {
        for _ in 0..4 {
            let before_read = self.now_us();
            self.arrivals.read_began(before_read);
            let n = match sio::recv_batch(self.sock.as_raw_fd(), &mut self.rx) {
                Ok(n) => n,
                Err(e) if sio::is_refused(&e) => {
                    return Err(self.peer_lost("connection refused (the receiver is gone)".into()));
                }
                Err(e) if sio::is_transient_path_error(&e) => {
                    tracing::debug!("receive error ignored: {e}");
                    continue;
                }
                Err(e) => return Err(Error::io(format!("receiving from {}", self.dest), e)),
            };
            if n == 0 {
                self.arrivals.batch_done(true);
                return Ok(());
            }
            // The wall clock first ([`ArrivalClock`]).
            let wall_ns = self.arrivals.wall_ns();
            let now = self.now_us();
            for i in 0..n {
                if self.rx.meta(i).truncated {
                    self.ignored += 1;
                    continue;
                }
                let at = self
                    .arrivals
                    .stamp(self.rx.meta(i).rx_wall_ns, now, wall_ns);
                let decoded = match packet::decode(self.rx.data(i)) {
                    Ok(Packet::Ack(a)) if a.flow_id == self.flow_id => Some(a),
                    // Duplicate answers to retried HELLOs are expected.
                    Ok(Packet::HelloAck(h)) if h.flow_id == self.flow_id => None,
                    _ => {
                        self.ignored += 1;
                        None
                    }
                };
                if let Some(a) = decoded {
                    if !self.on_ack(&a, at, now) {
                        self.ignored += 1;
                    }
                    if self.completed {
                        return Ok(());
                    }
                }
            }
            // Fewer than it had room for: the socket was empty when this read ended.
            self.arrivals.batch_done(n < self.rx.slots());
            if n < self.rx.slots() {
                return Ok(());
            }
        }
        Ok(())
    }

    fn pkt_mut(&mut self, pn: u64) -> Option<&mut SentPkt> {
        let idx = pn.checked_sub(self.base_pn)?;
        self.sent.get_mut(idx as usize)
    }

    /// Processes one ACK that arrived at `at` and is read at `now` (µs, `at` ≤ `now`); false if
    /// it is impossible (ignored). The RTT, one-way-delay and delivery-rate samples go by `at`;
    /// loss detection, the sending rate and the controller's call by `now`.
    fn on_ack(&mut self, a: &Ack, at: u64, now: u64) -> bool {
        let Some(largest) = a.largest() else {
            return false;
        };
        if largest >= self.pn_next || a.cum_offset > self.committed_offset {
            return false;
        }
        let complete = a.flags & flags::COMPLETE != 0;
        if complete && (self.final_len != Some(a.cum_offset) || self.fin_state == FinState::Open) {
            return false;
        }
        self.acks += 1;
        self.last_ack_rx_us = at;
        let mut s = AckSample::default();
        let new_cum = self.cum_acked.max(a.cum_offset);
        let mut newly_acked = false;
        let mut rtt_latest = None;
        let mut sample_pkt: Option<SentPkt> = None;
        for &(lo, hi) in a.ranges() {
            let lo = lo.max(self.base_pn);
            if hi < lo {
                continue;
            }
            for pn in lo..=hi {
                let Some(p) = self.pkt_mut(pn) else {
                    break;
                };
                if p.state != PktState::InFlight {
                    continue;
                }
                p.state = PktState::Acked;
                let p = *p;
                newly_acked = true;
                self.bytes_in_flight -= u64::from(p.len);
                self.pkts_in_flight -= 1;
                self.delivered += u64::from(p.len);
                if sample_pkt.is_none_or(|q: SentPkt| p.time_us >= q.time_us) {
                    sample_pkt = Some(p);
                }
                if p.end() <= new_cum {
                    s.packets_acked += 1;
                } else {
                    s.packets_misordered += 1;
                    s.bytes_misordered += p.len;
                    self.sacked_ends.push(Reverse(p.end()));
                }
                if p.fin {
                    self.fin_state = FinState::Acked;
                }
                if pn == largest {
                    rtt_latest = Some(at.saturating_sub(p.time_us));
                }
            }
        }
        if new_cum > self.cum_acked {
            s.bytes_acked = (new_cum - self.cum_acked).min(u64::from(u32::MAX)) as u32;
            self.cum_acked = new_cum;
            while let Some(&Reverse(end)) = self.sacked_ends.peek() {
                if end > new_cum {
                    break;
                }
                self.sacked_ends.pop();
                s.packets_acked += 1;
            }
            // Packets the receiver has (below its contiguous offset) although their numbers
            // were not in the ranges (ranges it had to forget): acknowledged too.
            for i in 0..self.sent.len() {
                let p = self.sent[i];
                if p.state == PktState::Acked || p.state == PktState::Lost {
                    continue;
                }
                if p.fin || p.end() > new_cum {
                    break;
                }
                self.sent[i].state = PktState::Acked;
                newly_acked = true;
                self.bytes_in_flight -= u64::from(p.len);
                self.pkts_in_flight -= 1;
                self.delivered += u64::from(p.len);
                if sample_pkt.is_none_or(|q: SentPkt| p.time_us >= q.time_us) {
                    sample_pkt = Some(p);
                }
                s.packets_acked += 1;
            }
        }
        let mut owd_us = None;
        if let Some(latest) = rtt_latest {
            let adjusted = self.rtt.update(latest, u64::from(a.ack_delay_us));
            s.rtt_us = adjusted;
            if at >= self.rtt_from_us {
                self.record_rtt(adjusted);
            }
            // The echoed send timestamp and the receive timestamp are both of the largest
            // packet, the one this RTT sample is of.
            owd_us = Some(self.owd.update(at, a.echo_ts, a.recv_ts));
        }
        if a.ecn_ce > self.ecn_ce {
            let d = (a.ecn_ce - self.ecn_ce).min(u64::from(u32::MAX)) as u32;
            s.ecn_packets = d;
            s.ecn_bytes = d.saturating_mul(self.mss);
            self.ecn_ce = a.ecn_ce;
        }
        if self.largest_acked.is_none_or(|l| largest > l) {
            self.largest_acked = Some(largest);
        }
        // As of the ACK's arrival, like the RTT that sets the time threshold.
        s.lost_pkts = self.detect_lost(at);
        if newly_acked {
            self.pto_count = 0;
        }
        if complete {
            self.completed = true;
            self.receiver_intact = Some(a.flags & flags::INTACT != 0);
            self.fin_state = FinState::Acked;
            self.done_us = at;
        }
        self.pop_resolved();
        let window = self.rtt.smoothed().clamp(1_000, 1_000_000);
        let windowed = self.delivery_rate.update(at, self.delivered, window);
        let windowed_out = self.send_rate.update(now, self.sent_cum, window);
        (self.rate_in, self.rate_out) = match sample_pkt {
            // A delivery-rate sample as BBR takes it: bytes delivered since the packet was sent,
            // over the longer of its send and ACK intervals, so ACK compression cannot inflate it;
            // and the send rate over the same packets (not the last srtt's, which a controller
            // that takes the smaller of the two would mix with a later phase of its sending).
            Some(p) => {
                self.delivered_time_us = at;
                self.first_sent_us = p.time_us;
                let send_elapsed = p.time_us.saturating_sub(p.first_sent_us);
                let ack_elapsed = at.saturating_sub(p.delivered_time_us);
                let interval = send_elapsed.max(ack_elapsed);
                let data = u128::from(self.delivered - p.delivered);
                if interval > 0 && p.delivered_time_us > 0 {
                    let rate_in = (data * 1_000_000 / u128::from(interval)) as u64;
                    let rate_out = if send_elapsed > 0 {
                        (data * 1_000_000 / u128::from(send_elapsed)) as u64
                    } else {
                        windowed_out
                    };
                    (rate_in, rate_out)
                } else {
                    (windowed, windowed_out)
                }
            }
            None => (windowed, windowed_out),
        };
        self.invoke(s, owd_us, now, false);
        true
    }

    fn record_rtt(&mut self, us: u64) {
        let v = us.min(u64::from(u32::MAX)) as u32;
        self.rtt_seen += 1;
        if self.rtt_samples.len() < RTT_RESERVOIR {
            self.rtt_samples.push(v);
        } else {
            // xorshift64: cheap randomness for reservoir sampling.
            let mut x = self.rng_state;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.rng_state = x;
            let j = x % self.rtt_seen;
            if (j as usize) < RTT_RESERVOIR {
                self.rtt_samples[j as usize] = v;
            }
        }
    }

    /// Drops acknowledged and lost packets from the front of the table.
    fn pop_resolved(&mut self) {
        while let Some(p) = self.sent.front() {
            if p.state == PktState::InFlight {
                break;
            }
            self.sent.pop_front();
            self.base_pn += 1;
        }
        self.loss_scan_from = self.loss_scan_from.max(self.base_pn);
    }

    /// RFC 9002 DetectAndRemoveLostPackets; returns the number newly declared lost.
    fn detect_lost(&mut self, now: u64) -> u32 {
        self.loss_time = None;
        let Some(largest) = self.largest_acked else {
            return 0;
        };
        let delay = self.rtt.loss_delay();
        let lost_before = now.saturating_sub(delay);
        let mut lost = 0u32;
        let mut first_pending = None;
        let from = self.loss_scan_from.max(self.base_pn);
        let to = largest.min(self.pn_next.saturating_sub(1));
        let mut pn = from;
        while pn <= to {
            let idx = (pn - self.base_pn) as usize;
            let Some(p) = self.sent.get(idx).copied() else {
                break;
            };
            if p.state == PktState::InFlight {
                if p.time_us <= lost_before || largest >= pn + PACKET_THRESHOLD {
                    self.mark_lost(idx);
                    lost += 1;
                } else {
                    first_pending.get_or_insert(pn);
                    let t = p.time_us + delay;
                    self.loss_time = Some(self.loss_time.map_or(t, |l| l.min(t)));
                }
            }
            pn += 1;
        }
        self.loss_scan_from = first_pending.unwrap_or(to + 1).max(self.loss_scan_from);
        lost
    }

    fn mark_lost(&mut self, idx: usize) {
        let p = self.sent[idx];
        self.sent[idx].state = PktState::Lost;
        self.bytes_in_flight -= u64::from(p.len);
        self.pkts_in_flight -= 1;
        self.lost_packets += 1;
        if p.fin {
            if self.fin_state == FinState::InFlight {
                self.fin_state = FinState::Pending;
            }
        } else if p.end() > self.cum_acked {
            self.queue_retx(p.offset, p.len);
        }
    }

    fn queue_retx(&mut self, offset: u64, len: u32) {
        match self.retx.get_mut(&offset) {
            Some(l) if *l >= len => {}
            Some(l) => {
                self.retx_bytes += u64::from(len - *l);
                *l = len;
            }
            None => {
                self.retx.insert(offset, len);
                self.retx_bytes += u64::from(len);
            }
        }
    }

    fn on_timers(&mut self, now: u64) {
        if let Some(t) = self.loss_time
            && now >= t
        {
            let lost = self.detect_lost(now);
            if lost > 0 {
                self.pop_resolved();
                let s = AckSample {
                    lost_pkts: lost,
                    ..AckSample::default()
                };
                self.invoke(s, None, now, false);
            }
            return;
        }
        if !self.awaiting_peer() || now < self.pto_deadline() {
            return;
        }
        if self.pto_count == 0 {
            // Tail-loss probe: one packet beyond the window, to provoke an ACK.
            tracing::trace!(
                flow = format_args!("{:08x}", self.flow_id),
                in_flight = self.pkts_in_flight,
                "tail-loss probe"
            );
            self.probe_pending = true;
            self.pto_count = 1;
            // Re-arm from now even if the probe cannot leave immediately.
            self.last_eliciting_us = now;
            return;
        }
        // Retransmission timeout.
        let mut lost = 0u32;
        for idx in 0..self.sent.len() {
            if self.sent[idx].state == PktState::InFlight {
                self.mark_lost(idx);
                lost += 1;
            }
        }
        if self.fin_state == FinState::Acked && !self.completed {
            // The FIN arrived but completion was never confirmed: say it again.
            self.fin_state = FinState::Pending;
        }
        self.loss_time = None;
        self.timeouts += 1;
        self.pto_count += 1;
        self.probe_pending = false;
        self.pop_resolved();
        tracing::debug!(
            flow = format_args!("{:08x}", self.flow_id),
            lost,
            pto_count = self.pto_count,
            srtt_us = self.rtt.smoothed(),
            rttvar_us = self.rtt.var(),
            retx_queued = self.retx.len(),
            fin = ?self.fin_state,
            "retransmission timeout"
        );
        let s = AckSample {
            lost_pkts: lost,
            was_timeout: true,
            ..AckSample::default()
        };
        self.invoke(s, None, now, false);
        self.last_eliciting_us = now;
    }

    // ---------------------------------------------------------------- sending

    /// Next retransmission range, trimmed to what the receiver lacks.
    fn peek_retx(&mut self) -> Option<(u64, u32)> {
        loop {
            let (&off, &len) = self.retx.first_key_value()?;
            let end = off + u64::from(len);
            if end <= self.cum_acked || off < self.cum_acked {
                self.retx.remove(&off);
                self.retx_bytes -= u64::from(len);
                if end > self.cum_acked {
                    let start = self.cum_acked;
                    self.queue_retx(start, (end - start) as u32);
                }
                continue;
            }
            return Some((off, len));
        }
    }

    /// Next new-data segment, or why there is none.
    fn peek_new(&self, now: u64) -> Result<(u64, u32), Limit> {
        let remaining = match self.final_len {
            Some(l) => l.saturating_sub(self.next_offset),
            None => u64::MAX,
        };
        if remaining == 0 {
            return Err(Limit::Idle);
        }
        if self.pkts_in_flight + self.segs.len() as u64 >= MAX_PKTS_IN_FLIGHT {
            return Err(Limit::Cwnd);
        }
        let want = remaining.min(u64::from(self.mss));
        if let Some(rate) = self.rate_cap {
            let avail = self.app_available(now);
            if avail < want {
                let wait = ((want - avail) as u128 * 1_000_000 / u128::from(rate)) as u64 + 1;
                return Err(Limit::App(wait));
            }
        }
        Ok((self.next_offset, want as u32))
    }

    fn fin_ready(&mut self) -> bool {
        let Some(len) = self.final_len else {
            return false;
        };
        if self.fin_state != FinState::Pending
            || self.committed_offset < len
            || self.next_offset < len
        {
            return false;
        }
        if self.final_hash.is_none() {
            self.final_hash = Some(self.hasher.digest128());
        }
        true
    }

    /// The highest in-flight data packet's range (what a probe re-sends when nothing else is
    /// waiting).
    fn probe_copy(&self) -> Option<(u64, u32)> {
        self.sent
            .iter()
            .rev()
            .find(|p| p.state == PktState::InFlight && !p.fin && p.end() > self.cum_acked)
            .map(|p| (p.offset, p.len))
    }

    fn send_burst(&mut self, now: u64) -> Result<Limit, Error> {
        self.msgs.clear();
        self.segs.clear();
        self.msg_open = false;
        let mss = u64::from(self.mss);
        let cwnd = u64::from(self.ctrl.cwnd()).max(mss);
        let rate = self.ctrl.pacing_rate();
        let max_segs = self.max_segs_per_msg();
        let max_msgs = self.max_msgs();
        let burst_cap = (max_segs as u64 * mss).max(mss);
        let burst = match rate {
            Some(r) => {
                let burst = Pacer::burst(r, mss, burst_cap);
                self.pacer.refill(now, r, burst);
                burst
            }
            None => {
                self.pacer.fill(now, burst_cap);
                burst_cap
            }
        };
        let mut batch_bytes = 0u64;
        let mut pos = 0usize;
        let limit = loop {
            let probe = self.probe_pending;
            // Choose the next packet: retransmission, new data, FIN, or a probe copy.
            let mut copy = false;
            let (kind, offset, len) = if let Some((off, len)) = self.peek_retx() {
                (SegKind::Retx, off, len)
            } else {
                match self.peek_new(now) {
                    Ok((off, len)) => (SegKind::New, off, len),
                    Err(why) => {
                        if self.fin_ready() {
                            (SegKind::Fin, self.final_len.unwrap_or(0), 0)
                        } else if probe {
                            match self.probe_copy() {
                                Some((off, len)) => {
                                    copy = true;
                                    (SegKind::Retx, off, len)
                                }
                                // Only the FIN is outstanding (or the receiver has not yet
                                // confirmed completion): probe with a copy of it.
                                None if matches!(
                                    self.fin_state,
                                    FinState::InFlight | FinState::Acked
                                ) && self.final_hash.is_some() =>
                                {
                                    copy = true;
                                    (SegKind::Fin, self.final_len.unwrap_or(0), 0)
                                }
                                None => {
                                    self.probe_pending = false;
                                    break why;
                                }
                            }
                        } else {
                            break why;
                        }
                    }
                }
            };
            let len64 = u64::from(len);
            if !probe {
                let in_flight = self.bytes_in_flight + batch_bytes;
                if in_flight > 0 && in_flight + len64 > cwnd {
                    break Limit::Cwnd;
                }
                if let Some(r) = rate
                    && !self.pacer.try_take(len64)
                {
                    // Sleep until half a burst is available rather than one packet: fewer,
                    // larger (GSO) sends, and a late wake-up still finds tokens in the bucket.
                    let want = len64.max(burst / 2);
                    break Limit::Pacing(self.pacer.wait_us(want, r).max(1));
                }
            }
            // Place it in the batch: append to the open GSO message if it fits.
            let wire = DATA_HEADER_LEN
                + if kind == SegKind::Fin {
                    HASH_LEN
                } else {
                    len as usize
                };
            let appended = match self.msgs.last() {
                Some(m) if self.msg_open => {
                    let seg = usize::from(m.seg);
                    let count = m.len.div_ceil(seg.max(1));
                    wire <= seg && count < max_segs && m.len + wire <= sio::MAX_GSO_BYTES
                }
                _ => false,
            };
            if !appended && (self.msgs.len() >= max_msgs || pos + wire > self.out.len()) {
                if !probe && rate.is_some() {
                    self.pacer.give_back(len64);
                }
                break Limit::Batch;
            }
            if !appended {
                self.msgs.push(SendMsg {
                    start: pos,
                    len: 0,
                    seg: wire as u16,
                });
                self.msg_open = max_segs > 1;
            }
            let pn = self.pn_next;
            let hdr = DataHeader {
                flow_id: self.flow_id,
                flags: if kind == SegKind::Fin { flags::FIN } else { 0 },
                pn,
                offset,
                ts: now as u32,
            };
            packet::encode_data_header(&mut self.out[pos..pos + DATA_HEADER_LEN], &hdr);
            let body = &mut self.out[pos + DATA_HEADER_LEN..pos + wire];
            if kind == SegKind::Fin {
                body.copy_from_slice(&self.final_hash.unwrap_or(0).to_be_bytes());
            } else {
                body.copy_from_slice(pattern::slice(self.seed, offset, len as usize));
            }
            pos += wire;
            let msg_idx = self.msgs.len() - 1;
            if let Some(m) = self.msgs.last_mut() {
                m.len += wire;
                if wire < usize::from(m.seg) {
                    self.msg_open = false;
                }
            }
            // Take it from its source.
            match kind {
                SegKind::Retx if !copy => {
                    self.retx.remove(&offset);
                    self.retx_bytes -= len64;
                }
                SegKind::Retx => {}
                SegKind::New => self.next_offset = offset + len64,
                SegKind::Fin if !copy => self.fin_state = FinState::InFlight,
                SegKind::Fin => {}
            }
            if probe {
                self.probe_pending = false;
            }
            self.segs.push(PendingSeg {
                pn,
                offset,
                len,
                kind,
                probe,
                copy,
                msg: msg_idx,
            });
            self.pn_next += 1;
            batch_bytes += len64;
        };
        if self.segs.is_empty() {
            return Ok(limit);
        }
        // Single-segment messages need no GSO.
        for m in &mut self.msgs {
            if m.len <= usize::from(m.seg) || !self.gso {
                m.seg = 0;
            }
        }
        match sio::send_msgs(self.sock.as_raw_fd(), &self.out, &self.msgs) {
            Ok(k) => {
                self.commit(k, now);
                if k < self.msgs.len() {
                    return Ok(Limit::Socket);
                }
                Ok(limit)
            }
            Err(e) if sio::is_transient_send_error(&e) => {
                self.commit(0, now);
                Ok(Limit::Socket)
            }
            Err(e) if sio::is_transient_path_error(&e) => {
                tracing::debug!("send error ignored: {e}");
                self.commit(0, now);
                Ok(Limit::Idle)
            }
            Err(e) if sio::is_refused(&e) => {
                self.commit(0, now);
                Err(self.peer_lost("connection refused (the receiver is gone)".into()))
            }
            Err(e) if self.gso && sio::is_gso_error(&e) => {
                tracing::warn!(
                    "UDP GSO failed towards {} ({e}); sending without it",
                    self.dest
                );
                self.gso = false;
                self.commit(0, now);
                Ok(Limit::Batch)
            }
            Err(e) => {
                self.commit(0, now);
                Err(Error::io(format!("sending to {}", self.dest), e))
            }
        }
    }

    /// Registers the packets of the first `k` messages as sent and undoes the rest.
    fn commit(&mut self, k: usize, now: u64) {
        let segs = std::mem::take(&mut self.segs);
        let mut first_unsent_pn = None;
        for seg in &segs {
            if seg.msg < k {
                debug_assert_eq!(seg.pn, self.base_pn + self.sent.len() as u64);
                if self.pkts_in_flight == 0 {
                    // Sending after an idle period: the rate sample starts now.
                    self.first_sent_us = now;
                    self.delivered_time_us = now;
                }
                self.sent.push_back(SentPkt {
                    offset: seg.offset,
                    len: seg.len,
                    time_us: now,
                    state: PktState::InFlight,
                    fin: seg.kind == SegKind::Fin,
                    delivered: self.delivered,
                    delivered_time_us: self.delivered_time_us,
                    first_sent_us: self.first_sent_us,
                });
                let len = u64::from(seg.len);
                self.bytes_in_flight += len;
                self.pkts_in_flight += 1;
                self.sent_packets += 1;
                self.sent_bytes += len;
                self.sent_cum += len;
                self.last_eliciting_us = now;
                if seg.probe {
                    self.probes += 1;
                }
                match seg.kind {
                    SegKind::New => {
                        pattern::hash_range(&mut self.hasher, self.seed, seg.offset, len);
                        self.committed_offset = seg.offset + len;
                    }
                    SegKind::Retx => {
                        self.retx_packets += 1;
                        self.retx_bytes_total += len;
                    }
                    SegKind::Fin => {
                        if self.fin_sent_before {
                            self.retx_packets += 1;
                        }
                        self.fin_sent_before = true;
                    }
                }
            } else {
                first_unsent_pn.get_or_insert(seg.pn);
            }
        }
        // Undo, newest first.
        for seg in segs.iter().rev().filter(|s| s.msg >= k) {
            match seg.kind {
                SegKind::New => self.next_offset = self.next_offset.min(seg.offset),
                SegKind::Retx if !seg.copy => self.queue_retx(seg.offset, seg.len),
                SegKind::Retx => {}
                SegKind::Fin if !seg.copy => self.fin_state = FinState::Pending,
                SegKind::Fin => {}
            }
            if seg.probe {
                self.probe_pending = true;
            }
            if self.ctrl.pacing_rate().is_some() && !seg.probe {
                self.pacer.give_back(u64::from(seg.len));
            }
        }
        if let Some(pn) = first_unsent_pn {
            // Never transmitted: their numbers are free again.
            self.pn_next = pn;
        }
        self.segs = segs;
        self.segs.clear();
        self.send_rate.update(
            now,
            self.sent_cum,
            self.rtt.smoothed().clamp(1_000, 1_000_000),
        );
    }

    // ---------------------------------------------------------------- summary

    fn summary(&mut self) -> SenderSummary {
        let end = if self.completed {
            self.done_us
        } else {
            self.now_us()
        };
        let secs = end as f64 / 1e6;
        let bytes = self.cum_acked;
        let mut rtts = std::mem::take(&mut self.rtt_samples);
        rtts.sort_unstable();
        let ms = |us: u32| f64::from(us) / 1e3;
        let hash = self.final_hash.unwrap_or_else(|| self.hasher.digest128());
        if self.trace_interval_us > 0 {
            let now = self.now_us();
            self.take_trace(now);
        }
        self.arrivals.log("ACK", Some(self.index));
        SenderSummary {
            flow: self.index,
            flow_id: self.flow_id,
            algorithm: self.algorithm.clone(),
            controllers: self.controllers.clone(),
            local: self.local.to_string(),
            remote: self.dest.to_string(),
            mss: self.mss,
            bytes,
            duration_s: secs,
            goodput_mbps: mbps(bytes, secs),
            handshake_rtt_ms: self.handshake_rtt_us as f64 / 1e3,
            rtt_min_ms: self.rtt.min() as f64 / 1e3,
            rtt_p50_ms: ms(percentile(&rtts, 0.50)),
            rtt_p95_ms: ms(percentile(&rtts, 0.95)),
            rtt_p99_ms: ms(percentile(&rtts, 0.99)),
            rtt_samples: Some(self.rtt_seen),
            srtt_ms: self.rtt.smoothed() as f64 / 1e3,
            owd_excess_mean_us: self.owd.mean(),
            sent_packets: self.sent_packets,
            sent_bytes: self.sent_bytes,
            retransmitted_packets: self.retx_packets,
            retransmitted_bytes: self.retx_bytes_total,
            lost_packets: self.lost_packets,
            timeouts: self.timeouts,
            probes: self.probes,
            acks: self.acks,
            ignored_datagrams: self.ignored,
            ecn_ce_packets: self.ecn_ce,
            gso: self.gso,
            // Most ACKs were timed by their stamps (not: stamping was asked for).
            ack_timestamps: self.arrivals.mostly_stamped(),
            hash: pattern::hash_hex(hash),
            completed: self.completed,
            receiver_intact: self.receiver_intact,
            stopped_early: self.stopped_early,
            trace: std::mem::take(&mut self.trace),
        }
    }
}

/// `base` plus the length of the union of `ranges` (half-open byte ranges sorted by start, all
/// at or above `base`).
fn union_len(base: u64, ranges: &[(u64, u64)]) -> u64 {
    let mut total = base;
    let mut reach = base;
    for &(start, end) in ranges {
        let start = start.max(reach);
        if end > start {
            total += end - start;
            reach = end;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::union_len;

    #[test]
    fn received_bytes_count_each_byte_once() {
        // Nothing beyond the contiguous offset.
        assert_eq!(union_len(1000, &[]), 1000);
        // Two packets past a hole: both count.
        assert_eq!(union_len(1000, &[(2000, 3000), (3000, 4000)]), 3000);
        // A retransmission acknowledged with its original, and an overlapping range: once.
        assert_eq!(
            union_len(0, &[(0, 1448), (0, 1448), (1000, 2000), (5000, 6000)]),
            3000
        );
        // A range inside an earlier one adds nothing.
        assert_eq!(union_len(0, &[(0, 4000), (1000, 2000)]), 4000);
    }
}
