//! The payload pattern: which byte sits at which stream offset of a flow.
//!
//! Stream content is a deterministic function of the flow id and the offset: a fixed
//! pseudo-random buffer of [`PATTERN_LEN`] bytes (a prime, so no packet size divides it) read
//! from `(offset + seed(flow id)) mod PATTERN_LEN`. Reordering, duplication or corruption bugs
//! therefore change the stream's xxh3-128 hash, which the receiver checks against the FIN.

use std::sync::OnceLock;

use xxhash_rust::xxh3::Xxh3Default;

use crate::packet::MAX_MSS;

/// Length of the repeating pattern: the largest prime below 2²⁰.
pub const PATTERN_LEN: u64 = 1_048_573;

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The pattern followed by a copy of its first `MAX_MSS` bytes, so any slice of up to one
/// payload is contiguous.
fn buffer() -> &'static [u8] {
    static BUF: OnceLock<Box<[u8]>> = OnceLock::new();
    BUF.get_or_init(|| {
        let n = PATTERN_LEN as usize;
        let mut v = Vec::with_capacity(n + MAX_MSS as usize + 8);
        let mut state = 0x00cc_9001_u64;
        while v.len() < n {
            v.extend_from_slice(&splitmix64(&mut state).to_le_bytes());
        }
        v.truncate(n);
        v.extend_from_within(..MAX_MSS as usize);
        v.into_boxed_slice()
    })
}

/// Where in the pattern a flow's stream starts.
pub fn seed(flow_id: u32) -> u64 {
    let mut s = u64::from(flow_id);
    splitmix64(&mut s) % PATTERN_LEN
}

/// The `len` (≤ [`MAX_MSS`]) stream bytes of a flow with `seed` at `offset`.
pub fn slice(seed: u64, offset: u64, len: usize) -> &'static [u8] {
    let start = ((offset % PATTERN_LEN + seed) % PATTERN_LEN) as usize;
    let len = len.min(MAX_MSS as usize);
    &buffer()[start..start + len]
}

/// Feeds the stream bytes `[offset, offset + len)` of a flow into `hasher`.
pub fn hash_range(hasher: &mut Xxh3Default, seed: u64, offset: u64, len: u64) {
    let buf = buffer();
    let mut pos = offset;
    let end = offset + len;
    while pos < end {
        let start = ((pos % PATTERN_LEN + seed) % PATTERN_LEN) as usize;
        let chunk = (end - pos).min(PATTERN_LEN - start as u64) as usize;
        hasher.update(&buf[start..start + chunk]);
        pos += chunk as u64;
    }
}

/// The xxh3-128 hash of a whole stream of `len` bytes of flow `flow_id` (for tests and tools).
pub fn stream_hash(flow_id: u32, len: u64) -> u128 {
    let mut h = Xxh3Default::new();
    hash_range(&mut h, seed(flow_id), 0, len);
    h.digest128()
}

/// Formats a 128-bit hash as 32 lowercase hex digits.
pub fn hash_hex(h: u128) -> String {
    format!("{h:032x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_match_the_stream_hash() {
        let id = 0x1234_5678;
        let s = seed(id);
        let total = 3 * PATTERN_LEN + 777;
        let mut h = Xxh3Default::new();
        let mut off = 0;
        while off < total {
            let n = (total - off).min(1448);
            h.update(slice(s, off, n as usize));
            off += n;
        }
        assert_eq!(h.digest128(), stream_hash(id, total));
    }

    #[test]
    fn flows_differ_and_shifts_show() {
        assert_ne!(seed(1), seed(2));
        assert_ne!(slice(seed(1), 0, 64), slice(seed(2), 0, 64));
        assert_ne!(slice(seed(1), 0, 64), slice(seed(1), 1448 * 724, 64));
    }
}
