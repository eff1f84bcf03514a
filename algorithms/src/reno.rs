//! TCP NewReno as a CCP algorithm: slow start, additive increase, multiplicative decrease once per
//! loss epoch (RFC 5681, RFC 6582, initial window per RFC 6928).
//!
//! # The algorithm as built
//!
//! The controller sees one aggregated [`Measurement`] per report (per ACK, per RTT or at a fixed
//! period) and applies the per-ACK rules of RFC 5681 to the report as a whole, counting bytes
//! (RFC 3465 "appropriate byte counting", which RFC 5681 §3.1 allows), so the window grows the same
//! whether the datapath reports every ACK or once per RTT:
//!
//! - **Slow start** (`cwnd < ssthresh`): `cwnd += acked_bytes`, so a window's worth of ACKs doubles
//!   the window every RTT. A report that crosses `ssthresh` spends only what it takes to reach
//!   `ssthresh` in slow start; the rest counts towards congestion avoidance. (RFC 3465's per-ACK
//!   limit L does not apply: a report aggregates many ACKs.)
//! - **Congestion avoidance** (`cwnd ≥ ssthresh`): one MSS for every `cwnd` bytes acknowledged, i.e.
//!   `cwnd += mss · acked / cwnd`, one MSS per RTT. The fractional part is kept exactly in a byte
//!   counter that carries over between reports, so per-ACK and per-RTT reports give the same window.
//! - **Loss** (`lost_packets > 0`): `ssthresh = max(beta · cwnd, min_cwnd · mss)`, `cwnd = ssthresh`.
//!   RFC 5681 halves FlightSize; like Linux this uses `cwnd`, which the datapath keeps full. As in
//!   NewReno's fast recovery (RFC 6582) the reduction happens once per loss epoch: further losses
//!   are ignored, and the window is held (no growth), until one RTT has passed since the reduction.
//!   The RTT is the report's mean RTT sample (else its last sample, else the last RTT seen, else
//!   the report interval).
//! - **Timeout** (`timeout`): `ssthresh = max(beta · cwnd, min_cwnd · mss)` and `cwnd` = the RFC 5681
//!   loss window of **one MSS** (deliberately below the `min-cwnd` floor, which bounds `ssthresh` and
//!   loss reductions only). Slow start then restarts at once (no hold). `ssthresh` is not lowered
//!   again by a timeout that repeats before any data is acknowledged (RFC 5681 §3.1: "ssthresh is
//!   held constant"), nor by one inside the loss epoch of a reduction already made.
//! - **Floor**: except for the timeout loss window, `cwnd ≥ min_cwnd · mss`.
//! - **Only while limited** (`limited-growth`, on by default): a report in which the window did not
//!   limit the flow (its application, its receiver or a pacing rate did) grows nothing, as Linux's
//!   `tcp_is_cwnd_limited` and RFC 7661 ask; see [`crate::window`] for the test.
//!
//! # Calibration (PolyCC)
//!
//! [`Fused::Cwnd`](crate::controller::Fused::Cwnd) sets `cwnd` to the fused value (floored at `min_cwnd · mss`) and leaves
//! `ssthresh`, the loss epoch and the congestion-avoidance byte counter alone (the counter is only
//! capped below the new window), so Reno continues its own law — slow start below `ssthresh`,
//! one MSS per RTT above — from the fused window. Calibrating to the window Reno would install
//! anyway changes nothing. [`Fused::Rate`](crate::controller::Fused::Rate) is converted to a window with the last mean RTT
//! (`cwnd = rate · rtt`); before any RTT sample it is ignored.
//!
//! # Parameters and units
//!
//! Windows are in bytes internally; `init-cwnd` and `min-cwnd` are in packets (MSS, from
//! [`FlowStart::mss`](crate::controller::FlowStart::mss) and each report's `mss`); `ss-thresh` is in bytes, default `u32::MAX`
//! (4 294 967 295 B, "arbitrarily high" per RFC 5681 §3.1: slow start runs until the first loss).
//! Time is the agent's [`Measurement::now_us`] (µs), never the wall clock, so simulated time works.
//! Out-of-range values are clamped, not rejected: `init-cwnd` and `min-cwnd` to at least 1 packet,
//! `beta` to [0, 1].
//!
//! The loss epoch, the timeout state, the RTT and the MSS are kept by the shared
//! [`WindowCore`]; this module only says how the window reacts.

use crate::controller::{Controller, Decision, Measurement};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window::{self, MAX_CWND, WindowAlgorithm, WindowCore, packets};

/// Every parameter of Reno, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    window::INIT_CWND,
    ParamSpec {
        key: "ss-thresh",
        unit: Unit::Bytes,
        default: u32::MAX as f64,
        help: "initial slow-start threshold; the default (u32::MAX bytes) means slow start until the first loss",
        source: "RFC 5681 §3.1 (initial ssthresh arbitrarily high)",
    },
    window::MIN_CWND,
    ParamSpec {
        key: "beta",
        unit: Unit::Number,
        default: 0.5,
        help: "multiplicative decrease: ssthresh = beta * cwnd on loss or timeout",
        source: "RFC 5681 §3.1 eq. (4) (FlightSize / 2)",
    },
    window::LIMITED_GROWTH,
];

/// Reno, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "reno",
    summary: "TCP NewReno (RFC 5681/6582): slow start, +1 MSS per RTT, beta decrease once per loss epoch",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Reno::new(RenoConfig::from_params(params)))
}

/// Reno's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct RenoConfig {
    /// Initial window, packets (≥ 1).
    pub init_cwnd_pkts: u32,
    /// Initial slow-start threshold, bytes.
    pub ss_thresh: u64,
    /// Floor of `ssthresh` and of the window after a loss, packets (≥ 1).
    pub min_cwnd_pkts: u32,
    /// Multiplicative decrease factor, in [0, 1].
    pub beta: f64,
    /// Grow only while the window limits the flow ([`window::LIMITED_GROWTH`]).
    pub limited_growth: bool,
}

impl Default for RenoConfig {
    fn default() -> Self {
        RenoConfig::from_params(&ParamSet::defaults("reno", PARAMS))
    }
}

impl RenoConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        RenoConfig {
            init_cwnd_pkts: packets(p.get("init-cwnd")),
            ss_thresh: p.get("ss-thresh").clamp(0.0, MAX_CWND as f64) as u64,
            min_cwnd_pkts: packets(p.get("min-cwnd")),
            beta: p.get("beta").clamp(0.0, 1.0),
            limited_growth: p.flag("limited-growth"),
        }
    }
}

/// A NewReno controller for one flow.
#[derive(Clone, Debug)]
pub struct Reno {
    cfg: RenoConfig,
    /// MSS, RTT, loss epoch and timeout state.
    core: WindowCore,
    /// Congestion window, bytes.
    cwnd: u64,
    /// Slow-start threshold, bytes.
    ssthresh: u64,
    /// Bytes acknowledged in congestion avoidance since the last one-MSS increase (< cwnd).
    ca_acked: u64,
}

impl Reno {
    /// A controller with `cfg`, before its flow starts (assumes a 1448-byte MSS until then).
    pub fn new(cfg: RenoConfig) -> Self {
        let mut r = Reno {
            cfg,
            core: WindowCore::new(),
            cwnd: 0,
            ssthresh: 0,
            ca_acked: 0,
        };
        r.reset();
        r
    }

    /// The configuration.
    pub fn config(&self) -> &RenoConfig {
        &self.cfg
    }

    /// The slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// Whether the window is below `ssthresh` (slow start).
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// The MSS in use, bytes.
    pub fn mss(&self) -> u32 {
        self.core.mss() as u32
    }

    fn floor(&self) -> u64 {
        self.core.window_bytes(self.cfg.min_cwnd_pkts)
    }

    fn reduced_ssthresh(&self) -> u64 {
        ((self.cwnd as f64 * self.cfg.beta) as u64).max(self.floor())
    }

    /// A congestion event signalled by other means than loss (DCTCP's ECN marks), in the report
    /// `m`: outside a reduction epoch, reduce as on a loss (`ssthresh = beta·cwnd`) but to the
    /// window `cwnd` (floored), and start the epoch. Returns whether it reduced.
    pub fn congestion_event(&mut self, m: &Measurement, cwnd: u64) -> bool {
        if !self.core.congestion_signal(m) {
            return false;
        }
        self.on_loss();
        self.adopt(cwnd.min(MAX_CWND));
        true
    }
}

impl WindowAlgorithm for Reno {
    type Window = u64;

    fn core_mut(&mut self) -> &mut WindowCore {
        &mut self.core
    }

    /// The window state of a fresh flow (the core's state is reset by `WindowCore::start`).
    fn reset(&mut self) {
        let floor = self.floor();
        self.cwnd = self.core.window_bytes(self.cfg.init_cwnd_pkts).max(floor);
        self.ssthresh = self.cfg.ss_thresh.max(floor);
        self.ca_acked = 0;
    }

    fn on_timeout(&mut self, repeated: bool) {
        if !repeated {
            self.ssthresh = self.reduced_ssthresh();
        }
        self.cwnd = self.core.loss_window();
        self.ca_acked = 0;
    }

    fn on_loss(&mut self) {
        self.ssthresh = self.reduced_ssthresh();
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
    }

    fn grow(&mut self, acked: u64) {
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            let step = acked.min(self.ssthresh - self.cwnd);
            self.cwnd += step;
            acked -= step;
        }
        if acked > 0 {
            self.ca_acked = self.ca_acked.saturating_add(acked);
            while self.ca_acked >= self.cwnd && self.cwnd < MAX_CWND {
                self.ca_acked -= self.cwnd;
                self.cwnd = (self.cwnd + self.core.mss()).min(MAX_CWND);
            }
        }
        self.cwnd = self.cwnd.min(MAX_CWND);
    }

    fn limited_growth(&self) -> bool {
        self.cfg.limited_growth
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn adopt(&mut self, w: u64) {
        let floor = self.floor();
        window::adopt(&mut self.cwnd, &mut self.ca_acked, w, floor);
    }

    fn threshold(&self) -> Option<u64> {
        (self.ssthresh < MAX_CWND).then_some(self.ssthresh)
    }

    fn set_threshold(&mut self, bytes: u64) {
        self.ssthresh = bytes.max(self.floor());
    }
}

impl Controller for Reno {
    window::window_controller!("reno");

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        self.react(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{ControlMode, FlowStart, Fused};
    use crate::test_support::{MSS, START, report, window_full};

    const RTT: u64 = 100_000;

    fn start(r: &mut Reno) -> Decision {
        r.on_start(&START)
    }

    fn reno(cfg: RenoConfig) -> Reno {
        let mut r = Reno::new(cfg);
        start(&mut r);
        r
    }

    fn with_ssthresh(bytes: u64) -> RenoConfig {
        RenoConfig {
            ss_thresh: bytes,
            ..RenoConfig::default()
        }
    }

    /// One per-RTT report acknowledging the whole window; returns the new time.
    fn per_rtt(r: &mut Reno, now: u64) -> u64 {
        let now = now + RTT;
        let w = u64::from(r.cwnd());
        r.on_measurement(&report(now, w, 0, RTT));
        now
    }

    /// One RTT of per-ACK reports (one per MSS of the window at its start); returns the new time.
    fn per_ack_rtt(r: &mut Reno, now: u64) -> u64 {
        let n = u64::from(r.cwnd()) / MSS;
        for i in 1..=n {
            let m = window_full(report(now + RTT * i / n, MSS, 0, RTT), r.cwnd());
            r.on_measurement(&m);
        }
        now + RTT
    }

    #[test]
    fn starts_with_the_initial_window() {
        let mut r = Reno::new(RenoConfig::default());
        let d = start(&mut r);
        assert_eq!(d.cwnd, Some(10 * MSS as u32));
        assert_eq!(d.rate, None);
        assert_eq!(r.rate(), None);
        assert_eq!(r.mode(), ControlMode::Window);
        assert_eq!(r.name(), "reno");
        assert_eq!(r.ssthresh(), u64::from(u32::MAX));
    }

    #[test]
    fn slow_start_doubles_per_rtt_until_ssthresh() {
        let ssthresh = 200 * MSS;
        let mut r = reno(with_ssthresh(ssthresh));
        let mut now = 0;
        for k in 1..=4 {
            now = per_rtt(&mut r, now);
            assert_eq!(u64::from(r.cwnd()), (10 * MSS) << k, "after {k} RTTs");
            assert!(r.in_slow_start());
        }
        // 160 MSS: acking 160 MSS takes 40 MSS to reach ssthresh, then 120 MSS of CA bytes
        // (less than the 200 MSS window): cwnd stops at ssthresh.
        now = per_rtt(&mut r, now);
        assert_eq!(u64::from(r.cwnd()), ssthresh);
        assert!(!r.in_slow_start());
        // The leftover 120 MSS count towards CA: 80 more MSS of ACKs give +1 MSS.
        let m = window_full(report(now + RTT, 80 * MSS, 0, RTT), r.cwnd());
        r.on_measurement(&m);
        assert_eq!(u64::from(r.cwnd()), ssthresh + MSS);
    }

    #[test]
    fn congestion_avoidance_adds_one_mss_per_rtt() {
        let mut r = reno(with_ssthresh(10 * MSS));
        let mut now = 0;
        for k in 1..=20 {
            now = per_rtt(&mut r, now);
            assert_eq!(u64::from(r.cwnd()), (10 + k) * MSS, "after {k} RTTs");
        }
    }

    #[test]
    fn partial_acks_accumulate_exactly() {
        let mut r = reno(with_ssthresh(10 * MSS));
        // Ten reports of a tenth of the window each: exactly one MSS, on the tenth.
        for i in 1..=10 {
            let m = window_full(report(i * 10_000, MSS, 0, RTT), r.cwnd());
            r.on_measurement(&m);
            let want = if i < 10 { 10 * MSS } else { 11 * MSS };
            assert_eq!(u64::from(r.cwnd()), want, "report {i}");
        }
    }

    /// A per-RTT report at `now` of a flow whose application keeps `flight` bytes out: all of
    /// it acknowledged, none left in flight at the last ACK.
    fn app_limited(now: u64, flight: u64) -> Measurement {
        report(now, flight, 0, RTT)
    }

    #[test]
    fn congestion_avoidance_waits_while_the_window_does_not_limit_the_flow() {
        let cfg = RenoConfig {
            init_cwnd_pkts: 40,
            ss_thresh: 40 * MSS,
            ..RenoConfig::default()
        };
        let mut r = reno(cfg.clone());
        let mut old = reno(RenoConfig {
            limited_growth: false,
            ..cfg
        });
        let mut now = 0;
        for _ in 0..50 {
            now += RTT;
            r.on_measurement(&app_limited(now, 10 * MSS));
            old.on_measurement(&app_limited(now, 10 * MSS));
        }
        assert_eq!(
            u64::from(r.cwnd()),
            40 * MSS,
            "no growth at a quarter of the window"
        );
        // Without the rule the window grew on every acknowledged byte: of 500 MSS acked,
        // 40 + 41 + ... + 50 = 495 bought 11 MSS.
        assert_eq!(u64::from(old.cwnd()), 51 * MSS);
        // Within 3 MSS of the window counts as limited by it.
        now += RTT;
        r.on_measurement(&app_limited(now, 37 * MSS));
        assert_eq!(
            u64::from(r.cwnd()),
            40 * MSS,
            "37 of the 40 MSS acknowledged: no MSS yet"
        );
        for k in 1..=5 {
            now = per_rtt(&mut r, now);
            assert_eq!(
                u64::from(r.cwnd()),
                (40 + k) * MSS,
                "window-limited RTT {k}"
            );
        }
    }

    #[test]
    fn a_window_not_yet_installed_is_not_asked_to_be_full() {
        // Slow start at 40 MSS; the datapath still holds the flow to the 20 MSS it installed
        // before, and the flow fills those: limited by the window, so it grows.
        let mut r = reno(RenoConfig {
            init_cwnd_pkts: 40,
            ..RenoConfig::default()
        });
        let mut m = report(RTT, 2 * MSS, 0, RTT);
        m.bytes_in_flight = 18 * MSS;
        m.cwnd = 20 * MSS;
        r.on_measurement(&m);
        assert_eq!(u64::from(r.cwnd()), 42 * MSS);
        // Told nothing of the installed window, 20 MSS of flight do not fill 40 (nor half of
        // 42): no growth.
        m.now_us += RTT;
        m.cwnd = 0;
        r.on_measurement(&m);
        assert_eq!(u64::from(r.cwnd()), 42 * MSS);
    }

    #[test]
    fn slow_start_stops_at_twice_what_the_flow_uses() {
        let mut r = reno(RenoConfig::default());
        let mut now = 0;
        for _ in 0..20 {
            now += RTT;
            r.on_measurement(&app_limited(now, 8 * MSS));
        }
        // 10 MSS < 2 * 8: one report's growth (+8 MSS); 18 MSS is more than twice 8 MSS and
        // more than 3 MSS above it: no more.
        assert_eq!(u64::from(r.cwnd()), 18 * MSS);
        assert!(r.in_slow_start());
        // A per-ACK flow with the window full doubles as before.
        per_ack_rtt(&mut r, now);
        assert_eq!(u64::from(r.cwnd()), 36 * MSS);
    }

    #[test]
    fn per_ack_and_per_rtt_reports_grow_alike() {
        for ssthresh in [u64::from(u32::MAX), 64 * MSS, 50 * MSS, 12 * MSS] {
            let mut a = reno(with_ssthresh(ssthresh));
            let mut b = reno(with_ssthresh(ssthresh));
            let (mut ta, mut tb) = (0, 0);
            for k in 1..=8 {
                ta = per_rtt(&mut a, ta);
                tb = per_ack_rtt(&mut b, tb);
                let (wa, wb) = (u64::from(a.cwnd()), u64::from(b.cwnd()));
                assert!(
                    wa.abs_diff(wb) <= MSS,
                    "ssthresh {ssthresh}, RTT {k}: per-RTT {wa} vs per-ACK {wb}"
                );
            }
        }
    }

    #[test]
    fn loss_halves_the_window() {
        let mut r = reno(RenoConfig::default());
        let now = per_rtt(&mut r, 0); // 20 MSS
        assert_eq!(u64::from(r.cwnd()), 20 * MSS);
        r.on_measurement(&report(now + RTT, 20 * MSS, 1, RTT));
        assert_eq!(u64::from(r.cwnd()), 10 * MSS);
        assert_eq!(r.ssthresh(), 10 * MSS);
        assert!(!r.in_slow_start());
    }

    #[test]
    fn one_reduction_per_rtt_and_window_held_in_recovery() {
        let mut r = reno(with_ssthresh(40 * MSS));
        r.calibrate(Fused::Cwnd(40 * MSS as u32));
        let t0 = 1_000_000;
        r.on_measurement(&report(t0, 10 * MSS, 3, RTT));
        assert_eq!(u64::from(r.cwnd()), 20 * MSS);
        // More losses (and ACKs) within the same RTT: no further reduction, no growth.
        for dt in [10_000, 50_000, 99_999] {
            r.on_measurement(&report(t0 + dt, 20 * MSS, 2, RTT));
            assert_eq!(u64::from(r.cwnd()), 20 * MSS, "at +{dt}us");
            assert_eq!(r.ssthresh(), 20 * MSS);
        }
        // One RTT later a new loss is a new epoch.
        r.on_measurement(&report(t0 + RTT, 20 * MSS, 1, RTT));
        assert_eq!(u64::from(r.cwnd()), 10 * MSS);
        // And after that epoch, ACKs grow the window again (+1 MSS for a window of ACKs).
        r.on_measurement(&report(t0 + 2 * RTT, 10 * MSS, 0, RTT));
        assert_eq!(u64::from(r.cwnd()), 11 * MSS);
    }

    #[test]
    fn timeout_sets_the_loss_window_and_restarts_slow_start() {
        let mut r = reno(RenoConfig::default());
        r.calibrate(Fused::Cwnd(40 * MSS as u32));
        let t0 = 1_000_000;
        let mut m = report(t0, 0, 0, RTT);
        m.timeout = true;
        r.on_measurement(&m);
        assert_eq!(u64::from(r.cwnd()), MSS, "RFC 5681 loss window");
        assert_eq!(r.ssthresh(), 20 * MSS);
        // A repeated timeout before any ACK keeps ssthresh.
        m.now_us = t0 + 3 * RTT;
        r.on_measurement(&m);
        assert_eq!(u64::from(r.cwnd()), MSS);
        assert_eq!(r.ssthresh(), 20 * MSS);
        // A loss report within the RTT after the timeout does not reduce again; growth is not held.
        r.on_measurement(&report(t0 + 3 * RTT + 10, MSS, 4, RTT));
        assert_eq!(u64::from(r.cwnd()), 2 * MSS);
        // Slow start up to ssthresh, then one MSS per RTT.
        let mut now = t0 + 4 * RTT;
        let mut seen = vec![];
        for _ in 0..6 {
            now = per_rtt(&mut r, now);
            seen.push(u64::from(r.cwnd()) / MSS);
        }
        assert_eq!(seen, vec![4, 8, 16, 20, 21, 22]);
        // Once data was acknowledged, a new timeout lowers ssthresh again.
        let mut m = report(now + RTT, 0, 0, RTT);
        m.timeout = true;
        r.on_measurement(&m);
        assert_eq!(r.ssthresh(), 11 * MSS);
    }

    #[test]
    fn timeout_inside_a_loss_epoch_keeps_ssthresh() {
        let mut r = reno(RenoConfig::default());
        r.calibrate(Fused::Cwnd(40 * MSS as u32));
        r.on_measurement(&report(1_000_000, 0, 1, RTT));
        assert_eq!(r.ssthresh(), 20 * MSS);
        let mut m = report(1_050_000, 0, 0, RTT);
        m.timeout = true;
        r.on_measurement(&m);
        assert_eq!(r.ssthresh(), 20 * MSS);
        assert_eq!(u64::from(r.cwnd()), MSS);
    }

    #[test]
    fn min_cwnd_floors_losses() {
        let mut r = reno(RenoConfig::default());
        let mut now = 0;
        for _ in 0..10 {
            now += RTT;
            r.on_measurement(&report(now, 0, 1, RTT));
        }
        assert_eq!(u64::from(r.cwnd()), 2 * MSS);
        assert_eq!(r.ssthresh(), 2 * MSS);
        let cfg = RenoConfig {
            min_cwnd_pkts: 4,
            ..RenoConfig::default()
        };
        let mut r = reno(cfg);
        for _ in 0..10 {
            now += RTT;
            r.on_measurement(&report(now, 0, 1, RTT));
        }
        assert_eq!(u64::from(r.cwnd()), 4 * MSS);
        // Calibration cannot go below the floor either.
        r.calibrate(Fused::Cwnd(100));
        assert_eq!(u64::from(r.cwnd()), 4 * MSS);
    }

    #[test]
    fn calibrate_sets_the_window_and_keeps_ssthresh() {
        let mut r = reno(with_ssthresh(30 * MSS));
        r.calibrate(Fused::Cwnd(20 * MSS as u32));
        assert_eq!(u64::from(r.cwnd()), 20 * MSS);
        assert_eq!(r.ssthresh(), 30 * MSS);
        // Still slow start from the fused window: 20 → 30 (ssthresh), then CA.
        let now = per_rtt(&mut r, 0);
        assert_eq!(u64::from(r.cwnd()), 30 * MSS);
        // Above ssthresh: CA from the fused window.
        r.calibrate(Fused::Cwnd(50 * MSS as u32));
        let now = per_rtt(&mut r, now);
        assert_eq!(u64::from(r.cwnd()), 51 * MSS);
        // A rate is converted with the last mean RTT (100 ms): 1448 kB/s · 0.1 s = 100 MSS.
        r.calibrate(Fused::Rate(MSS * 1000));
        assert_eq!(u64::from(r.cwnd()), 100 * MSS);
        per_rtt(&mut r, now);
        assert_eq!(u64::from(r.cwnd()), 101 * MSS);
    }

    #[test]
    fn calibrating_to_its_own_window_changes_nothing() {
        let mut a = reno(with_ssthresh(16 * MSS));
        let mut b = reno(with_ssthresh(16 * MSS));
        let mut now = 0;
        for i in 0..40u64 {
            now += RTT / 3;
            let acked = (i % 7 + 1) * MSS;
            let m = report(now, acked, u64::from(i % 13 == 12), RTT);
            a.on_measurement(&m);
            b.on_measurement(&m);
            b.calibrate(Fused::Cwnd(b.cwnd()));
            assert_eq!(a.cwnd(), b.cwnd(), "report {i}");
        }
    }

    #[test]
    fn rate_before_any_rtt_is_ignored() {
        let mut r = reno(RenoConfig::default());
        r.calibrate(Fused::Rate(1_000_000_000));
        assert_eq!(u64::from(r.cwnd()), 10 * MSS);
    }

    #[test]
    fn params_override_defaults() {
        let mut p = ParamSet::defaults("reno", PARAMS);
        p.set(PARAMS, "init-cwnd", "4").unwrap();
        p.set(PARAMS, "ss-thresh", "64KiB").unwrap();
        p.set(PARAMS, "min-cwnd", "3pkts").unwrap();
        p.set(PARAMS, "beta", "0.7").unwrap();
        p.set(PARAMS, "limited-growth", "false").unwrap();
        let cfg = RenoConfig::from_params(&p);
        assert_eq!(
            cfg,
            RenoConfig {
                init_cwnd_pkts: 4,
                ss_thresh: 65536,
                min_cwnd_pkts: 3,
                beta: 0.7,
                limited_growth: false,
            }
        );
        let mut c = (SPEC.build)(&p);
        let d = c.on_start(&FlowStart {
            mss: 1000,
            init_cwnd: 10_000,
            now_us: 0,
        });
        assert_eq!(d.cwnd, Some(4000));
        c.on_measurement(&Measurement {
            now_us: 1,
            lost_packets: 1,
            mss: 1000,
            ..Measurement::default()
        });
        assert_eq!(
            c.cwnd(),
            3000,
            "beta 0.7 of 4000 is 2800, below the 3-packet floor"
        );
    }

    #[test]
    fn spec_declares_every_parameter_with_a_source() {
        assert_eq!(SPEC.name, "reno");
        let keys: Vec<&str> = SPEC.params.iter().map(|p| p.key).collect();
        assert_eq!(
            keys,
            [
                "init-cwnd",
                "ss-thresh",
                "min-cwnd",
                "beta",
                "limited-growth"
            ]
        );
        assert!(
            SPEC.params
                .iter()
                .all(|p| !p.source.is_empty() && !p.help.is_empty())
        );
        let d = ParamSet::defaults("reno", PARAMS);
        assert_eq!(RenoConfig::from_params(&d).ss_thresh, u64::from(u32::MAX));
    }
}
