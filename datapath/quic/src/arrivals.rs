//! Which stream bytes crossed the path, and when, told by s2n-quic's connection events
//! (`s2n_quic::provider::event`) rather than by the stream API, which hands bytes over only in
//! order: while a lost packet is repaired, what arrives behind the hole waits in the stack's
//! receive buffer, and the application's in-order count stalls and then jumps.
//!
//! * The receiver ([`ArrivalSubscriber`]) notes every STREAM frame of a flow's stream as it
//!   arrives ([`StreamArrivals`]): each stream byte counts once, whenever it first arrives, in
//!   order or beyond a hole. Every [`ARRIVAL_INTERVAL_US`] (10 ms) at most, when data comes,
//!   it records the count ([`Arrival`], ccp-udp's record), counted from when the connection's
//!   first packet reached the receiver — as ccp-udp counts from the flow's HELLO: about half
//!   the handshake's RTT before the sender's time zero (its handshake ends when the
//!   receiver's answer to that packet reaches it). The records are the receiver summary's
//!   `arrivals`.
//! * The sender ([`AckSubscriber`]) notes which stream bytes each 1-RTT packet carried and,
//!   from every ACK range, which of them the receiver acknowledged ([`AckedStream`]): its
//!   trace counts acknowledged stream content bytes, in order (`delivered_bytes`) and beyond a
//!   hole too (`received_bytes`), as ccp-udp's does — not the QUIC packets' bytes, which
//!   include their headers, frame headers and AEAD tags.
//!
//! Both count stream content: the stream's [`wire::HEADER_LEN`]-byte header is left out;
//! a sized flow's trailer follows the content and is left out of the receiver's records when
//! the flow ends (they are capped at the bytes it read).

use crate::wire;
pub use ccp_udp::summary::{ARRIVAL_INTERVAL_US, Arrival};
use s2n_quic::provider::event::{ConnectionInfo, ConnectionMeta, Subscriber, Timestamp, events};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// The stream that carries a flow: the client's first bidirectional stream (RFC 9000 §2.1).
pub const FLOW_STREAM: u64 = 0;

/// Disjoint, non-adjacent half-open byte ranges `[start, end)`, keyed by start.
#[derive(Clone, Debug, Default)]
pub struct ByteRanges {
    r: BTreeMap<u64, u64>,
    total: u64,
}

impl ByteRanges {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `[start, end)`; returns how many of its bytes were new.
    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        if end <= start {
            return 0;
        }
        // Fast path, the common case: data in order, at or within the end of the last range.
        if let Some(mut last) = self.r.last_entry()
            && *last.key() <= start
            && *last.get() >= start
        {
            let added = end.saturating_sub(*last.get());
            if added > 0 {
                *last.get_mut() = end;
            }
            self.total += added;
            return added;
        }
        let (mut lo, mut hi) = (start, end);
        let mut covered = 0;
        // A range that starts before `start` and reaches it merges.
        if let Some((&s, &e)) = self.r.range(..=start).next_back()
            && e >= start
        {
            lo = s;
            hi = hi.max(e);
            covered += e - s;
            self.r.remove(&s);
        }
        // Ranges starting within `[start, hi]` merge too.
        while let Some((&s, &e)) = self.r.range(start..=hi).next() {
            hi = hi.max(e);
            covered += e - s;
            self.r.remove(&s);
        }
        self.r.insert(lo, hi);
        let added = (hi - lo) - covered;
        self.total += added;
        added
    }

    /// Bytes in the set.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// End of the range that starts at 0 (0 if none does): the contiguous prefix.
    pub fn prefix(&self) -> u64 {
        self.r.get(&0).copied().unwrap_or(0)
    }

    /// Number of disjoint ranges (holes + 1, when the prefix is there).
    pub fn len(&self) -> usize {
        self.r.len()
    }

    /// No bytes.
    pub fn is_empty(&self) -> bool {
        self.r.is_empty()
    }
}

/// Content bytes among the first `stream_bytes` stream bytes, or among `stream_bytes` distinct
/// ones: the header is not content.
fn content_of(stream_bytes: u64) -> u64 {
    stream_bytes.saturating_sub(wire::HEADER_LEN as u64)
}

/// The receiver's record of one flow's stream: which bytes arrived, and samples of how many.
#[derive(Clone, Debug)]
pub struct StreamArrivals {
    /// When the connection's first packet reached the receiver: the records' time zero.
    zero: Instant,
    got: ByteRanges,
    /// Samples: µs since `zero`, distinct stream bytes (header included).
    samples: Vec<(u64, u64)>,
    next_us: u64,
}

impl StreamArrivals {
    /// A record whose times count from `zero`.
    pub fn new(zero: Instant) -> Self {
        StreamArrivals {
            zero,
            got: ByteRanges::new(),
            samples: Vec::new(),
            next_us: 0,
        }
    }

    /// µs from the record's zero to `now`.
    pub fn since_zero_us(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.zero).as_micros() as u64
    }

    /// Stream bytes `[offset, offset + len)` arrived `now_us` after zero; records the count if
    /// a sample is due (the first data, then at least [`ARRIVAL_INTERVAL_US`] after the last).
    pub fn on_stream(&mut self, offset: u64, len: u64, now_us: u64) {
        self.got.insert(offset, offset + len);
        if now_us >= self.next_us {
            self.next_us = now_us + ARRIVAL_INTERVAL_US;
            self.samples.push((now_us, self.got.total()));
        }
    }

    /// Distinct stream bytes that arrived so far (header included).
    pub fn stream_bytes(&self) -> u64 {
        self.got.total()
    }

    /// The records, in content bytes, ending with one at `end_us` (when the stream ended):
    /// each sample's distinct stream bytes less the header, capped at `content` (the bytes the
    /// receiver read: a sized flow's trailer is not content; bytes beyond a hole the sender's
    /// reset abandoned were never delivered).
    pub fn finish(&self, end_us: u64, content: u64) -> Vec<Arrival> {
        let last = (
            end_us.max(self.samples.last().map_or(0, |s| s.0)),
            self.got.total(),
        );
        self.samples
            .iter()
            .chain(std::iter::once(&last))
            .map(|&(t_us, b)| Arrival {
                t_s: t_us as f64 / 1e6,
                bytes: content_of(b).min(content),
            })
            .collect()
    }
}

/// A flow's [`StreamArrivals`], shared between the connection's events and the task that
/// reads the stream.
pub type SharedArrivals = Arc<Mutex<StreamArrivals>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The receiver's per-connection context: the flow's record, and the connection's first
/// event time in s2n-quic's clock (the same instant as the record's zero), so a frame's
/// arrival time comes from its event's timestamp without reading the clock once per frame.
#[derive(Debug)]
pub struct ArrivalContext {
    arrivals: SharedArrivals,
    zero: Timestamp,
}

/// The receiver's event subscriber: a [`StreamArrivals`] per connection (in its context, which
/// the application gets with `Connection::query_event_context`), fed with the STREAM frames of
/// [`FLOW_STREAM`] as they arrive.
#[derive(Clone, Copy, Debug, Default)]
pub struct ArrivalSubscriber;

impl Subscriber for ArrivalSubscriber {
    type ConnectionContext = ArrivalContext;

    fn create_connection_context(
        &mut self,
        meta: &ConnectionMeta,
        _info: &ConnectionInfo,
    ) -> ArrivalContext {
        // A server creates the connection when its first Initial packet arrives.
        ArrivalContext {
            arrivals: Arc::new(Mutex::new(StreamArrivals::new(Instant::now()))),
            zero: meta.timestamp,
        }
    }

    fn on_frame_received(
        &mut self,
        context: &mut ArrivalContext,
        meta: &ConnectionMeta,
        event: &events::FrameReceived,
    ) {
        if let events::Frame::Stream {
            id, offset, len, ..
        } = event.frame
            && id == FLOW_STREAM
        {
            let now_us = meta
                .timestamp
                .saturating_duration_since(context.zero)
                .as_micros() as u64;
            lock(&context.arrivals).on_stream(offset, u64::from(len), now_us);
        }
    }
}

/// The receiver's record of `conn`'s flow (None if the connection is gone).
pub fn arrivals_of(conn: &s2n_quic::Connection) -> Option<SharedArrivals> {
    conn.query_event_context(|c: &ArrivalContext| c.arrivals.clone())
        .ok()
}

/// Packets declared lost whose stream ranges [`AckedStream`] keeps for a late ACK (a loss
/// declared spuriously, after reordering or a delayed ACK): the latest 4096 (about 6 MB of
/// stream data in full-size packets). Older ones are forgotten; their data still counts when
/// the retransmission carrying it is acknowledged.
pub const LOST_KEPT: usize = 4096;

/// One stream range a 1-RTT packet carried: (packet number, start, end).
type Sent = (u64, u64, u64);

/// The sender's record of which stream bytes the receiver acknowledged.
#[derive(Clone, Debug, Default)]
pub struct AckedStream {
    /// Stream ranges of the 1-RTT packets sent, not yet acknowledged nor declared lost, in
    /// packet number order (1-RTT packet numbers increase as packets are sent); a packet's
    /// contiguous frames share one entry, non-contiguous ones have one each.
    in_flight: VecDeque<Sent>,
    /// Distinct packets in `in_flight`.
    in_flight_pkts: usize,
    /// Stream ranges of the packets declared lost, kept for a late ACK, by packet number.
    lost: BTreeMap<u64, Vec<(u64, u64)>>,
    /// Packets in `lost`, in the order they were declared lost (at most [`LOST_KEPT`]).
    lost_order: VecDeque<u64>,
    acked: ByteRanges,
}

impl AckedStream {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// 1-RTT packet `pn` carries stream bytes `[offset, offset + len)`.
    pub fn on_sent(&mut self, pn: u64, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let end = offset + len;
        match self.in_flight.back_mut() {
            // The packet's next frame follows its previous one: one range.
            Some(last) if last.0 == pn && last.2 == offset => last.2 = end,
            // A frame of the same packet elsewhere in the stream (a repair and new data).
            Some(last) if last.0 == pn => self.in_flight.push_back((pn, offset, end)),
            Some(last) if last.0 > pn => {
                // Not in sending order (not expected): placed by packet number.
                let (a, b) = self.span(pn, pn);
                self.in_flight.insert(b, (pn, offset, end));
                self.in_flight_pkts += usize::from(a == b);
            }
            _ => {
                self.in_flight.push_back((pn, offset, end));
                self.in_flight_pkts += 1;
            }
        }
    }

    /// Indices `[a, b)` of `in_flight`'s entries of packets `first..=last`.
    fn span(&self, first: u64, last: u64) -> (usize, usize) {
        let a = self.in_flight.partition_point(|e| e.0 < first);
        let b = self.in_flight.partition_point(|e| e.0 <= last);
        (a, b)
    }

    /// Removes `in_flight`'s entries `[a, b)`, counting the packets they belonged to.
    fn take(&mut self, a: usize, b: usize) -> std::collections::vec_deque::Drain<'_, Sent> {
        let mut pkts = 0;
        let mut prev = None;
        for e in self.in_flight.range(a..b) {
            if prev != Some(e.0) {
                pkts += 1;
                prev = Some(e.0);
            }
        }
        self.in_flight_pkts -= pkts;
        self.in_flight.drain(a..b)
    }

    /// 1-RTT packet `pn` was declared lost: its ranges stay for a late ACK, up to
    /// [`LOST_KEPT`] such packets.
    pub fn on_lost(&mut self, pn: u64) {
        let (a, b) = self.span(pn, pn);
        if a == b {
            return;
        }
        let ranges: Vec<(u64, u64)> = self.take(a, b).map(|(_, s, e)| (s, e)).collect();
        self.lost.insert(pn, ranges);
        self.lost_order.push_back(pn);
        while self.lost_order.len() > LOST_KEPT {
            if let Some(old) = self.lost_order.pop_front() {
                self.lost.remove(&old);
            }
        }
    }

    /// Packets whose stream ranges are kept (sent, not acknowledged, not forgotten).
    pub fn kept(&self) -> usize {
        self.in_flight_pkts + self.lost.len()
    }

    /// The receiver acknowledged 1-RTT packets `first..=last`.
    pub fn on_acked(&mut self, first: u64, last: u64) {
        if first > last {
            return;
        }
        let (a, b) = self.span(first, last);
        if a < b {
            // Consecutive packets' ranges usually follow one another: inserted as one.
            let mut run: Option<(u64, u64)> = None;
            let mut acked = std::mem::take(&mut self.acked);
            for (_, s, e) in self.take(a, b) {
                run = match run {
                    Some((rs, re)) if re == s => Some((rs, e)),
                    Some((rs, re)) => {
                        acked.insert(rs, re);
                        Some((s, e))
                    }
                    None => Some((s, e)),
                };
            }
            if let Some((rs, re)) = run {
                acked.insert(rs, re);
            }
            self.acked = acked;
        }
        if !self.lost.is_empty() {
            let late: Vec<u64> = self.lost.range(first..=last).map(|(&p, _)| p).collect();
            for pn in late {
                if let Some(ranges) = self.lost.remove(&pn) {
                    for (s, e) in ranges {
                        self.acked.insert(s, e);
                    }
                }
            }
            if self.lost.len() < self.lost_order.len() {
                let lost = &self.lost;
                self.lost_order.retain(|p| lost.contains_key(p));
            }
        }
    }

    /// Content bytes acknowledged in order (the contiguous prefix, less the header).
    pub fn in_order(&self) -> u64 {
        content_of(self.acked.prefix())
    }

    /// Distinct content bytes acknowledged, beyond a hole too (a sized flow's
    /// [`wire::TRAILER_LEN`]-byte trailer counts too once acknowledged).
    pub fn distinct(&self) -> u64 {
        content_of(self.acked.total())
    }
}

/// The sender's event subscriber: one per client (one flow), feeding an [`AckedStream`] the
/// sampler reads.
#[derive(Clone, Debug, Default)]
pub struct AckSubscriber {
    /// The flow's record.
    pub acked: Arc<Mutex<AckedStream>>,
}

impl AckSubscriber {
    /// Content bytes acknowledged: (in order, beyond a hole too).
    pub fn counts(&self) -> (u64, u64) {
        let a = lock(&self.acked);
        (a.in_order(), a.distinct())
    }
}

impl Subscriber for AckSubscriber {
    type ConnectionContext = ();

    fn create_connection_context(&mut self, _meta: &ConnectionMeta, _info: &ConnectionInfo) {}

    fn on_frame_sent(&mut self, _c: &mut (), _meta: &ConnectionMeta, event: &events::FrameSent) {
        if let (
            events::PacketHeader::OneRtt { number, .. },
            events::Frame::Stream {
                id, offset, len, ..
            },
        ) = (&event.packet_header, &event.frame)
            && *id == FLOW_STREAM
        {
            lock(&self.acked).on_sent(*number, *offset, u64::from(*len));
        }
    }

    fn on_packet_lost(&mut self, _c: &mut (), _meta: &ConnectionMeta, event: &events::PacketLost) {
        if let events::PacketHeader::OneRtt { number, .. } = event.packet_header {
            lock(&self.acked).on_lost(number);
        }
    }

    fn on_ack_range_received(
        &mut self,
        _c: &mut (),
        _meta: &ConnectionMeta,
        event: &events::AckRangeReceived,
    ) {
        if let events::PacketHeader::OneRtt { .. } = event.packet_header {
            lock(&self.acked).on_acked(*event.ack_range.start(), *event.ack_range.end());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = wire::HEADER_LEN as u64;

    #[test]
    fn ranges_count_each_byte_once_and_merge() {
        let mut r = ByteRanges::new();
        assert_eq!(r.insert(0, 100), 100);
        assert_eq!(r.insert(200, 300), 100);
        assert_eq!((r.total(), r.prefix(), r.len()), (200, 100, 2));
        // Duplicate and overlapping data counts only what is new.
        assert_eq!(r.insert(50, 100), 0);
        assert_eq!(r.insert(250, 350), 50);
        // Filling the hole (and more, across both ranges) joins them.
        assert_eq!(r.insert(90, 260), 100);
        assert_eq!((r.total(), r.prefix(), r.len()), (350, 350, 1));
        // Adjacent ranges merge; a range swallowing several merges them all.
        assert_eq!(r.insert(350, 360), 10);
        assert_eq!(r.insert(400, 410), 10);
        assert_eq!(r.insert(420, 430), 10);
        assert_eq!(r.insert(380, 440), 40);
        assert_eq!((r.total(), r.len()), (420, 2));
        assert_eq!(r.insert(5, 5), 0);
    }

    #[test]
    fn arrivals_count_bytes_beyond_a_hole_when_they_arrive() {
        let mut a = StreamArrivals::new(Instant::now());
        let gap = ARRIVAL_INTERVAL_US;
        // The header and the first 1000 content bytes; then 1000-byte frames 2..6 while frame 1
        // is lost, one per interval; frame 1's retransmission, a duplicate, then the end.
        a.on_stream(0, H + 1000, 0);
        for k in 2..6 {
            a.on_stream(H + k * 1000, 1000, (k - 1) * gap);
        }
        a.on_stream(H + 1000, 1000, 5 * gap);
        a.on_stream(H + 1000, 1000, 5 * gap + 1);
        let got: Vec<(f64, u64)> = a
            .finish(6 * gap, 6000)
            .iter()
            .map(|r| (r.t_s, r.bytes))
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
    fn arrivals_are_sampled_at_most_every_interval_and_capped_at_the_content() {
        let mut a = StreamArrivals::new(Instant::now());
        // The header, then a 100-byte frame every ms for 35 ms, then a 32-byte trailer.
        a.on_stream(0, H, 0);
        for k in 0..35u64 {
            a.on_stream(H + k * 100, 100, k * 1000);
        }
        a.on_stream(H + 3500, 32, 35_000);
        let got = a.finish(36_000, 3500);
        let t: Vec<f64> = got.iter().map(|r| r.t_s).collect();
        assert_eq!(t, vec![0.0, 0.01, 0.02, 0.03, 0.036]);
        let b: Vec<u64> = got.iter().map(|r| r.bytes).collect();
        // The header is not content; the trailer is capped away.
        assert_eq!(b, vec![0, 1100, 2100, 3100, 3500]);
    }

    #[test]
    fn acked_stream_counts_in_order_and_beyond_a_hole() {
        let mut s = AckedStream::new();
        s.on_sent(1, 0, H + 1000);
        s.on_sent(2, H + 1000, 1000);
        s.on_sent(3, H + 2000, 1000);
        s.on_sent(3, H + 3000, 500);
        s.on_acked(1, 1);
        s.on_acked(3, 3);
        // Packet 2 is lost: 1000 bytes in order, 2500 delivered.
        assert_eq!((s.in_order(), s.distinct()), (1000, 2500));
        // Its frame goes again in packet 4; the ACK repeats the ranges already acknowledged.
        s.on_sent(4, H + 1000, 1000);
        s.on_acked(1, 4);
        assert_eq!((s.in_order(), s.distinct()), (3500, 3500));
        // A late ACK of the lost packet itself counts nothing twice.
        s.on_acked(2, 2);
        assert_eq!((s.in_order(), s.distinct()), (3500, 3500));
        assert_eq!(s.kept(), 0);
    }

    #[test]
    fn acked_stream_counts_a_late_ack_of_a_lost_packet_and_forgets_old_losses() {
        let mut s = AckedStream::new();
        s.on_sent(0, 0, H);
        s.on_acked(0, 0);
        // Packet 1 declared lost (spuriously): its ACK comes late and still counts.
        s.on_sent(1, H, 1000);
        s.on_lost(1);
        s.on_acked(1, 1);
        assert_eq!((s.in_order(), s.distinct()), (1000, 1000));
        // Many more losses than are kept: the oldest are forgotten, the latest still count.
        let n = LOST_KEPT as u64 + 10;
        for k in 0..n {
            s.on_sent(2 + k, H + 1000 + k * 10, 10);
            s.on_lost(2 + k);
        }
        assert_eq!(s.kept(), LOST_KEPT);
        s.on_acked(2, 2 + n);
        assert_eq!(s.distinct(), 1000 + LOST_KEPT as u64 * 10);
        assert_eq!(s.in_order(), 1000);
        assert_eq!(s.kept(), 0);
    }

    #[test]
    fn ranges_appended_in_order_extend_the_last_range() {
        let mut r = ByteRanges::new();
        assert_eq!(r.insert(0, 10), 10);
        // Within the last range, overlapping its end, adjacent to it, then past a gap.
        assert_eq!(r.insert(2, 8), 0);
        assert_eq!(r.insert(5, 15), 5);
        assert_eq!(r.insert(15, 20), 5);
        assert_eq!((r.total(), r.prefix(), r.len()), (20, 20, 1));
        assert_eq!(r.insert(30, 40), 10);
        assert_eq!(r.insert(35, 45), 5);
        assert_eq!((r.total(), r.prefix(), r.len()), (35, 20, 2));
        // Behind the last range: the general path still merges.
        assert_eq!(r.insert(18, 32), 10);
        assert_eq!((r.total(), r.prefix(), r.len()), (45, 45, 1));
    }

    #[test]
    fn acked_stream_takes_acks_out_of_order_and_split_packets() {
        let mut s = AckedStream::new();
        s.on_sent(1, 0, H + 100);
        // Packet 2 carries two contiguous frames (one range) and packet 3 two frames with a
        // gap between them (the gap goes in packet 4).
        s.on_sent(2, H + 100, 50);
        s.on_sent(2, H + 150, 50);
        s.on_sent(3, H + 200, 100);
        s.on_sent(3, H + 400, 100);
        s.on_sent(4, H + 300, 100);
        s.on_sent(5, H + 500, 100);
        s.on_sent(6, 0, 0);
        assert_eq!(s.kept(), 5);
        // Frames told out of packet order (not expected) still land with their packet.
        s.on_sent(7, H + 700, 100);
        s.on_sent(6, H + 600, 100);
        s.on_sent(7, H + 800, 100);
        s.on_sent(6, H + 650, 100); // overlapping its first frame
        assert_eq!(s.kept(), 7);
        s.on_acked(6, 7);
        assert_eq!((s.in_order(), s.distinct(), s.kept()), (0, 300 - H, 5));
        // The later packets' ACK first, then the earlier ones, one by one, out of order (the
        // header is not content: the distinct count lacks it until packet 1's ACK).
        s.on_acked(4, 6);
        assert_eq!((s.in_order(), s.distinct(), s.kept()), (0, 500 - H, 3));
        s.on_acked(2, 2);
        assert_eq!((s.in_order(), s.distinct(), s.kept()), (0, 600 - H, 2));
        s.on_acked(3, 3);
        assert_eq!((s.in_order(), s.distinct(), s.kept()), (0, 800 - H, 1));
        s.on_acked(1, 1);
        assert_eq!((s.in_order(), s.distinct(), s.kept()), (900, 900, 0));
        // Repeated and unknown ranges change nothing; nor does the loss of an acked packet.
        s.on_acked(0, 9);
        s.on_lost(3);
        assert_eq!((s.in_order(), s.distinct(), s.kept()), (900, 900, 0));
    }

    #[test]
    fn acked_stream_counts_a_late_ack_spanning_lost_and_in_flight_packets() {
        let mut s = AckedStream::new();
        s.on_sent(1, 0, H + 100);
        s.on_sent(2, H + 100, 100);
        s.on_sent(2, H + 300, 100);
        s.on_sent(3, H + 200, 100);
        s.on_sent(4, H + 400, 100);
        // Packet 2 (two ranges) declared lost, then one ACK covers all four.
        s.on_lost(2);
        s.on_lost(7);
        assert_eq!(s.kept(), 4);
        s.on_acked(1, 1);
        s.on_acked(3, 4);
        assert_eq!((s.in_order(), s.distinct(), s.kept()), (100, 300, 1));
        s.on_acked(1, 4);
        assert_eq!((s.in_order(), s.distinct(), s.kept()), (500, 500, 0));
    }

    #[test]
    fn acked_stream_bounds_only_the_losses_still_kept() {
        let mut s = AckedStream::new();
        let k = LOST_KEPT as u64;
        for pn in 0..k {
            s.on_sent(pn, pn * 10, 10);
            s.on_lost(pn);
        }
        assert_eq!(s.kept(), LOST_KEPT);
        // Half of them acknowledged late: the other half and as many new losses are all kept.
        s.on_acked(0, k / 2 - 1);
        for pn in k..k + k / 2 {
            s.on_sent(pn, pn * 10, 10);
            s.on_lost(pn);
        }
        assert_eq!(s.kept(), LOST_KEPT);
        // One more loss forgets the oldest one still kept (packet k / 2).
        s.on_sent(2 * k, 2 * k * 10, 10);
        s.on_lost(2 * k);
        assert_eq!(s.kept(), LOST_KEPT);
        s.on_acked(0, 2 * k);
        assert_eq!(s.kept(), 0);
        assert_eq!(s.distinct(), (k + k / 2) * 10 - H);
        assert_eq!(s.in_order(), (k / 2) * 10 - H);
    }
}
