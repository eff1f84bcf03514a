//! Rate machinery of a sender: the token-bucket [`Pacer`] that enforces a controller's pacing
//! rate, and [`RateWindow`], which turns a cumulative byte counter into a rate over the last
//! round trip (the sending and delivery rates reported to controllers).

use std::collections::VecDeque;

/// Token bucket in bytes, refilled at the pacing rate.
#[derive(Clone, Debug)]
pub struct Pacer {
    tokens: f64,
    last_us: u64,
}

impl Pacer {
    /// A full bucket of `burst` bytes at time `now_us`.
    pub fn new(now_us: u64, burst: u64) -> Self {
        Pacer {
            tokens: burst as f64,
            last_us: now_us,
        }
    }

    /// Burst allowance for `rate` bytes/s: max(2 packets, 1 ms at the rate), at most `cap`
    /// (one GSO batch), at least one packet.
    pub fn burst(rate: u64, packet: u64, cap: u64) -> u64 {
        (rate / 1000).max(2 * packet).min(cap).max(packet)
    }

    /// Adds the tokens earned since the last refill, up to `burst`.
    pub fn refill(&mut self, now_us: u64, rate: u64, burst: u64) {
        let dt = now_us.saturating_sub(self.last_us);
        self.last_us = self.last_us.max(now_us);
        self.tokens = (self.tokens + rate as f64 * dt as f64 / 1e6).min(burst as f64);
    }

    /// Fills the bucket (while no pacing rate is set, so pacing starts with a burst).
    pub fn fill(&mut self, now_us: u64, burst: u64) {
        self.tokens = burst as f64;
        self.last_us = now_us;
    }

    /// Takes `bytes` tokens if available.
    pub fn try_take(&mut self, bytes: u64) -> bool {
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }

    /// Gives back tokens of a packet that was not sent after all.
    pub fn give_back(&mut self, bytes: u64) {
        self.tokens += bytes as f64;
    }

    /// µs until `bytes` tokens are available at `rate`.
    pub fn wait_us(&self, bytes: u64, rate: u64) -> u64 {
        let missing = bytes as f64 - self.tokens;
        if missing <= 0.0 || rate == 0 {
            return if rate == 0 { u64::MAX } else { 0 };
        }
        (missing * 1e6 / rate as f64).ceil() as u64
    }
}

/// Rate of a cumulative counter over a sliding window of about one RTT.
#[derive(Clone, Debug, Default)]
pub struct RateWindow {
    points: VecDeque<(u64, u64)>,
}

impl RateWindow {
    /// Records `cum` at `now_us` and returns the rate (per second) over the last `window_us`.
    pub fn update(&mut self, now_us: u64, cum: u64, window_us: u64) -> u64 {
        let window_us = window_us.max(1);
        let spacing = (window_us / 16).max(1);
        // The newest point moves with every update until it is `spacing` past the one before
        // it; then it stays and a new head starts.
        let n = self.points.len();
        if n >= 2 && self.points[n - 1].0 < self.points[n - 2].0 + spacing {
            self.points[n - 1] = (now_us, cum);
        } else {
            self.points.push_back((now_us, cum));
        }
        // Keep the newest point that is at least one window old as the base.
        while self.points.len() > 2 && self.points[1].0 + window_us <= now_us {
            self.points.pop_front();
        }
        self.rate(now_us, cum)
    }

    /// Rate from the oldest kept point to (`now_us`, `cum`).
    pub fn rate(&self, now_us: u64, cum: u64) -> u64 {
        match self.points.front() {
            Some(&(t0, c0)) if now_us > t0 && cum >= c0 => {
                ((cum - c0) as u128 * 1_000_000 / u128::from(now_us - t0)) as u64
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_paces() {
        let rate = 2_500_000; // 20 Mbit/s
        let burst = Pacer::burst(rate, 1448, 64_000);
        assert_eq!(burst, 2896);
        let mut p = Pacer::new(0, burst);
        let mut sent = 0u64;
        let mut now = 0;
        while now < 1_000_000 {
            p.refill(now, rate, burst);
            while p.try_take(1448) {
                sent += 1448;
            }
            now += p.wait_us(1448, rate).max(1);
        }
        let err = (sent as f64 - rate as f64).abs() / rate as f64;
        assert!(err < 0.01, "sent {sent}");
    }

    #[test]
    fn rate_window_tracks_recent_rate() {
        let mut w = RateWindow::default();
        let mut cum = 0;
        let mut r = 0;
        // 1 MB/s for a second, then 4 MB/s: after two windows the rate is 4 MB/s.
        for t in (0..2_000_000u64).step_by(100) {
            cum += if t < 1_000_000 { 100 } else { 400 };
            r = w.update(t, cum, 10_000);
        }
        assert!((3_900_000..=4_100_000).contains(&r), "{r}");
        assert!(w.points.len() <= 20);
    }
}
