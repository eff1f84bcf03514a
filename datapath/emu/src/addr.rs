//! Address blocks that let shells nest without NAT. The outermost shell takes a free /14 of
//! 100.64.0.0/10 (mahimahi's range); a shell owning block B uses B+1 for its outer side and B+2
//! for its inner side, routes all of B from the outer namespace to its TUN device, and gives B
//! to the inner namespace (in `CCP_EMU_BLOCK`), where a nested shell takes a free sub-block of
//! B a quarter-octet longer (/18, /22, ...). Every address inside is thereby reachable from
//! every enclosing namespace through one route per level. A lock file serialises allocation
//! between emulators that start at the same time.

use crate::error::{EmuError, Result};
use crate::sys;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;

/// Environment variable holding the block of the namespace a command runs in.
pub const BLOCK_ENV: &str = "CCP_EMU_BLOCK";
/// The range the outermost shells allocate from.
pub const TOP_BLOCK: Block = Block {
    net: Ipv4Addr::new(100, 64, 0, 0),
    prefix: 10,
};
const SPLIT: u8 = 4;

/// An IPv4 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Network address.
    pub net: Ipv4Addr,
    /// Prefix length.
    pub prefix: u8,
}

impl std::fmt::Display for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

impl std::str::FromStr for Block {
    type Err = EmuError;
    fn from_str(s: &str) -> Result<Block> {
        let bad = || EmuError::Config(format!("{s:?} is not an IPv4 prefix like 100.64.0.0/10"));
        let (a, p) = s.split_once('/').ok_or_else(bad)?;
        let net: Ipv4Addr = a.trim().parse().map_err(|_| bad())?;
        let prefix: u8 = p.trim().parse().map_err(|_| bad())?;
        if prefix > 32 {
            return Err(bad());
        }
        Ok(Block {
            net: Ipv4Addr::from(u32::from(net) & u32::from(sys::prefix_mask(prefix))),
            prefix,
        })
    }
}

impl Block {
    /// The `i`-th address of the block.
    pub fn host(&self, i: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.net) + i)
    }

    /// Whether two prefixes overlap.
    pub fn overlaps(&self, other: &Block) -> bool {
        let m = u32::from(sys::prefix_mask(self.prefix.min(other.prefix)));
        u32::from(self.net) & m == u32::from(other.net) & m
    }

    /// Whether `a` is inside the block.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        self.overlaps(&Block { net: a, prefix: 32 })
    }

    /// Sub-block `i` of size /(prefix+4).
    pub fn sub(&self, i: u32) -> Block {
        let p = self.prefix + SPLIT;
        Block {
            net: Ipv4Addr::from(u32::from(self.net) + (i << (32 - p as u32))),
            prefix: p,
        }
    }
}

/// The block of the namespace this process runs in: `$CCP_EMU_BLOCK`, else the top range.
pub fn current_block() -> Result<Block> {
    match std::env::var(BLOCK_ENV) {
        Ok(v) if !v.is_empty() => v.parse(),
        _ => Ok(TOP_BLOCK),
    }
}

/// Holds the allocation lock.
pub struct AllocLock {
    _f: std::fs::File,
}

/// Take the allocation lock (a `flock` on /run/ccp-emu.lock, or /tmp if /run is not writable).
pub fn lock() -> Result<AllocLock> {
    let open = |p: &str| {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(p)
    };
    let f = open("/run/ccp-emu.lock")
        .or_else(|_| open("/tmp/ccp-emu.lock"))
        .map_err(|e| EmuError::sys("opening the allocation lock file", e))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(EmuError::last_os("flock on the allocation lock"));
    }
    Ok(AllocLock { _f: f })
}

/// Choose a free sub-block of `parent` in the calling thread's namespace (hold [`lock`] until
/// the route for it exists).
pub fn allocate(parent: Block) -> Result<Block> {
    if parent.prefix + SPLIT > 30 {
        return Err(EmuError::Addresses(format!(
            "block {parent} is too small to nest another shell (at most 5 levels)"
        )));
    }
    let used: Vec<Block> = sys::ipv4_routes()
        .into_iter()
        .filter(|&(_, p)| p > 0)
        .map(|(net, prefix)| Block { net, prefix })
        .chain(
            sys::ipv4_addresses()
                .into_iter()
                .map(|net| Block { net, prefix: 32 }),
        )
        .collect();
    (1..(1u32 << SPLIT))
        .map(|i| parent.sub(i))
        .find(|b| {
            !used
                .iter()
                .any(|u| b.overlaps(u) && u.prefix >= parent.prefix)
        })
        .ok_or_else(|| {
            EmuError::Addresses(format!(
                "every sub-block of {parent} is in use in this namespace (15 shells at this level?)"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_and_overlap() {
        let b = TOP_BLOCK.sub(1);
        assert_eq!(b.to_string(), "100.68.0.0/14");
        assert_eq!(b.host(1), Ipv4Addr::new(100, 68, 0, 1));
        let c = b.sub(3);
        assert_eq!(c.to_string(), "100.68.192.0/18");
        assert!(b.overlaps(&c) && c.overlaps(&b));
        assert!(!c.overlaps(&b.sub(2)));
        assert!(b.contains(Ipv4Addr::new(100, 69, 1, 1)));
        assert!(!b.contains(Ipv4Addr::new(100, 72, 0, 1)));
        assert_eq!("100.68.0.7/14".parse::<Block>().unwrap(), b);
        assert!("100.68.0.0".parse::<Block>().is_err());
    }
}
