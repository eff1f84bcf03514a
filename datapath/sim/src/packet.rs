//! Packets as the simulator carries them: a small header shared by data and ACKs (flow, hosts,
//! wire size, ECMP hash, ECN codepoint) and the transport fields of each kind.
//!
//! Data packets carry a packet number (never reused: a retransmission gets a new one, as in
//! QUIC) and the index of the segment of the flow's byte stream they carry. ACKs carry the
//! highest ranges of packet numbers received (SACK-like) and the receiver's cumulative ECN-CE
//! counters, so a lost ACK loses no information the next one does not repeat, and the send and
//! receive time stamps of the data packet that triggered them (for one-way delays).

/// Most packet-number ranges an ACK carries.
pub const MAX_ACK_RANGES: usize = 4;

/// ECN codepoint of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ecn {
    /// Not ECN-capable.
    NotEct,
    /// ECN-capable, not marked.
    Ect,
    /// Congestion experienced.
    Ce,
}

/// Transport fields of a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHdr {
    /// Packet number (per flow, increasing, never reused).
    pub pn: u64,
    /// Segment index in the flow's byte stream.
    pub seg: u64,
    /// Payload bytes.
    pub payload: u32,
    /// The flow's last segment.
    pub last: bool,
    /// When the sender put the packet into its host's NIC queue, ns (for one-way delays).
    pub sent_ns: u64,
}

/// Transport fields of an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckHdr {
    /// Received packet-number ranges, inclusive, highest first; `n_ranges` are valid.
    pub ranges: [(u64, u64); MAX_ACK_RANGES],
    /// Number of valid ranges (at least 1).
    pub n_ranges: u8,
    /// CE-marked data packets received so far.
    pub ce_packets: u64,
    /// Payload bytes of CE-marked data packets received so far.
    pub ce_bytes: u64,
    /// Time stamps of the data packet that made the receiver send this ACK (its latest
    /// arrival): the sender's send time stamp echoed (`DataHdr::sent_ns`) and the receiver's
    /// receive time stamp, ns, each on its own host's clock (all hosts share the simulator's
    /// virtual clock). None before any data arrived. The sender takes the forward one-way delay
    /// from them.
    pub timestamps: Option<(u64, u64)>,
}

impl AckHdr {
    /// The valid ranges.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges[..usize::from(self.n_ranges)]
    }

    /// Whether packet number `pn` is acknowledged.
    pub fn covers(&self, pn: u64) -> bool {
        self.ranges().iter().any(|&(lo, hi)| lo <= pn && pn <= hi)
    }
}

/// Data or ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    Data(DataHdr),
    Ack(AckHdr),
}

/// One packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Flow index.
    pub flow: u32,
    /// Sending host (node index).
    pub src: u32,
    /// Receiving host (node index).
    pub dst: u32,
    /// Bytes on the wire.
    pub size: u32,
    /// Flow hash for ECMP.
    pub hash: u32,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// Transport fields.
    pub body: Body,
}

impl Packet {
    /// Whether this is an ACK.
    pub fn is_ack(&self) -> bool {
        matches!(self.body, Body::Ack(_))
    }
}
