//! Virtual time: the simulator's one clock, shared by the datapath engine (as a
//! [`ccp_engine::Clock`]) and the agent (as a [`TimeSource`]), plus the
//! conversions between nanoseconds, bytes and rates that the rest of the crate uses.
//!
//! Simulated time is an integer count of nanoseconds since the scenario started. Only the
//! event loop ([`crate::sim`]) advances it.

use ccp_algorithms::adapter::TimeSource;
use ccp_engine::Clock;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;
/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per microsecond.
pub const NS_PER_US: u64 = 1_000;

/// What the engine's clock adds to simulated time: libccp reads a time of 0 as "no
/// timestamp", so the engine never sees 0.
pub const ENGINE_CLOCK_OFFSET_NS: u64 = NS_PER_SEC;

/// The simulator's clock: simulated nanoseconds since the scenario started.
///
/// Cloning shares the clock. The engine reads it through [`Clock`] (offset by
/// [`ENGINE_CLOCK_OFFSET_NS`]), the agent through [`TimeSource`] (µs since the start).
#[derive(Clone, Debug, Default)]
pub struct VirtualClock(Arc<AtomicU64>);

impl VirtualClock {
    /// A clock at time 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulated time, ns.
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Move the clock to `t` (ns). Only the event loop calls this, with non-decreasing times.
    pub(crate) fn set(&self, t: u64) {
        self.0.store(t, Ordering::Relaxed);
    }
}

impl Clock for VirtualClock {
    fn now_ns(&self) -> u64 {
        self.now() + ENGINE_CLOCK_OFFSET_NS
    }
}

impl TimeSource for VirtualClock {
    fn now_us(&self) -> u64 {
        self.now() / NS_PER_US
    }
}

/// Time to serialize `bytes` at `rate` bytes/s, ns (rounded up; at least 1 ns for a nonzero
/// size).
pub fn tx_time_ns(bytes: u64, rate_bps: u64) -> u64 {
    if rate_bps == 0 {
        return u64::MAX / 4;
    }
    let ns = (u128::from(bytes) * u128::from(NS_PER_SEC)).div_ceil(u128::from(rate_bps));
    u64::try_from(ns).unwrap_or(u64::MAX / 4)
}

/// Bytes that `rate` bytes/s carries in `ns` nanoseconds (rounded down).
pub fn bytes_in(rate_bps: u64, ns: u64) -> u64 {
    let b = u128::from(rate_bps) * u128::from(ns) / u128::from(NS_PER_SEC);
    u64::try_from(b).unwrap_or(u64::MAX)
}

/// A rate in bytes/s from `bytes` over `ns` (0 for an empty interval).
pub fn rate_of(bytes: u64, ns: u64) -> u64 {
    if ns == 0 {
        return 0;
    }
    let r = u128::from(bytes) * u128::from(NS_PER_SEC) / u128::from(ns);
    u64::try_from(r).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(tx_time_ns(1500, 12_500_000), 120_000);
        assert_eq!(tx_time_ns(1500, 1_250_000_000), 1_200);
        assert_eq!(tx_time_ns(1, 3), 333_333_334);
        assert_eq!(bytes_in(12_500_000, NS_PER_SEC), 12_500_000);
        assert_eq!(rate_of(1500, 120_000), 12_500_000);
        assert_eq!(rate_of(1, 0), 0);
    }

    #[test]
    fn clock_never_reads_zero_to_the_engine() {
        let c = VirtualClock::new();
        assert_eq!(Clock::now_ns(&c), ENGINE_CLOCK_OFFSET_NS);
        c.set(2_500);
        assert_eq!(TimeSource::now_us(&c), 2);
        assert_eq!(c.clone().now(), 2_500);
    }
}
