//! The receiving side: one UDP socket serving any number of flows (told apart by flow id).
//! It owns the handshake answer, per-flow reassembly by stream offset (an out-of-order buffer
//! over a pool of payload buffers), the streaming xxh3-128 hash of the in-order stream and its
//! check against the FIN, duplicate/stall/goodput accounting, ECN-CE counting from the TOS byte,
//! the ACK policy, and remembering finished flows so retransmitted FINs are still answered.
//!
//! ACK policy: an ACK goes out after every second DATA packet; immediately (at the end of the
//! receive batch in progress) on a gap, a reordered or duplicate packet, a CE mark or a FIN; at
//! most 1 ms after an unacknowledged packet otherwise; and at high rates once per receive batch
//! (at least every [`ACK_MAX_PACKETS`] packets inside a batch). The ACK that completes a flow is
//! sent three times, so a lost final ACK rarely costs the sender a timeout.

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3Default;

use crate::arrival::ArrivalClock;
use crate::error::Error;
use crate::io::{self as sio, RecvBatch};
use crate::packet::{self, Ack, DataHeader, Hello, Packet, PacketError, flags};
use crate::pattern::hash_hex;
use crate::ranges::{Insert, PnRanges};
use crate::summary::{ARRIVAL_INTERVAL_US, Arrival, ReceiverSummary, mbps};

/// Largest delay of an ACK for a lone packet, µs.
pub const ACK_DELAY_US: u64 = 1_000;
/// Within one receive batch, an ACK at least every this many packets.
pub const ACK_MAX_PACKETS: u32 = 64;
/// Out-of-order bytes one flow may hold; beyond, packets ahead of a hole are dropped unacked.
pub const OOO_LIMIT_BYTES: usize = 256 << 20;
/// Flows tracked at once (finished flows included until forgotten).
pub const MAX_FLOWS: usize = 4096;
/// How long a finished flow is remembered to answer retransmitted FINs.
pub const FINISHED_KEEP: Duration = Duration::from_secs(60);
/// An unfinished flow with no packet for this long is given up (its sender stopped without a
/// FIN: it crashed, or aborted with another flow of its run); its buffers are freed and its
/// summary kept, as a finished flow's. Senders give up after 10 s without an ACK.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(60);
/// After `expect_flows` finished: leave when no datagram came for this long...
const LINGER_QUIET: Duration = Duration::from_millis(300);
/// ...or after this long at most.
const LINGER_MAX: Duration = Duration::from_secs(3);
/// Receive socket buffer asked for.
const RCVBUF: usize = 64 << 20;

/// How the receiver runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Address to bind (port 0: any free port, reported through `on_bound`).
    pub bind: SocketAddr,
    /// Return after this many flows completed (None: run until stopped or idle).
    pub expect_flows: Option<usize>,
    /// Return after this long without any valid datagram.
    pub idle_timeout: Option<Duration>,
    /// Use UDP GRO where the kernel allows.
    pub gro: bool,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            bind: SocketAddr::from(([0, 0, 0, 0], 0)),
            expect_flows: None,
            idle_timeout: None,
            gro: true,
        }
    }
}

/// Datagrams the receiver ignored, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgnoredStats {
    /// Not a valid packet (bad magic, version, type, length or field).
    pub malformed: u64,
    /// Larger than the receive buffer.
    pub truncated: u64,
    /// DATA for a flow that never said HELLO.
    pub unknown_flow: u64,
    /// A known flow id from another address.
    pub wrong_peer: u64,
    /// A packet type a receiver does not expect (ACK, HELLO_ACK).
    pub unexpected_type: u64,
    /// DATA inconsistent with the flow (beyond the FIN, conflicting FIN, mss exceeded).
    pub invalid_data: u64,
    /// New flows refused because [`MAX_FLOWS`] are tracked.
    pub too_many_flows: u64,
}

impl IgnoredStats {
    /// All ignored datagrams.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.truncated
            + self.unknown_flow
            + self.wrong_peer
            + self.unexpected_type
            + self.invalid_data
            + self.too_many_flows
    }

    fn count_decode_error(&mut self, _e: PacketError) {
        self.malformed += 1;
    }
}

/// Everything a receiver run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverReport {
    /// One summary per flow, in order of arrival.
    pub flows: Vec<ReceiverSummary>,
    /// Datagrams ignored.
    pub ignored: IgnoredStats,
    /// Whether GRO was on.
    pub gro: bool,
    /// Whether TOS bytes (ECN) were readable.
    pub ecn: bool,
    /// Receive buffer size the kernel granted, bytes.
    pub rcvbuf: usize,
    /// Datagrams received.
    pub datagrams: u64,
    /// Messages the kernel delivered them in (fewer than datagrams when GRO coalesced).
    pub messages: u64,
    /// Most messages carried a kernel receive timestamp and were timed by it
    /// ([`ReceiverSummary::rx_timestamps`]).
    #[serde(default)]
    pub rx_timestamps: bool,
}

/// Runs a receiver until `stop`, `expect_flows` completed flows or the idle timeout; returns
/// one summary per flow. `on_bound` gets the bound address before any datagram is read.
pub fn run_receiver(
    cfg: &ReceiverConfig,
    stop: &AtomicBool,
    on_bound: &mut dyn FnMut(SocketAddr),
) -> Result<Vec<ReceiverSummary>, Error> {
    run_receiver_report(cfg, stop, on_bound).map(|r| r.flows)
}

/// [`run_receiver`], also returning the ignored-datagram counters and socket facts.
pub fn run_receiver_report(
    cfg: &ReceiverConfig,
    stop: &AtomicBool,
    on_bound: &mut dyn FnMut(SocketAddr),
) -> Result<ReceiverReport, Error> {
    // The receiver's clock starts before anything can arrive: a datagram that waits in the
    // socket while `on_bound` runs is still dated by its arrival.
    let epoch = Instant::now();
    let sock = UdpSocket::bind(cfg.bind)
        .map_err(|e| Error::io(format!("binding the receiver to {}", cfg.bind), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| Error::io("setting the receiver socket non-blocking", e))?;
    let local = sock
        .local_addr()
        .map_err(|e| Error::io("reading the receiver's address", e))?;
    let v6 = local.is_ipv6();
    let (_, rcvbuf) = sio::set_buffers(&sock, 1 << 20, RCVBUF);
    let gro = cfg.gro && sio::enable_gro(&sock);
    let ecn = sio::enable_recv_tos(&sock, v6);
    let rx_stamps = sio::enable_rx_timestamps(&sock);
    // The 1 ms delayed-ACK timer should fire on time.
    sio::set_timer_slack_ns(1_000);
    tracing::info!(%local, gro, ecn, rx_stamps, rcvbuf, "ccp-udp receiver listening");
    on_bound(local);
    let mut r = Receiver {
        sock,
        epoch,
        flows: HashMap::new(),
        order: Vec::new(),
        done_summaries: HashMap::new(),
        ignored: IgnoredStats::default(),
        finished: 0,
        touched: Vec::new(),
        delayed: Vec::new(),
        out: [0; packet::MAX_ACK_LEN],
        datagrams: 0,
        messages: 0,
        arrivals: ArrivalClock::new(rx_stamps),
    };
    r.run(cfg, stop)?;
    r.arrivals.log("DATA", None);
    let flows = r.summaries();
    tracing::info!(
        flows = flows.len(),
        ignored = r.ignored.total(),
        "ccp-udp receiver done"
    );
    Ok(ReceiverReport {
        flows,
        ignored: r.ignored,
        gro,
        ecn,
        rcvbuf,
        datagrams: r.datagrams,
        messages: r.messages,
        rx_timestamps: r.arrivals.mostly_stamped(),
    })
}

struct Receiver {
    sock: UdpSocket,
    epoch: Instant,
    flows: HashMap<u32, RecvFlow>,
    order: Vec<u32>,
    done_summaries: HashMap<u32, ReceiverSummary>,
    ignored: IgnoredStats,
    finished: usize,
    touched: Vec<u32>,
    /// Flows holding a delayed ACK.
    delayed: Vec<u32>,
    out: [u8; packet::MAX_ACK_LEN],
    datagrams: u64,
    messages: u64,
    /// When each message arrived, by the kernel's receive timestamp where there is one: the
    /// time of the DATA it holds ([`crate::arrival`]).
    arrivals: ArrivalClock,
}

struct RecvFlow {
    index: usize,
    id: u32,
    peer: SocketAddr,
    mss: u32,
    /// When the HELLO the sender's handshake ended with arrived (the last before any DATA).
    hello_us: u64,
    first_data_us: Option<u64>,
    last_progress_us: u64,
    longest_stall_us: u64,
    done_us: Option<u64>,
    next_offset: u64,
    max_end: u64,
    ooo: BTreeMap<u64, Vec<u8>>,
    ooo_bytes: usize,
    pool: Vec<Vec<u8>>,
    hasher: Box<Xxh3Default>,
    digest: Option<u128>,
    fin: Option<(u64, u128)>,
    inconsistent: bool,
    intact: bool,
    pns: PnRanges,
    largest_ts: u32,
    largest_rx_us: u64,
    unacked: u32,
    first_unacked_us: u64,
    ack_now: bool,
    final_acks: u32,
    touched: bool,
    delayed: bool,
    packets: u64,
    duplicates: u64,
    out_of_order: u64,
    ecn_ce: u64,
    acks_sent: u64,
    /// Bytes received over time (see [`Arrival`]), and when the next sample is due, µs.
    arrivals: Vec<Arrival>,
    next_arrival_us: u64,
    summary: Option<ReceiverSummary>,
}

impl RecvFlow {
    fn new(index: usize, id: u32, peer: SocketAddr, mss: u32) -> Self {
        RecvFlow {
            index,
            id,
            peer,
            mss,
            hello_us: 0,
            first_data_us: None,
            last_progress_us: 0,
            longest_stall_us: 0,
            done_us: None,
            next_offset: 0,
            max_end: 0,
            ooo: BTreeMap::new(),
            ooo_bytes: 0,
            pool: Vec::new(),
            hasher: Box::new(Xxh3Default::new()),
            digest: None,
            fin: None,
            inconsistent: false,
            intact: false,
            pns: PnRanges::new(),
            largest_ts: 0,
            largest_rx_us: 0,
            unacked: 0,
            first_unacked_us: 0,
            ack_now: false,
            final_acks: 0,
            touched: false,
            delayed: false,
            packets: 0,
            duplicates: 0,
            out_of_order: 0,
            ecn_ce: 0,
            acks_sent: 0,
            arrivals: Vec::new(),
            next_arrival_us: 0,
            summary: None,
        }
    }

    /// Records what has arrived by `now` if a sample is due (or `force`d).
    fn note_arrival(&mut self, now: u64, force: bool) {
        if !force && now < self.next_arrival_us {
            return;
        }
        self.next_arrival_us = now + ARRIVAL_INTERVAL_US;
        self.arrivals.push(Arrival {
            t_s: now.saturating_sub(self.hello_us) as f64 / 1e6,
            bytes: self.next_offset + self.ooo_bytes as u64,
        });
    }

    /// Whether the flow may be forgotten at `now`: finished more than [`FINISHED_KEEP`] ago,
    /// or unfinished and silent for [`ABANDONED_AFTER`].
    fn forgettable(&self, now: u64) -> bool {
        match self.done_us {
            Some(d) => now.saturating_sub(d) > FINISHED_KEEP.as_micros() as u64,
            None => {
                let last = self
                    .hello_us
                    .max(self.largest_rx_us)
                    .max(self.last_progress_us);
                now.saturating_sub(last) > ABANDONED_AFTER.as_micros() as u64
            }
        }
    }

    fn complete(&self) -> bool {
        self.done_us.is_some()
    }

    /// Takes in-order bytes starting at `offset` (≤ next_offset).
    fn advance(&mut self, offset: u64, data: &[u8]) {
        let skip = (self.next_offset - offset) as usize;
        if skip < data.len() {
            self.hasher.update(&data[skip..]);
            self.next_offset = offset + data.len() as u64;
        }
    }

    /// Handles one DATA packet; returns false if it was invalid for this flow.
    fn on_data(&mut self, h: &DataHeader, payload: &[u8], ce: bool, now: u64) -> bool {
        if self.complete() {
            // Retransmitted data or FIN after the end: answer with the final ACK.
            self.packets += 1;
            self.duplicates += 1;
            self.ack_now = true;
            self.final_acks = self.final_acks.max(1);
            return true;
        }
        if !h.is_fin() && payload.len() > self.mss as usize {
            return false;
        }
        if self.pns.contains(h.pn) {
            self.packets += 1;
            self.duplicates += 1;
            self.ack_now = true;
            return true;
        }
        if self.first_data_us.is_none() {
            // Stalls and goodput count from the first DATA packet, not from the handshake.
            self.first_data_us = Some(now);
            self.last_progress_us = now;
        }
        let end = if h.is_fin() {
            h.offset
        } else {
            h.offset + payload.len() as u64
        };
        if let Some((total, _)) = self.fin
            && end > total
        {
            return false;
        }
        if h.is_fin() {
            let mut hb = [0u8; 16];
            hb.copy_from_slice(payload);
            let hash = u128::from_be_bytes(hb);
            match self.fin {
                Some(f) if f != (h.offset, hash) => return false,
                Some(_) => {}
                None => {
                    if self.max_end > h.offset {
                        self.inconsistent = true;
                    }
                    self.fin = Some((h.offset, hash));
                }
            }
            self.ack_now = true;
        } else if end <= self.next_offset {
            self.duplicates += 1;
        } else if h.offset <= self.next_offset {
            self.advance(h.offset, payload);
            self.drain_ooo();
            self.progress(now);
        } else {
            // Ahead of a hole.
            if self
                .ooo
                .get(&h.offset)
                .is_some_and(|b| b.len() >= payload.len())
            {
                self.duplicates += 1;
            } else {
                if self.ooo_bytes + payload.len() > OOO_LIMIT_BYTES {
                    // Cannot keep it: behave as if it was lost (not recorded, not acked).
                    return true;
                }
                let mut buf = self.pool.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(payload);
                self.ooo_bytes += buf.len();
                if let Some(old) = self.ooo.insert(h.offset, buf) {
                    self.ooo_bytes -= old.len();
                    self.recycle(old);
                }
                self.out_of_order += 1;
            }
            self.ack_now = true;
        }
        self.max_end = self.max_end.max(end);
        self.packets += 1;
        if ce {
            self.ecn_ce += 1;
            self.ack_now = true;
        }
        match self.pns.insert(h.pn) {
            Insert::InOrder => {}
            Insert::OutOfOrder | Insert::Duplicate => self.ack_now = true,
        }
        if self.pns.largest() == Some(h.pn) {
            self.largest_ts = h.ts;
            self.largest_rx_us = now;
        }
        if self.unacked == 0 {
            self.first_unacked_us = now;
        }
        self.unacked += 1;
        if let Some((total, hash)) = self.fin
            && self.next_offset >= total
        {
            let digest = self.hasher.digest128();
            self.digest = Some(digest);
            self.intact = self.next_offset == total && !self.inconsistent && digest == hash;
            self.done_us = Some(now);
            self.ack_now = true;
            self.final_acks = 3;
            for (_, b) in std::mem::take(&mut self.ooo) {
                drop(b);
            }
            self.ooo_bytes = 0;
            self.pool = Vec::new();
        }
        // The last sample is the completion's, whenever it comes.
        self.note_arrival(now, self.complete());
        true
    }

    fn drain_ooo(&mut self) {
        while let Some(entry) = self.ooo.first_entry() {
            if *entry.key() > self.next_offset {
                break;
            }
            let off = *entry.key();
            let buf = entry.remove();
            self.ooo_bytes -= buf.len();
            self.advance(off, &buf);
            self.recycle(buf);
        }
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < 4096 {
            self.pool.push(buf);
        }
    }

    fn progress(&mut self, now: u64) {
        self.longest_stall_us = self
            .longest_stall_us
            .max(now.saturating_sub(self.last_progress_us));
        self.last_progress_us = now;
    }

    /// `rx_timestamps`: [`ReceiverSummary::rx_timestamps`], the receiver's so far.
    fn summary(&self, ignored: u64, rx_timestamps: bool) -> ReceiverSummary {
        let start = self.first_data_us.unwrap_or(0);
        let end = self.done_us.unwrap_or(self.last_progress_us);
        let secs = end.saturating_sub(start) as f64 / 1e6;
        ReceiverSummary {
            flow: self.index,
            flow_id: self.id,
            peer: self.peer.to_string(),
            bytes: self.next_offset,
            expected_bytes: self.fin.map(|f| f.0),
            hash: hash_hex(self.digest.unwrap_or_else(|| self.hasher.digest128())),
            sender_hash: self.fin.map(|f| hash_hex(f.1)),
            intact: self.intact,
            completed: self.complete(),
            packets: self.packets,
            duplicates: self.duplicates,
            out_of_order: self.out_of_order,
            ecn_ce_packets: self.ecn_ce,
            acks_sent: self.acks_sent,
            duration_s: secs,
            goodput_mbps: mbps(self.next_offset, secs),
            longest_stall_ms: self.longest_stall_us as f64 / 1e3,
            ignored_datagrams: ignored,
            arrivals: self.arrivals.clone(),
            rx_timestamps,
        }
    }

    fn build_ack(&self, now: u64) -> Ack {
        let mut a = Ack::new(self.id);
        if self.fin.is_some() {
            a.flags |= flags::FIN_SEEN;
        }
        if self.complete() {
            a.flags |= flags::COMPLETE;
            if self.intact {
                a.flags |= flags::INTACT;
            }
        }
        a.ack_delay_us = now
            .saturating_sub(self.largest_rx_us)
            .min(u64::from(u32::MAX)) as u32;
        a.echo_ts = self.largest_ts;
        // The receive time of the packet whose send time is echoed (µs since this receiver
        // started, wrapping): the sender's one-way delay sample.
        a.recv_ts = self.largest_rx_us as u32;
        a.cum_offset = self.next_offset;
        a.ecn_ce = self.ecn_ce;
        self.pns.fill_ack(&mut a);
        a
    }
}

impl Receiver {
    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    fn run(&mut self, cfg: &ReceiverConfig, stop: &AtomicBool) -> Result<(), Error> {
        let fd = self.sock.as_raw_fd();
        let slots = if cfg.gro { 32 } else { 64 };
        let mut batch = RecvBatch::new(slots, 65_536);
        let mut last_valid = Instant::now();
        let mut last_any = Instant::now();
        let mut linger_since: Option<Instant> = None;
        let mut next_housekeeping = Instant::now() + Duration::from_secs(1);
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = self.now_us();
            let next_ack = self.flush_delayed_acks(now);
            let wall = Instant::now();
            if wall >= next_housekeeping {
                self.forget_old_flows(now);
                next_housekeeping = wall + Duration::from_secs(1);
            }
            let mut timeout = Duration::from_millis(100);
            if let Some(n) = cfg.expect_flows
                && self.finished >= n
            {
                let since = *linger_since.get_or_insert(wall);
                let quiet = wall.duration_since(last_any);
                if quiet >= LINGER_QUIET || wall.duration_since(since) >= LINGER_MAX {
                    return Ok(());
                }
                timeout = timeout.min(LINGER_QUIET - quiet);
            }
            if let Some(idle) = cfg.idle_timeout {
                let quiet = wall.duration_since(last_valid);
                if quiet >= idle {
                    tracing::info!("receiver idle for {:?}, leaving", idle);
                    return Ok(());
                }
                timeout = timeout.min(idle - quiet);
            }
            if let Some(t) = next_ack {
                timeout = timeout.min(Duration::from_micros(t.saturating_sub(now)));
            }
            sio::wait(fd, false, Some(timeout))
                .map_err(|e| Error::io("waiting for datagrams", e))?;
            for _ in 0..64 {
                let before_read = self.now_us();
                self.arrivals.read_began(before_read);
                let n = match sio::recv_batch(fd, &mut batch) {
                    Ok(n) => n,
                    Err(e) => {
                        // Pending socket errors (e.g. ICMP from a departed sender) are not fatal.
                        tracing::debug!("receive error ignored: {e}");
                        continue;
                    }
                };
                if n == 0 {
                    self.arrivals.batch_done(true);
                    break;
                }
                last_any = Instant::now();
                // The wall clock first ([`ArrivalClock`]).
                let wall_ns = self.arrivals.wall_ns();
                let now = self.now_us();
                let valid_before = self.ignored.total();
                let mut datagrams = 0u64;
                for i in 0..n {
                    let meta = *batch.meta(i);
                    if meta.truncated {
                        self.ignored.truncated += 1;
                        continue;
                    }
                    let Some(from) = meta.from else {
                        self.ignored.malformed += 1;
                        continue;
                    };
                    let ce = meta.tos.is_some_and(|t| t & 0x03 == sio::ECN_CE);
                    // A GRO message's datagrams arrived within one stamp of each other.
                    let at = self.arrivals.stamp(meta.rx_wall_ns, now, wall_ns);
                    for d in batch.datagrams(i) {
                        datagrams += 1;
                        self.handle(d, from, ce, at, now);
                    }
                }
                self.datagrams += datagrams;
                self.messages += n as u64;
                if self.ignored.total() - valid_before < datagrams {
                    last_valid = Instant::now();
                }
                self.flush_batch_acks(now);
                // Fewer than it had room for: the socket was empty when this read ended.
                self.arrivals.batch_done(n < batch.slots());
                if n < batch.slots() {
                    break;
                }
            }
        }
    }

    /// One datagram that arrived at `at` and is read at `now` (µs, `at` ≤ `now`): the flow's
    /// state goes by its arrival, the ACK it may cause by `now`.
    fn handle(&mut self, d: &[u8], from: SocketAddr, ce: bool, at: u64, now: u64) {
        let p = match packet::decode(d) {
            Ok(p) => p,
            Err(e) => {
                self.ignored.count_decode_error(e);
                return;
            }
        };
        match p {
            Packet::Hello(h) => self.on_hello(h, from, at),
            Packet::Data(h, payload) => {
                let Some(f) = self.flows.get_mut(&h.flow_id) else {
                    self.ignored.unknown_flow += 1;
                    return;
                };
                if f.peer != from {
                    self.ignored.wrong_peer += 1;
                    return;
                }
                let was_complete = f.complete();
                if !f.on_data(&h, payload, ce, at) {
                    self.ignored.invalid_data += 1;
                    return;
                }
                if !f.touched {
                    f.touched = true;
                    self.touched.push(h.flow_id);
                }
                if !was_complete && f.complete() {
                    self.finished += 1;
                    let s = f.summary(self.ignored.total(), self.arrivals.mostly_stamped());
                    tracing::info!(
                        flow = format_args!("{:08x}", s.flow_id),
                        bytes = s.bytes,
                        intact = s.intact,
                        goodput_mbps = format_args!("{:.1}", s.goodput_mbps),
                        "flow complete"
                    );
                    f.summary = Some(s);
                }
                if f.unacked >= ACK_MAX_PACKETS {
                    let id = h.flow_id;
                    self.send_ack(id, now);
                }
            }
            Packet::HelloAck(_) | Packet::Ack(_) => self.ignored.unexpected_type += 1,
        }
    }

    fn on_hello(&mut self, h: Hello, from: SocketAddr, now: u64) {
        match self.flows.get_mut(&h.flow_id) {
            Some(f) if f.peer != from => {
                self.ignored.wrong_peer += 1;
                return;
            }
            Some(f) => {
                // A repeated HELLO (its answer was lost): the sender's handshake ends with
                // the answer to this one.
                if f.first_data_us.is_none() {
                    f.hello_us = now;
                }
            }
            None => {
                if self.flows.len() >= MAX_FLOWS {
                    self.ignored.too_many_flows += 1;
                    return;
                }
                tracing::debug!(flow = format_args!("{:08x}", h.flow_id), %from, mss = h.mss, "new flow");
                let mut f = RecvFlow::new(self.order.len(), h.flow_id, from, h.mss);
                f.last_progress_us = now;
                f.hello_us = now;
                self.flows.insert(h.flow_id, f);
                self.order.push(h.flow_id);
            }
        }
        let n = packet::encode_hello(&mut self.out, &h, true);
        if let Err(e) = self.sock.send_to(&self.out[..n], from) {
            tracing::debug!("HELLO_ACK to {from} failed: {e}");
        }
    }

    fn send_ack(&mut self, id: u32, now: u64) {
        let Some(f) = self.flows.get_mut(&id) else {
            return;
        };
        let a = f.build_ack(now);
        if a.ranges().is_empty() {
            return;
        }
        let n = packet::encode_ack(&mut self.out, &a);
        let copies = f.final_acks.max(1);
        for _ in 0..copies {
            if let Err(e) = self.sock.send_to(&self.out[..n], f.peer) {
                tracing::debug!("ACK to {} failed: {e}", f.peer);
                break;
            }
            f.acks_sent += 1;
        }
        f.final_acks = 0;
        f.unacked = 0;
        f.ack_now = false;
    }

    /// End of a receive batch: ACK every touched flow that owes one.
    fn flush_batch_acks(&mut self, now: u64) {
        let touched = std::mem::take(&mut self.touched);
        for &id in &touched {
            let due = match self.flows.get_mut(&id) {
                Some(f) => {
                    f.touched = false;
                    f.ack_now || f.unacked >= 2
                }
                None => false,
            };
            if due {
                self.send_ack(id, now);
            }
            // A lone unacknowledged packet waits for the delayed-ACK timer.
            if let Some(f) = self.flows.get_mut(&id)
                && f.unacked > 0
                && !f.delayed
            {
                f.delayed = true;
                self.delayed.push(id);
            }
        }
        self.touched = touched;
        self.touched.clear();
    }

    /// Sends ACKs whose delay expired; returns the next deadline. Looks only at flows that
    /// owe an ACK, however many finished flows are remembered.
    fn flush_delayed_acks(&mut self, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut i = 0;
        while i < self.delayed.len() {
            let id = self.delayed[i];
            let deadline = match self.flows.get(&id) {
                Some(f) if f.unacked > 0 || f.ack_now => {
                    if f.ack_now {
                        now
                    } else {
                        f.first_unacked_us + ACK_DELAY_US
                    }
                }
                _ => {
                    // Acknowledged in the meantime (or forgotten): drop from the list.
                    if let Some(f) = self.flows.get_mut(&id) {
                        f.delayed = false;
                    }
                    self.delayed.swap_remove(i);
                    continue;
                }
            };
            if deadline <= now {
                self.send_ack(id, now);
                if let Some(f) = self.flows.get_mut(&id) {
                    f.delayed = false;
                }
                self.delayed.swap_remove(i);
            } else {
                next = Some(next.map_or(deadline, |n: u64| n.min(deadline)));
                i += 1;
            }
        }
        next
    }

    fn forget_old_flows(&mut self, now: u64) {
        let old: Vec<u32> = self
            .flows
            .iter()
            .filter(|(_, f)| f.forgettable(now))
            .map(|(id, _)| *id)
            .collect();
        let ignored = self.ignored.total();
        let stamped = self.arrivals.mostly_stamped();
        for id in old {
            if let Some(f) = self.flows.remove(&id) {
                if f.done_us.is_none() {
                    tracing::warn!(
                        flow = f.index,
                        bytes = f.next_offset,
                        "giving up a flow whose sender went silent before its FIN"
                    );
                }
                let s = f
                    .summary
                    .clone()
                    .unwrap_or_else(|| f.summary(ignored, stamped));
                self.done_summaries.insert(id, s);
            }
        }
    }

    fn summaries(&mut self) -> Vec<ReceiverSummary> {
        let ignored = self.ignored.total();
        let stamped = self.arrivals.mostly_stamped();
        let mut out = Vec::with_capacity(self.order.len());
        for id in &self.order {
            let s = if let Some(f) = self.flows.get(id) {
                f.summary
                    .clone()
                    .unwrap_or_else(|| f.summary(ignored, stamped))
            } else if let Some(s) = self.done_summaries.remove(id) {
                s
            } else {
                continue;
            };
            out.push(s);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern;

    fn data(flow: u32, pn: u64, offset: u64, len: usize) -> (DataHeader, Vec<u8>) {
        let h = DataHeader {
            flow_id: flow,
            flags: 0,
            pn,
            offset,
            ts: pn as u32,
        };
        (h, pattern::slice(pattern::seed(flow), offset, len).to_vec())
    }

    fn fin(flow: u32, pn: u64, total: u64) -> (DataHeader, Vec<u8>) {
        let h = DataHeader {
            flow_id: flow,
            flags: flags::FIN,
            pn,
            offset: total,
            ts: 0,
        };
        (h, pattern::stream_hash(flow, total).to_be_bytes().to_vec())
    }

    #[test]
    fn silent_unfinished_flows_are_given_up_and_finished_ones_kept_a_while() {
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let abandon = ABANDONED_AFTER.as_micros() as u64;
        let keep = FINISHED_KEEP.as_micros() as u64;
        // A sender that stopped after two packets, at 1 s: its flow stays while it may resume.
        let mut f = RecvFlow::new(0, 9, peer, 1000);
        for pn in 0..2 {
            let (h, p) = data(9, pn, pn * 1000, 1000);
            assert!(f.on_data(&h, &p, false, 1_000_000));
        }
        assert!(!f.forgettable(1_000_000 + abandon));
        assert!(f.forgettable(1_000_001 + abandon));
        // A finished flow is kept FINISHED_KEEP after its FIN, however long it ran before it.
        let mut g = RecvFlow::new(1, 10, peer, 1000);
        let (h, p) = data(10, 0, 0, 1000);
        assert!(g.on_data(&h, &p, false, 0));
        let (h, p) = fin(10, 1, 1000);
        assert!(g.on_data(&h, &p, false, 5 * abandon));
        assert!(g.complete());
        assert!(!g.forgettable(5 * abandon + keep));
        assert!(g.forgettable(5 * abandon + keep + 1));
    }

    #[test]
    fn reassembles_out_of_order_with_duplicates() {
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mut f = RecvFlow::new(0, 9, peer, 1000);
        let total = 10_000u64;
        // Packets 0..10 of 1000 bytes, delivered in a scrambled order with duplicates and an
        // overlapping retransmission.
        let order = [0u64, 2, 1, 5, 5, 3, 9, 4, 8, 6, 7];
        let mut pn = 0;
        for (i, &k) in order.iter().enumerate() {
            let (h, p) = data(9, pn, k * 1000, 1000);
            pn += 1;
            assert!(f.on_data(&h, &p, false, i as u64 * 10));
        }
        // Overlapping range [4500, 5500).
        let (h, p) = data(9, pn, 4500, 1000);
        pn += 1;
        assert!(f.on_data(&h, &p, false, 200));
        assert!(!f.complete());
        let (h, p) = fin(9, pn, total);
        assert!(f.on_data(&h, &p, true, 300));
        assert!(f.complete());
        assert!(f.intact);
        assert_eq!(f.next_offset, total);
        assert_eq!(f.duplicates, 2);
        assert_eq!(f.ecn_ce, 1);
        let s = f.summary(0, false);
        assert_eq!(s.hash, s.sender_hash.clone().unwrap());
        let a = f.build_ack(300);
        assert_eq!(a.flags & flags::COMPLETE, flags::COMPLETE);
        assert_eq!(a.flags & flags::INTACT, flags::INTACT);
        assert_eq!(a.cum_offset, total);
    }

    #[test]
    fn arrivals_count_bytes_beyond_a_hole_when_they_arrive() {
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mut f = RecvFlow::new(0, 9, peer, 1000);
        let gap = ARRIVAL_INTERVAL_US;
        // Packet 0, then packets 2..6 while packet 1 is lost, one per interval; packet 1's
        // retransmission, a duplicate, and the FIN.
        let mut pn = 0;
        let mut send = |f: &mut RecvFlow, off: u64, now: u64| {
            let (h, p) = data(9, pn, off, 1000);
            pn += 1;
            assert!(f.on_data(&h, &p, false, now));
        };
        send(&mut f, 0, 0);
        for k in 2..6 {
            send(&mut f, k * 1000, (k - 1) * gap);
        }
        send(&mut f, 1000, 5 * gap);
        send(&mut f, 1000, 5 * gap + 1);
        let (h, p) = fin(9, 99, 6000);
        assert!(f.on_data(&h, &p, false, 6 * gap));
        assert!(f.complete() && f.intact);
        let got: Vec<(f64, u64)> = f
            .summary(0, false)
            .arrivals
            .iter()
            .map(|a| (a.t_s, a.bytes))
            .collect();
        // In order only 1000 bytes until the repair; what crossed the path grows every interval.
        assert_eq!(
            got,
            vec![
                (0.0, 1000),
                (0.01, 2000),
                (0.02, 3000),
                (0.03, 4000),
                (0.04, 5000),
                (0.05, 6000),
                (0.06, 6000),
            ]
        );
    }

    #[test]
    fn wrong_hash_or_length_is_not_intact() {
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mut f = RecvFlow::new(0, 9, peer, 1000);
        let (h, p) = data(9, 0, 0, 1000);
        assert!(f.on_data(&h, &p, false, 0));
        let (h, _) = fin(9, 1, 1000);
        assert!(f.on_data(&h, &[0u8; 16], false, 1));
        assert!(f.complete() && !f.intact);
        // Data beyond an announced FIN is refused.
        let mut g = RecvFlow::new(1, 10, peer, 1000);
        let (h, p) = fin(10, 0, 500);
        assert!(g.on_data(&h, &p, false, 0));
        let (h, p) = data(10, 1, 0, 1000);
        assert!(!g.on_data(&h, &p, false, 1));
    }
}
