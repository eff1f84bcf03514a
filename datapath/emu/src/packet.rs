//! Packets as they cross the emulator: an IP datagram read from a TUN device, a pool of
//! reusable buffers, and the few header operations the emulator needs (ECN codepoint, CE
//! marking with the IPv4 checksum fixed incrementally, destination address).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Largest datagram the emulator accepts from a TUN device (the devices' MTU is 1500).
pub const MAX_PACKET: usize = 2048;

/// One IP datagram (no TUN header).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// The datagram's bytes.
    pub data: Vec<u8>,
}

impl Packet {
    /// A packet holding `data`.
    pub fn new(data: Vec<u8>) -> Packet {
        Packet { data }
    }

    /// A dummy packet of `len` zero bytes (tests, benchmarks).
    pub fn zeroed(len: usize) -> Packet {
        Packet { data: vec![0; len] }
    }

    /// IP length in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the packet is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The size mahimahi accounts for: IP length plus the 4-byte TUN header.
    pub fn wire_size(&self) -> u32 {
        self.data.len() as u32 + crate::trace::FRAMING_BYTES
    }

    /// IP version (4 or 6), or 0 when unknown.
    pub fn version(&self) -> u8 {
        self.data.first().map_or(0, |b| b >> 4)
    }

    /// The ECN codepoint (0 = not ECT, 1 = ECT(1), 2 = ECT(0), 3 = CE), if the packet is IP.
    pub fn ecn(&self) -> Option<u8> {
        match self.version() {
            4 if self.data.len() >= 20 => Some(self.data[1] & 3),
            6 if self.data.len() >= 40 => Some((self.data[1] >> 4) & 3),
            _ => None,
        }
    }

    /// Mark Congestion Experienced if the packet is ECN-capable; returns whether it is now CE.
    /// The IPv4 header checksum is updated incrementally (RFC 1624).
    pub fn mark_ce(&mut self) -> bool {
        match self.ecn() {
            Some(0) | None => false,
            Some(3) => true,
            Some(_) => {
                if self.version() == 4 {
                    let old = u16::from_be_bytes([self.data[0], self.data[1]]);
                    self.data[1] |= 3;
                    let new = u16::from_be_bytes([self.data[0], self.data[1]]);
                    let ck = u16::from_be_bytes([self.data[10], self.data[11]]);
                    // HC' = ~(~HC + ~m + m')
                    let mut sum = (!ck as u32) + (!old as u32) + new as u32;
                    while sum > 0xffff {
                        sum = (sum & 0xffff) + (sum >> 16);
                    }
                    let ck = !(sum as u16);
                    self.data[10..12].copy_from_slice(&ck.to_be_bytes());
                } else {
                    self.data[1] |= 0x30;
                }
                true
            }
        }
    }

    /// Destination address, if the packet is IP.
    pub fn dst(&self) -> Option<IpAddr> {
        match self.version() {
            4 if self.data.len() >= 20 => {
                let b: [u8; 4] = self.data[16..20].try_into().ok()?;
                Some(IpAddr::V4(Ipv4Addr::from(b)))
            }
            6 if self.data.len() >= 40 => {
                let b: [u8; 16] = self.data[24..40].try_into().ok()?;
                Some(IpAddr::V6(Ipv6Addr::from(b)))
            }
            _ => None,
        }
    }
}

/// Recycles packet buffers so the forwarding loop does not allocate per packet.
#[derive(Debug, Default)]
pub struct Pool {
    free: Vec<Vec<u8>>,
}

impl Pool {
    /// A buffer of `MAX_PACKET` bytes to read into.
    pub fn get(&mut self) -> Vec<u8> {
        let mut b = self
            .free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(MAX_PACKET));
        b.resize(MAX_PACKET, 0);
        b
    }

    /// Give a buffer back.
    pub fn put(&mut self, mut b: Vec<u8>) {
        if self.free.len() < 4096 {
            b.clear();
            self.free.push(b);
        }
    }
}

/// The standard one's-complement checksum of `data` (for tests and packet builders).
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        sum += w as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(tos: u8) -> Packet {
        let mut h = vec![
            0x45, tos, 0, 28, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 100, 64, 0, 2, 100, 64, 0, 1,
        ];
        let ck = checksum(&h);
        h[10..12].copy_from_slice(&ck.to_be_bytes());
        h.extend_from_slice(&[0; 8]);
        Packet::new(h)
    }

    #[test]
    fn ce_marking_keeps_the_checksum_valid() {
        for tos in [0x01u8, 0x02, 0xb9, 0xfe] {
            let mut p = ipv4(tos);
            assert!(p.mark_ce());
            assert_eq!(p.ecn(), Some(3));
            assert_eq!(checksum(&p.data[..20]), 0, "tos {tos:#x}");
        }
        let mut p = ipv4(0);
        assert!(!p.mark_ce());
        assert_eq!(p.ecn(), Some(0));
    }

    #[test]
    fn destination_and_wire_size() {
        let p = ipv4(0);
        assert_eq!(p.dst(), Some("100.64.0.1".parse().unwrap()));
        assert_eq!(p.wire_size(), 32);
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[1] = 0x10; // ECT(1)
        let mut p = Packet::new(v6);
        assert_eq!(p.ecn(), Some(1));
        assert!(p.mark_ce());
        assert_eq!(p.ecn(), Some(3));
    }
}
