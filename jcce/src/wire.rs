//! The JCCE datagram format, its authentication (HMAC-SHA256 with the JointCloud key) and replay
//! protection.
//!
//! Every datagram, in both directions, is
//!
//! ```text
//! offset size field
//!      0    4 magic    "JCCE"
//!      4    1 version  1
//!      5    1 kind     1 update, 2 update reply, 3 metrics request, 4 metrics reply
//!      6    2 count    entries in the body (u16 LE); 0 for the metrics kinds
//!      8    8 sender   the client's random id (u64 LE); replies echo the request's
//!     16    8 seq      per-sender sequence number, strictly increasing (u64 LE); replies echo it
//!     24    8 time     sender's wall clock, µs since the Unix epoch (u64 LE)
//!     32    …  body     count × 40-byte entries (update kinds) or UTF-8 JSON (metrics reply)
//!   end−32   32 tag      HMAC-SHA256(key, every byte before the tag)
//! ```
//!
//! Update entry (40 bytes): `op u8` (1 publish, 2 leave), 7 zero bytes, `group u64`, `member u64`,
//! `mi u64`, `value u64` (delivered throughput, bytes/s; 0 for a leave).
//!
//! Reply entry (40 bytes): `group u64`, `member u64`, `mi u64` (the three echoed from the
//! request entry it answers), `n u32`, `status u8` (1 released, 2 withheld: `n < k`),
//! `applied u8` ([`Applied`]), 2 zero bytes, `mean f64` (bytes/s; 0 when withheld).
//! A reply entry carries nothing about any other member than `n` and the mean.
//!
//! Replay protection: the service accepts a (sender, seq) pair at most once, keeps a 64-wide
//! window below the highest seq seen per sender (a datagram up to 63 below the highest passes), and
//! refuses any datagram whose time is more than the allowed clock skew away from its own clock,
//! which bounds how long it must remember a sender. A client accepts a reply only if it echoes its
//! own sender id and a seq it sent and has not had answered yet.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::core::Applied;

pub const MAGIC: [u8; 4] = *b"JCCE";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 32;
pub const TAG_LEN: usize = 32;
pub const ENTRY_LEN: usize = 40;
/// Most entries in one datagram (1024 × 40 B + 64 B = 41,024 B, under the 65,507-byte UDP limit).
pub const MAX_ENTRIES: usize = 1024;
/// Largest datagram either side sends or accepts (bytes).
pub const MAX_DATAGRAM: usize = 65_507;
/// Entries per datagram that keep it within a 1500-byte Ethernet MTU (32 × 40 + 64 = 1,344 B).
pub const MTU_ENTRIES: usize = 32;

/// Message kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Update = 1,
    UpdateReply = 2,
    MetricsRequest = 3,
    MetricsReply = 4,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Update,
            2 => Kind::UpdateReply,
            3 => Kind::MetricsRequest,
            4 => Kind::MetricsReply,
            _ => return None,
        })
    }
}

/// Why a datagram was dropped. Every drop is counted by reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DropReason {
    #[error("shorter than header and tag")]
    Truncated,
    #[error("not a JCCE datagram (magic or version)")]
    NotJcce,
    #[error("authentication tag does not verify")]
    BadMac,
    #[error("authenticated but malformed")]
    Malformed,
    #[error("kind not accepted here")]
    UnexpectedKind,
    #[error("sequence number already seen or too old")]
    Replayed,
    #[error("timestamp outside the allowed clock skew")]
    ClockSkew,
    #[error("too many senders tracked")]
    TooManySenders,
}

/// The JointCloud's shared key.
#[derive(Clone)]
pub struct Key {
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// Key file problems.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key must be 16 to 64 bytes, got {0}")]
    Length(usize),
    #[error("key file must hold the key as hexadecimal digits: {0}")]
    Hex(String),
    #[error("reading the key file: {0}")]
    Io(#[from] std::io::Error),
}

impl Key {
    /// Minimum key length (bytes): 128 bits.
    pub const MIN_LEN: usize = 16;
    /// Maximum key length (bytes): one SHA-256 block.
    pub const MAX_LEN: usize = 64;

    /// A key from raw bytes (16..=64).
    pub fn from_bytes(bytes: &[u8]) -> Result<Key, KeyError> {
        if !(Self::MIN_LEN..=Self::MAX_LEN).contains(&bytes.len()) {
            return Err(KeyError::Length(bytes.len()));
        }
        Ok(Key {
            mac: Hmac::<Sha256>::new_from_slice(bytes).expect("HMAC takes any key length"),
        })
    }

    /// A key from hexadecimal text (whitespace ignored), as `jcce keygen` writes it.
    pub fn from_hex(text: &str) -> Result<Key, KeyError> {
        let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if !digits.len().is_multiple_of(2) {
            return Err(KeyError::Hex("odd number of digits".into()));
        }
        let mut bytes = Vec::with_capacity(digits.len() / 2);
        for pair in digits.chunks(2) {
            let s = std::str::from_utf8(pair).map_err(|e| KeyError::Hex(e.to_string()))?;
            bytes.push(u8::from_str_radix(s, 16).map_err(|e| KeyError::Hex(e.to_string()))?);
        }
        Key::from_bytes(&bytes)
    }

    /// Read a key file (hexadecimal).
    pub fn from_file(path: &std::path::Path) -> Result<Key, KeyError> {
        Key::from_hex(&std::fs::read_to_string(path)?)
    }

    /// HMAC-SHA256 of `data`.
    pub fn tag(&self, data: &[u8]) -> [u8; TAG_LEN] {
        let mut mac = self.mac.clone();
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// Constant-time check of `tag` over `data`.
    pub fn verify(&self, data: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.mac.clone();
        mac.update(data);
        mac.verify_slice(tag).is_ok()
    }
}

/// The fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub count: u16,
    pub sender: u64,
    pub seq: u64,
    pub time_us: u64,
}

/// Entry operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    Publish = 1,
    Leave = 2,
}

/// One update entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateEntry {
    pub op: Op,
    pub group: u64,
    pub member: u64,
    pub mi: u64,
    /// Delivered throughput (bytes/s); 0 for a leave.
    pub value: u64,
}

/// Whether the mean was released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Released = 1,
    /// `n < k`: the mean is withheld, only `n` is sent.
    Withheld = 2,
}

/// One reply entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplyEntry {
    pub group: u64,
    pub member: u64,
    pub mi: u64,
    pub n: u32,
    pub applied: Applied,
    /// The group's mean (bytes/s), `None` when withheld.
    pub mean: Option<f64>,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Builds one authenticated datagram in a reusable buffer.
pub struct Writer<'a> {
    buf: &'a mut Vec<u8>,
    count: u16,
}

impl<'a> Writer<'a> {
    /// Start a datagram of `kind` in `buf` (cleared).
    pub fn new(buf: &'a mut Vec<u8>, kind: Kind, sender: u64, seq: u64, time_us: u64) -> Self {
        buf.clear();
        buf.extend_from_slice(&MAGIC);
        buf.push(VERSION);
        buf.push(kind as u8);
        buf.extend_from_slice(&0u16.to_le_bytes());
        buf.extend_from_slice(&sender.to_le_bytes());
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(&time_us.to_le_bytes());
        Writer { buf, count: 0 }
    }

    /// Entries written so far.
    pub fn count(&self) -> usize {
        self.count as usize
    }

    /// Append an update entry.
    pub fn update(&mut self, e: &UpdateEntry) {
        assert!((self.count as usize) < MAX_ENTRIES, "too many entries");
        self.buf.push(e.op as u8);
        self.buf.extend_from_slice(&[0; 7]);
        for v in [e.group, e.member, e.mi, e.value] {
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.count += 1;
    }

    /// Append a reply entry.
    pub fn reply(&mut self, e: &ReplyEntry) {
        assert!((self.count as usize) < MAX_ENTRIES, "too many entries");
        for v in [e.group, e.member, e.mi] {
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.buf.extend_from_slice(&e.n.to_le_bytes());
        let (status, mean) = match e.mean {
            Some(m) => (Status::Released, m),
            None => (Status::Withheld, 0.0),
        };
        self.buf.push(status as u8);
        self.buf.push(e.applied as u8);
        self.buf.extend_from_slice(&[0; 2]);
        self.buf.extend_from_slice(&mean.to_le_bytes());
        self.count += 1;
    }

    /// Append an opaque body (metrics reply).
    pub fn body(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Write the count, append the tag; the datagram is the whole buffer.
    pub fn finish(self, key: &Key) -> &'a [u8] {
        self.buf[6..8].copy_from_slice(&self.count.to_le_bytes());
        let tag = key.tag(self.buf);
        self.buf.extend_from_slice(&tag);
        self.buf
    }
}

/// An authenticated, well-formed datagram.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    pub header: Header,
    body: &'a [u8],
}

/// Check a datagram: framing, then the tag, then the body's structure. Nothing is trusted before
/// the tag verifies; a datagram that passes is well formed to the last byte.
pub fn open<'a>(key: &Key, datagram: &'a [u8]) -> Result<Message<'a>, DropReason> {
    if datagram.len() < HEADER_LEN + TAG_LEN || datagram.len() > MAX_DATAGRAM {
        return Err(DropReason::Truncated);
    }
    if datagram[0..4] != MAGIC || datagram[4] != VERSION {
        return Err(DropReason::NotJcce);
    }
    let (signed, tag) = datagram.split_at(datagram.len() - TAG_LEN);
    if !key.verify(signed, tag) {
        return Err(DropReason::BadMac);
    }
    let kind = Kind::from_u8(signed[5]).ok_or(DropReason::Malformed)?;
    let count = u16::from_le_bytes([signed[6], signed[7]]);
    let header = Header {
        kind,
        count,
        sender: u64_at(signed, 8),
        seq: u64_at(signed, 16),
        time_us: u64_at(signed, 24),
    };
    let body = &signed[HEADER_LEN..];
    match kind {
        Kind::Update | Kind::UpdateReply => {
            if count == 0
                || count as usize > MAX_ENTRIES
                || body.len() != count as usize * ENTRY_LEN
            {
                return Err(DropReason::Malformed);
            }
            for e in body.chunks_exact(ENTRY_LEN) {
                let ok = if kind == Kind::Update {
                    matches!(e[0], 1 | 2) && e[1..8] == [0; 7] && (e[0] == 1 || u64_at(e, 32) == 0)
                } else {
                    let mean = f64::from_le_bytes(e[32..40].try_into().expect("8 bytes"));
                    let released = e[28] == Status::Released as u8;
                    matches!(e[28], 1 | 2)
                        && Applied::from_u8(e[29]).is_some()
                        && e[30..32] == [0; 2]
                        && mean.is_finite()
                        && mean >= 0.0
                        && (released || mean == 0.0)
                };
                if !ok {
                    return Err(DropReason::Malformed);
                }
            }
        }
        Kind::MetricsRequest => {
            if count != 0 || !body.is_empty() {
                return Err(DropReason::Malformed);
            }
        }
        Kind::MetricsReply => {
            if count != 0 || std::str::from_utf8(body).is_err() {
                return Err(DropReason::Malformed);
            }
        }
    }
    Ok(Message { header, body })
}

impl<'a> Message<'a> {
    /// The update entries (kind [`Kind::Update`]; empty otherwise).
    pub fn updates(&self) -> impl Iterator<Item = UpdateEntry> + 'a {
        let body = if self.header.kind == Kind::Update {
            self.body
        } else {
            &[]
        };
        body.chunks_exact(ENTRY_LEN).map(|e| UpdateEntry {
            op: if e[0] == 1 { Op::Publish } else { Op::Leave },
            group: u64_at(e, 8),
            member: u64_at(e, 16),
            mi: u64_at(e, 24),
            value: u64_at(e, 32),
        })
    }

    /// The reply entries (kind [`Kind::UpdateReply`]; empty otherwise).
    pub fn replies(&self) -> impl Iterator<Item = ReplyEntry> + 'a {
        let body = if self.header.kind == Kind::UpdateReply {
            self.body
        } else {
            &[]
        };
        body.chunks_exact(ENTRY_LEN).map(|e| {
            let mean = f64::from_le_bytes(e[32..40].try_into().expect("8 bytes"));
            ReplyEntry {
                group: u64_at(e, 0),
                member: u64_at(e, 8),
                mi: u64_at(e, 16),
                n: u32::from_le_bytes(e[24..28].try_into().expect("4 bytes")),
                applied: Applied::from_u8(e[29]).expect("checked by open"),
                mean: (e[28] == Status::Released as u8).then_some(mean),
            }
        })
    }

    /// The body as text (metrics reply).
    pub fn text(&self) -> &'a str {
        std::str::from_utf8(self.body).unwrap_or("")
    }
}

/// A 64-wide sliding window of accepted sequence numbers (as in IPsec's anti-replay window).
#[derive(Clone, Copy, Debug, Default)]
pub struct SeqWindow {
    /// Highest seq accepted; 0 = none yet (seq 0 is never accepted).
    max: u64,
    /// Bit i set: seq `max − i` accepted.
    seen: u64,
}

impl SeqWindow {
    /// Accept `seq` once; refuse repeats and anything 64 or more below the highest seen.
    pub fn accept(&mut self, seq: u64) -> bool {
        if seq == 0 {
            return false;
        }
        if seq > self.max {
            let shift = seq - self.max;
            self.seen = if shift >= 64 { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.max = seq;
            return true;
        }
        let back = self.max - seq;
        if back >= 64 || self.seen & (1 << back) != 0 {
            return false;
        }
        self.seen |= 1 << back;
        true
    }
}

struct SenderState {
    window: SeqWindow,
    last_accept_us: u64,
}

/// The service's replay guard: one [`SeqWindow`] per sender and a clock-skew bound.
pub struct ReplayGuard {
    skew_us: u64,
    max_senders: usize,
    senders: std::collections::HashMap<u64, SenderState>,
    last_prune_us: u64,
}

impl ReplayGuard {
    /// `skew_us`: largest accepted |sender time − own time| (µs); `max_senders`: senders tracked.
    pub fn new(skew_us: u64, max_senders: usize) -> Self {
        ReplayGuard {
            skew_us,
            max_senders,
            senders: Default::default(),
            last_prune_us: 0,
        }
    }

    /// Senders currently remembered.
    pub fn senders(&self) -> usize {
        self.senders.len()
    }

    /// Check an authenticated header against the replay state at wall time `now_us`.
    pub fn check(&mut self, h: &Header, now_us: u64) -> Result<(), DropReason> {
        if h.time_us.abs_diff(now_us) > self.skew_us {
            return Err(DropReason::ClockSkew);
        }
        // A sender unheard of for more than twice the skew can be forgotten: every datagram it
        // sent before carries a time at least `skew` in the past and would fail the check above.
        if now_us.saturating_sub(self.last_prune_us) > self.skew_us {
            let horizon = now_us.saturating_sub(2 * self.skew_us + 1);
            self.senders.retain(|_, s| s.last_accept_us >= horizon);
            self.last_prune_us = now_us;
        }
        let full = self.senders.len() >= self.max_senders;
        let state = match self.senders.entry(h.sender) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(_) if full => {
                return Err(DropReason::TooManySenders);
            }
            std::collections::hash_map::Entry::Vacant(v) => v.insert(SenderState {
                window: SeqWindow::default(),
                last_accept_us: now_us,
            }),
        };
        if !state.window.accept(h.seq) {
            return Err(DropReason::Replayed);
        }
        state.last_accept_us = state.last_accept_us.max(now_us);
        Ok(())
    }
}

/// Wall clock, µs since the Unix epoch (for the replay timestamps only).
pub fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::from_bytes(&[7; 32]).unwrap()
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// RFC 4231 test cases 1, 2 and 7 (HMAC-SHA-256), to be sure the primitive is the standard one.
    #[test]
    fn hmac_sha256_matches_rfc4231() {
        // case 1: 20-byte key of 0x0b, "Hi There"; our keys are 16..=64 bytes.
        let k = Key::from_bytes(&[0x0b; 20]).unwrap();
        assert_eq!(
            hex(&k.tag(b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // case 3: 20-byte key of 0xaa, 50 bytes of 0xdd
        let k = Key::from_bytes(&[0xaa; 20]).unwrap();
        assert_eq!(
            hex(&k.tag(&[0xdd; 50])),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        );
        // case 2's key "Jefe" is 4 bytes: refused as too short for a JointCloud key
        assert!(matches!(Key::from_bytes(b"Jefe"), Err(KeyError::Length(4))));
    }

    #[test]
    fn round_trip_update_and_reply() {
        let k = key();
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, Kind::Update, 42, 9, 1000);
        let e1 = UpdateEntry {
            op: Op::Publish,
            group: 1,
            member: 2,
            mi: 3,
            value: 4,
        };
        let e2 = UpdateEntry {
            op: Op::Leave,
            group: 5,
            member: 6,
            mi: 7,
            value: 0,
        };
        w.update(&e1);
        w.update(&e2);
        let d = w.finish(&k).to_vec();
        assert_eq!(d.len(), HEADER_LEN + 2 * ENTRY_LEN + TAG_LEN);
        let m = open(&k, &d).unwrap();
        assert_eq!(
            m.header,
            Header {
                kind: Kind::Update,
                count: 2,
                sender: 42,
                seq: 9,
                time_us: 1000
            }
        );
        assert_eq!(m.updates().collect::<Vec<_>>(), vec![e1, e2]);
        assert_eq!(m.replies().count(), 0);

        let r1 = ReplyEntry {
            group: 1,
            member: 2,
            mi: 3,
            n: 4,
            applied: Applied::Accepted,
            mean: Some(5.5),
        };
        let r2 = ReplyEntry {
            group: 1,
            member: 2,
            mi: 3,
            n: 1,
            applied: Applied::Stale,
            mean: None,
        };
        let mut w = Writer::new(&mut buf, Kind::UpdateReply, 42, 9, 1000);
        w.reply(&r1);
        w.reply(&r2);
        let d = w.finish(&k).to_vec();
        let m = open(&k, &d).unwrap();
        assert_eq!(m.replies().collect::<Vec<_>>(), vec![r1, r2]);
    }

    #[test]
    fn tampering_wrong_key_and_garbage_are_dropped() {
        let k = key();
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, Kind::Update, 1, 1, 1);
        w.update(&UpdateEntry {
            op: Op::Publish,
            group: 1,
            member: 1,
            mi: 1,
            value: 1,
        });
        let d = w.finish(&k).to_vec();
        for i in 0..d.len() {
            let mut t = d.clone();
            t[i] ^= 0x01;
            let r = open(&k, &t);
            assert!(
                matches!(r, Err(DropReason::BadMac | DropReason::NotJcce)),
                "byte {i}: {r:?}"
            );
        }
        let other = Key::from_bytes(&[8; 32]).unwrap();
        assert_eq!(open(&other, &d).err(), Some(DropReason::BadMac));
        assert_eq!(open(&k, &d[..40]).err(), Some(DropReason::Truncated));
        assert_eq!(open(&k, &[0; 100]).err(), Some(DropReason::NotJcce));
    }

    #[test]
    fn authenticated_but_malformed_is_dropped() {
        let k = key();
        // reserved bytes nonzero, signed with the right key
        let mut raw = Vec::new();
        let mut w = Writer::new(&mut raw, Kind::Update, 1, 1, 1);
        w.update(&UpdateEntry {
            op: Op::Publish,
            group: 1,
            member: 1,
            mi: 1,
            value: 1,
        });
        w.finish(&k);
        let mut body = raw[..raw.len() - TAG_LEN].to_vec();
        body[HEADER_LEN + 3] = 1;
        let tag = k.tag(&body);
        body.extend_from_slice(&tag);
        assert_eq!(open(&k, &body).err(), Some(DropReason::Malformed));
        // count disagreeing with the body length
        let mut body = raw[..raw.len() - TAG_LEN].to_vec();
        body[6] = 2;
        let tag = k.tag(&body);
        body.extend_from_slice(&tag);
        assert_eq!(open(&k, &body).err(), Some(DropReason::Malformed));
        // unknown kind
        let mut body = raw[..raw.len() - TAG_LEN].to_vec();
        body[5] = 9;
        let tag = k.tag(&body);
        body.extend_from_slice(&tag);
        assert_eq!(open(&k, &body).err(), Some(DropReason::Malformed));
    }

    #[test]
    fn seq_window_accepts_each_once_and_tolerates_reordering() {
        let mut w = SeqWindow::default();
        assert!(!w.accept(0));
        assert!(w.accept(5));
        assert!(!w.accept(5));
        assert!(w.accept(3));
        assert!(!w.accept(3));
        assert!(w.accept(70));
        assert!(w.accept(7)); // 63 below the max: still inside the window
        assert!(!w.accept(6)); // 64 below: too old
        assert!(w.accept(1000));
        assert!(!w.accept(70));
    }

    #[test]
    fn replay_guard_checks_skew_and_forgets_safely() {
        let mut g = ReplayGuard::new(1_000_000, 2);
        let h = |sender, seq, time_us| Header {
            kind: Kind::Update,
            count: 1,
            sender,
            seq,
            time_us,
        };
        let now = 10_000_000;
        assert_eq!(g.check(&h(1, 1, now), now), Ok(()));
        assert_eq!(g.check(&h(1, 1, now), now), Err(DropReason::Replayed));
        assert_eq!(
            g.check(&h(1, 2, now - 1_000_001), now),
            Err(DropReason::ClockSkew)
        );
        assert_eq!(
            g.check(&h(1, 2, now + 1_000_001), now),
            Err(DropReason::ClockSkew)
        );
        assert_eq!(g.check(&h(2, 1, now), now), Ok(()));
        assert_eq!(g.check(&h(3, 1, now), now), Err(DropReason::TooManySenders));
        // much later, the old senders are forgotten; their old datagrams fail on time
        let later = now + 3_000_000;
        assert_eq!(g.check(&h(3, 1, later), later), Ok(()));
        assert_eq!(g.senders(), 1);
        assert_eq!(g.check(&h(1, 1, now), later), Err(DropReason::ClockSkew));
    }

    #[test]
    fn key_hex_parsing() {
        let k = Key::from_hex("00112233445566778899aabbccddeeff\n").unwrap();
        assert!(k.verify(b"x", &k.tag(b"x")));
        assert!(Key::from_hex("0011").is_err());
        assert!(Key::from_hex("zz112233445566778899aabbccddeeff").is_err());
        assert!(Key::from_hex("0").is_err());
    }
}
