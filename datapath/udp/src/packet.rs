//! The wire format: every datagram's header and the four packet types (HELLO, HELLO_ACK, DATA,
//! ACK), their encoders into caller-owned buffers and a decoder that never panics on input.
//!
//! All integers are big-endian. Every datagram starts with the same 8-byte header:
//!
//! ```text
//!  0       1       2       3       4               8
//! +-------+-------+-------+-------+---------------+
//! | magic |version| type  | flags |   flow id     |
//! +-------+-------+-------+-------+---------------+
//! ```
//!
//! * `HELLO` (16 bytes): header, `mss` u32, sender timestamp u32 (µs, echoed).
//! * `HELLO_ACK` (16 bytes): header, `mss` u32 (echo), echoed sender timestamp u32.
//! * `DATA` (24-byte header + payload): header, packet number u48, stream offset u48, send
//!   timestamp u32 (µs since the flow's start, wrapping), payload. The 24-byte header lets a
//!   1448-byte payload fill a 1500-byte IPv4 MTU exactly, as TCP with timestamps does; 48 bits
//!   of packet number and offset (2.8·10¹⁴ packets, 256 TiB) are plenty for one flow.
//!   With the `FIN` flag the packet carries no stream data: its offset is the stream's total
//!   length and its 16-byte payload the sender's xxh3-128 hash of the whole stream.
//! * `ACK` (≥ 46 bytes): header (flags `FIN_SEEN`, `COMPLETE`, `INTACT`), largest acknowledged
//!   packet number u64, ACK delay u32 (µs), echoed send timestamp of the largest u32, the
//!   receiver's receive timestamp of that same packet u32 (µs on the receiver's clock, wrapping;
//!   its origin is arbitrary, so only differences between a flow's samples mean anything: the
//!   sender takes `receive - send` as the one-way delay up to a constant clock offset), the
//!   receiver's contiguous stream offset u64, cumulative ECN-CE packet count u64, number of
//!   extra ranges u8, then QUIC-style variable-length integers: the first range's length
//!   (`largest - smallest` of the top range) and for each extra range, going down, `gap`
//!   (`previous smallest - this largest - 2`) and `length`.
//!
//! Version 2 added the ACK's receive timestamp; a version-1 peer is refused at the HELLO.

use std::fmt;

/// First byte of every datagram.
pub const MAGIC: u8 = 0xCC;
/// Protocol version carried in the second byte.
pub const VERSION: u8 = 2;
/// Length of the common header.
pub const HEADER_LEN: usize = 8;
/// Length of a DATA packet's header (common header included).
pub const DATA_HEADER_LEN: usize = 24;
/// Length of HELLO and HELLO_ACK.
pub const HELLO_LEN: usize = 16;
/// Length of the stream hash a FIN carries.
pub const HASH_LEN: usize = 16;
/// Largest packet number and stream offset the DATA header can carry.
pub const MAX_WIRE_U48: u64 = (1 << 48) - 1;
/// Most ACK ranges an ACK carries (the top range included).
pub const MAX_ACK_RANGES: usize = 32;
/// Largest encoded ACK.
pub const MAX_ACK_LEN: usize = ACK_FIXED_LEN + 8 + (MAX_ACK_RANGES - 1) * 16;
/// Smallest payload size (mss) a flow may use.
pub const MIN_MSS: u32 = 64;
/// Largest payload size (mss): a 9000-byte jumbo frame minus IPv4, UDP and DATA headers.
pub const MAX_MSS: u32 = 9000 - 28 - DATA_HEADER_LEN as u32;
/// Largest DATA datagram.
pub const MAX_DATAGRAM: usize = DATA_HEADER_LEN + MAX_MSS as usize;

const ACK_FIXED_LEN: usize = HEADER_LEN + 8 + 4 + 4 + 4 + 8 + 8 + 1;

/// Packet types.
pub mod ty {
    /// Sender → receiver: open a flow.
    pub const HELLO: u8 = 1;
    /// Receiver → sender: flow accepted.
    pub const HELLO_ACK: u8 = 2;
    /// Sender → receiver: stream data or FIN.
    pub const DATA: u8 = 3;
    /// Receiver → sender: acknowledgement.
    pub const ACK: u8 = 4;
}

/// Flag bits.
pub mod flags {
    /// DATA: this packet ends the stream (offset = total length, payload = hash).
    pub const FIN: u8 = 0x01;
    /// ACK: the receiver has seen the FIN.
    pub const FIN_SEEN: u8 = 0x01;
    /// ACK: the receiver has the whole stream (FIN seen and no hole).
    pub const COMPLETE: u8 = 0x02;
    /// ACK: the complete stream's length and hash matched the FIN.
    pub const INTACT: u8 = 0x04;
}

/// Why a datagram was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Shorter than its type requires.
    #[error("datagram too short")]
    Truncated,
    /// First byte is not [`MAGIC`].
    #[error("bad magic byte")]
    BadMagic,
    /// Unknown protocol version.
    #[error("unsupported version {0}")]
    BadVersion(u8),
    /// Unknown packet type.
    #[error("unknown packet type {0}")]
    BadType(u8),
    /// A field holds an impossible value (mss out of range, empty data, FIN without hash,
    /// trailing bytes, offset overflow).
    #[error("invalid field")]
    BadField,
    /// The ACK ranges are inconsistent or too many.
    #[error("invalid ACK ranges")]
    BadAckRanges,
}

/// HELLO and HELLO_ACK contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Flow id.
    pub flow_id: u32,
    /// Payload size the sender will use.
    pub mss: u32,
    /// HELLO: the sender's timestamp (µs); HELLO_ACK: the same value echoed.
    pub ts: u32,
}

/// A DATA packet's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// Flow id.
    pub flow_id: u32,
    /// Flags ([`flags::FIN`]).
    pub flags: u8,
    /// Packet number: unique per transmission.
    pub pn: u64,
    /// Stream offset of the first payload byte (FIN: the total stream length).
    pub offset: u64,
    /// Send timestamp, µs since the flow's start (wrapping).
    pub ts: u32,
}

impl DataHeader {
    /// Whether this packet is the FIN.
    pub fn is_fin(&self) -> bool {
        self.flags & flags::FIN != 0
    }
}

/// An ACK, ranges stored without allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Flow id.
    pub flow_id: u32,
    /// Flags ([`flags::FIN_SEEN`], [`flags::COMPLETE`], [`flags::INTACT`]).
    pub flags: u8,
    /// How long the receiver held this ACK after receiving the largest packet, µs.
    pub ack_delay_us: u32,
    /// Send timestamp of the largest acknowledged packet, echoed.
    pub echo_ts: u32,
    /// When the receiver received the packet whose send timestamp `echo_ts` echoes: µs on the
    /// receiver's clock (arbitrary origin, wrapping).
    pub recv_ts: u32,
    /// The receiver's contiguous stream offset (every byte below it was received).
    pub cum_offset: u64,
    /// Packets received with ECN-CE so far (cumulative).
    pub ecn_ce: u64,
    ranges: [(u64, u64); MAX_ACK_RANGES],
    n_ranges: usize,
}

impl fmt::Debug for Ack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ack")
            .field("flow_id", &format_args!("{:08x}", self.flow_id))
            .field("flags", &self.flags)
            .field("ranges", &self.ranges())
            .field("ack_delay_us", &self.ack_delay_us)
            .field("echo_ts", &self.echo_ts)
            .field("recv_ts", &self.recv_ts)
            .field("cum_offset", &self.cum_offset)
            .field("ecn_ce", &self.ecn_ce)
            .finish()
    }
}

impl Ack {
    /// An ACK of nothing yet (add ranges with [`Ack::push_range`]).
    pub fn new(flow_id: u32) -> Self {
        Ack {
            flow_id,
            flags: 0,
            ack_delay_us: 0,
            echo_ts: 0,
            recv_ts: 0,
            cum_offset: 0,
            ecn_ce: 0,
            ranges: [(0, 0); MAX_ACK_RANGES],
            n_ranges: 0,
        }
    }

    /// Appends an inclusive range `[lo, hi]`; ranges must be pushed from the highest down,
    /// separated by at least one missing packet. Returns false (and ignores it) when full or
    /// out of order.
    pub fn push_range(&mut self, lo: u64, hi: u64) -> bool {
        if lo > hi || self.n_ranges == MAX_ACK_RANGES {
            return false;
        }
        if let Some(&(prev_lo, _)) = self.ranges[..self.n_ranges].last()
            && (prev_lo < 2 || hi > prev_lo - 2)
        {
            return false;
        }
        self.ranges[self.n_ranges] = (lo, hi);
        self.n_ranges += 1;
        true
    }

    /// Acknowledged ranges `[lo, hi]`, highest first.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges[..self.n_ranges]
    }

    /// Largest acknowledged packet number (None for an empty ACK).
    pub fn largest(&self) -> Option<u64> {
        self.ranges().first().map(|r| r.1)
    }

    /// Whether `pn` is acknowledged by this ACK.
    pub fn contains(&self, pn: u64) -> bool {
        self.ranges().iter().any(|&(lo, hi)| lo <= pn && pn <= hi)
    }
}

/// A decoded datagram; DATA borrows its payload from the input.
// An ACK with its ranges is ~560 bytes; decoding returns it on the stack instead of
// allocating per datagram.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    /// HELLO.
    Hello(Hello),
    /// HELLO_ACK.
    HelloAck(Hello),
    /// DATA: header and payload (FIN: the 16-byte hash).
    Data(DataHeader, &'a [u8]),
    /// ACK.
    Ack(Ack),
}

fn put_u48(buf: &mut [u8], v: u64) {
    buf[..6].copy_from_slice(&v.to_be_bytes()[2..]);
}

fn get_u48(buf: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[2..].copy_from_slice(&buf[..6]);
    u64::from_be_bytes(b)
}

fn get_u32(buf: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[..4]);
    u32::from_be_bytes(b)
}

fn get_u64(buf: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[..8]);
    u64::from_be_bytes(b)
}

fn put_header(buf: &mut [u8], ty: u8, flags: u8, flow_id: u32) {
    buf[0] = MAGIC;
    buf[1] = VERSION;
    buf[2] = ty;
    buf[3] = flags;
    buf[4..8].copy_from_slice(&flow_id.to_be_bytes());
}

/// Writes a HELLO (`ack = false`) or HELLO_ACK into `buf` (≥ [`HELLO_LEN`] bytes); returns its
/// length.
pub fn encode_hello(buf: &mut [u8], h: &Hello, ack: bool) -> usize {
    put_header(
        buf,
        if ack { ty::HELLO_ACK } else { ty::HELLO },
        0,
        h.flow_id,
    );
    buf[8..12].copy_from_slice(&h.mss.to_be_bytes());
    buf[12..16].copy_from_slice(&h.ts.to_be_bytes());
    HELLO_LEN
}

/// Writes a DATA header into `buf[..DATA_HEADER_LEN]`. `pn` and `offset` must fit 48 bits (they
/// are truncated otherwise; the sender checks this before a flow starts).
pub fn encode_data_header(buf: &mut [u8], h: &DataHeader) {
    put_header(buf, ty::DATA, h.flags, h.flow_id);
    put_u48(&mut buf[8..14], h.pn & MAX_WIRE_U48);
    put_u48(&mut buf[14..20], h.offset & MAX_WIRE_U48);
    buf[20..24].copy_from_slice(&h.ts.to_be_bytes());
}

/// QUIC variable-length integer size for `v` (< 2⁶²).
fn varint_len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

fn put_varint(buf: &mut [u8], v: u64) -> usize {
    let v = v.min((1 << 62) - 1);
    match varint_len(v) {
        1 => {
            buf[0] = v as u8;
            1
        }
        2 => {
            buf[..2].copy_from_slice(&((v as u16) | 0x4000).to_be_bytes());
            2
        }
        4 => {
            buf[..4].copy_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes());
            4
        }
        _ => {
            buf[..8].copy_from_slice(&(v | 0xC000_0000_0000_0000).to_be_bytes());
            8
        }
    }
}

fn get_varint(buf: &[u8], pos: &mut usize) -> Result<u64, PacketError> {
    let first = *buf.get(*pos).ok_or(PacketError::Truncated)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(*pos..*pos + len).ok_or(PacketError::Truncated)?;
    let mut v = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        v = (v << 8) | u64::from(b);
    }
    *pos += len;
    Ok(v)
}

/// Writes an ACK into `buf` (≥ [`MAX_ACK_LEN`] bytes); returns its length. An ACK needs at
/// least one range.
pub fn encode_ack(buf: &mut [u8], a: &Ack) -> usize {
    put_header(buf, ty::ACK, a.flags, a.flow_id);
    let ranges = a.ranges();
    let largest = ranges.first().map_or(0, |r| r.1);
    buf[8..16].copy_from_slice(&largest.to_be_bytes());
    buf[16..20].copy_from_slice(&a.ack_delay_us.to_be_bytes());
    buf[20..24].copy_from_slice(&a.echo_ts.to_be_bytes());
    buf[24..28].copy_from_slice(&a.recv_ts.to_be_bytes());
    buf[28..36].copy_from_slice(&a.cum_offset.to_be_bytes());
    buf[36..44].copy_from_slice(&a.ecn_ce.to_be_bytes());
    buf[ACK_FIXED_LEN - 1] = ranges.len().saturating_sub(1) as u8;
    let mut pos = ACK_FIXED_LEN;
    let first = ranges.first().copied().unwrap_or((0, 0));
    pos += put_varint(&mut buf[pos..], first.1 - first.0);
    let mut prev_lo = first.0;
    for &(lo, hi) in ranges.iter().skip(1) {
        pos += put_varint(&mut buf[pos..], prev_lo - hi - 2);
        pos += put_varint(&mut buf[pos..], hi - lo);
        prev_lo = lo;
    }
    pos
}

/// Decodes one datagram. Never panics; every malformed input is an error.
pub fn decode(buf: &[u8]) -> Result<Packet<'_>, PacketError> {
    if buf.len() < HEADER_LEN {
        return Err(PacketError::Truncated);
    }
    if buf[0] != MAGIC {
        return Err(PacketError::BadMagic);
    }
    if buf[1] != VERSION {
        return Err(PacketError::BadVersion(buf[1]));
    }
    let t = buf[2];
    let fl = buf[3];
    let flow_id = get_u32(&buf[4..8]);
    match t {
        ty::HELLO | ty::HELLO_ACK => {
            if buf.len() != HELLO_LEN {
                return Err(if buf.len() < HELLO_LEN {
                    PacketError::Truncated
                } else {
                    PacketError::BadField
                });
            }
            let h = Hello {
                flow_id,
                mss: get_u32(&buf[8..12]),
                ts: get_u32(&buf[12..16]),
            };
            if !(MIN_MSS..=MAX_MSS).contains(&h.mss) || fl != 0 {
                return Err(PacketError::BadField);
            }
            Ok(if t == ty::HELLO {
                Packet::Hello(h)
            } else {
                Packet::HelloAck(h)
            })
        }
        ty::DATA => {
            if buf.len() < DATA_HEADER_LEN {
                return Err(PacketError::Truncated);
            }
            let h = DataHeader {
                flow_id,
                flags: fl,
                pn: get_u48(&buf[8..14]),
                offset: get_u48(&buf[14..20]),
                ts: get_u32(&buf[20..24]),
            };
            let payload = &buf[DATA_HEADER_LEN..];
            if fl & !flags::FIN != 0 || payload.len() > MAX_MSS as usize {
                return Err(PacketError::BadField);
            }
            if h.is_fin() {
                if payload.len() != HASH_LEN {
                    return Err(PacketError::BadField);
                }
            } else if payload.is_empty() || h.offset + payload.len() as u64 > MAX_WIRE_U48 {
                return Err(PacketError::BadField);
            }
            Ok(Packet::Data(h, payload))
        }
        ty::ACK => decode_ack(buf, fl, flow_id).map(Packet::Ack),
        other => Err(PacketError::BadType(other)),
    }
}

fn decode_ack(buf: &[u8], fl: u8, flow_id: u32) -> Result<Ack, PacketError> {
    if buf.len() < ACK_FIXED_LEN + 1 {
        return Err(PacketError::Truncated);
    }
    if fl & !(flags::FIN_SEEN | flags::COMPLETE | flags::INTACT) != 0 {
        return Err(PacketError::BadField);
    }
    let mut a = Ack::new(flow_id);
    a.flags = fl;
    let largest = get_u64(&buf[8..16]);
    a.ack_delay_us = get_u32(&buf[16..20]);
    a.echo_ts = get_u32(&buf[20..24]);
    a.recv_ts = get_u32(&buf[24..28]);
    a.cum_offset = get_u64(&buf[28..36]);
    a.ecn_ce = get_u64(&buf[36..44]);
    let extra = usize::from(buf[ACK_FIXED_LEN - 1]);
    if extra >= MAX_ACK_RANGES {
        return Err(PacketError::BadAckRanges);
    }
    let mut pos = ACK_FIXED_LEN;
    let first_len = get_varint(buf, &mut pos)?;
    let mut lo = largest
        .checked_sub(first_len)
        .ok_or(PacketError::BadAckRanges)?;
    a.ranges[0] = (lo, largest);
    a.n_ranges = 1;
    for _ in 0..extra {
        let gap = get_varint(buf, &mut pos)?;
        let len = get_varint(buf, &mut pos)?;
        let hi = lo
            .checked_sub(gap)
            .and_then(|v| v.checked_sub(2))
            .ok_or(PacketError::BadAckRanges)?;
        lo = hi.checked_sub(len).ok_or(PacketError::BadAckRanges)?;
        a.ranges[a.n_ranges] = (lo, hi);
        a.n_ranges += 1;
    }
    if pos != buf.len() {
        return Err(PacketError::BadField);
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    #[test]
    fn hello_roundtrip() {
        let mut buf = [0u8; 64];
        let h = Hello {
            flow_id: 0xdead_beef,
            mss: 1448,
            ts: 77,
        };
        let n = encode_hello(&mut buf, &h, false);
        assert_eq!(decode(&buf[..n]), Ok(Packet::Hello(h)));
        let n = encode_hello(&mut buf, &h, true);
        assert_eq!(decode(&buf[..n]), Ok(Packet::HelloAck(h)));
        assert_eq!(decode(&buf[..n - 1]), Err(PacketError::Truncated));
    }

    #[test]
    fn data_roundtrip_and_limits() {
        let mut buf = vec![0u8; DATA_HEADER_LEN + 100];
        let h = DataHeader {
            flow_id: 1,
            flags: 0,
            pn: MAX_WIRE_U48 - 1,
            offset: 123_456_789_012,
            ts: u32::MAX,
        };
        encode_data_header(&mut buf, &h);
        buf[DATA_HEADER_LEN..].fill(7);
        match decode(&buf).unwrap() {
            Packet::Data(d, p) => {
                assert_eq!(d, h);
                assert_eq!(p.len(), 100);
            }
            other => panic!("{other:?}"),
        }
        // Empty non-FIN data is invalid; a FIN needs exactly the hash.
        assert_eq!(decode(&buf[..DATA_HEADER_LEN]), Err(PacketError::BadField));
        let fin = DataHeader {
            flags: flags::FIN,
            ..h
        };
        encode_data_header(&mut buf, &fin);
        assert_eq!(
            decode(&buf[..DATA_HEADER_LEN + 15]),
            Err(PacketError::BadField)
        );
        assert!(matches!(
            decode(&buf[..DATA_HEADER_LEN + HASH_LEN]),
            Ok(Packet::Data(d, _)) if d.is_fin()
        ));
    }

    #[test]
    fn ack_roundtrip() {
        let mut a = Ack::new(42);
        a.flags = flags::FIN_SEEN;
        a.ack_delay_us = 250;
        a.echo_ts = 99;
        a.recv_ts = 0xfedc_ba98;
        a.cum_offset = 1 << 40;
        a.ecn_ce = 3;
        assert!(a.push_range(1_000_000, 5_000_000));
        assert!(a.push_range(900_000, 999_998));
        assert!(!a.push_range(800_000, 899_999), "adjacent range refused");
        assert!(a.push_range(10, 20));
        assert!(a.push_range(0, 0));
        let mut buf = [0u8; MAX_ACK_LEN];
        let n = encode_ack(&mut buf, &a);
        match decode(&buf[..n]).unwrap() {
            Packet::Ack(b) => {
                assert_eq!(b, a);
                assert_eq!((b.echo_ts, b.recv_ts), (99, 0xfedc_ba98));
                assert_eq!(b.largest(), Some(5_000_000));
                assert!(b.contains(15) && !b.contains(21) && b.contains(0));
            }
            other => panic!("{other:?}"),
        }
        // A full ACK fits MAX_ACK_LEN.
        let mut a = Ack::new(1);
        let mut hi = u64::MAX >> 3;
        for _ in 0..MAX_ACK_RANGES {
            assert!(a.push_range(hi - (1 << 40), hi));
            hi -= (1 << 40) + (1 << 41);
        }
        let n = encode_ack(&mut buf, &a);
        assert!(n <= MAX_ACK_LEN);
        assert!(matches!(decode(&buf[..n]), Ok(Packet::Ack(b)) if b == a));
    }

    #[test]
    fn ack_rejects_underflow() {
        let mut a = Ack::new(1);
        a.push_range(3, 5);
        let mut buf = [0u8; MAX_ACK_LEN];
        let n = encode_ack(&mut buf, &a);
        // Claim the first range is longer than the largest packet number.
        let mut bad = buf[..n].to_vec();
        bad[ACK_FIXED_LEN] = 9;
        assert_eq!(decode(&bad), Err(PacketError::BadAckRanges));
        // Claim an extra range that is not there.
        let mut bad = buf[..n].to_vec();
        bad[ACK_FIXED_LEN - 1] = 1;
        assert_eq!(decode(&bad), Err(PacketError::Truncated));
        bad.extend_from_slice(&[5, 0]);
        assert_eq!(decode(&bad), Err(PacketError::BadAckRanges));
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut buf = [0u8; 2048];
        for i in 0..200_000 {
            let len = rng.gen_range(0..buf.len());
            rng.fill(&mut buf[..len]);
            if i % 2 == 0 && len > 3 {
                // Valid-looking headers reach the type-specific parsers.
                buf[0] = MAGIC;
                buf[1] = VERSION;
                buf[2] = rng.gen_range(0..6);
            }
            let _ = decode(&buf[..len]);
        }
    }
}
