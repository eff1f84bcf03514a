//! The congestion controller s2n-quic calls, driving a [`FlowController`] (a libccp connection
//! of the CCP agent, or the built-in Reno) and owning the flow's pacing.
//!
//! s2n-quic's `unstable-congestion-controller` provider lets an application supply an
//! [`Endpoint`] that builds one [`CongestionController`] per network path. [`CcpEndpoint`] is
//! that endpoint: for every path it asks its [`Factory`] for a [`FlowController`] (with the
//! algorithm the flow names, so the agent picks it per flow) and wraps it in a
//! [`CcpController`]. The stack's callbacks become libccp's per-ACK primitives:
//!
//! | s2n-quic callback | [`AckSample`] field |
//! | --- | --- |
//! | `on_rtt_update` (latest RTT of the ACK's largest newly acknowledged packet; an ACK without one repeats the latest) | `rtt_us` |
//! | `on_packet_lost` (one call per lost packet) | `lost_pkts` (+1 each), in-flight gauges |
//! | `on_packet_lost` with `persistent_congestion` (RFC 9002 §7.6) | `was_timeout` |
//! | `on_explicit_congestion(ce_count)` (validated ECN-CE increase) | `ecn_packets`, `ecn_bytes` |
//! | `on_ack(bytes_acknowledged, newest packet info, …)` | `bytes_acked`, `packets_acked`, rates |
//! | `on_packet_sent` / `on_packet_lost` / `on_packet_discarded` (the flow's data packets) | `bytes_in_flight`, `packets_in_flight` |
//! | the application's [`FlowProbe::set_unwritten`], `on_packet_sent`'s `app_limited` | `bytes_pending` |
//!
//! **The window is the flow's data.** s2n-quic builds the path's controller before the
//! handshake and hands it the handshake's packets too (the client's Initial and Handshake
//! packets, sent before the application starts its stream: [`FlowProbe::start_data`]). They
//! are kept apart: their ACKs, RTT samples and losses are not handed to the
//! [`FlowController`] (its first ACK is that of the first data packet), they are not counted
//! in the `bytes_in_flight` it sees, and while they are outstanding s2n-quic is given the
//! controller's window plus their bytes (at most [`HANDSHAKE_ROOM_PKTS`] datagrams;
//! [`CongestionController::bytes_in_flight`] still counts them, as RFC 9002 §B.2 wants). So the flow's first flight is the whole initial window of
//! data, as on the udp datapath, whose controller starts after its HELLO handshake, and in
//! TCP, whose SYN is no part of the window. Without this the client's last Handshake packet
//! (its Finished, left unacknowledged until s2n-quic drops it when the handshake is
//! confirmed, about one RTT later) took one packet's room in the initial window, so 9 data packets
//! left at once and the 10th one RTT later, and the handshake's ACK was a one-packet first
//! round: algorithms that count rounds on acknowledged bytes saw their first rounds end late
//! (Vegas' slow start grew 10 → 25 packets in its first round instead of 10 → 20, held a
//! window just under the BDP, and exited one doubling later than over the udp datapath:
//! docs/results/datapaths.md).
//!
//! Within one ACK frame s2n-quic calls `on_rtt_update`, then `on_packet_lost` for the packets
//! the frame proves lost, then `on_explicit_congestion`, and last `on_ack` with the bytes of
//! every newly acknowledged packet of the path: the controller accumulates the first three and
//! hands the whole frame to the [`FlowController`] as one [`AckSample`] at `on_ack`, which is
//! what libccp calls one invocation. Losses found by the loss timer (no ACK) are handed over at
//! the next `on_packet_sent` (the retransmission follows at once) or the next tick.
//!
//! QUIC acknowledges packets, not stream bytes, and never retransmits a packet: every byte
//! count here is a UDP payload (QUIC headers, frames and AEAD tag included) and `bytes_acked`
//! counts every newly acknowledged packet, in order or not (`bytes_misordered` stays 0: QUIC's
//! ACK ranges make "out of order" meaningless for the window). `packets_acked` is
//! `bytes_acked` over the path's maximum datagram size, rounded up: s2n-quic reports acknowledged
//! bytes, not packets, per frame. The rates follow the delivery-rate estimate of TCP (the
//! draft-cheng-iccrg-delivery-rate-estimation method): each packet remembers the delivered
//! count and times when it was sent, and the newest acknowledged packet of a frame yields
//! `rate_outgoing` (delivered over the send interval) and `rate_incoming` (over the ACK
//! interval).
//!
//! **Pending bytes.** `bytes_pending` is what the application has to send but the network has
//! not seen yet: the bytes the application still has to hand to the stream
//! ([`FlowProbe::set_unwritten`]: a timed flow without a rate cap has an unlimited supply and
//! reports `u32::MAX`, as the udp datapath does; a sized one what remains of its size) plus,
//! when s2n-quic said at the last packet sent that the connection was not application-limited
//! (`app_limited == Some(false)`: it still had something to send — stream data, a lost frame,
//! an ACK — or its window was full), one maximum datagram: the stream's buffered bytes are not
//! visible to a congestion controller, only whether any remain. Algorithms read
//! `bytes_pending == 0` as "application-limited" (BBR's delivery-rate samples and full-pipe
//! check, RTCP's backlog), so a datapath that left it at 0 would make every busy flow look idle
//! to them (docs/results/datapaths.md: BBR never left Startup on ccp-quic).
//!
//! **Ticks.** libccp runs its timers (reports, `WaitRtts`, fallback detection) only on
//! invocations, so a flow without ACKs must still be invoked. Two sources do it: every packet
//! sent checks whether [`FlowController::tick_us`] passed since the last invocation and ticks
//! then, and the sending application runs a timer per flow that
//! calls [`FlowProbe::tick`] every half tick period (the timer cannot wake the connection: a
//! window the tick raised is used at the connection's next send opportunity — the next ACK,
//! pacing timer or probe timeout).
//!
//! **Window and pacing.** [`CongestionController::congestion_window`] is the controller's
//! window, at least two maximum datagrams (RFC 9002 §7.2's minimum window, below which a QUIC
//! sender cannot make progress). When the controller sets a pacing rate,
//! [`CongestionController::earliest_departure_time`] spaces packets by `size / rate`: each
//! sent packet pushes the next departure `size / rate` later than the later of the previous
//! departure and its own send time less [`PACING_CREDIT`] or two packets' time, whichever is
//! longer (a token bucket that deep, so a late wake-up of the pacing timer does not cost
//! rate). s2n-quic treats a departure
//! time less than its timer granularity (1 ms) ahead as due; on the sender's precise timer
//! ([`crate::io::PreciseIo`]) the controller hands each departure time over shifted by
//! [`crate::io::departure_shift`], so a packet leaves at its time or at most the timer's slack
//! (100 µs by default) before it. On s2n-quic's own millisecond timer (`--coarse-timer`)
//! bursts of up to about three milliseconds of the rate can leave back to back. Without a rate
//! the window alone limits sending, as in the udp datapath.

use ccp_udp::cc::{AckSample, FlowController, FlowMeta};
use s2n_quic::provider::congestion_controller::{
    CongestionController, Endpoint, PathInfo, Publisher, RandomGenerator, RttEstimator, Timestamp,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How far behind its send time a paced packet's departure slot may lie: the depth of the
/// pacer's token bucket in time (2 ms, or two packets' time at rates where that is longer; the
/// udp datapath's bucket holds 1 ms at the rate, and s2n-quic's timers add up to 1 ms of
/// lateness).
pub const PACING_CREDIT: Duration = Duration::from_millis(2);

/// Most handshake packets, in maximum datagrams, whose bytes s2n-quic may have in flight
/// beyond the controller's window (4: the client's handshake is an Initial and a Handshake
/// flight of one datagram each, plus their probe retransmissions; see the module
/// documentation). A bound, so that an application that never calls
/// [`FlowProbe::start_data`] does not send without a window.
pub const HANDSHAKE_ROOM_PKTS: u32 = 4;

/// Builds the [`FlowController`] of a new path.
pub type Factory = Arc<dyn Fn(&FlowMeta) -> Box<dyn FlowController> + Send + Sync>;

/// Counters and samples of one flow, for its summary.
#[derive(Clone, Debug, Default)]
pub struct FlowStats {
    /// Congestion-controlled packets sent.
    pub sent_packets: u64,
    /// UDP payload bytes of those packets.
    pub sent_bytes: u64,
    /// `on_ack` calls (ACK frames that newly acknowledged packets of the path).
    pub acks: u64,
    /// UDP payload bytes acknowledged.
    pub acked_bytes: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// UDP payload bytes declared lost.
    pub lost_bytes: u64,
    /// Persistent-congestion events (RFC 9002 §7.6), reported as timeouts.
    pub timeouts: u64,
    /// ECN-CE marks the peer reported.
    pub ecn_ce_packets: u64,
    /// Invocations of the controller on an ACK.
    pub ack_invocations: u64,
    /// Invocations of the controller without an ACK (ticks).
    pub ticks: u64,
    /// Times the window or pacing rate the controller set changed.
    pub control_changes: u64,
    /// RTT samples, µs (those from [`FlowProbe::set_rtt_from`]'s time on).
    pub rtt_samples_us: Vec<u32>,
    /// Smallest RTT sample, µs.
    pub rtt_min_us: u64,
    /// Smoothed RTT (s2n-quic's estimator), µs.
    pub srtt_us: u64,
    /// Controllers that were in charge, in order of first appearance.
    pub controllers: Vec<String>,
    /// Every data packet sent and every RTT sample, in the order they happened, if the flow
    /// records them ([`FlowProbe::record_packets`]; empty otherwise).
    pub packets: Vec<PacketEvent>,
}

/// What a [`PacketEvent`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEventKind {
    /// A data packet left: `at_us` = `sent_us` is its send time, `bytes` its UDP payload.
    Sent,
    /// An ACK frame gave an RTT sample (the newest packet it newly acknowledged): `at_us` is
    /// when the ACK was processed, `sent_us` when that packet left, `rtt_us` the sample.
    Rtt,
}

/// One data packet sent or one RTT sample, on s2n-quic's clock (the send timestamps it gives
/// the congestion controller), µs from the flow's first data packet. Packets that s2n-quic
/// sent in one batch share one send time, which is what makes pacing bursts visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketEvent {
    pub kind: PacketEventKind,
    /// When it happened (a `Sent` packet's send time, an `Rtt` sample's ACK), µs.
    pub at_us: u64,
    /// When the packet left, µs.
    pub sent_us: u64,
    /// UDP payload bytes (`Sent`; 0 for `Rtt`).
    pub bytes: u32,
    /// The RTT sample, µs (`Rtt`; 0 for `Sent`).
    pub rtt_us: u64,
}

/// The live state of one flow's controller, shared by the stack's controller (and its clones)
/// and the application's [`FlowProbe`].
struct State {
    ctl: Box<dyn FlowController>,
    mss: u32,
    cwnd: u32,
    rate: Option<u64>,
    /// The flow's data packets in flight (not the handshake's).
    bytes_in_flight: u32,
    packets_in_flight: u32,
    /// Bytes of the handshake's packets in flight (sent before [`FlowProbe::start_data`]).
    handshake_in_flight: u32,
    /// Bytes the application still has to hand to the stream (shared with [`FlowProbe`]).
    unwritten: Arc<AtomicU64>,
    /// The application started its stream: packets sent from now on carry the flow's data
    /// (shared with [`FlowProbe`]; before, they are the handshake's).
    data_started: Arc<AtomicBool>,
    /// RTT samples before this time stay out of `stats.rtt_samples_us` (shared with
    /// [`FlowProbe`]; unset: every sample counts).
    rtt_from: Arc<OnceLock<Instant>>,
    /// Record every data packet and RTT sample in `stats.packets` (shared with [`FlowProbe`]).
    record_packets: Arc<AtomicBool>,
    /// Send time of the flow's first data packet: the zero of `stats.packets`.
    first_data_sent: Option<Timestamp>,
    /// s2n-quic said at the last packet sent that the connection had more to send.
    backlog: bool,
    /// Accumulated since the last invocation: lost packets, CE marks, timeout, RTT sample.
    pending_lost: u32,
    pending_ce: u32,
    pending_timeout: bool,
    pending_rtt_us: u64,
    /// Delivery-rate estimation (bytes delivered so far and when, send time of the newest
    /// acknowledged packet).
    delivered: u64,
    delivered_time: Option<Timestamp>,
    first_sent_time: Option<Timestamp>,
    rate_outgoing: u64,
    rate_incoming: u64,
    /// Pacing: the earliest departure of the next packet.
    next_departure: Option<Timestamp>,
    last_invocation: Instant,
    stats: FlowStats,
    closed: bool,
}

impl State {
    /// A fresh path's state: `ctl`'s first window (at least two datagrams) and pacing rate,
    /// nothing in flight, the application's supply read through `probe`.
    fn new(ctl: Box<dyn FlowController>, mss: u32, probe: &FlowProbe) -> State {
        let name = ctl.controller_name();
        State {
            cwnd: ctl.cwnd().max(2 * mss),
            rate: ctl.pacing_rate().filter(|&r| r > 0),
            ctl,
            mss,
            bytes_in_flight: 0,
            packets_in_flight: 0,
            handshake_in_flight: 0,
            unwritten: probe.unwritten.clone(),
            data_started: probe.data_started.clone(),
            rtt_from: probe.rtt_from.clone(),
            record_packets: probe.record_packets.clone(),
            first_data_sent: None,
            backlog: false,
            pending_lost: 0,
            pending_ce: 0,
            pending_timeout: false,
            pending_rtt_us: 0,
            delivered: 0,
            delivered_time: None,
            first_sent_time: None,
            rate_outgoing: 0,
            rate_incoming: 0,
            next_departure: None,
            last_invocation: Instant::now(),
            stats: FlowStats {
                controllers: vec![name],
                ..FlowStats::default()
            },
            closed: false,
        }
    }

    fn sample(&self) -> AckSample {
        AckSample {
            lost_pkts: self.pending_lost,
            ecn_packets: self.pending_ce,
            ecn_bytes: self.pending_ce.saturating_mul(self.mss),
            was_timeout: self.pending_timeout,
            rtt_us: self.pending_rtt_us,
            rate_outgoing: self.rate_outgoing,
            rate_incoming: self.rate_incoming,
            bytes_in_flight: self.bytes_in_flight,
            packets_in_flight: self.packets_in_flight,
            bytes_pending: self.bytes_pending(),
            ..AckSample::default()
        }
    }

    /// Bytes the application has to send that the network has not seen: what it has not yet
    /// handed to the stream, plus one maximum datagram if the stream still buffers unsent data
    /// (see the module documentation).
    fn bytes_pending(&self) -> u32 {
        let queued = if self.backlog { self.mss } else { 0 };
        let pending = self
            .unwritten
            .load(Ordering::Relaxed)
            .saturating_add(u64::from(queued));
        u32::try_from(pending).unwrap_or(u32::MAX)
    }

    fn has_pending(&self) -> bool {
        self.pending_lost > 0 || self.pending_ce > 0 || self.pending_timeout
    }

    /// Hand `s` to the controller (an ACK or, with `tick`, a timer invocation) and adopt its
    /// window and rate.
    fn invoke(&mut self, s: &AckSample, tick: bool) {
        if self.closed {
            return;
        }
        if tick {
            self.ctl.on_tick(s);
            self.stats.ticks += 1;
        } else {
            self.ctl.on_ack(s);
            self.stats.ack_invocations += 1;
        }
        self.pending_lost = 0;
        self.pending_ce = 0;
        self.pending_timeout = false;
        self.pending_rtt_us = 0;
        self.last_invocation = Instant::now();
        let cwnd = self.ctl.cwnd().max(2 * self.mss);
        let rate = self.ctl.pacing_rate().filter(|&r| r > 0);
        if cwnd != self.cwnd || rate != self.rate {
            self.stats.control_changes += 1;
        }
        self.cwnd = cwnd;
        if rate.is_none() {
            self.next_departure = None;
        }
        self.rate = rate;
        let name = self.ctl.controller_name();
        if self.stats.controllers.last() != Some(&name) && !self.stats.controllers.contains(&name) {
            self.stats.controllers.push(name);
        }
    }

    /// Tick if the controller has not been invoked for its tick period, or hand over losses
    /// found without an ACK.
    fn maybe_tick(&mut self) {
        let due = self.last_invocation.elapsed() >= Duration::from_micros(self.ctl.tick_us());
        if due || self.has_pending() {
            let s = self.sample();
            // Losses and timeouts are events: report them as an invocation with the deltas.
            let tick = !self.has_pending();
            self.invoke(&s, tick);
        }
    }
}

/// µs from `zero` to `t` on s2n-quic's clock (0 if `t` is earlier). s2n-quic's
/// `saturating_duration_since` reads 1 µs between equal timestamps (its timestamps are
/// non-zero), so that offset is taken off.
fn micros_since(t: Timestamp, zero: Timestamp) -> u64 {
    let offset = zero.saturating_duration_since(zero);
    let d = t.saturating_duration_since(zero);
    d.saturating_sub(offset).as_micros() as u64
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The application's view of one flow's controller: counters, the current window and rate,
/// and ticks.
#[derive(Clone)]
pub struct FlowProbe {
    state: Arc<Mutex<Option<Arc<Mutex<State>>>>>,
    unwritten: Arc<AtomicU64>,
    data_started: Arc<AtomicBool>,
    rtt_from: Arc<OnceLock<Instant>>,
    record_packets: Arc<AtomicBool>,
}

/// A snapshot of a flow's control state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlSnapshot {
    /// Window in force, bytes.
    pub cwnd: u32,
    /// Pacing rate in force, bytes/s.
    pub rate: Option<u64>,
    /// Bytes in flight.
    pub bytes_in_flight: u32,
    /// UDP payload bytes acknowledged so far.
    pub acked_bytes: u64,
    /// Smoothed RTT, µs.
    pub srtt_us: u64,
    /// Who is in control.
    pub controller: String,
}

impl FlowProbe {
    fn new() -> FlowProbe {
        FlowProbe {
            state: Arc::new(Mutex::new(None)),
            unwritten: Arc::new(AtomicU64::new(0)),
            data_started: Arc::new(AtomicBool::new(false)),
            rtt_from: Arc::new(OnceLock::new()),
            record_packets: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Record every data packet sent and every RTT sample in [`FlowStats::packets`] (40 bytes
    /// per event, kept in memory until the flow ends; call before the connection starts).
    pub fn record_packets(&self) {
        self.record_packets.store(true, Ordering::Relaxed);
    }

    /// Say that the application is about to hand the stream its first bytes: the packets sent
    /// from now on carry the flow's data and are measured; those sent before (the handshake's)
    /// are counted in flight but never handed to the flow's controller (see the module
    /// documentation).
    pub fn start_data(&self) {
        self.data_started.store(true, Ordering::Relaxed);
    }

    /// Leave the RTT samples taken before `t` out of [`FlowStats::rtt_samples_us`] (a warm-up);
    /// the first call counts, before the connection starts.
    pub fn set_rtt_from(&self, t: Instant) {
        let _ = self.rtt_from.set(t);
    }

    /// Tell the controller how many bytes the application still has to hand to the stream
    /// (`u64::MAX`: an unlimited supply); the `bytes_pending` of every later sample counts them.
    pub fn set_unwritten(&self, bytes: u64) {
        self.unwritten.store(bytes, Ordering::Relaxed);
    }

    fn current(&self) -> Option<Arc<Mutex<State>>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the stack has created the flow's controller yet.
    pub fn started(&self) -> bool {
        self.current().is_some()
    }

    /// Invoke the controller if it has not been invoked for its tick period.
    pub fn tick(&self) {
        if let Some(s) = self.current() {
            lock(&s).maybe_tick();
        }
    }

    /// The controller's tick period, µs (10 ms before the controller exists).
    pub fn tick_us(&self) -> u64 {
        self.current().map_or(10_000, |s| lock(&s).ctl.tick_us())
    }

    /// The current control state.
    pub fn snapshot(&self) -> Option<ControlSnapshot> {
        let s = self.current()?;
        let s = lock(&s);
        Some(ControlSnapshot {
            cwnd: s.cwnd,
            rate: s.rate,
            bytes_in_flight: s.bytes_in_flight,
            acked_bytes: s.stats.acked_bytes,
            srtt_us: s.stats.srtt_us,
            controller: s.ctl.controller_name(),
        })
    }

    /// The flow's counters so far (default before the controller exists).
    pub fn stats(&self) -> FlowStats {
        self.current()
            .map(|s| lock(&s).stats.clone())
            .unwrap_or_default()
    }

    /// End the flow at the controller (frees its libccp connection). Later callbacks are
    /// ignored.
    pub fn close(&self) {
        if let Some(s) = self.current() {
            let mut s = lock(&s);
            if !s.closed {
                s.ctl.close();
                s.closed = true;
            }
        }
    }
}

/// The congestion-controller provider of one flow's s2n-quic client: every path it is asked
/// for gets a [`CcpController`] from the [`Factory`].
pub struct CcpEndpoint {
    factory: Factory,
    algorithm: String,
    init_cwnd_pkts: u32,
    local: SocketAddr,
    remote: SocketAddr,
    probe: FlowProbe,
    /// Added to every departure time handed to s2n-quic (see
    /// [`CcpEndpoint::with_precise_departures`]).
    departure_shift: Duration,
}

impl std::fmt::Debug for CcpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CcpEndpoint")
            .field("algorithm", &self.algorithm)
            .field("init_cwnd_pkts", &self.init_cwnd_pkts)
            .field("local", &self.local)
            .field("remote", &self.remote)
            .finish()
    }
}

impl CcpEndpoint {
    /// An endpoint whose flows ask for `algorithm` ("" for the agent's choice) and start with
    /// `init_cwnd_pkts` maximum datagrams; `local` and `remote` are the client's and the
    /// server's socket addresses (flow metadata for the agent: one client endpoint carries one
    /// flow). Returns the endpoint and the probe the application watches the
    /// flow through; the application calls [`FlowProbe::start_data`] before it hands the
    /// stream its first bytes (until then every packet is taken for the handshake's).
    pub fn new(
        factory: Factory,
        algorithm: &str,
        init_cwnd_pkts: u32,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> (CcpEndpoint, FlowProbe) {
        let probe = FlowProbe::new();
        (
            CcpEndpoint {
                factory,
                algorithm: algorithm.to_string(),
                init_cwnd_pkts,
                local,
                remote,
                probe: probe.clone(),
                departure_shift: Duration::ZERO,
            },
            probe,
        )
    }

    /// Departure times for an endpoint on a [`crate::io::PreciseIo`] with `slack`: each is
    /// handed to s2n-quic [`crate::io::departure_shift`]`(slack)` later than this controller
    /// means it, so that a packet leaves at its departure time or up to `slack` before it.
    /// Under s2n-quic's own tokio timer, which wakes on millisecond ticks, the shift would only
    /// delay packets further.
    pub fn with_precise_departures(mut self, slack: Duration) -> Self {
        self.departure_shift = crate::io::departure_shift(slack);
        self
    }
}

fn ipv4_and_port(a: &SocketAddr) -> (u32, u16) {
    match a {
        SocketAddr::V4(v4) => (u32::from(*v4.ip()), v4.port()),
        SocketAddr::V6(v6) => (v6.ip().to_ipv4_mapped().map_or(0, u32::from), v6.port()),
    }
}

impl Endpoint for CcpEndpoint {
    type CongestionController = CcpController;

    fn new_congestion_controller(&mut self, path_info: PathInfo) -> CcpController {
        let mss = u32::from(path_info.max_datagram_size);
        let (src_ip, src_port) = ipv4_and_port(&self.local);
        let (dst_ip, dst_port) = ipv4_and_port(&self.remote);
        let meta = FlowMeta {
            mss,
            init_cwnd: self.init_cwnd_pkts.max(2) * mss,
            src_ip,
            src_port,
            dst_ip,
            dst_port,
            algorithm: self.algorithm.clone(),
        };
        let ctl = (self.factory)(&meta);
        let state = Arc::new(Mutex::new(State::new(ctl, mss, &self.probe)));
        // A new path replaces the previous one's controller: end that libccp connection.
        let old = self
            .probe
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(state.clone());
        if let Some(old) = old {
            let mut o = lock(&old);
            if !o.closed {
                o.ctl.close();
                o.closed = true;
            }
        }
        CcpController {
            state,
            mss,
            departure_shift: self.departure_shift,
        }
    }
}

/// What the stack remembers of each sent packet for the delivery-rate estimate.
#[derive(Clone, Copy, Debug)]
pub struct PacketInfo {
    /// Sent after [`FlowProbe::start_data`]: a packet of the flow's data, not the handshake's.
    data: bool,
    delivered: u64,
    delivered_time: Timestamp,
    first_sent_time: Timestamp,
}

/// One path's congestion controller: a handle on the flow's shared state (s2n-quic requires
/// `Clone`; clones share the flow's controller).
#[derive(Clone)]
pub struct CcpController {
    state: Arc<Mutex<State>>,
    mss: u32,
    departure_shift: Duration,
}

impl std::fmt::Debug for CcpController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.state);
        f.debug_struct("CcpController")
            .field("cwnd", &s.cwnd)
            .field("rate", &s.rate)
            .field("bytes_in_flight", &s.bytes_in_flight)
            .finish()
    }
}

fn bytes_per_second(bytes: u64, over: Duration) -> u64 {
    let us = over.as_micros() as u64;
    bytes.saturating_mul(1_000_000).checked_div(us).unwrap_or(0)
}

impl CongestionController for CcpController {
    type PacketInfo = PacketInfo;

    fn congestion_window(&self) -> u32 {
        // The handshake's packets are no part of the flow's window (see the module doc).
        let s = lock(&self.state);
        let room = s.handshake_in_flight.min(HANDSHAKE_ROOM_PKTS * s.mss);
        s.cwnd.saturating_add(room)
    }

    fn bytes_in_flight(&self) -> u32 {
        let s = lock(&self.state);
        s.bytes_in_flight.saturating_add(s.handshake_in_flight)
    }

    fn is_congestion_limited(&self) -> bool {
        let s = lock(&self.state);
        s.cwnd.saturating_sub(s.bytes_in_flight) < s.mss
    }

    fn requires_fast_retransmission(&self) -> bool {
        false
    }

    fn on_packet_sent<Pub: Publisher>(
        &mut self,
        time_sent: Timestamp,
        sent_bytes: usize,
        app_limited: Option<bool>,
        _rtt_estimator: &RttEstimator,
        _publisher: &mut Pub,
    ) -> PacketInfo {
        let mut s = lock(&self.state);
        let bytes = u32::try_from(sent_bytes).unwrap_or(u32::MAX);
        if let Some(limited) = app_limited {
            // s2n-quic: limited = the window is not full and nothing (stream data, lost
            // frames, ACKs, ...) waits to be sent.
            s.backlog = !limited;
        }
        let data = s.data_started.load(Ordering::Relaxed);
        if s.bytes_in_flight == 0 || s.delivered_time.is_none() {
            // Nothing in flight: the delivery-rate intervals start afresh.
            s.delivered_time = Some(time_sent);
            s.first_sent_time = Some(time_sent);
        }
        let info = PacketInfo {
            data,
            delivered: s.delivered,
            delivered_time: s.delivered_time.unwrap_or(time_sent),
            first_sent_time: s.first_sent_time.unwrap_or(time_sent),
        };
        if bytes > 0 {
            s.stats.sent_packets += 1;
            s.stats.sent_bytes += u64::from(bytes);
        }
        if bytes > 0 && !data {
            s.handshake_in_flight = s.handshake_in_flight.saturating_add(bytes);
        } else if bytes > 0 {
            s.bytes_in_flight = s.bytes_in_flight.saturating_add(bytes);
            s.packets_in_flight += 1;
            if s.record_packets.load(Ordering::Relaxed) {
                let zero = *s.first_data_sent.get_or_insert(time_sent);
                let at_us = micros_since(time_sent, zero);
                s.stats.packets.push(PacketEvent {
                    kind: PacketEventKind::Sent,
                    at_us,
                    sent_us: at_us,
                    bytes,
                    rtt_us: 0,
                });
            }
            if let Some(rate) = s.rate {
                let gap = Duration::from_micros(u64::from(bytes) * 1_000_000 / rate.max(1));
                // Unused departure slots stay usable for up to PACING_CREDIT (or two
                // packets' time), so a connection woken late by its pacing timer catches up
                // instead of losing the slots (a token bucket of that depth).
                let credit = PACING_CREDIT.max(2 * gap);
                let floor = time_sent.checked_sub(credit).unwrap_or(time_sent);
                let from = match s.next_departure {
                    Some(t) if t > floor => t,
                    _ => floor,
                };
                s.next_departure = Some(from + gap);
            }
        }
        s.maybe_tick();
        info
    }

    fn on_rtt_update<Pub: Publisher>(
        &mut self,
        time_sent: Timestamp,
        now: Timestamp,
        rtt_estimator: &RttEstimator,
        _publisher: &mut Pub,
    ) {
        let mut s = lock(&self.state);
        let rtt = rtt_estimator.latest_rtt().as_micros() as u64;
        // The flow's own packets only: a sample of a packet sent before the first data packet
        // (the handshake's) is left out.
        if let Some(zero) = s.first_data_sent.filter(|&z| time_sent >= z) {
            s.stats.packets.push(PacketEvent {
                kind: PacketEventKind::Rtt,
                at_us: micros_since(now, zero),
                sent_us: micros_since(time_sent, zero),
                bytes: 0,
                rtt_us: rtt,
            });
        }
        s.pending_rtt_us = rtt.max(1);
        s.stats.srtt_us = rtt_estimator.smoothed_rtt().as_micros() as u64;
        if s.stats.rtt_min_us == 0 || rtt < s.stats.rtt_min_us {
            s.stats.rtt_min_us = rtt;
        }
        if s.rtt_from.get().is_none_or(|&t| Instant::now() >= t) {
            s.stats
                .rtt_samples_us
                .push(u32::try_from(rtt).unwrap_or(u32::MAX));
        }
    }

    fn on_ack<Pub: Publisher>(
        &mut self,
        newest_acked_time_sent: Timestamp,
        bytes_acknowledged: usize,
        newest_acked_packet_info: PacketInfo,
        rtt_estimator: &RttEstimator,
        _random_generator: &mut dyn RandomGenerator,
        ack_receive_time: Timestamp,
        _publisher: &mut Pub,
    ) {
        let mut s = lock(&self.state);
        let bytes = u32::try_from(bytes_acknowledged).unwrap_or(u32::MAX);
        let packets = bytes.div_ceil(self.mss.max(1));
        s.stats.acks += 1;
        s.stats.acked_bytes += u64::from(bytes);
        let p = newest_acked_packet_info;
        if !p.data {
            // The handshake's ACK frame (an Initial or Handshake packet-number space, which
            // hold no data): in flight no more, but no sample for the flow's controller, and
            // its RTT sample and CE marks are dropped.
            s.handshake_in_flight = s.handshake_in_flight.saturating_sub(bytes);
            s.pending_rtt_us = 0;
            s.pending_ce = 0;
            return;
        }
        s.bytes_in_flight = s.bytes_in_flight.saturating_sub(bytes);
        s.packets_in_flight = s.packets_in_flight.saturating_sub(packets);
        s.delivered += u64::from(bytes);
        s.delivered_time = Some(ack_receive_time);
        s.first_sent_time = Some(newest_acked_time_sent);
        let delta = s.delivered - p.delivered;
        s.rate_outgoing = bytes_per_second(
            delta,
            newest_acked_time_sent.saturating_duration_since(p.first_sent_time),
        );
        s.rate_incoming = bytes_per_second(
            delta,
            ack_receive_time.saturating_duration_since(p.delivered_time),
        );
        // s2n-quic takes an RTT sample only from an ACK frame that newly acknowledges its
        // largest packet number; the others carry the latest sample again. (0 would mean "no
        // sample" to libccp, and those frames would be left out of the report's RTT sums; with
        // the latest sample every ACK frame weighs the same, which measured better for Vivace:
        // docs/results/datapaths.md.)
        let rtt_us = match s.pending_rtt_us {
            0 => (rtt_estimator.latest_rtt().as_micros() as u64).max(1),
            r => r,
        };
        let sample = AckSample {
            bytes_acked: bytes,
            packets_acked: packets,
            rtt_us,
            ..s.sample()
        };
        s.invoke(&sample, false);
    }

    fn on_packet_lost<Pub: Publisher>(
        &mut self,
        lost_bytes: u32,
        packet_info: PacketInfo,
        persistent_congestion: bool,
        _new_loss_burst: bool,
        _random_generator: &mut dyn RandomGenerator,
        _timestamp: Timestamp,
        _publisher: &mut Pub,
    ) {
        let mut s = lock(&self.state);
        s.stats.lost_packets += 1;
        s.stats.lost_bytes += u64::from(lost_bytes);
        if !packet_info.data {
            // A handshake packet: not the flow's data (see the module documentation).
            s.handshake_in_flight = s.handshake_in_flight.saturating_sub(lost_bytes);
            return;
        }
        s.bytes_in_flight = s.bytes_in_flight.saturating_sub(lost_bytes);
        s.packets_in_flight = s.packets_in_flight.saturating_sub(1);
        s.pending_lost += 1;
        if persistent_congestion && !s.pending_timeout {
            s.pending_timeout = true;
            s.stats.timeouts += 1;
        }
    }

    fn on_explicit_congestion<Pub: Publisher>(
        &mut self,
        ce_count: u64,
        _event_time: Timestamp,
        _publisher: &mut Pub,
    ) {
        let mut s = lock(&self.state);
        let n = u32::try_from(ce_count).unwrap_or(u32::MAX);
        s.pending_ce = s.pending_ce.saturating_add(n);
        s.stats.ecn_ce_packets += ce_count;
    }

    fn on_mtu_update<Pub: Publisher>(&mut self, max_data_size: u16, _publisher: &mut Pub) {
        // The libccp connection keeps the MSS it was created with; the window stays in bytes.
        let mss = u32::from(max_data_size);
        self.mss = mss;
        lock(&self.state).mss = mss;
    }

    fn on_packet_discarded<Pub: Publisher>(&mut self, bytes_sent: usize, _publisher: &mut Pub) {
        // s2n-quic discards the unacknowledged packets of a packet-number space it drops (the
        // Initial and Handshake spaces: the handshake's packets), all in one call, and a lost
        // MTU probe (data; this datapath does not probe: its MTU is fixed).
        let mut s = lock(&self.state);
        let bytes = u32::try_from(bytes_sent).unwrap_or(u32::MAX);
        let handshake = bytes.min(s.handshake_in_flight);
        s.handshake_in_flight -= handshake;
        let data = bytes - handshake;
        s.bytes_in_flight = s.bytes_in_flight.saturating_sub(data);
        let packets = data.div_ceil(self.mss.max(1));
        s.packets_in_flight = s.packets_in_flight.saturating_sub(packets);
    }

    fn earliest_departure_time(&self) -> Option<Timestamp> {
        lock(&self.state)
            .next_departure
            .map(|t| t + self.departure_shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the samples it is handed.
    struct Recorder(Arc<Mutex<Vec<AckSample>>>);

    impl FlowController for Recorder {
        fn on_ack(&mut self, s: &AckSample) {
            self.0.lock().unwrap().push(*s);
        }
        fn on_tick(&mut self, s: &AckSample) {
            self.0.lock().unwrap().push(*s);
        }
        fn tick_us(&self) -> u64 {
            0
        }
        fn cwnd(&self) -> u32 {
            14_480
        }
        fn pacing_rate(&self) -> Option<u64> {
            None
        }
        fn controller_name(&self) -> String {
            "recorder".into()
        }
    }

    fn state(probe: &FlowProbe, seen: &Arc<Mutex<Vec<AckSample>>>) -> State {
        State::new(Box::new(Recorder(seen.clone())), 1448, probe)
    }

    /// The `bytes_pending` of the sample the next invocation hands over.
    fn pending(s: &mut State, seen: &Arc<Mutex<Vec<AckSample>>>) -> u32 {
        s.maybe_tick();
        seen.lock().unwrap().last().expect("a sample").bytes_pending
    }

    #[test]
    fn samples_say_whether_the_application_has_data_to_send() {
        // BBR and RTCP read `bytes_pending == 0` as an application-limited sender: a busy flow
        // must never report it.
        let probe = FlowProbe::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut s = state(&probe, &seen);
        // A timed flow without a rate cap: an unlimited supply, as the udp datapath says.
        probe.set_unwritten(u64::MAX);
        assert_eq!(pending(&mut s, &seen), u32::MAX);
        // A sized flow: what it has not handed to the stream, plus one datagram while s2n-quic
        // says data waits in the stream.
        probe.set_unwritten(100_000);
        assert_eq!(pending(&mut s, &seen), 100_000);
        s.backlog = true;
        assert_eq!(pending(&mut s, &seen), 101_448);
        // Everything handed over, the stream still sending: not idle.
        probe.set_unwritten(0);
        assert_eq!(pending(&mut s, &seen), 1448);
        // The stream drained: application-limited.
        s.backlog = false;
        assert_eq!(pending(&mut s, &seen), 0);
    }
}
