//! LEDBAT (RFC 6817) as a CCP algorithm: a less-than-best-effort window controller that keeps
//! the queueing delay it adds near a target and yields to standard TCP.
//!
//! # The algorithm as built
//!
//! - **Delays from RTTs.** RFC 6817 measures one-way delays (receiver timestamps). CCP reports
//!   RTTs, not one-way delays, so this module works on the RTT instead: the *base delay* is the
//!   minimum RTT, the *current delay* the smallest RTT sample of the report (RFC 6817's MIN
//!   filter of recent delay samples, here over one report interval, one smoothed RTT by default), and the
//!   queueing delay is their difference. This equals the one-way queueing delay of the data path
//!   as long as the reverse (ACK) path does not queue; a queue on the ACK path is counted too,
//!   so LEDBAT here yields to reverse-path congestion as well, which the RFC's one-way
//!   measurement would not.
//! - **Base delay** (RFC 6817's `update_base_delay`): the minimum of one-minute buckets,
//!   `base-history` = 10 of them, the newest holding the minimum of the current minute (minutes
//!   counted from agent time 0). Each report's current delay enters the newest bucket; when a new
//!   minute begins, one bucket per elapsed minute is appended (minutes without samples stay
//!   empty) and the oldest beyond `base-history` are dropped. The base delay is thus the minimum
//!   RTT over the last 9 to 10 minutes: the RFC's 10-minute window, which lets the base follow a
//!   route change within ten minutes.
//! - **Window** (RFC 6817's sender pseudocode): for every report that acknowledges data, outside a loss epoch,
//!   `off_target = (TARGET − queuing_delay) / TARGET` and
//!   `cwnd += GAIN · off_target · acked_bytes · MSS / cwnd` — the RFC's per-ACK rule applied to the
//!   report's bytes at once with the window at the report's start, so a per-RTT report moves the
//!   window by `GAIN · off_target` MSS, as the per-ACK rule does over one RTT. `off_target` is not
//!   bounded below (the RFC's pseudocode does not bound it): a queue far above the target shrinks
//!   the window by several MSS per RTT.
//! - **Allowed increase** (same pseudocode): the window may not grow beyond
//!   `flightsize + ALLOWED_INCREASE · MSS`, where `flightsize` is the data in flight before the
//!   report's last ACK: the report's `bytes_in_flight` (sampled after that ACK) plus the bytes one
//!   ACK acknowledges on average in the report (`acked_bytes / rtt_samples`). The cap only stops
//!   growth; unlike the RFC's `cwnd = min(cwnd, max_allowed_cwnd)` it never lowers the window,
//!   because in CCP the in-flight gauge is one sample taken after an ACK, while the agent's
//!   latest window may not have reached the datapath yet: lowering the window on it would shrink a
//!   window-limited flow on noise. An application-limited flow still stops growing.
//! - **Loss**: `cwnd = min(cwnd, max(cwnd/2, MIN_CWND · MSS))` once per RTT (the RFC's rule: a
//!   loss never raises the one-MSS window a timeout left), and the window is held during that
//!   RTT, as Reno's recovery; the loss epoch is [`WindowCore`]'s.
//! - **Timeout**: `cwnd = 1 MSS` (the RFC's "cwnd = 1 * MSS" when no ACK arrives for a CTO).
//! - **Floor**: `cwnd ≥ MIN_CWND · MSS` except for the timeout window.
//! - **No slow start**: RFC 6817's pseudocode has none, so the window grows from `INIT_CWND` by at
//!   most GAIN MSS per RTT.
//!
//! `TARGET` is 100 ms by default (the RFC's maximum); datacenter recipes set `target=5ms`.
//! `GAIN` is clamped to [0, 1] (RFC 6817: GAIN MUST be ≤ 1, so LEDBAT never ramps up faster
//! than Reno).
//!
//! # Calibration (PolyCC)
//!
//! [`Fused::Cwnd`] sets the window (floored at `MIN_CWND · MSS`); [`Fused::Rate`] becomes
//! `rate · rtt` with the last mean RTT and is ignored before any RTT sample. The base-delay
//! history and the loss epoch are kept.
//!
//! Time is the agent's [`Measurement::now_us`], never the wall clock.

use std::collections::VecDeque;

use crate::controller::{ControlMode, Controller, Decision, FlowStart, Fused, Measurement};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window::{MAX_CWND, WindowCore, WindowEvent, packets};

/// Length of one base-history bucket, µs (RFC 6817: one minute).
pub const BUCKET_US: u64 = 60_000_000;

/// Every parameter of LEDBAT, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "target",
        unit: Unit::Micros,
        default: 100_000.0,
        help: "queueing delay the flow aims at (5ms in datacenter recipes)",
        source: "RFC 6817 parameter values (TARGET = 100 ms, MUST NOT be more)",
    },
    ParamSpec {
        key: "gain",
        unit: Unit::Number,
        default: 1.0,
        help: "window change per RTT, in MSS, at off_target = ±1 (clamped to at most 1)",
        source: "RFC 6817 sender pseudocode and parameter values (GAIN = 1, MUST be <= 1)",
    },
    ParamSpec {
        key: "allowed-increase",
        unit: Unit::Packets,
        default: 1.0,
        help: "the window may exceed the data in flight by at most this many MSS",
        source: "RFC 6817 parameter values (ALLOWED_INCREASE SHOULD be 1)",
    },
    ParamSpec {
        key: "init-cwnd",
        unit: Unit::Packets,
        default: 2.0,
        help: "initial congestion window",
        source: "RFC 6817 parameter values (INIT_CWND SHOULD be 2)",
    },
    ParamSpec {
        key: "min-cwnd",
        unit: Unit::Packets,
        default: 2.0,
        help: "floor of the window (not of the 1-MSS timeout window)",
        source: "RFC 6817 parameter values (MIN_CWND SHOULD be 2)",
    },
    ParamSpec {
        key: "base-history",
        unit: Unit::Count,
        default: 10.0,
        help: "one-minute buckets of the base (minimum) delay history",
        source: "RFC 6817 parameter values (BASE_HISTORY SHOULD be 10, one-minute buckets)",
    },
];

/// LEDBAT, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "ledbat",
    summary: "LEDBAT (RFC 6817): less-than-best-effort; steers queueing delay (RTT - min RTT) to a target, halves on loss",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Ledbat::new(LedbatConfig::from_params(params)))
}

/// LEDBAT's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct LedbatConfig {
    /// TARGET, µs (≥ 1).
    pub target_us: u64,
    /// GAIN, in [0, 1].
    pub gain: f64,
    /// ALLOWED_INCREASE, MSS (≥ 0).
    pub allowed_increase: f64,
    /// INIT_CWND, packets (≥ 1).
    pub init_cwnd_pkts: u32,
    /// MIN_CWND, packets (≥ 1).
    pub min_cwnd_pkts: u32,
    /// BASE_HISTORY, one-minute buckets (≥ 1).
    pub base_history: usize,
}

impl Default for LedbatConfig {
    fn default() -> Self {
        LedbatConfig::from_params(&ParamSet::defaults("ledbat", PARAMS))
    }
}

impl LedbatConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        LedbatConfig {
            target_us: p.get("target").clamp(1.0, u64::MAX as f64) as u64,
            gain: p.get("gain").clamp(0.0, 1.0),
            allowed_increase: p.get("allowed-increase").max(0.0),
            init_cwnd_pkts: packets(p.get("init-cwnd")),
            min_cwnd_pkts: packets(p.get("min-cwnd")),
            base_history: p.get("base-history").clamp(1.0, 1e6) as usize,
        }
    }
}

/// The minimum delay over the last `len` one-minute buckets (RFC 6817's base_history).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseDelay {
    len: usize,
    /// Minimum of each minute, oldest first; `None` for a minute without samples.
    buckets: VecDeque<Option<u64>>,
    /// The minute (`now / BUCKET_US`) of the newest bucket.
    minute: u64,
}

impl BaseDelay {
    /// An empty history of `len` buckets (at least 1).
    pub fn new(len: usize) -> Self {
        BaseDelay {
            len: len.max(1),
            buckets: VecDeque::new(),
            minute: 0,
        }
    }

    /// Take a delay sample (µs) at `now_us`.
    pub fn update(&mut self, now_us: u64, delay_us: u64) {
        let minute = now_us / BUCKET_US;
        if self.buckets.is_empty() {
            self.minute = minute;
            self.buckets.push_back(Some(delay_us));
            return;
        }
        if minute > self.minute {
            let elapsed = (minute - self.minute).min(self.len as u64) as usize;
            for _ in 0..elapsed {
                self.buckets.push_back(None);
            }
            while self.buckets.len() > self.len {
                self.buckets.pop_front();
            }
            self.minute = minute;
        }
        if let Some(last) = self.buckets.back_mut() {
            *last = Some(last.map_or(delay_us, |d| d.min(delay_us)));
        }
    }

    /// The base delay, µs (`None` before any sample).
    pub fn get(&self) -> Option<u64> {
        self.buckets.iter().flatten().min().copied()
    }
}

/// A LEDBAT controller for one flow.
#[derive(Clone, Debug)]
pub struct Ledbat {
    cfg: LedbatConfig,
    /// MSS, mean RTT, loss epoch and timeout state.
    core: WindowCore,
    /// Congestion window, bytes (fractional).
    cwnd: f64,
    base: BaseDelay,
    /// The last queueing delay computed, µs.
    queuing_delay_us: Option<u64>,
    /// The queueing delay has reached the target, or a loss has cut the window (or held it
    /// below the floor after a timeout), at least once: the window has found the path's limit.
    settled: bool,
}

impl Ledbat {
    /// A controller with `cfg`, before its flow starts (assumes a 1448-byte MSS until then).
    pub fn new(cfg: LedbatConfig) -> Self {
        let core = WindowCore::new();
        let cwnd = core.window_bytes(cfg.init_cwnd_pkts.max(cfg.min_cwnd_pkts)) as f64;
        Ledbat {
            base: BaseDelay::new(cfg.base_history),
            cfg,
            core,
            cwnd,
            queuing_delay_us: None,
            settled: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LedbatConfig {
        &self.cfg
    }

    /// The base delay (minimum RTT over the base history), µs.
    pub fn base_delay_us(&self) -> Option<u64> {
        self.base.get()
    }

    /// The queueing delay of the last report that carried RTT samples, µs.
    pub fn queuing_delay_us(&self) -> Option<u64> {
        self.queuing_delay_us
    }

    /// `(TARGET − queuing_delay) / TARGET`.
    pub fn off_target(&self, queuing_delay_us: u64) -> f64 {
        let target = self.cfg.target_us as f64;
        (target - queuing_delay_us as f64) / target
    }

    fn mss(&self) -> f64 {
        self.core.mss() as f64
    }

    fn floor(&self) -> f64 {
        self.core.window_bytes(self.cfg.min_cwnd_pkts) as f64
    }

    /// The delay-based update of one report that acknowledged `acked` bytes.
    fn grow(&mut self, m: &Measurement, acked: u64) {
        if m.rtt_samples == 0 || m.rtt_min_us == 0 {
            return;
        }
        let current = m.rtt_min_us;
        self.base.update(m.now_us, current);
        let base = self.base.get().unwrap_or(current);
        let queuing = current.saturating_sub(base);
        self.queuing_delay_us = Some(queuing);
        self.settled |= queuing >= self.cfg.target_us;
        if acked == 0 {
            return;
        }
        let cwnd = self.cwnd;
        let change = self.cfg.gain * self.off_target(queuing) * acked as f64 * self.mss() / cwnd;
        let mut next = cwnd + change;
        if change > 0.0 {
            let per_ack = m.acked_bytes.div_ceil(m.rtt_samples.max(1));
            let flight = m.bytes_in_flight.saturating_add(per_ack) as f64;
            let allowed = flight + self.cfg.allowed_increase * self.mss();
            next = next.min(cwnd.max(allowed));
        }
        self.cwnd = next.clamp(self.floor(), MAX_CWND as f64);
    }
}

impl Controller for Ledbat {
    fn name(&self) -> &'static str {
        "ledbat"
    }

    fn mode(&self) -> ControlMode {
        ControlMode::Window
    }

    fn on_start(&mut self, start: &FlowStart) -> Decision {
        *self = Ledbat::new(self.cfg.clone());
        self.core.start(start);
        self.cwnd = self
            .core
            .window_bytes(self.cfg.init_cwnd_pkts.max(self.cfg.min_cwnd_pkts))
            as f64;
        Decision::cwnd(self.cwnd())
    }

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        match self.core.on_measurement(m) {
            WindowEvent::Timeout { .. } => self.cwnd = self.core.loss_window() as f64,
            WindowEvent::Loss => {
                // Never raised by a loss: after a timeout's one-MSS window the floor would.
                self.cwnd = self.cwnd.min((self.cwnd / 2.0).max(self.floor()));
                self.settled = true;
            }
            WindowEvent::Grow(acked) => self.grow(m, acked),
            WindowEvent::Hold => {}
        }
        Decision::cwnd(self.cwnd())
    }

    fn calibrate(&mut self, fused: Fused) {
        if let Some(w) = self.core.fused_window::<f64>(fused) {
            self.cwnd = w.clamp(self.floor(), MAX_CWND as f64);
        }
    }

    fn cwnd(&self) -> u32 {
        self.cwnd.round().clamp(0.0, MAX_CWND as f64) as u32
    }

    fn rate(&self) -> Option<u64> {
        None
    }

    /// LEDBAT has no slow start; once its queueing delay has reached the target or a loss has
    /// halved it, its window is what the path holds, and a successor (`set-algorithm`) takes it
    /// as a slow-start threshold rather than doubling it.
    fn ssthresh(&self) -> Option<u32> {
        self.settled.then(|| self.cwnd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{self, MSS, START, started};

    const BASE: u64 = 20_000;
    const MIN: u64 = BUCKET_US;

    fn ledbat(cfg: LedbatConfig) -> Ledbat {
        started(Ledbat::new(cfg))
    }

    /// A report at `now` acknowledging `acked` bytes whose smallest RTT sample is `rtt`, with
    /// the window's worth minus `acked` still in flight.
    fn report(l: &Ledbat, now: u64, acked: u64, rtt: u64) -> Measurement {
        Measurement {
            bytes_in_flight: u64::from(l.cwnd()).saturating_sub(MSS),
            ..test_support::report(now, acked, 0, rtt)
        }
    }

    /// One per-RTT report acknowledging the whole window at RTT `rtt`; returns the new time.
    fn per_rtt(l: &mut Ledbat, now: u64, rtt: u64) -> u64 {
        let now = now + rtt;
        let m = report(l, now, u64::from(l.cwnd()), rtt);
        l.on_measurement(&m);
        now
    }

    #[test]
    fn starts_with_two_packets_and_no_slow_start() {
        let mut l = Ledbat::new(LedbatConfig::default());
        let d = l.on_start(&START);
        assert_eq!(d.cwnd, Some(2 * MSS as u32));
        assert_eq!(
            (l.name(), l.mode(), l.rate()),
            ("ledbat", ControlMode::Window, None)
        );
        // With no queueing delay the window grows by GAIN = 1 MSS per RTT, no faster.
        let mut now = 0;
        for k in 1..=10 {
            now = per_rtt(&mut l, now, BASE);
            assert_eq!(u64::from(l.cwnd()), (2 + k) * MSS, "after {k} RTTs");
        }
        assert_eq!(l.base_delay_us(), Some(BASE));
        assert_eq!(l.queuing_delay_us(), Some(0));
    }

    #[test]
    fn off_target_arithmetic() {
        let cfg = LedbatConfig {
            target_us: 5_000,
            ..LedbatConfig::default()
        };
        let mut l = ledbat(cfg);
        assert_eq!(l.off_target(0), 1.0);
        assert_eq!(l.off_target(2_500), 0.5);
        assert_eq!(l.off_target(5_000), 0.0);
        assert_eq!(l.off_target(15_000), -2.0);
        l.calibrate(Fused::Cwnd(40 * MSS as u32));
        let mut now = per_rtt(&mut l, 0, BASE); // base delay 20 ms, no queue: 40 → 41 MSS
        assert_eq!(u64::from(l.cwnd()), 41 * MSS);
        // Queueing delay 2.5 ms: off_target 1/2; a report of 10 MSS acknowledged changes the
        // window by 0.5 · 10 · MSS · MSS / (41 MSS) = 5/41 MSS.
        now += BASE;
        let m = report(&l, now, 10 * MSS, BASE + 2_500);
        l.on_measurement(&m);
        assert_eq!(l.queuing_delay_us(), Some(2_500));
        let want = 41.0 * MSS as f64 + 0.5 * 10.0 * MSS as f64 / 41.0;
        assert_eq!(f64::from(l.cwnd()), want.round());
        // At the target nothing moves; at three times the target a whole window of ACKs takes
        // 2 MSS off (off_target = −2).
        let w = l.cwnd();
        now += BASE;
        let m = report(&l, now, u64::from(w), BASE + 5_000);
        l.on_measurement(&m);
        assert_eq!(l.cwnd(), w);
        now += BASE;
        let m = report(&l, now, u64::from(w), BASE + 15_000);
        l.on_measurement(&m);
        assert!(
            (f64::from(l.cwnd()) - (f64::from(w) - 2.0 * MSS as f64)).abs() <= 1.0,
            "{} vs {w} - 2 MSS",
            l.cwnd()
        );
    }

    #[test]
    fn gain_scales_the_change_and_is_capped_at_one() {
        let mut p = ParamSet::defaults("ledbat", PARAMS);
        p.set(PARAMS, "gain", "0.25").unwrap();
        let mut l = ledbat(LedbatConfig::from_params(&p));
        l.calibrate(Fused::Cwnd(40 * MSS as u32));
        let mut now = 0;
        for _ in 0..4 {
            now = per_rtt(&mut l, now, BASE);
        }
        assert_eq!(u64::from(l.cwnd()), 41 * MSS);
        p.set(PARAMS, "gain", "4").unwrap();
        assert_eq!(LedbatConfig::from_params(&p).gain, 1.0);
    }

    #[test]
    fn growth_is_capped_at_flight_plus_allowed_increase() {
        let mut l = ledbat(LedbatConfig::default());
        l.calibrate(Fused::Cwnd(40 * MSS as u32));
        per_rtt(&mut l, 0, BASE);
        // Application-limited: only 10 MSS were in flight before the last ACK, far below the
        // 40-MSS window. No growth; and the window is not lowered to the flight either.
        let mut m = report(&l, 2 * BASE, 10 * MSS, BASE);
        m.bytes_in_flight = 9 * MSS;
        m.rtt_samples = 10;
        let w = l.cwnd();
        l.on_measurement(&m);
        assert_eq!(l.cwnd(), w);
        // Window-limited but the increase would overshoot flight + 1 MSS: capped there.
        let mut l = ledbat(LedbatConfig::default());
        l.calibrate(Fused::Cwnd(10 * MSS as u32));
        let mut m = report(&l, BASE, 10 * MSS, BASE);
        m.bytes_in_flight = 9 * MSS; // 10 MSS in flight before the last ACK of 1 MSS
        m.rtt_samples = 10;
        l.on_measurement(&m);
        assert_eq!(u64::from(l.cwnd()), 11 * MSS);
        let mut m = report(&l, 2 * BASE, 11 * MSS, BASE);
        m.bytes_in_flight = 9 * MSS; // 10.5 MSS before the last ACK: cap 11.5 MSS
        m.rtt_samples = 2;
        m.acked_bytes = 3 * MSS;
        l.on_measurement(&m);
        // The change 3 MSS · MSS / 11 MSS = 0.27 MSS is below the cap: allowed.
        assert_eq!(
            f64::from(l.cwnd()),
            (11.0 * MSS as f64 + 3.0 * MSS as f64 / 11.0).round()
        );
    }

    #[test]
    fn loss_halves_once_per_rtt_and_timeout_sets_one_mss() {
        let mut l = ledbat(LedbatConfig::default());
        l.calibrate(Fused::Cwnd(40 * MSS as u32));
        let now = per_rtt(&mut l, 0, BASE);
        let w = f64::from(l.cwnd());
        let mut m = report(&l, now + 10, 5 * MSS, BASE);
        m.lost_packets = 3;
        l.on_measurement(&m);
        assert_eq!(f64::from(l.cwnd()), (w / 2.0).round());
        // Within the RTT: no second halving, no growth.
        for dt in [100, 10_000, BASE - 1] {
            let mut m = report(&l, now + 10 + dt, 5 * MSS, BASE);
            m.lost_packets = 1;
            l.on_measurement(&m);
            assert_eq!(f64::from(l.cwnd()), (w / 2.0).round(), "+{dt}");
        }
        // Floor at MIN_CWND.
        let mut t = now + 10;
        for _ in 0..10 {
            t += BASE;
            let mut m = report(&l, t, 0, BASE);
            m.lost_packets = 1;
            l.on_measurement(&m);
        }
        assert_eq!(u64::from(l.cwnd()), 2 * MSS);
        let mut m = report(&l, t + BASE, 0, BASE);
        m.timeout = true;
        l.on_measurement(&m);
        assert_eq!(u64::from(l.cwnd()), MSS);
        // A loss of a new epoch after the timeout does not raise the window to the floor (the
        // RFC's outer `min(cwnd, ...)`).
        let mut m = report(&l, t + 3 * BASE, 0, BASE);
        m.lost_packets = 1;
        l.on_measurement(&m);
        assert_eq!(u64::from(l.cwnd()), MSS);
    }

    #[test]
    fn base_delay_is_the_minimum_over_ten_one_minute_buckets() {
        let mut b = BaseDelay::new(10);
        assert_eq!(b.get(), None);
        b.update(0, 50);
        b.update(30_000_000, 70);
        assert_eq!(b.get(), Some(50));
        // A higher delay every minute afterwards: the 50 µs of minute 0 stays the base while
        // minute 0 is one of the last ten, i.e. through minute 9.
        for minute in 1..=9 {
            b.update(minute * MIN + 1, 80);
            assert_eq!(b.get(), Some(50), "minute {minute}");
        }
        b.update(10 * MIN, 80);
        assert_eq!(b.get(), Some(80), "minute 0 has left the window");
        // A lower sample is the base at once.
        b.update(10 * MIN + 5, 30);
        assert_eq!(b.get(), Some(30));
        // A long silence (idle flow) expires everything before it.
        b.update(40 * MIN, 90);
        assert_eq!(b.get(), Some(90));
        // A short history follows faster.
        let mut b = BaseDelay::new(1);
        b.update(0, 10);
        b.update(MIN, 20);
        assert_eq!(b.get(), Some(20));
    }

    #[test]
    fn a_rising_base_is_seen_after_the_history_and_the_window_recovers() {
        let cfg = LedbatConfig {
            target_us: 5_000,
            base_history: 2,
            ..LedbatConfig::default()
        };
        let mut l = ledbat(cfg);
        l.calibrate(Fused::Cwnd(30 * MSS as u32));
        let mut now = per_rtt(&mut l, 0, BASE);
        let w = l.cwnd();
        // The path's delay rises by 10 ms (a route change): it looks like 2·TARGET of queue,
        // and the window shrinks, until the old minimum has left the two-bucket history.
        now = per_rtt(&mut l, now, BASE + 10_000);
        assert!(l.cwnd() < w);
        assert_eq!(l.queuing_delay_us(), Some(10_000));
        assert_eq!(l.base_delay_us(), Some(BASE));
        // Two minutes later the old minimum is gone: no queue, growth again.
        let w = l.cwnd();
        per_rtt(&mut l, now + 2 * MIN, BASE + 10_000);
        assert_eq!(l.base_delay_us(), Some(BASE + 10_000));
        assert_eq!(l.queuing_delay_us(), Some(0));
        assert_eq!(u64::from(l.cwnd()), u64::from(w) + MSS);
    }

    #[test]
    fn reports_without_rtt_samples_or_acks_change_nothing() {
        let mut l = ledbat(LedbatConfig::default());
        l.calibrate(Fused::Cwnd(10 * MSS as u32));
        let mut m = report(&l, 1000, 5 * MSS, BASE);
        m.rtt_samples = 0;
        m.rtt_min_us = 0;
        l.on_measurement(&m);
        assert_eq!(u64::from(l.cwnd()), 10 * MSS);
        assert_eq!(l.base_delay_us(), None);
        let m = report(&l, 2000, 0, BASE);
        l.on_measurement(&m);
        assert_eq!(u64::from(l.cwnd()), 10 * MSS);
        assert_eq!(
            l.base_delay_us(),
            Some(BASE),
            "an RTT sample without ACKs still counts"
        );
    }

    #[test]
    fn calibrate_sets_the_window() {
        let mut l = ledbat(LedbatConfig::default());
        l.calibrate(Fused::Cwnd(100));
        assert_eq!(u64::from(l.cwnd()), 2 * MSS, "floored");
        l.calibrate(Fused::Rate(1_000_000));
        assert_eq!(u64::from(l.cwnd()), 2 * MSS, "no RTT yet");
        per_rtt(&mut l, 0, BASE);
        l.calibrate(Fused::Rate(MSS * 1000)); // 20 ms of it: 20 MSS
        assert_eq!(u64::from(l.cwnd()), 20 * MSS);
    }

    #[test]
    fn params_override_defaults() {
        let mut p = ParamSet::defaults("ledbat", PARAMS);
        p.set(PARAMS, "target", "5ms").unwrap();
        p.set(PARAMS, "allowed-increase", "2").unwrap();
        p.set(PARAMS, "init-cwnd", "4").unwrap();
        p.set(PARAMS, "min-cwnd", "3").unwrap();
        p.set(PARAMS, "base-history", "3").unwrap();
        assert!(p.set(PARAMS, "target", "5pkts").is_err());
        let cfg = LedbatConfig::from_params(&p);
        assert_eq!(
            cfg,
            LedbatConfig {
                target_us: 5_000,
                gain: 1.0,
                allowed_increase: 2.0,
                init_cwnd_pkts: 4,
                min_cwnd_pkts: 3,
                base_history: 3,
            }
        );
        let mut c = (SPEC.build)(&p);
        let d = c.on_start(&FlowStart {
            mss: 1000,
            init_cwnd: 10_000,
            now_us: 0,
        });
        assert_eq!(d.cwnd, Some(4000));
    }

    #[test]
    fn spec_declares_every_parameter_with_a_source() {
        assert_eq!(SPEC.name, "ledbat");
        let keys: Vec<&str> = SPEC.params.iter().map(|p| p.key).collect();
        assert_eq!(
            keys,
            [
                "target",
                "gain",
                "allowed-increase",
                "init-cwnd",
                "min-cwnd",
                "base-history"
            ]
        );
        let d = LedbatConfig::default();
        assert_eq!((d.target_us, d.gain, d.base_history), (100_000, 1.0, 10));
    }
}
