//! [`BuiltinReno`]: NewReno driven by [`AckSample`]s, the transport's standalone controller and
//! the fallback the CCP integration switches a flow to when the agent goes away.
//!
//! Slow start adds every newly in-order acknowledged byte; congestion avoidance adds one MSS
//! per window of acknowledged bytes (byte counting); a loss or an ECN-CE mark halves the window
//! at most once per round trip (the recovery period lasts one smoothed RTT, during which the
//! window does not grow); a retransmission timeout resets the
//! window to one MSS. The window grows only while the flow uses at least half of it, so an
//! application-limited flow does not inflate it. No pacing: the transport sends as the window
//! allows.

use std::time::Instant;

use crate::cc::{AckSample, FlowController};

/// Largest window Reno sets, bytes.
const MAX_CWND: u64 = 1 << 30;

/// NewReno congestion control over [`AckSample`]s.
#[derive(Clone, Debug)]
pub struct BuiltinReno {
    mss: u32,
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acknowledged since the last congestion-avoidance increase.
    ca_acked: u64,
    srtt_us: u64,
    recovery_until: Option<Instant>,
}

impl BuiltinReno {
    /// A fresh flow: window `init_cwnd` bytes (at least one MSS), slow start.
    pub fn new(mss: u32, init_cwnd: u32) -> Self {
        Self::resume(mss, init_cwnd, u64::MAX)
    }

    /// Takes over a running flow from another controller: window `cwnd` and slow-start
    /// threshold `ssthresh` (bytes; `u64::MAX` for "none yet").
    pub fn resume(mss: u32, cwnd: u32, ssthresh: u64) -> Self {
        let mss = mss.max(1);
        BuiltinReno {
            mss,
            cwnd: u64::from(cwnd).max(u64::from(mss)),
            ssthresh: ssthresh.max(2 * u64::from(mss)),
            ca_acked: 0,
            srtt_us: 0,
            recovery_until: None,
        }
    }

    /// Slow-start threshold, bytes (`u64::MAX` before the first loss).
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn in_recovery(&self, now: Instant) -> bool {
        self.recovery_until.is_some_and(|t| now < t)
    }

    fn reduce(&mut self, now: Instant) {
        let mss = u64::from(self.mss);
        self.ssthresh = (self.cwnd / 2).max(2 * mss);
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
        let rtt = if self.srtt_us > 0 {
            self.srtt_us
        } else {
            100_000
        };
        self.recovery_until = Some(now + std::time::Duration::from_micros(rtt));
    }
}

impl FlowController for BuiltinReno {
    fn on_ack(&mut self, s: &AckSample) {
        let now = Instant::now();
        if s.rtt_us > 0 {
            self.srtt_us = if self.srtt_us == 0 {
                s.rtt_us
            } else {
                (7 * self.srtt_us + s.rtt_us) / 8
            };
        }
        let mss = u64::from(self.mss);
        if s.was_timeout {
            self.ssthresh = (self.cwnd / 2).max(2 * mss);
            self.cwnd = mss;
            self.ca_acked = 0;
            self.recovery_until = None;
            return;
        }
        // Losses and ECN-CE marks (RFC 3168) are the same congestion signal.
        if (s.lost_pkts > 0 || s.ecn_packets > 0) && !self.in_recovery(now) {
            self.reduce(now);
            return;
        }
        if self.in_recovery(now) {
            return;
        }
        let acked = u64::from(s.bytes_acked);
        if acked == 0 {
            return;
        }
        // Grow only while the window is in use (in flight before this ACK ≥ half the window).
        let used = u64::from(s.bytes_in_flight) + acked + u64::from(s.bytes_misordered);
        if 2 * used < self.cwnd {
            return;
        }
        if self.cwnd < self.ssthresh {
            self.cwnd = (self.cwnd + acked).min(MAX_CWND);
        } else {
            self.ca_acked += acked;
            while self.ca_acked >= self.cwnd {
                self.ca_acked -= self.cwnd;
                self.cwnd = (self.cwnd + mss).min(MAX_CWND);
            }
        }
    }

    fn on_tick(&mut self, _s: &AckSample) {}

    fn cwnd(&self) -> u32 {
        self.cwnd.min(u64::from(u32::MAX)) as u32
    }

    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    fn controller_name(&self) -> String {
        "builtin:reno".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(bytes: u32, in_flight: u32) -> AckSample {
        AckSample {
            bytes_acked: bytes,
            packets_acked: bytes / 1000,
            bytes_in_flight: in_flight,
            rtt_us: 10_000,
            ..AckSample::default()
        }
    }

    #[test]
    fn slow_start_then_halving_then_linear() {
        let mut r = BuiltinReno::new(1000, 10_000);
        assert_eq!(r.controller_name(), "builtin:reno");
        r.on_ack(&ack(10_000, 0));
        assert_eq!(r.cwnd(), 20_000);
        r.on_ack(&AckSample {
            lost_pkts: 1,
            ..ack(0, 19_000)
        });
        assert_eq!(r.cwnd(), 10_000);
        assert_eq!(r.ssthresh(), 10_000);
        // A second loss within the same RTT does not halve again.
        r.on_ack(&AckSample {
            lost_pkts: 3,
            ..ack(0, 9_000)
        });
        assert_eq!(r.cwnd(), 10_000);
        std::thread::sleep(std::time::Duration::from_millis(15));
        // Congestion avoidance: one MSS per window of acked bytes.
        for _ in 0..10 {
            r.on_ack(&ack(1000, 9_000));
        }
        assert_eq!(r.cwnd(), 11_000);
        r.on_ack(&AckSample {
            was_timeout: true,
            ..AckSample::default()
        });
        assert_eq!(r.cwnd(), 1000);
        assert_eq!(r.ssthresh(), 5_500);
    }

    #[test]
    fn ecn_marks_halve_like_losses() {
        let mut r = BuiltinReno::new(1000, 20_000);
        r.on_ack(&AckSample {
            ecn_packets: 2,
            ecn_bytes: 2000,
            ..ack(2000, 18_000)
        });
        assert_eq!(r.cwnd(), 10_000);
    }

    #[test]
    fn app_limited_does_not_grow_and_resume_keeps_state() {
        let mut r = BuiltinReno::new(1000, 100_000);
        r.on_ack(&ack(1000, 2000));
        assert_eq!(r.cwnd(), 100_000);
        let r = BuiltinReno::resume(1448, 50_000, 30_000);
        assert_eq!((r.cwnd(), r.ssthresh()), (50_000, 30_000));
        assert_eq!(r.pacing_rate(), None);
    }
}
