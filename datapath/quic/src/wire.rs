//! What one flow's QUIC stream carries, and the receiver's answer.
//!
//! A flow is one bidirectional stream. The sender writes a [`HEADER_LEN`]-byte header (magic
//! `CCPQ`, version, three zero bytes, flow id), then the stream content — the deterministic
//! pattern of `ccp_udp::pattern` for the flow id, so both datapaths send the same bytes — and
//! last a [`TRAILER_LEN`]-byte trailer: the content's length and xxh3-128 hash. The receiver
//! hashes everything between header and trailer (holding back the last [`TRAILER_LEN`] bytes
//! until the stream ends), compares, and answers on the stream's other direction with a
//! [`VERDICT_LEN`]-byte verdict: intact flag, bytes received, hash received. All integers are
//! big-endian.

/// Stream magic.
pub const MAGIC: &[u8; 4] = b"CCPQ";
/// Wire version.
pub const VERSION: u8 = 1;
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

/// Hashes a byte stream except its last [`TRAILER_LEN`] bytes, which it keeps as the trailer.
#[derive(Default)]
pub struct TrailerSplitter {
    hasher: xxhash_rust::xxh3::Xxh3Default,
    tail: Vec<u8>,
    content: u64,
}

impl TrailerSplitter {
    /// Feed the next bytes of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= TRAILER_LEN {
            self.hasher.update(&self.tail);
            self.content += self.tail.len() as u64;
            let cut = chunk.len() - TRAILER_LEN;
            self.hasher.update(&chunk[..cut]);
            self.content += cut as u64;
            self.tail.clear();
            self.tail.extend_from_slice(&chunk[cut..]);
        } else {
            self.tail.extend_from_slice(chunk);
            if self.tail.len() > TRAILER_LEN {
                let cut = self.tail.len() - TRAILER_LEN;
                self.hasher.update(&self.tail[..cut]);
                self.content += cut as u64;
                self.tail.drain(..cut);
            }
        }
    }

    /// Content bytes hashed so far (everything but the held-back tail).
    pub fn content_len(&self) -> u64 {
        self.content
    }

    /// At the end of the stream: content length, content hash and the trailer (`None` if the
    /// stream was shorter than a trailer).
    pub fn finish(&self) -> (u64, u128, Option<[u8; TRAILER_LEN]>) {
        let t = <[u8; TRAILER_LEN]>::try_from(self.tail.as_slice()).ok();
        (self.content, self.hasher.digest128(), t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_the_splitter_finds_the_trailer_at_any_chunking() {
        assert_eq!(parse_header(&header(0xdead_beef)), Some(0xdead_beef));
        assert_eq!(parse_header(b"CCPX\x01\0\0\0\0\0\0\x01"), None);
        assert_eq!(parse_trailer(&trailer(7, 99)), (7, 99));
        assert_eq!(parse_verdict(&verdict(true, 5, 6)), (true, 5, 6));
        let len = 10_000u64;
        let content: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let hash = xxhash_rust::xxh3::xxh3_128(&content);
        let mut stream = content.clone();
        stream.extend_from_slice(&trailer(len, hash));
        for chunk in [1usize, 7, 23, 24, 25, 1000, 20_000] {
            let mut s = TrailerSplitter::default();
            for c in stream.chunks(chunk) {
                s.push(c);
            }
            let (n, h, t) = s.finish();
            assert_eq!((n, h), (len, hash), "chunk {chunk}");
            assert_eq!(parse_trailer(&t.unwrap()), (len, hash));
        }
        let mut short = TrailerSplitter::default();
        short.push(b"abc");
        assert!(short.finish().2.is_none());
    }
}
