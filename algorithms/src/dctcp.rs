//! DCTCP (RFC 8257; Alizadeh et al., SIGCOMM 2010) as a CCP algorithm: Reno whose response to
//! ECN marks is proportional to the fraction of marked bytes.
//!
//! # The algorithm as built
//!
//! DCTCP is Reno plus one estimator and one reduction rule, so this module *is* a [`Reno`]
//! controller (slow start, one MSS per RTT, loss and timeout handling, the loss epoch, PolyCC
//! calibration — all of [`crate::reno`], unchanged) with the ECN law added around it:
//!
//! - **α, once per window of data** (RFC 8257 §3.3): the controller sums the acknowledged bytes
//!   (`acked_bytes`) and the CE-echoed bytes (`ecn_bytes`) of successive reports. The observation
//!   window ends at the first report by which every byte that was in flight when the window began
//!   has been acknowledged — RFC 8257's "SND.UNA passes DCTCP.WindowEnd = SND.NXT", with
//!   SND.NXT − SND.UNA read from the report's `bytes_in_flight` gauge. The window is therefore
//!   about one RTT of data whatever the report period; with the default per-RTT reports it spans
//!   one or two reports. Then `F = min(1, marked / acked)` (marked bytes may include SACKed bytes
//!   that the cumulative `acked_bytes` has not yet counted, hence the clamp),
//!   `α ← (1 − g)·α + g·F`, the sums restart and the next window ends once the bytes now in flight
//!   are acknowledged. The first window ends at the first report that acknowledges anything (the
//!   RFC starts with WindowEnd = SND.NXT of the empty connection). α starts at `init-alpha` = 1, the
//!   RFC's conservative choice: the first marks halve the window.
//! - **Reduction on marks, once per RTT** (RFC 8257 §3.3): a report with `ecn_bytes > 0` cuts the
//!   window to `cwnd·(1 − α/2)` with the α updated by that report (the window update comes first,
//!   as in Linux, where the ACK's α update precedes its ECE processing). The cut is Reno's
//!   [`Reno::congestion_event`]: it sets `ssthresh` (ending slow start), starts Reno's one-RTT
//!   reduction epoch (RFC 8257's "once per window": further marks and losses within it are the
//!   same congestion event, and growth is held, as in Linux's CWR state), and sets the window to
//!   `cwnd·(1 − α/2)`. `ssthresh` is left at Reno's `beta·cwnd`, below the new
//!   window, so Reno continues in congestion avoidance exactly as if it had chosen the window
//!   itself. Marks inside a reduction epoch (the RTT after an ECN cut, a loss, or a timeout)
//!   change nothing but α.
//! - **Growth** (RFC 8257 §3.4) and **loss / timeout** (§3.5) are Reno's: slow start, +1 MSS per
//!   RTT, `ssthresh = beta·cwnd` on loss once per RTT, the one-MSS loss window on a timeout.
//!
//! A flow whose path never marks behaves exactly as Reno (a unit test checks it report by
//! report). DCTCP needs ECN: the simulator's and emulator's queues CE-mark ECT packets above a
//! threshold K (`ecn_k`), and the datapath echoes CE per byte (`Ack.ecn_bytes`).
//!
//! # Parameters
//!
//! `init-cwnd` (10 packets, RFC 6928), `min-cwnd` (2 packets, RFC 5681), `g` (1/16, RFC 8257),
//! `init-alpha` (1, RFC 8257), `beta` (0.5: Reno's loss response). Out-of-range values are
//! clamped: `g`, `init-alpha` and `beta` to [0, 1].
//!
//! Time is the agent's [`Measurement::now_us`], never the wall clock.

use crate::controller::{
    ControlMode, Controller, Decision, FlowStart, Fused, Measurement, TakeOver,
};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::reno::{Reno, RenoConfig};
use crate::window::{self, packets};

/// Every parameter of DCTCP, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    window::INIT_CWND,
    window::MIN_CWND,
    ParamSpec {
        key: "g",
        unit: Unit::Number,
        default: 1.0 / 16.0,
        help: "estimation gain: weight of the newest window's marked fraction in alpha",
        source: "RFC 8257 §3.3 and §4.2 (g = 1/16); DCTCP paper (SIGCOMM 2010)",
    },
    ParamSpec {
        key: "init-alpha",
        unit: Unit::Number,
        default: 1.0,
        help: "alpha before the first observation window ends (1: the first marks halve the window)",
        source: "RFC 8257 §3.3 (DCTCP.Alpha initialised to 1)",
    },
    ParamSpec {
        key: "beta",
        unit: Unit::Number,
        default: 0.5,
        help: "multiplicative decrease on loss or timeout, as Reno: ssthresh = beta * cwnd",
        source: "RFC 8257 §3.5 (loss handled as in RFC 5681)",
    },
    window::LIMITED_GROWTH,
];

/// DCTCP, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "dctcp",
    summary: "DCTCP (RFC 8257): Reno that cuts cwnd by alpha/2 once per RTT on ECN marks, alpha = EWMA (g) of the marked fraction",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Dctcp::new(DctcpConfig::from_params(params)))
}

/// DCTCP's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct DctcpConfig {
    /// Initial window, packets (≥ 1).
    pub init_cwnd_pkts: u32,
    /// Floor of `ssthresh` and of the window after a reduction, packets (≥ 1).
    pub min_cwnd_pkts: u32,
    /// Estimation gain g, in [0, 1].
    pub g: f64,
    /// Initial α, in [0, 1].
    pub init_alpha: f64,
    /// Reno's multiplicative decrease on loss, in [0, 1].
    pub beta: f64,
    /// Reno grows only while the window limits the flow ([`window::LIMITED_GROWTH`]).
    pub limited_growth: bool,
}

impl Default for DctcpConfig {
    fn default() -> Self {
        DctcpConfig::from_params(&ParamSet::defaults("dctcp", PARAMS))
    }
}

impl DctcpConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        DctcpConfig {
            init_cwnd_pkts: packets(p.get("init-cwnd")),
            min_cwnd_pkts: packets(p.get("min-cwnd")),
            g: p.get("g").clamp(0.0, 1.0),
            init_alpha: p.get("init-alpha").clamp(0.0, 1.0),
            beta: p.get("beta").clamp(0.0, 1.0),
            limited_growth: p.flag("limited-growth"),
        }
    }

    /// The configuration of the inner Reno (slow start until the first congestion event).
    pub fn reno(&self) -> RenoConfig {
        RenoConfig {
            init_cwnd_pkts: self.init_cwnd_pkts,
            ss_thresh: window::MAX_CWND,
            min_cwnd_pkts: self.min_cwnd_pkts,
            beta: self.beta,
            limited_growth: self.limited_growth,
        }
    }
}

/// A DCTCP controller for one flow.
#[derive(Clone, Debug)]
pub struct Dctcp {
    cfg: DctcpConfig,
    /// Window growth, loss, timeout and reduction epochs.
    reno: Reno,
    /// The estimate of the fraction of marked bytes.
    alpha: f64,
    /// Bytes acknowledged since the flow started.
    acked_total: u64,
    /// The observation window ends when `acked_total` reaches this.
    window_end: u64,
    /// Bytes acknowledged in the current observation window.
    window_acked: u64,
    /// CE-echoed bytes in the current observation window.
    window_marked: u64,
    /// ECN reductions made.
    ecn_cuts: u64,
}

impl Dctcp {
    /// A controller with `cfg`, before its flow starts.
    pub fn new(cfg: DctcpConfig) -> Self {
        Dctcp {
            reno: Reno::new(cfg.reno()),
            alpha: cfg.init_alpha,
            acked_total: 0,
            window_end: 0,
            window_acked: 0,
            window_marked: 0,
            ecn_cuts: 0,
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &DctcpConfig {
        &self.cfg
    }

    /// The current estimate α of the fraction of marked bytes.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// How many ECN reductions the controller has made.
    pub fn ecn_reductions(&self) -> u64 {
        self.ecn_cuts
    }

    /// The inner Reno (slow-start threshold, MSS, ...).
    pub fn reno(&self) -> &Reno {
        &self.reno
    }

    /// Count the report into the observation window; end the window and update α when every
    /// byte in flight at its start has been acknowledged.
    fn observe(&mut self, m: &Measurement) {
        self.acked_total = self.acked_total.saturating_add(m.acked_bytes);
        self.window_acked = self.window_acked.saturating_add(m.acked_bytes);
        self.window_marked = self.window_marked.saturating_add(m.ecn_bytes);
        if m.acked_bytes == 0 || self.acked_total < self.window_end {
            return;
        }
        let f = (self.window_marked as f64 / self.window_acked as f64).min(1.0);
        let g = self.cfg.g;
        self.alpha = (1.0 - g) * self.alpha + g * f;
        self.window_acked = 0;
        self.window_marked = 0;
        self.window_end = self.acked_total.saturating_add(m.bytes_in_flight);
    }

    /// The reduction on ECN marks: Reno's congestion event to the window `cwnd·(1 − α/2)`.
    /// Inside a reduction epoch nothing changes.
    fn ecn_reduce(&mut self, m: &Measurement) {
        let target = f64::from(self.reno.cwnd()) * (1.0 - self.alpha / 2.0);
        if self
            .reno
            .congestion_event(m, target.round().min(window::MAX_CWND as f64) as u64)
        {
            self.ecn_cuts += 1;
        }
    }
}

impl Controller for Dctcp {
    fn name(&self) -> &'static str {
        "dctcp"
    }

    fn mode(&self) -> ControlMode {
        ControlMode::Window
    }

    fn on_start(&mut self, start: &FlowStart) -> Decision {
        *self = Dctcp::new(self.cfg.clone());
        self.reno.on_start(start)
    }

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        self.observe(m);
        self.reno.on_measurement(m);
        if m.ecn_bytes > 0 {
            self.ecn_reduce(m);
        }
        Decision::cwnd(self.cwnd())
    }

    fn calibrate(&mut self, fused: Fused) {
        self.reno.calibrate(fused);
    }

    fn take_over(&mut self, handed: &TakeOver) {
        self.reno.take_over(handed);
    }

    fn ssthresh(&self) -> Option<u32> {
        Controller::ssthresh(&self.reno)
    }

    fn cwnd(&self) -> u32 {
        self.reno.cwnd()
    }

    fn rate(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{self, MSS, START, started};

    const RTT: u64 = 100;

    fn dctcp(cfg: DctcpConfig) -> Dctcp {
        started(Dctcp::new(cfg))
    }

    /// A report at `now` acknowledging `acked` bytes of which `marked` were CE-echoed, with
    /// `inflight` bytes still in flight.
    fn report(now: u64, acked: u64, marked: u64, inflight: u64) -> Measurement {
        Measurement {
            ecn_bytes: marked,
            ecn_packets: marked / MSS,
            bytes_in_flight: inflight,
            ..test_support::report(now, acked, 0, RTT)
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn starts_as_reno_with_alpha_one() {
        let mut d = Dctcp::new(DctcpConfig::default());
        let dec = d.on_start(&START);
        assert_eq!(dec.cwnd, Some(10 * MSS as u32));
        assert_eq!(
            (d.name(), d.mode(), d.rate()),
            ("dctcp", ControlMode::Window, None)
        );
        assert_eq!(d.alpha(), 1.0);
        assert!(d.reno().in_slow_start());
        assert_eq!(d.config().g, 1.0 / 16.0);
    }

    #[test]
    fn alpha_is_updated_once_per_window_of_data() {
        let g = 1.0 / 16.0;
        let mut d = dctcp(DctcpConfig::default());
        // The first report that acknowledges data ends the first window: F = 0 here.
        d.on_measurement(&report(RTT, 10 * MSS, 0, 20 * MSS));
        let mut alpha = 1.0 - g;
        assert!(close(d.alpha(), alpha), "{}", d.alpha());
        // The next window ends once the 20 MSS in flight are acknowledged: two reports of 10 MSS,
        // the first unmarked, the second marked on 5 MSS. Nothing moves after the first.
        d.on_measurement(&report(2 * RTT, 10 * MSS, 0, 20 * MSS));
        assert!(close(d.alpha(), alpha));
        d.on_measurement(&report(3 * RTT, 10 * MSS, 5 * MSS, 30 * MSS));
        // F = 5 / 20 over the whole window (not 5 / 10 of the last report).
        alpha = (1.0 - g) * alpha + g * 0.25;
        assert!(close(d.alpha(), alpha), "{} vs {alpha}", d.alpha());
        // A report with no ACKs never ends a window.
        d.on_measurement(&report(4 * RTT, 0, 0, 30 * MSS));
        assert!(close(d.alpha(), alpha));
        // Reports short of the 30 MSS keep accumulating; the one that reaches it updates, once.
        for i in 0..2 {
            d.on_measurement(&report((5 + i) * RTT, 10 * MSS, 10 * MSS, 30 * MSS));
            assert!(close(d.alpha(), alpha), "report {i}");
        }
        d.on_measurement(&report(7 * RTT, 10 * MSS, 10 * MSS, 30 * MSS));
        alpha = (1.0 - g) * alpha + g;
        assert!(close(d.alpha(), alpha));
    }

    #[test]
    fn alpha_decays_without_marks_and_saturates_with_them() {
        let mut d = dctcp(DctcpConfig::default());
        let mut now = 0;
        for _ in 0..200 {
            now += RTT;
            d.on_measurement(&report(now, 10 * MSS, 0, 10 * MSS));
        }
        assert!(d.alpha() < 1e-5, "{}", d.alpha());
        for _ in 0..400 {
            now += RTT;
            d.on_measurement(&report(now, 10 * MSS, 10 * MSS, 10 * MSS));
        }
        assert!(d.alpha() > 0.9999, "{}", d.alpha());
        // Marked bytes beyond the acknowledged ones (SACKed data) count as F = 1, not more.
        let mut d = dctcp(DctcpConfig {
            init_alpha: 0.5,
            ..DctcpConfig::default()
        });
        d.on_measurement(&report(RTT, MSS, 3 * MSS, MSS));
        assert!(close(d.alpha(), 0.5 * 15.0 / 16.0 + 1.0 / 16.0));
    }

    #[test]
    fn first_marks_halve_the_window_and_end_slow_start() {
        let mut d = dctcp(DctcpConfig::default());
        // Slow start: 10 → 20 → 40 MSS.
        d.on_measurement(&report(RTT, 10 * MSS, 0, 20 * MSS));
        d.on_measurement(&report(2 * RTT, 20 * MSS, 0, 40 * MSS));
        assert_eq!(u64::from(d.cwnd()), 40 * MSS);
        // Make α exactly 1 again so the arithmetic is plain: a fresh controller with marks in
        // its first window (F = 1 keeps α = 1).
        let mut d = dctcp(DctcpConfig::default());
        d.calibrate(Fused::Cwnd(40 * MSS as u32));
        d.on_measurement(&report(RTT, 10 * MSS, 10 * MSS, 40 * MSS));
        assert_eq!(d.alpha(), 1.0);
        // 40 MSS grew by Reno's slow start to 50 MSS, then the cut: 50 · (1 − 1/2) = 25 MSS.
        assert_eq!(u64::from(d.cwnd()), 25 * MSS);
        assert!(!d.reno().in_slow_start(), "ssthresh was set");
        assert_eq!(d.ecn_reductions(), 1);
    }

    #[test]
    fn the_cut_is_one_minus_alpha_over_two_once_per_rtt() {
        let cfg = DctcpConfig {
            init_alpha: 0.4,
            ..DctcpConfig::default()
        };
        let mut d = dctcp(cfg);
        d.calibrate(Fused::Cwnd(100 * MSS as u32));
        // Leave slow start by a loss (100 → 50 MSS), and let its epoch pass.
        d.on_measurement(&report(RTT, 0, 0, 100 * MSS)); // no ACKs: nothing happens
        let mut m = report(RTT, 0, 0, 100 * MSS);
        m.lost_packets = 1;
        d.on_measurement(&m);
        assert_eq!(u64::from(d.cwnd()), 50 * MSS);
        assert_eq!(d.alpha(), 0.4);
        d.calibrate(Fused::Cwnd(80 * MSS as u32));
        // A report that ends the first window with F = 1/2 and carries marks:
        // α = 0.4·15/16 + 0.5/16 = 0.40625; cwnd = 80 MSS (+ 10/80 MSS of CA bytes, below one
        // MSS) · (1 − α/2).
        let t0 = 10 * RTT;
        d.on_measurement(&report(t0, 10 * MSS, 5 * MSS, 80 * MSS));
        let alpha = 0.4 * 15.0 / 16.0 + 0.5 / 16.0;
        assert!(close(d.alpha(), alpha));
        let want = (80.0 * MSS as f64 * (1.0 - alpha / 2.0)).round() as u32;
        assert_eq!(d.cwnd(), want);
        // More marks within the RTT after the cut: no second cut, no growth.
        for dt in [10, 50, RTT - 1] {
            d.on_measurement(&report(t0 + dt, 10 * MSS, 10 * MSS, 60 * MSS));
            assert_eq!(d.cwnd(), want, "at +{dt} us");
        }
        assert_eq!(d.ecn_reductions(), 1);
        // One RTT later, marks cut again with the α of that moment (the window that began at
        // t0 with 80 MSS in flight has not ended: 40 of its 80 MSS are acknowledged).
        d.on_measurement(&report(t0 + RTT, 10 * MSS, 10 * MSS, 60 * MSS));
        assert!(close(d.alpha(), alpha));
        let want2 = (f64::from(want) * (1.0 - alpha / 2.0)).round() as u32;
        assert_eq!(d.cwnd(), want2);
        assert_eq!(d.ecn_reductions(), 2);
    }

    #[test]
    fn a_loss_right_after_a_cut_is_the_same_congestion_event() {
        let mut d = dctcp(DctcpConfig::default());
        d.calibrate(Fused::Cwnd(40 * MSS as u32));
        d.on_measurement(&report(RTT, 10 * MSS, 10 * MSS, 40 * MSS));
        let w = d.cwnd();
        let mut m = report(RTT + 30, 10 * MSS, 0, 40 * MSS);
        m.lost_packets = 2;
        d.on_measurement(&m);
        assert_eq!(d.cwnd(), w);
        // After the epoch, a loss halves as Reno does.
        let mut m = report(3 * RTT, 10 * MSS, 0, 40 * MSS);
        m.lost_packets = 1;
        d.on_measurement(&m);
        assert_eq!(u64::from(d.cwnd()), u64::from(w) / 2);
    }

    #[test]
    fn without_marks_it_is_reno_report_by_report() {
        let mut d = dctcp(DctcpConfig::default());
        let mut r = Reno::new(DctcpConfig::default().reno());
        r.on_start(&START);
        let mut now = 0;
        for i in 0..300u64 {
            now += RTT / 2 + i % 7;
            let mut m = report(now, (i % 9) * MSS, 0, 50 * MSS);
            m.lost_packets = u64::from(i % 37 == 36);
            m.timeout = i % 101 == 100;
            assert_eq!(
                d.on_measurement(&m),
                r.on_measurement(&m),
                "report {i} at {now} us"
            );
        }
    }

    #[test]
    fn timeout_sets_one_mss() {
        let mut d = dctcp(DctcpConfig::default());
        d.calibrate(Fused::Cwnd(40 * MSS as u32));
        let mut m = report(RTT, 0, 0, 40 * MSS);
        m.timeout = true;
        d.on_measurement(&m);
        assert_eq!(u64::from(d.cwnd()), MSS);
    }

    #[test]
    fn min_cwnd_floors_ecn_cuts() {
        let mut d = dctcp(DctcpConfig::default());
        let mut now = 0;
        for _ in 0..20 {
            now += 2 * RTT;
            d.on_measurement(&report(now, MSS, MSS, 2 * MSS));
        }
        assert_eq!(u64::from(d.cwnd()), 2 * MSS);
    }

    #[test]
    fn calibrate_is_renos() {
        let mut d = dctcp(DctcpConfig::default());
        d.calibrate(Fused::Cwnd(33 * MSS as u32));
        assert_eq!(u64::from(d.cwnd()), 33 * MSS);
        // A rate needs an RTT first.
        d.calibrate(Fused::Rate(1_000_000));
        assert_eq!(u64::from(d.cwnd()), 33 * MSS);
        d.on_measurement(&report(RTT, 0, 0, 0));
        d.calibrate(Fused::Rate(MSS * 100_000)); // 100 µs of it: 10 MSS
        assert_eq!(u64::from(d.cwnd()), 10 * MSS);
    }

    #[test]
    fn params_override_defaults() {
        let mut p = ParamSet::defaults("dctcp", PARAMS);
        p.set(PARAMS, "g", "0.125").unwrap();
        p.set(PARAMS, "init-alpha", "0").unwrap();
        p.set(PARAMS, "beta", "0.7").unwrap();
        p.set(PARAMS, "init-cwnd", "4").unwrap();
        p.set(PARAMS, "min-cwnd", "3pkts").unwrap();
        assert!(p.set(PARAMS, "g", "1ms").is_err());
        let cfg = DctcpConfig::from_params(&p);
        assert_eq!(
            cfg,
            DctcpConfig {
                init_cwnd_pkts: 4,
                min_cwnd_pkts: 3,
                g: 0.125,
                init_alpha: 0.0,
                beta: 0.7,
                limited_growth: true,
            }
        );
        let mut c = (SPEC.build)(&p);
        let d = c.on_start(&FlowStart {
            mss: 1000,
            init_cwnd: 10_000,
            now_us: 0,
        });
        assert_eq!(d.cwnd, Some(4000));
        // α = 0.125 · 1 after the first (fully marked) window: cut 1 − 1/16 of 5000 (4000 + the
        // slow-start ACKs).
        let dec = c.on_measurement(&Measurement {
            now_us: 10,
            acked_bytes: 1000,
            ecn_bytes: 1000,
            mss: 1000,
            ..Measurement::default()
        });
        assert_eq!(dec.cwnd, Some(4688));
        let mut p = ParamSet::defaults("dctcp", PARAMS);
        p.set(PARAMS, "g", "7").unwrap();
        assert_eq!(DctcpConfig::from_params(&p).g, 1.0);
    }

    #[test]
    fn spec_declares_every_parameter_with_a_source() {
        assert_eq!(SPEC.name, "dctcp");
        let keys: Vec<&str> = SPEC.params.iter().map(|p| p.key).collect();
        assert_eq!(
            keys,
            [
                "init-cwnd",
                "min-cwnd",
                "g",
                "init-alpha",
                "beta",
                "limited-growth"
            ]
        );
        assert!(
            SPEC.params
                .iter()
                .all(|p| !p.source.is_empty() && !p.help.is_empty())
        );
    }
}
