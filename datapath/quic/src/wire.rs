//! What one flow's QUIC stream carries, and the receiver's answer.
//!
//! A flow is one bidirectional stream. The sender writes a [`HEADER_LEN`]-byte header (magic
//! `CCPQ`, version, three zero bytes, flow id), then the stream content — the deterministic
//! pattern of `ccp_udp::pattern` for the flow id, so both datapaths send the same bytes. The
//! receiver compares every content byte with the pattern at its offset and hashes it
//! ([`ContentCheck`]) as it reads. How the stream ends depends on the flow:
//!
//! * **Sized flow** (`bytes=`): a [`TRAILER_LEN`]-byte trailer — the content's length and
//!   xxh3-128 hash — and the FIN. The receiver holds back the last [`TRAILER_LEN`] bytes until
//!   the stream ends ([`TrailerSplitter`]) and compares length and hash with the trailer: the
//!   whole transfer is checked end to end.
//! * **Timed flow** (`time=`): at its duration the sender resets its send direction
//!   (RESET_STREAM with [`RESET_DEADLINE`]), abandoning whatever the stream still buffers. A
//!   stream buffers up to [`crate::sender::SEND_BUFFER`] (2 MiB, so large windows are
//!   possible); ending with a trailer behind that queue would keep the flow sending for as long
//!   as the queue takes to drain (0.8 s at 20 Mbit/s, 17 s at 1 Mbit/s) after its duration,
//!   loading the bottleneck for other flows. With the reset, nothing new is put on the wire
//!   after the duration: what is already in flight arrives or is lost (QUIC does not
//!   retransmit stream data after a reset), and the receiver's stack discards what it holds
//!   but has not handed to the application. The receiver counts as delivered exactly the
//!   contiguous prefix it read, every byte of it verified against the pattern; the trailer is
//!   not needed, since the pattern says what every byte must be. A stopped flow (the stop
//!   flag, e.g. Ctrl-C, sized or timed) ends the same way with [`RESET_STOP`].
//!
//! Either way the receiver answers on the stream's other direction with a
//! [`VERDICT_LEN`]-byte verdict: intact flag (sized: length and hash equal the trailer's and
//! every byte is the pattern's; reset: every byte read is the pattern's), content bytes
//! received, their hash. The sender takes the verdict's length as the bytes delivered, so both
//! summaries agree, and checks the hash against its own (sized) or the pattern's hash of that
//! prefix (reset). All integers are big-endian.
//!
//! Why the pattern check and a reset rather than keeping the queue short: a sender that wrote
//! only about a window ahead of what was acknowledged could still end with a trailer, but it
//! would often leave the congestion controller with nothing to send (application-limited),
//! which changes what rate-based algorithms measure; with the reset the stream stays full to
//! the last moment and the flow is network-limited throughout.

/// Stream magic.
pub const MAGIC: &[u8; 4] = b"CCPQ";
/// Wire version (2: the content is verified against the pattern, timed flows end with a
/// reset; version 1 ended every flow with a trailer and checked only its hash).
pub const VERSION: u8 = 2;
/// Header bytes.
pub const HEADER_LEN: usize = 12;
/// Trailer bytes: length (8) and hash (16).
pub const TRAILER_LEN: usize = 24;
/// Verdict bytes: intact (1), length (8), hash (16).
pub const VERDICT_LEN: usize = 25;

/// The stream header of flow `flow_id`.
pub fn header(flow_id: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..4].copy_from_slice(MAGIC);
    h[4] = VERSION;
    h[8..].copy_from_slice(&flow_id.to_be_bytes());
    h
}

/// The flow id of a header, or `None` if it is not one.
pub fn parse_header(h: &[u8]) -> Option<u32> {
    if h.len() != HEADER_LEN || &h[..4] != MAGIC || h[4] != VERSION {
        return None;
    }
    Some(u32::from_be_bytes(h[8..12].try_into().ok()?))
}

/// The trailer of a stream of `len` content bytes with hash `hash`.
pub fn trailer(len: u64, hash: u128) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[..8].copy_from_slice(&len.to_be_bytes());
    t[8..].copy_from_slice(&hash.to_be_bytes());
    t
}

/// Length and hash of a trailer.
pub fn parse_trailer(t: &[u8; TRAILER_LEN]) -> (u64, u128) {
    let len = u64::from_be_bytes(t[..8].try_into().unwrap_or_default());
    let hash = u128::from_be_bytes(t[8..].try_into().unwrap_or_default());
    (len, hash)
}

/// The receiver's verdict.
pub fn verdict(intact: bool, len: u64, hash: u128) -> [u8; VERDICT_LEN] {
    let mut v = [0u8; VERDICT_LEN];
    v[0] = u8::from(intact);
    v[1..9].copy_from_slice(&len.to_be_bytes());
    v[9..].copy_from_slice(&hash.to_be_bytes());
    v
}

/// Intact flag, length and hash of a verdict.
pub fn parse_verdict(v: &[u8; VERDICT_LEN]) -> (bool, u64, u128) {
    let len = u64::from_be_bytes(v[1..9].try_into().unwrap_or_default());
    let hash = u128::from_be_bytes(v[9..].try_into().unwrap_or_default());
    (v[0] == 1, len, hash)
}

/// The application error code of the RESET_STREAM with which the sender abandons the unsent
/// rest of a timed flow's stream at its duration.
pub const RESET_DEADLINE: u32 = 0x01;
/// The application error code of the RESET_STREAM with which the sender abandons a flow the
/// user stopped (the stop flag, e.g. Ctrl-C).
pub const RESET_STOP: u32 = 0x02;

/// How a stream ended, as [`crate::SenderSummary::ended_by`] and
/// [`crate::ReceiverSummary::ended_by`] name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Trailer and FIN: a sized flow, checked end to end by length and hash.
    Trailer,
    /// RESET_STREAM with [`RESET_DEADLINE`]: a timed flow at its duration.
    Deadline,
    /// RESET_STREAM with [`RESET_STOP`]: the sender was stopped.
    Stop,
}

impl End {
    /// The name in the summaries: "trailer", "deadline" or "stop".
    pub fn name(self) -> &'static str {
        match self {
            End::Trailer => "trailer",
            End::Deadline => "deadline",
            End::Stop => "stop",
        }
    }

    /// The end a RESET_STREAM error code stands for (`None`: not one of the sender's).
    pub fn from_reset_code(code: u64) -> Option<End> {
        match code {
            c if c == u64::from(RESET_DEADLINE) => Some(End::Deadline),
            c if c == u64::from(RESET_STOP) => Some(End::Stop),
            _ => None,
        }
    }

    /// The RESET_STREAM error code of a reset end (`None` for [`End::Trailer`]).
    pub fn reset_code(self) -> Option<u32> {
        match self {
            End::Trailer => None,
            End::Deadline => Some(RESET_DEADLINE),
            End::Stop => Some(RESET_STOP),
        }
    }
}

/// Checks stream content as it arrives: compares every byte with the flow's pattern at its
/// offset (`ccp_udp::pattern`, which is what the sender writes) and hashes it (xxh3-128), so
/// that any prefix of the stream is verified as it is counted, whether or not a trailer
/// follows.
pub struct ContentCheck {
    seed: u64,
    len: u64,
    hasher: xxhash_rust::xxh3::Xxh3Default,
    mismatch: Option<u64>,
}

impl ContentCheck {
    /// A check of flow `flow_id`'s content from offset 0.
    pub fn new(flow_id: u32) -> Self {
        ContentCheck {
            seed: ccp_udp::pattern::seed(flow_id),
            len: 0,
            hasher: xxhash_rust::xxh3::Xxh3Default::new(),
            mismatch: None,
        }
    }

    /// The next content bytes, in stream order.
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        if self.mismatch.is_none() {
            let step = ccp_udp::packet::MAX_MSS as usize;
            for (k, piece) in bytes.chunks(step).enumerate() {
                let at = self.len + (k * step) as u64;
                let want = ccp_udp::pattern::slice(self.seed, at, piece.len());
                if piece != want {
                    let i = piece.iter().zip(want).position(|(a, b)| a != b);
                    self.mismatch = Some(at + i.unwrap_or(0) as u64);
                    break;
                }
            }
        }
        self.len += bytes.len() as u64;
    }

    /// Content bytes checked so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no content arrived yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// xxh3-128 hash of the content so far.
    pub fn hash(&self) -> u128 {
        self.hasher.digest128()
    }

    /// Offset of the first byte that differs from the pattern (`None`: every byte so far is
    /// the pattern's).
    pub fn mismatch(&self) -> Option<u64> {
        self.mismatch
    }
}

/// Checks a byte stream's content with a [`ContentCheck`] except its last [`TRAILER_LEN`]
/// bytes, which it holds back: the trailer if the stream ends with a FIN, content if the
/// sender resets it.
pub struct TrailerSplitter {
    content: ContentCheck,
    tail: Vec<u8>,
}

impl TrailerSplitter {
    /// A splitter for flow `flow_id`'s stream (after its header).
    pub fn new(flow_id: u32) -> Self {
        TrailerSplitter {
            content: ContentCheck::new(flow_id),
            tail: Vec::with_capacity(2 * TRAILER_LEN),
        }
    }

    /// Feed the next bytes of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= TRAILER_LEN {
            self.content.update(&self.tail);
            let cut = chunk.len() - TRAILER_LEN;
            self.content.update(&chunk[..cut]);
            self.tail.clear();
            self.tail.extend_from_slice(&chunk[cut..]);
        } else {
            self.tail.extend_from_slice(chunk);
            if self.tail.len() > TRAILER_LEN {
                let cut = self.tail.len() - TRAILER_LEN;
                self.content.update(&self.tail[..cut]);
                self.tail.drain(..cut);
            }
        }
    }

    /// Content bytes checked so far (everything but the held-back tail).
    pub fn content_len(&self) -> u64 {
        self.content.len()
    }

    /// The stream ended with a FIN: the content's check and the trailer (`None` if the stream
    /// was shorter than a trailer).
    pub fn finish(self) -> (ContentCheck, Option<[u8; TRAILER_LEN]>) {
        let t = <[u8; TRAILER_LEN]>::try_from(self.tail.as_slice()).ok();
        (self.content, t)
    }

    /// The sender reset the stream: no trailer follows, the held-back tail is content too.
    pub fn abandon(mut self) -> ContentCheck {
        self.content.update(&self.tail);
        self.content
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_udp::pattern;

    /// Flow `id`'s first `len` content bytes.
    fn content(id: u32, len: usize) -> Vec<u8> {
        let seed = pattern::seed(id);
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            let n = (len - v.len()).min(1000);
            v.extend_from_slice(pattern::slice(seed, v.len() as u64, n));
        }
        v
    }

    #[test]
    fn frames_round_trip_and_the_splitter_finds_the_trailer_at_any_chunking() {
        assert_eq!(parse_header(&header(0xdead_beef)), Some(0xdead_beef));
        assert_eq!(parse_header(b"CCPX\x02\0\0\0\0\0\0\x01"), None);
        // A version-1 header (trailer only, no pattern check) is refused.
        assert_eq!(parse_header(b"CCPQ\x01\0\0\0\0\0\0\x01"), None);
        assert_eq!(parse_trailer(&trailer(7, 99)), (7, 99));
        assert_eq!(parse_verdict(&verdict(true, 5, 6)), (true, 5, 6));
        let id = 0x5eed_0001;
        let len = 10_000u64;
        let body = content(id, len as usize);
        let hash = pattern::stream_hash(id, len);
        let mut stream = body.clone();
        stream.extend_from_slice(&trailer(len, hash));
        for chunk in [1usize, 7, 23, 24, 25, 1000, 20_000] {
            let mut s = TrailerSplitter::new(id);
            for c in stream.chunks(chunk) {
                s.push(c);
            }
            let (c, t) = s.finish();
            assert_eq!((c.len(), c.hash()), (len, hash), "chunk {chunk}");
            assert_eq!(c.mismatch(), None, "chunk {chunk}");
            assert_eq!(parse_trailer(&t.unwrap()), (len, hash));
        }
        let mut short = TrailerSplitter::new(id);
        short.push(b"abc");
        assert!(short.finish().1.is_none());
    }

    #[test]
    fn a_reset_stream_counts_its_whole_prefix_as_content() {
        // Cut anywhere, also inside what would be held back as a trailer: the content checked
        // is the whole prefix, every byte the pattern's, its hash the pattern's.
        let id = 42;
        let body = content(id, 5_000);
        for cut in [0usize, 1, 23, 24, 25, 4_999, 5_000] {
            for chunk in [1usize, 24, 1448, 4096] {
                let mut s = TrailerSplitter::new(id);
                for c in body[..cut].chunks(chunk) {
                    s.push(c);
                }
                let c = s.abandon();
                assert_eq!(c.len(), cut as u64, "cut {cut} chunk {chunk}");
                assert_eq!(c.mismatch(), None);
                assert_eq!(c.hash(), pattern::stream_hash(id, cut as u64));
            }
        }
    }

    #[test]
    fn a_flipped_byte_is_found_at_its_offset() {
        let id = 7;
        let len = 3 * pattern::PATTERN_LEN as usize / 2;
        let good = content(id, len);
        for at in [0usize, 1, 1447, 1448, 100_000, len - 30, len - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            // Through the splitter of a reset stream, in odd chunks: the flipped byte is found
            // at its offset, also in the held-back tail, and the hash differs.
            let mut s = TrailerSplitter::new(id);
            for c in bad.chunks(1000) {
                s.push(c);
            }
            let c = s.abandon();
            assert_eq!(c.mismatch(), Some(at as u64), "flipped at {at}");
            assert_ne!(c.hash(), pattern::stream_hash(id, len as u64));
        }
        // Another flow's content is not this flow's.
        let mut other = ContentCheck::new(id + 1);
        other.update(&good[..100]);
        assert!(other.mismatch().is_some());
        // A sized stream with one flipped byte but a trailer made for it (length and hash of
        // what was sent) still fails: the pattern check sees it.
        let mut bad = good[..10_000].to_vec();
        bad[5_000] ^= 0x80;
        let h = xxhash_rust::xxh3::xxh3_128(&bad);
        bad.extend_from_slice(&trailer(10_000, h));
        let mut s = TrailerSplitter::new(id);
        s.push(&bad);
        let (c, t) = s.finish();
        assert_eq!(parse_trailer(&t.unwrap()), (c.len(), c.hash()));
        assert_eq!(c.mismatch(), Some(5_000));
    }
}
