//! Estimators of the measurement stream shared by the delay- and model-based algorithms
//! ([`crate::bbr`], [`crate::copa`], [`crate::vegas`]), written once:
//!
//! - [`WindowedFilter`]: the exact running maximum or minimum of the samples of the last `window`
//!   units of a key that never decreases — microseconds (Copa's 10 s min RTT and srtt/2 standing
//!   RTT) or round trips (BBR's 10-round max bandwidth). A monotone deque: O(1) amortised per
//!   sample, memory bounded by the samples that could still become the extremum.
//! - [`RoundCounter`]: packet-timed round trips counted from the report stream. A round that
//!   starts when `delivered` bytes have been acknowledged, with `in_flight` bytes outstanding, ends
//!   once `delivered + in_flight` bytes are acknowledged: the first ACK for data sent after the
//!   round started, which is BBR's packet-timed round (draft-cardwell-iccrg-bbr-
//!   congestion-control-00) rebuilt from aggregated reports. What counts as acknowledged is the
//!   caller's: BBR passes what [`DeliveryCounter`] counts (SACKed bytes included, as the draft's
//!   `C.delivered`), so its rounds go on while a hole stalls the cumulative ACK; Copa, CUBIC's
//!   HyStart++ and Vegas pass the in-order acknowledged bytes (their rounds follow the
//!   cumulative ACK, as RFC 9406's `windowEnd` and Vegas' `beg_snd_nxt`). Retransmitted bytes
//!   count when they are acknowledged; a report acknowledging nothing never starts a round.
//! - [`DeliveryCounter`]: the bytes a report newly delivered, acknowledged in order or SACKed,
//!   each byte counted once (when first acknowledged either way): the draft's `delivered` and
//!   Linux's `acked_sacked`.
//! - [`Srtt`]: the RFC 6298 smoothed RTT (gain 1/8) of the reports' mean RTT samples.
//! - [`ReportClock`]: the report period these algorithms ask for, `srtt / reports_per_rtt`
//!   (never below [`MIN_REPORT_US`]), re-requested only when it moves by more than 1/8.
//! - [`count_param`], [`positive_param`]: how these algorithms clamp counts and gains read from
//!   their parameters.
//!
//! Time is the agent's [`Measurement::now_us`](crate::controller::Measurement) (µs), never the wall
//! clock.

use crate::controller::{Measurement, ReportPeriod};
use std::collections::VecDeque;

/// The shortest report period [`ReportClock`] asks for, µs: a datacenter RTT of tens of µs gets
/// reports every 100 µs rather than on every ACK.
pub const MIN_REPORT_US: u64 = 100;

/// A `Count` parameter as a whole number of at least 1 (a non-finite value gives 1).
pub fn count_param(v: f64) -> u64 {
    if v.is_finite() {
        v.clamp(1.0, 1e12) as u64
    } else {
        1
    }
}

/// A gain or fraction that must be positive and finite: `v`, else `default`.
pub fn positive_param(v: f64, default: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { default }
}

/// Whether a filter keeps the largest or the smallest sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extremum {
    Max,
    Min,
}

/// The maximum (or minimum) of the samples whose key lies in `(latest − window, latest]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowedFilter {
    kind: Extremum,
    window: u64,
    /// `(key, value)`, keys increasing, values strictly decreasing (max) or increasing (min)
    /// from the front: the front is the extremum.
    samples: VecDeque<(u64, u64)>,
}

impl WindowedFilter {
    /// A running maximum over `window` units of the key.
    pub fn max(window: u64) -> Self {
        WindowedFilter {
            kind: Extremum::Max,
            window,
            samples: VecDeque::new(),
        }
    }

    /// A running minimum over `window` units of the key.
    pub fn min(window: u64) -> Self {
        WindowedFilter {
            kind: Extremum::Min,
            window,
            samples: VecDeque::new(),
        }
    }

    /// The window length, in units of the key.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Change the window length (takes effect at the next sample or [`expire`](Self::expire)).
    pub fn set_window(&mut self, window: u64) {
        self.window = window;
    }

    /// Whether `a` makes `b` useless (a is at least as extreme and newer).
    fn dominates(&self, a: u64, b: u64) -> bool {
        match self.kind {
            Extremum::Max => a >= b,
            Extremum::Min => a <= b,
        }
    }

    /// Add the sample `value` at `key` (keys must not decrease; an older key is treated as the
    /// newest one) and forget samples that left the window.
    pub fn update(&mut self, key: u64, value: u64) {
        let key = self.samples.back().map_or(key, |&(k, _)| key.max(k));
        while self
            .samples
            .back()
            .is_some_and(|&(_, v)| self.dominates(value, v))
        {
            self.samples.pop_back();
        }
        self.samples.push_back((key, value));
        self.expire(key);
    }

    /// Forget the samples that are out of the window at `key` (`key − sample_key ≥ window`), except
    /// that the newest sample is always kept.
    pub fn expire(&mut self, key: u64) {
        while self.samples.len() > 1
            && self
                .samples
                .front()
                .is_some_and(|&(k, _)| key.saturating_sub(k) >= self.window)
        {
            self.samples.pop_front();
        }
    }

    /// The current extremum (`None` before the first sample).
    pub fn get(&self) -> Option<u64> {
        self.samples.front().map(|&(_, v)| v)
    }

    /// Forget every sample.
    pub fn reset(&mut self) {
        self.samples.clear();
    }

    /// Samples held (for tests of the memory bound).
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the filter holds no sample.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// Packet-timed round trips, counted from the reports' acknowledged bytes and bytes in flight.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoundCounter {
    /// Bytes acknowledged since the flow started (as the caller counts them).
    delivered: u64,
    /// The current round ends once `delivered` reaches this.
    round_end: u64,
    /// Rounds started so far.
    rounds: u64,
}

impl RoundCounter {
    /// A counter before the first report (the first acknowledging report starts round 1).
    pub fn new() -> Self {
        RoundCounter::default()
    }

    /// Take in one report; returns whether it started a new round.
    pub fn on_report(&mut self, acked_bytes: u64, bytes_in_flight: u64) -> bool {
        self.delivered = self.delivered.saturating_add(acked_bytes);
        if acked_bytes > 0 && self.delivered >= self.round_end {
            self.rounds += 1;
            self.round_end = self.delivered.saturating_add(bytes_in_flight.max(1));
            true
        } else {
            false
        }
    }

    /// End the current round now: the next round ends when the `bytes_in_flight` outstanding now
    /// have been acknowledged (BBR's `next_round_delivered = delivered` on entering ProbeRTT).
    /// Does not count a round.
    pub fn restart(&mut self, bytes_in_flight: u64) {
        self.round_end = self.delivered.saturating_add(bytes_in_flight.max(1));
    }

    /// Rounds started so far.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Bytes acknowledged so far (as the caller counts them).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }
}

/// Newly delivered bytes per report, counting SACKed bytes once, when SACKed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeliveryCounter {
    /// SACKed bytes the cumulative ACK has not covered yet (as far as the reports tell).
    sacked: u64,
}

impl DeliveryCounter {
    /// Bytes newly delivered by the report `m`.
    pub fn delivered(&mut self, m: &Measurement) -> u64 {
        let absorbed = m.acked_bytes.min(self.sacked);
        self.sacked = self.sacked - absorbed + m.sacked_bytes;
        m.acked_bytes - absorbed + m.sacked_bytes
    }
}

/// The smoothed RTT of the reports' mean RTT samples, µs (RFC 6298 gain 1/8).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Srtt {
    srtt_us: f64,
}

impl Srtt {
    /// No sample yet.
    pub fn new() -> Self {
        Srtt::default()
    }

    /// Take in a report's mean RTT (0: the report had no sample); returns the smoothed RTT.
    pub fn update(&mut self, rtt_mean_us: u64) -> u64 {
        if rtt_mean_us > 0 {
            let s = rtt_mean_us as f64;
            self.srtt_us = if self.srtt_us == 0.0 {
                s
            } else {
                0.875 * self.srtt_us + 0.125 * s
            };
        }
        self.get()
    }

    /// The smoothed RTT, µs (0 before any sample).
    pub fn get(&self) -> u64 {
        self.srtt_us.round() as u64
    }
}

/// The report period an algorithm asks for: `srtt / reports_per_rtt`, at least
/// [`MIN_REPORT_US`], asked again only when it moved by more than 1/8 of the last one asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportClock {
    reports_per_rtt: u64,
    asked_us: u64,
}

impl ReportClock {
    /// `reports_per_rtt` reports per smoothed RTT (at least 1).
    pub fn new(reports_per_rtt: u64) -> Self {
        ReportClock {
            reports_per_rtt: reports_per_rtt.max(1),
            asked_us: 0,
        }
    }

    /// The period to ask for now, if it changed enough (`None` before any RTT sample).
    pub fn period(&mut self, srtt_us: u64) -> Option<ReportPeriod> {
        if srtt_us == 0 {
            return None;
        }
        let want = (srtt_us / self.reports_per_rtt).max(MIN_REPORT_US);
        if self.asked_us != 0 && want.abs_diff(self.asked_us) * 8 <= self.asked_us {
            return None;
        }
        self.asked_us = want;
        Some(ReportPeriod::Micros(want))
    }

    /// The period last asked for, µs (0: none yet).
    pub fn asked_us(&self) -> u64 {
        self.asked_us
    }
}

/// A packet-level model of one flow on one bottleneck, for the unit tests of the algorithms that
/// use these estimators: a FIFO bottleneck of `rate` bytes/s with an unlimited buffer, `base_us`
/// of propagation delay there and back, one ACK per packet, the window and pacing rate the
/// controller sets, and reports aggregated like the shared measurement program's (every report
/// period, on an ACK; BBR-style delivery-rate samples of the last ACK).
#[cfg(test)]
pub(crate) mod path {
    use crate::controller::{Controller, Decision, FlowStart, Measurement, ReportPeriod};
    use std::collections::VecDeque;

    /// One report as the controller saw it.
    #[derive(Clone, Debug)]
    pub struct Step {
        pub m: Measurement,
        /// Packets queued at the bottleneck when the report was made.
        pub queued: u64,
    }

    #[derive(Clone, Copy, Debug)]
    struct Pkt {
        sent: f64,
        arrive: f64,
        ack: f64,
        delivered: u64,
        delivered_time: f64,
        first_sent: f64,
    }

    /// The path and the sender's state.
    pub struct Path {
        pub rate: f64,
        pub base_us: f64,
        pub mss: u64,
        pub now: f64,
        cwnd: u64,
        pacing: f64,
        pace_next: f64,
        period_us: f64,
        last_report: f64,
        last_dep: f64,
        flight: VecDeque<Pkt>,
        delivered: u64,
        delivered_time: f64,
        first_sent: f64,
        acc: Measurement,
        rtt_sum: u64,
    }

    impl Path {
        /// A path of `mbit` Mbit/s and `base_us` base RTT carrying 1448-byte packets.
        pub fn new(mbit: f64, base_us: u64) -> Path {
            Path {
                rate: mbit * 1e6 / 8.0,
                base_us: base_us as f64,
                mss: 1448,
                now: 0.0,
                cwnd: 10 * 1448,
                pacing: 0.0,
                pace_next: 0.0,
                period_us: 1_000.0,
                last_report: 0.0,
                last_dep: 0.0,
                flight: VecDeque::new(),
                delivered: 0,
                delivered_time: 0.0,
                first_sent: 0.0,
                acc: Measurement::default(),
                rtt_sum: 0,
            }
        }

        /// The bandwidth-delay product, packets.
        pub fn bdp_pkts(&self) -> f64 {
            self.rate * self.base_us / 1e6 / self.mss as f64
        }

        fn apply(&mut self, d: &Decision) {
            if let Some(c) = d.cwnd {
                self.cwnd = u64::from(c);
            }
            if let Some(r) = d.rate {
                self.pacing = r as f64;
            }
            match d.report {
                Some(ReportPeriod::Micros(us)) => self.period_us = us as f64,
                Some(ReportPeriod::PerAck) => self.period_us = 0.0,
                Some(ReportPeriod::PerRtt) | None => {}
            }
        }

        /// Start the flow on `ctl` at time 0.
        pub fn start<C: Controller + ?Sized>(&mut self, ctl: &mut C) {
            let d = ctl.on_start(&FlowStart {
                mss: self.mss as u32,
                init_cwnd: self.cwnd as u32,
                now_us: 0,
            });
            self.apply(&d);
        }

        /// Packets queued at the bottleneck at `t`.
        fn queued_at(&self, t: f64) -> u64 {
            let ser = self.mss as f64 / self.rate * 1e6;
            self.flight
                .iter()
                .filter(|p| p.arrive <= t && p.ack - self.base_us / 2.0 - ser > t)
                .count() as u64
        }

        /// Run until `until_us`; returns every report.
        pub fn run<C: Controller + ?Sized>(&mut self, ctl: &mut C, until_us: f64) -> Vec<Step> {
            let mut steps = vec![];
            self.run_observed(ctl, until_us, |_, s| steps.push(s.clone()));
            steps
        }

        /// Run until `until_us`, calling `each` with the controller after every report.
        pub fn run_observed<C: Controller + ?Sized>(
            &mut self,
            ctl: &mut C,
            until_us: f64,
            mut each: impl FnMut(&C, &Step),
        ) {
            let ser = self.mss as f64 / self.rate * 1e6;
            while self.now < until_us {
                let inflight = self.flight.len() as u64 * self.mss;
                let can_send = inflight + self.mss <= self.cwnd.max(self.mss);
                let send_at = if can_send {
                    self.now.max(if self.pacing > 0.0 {
                        self.pace_next
                    } else {
                        0.0
                    })
                } else {
                    f64::INFINITY
                };
                let ack_at = self.flight.front().map_or(f64::INFINITY, |p| p.ack);
                if send_at.is_infinite() && ack_at.is_infinite() {
                    break;
                }
                if send_at <= ack_at {
                    self.now = send_at;
                    if self.flight.is_empty() {
                        self.first_sent = self.now;
                        self.delivered_time = self.now;
                    }
                    let arrive = self.now + self.base_us / 2.0;
                    let dep = arrive.max(self.last_dep) + ser;
                    self.last_dep = dep;
                    self.flight.push_back(Pkt {
                        sent: self.now,
                        arrive,
                        ack: dep + self.base_us / 2.0,
                        delivered: self.delivered,
                        delivered_time: self.delivered_time,
                        first_sent: self.first_sent,
                    });
                    if self.pacing > 0.0 {
                        self.pace_next =
                            self.pace_next.max(self.now) + self.mss as f64 / self.pacing * 1e6;
                    }
                    continue;
                }
                self.now = ack_at;
                let p = self.flight.pop_front().expect("an ACK is due");
                self.delivered += self.mss;
                self.delivered_time = self.now;
                let rtt = (self.now - p.sent).round().max(1.0) as u64;
                let a = &mut self.acc;
                a.acked_bytes += self.mss;
                a.acked_packets += 1;
                a.rtt_min_us = if a.rtt_samples == 0 {
                    rtt
                } else {
                    a.rtt_min_us.min(rtt)
                };
                a.rtt_max_us = a.rtt_max_us.max(rtt);
                a.rtt_last_us = rtt;
                a.rtt_samples += 1;
                self.rtt_sum += rtt;
                let data = (self.delivered - p.delivered) as f64;
                let ack_elapsed = self.now - p.delivered_time;
                let send_elapsed = p.sent - p.first_sent;
                // The delivery-rate sample as the datapaths give it: over the longer of the
                // send and ACK intervals; the report keeps the last and the largest.
                let elapsed = ack_elapsed.max(send_elapsed);
                if elapsed > 0.0 {
                    a.delivery_rate = (data / elapsed * 1e6) as u64;
                    a.delivery_rate_max = a.delivery_rate_max.max(a.delivery_rate);
                }
                self.first_sent = p.sent;
                if self.now - self.last_report >= self.period_us {
                    let mut m = std::mem::take(&mut self.acc);
                    m.now_us = self.now as u64;
                    m.interval_us = (self.now - self.last_report) as u64;
                    m.rtt_mean_us = self.rtt_sum / m.rtt_samples.max(1);
                    m.bytes_in_flight = self.flight.len() as u64 * self.mss;
                    m.packets_in_flight = self.flight.len() as u64;
                    m.bytes_pending = u64::from(u32::MAX);
                    m.cwnd = self.cwnd;
                    m.rate = self.pacing as u64;
                    m.mss = self.mss as u32;
                    self.acc.delivery_rate = m.delivery_rate;
                    self.rtt_sum = 0;
                    self.last_report = self.now;
                    let d = ctl.on_measurement(&m);
                    self.apply(&d);
                    let queued = self.queued_at(self.now - self.base_us / 2.0);
                    each(ctl, &Step { m, queued });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sacked_bytes_count_once_when_sacked() {
        let mut d = DeliveryCounter::default();
        let m = |acked: u64, sacked: u64| Measurement {
            acked_bytes: acked,
            sacked_bytes: sacked,
            ..Measurement::default()
        };
        assert_eq!(d.delivered(&m(10_000, 0)), 10_000);
        // A hole: later packets are SACKed.
        assert_eq!(d.delivered(&m(0, 5_000)), 5_000);
        assert_eq!(d.delivered(&m(0, 3_000)), 3_000);
        // The retransmission fills the hole: the cumulative ACK covers the 8000 SACKed bytes
        // and 1000 new ones.
        assert_eq!(d.delivered(&m(9_000, 0)), 1_000);
        assert_eq!(d.delivered(&m(2_000, 0)), 2_000);
    }

    #[test]
    fn parameters_are_clamped() {
        assert_eq!(
            [count_param(0.0), count_param(3.7), count_param(f64::NAN)],
            [1, 3, 1]
        );
        assert_eq!(positive_param(-1.0, 2.0), 2.0);
        assert_eq!(positive_param(f64::INFINITY, 2.0), 2.0);
        assert_eq!(positive_param(0.5, 2.0), 0.5);
    }

    #[test]
    fn max_filter_keeps_the_largest_sample_of_the_window() {
        let mut f = WindowedFilter::max(10);
        assert_eq!(f.get(), None);
        f.update(0, 5);
        f.update(1, 9);
        f.update(2, 7);
        assert_eq!(f.get(), Some(9));
        // 9 (key 1) is still in the window at key 10, gone at key 11.
        f.update(10, 3);
        assert_eq!(f.get(), Some(9));
        f.update(11, 2);
        assert_eq!(f.get(), Some(7), "the next largest of keys 2..=11");
        f.update(12, 1);
        assert_eq!(f.get(), Some(3));
        // A larger sample replaces everything older at once.
        f.update(13, 100);
        assert_eq!((f.get(), f.len()), (Some(100), 1));
    }

    #[test]
    fn min_filter_matches_a_brute_force_window() {
        let mut f = WindowedFilter::min(7);
        let mut seen: Vec<(u64, u64)> = vec![];
        let mut x: u64 = 12345;
        let mut key = 0;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            key += (x >> 60) % 3; // repeated keys too
            let v = (x >> 33) % 1000;
            f.update(key, v);
            seen.push((key, v));
            let want = seen
                .iter()
                .filter(|(k, _)| key - k < 7)
                .map(|(_, v)| *v)
                .min();
            assert_eq!(f.get(), want, "at key {key}");
            assert!(f.len() <= 7 * 3 + 1);
        }
    }

    #[test]
    fn the_newest_sample_outlives_the_window_and_the_window_can_change() {
        let mut f = WindowedFilter::min(100);
        f.update(0, 50);
        f.expire(1_000);
        assert_eq!(f.get(), Some(50), "the only sample is kept");
        f.update(1_000, 70);
        assert_eq!(f.get(), Some(70));
        f.set_window(5);
        f.update(1_003, 80);
        assert_eq!(f.get(), Some(70));
        f.update(1_005, 90);
        assert_eq!(f.get(), Some(80));
        assert_eq!(f.window(), 5);
        f.reset();
        assert!(f.is_empty());
    }

    #[test]
    fn rounds_end_when_the_data_in_flight_at_their_start_is_delivered() {
        let mut r = RoundCounter::new();
        assert!(!r.on_report(0, 10_000), "nothing acknowledged: no round");
        assert!(
            r.on_report(1_000, 10_000),
            "the first acknowledgement starts round 1"
        );
        assert_eq!(r.rounds(), 1);
        // Round 1 ends when 1_000 + 10_000 bytes have been delivered.
        assert!(!r.on_report(4_000, 10_000));
        assert!(!r.on_report(5_999, 10_000));
        assert!(r.on_report(1, 20_000));
        assert_eq!((r.rounds(), r.delivered()), (2, 11_000));
        // A restart ends the round at the data in flight now.
        r.restart(500);
        assert!(!r.on_report(499, 500));
        assert!(r.on_report(1, 500));
        assert_eq!(r.rounds(), 3);
    }

    #[test]
    fn srtt_smooths_with_gain_one_eighth() {
        let mut s = Srtt::new();
        assert_eq!(s.update(0), 0);
        assert_eq!(s.update(800), 800);
        assert_eq!(s.update(1_600), 900);
        assert_eq!(s.update(0), 900, "a report without samples keeps it");
    }

    #[test]
    fn report_clock_asks_again_only_after_a_real_change() {
        let mut c = ReportClock::new(4);
        assert_eq!(c.period(0), None);
        assert_eq!(c.period(40_000), Some(ReportPeriod::Micros(10_000)));
        assert_eq!(c.period(44_000), None, "11_000 is within 1/8 of 10_000");
        assert_eq!(c.period(46_000), Some(ReportPeriod::Micros(11_500)));
        assert_eq!(c.period(40), Some(ReportPeriod::Micros(MIN_REPORT_US)));
        assert_eq!(c.asked_us(), MIN_REPORT_US);
    }
}
