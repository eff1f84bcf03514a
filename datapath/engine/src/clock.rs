//! Time source abstraction: the [`Clock`] trait through which the engine reads
//! time, and [`WallClock`], the monotonic real-time implementation.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// A monotonic clock in nanoseconds ("datapath time units" of libccp).
///
/// Implementations should never return 0: libccp uses 0 as "no timestamp".
pub trait Clock {
    /// Current time in nanoseconds.
    fn now_ns(&self) -> u64;
}

/// Offset added by [`WallClock`] so that it never returns 0.
const WALL_CLOCK_OFFSET_NS: u64 = 1_000_000_000;

/// Real monotonic time, counted from the clock's creation plus one second.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    start: Instant,
}

impl Default for WallClock {
    fn default() -> Self {
        Self {
            start: Instant::now(),
        }
    }
}

impl Clock for WallClock {
    fn now_ns(&self) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        elapsed.saturating_add(WALL_CLOCK_OFFSET_NS)
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

impl<C: Clock + ?Sized> Clock for Rc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

impl<C: Clock + ?Sized> Clock for Box<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}
