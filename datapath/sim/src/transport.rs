//! The simulated transport: one [`Sender`] and one [`Receiver`] per flow, driving the datapath
//! engine the way a kernel datapath drives libccp.
//!
//! The sender owns the byte stream (segments of one MSS), packet numbers (a retransmission gets
//! a new number), the table of packets in flight, RACK-style loss detection (a packet is lost
//! when a packet sent `reorder_threshold` numbers later is acknowledged, or when it is older
//! than `time_threshold` × max(smoothed RTT, latest RTT) behind an acknowledged one), the
//! retransmission timeout with exponential backoff, delivery-rate sampling (as BBR's), pacing at
//! the rate the engine sets and enforcement of the window it sets. For every ACK it produces the
//! libccp [`Primitives`]; the simulator hands them to `Engine::invoke`. It also produces
//! primitives on its timer (a timeout, a time-threshold loss, or no ACK for one `tick`).
//!
//! On a retransmission timeout the sender, like Linux's `tcp_enter_loss`, marks everything in
//! flight lost and sets its window to one MSS at once; the agent's decision follows the report.
//!
//! The receiver keeps the packet numbers it got (highest ranges), reassembles segments (in-order
//! bytes are the goodput), counts CE marks, and acknowledges every `ack_every` packets, at once on
//! reordering, holes, a change of CE state or the last segment, else after `delayed_ack`.

use crate::packet::{AckHdr, DataHdr, MAX_ACK_RANGES};
use crate::time::{NS_PER_US, bytes_in, rate_of, tx_time_ns};
use ccp_engine::{ExtPrimitives, Primitives};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Settings of a sender.
#[derive(Clone, Debug)]
pub struct SenderCfg {
    /// Payload bytes per segment.
    pub mss: u32,
    /// Header bytes per packet.
    pub header: u32,
    /// Initial window, bytes.
    pub init_cwnd: u64,
    /// RTO bounds and initial value, ns.
    pub min_rto: u64,
    pub initial_rto: u64,
    pub max_rto: u64,
    /// Idle invoke period, ns.
    pub tick: u64,
    /// Mark packets ECT.
    pub ecn: bool,
    /// Most bytes of this flow in its host's NIC queue (0: no limit).
    pub tsq_limit: u64,
    /// RACK packet threshold.
    pub reorder_threshold: u64,
    /// RACK time threshold factor.
    pub time_threshold: f64,
}

/// Smallest loss-detection delay, ns (QUIC's timer granularity, scaled to datacenter RTTs).
const LOSS_GRANULARITY_NS: u64 = 10 * NS_PER_US;
/// Largest RTO backoff exponent.
const MAX_BACKOFF: u32 = 16;

const IN_FLIGHT: u8 = 0;
const ACKED: u8 = 1;
const LOST: u8 = 2;

#[derive(Clone, Copy, Debug)]
struct Sent {
    seg: u64,
    payload: u32,
    state: u8,
    sent: u64,
    delivered: u64,
    delivered_time: u64,
    first_sent_time: u64,
}

/// What a sender counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Data packets sent (with retransmissions).
    pub packets_sent: u64,
    /// Payload bytes sent (with retransmissions).
    pub bytes_sent: u64,
    /// Retransmitted packets.
    pub retransmits: u64,
    /// Packets declared lost by RACK.
    pub lost: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Payload bytes acknowledged (cumulatively).
    pub bytes_acked: u64,
}

/// A packet the sender wants on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub hdr: DataHdr,
    /// Bytes on the wire.
    pub wire: u32,
}

/// The sending half of a flow.
#[derive(Debug)]
pub struct Sender {
    cfg: SenderCfg,
    /// Bytes to send (none: unlimited).
    size: Option<u64>,
    total_segs: Option<u64>,
    start: u64,
    rate_cap: Option<u64>,
    // Byte stream.
    next_seg: u64,
    seg_base: u64,
    seg_done: VecDeque<bool>,
    retx: BTreeSet<u64>,
    sent_new_bytes: u64,
    // Packets.
    next_pn: u64,
    pn_base: u64,
    sent: VecDeque<Sent>,
    holes: BTreeSet<u64>,
    largest_acked: Option<u64>,
    inflight_bytes: u64,
    inflight_pkts: u64,
    // Control, as the engine set it.
    cwnd: u64,
    rate: u64,
    pace_next: u64,
    /// When sending is possible again after a pacing or application wait (MAX: not waiting).
    wake_at: u64,
    // RTT, ns.
    srtt: u64,
    rttvar: u64,
    latest_rtt: u64,
    min_rtt: u64,
    has_rtt: bool,
    backoff: u32,
    rto_at: u64,
    loss_at: u64,
    // Delivery-rate sampling.
    delivered: u64,
    delivered_time: u64,
    first_sent_time: u64,
    rate_in: u64,
    rate_out: u64,
    // ECN echo.
    ce_packets_seen: u64,
    ce_bytes_seen: u64,
    // One-way delay, ns: the smallest seen, and the last sample above it (none after an
    // invocation without an RTT sample).
    min_owd: u64,
    owd_sample: Option<u64>,
    last_owd: u64,
    /// Last engine invocation.
    pub last_invoke: u64,
    /// This flow's bytes in its host's NIC queue.
    nic_bytes: u64,
    tsq_blocked: bool,
    nic_blocked: bool,
    stopped: bool,
    /// Counters.
    pub stats: SenderStats,
    scratch: Vec<u64>,
    fill: Vec<u64>,
}

impl Sender {
    /// A sender of `size` bytes (none: unlimited) starting at `start`, optionally producing data
    /// at most at `rate_cap` bytes/s.
    pub fn new(cfg: SenderCfg, size: Option<u64>, start: u64, rate_cap: Option<u64>) -> Sender {
        let mss = u64::from(cfg.mss.max(1));
        let total_segs = size.map(|s| s.div_ceil(mss).max(1));
        let cwnd = cfg.init_cwnd;
        Sender {
            cfg,
            size,
            total_segs,
            start,
            rate_cap,
            next_seg: 0,
            seg_base: 0,
            seg_done: VecDeque::new(),
            retx: BTreeSet::new(),
            sent_new_bytes: 0,
            next_pn: 0,
            pn_base: 0,
            sent: VecDeque::new(),
            holes: BTreeSet::new(),
            largest_acked: None,
            inflight_bytes: 0,
            inflight_pkts: 0,
            cwnd,
            rate: 0,
            pace_next: 0,
            wake_at: u64::MAX,
            srtt: 0,
            rttvar: 0,
            latest_rtt: 0,
            min_rtt: u64::MAX,
            has_rtt: false,
            backoff: 0,
            rto_at: u64::MAX,
            loss_at: u64::MAX,
            delivered: 0,
            delivered_time: start,
            first_sent_time: start,
            rate_in: 0,
            rate_out: 0,
            ce_packets_seen: 0,
            ce_bytes_seen: 0,
            min_owd: u64::MAX,
            owd_sample: None,
            last_owd: 0,
            last_invoke: start,
            nic_bytes: 0,
            tsq_blocked: false,
            nic_blocked: false,
            stopped: false,
            stats: SenderStats::default(),
            scratch: Vec::new(),
            fill: Vec::new(),
        }
    }

    fn seg_len(&self, seg: u64) -> u32 {
        let mss = u64::from(self.cfg.mss.max(1));
        match (self.size, self.total_segs) {
            (Some(size), Some(t)) if seg + 1 == t => (size - seg * mss) as u32,
            _ => self.cfg.mss.max(1),
        }
    }

    /// The congestion window, bytes.
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// The pacing rate, bytes/s (0: unpaced).
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Set the window (from the engine's `set_cwnd`).
    pub fn set_cwnd(&mut self, cwnd: u64) {
        self.cwnd = cwnd;
    }

    /// Set the pacing rate (from the engine's `set_rate_abs`).
    pub fn set_rate(&mut self, rate: u64) {
        self.rate = rate;
    }

    /// Smoothed RTT, ns (0 before the first sample).
    pub fn srtt(&self) -> u64 {
        self.srtt
    }

    /// Latest RTT sample, ns (0 before the first sample).
    pub fn latest_rtt(&self) -> u64 {
        self.latest_rtt
    }

    /// Payload bytes in flight.
    pub fn inflight(&self) -> u64 {
        self.inflight_bytes
    }

    /// Whether every byte of a sized flow has been acknowledged.
    pub fn complete(&self) -> bool {
        self.total_segs.is_some_and(|t| self.seg_base >= t)
    }

    /// Whether the sender no longer sends.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Stop sending (flow finished or stopped): drop every timer and buffer.
    pub fn stop(&mut self) {
        self.stopped = true;
        self.rto_at = u64::MAX;
        self.loss_at = u64::MAX;
        self.wake_at = u64::MAX;
        self.sent = VecDeque::new();
        self.seg_done = VecDeque::new();
        self.retx = BTreeSet::new();
        self.holes = BTreeSet::new();
        self.inflight_bytes = 0;
        self.inflight_pkts = 0;
    }

    /// A packet of this flow left its host's NIC queue (or was dropped there); returns whether
    /// the flow was waiting for that (TCP small queues) and should try to send.
    pub fn nic_release(&mut self, wire: u32) -> bool {
        self.nic_bytes = self.nic_bytes.saturating_sub(u64::from(wire));
        std::mem::take(&mut self.tsq_blocked)
    }

    /// Whether the last [`Sender::try_send`] stopped at a full NIC queue (cleared by reading).
    pub fn take_nic_blocked(&mut self) -> bool {
        std::mem::take(&mut self.nic_blocked)
    }

    fn rto(&self) -> u64 {
        let base = if self.has_rtt {
            (self.srtt + (4 * self.rttvar).max(LOSS_GRANULARITY_NS)).max(self.cfg.min_rto)
        } else {
            self.cfg.initial_rto
        };
        base.saturating_mul(1u64 << self.backoff.min(MAX_BACKOFF))
            .min(self.cfg.max_rto)
    }

    fn loss_delay(&self) -> u64 {
        let rtt = self.srtt.max(self.latest_rtt);
        ((rtt as f64 * self.cfg.time_threshold) as u64).max(LOSS_GRANULARITY_NS)
    }

    /// Application bytes produced by `now` (rate-capped flows), with a one-segment head start.
    fn app_budget(&self, now: u64) -> u64 {
        match self.rate_cap {
            Some(cap) => bytes_in(cap, now.saturating_sub(self.start)) + u64::from(self.cfg.mss),
            None => u64::MAX,
        }
    }

    /// Bytes the application has handed over but the sender has not sent yet.
    pub fn bytes_pending(&self, now: u64) -> u64 {
        if self.stopped {
            return 0;
        }
        let remaining = match self.size {
            Some(s) => s - self.sent_new_bytes.min(s),
            None => u64::MAX,
        };
        let produced = self.app_budget(now).saturating_sub(self.sent_new_bytes);
        remaining.min(produced)
    }

    /// The earliest time this sender needs its timer (MAX: none).
    pub fn deadline(&self) -> u64 {
        if self.stopped {
            return u64::MAX;
        }
        let tick = self.last_invoke.saturating_add(self.cfg.tick);
        self.rto_at.min(self.loss_at).min(self.wake_at).min(tick)
    }

    /// Send what the window, the pacing rate, the NIC limits and the application allow.
    /// `nic_room` is the free space of the host's NIC queue, bytes: a sender never overfills it
    /// (a full queue blocks the socket, as a qdisc does) and waits for [`Sender::nic_release`].
    pub fn try_send(&mut self, now: u64, out: &mut Vec<Outgoing>, mut nic_room: u64) {
        if self.stopped {
            return;
        }
        self.wake_at = u64::MAX;
        loop {
            if self.inflight_bytes >= self.cwnd {
                return;
            }
            if self.cfg.tsq_limit > 0 && self.nic_bytes >= self.cfg.tsq_limit {
                self.tsq_blocked = true;
                return;
            }
            if nic_room < u64::from(self.cfg.mss + self.cfg.header) {
                self.nic_blocked = true;
                return;
            }
            if self.rate > 0 && self.pace_next > now {
                self.wake_at = self.pace_next;
                return;
            }
            // A retransmission first, then new data.
            let mut pick = None;
            while let Some(s) = self.retx.pop_first() {
                if s >= self.seg_base && !self.seg_done[(s - self.seg_base) as usize] {
                    pick = Some((s, true));
                    break;
                }
            }
            let (seg, retx) = match pick {
                Some(p) => p,
                None => {
                    if self.total_segs.is_some_and(|t| self.next_seg >= t) {
                        return;
                    }
                    let len = u64::from(self.seg_len(self.next_seg));
                    if let Some(cap) = self.rate_cap {
                        let need = self.sent_new_bytes + len;
                        if self.app_budget(now) < need {
                            let wait = tx_time_ns(need - u64::from(self.cfg.mss), cap);
                            self.wake_at = self.start.saturating_add(wait).max(now + 1);
                            return;
                        }
                    }
                    let s = self.next_seg;
                    self.next_seg += 1;
                    self.seg_done.push_back(false);
                    self.sent_new_bytes += len;
                    (s, false)
                }
            };
            let payload = self.seg_len(seg);
            let wire = payload + self.cfg.header;
            if self.inflight_pkts == 0 {
                self.first_sent_time = now;
                self.delivered_time = now;
            }
            let pn = self.next_pn;
            self.next_pn += 1;
            self.sent.push_back(Sent {
                seg,
                payload,
                state: IN_FLIGHT,
                sent: now,
                delivered: self.delivered,
                delivered_time: self.delivered_time,
                first_sent_time: self.first_sent_time,
            });
            self.inflight_bytes += u64::from(payload);
            self.inflight_pkts += 1;
            self.nic_bytes += u64::from(wire);
            nic_room -= u64::from(wire);
            if self.rto_at == u64::MAX {
                self.rto_at = now + self.rto();
            }
            if self.rate > 0 {
                self.pace_next = self.pace_next.max(now) + tx_time_ns(u64::from(wire), self.rate);
            }
            self.stats.packets_sent += 1;
            self.stats.bytes_sent += u64::from(payload);
            if retx {
                self.stats.retransmits += 1;
            }
            out.push(Outgoing {
                hdr: DataHdr {
                    pn,
                    seg,
                    payload,
                    last: self.total_segs == Some(seg + 1),
                    sent_ns: now,
                },
                wire,
            });
        }
    }

    /// Whether data packets are ECN-capable.
    pub fn ecn(&self) -> bool {
        self.cfg.ecn
    }

    fn entry(&mut self, pn: u64) -> Option<&mut Sent> {
        let i = pn.checked_sub(self.pn_base)?;
        self.sent.get_mut(usize::try_from(i).ok()?)
    }

    /// Mark `pn` acknowledged; returns the packet if it was in flight.
    fn ack_pn(&mut self, pn: u64, now: u64) -> Option<Sent> {
        let seg_base = self.seg_base;
        let e = self.entry(pn)?;
        let prev = e.state;
        if prev == ACKED {
            return None;
        }
        e.state = ACKED;
        let e = *e;
        if e.seg >= seg_base {
            let slot = &mut self.seg_done[(e.seg - seg_base) as usize];
            if !*slot {
                *slot = true;
                self.scratch.push(e.seg);
            }
        }
        if prev == IN_FLIGHT {
            self.inflight_bytes -= u64::from(e.payload);
            self.inflight_pkts -= 1;
            self.delivered += u64::from(e.payload);
            self.delivered_time = now;
            Some(e)
        } else {
            None
        }
    }

    fn pop_settled(&mut self) {
        while self.sent.front().is_some_and(|s| s.state != IN_FLIGHT) {
            self.sent.pop_front();
            self.pn_base += 1;
        }
    }

    /// Declare lost what RACK says is lost; returns how many packets.
    fn detect_losses(&mut self, now: u64) -> u32 {
        let Some(largest) = self.largest_acked else {
            self.loss_at = u64::MAX;
            return 0;
        };
        let delay = self.loss_delay();
        let mut lost = 0;
        self.loss_at = u64::MAX;
        while let Some(&h) = self.holes.first() {
            let seg_base = self.seg_base;
            let thresh = self.cfg.reorder_threshold;
            let Some(e) = self.entry(h) else {
                self.holes.pop_first();
                continue;
            };
            if e.state != IN_FLIGHT {
                self.holes.pop_first();
                continue;
            }
            if largest - h >= thresh || e.sent + delay <= now {
                e.state = LOST;
                let e = *e;
                self.holes.pop_first();
                self.inflight_bytes -= u64::from(e.payload);
                self.inflight_pkts -= 1;
                if e.seg >= seg_base && !self.seg_done[(e.seg - seg_base) as usize] {
                    self.retx.insert(e.seg);
                }
                lost += 1;
            } else {
                self.loss_at = e.sent + delay;
                break;
            }
        }
        self.stats.lost += u64::from(lost);
        self.pop_settled();
        lost
    }

    fn primitives(&self, now: u64) -> Primitives {
        Primitives {
            rate_outgoing: self.rate_out,
            rate_incoming: self.rate_in,
            bytes_in_flight: clamp32(self.inflight_bytes),
            packets_in_flight: clamp32(self.inflight_pkts),
            snd_cwnd: clamp32(self.cwnd),
            snd_rate: self.rate,
            bytes_pending: clamp32(self.bytes_pending(now)),
            ..Primitives::default()
        }
    }

    /// The extended primitives of the last [`Sender::on_ack`] or [`Sender::on_timer`], for
    /// `Engine::invoke_ext`: `Flow.owd_us`, the one-way delay of the data packet the ACK echoes
    /// (receive time stamp minus send time stamp) minus the smallest the flow has seen, µs,
    /// given with every RTT sample and only then.
    pub fn ext_primitives(&self) -> ExtPrimitives {
        ExtPrimitives {
            owd_us: self.owd_sample.map(|d| d / NS_PER_US),
        }
    }

    /// Process an ACK; returns the primitives for `Engine::invoke`.
    pub fn on_ack(&mut self, now: u64, ack: &AckHdr) -> Primitives {
        self.owd_sample = None;
        if self.stopped || ack.n_ranges == 0 || self.next_pn == 0 {
            return self.primitives(now);
        }
        self.scratch.clear();
        let top = ack.ranges[0].1.min(self.next_pn - 1);
        let mut newest: Option<Sent> = None;
        let mut rtt_sample = None;
        let mut any_new = false;
        // Packet numbers above the previous largest: acknowledged now, or new holes.
        let from = self.largest_acked.map_or(0, |l| l + 1).max(self.pn_base);
        if self.largest_acked.is_none_or(|l| top > l) {
            for pn in from..=top {
                if ack.covers(pn) {
                    if let Some(e) = self.ack_pn(pn, now) {
                        any_new = true;
                        newest = Some(e);
                        if pn == top {
                            rtt_sample = Some(now.saturating_sub(e.sent).max(1));
                        }
                    }
                } else if self.entry(pn).is_some_and(|e| e.state == IN_FLIGHT) {
                    self.holes.insert(pn);
                }
            }
            self.largest_acked = Some(top);
        }
        // Holes filled by this ACK.
        let mut filled = std::mem::take(&mut self.fill);
        filled.clear();
        for &(lo, hi) in ack.ranges() {
            filled.extend(self.holes.range(lo..=hi).copied());
        }
        for &pn in &filled {
            self.holes.remove(&pn);
            if let Some(e) = self.ack_pn(pn, now) {
                any_new = true;
                if newest.is_none_or(|n| e.sent > n.sent) {
                    newest = Some(e);
                }
            }
        }
        self.fill = filled;
        // Cumulative advance of the byte stream.
        let mut bytes_acked = 0u64;
        let mut packets_acked = 0u64;
        while self.seg_done.front() == Some(&true) {
            self.seg_done.pop_front();
            bytes_acked += u64::from(self.seg_len(self.seg_base));
            packets_acked += 1;
            self.seg_base += 1;
        }
        let mut mis_bytes = 0u64;
        let mut mis_pkts = 0u64;
        for i in 0..self.scratch.len() {
            let s = self.scratch[i];
            if s >= self.seg_base {
                mis_bytes += u64::from(self.seg_len(s));
                mis_pkts += 1;
            }
        }
        self.stats.bytes_acked += bytes_acked;
        // RTT (RFC 6298).
        if let Some(r) = rtt_sample {
            self.latest_rtt = r;
            self.min_rtt = self.min_rtt.min(r);
            if self.has_rtt {
                let dev = self.srtt.abs_diff(r);
                self.rttvar = (3 * self.rttvar + dev) / 4;
                self.srtt = (7 * self.srtt + r) / 8;
            } else {
                self.srtt = r;
                self.rttvar = r / 2;
                self.has_rtt = true;
            }
            // Relative one-way delay, with every RTT sample (a program sums both over the same
            // ACKs); an ACK without time stamps repeats the previous sample.
            if let Some((sent, recv)) = ack.timestamps {
                let owd = recv.saturating_sub(sent);
                self.min_owd = self.min_owd.min(owd);
                self.owd_sample = Some(owd - self.min_owd);
            } else if self.min_owd < u64::MAX {
                self.owd_sample = Some(self.last_owd);
            }
            if let Some(d) = self.owd_sample {
                self.last_owd = d;
            }
        }
        // Delivery-rate sample from the most recently sent packet acknowledged.
        if let Some(p) = newest {
            let data = self.delivered - p.delivered;
            let send_elapsed = p.sent.saturating_sub(p.first_sent_time);
            let ack_elapsed = now.saturating_sub(p.delivered_time);
            if ack_elapsed > 0 {
                self.rate_in = rate_of(data, ack_elapsed);
            }
            if send_elapsed > 0 {
                self.rate_out = rate_of(data, send_elapsed);
            }
            self.first_sent_time = p.sent;
        }
        // ECN echo.
        let ce_pkts = ack.ce_packets.saturating_sub(self.ce_packets_seen);
        let ce_bytes = ack.ce_bytes.saturating_sub(self.ce_bytes_seen);
        self.ce_packets_seen = self.ce_packets_seen.max(ack.ce_packets);
        self.ce_bytes_seen = self.ce_bytes_seen.max(ack.ce_bytes);
        let lost = self.detect_losses(now);
        self.pop_settled();
        if any_new {
            self.backoff = 0;
            self.rto_at = if self.inflight_pkts > 0 {
                now + self.rto()
            } else {
                u64::MAX
            };
        } else if self.inflight_pkts == 0 {
            self.rto_at = u64::MAX;
        }
        let mut p = self.primitives(now);
        p.bytes_acked = clamp32(bytes_acked);
        p.packets_acked = clamp32(packets_acked);
        p.bytes_misordered = clamp32(mis_bytes);
        p.packets_misordered = clamp32(mis_pkts);
        p.ecn_bytes = clamp32(ce_bytes);
        p.ecn_packets = clamp32(ce_pkts);
        p.lost_pkts_sample = lost;
        p.rtt_sample_us = rtt_sample.map_or(0, |r| (r / NS_PER_US).max(1));
        p
    }

    /// Run the timer at `now`; returns primitives when the engine should be invoked (timeout,
    /// time-threshold loss, or a tick without ACKs).
    pub fn on_timer(&mut self, now: u64) -> Option<Primitives> {
        self.owd_sample = None;
        if self.stopped {
            return None;
        }
        if self.rto_at <= now {
            return Some(self.on_rto(now));
        }
        if self.loss_at <= now {
            let lost = self.detect_losses(now);
            if lost > 0 {
                let mut p = self.primitives(now);
                p.lost_pkts_sample = lost;
                return Some(p);
            }
        }
        if self.last_invoke.saturating_add(self.cfg.tick) <= now {
            return Some(self.primitives(now));
        }
        None
    }

    fn on_rto(&mut self, now: u64) -> Primitives {
        self.stats.timeouts += 1;
        for i in 0..self.sent.len() {
            let e = self.sent[i];
            if e.state == IN_FLIGHT
                && e.seg >= self.seg_base
                && !self.seg_done[(e.seg - self.seg_base) as usize]
            {
                self.retx.insert(e.seg);
            }
        }
        self.sent.clear();
        self.pn_base = self.next_pn;
        self.holes.clear();
        self.inflight_bytes = 0;
        self.inflight_pkts = 0;
        self.loss_at = u64::MAX;
        self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
        self.rto_at = u64::MAX;
        self.cwnd = u64::from(self.cfg.mss);
        self.pace_next = now;
        let mut p = self.primitives(now);
        p.was_timeout = true;
        p
    }
}

fn clamp32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Most packet-number ranges a receiver remembers.
const MAX_RX_RANGES: usize = 16;

/// What the receiver does with a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOutcome {
    /// Send this ACK now.
    pub ack: Option<AckHdr>,
    /// Arm the delayed-ACK timer for this time.
    pub timer: Option<u64>,
    /// The flow's last byte arrived in order with this packet.
    pub completed: bool,
}

/// The receiving half of a flow.
#[derive(Debug)]
pub struct Receiver {
    ack_every: u32,
    delayed_ack: u64,
    total_segs: Option<u64>,
    /// Received packet-number ranges, highest first.
    ranges: Vec<(u64, u64)>,
    cum_seg: u64,
    ooo: BTreeMap<u64, u32>,
    /// Payload bytes delivered in order.
    pub delivered: u64,
    /// Duplicate data packets received.
    pub duplicates: u64,
    ce_packets: u64,
    ce_bytes: u64,
    last_ce: bool,
    unacked: u32,
    ack_at: u64,
    /// Send and receive time stamps of the latest data packet, ns.
    timestamps: Option<(u64, u64)>,
    /// When the last byte arrived (sized flows).
    pub complete_at: Option<u64>,
}

impl Receiver {
    /// A receiver of a flow of `total_segs` segments (none: unlimited).
    pub fn new(ack_every: u32, delayed_ack: u64, total_segs: Option<u64>) -> Receiver {
        Receiver {
            ack_every: ack_every.max(1),
            delayed_ack,
            total_segs,
            ranges: Vec::new(),
            cum_seg: 0,
            ooo: BTreeMap::new(),
            delivered: 0,
            duplicates: 0,
            ce_packets: 0,
            ce_bytes: 0,
            last_ce: false,
            unacked: 0,
            ack_at: u64::MAX,
            timestamps: None,
            complete_at: None,
        }
    }

    fn record_pn(&mut self, pn: u64) {
        // Common case: extends the highest range.
        if let Some(top) = self.ranges.first_mut() {
            if pn == top.1 + 1 {
                top.1 = pn;
                return;
            }
            if pn >= top.0 && pn <= top.1 {
                return;
            }
        }
        // General case: insert keeping the list sorted (highest first) and merged.
        let mut i = 0;
        while i < self.ranges.len() && self.ranges[i].0 > pn {
            i += 1;
        }
        // ranges[i] is the first range starting at or below pn.
        if i < self.ranges.len() && self.ranges[i].1 >= pn {
            return;
        }
        let joins_upper = i > 0 && self.ranges[i - 1].0 == pn + 1;
        let joins_lower = i < self.ranges.len() && self.ranges[i].1 + 1 == pn;
        match (joins_upper, joins_lower) {
            (true, true) => {
                self.ranges[i - 1].0 = self.ranges[i].0;
                self.ranges.remove(i);
            }
            (true, false) => self.ranges[i - 1].0 = pn,
            (false, true) => self.ranges[i].1 = pn,
            (false, false) => self.ranges.insert(i, (pn, pn)),
        }
        self.ranges.truncate(MAX_RX_RANGES);
    }

    fn make_ack(&mut self) -> AckHdr {
        let mut ranges = [(0, 0); MAX_ACK_RANGES];
        let n = self.ranges.len().min(MAX_ACK_RANGES);
        ranges[..n].copy_from_slice(&self.ranges[..n]);
        self.unacked = 0;
        self.ack_at = u64::MAX;
        AckHdr {
            ranges,
            n_ranges: n as u8,
            ce_packets: self.ce_packets,
            ce_bytes: self.ce_bytes,
            timestamps: self.timestamps,
        }
    }

    /// A data packet arrived at `now`.
    pub fn on_data(&mut self, now: u64, hdr: &DataHdr, ce: bool) -> RxOutcome {
        let was_top = self.ranges.first().map(|r| r.1);
        self.record_pn(hdr.pn);
        self.timestamps = Some((hdr.sent_ns, now));
        let reordered = was_top.is_some_and(|t| hdr.pn != t + 1);
        let mut dup = false;
        if hdr.seg == self.cum_seg {
            self.cum_seg += 1;
            self.delivered += u64::from(hdr.payload);
            while let Some(len) = self.ooo.remove(&self.cum_seg) {
                self.cum_seg += 1;
                self.delivered += u64::from(len);
            }
        } else if hdr.seg > self.cum_seg {
            dup = self.ooo.insert(hdr.seg, hdr.payload).is_some();
        } else {
            dup = true;
        }
        if dup {
            self.duplicates += 1;
        }
        if ce {
            self.ce_packets += 1;
            self.ce_bytes += u64::from(hdr.payload);
        }
        let mut completed = false;
        if self.complete_at.is_none() && self.total_segs.is_some_and(|t| self.cum_seg >= t) {
            self.complete_at = Some(now);
            completed = true;
        }
        self.unacked += 1;
        let ce_changed = ce != self.last_ce;
        self.last_ce = ce;
        let now_ack = reordered
            || dup
            || !self.ooo.is_empty()
            || ce_changed
            || hdr.last
            || completed
            || self.unacked >= self.ack_every;
        if now_ack {
            RxOutcome {
                ack: Some(self.make_ack()),
                timer: None,
                completed,
            }
        } else {
            let arm = self.ack_at == u64::MAX;
            if arm {
                self.ack_at = now + self.delayed_ack;
            }
            RxOutcome {
                ack: None,
                timer: arm.then_some(self.ack_at),
                completed,
            }
        }
    }

    /// The delayed-ACK timer fired at `now`.
    pub fn on_timer(&mut self, now: u64) -> Option<AckHdr> {
        if self.ack_at <= now && self.unacked > 0 {
            Some(self.make_ack())
        } else {
            None
        }
    }

    /// Segments delivered in order.
    pub fn cum_segments(&self) -> u64 {
        self.cum_seg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SenderCfg {
        SenderCfg {
            mss: 1000,
            header: 50,
            init_cwnd: 10_000,
            min_rto: 200_000_000,
            initial_rto: 1_000_000_000,
            max_rto: 60_000_000_000,
            tick: 10_000_000,
            ecn: true,
            tsq_limit: 0,
            reorder_threshold: 3,
            time_threshold: 1.125,
        }
    }

    #[test]
    fn one_way_delay_counts_the_forward_path_only() {
        let mut s = Sender::new(cfg(), None, 0, None);
        let mut out = vec![];
        s.try_send(0, &mut out, u64::MAX);
        let mut r = Receiver::new(1, 1_000_000, None);
        // Packet 0 arrives after 50 µs; its ACK comes back after another 50 µs.
        let a0 = r.on_data(50_000, &out[0].hdr, false).ack.unwrap();
        assert_eq!(a0.timestamps, Some((0, 50_000)));
        let p = s.on_ack(100_000, &a0);
        assert_eq!(p.rtt_sample_us, 100);
        assert_eq!(s.ext_primitives().owd_us, Some(0));
        // Packet 1 waits 30 µs more on the way there: OWD 30 µs above the smallest.
        let a1 = r.on_data(80_000, &out[1].hdr, false).ack.unwrap();
        let p = s.on_ack(130_000, &a1);
        assert_eq!(p.rtt_sample_us, 130);
        assert_eq!(s.ext_primitives().owd_us, Some(30));
        // Packet 2's ACK waits 200 µs on the way back: the RTT grows, the OWD does not.
        let a2 = r.on_data(50_000, &out[2].hdr, false).ack.unwrap();
        let p = s.on_ack(300_000, &a2);
        assert_eq!(p.rtt_sample_us, 300);
        assert_eq!(s.ext_primitives().owd_us, Some(0));
        // No RTT sample (a repeated ACK), no OWD sample either; nor on a timer.
        let p = s.on_ack(310_000, &a2);
        assert_eq!(p.rtt_sample_us, 0);
        assert_eq!(s.ext_primitives().owd_us, None);
        s.on_timer(400_000);
        assert_eq!(s.ext_primitives().owd_us, None);
    }

    #[test]
    fn window_limits_sending_and_acks_release_it() {
        let mut s = Sender::new(cfg(), Some(25_500), 0, None);
        let mut out = vec![];
        s.try_send(0, &mut out, u64::MAX);
        assert_eq!(out.len(), 10);
        assert_eq!(s.inflight(), 10_000);
        let mut r = Receiver::new(1, 1_000_000, Some(26));
        let mut acks = vec![];
        for o in &out {
            acks.push(r.on_data(1000, &o.hdr, false).ack.unwrap());
        }
        let p = s.on_ack(10_000_000, &acks[0]);
        assert_eq!(
            (p.bytes_acked, p.packets_acked, p.lost_pkts_sample),
            (1000, 1, 0)
        );
        assert_eq!(p.rtt_sample_us, 10_000);
        assert_eq!(p.bytes_in_flight, 9000);
        out.clear();
        s.try_send(10_000_000, &mut out, u64::MAX);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].hdr.pn, 10);
    }

    #[test]
    fn three_later_acks_declare_a_hole_lost_and_it_is_resent() {
        let mut s = Sender::new(cfg(), None, 0, None);
        let mut out = vec![];
        s.try_send(0, &mut out, u64::MAX);
        let mut r = Receiver::new(1, 1_000_000, None);
        let mut acks = vec![];
        for o in out.iter().filter(|o| o.hdr.pn != 2) {
            acks.push(r.on_data(1000, &o.hdr, false).ack.unwrap());
        }
        // pn 0, 1 in order; pn 3, 4 are above the hole: not yet lost (threshold 3).
        let mut lost = 0;
        let mut mis = 0;
        for (i, a) in acks.iter().enumerate() {
            let p = s.on_ack(1_000_000 + i as u64, a);
            lost += p.lost_pkts_sample;
            mis += p.packets_misordered;
            if i == 3 {
                assert_eq!(lost, 0, "pn 4 acked: 4 - 2 = 2 < 3");
            }
            if i == 4 {
                assert_eq!(lost, 1, "pn 5 acked: the hole at 2 is lost");
            }
        }
        assert_eq!(mis, 7);
        out.clear();
        s.try_send(2_000_000, &mut out, u64::MAX);
        assert_eq!(out[0].hdr.seg, 2, "the lost segment goes first");
        assert!(out[0].hdr.pn >= 10);
        assert_eq!(s.stats.retransmits, 1);
        // Its ACK fills the byte stream: 8 segments become cumulative at once.
        let a = r.on_data(3_000_000, &out[0].hdr, false).ack.unwrap();
        let p = s.on_ack(3_000_000, &a);
        assert_eq!(p.packets_acked, 8);
        assert_eq!(p.packets_misordered, 0);
    }

    #[test]
    fn timeout_marks_everything_lost_and_backs_off() {
        let mut s = Sender::new(cfg(), None, 0, None);
        let mut out = vec![];
        s.try_send(0, &mut out, u64::MAX);
        assert_eq!(s.deadline(), 10_000_000, "the idle tick comes first");
        assert!(s.on_timer(10_000_000).is_some_and(|p| !p.was_timeout));
        s.last_invoke = 10_000_000;
        let p = s.on_timer(1_000_000_000).unwrap();
        assert!(p.was_timeout);
        assert_eq!((s.inflight(), s.cwnd()), (0, 1000));
        out.clear();
        s.try_send(1_000_000_000, &mut out, u64::MAX);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].hdr.seg, 0);
        assert_eq!(s.rto_at, 1_000_000_000 + 2_000_000_000);
    }

    #[test]
    fn pacing_spaces_packets() {
        let mut s = Sender::new(cfg(), None, 0, None);
        s.set_rate(1_050_000); // one 1050-byte packet per ms
        let mut out = vec![];
        s.try_send(0, &mut out, u64::MAX);
        assert_eq!(out.len(), 1);
        assert_eq!(s.deadline(), 1_000_000);
        s.try_send(1_000_000, &mut out, u64::MAX);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn rate_cap_limits_the_application() {
        let mut s = Sender::new(cfg(), None, 0, Some(1_000_000));
        let mut out = vec![];
        s.try_send(0, &mut out, u64::MAX);
        assert_eq!(out.len(), 1, "one segment of head start");
        assert_eq!(s.deadline(), 1_000_000);
        s.try_send(1_000_000, &mut out, u64::MAX);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn receiver_ranges_merge_and_ack_every_second() {
        let mut r = Receiver::new(2, 500, None);
        let d = |pn, seg| DataHdr {
            pn,
            seg,
            payload: 100,
            last: false,
            sent_ns: 0,
        };
        assert_eq!(r.on_data(0, &d(0, 0), false).timer, Some(500));
        let a = r.on_data(1, &d(1, 1), false).ack.unwrap();
        assert_eq!(a.ranges(), &[(0, 1)]);
        let a = r.on_data(2, &d(3, 3), false).ack.unwrap();
        assert_eq!(a.ranges(), &[(3, 3), (0, 1)]);
        let a = r.on_data(3, &d(2, 2), true).ack.unwrap();
        assert_eq!(a.ranges(), &[(0, 3)]);
        assert_eq!((a.ce_packets, a.ce_bytes), (1, 100));
        assert_eq!(r.delivered, 400);
    }
}
