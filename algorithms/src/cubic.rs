//! CUBIC (RFC 9438) as a CCP algorithm: a cubic window curve anchored at the window of the last
//! congestion event, with fast convergence and the Reno-friendly region.
//!
//! # The algorithm as built
//!
//! Windows are bytes in the controller and MSS units inside the cubic formulas; time is the
//! agent's [`Measurement::now_us`] (µs, never the wall clock, so simulated time works), seconds
//! inside the formulas.
//!
//! - **Slow start** (`cwnd < ssthresh`) as Reno: `cwnd += acked_bytes`, doubling per RTT; a report
//!   that crosses `ssthresh` spends the rest of its bytes in congestion avoidance. `ssthresh` starts
//!   unbounded, so the first slow start ends at the first loss (no HyStart).
//! - **Congestion avoidance** (`cwnd ≥ ssthresh`), RFC 9438 §4.2. The epoch (the current congestion
//!   avoidance stage) starts at its first report, i.e. after the recovery RTT that follows a loss,
//!   with `t_epoch = now`, `cwnd_epoch = cwnd`, `W_est = cwnd` and
//!   `K = cbrt((W_max − cwnd_epoch) / C)` (eq. 2; after a multiplicative decrease
//!   `cwnd_epoch = β·W_max`, so `K = cbrt(W_max·(1−β)/C)`; a negative radicand gives a negative K, so
//!   the curve always passes through `cwnd_epoch` at `t = 0`). With
//!   `W_cubic(t) = C·(t − K)³ + W_max` (eq. 1), each report computes
//!   `target = clamp(W_cubic(t + RTT), cwnd, 1.5·cwnd)` (eq. 4, with `t = now − t_epoch`, RTT the last
//!   mean RTT sample) and grows `cwnd += (target − cwnd) · min(1, acked / cwnd)`: the RFC's per-ACK
//!   increase `(target − cwnd)/cwnd` MSS applied `acked / mss` times. A per-RTT report (acked = cwnd)
//!   lands on `W_cubic(t + RTT)`; per-ACK reports approach it continuously, so both follow the same
//!   curve, the per-ACK window trailing it by about the curve's growth in one RTT.
//! - **Reno-friendly region** (§4.3, parameter `tcp-friendly`): `W_est += α·mss·acked/cwnd` per
//!   report with `α = 3(1−β)/(1+β)` until `W_est` reaches `cwnd_prior` (the window before the last
//!   reduction) and `α = 1` after; when `W_cubic(t) < W_est` the window is raised to `W_est` (never
//!   lowered to it).
//! - **Loss** (`lost_packets > 0`), §4.6–4.7: `cwnd_prior = cwnd`; with `fast-convergence` a loss
//!   below the previous `W_max` sets `W_max = cwnd·(1+β)/2`, otherwise `W_max = cwnd`;
//!   `ssthresh = max(β·cwnd, min_cwnd·mss)`, `cwnd = ssthresh`; the epoch ends. As in Reno (see
//!   [`crate::reno`]) this happens once per loss epoch: for one RTT after a reduction further losses
//!   are ignored and the window is held. `cwnd` stands for RFC 9438's flight size.
//! - **Timeout** (§4.8), as Reno: `ssthresh = max(β·cwnd, min_cwnd·mss)` (held on a timeout repeated
//!   before any ACK or inside a loss epoch), `cwnd` = one MSS (the RFC 5681 loss window, below the
//!   `min-cwnd` floor), slow start at once. The next congestion avoidance stage starts with
//!   `W_max = cwnd_epoch` and `K = 0`, `W_est = cwnd_epoch`, as §4.8 asks.
//! - **Floor**: except for the timeout loss window, `cwnd ≥ min_cwnd · mss`.
//!
//! # Calibration (PolyCC)
//!
//! [`Fused::Cwnd`] sets `cwnd = w` (floored at `min_cwnd·mss`) and CUBIC continues its own law from
//! there: `W_max`, `cwnd_prior` and `ssthresh` are kept, `W_est` is capped at `w`, and if a cubic
//! epoch is running it restarts from `w` on the same curve shape — `K = cbrt((W_max − w)/C)` and
//! `t_epoch = now + RTT`, so the next per-RTT report moves to `W_cubic(RTT)` of the new curve, one
//! RTT further along it, exactly as if CUBIC had chosen `w` itself. A fused value equal to CUBIC's
//! own window (within a byte) changes nothing, so a copilot that keeps winning the fusion follows
//! plain CUBIC. A fused window below `ssthresh` sends CUBIC back to slow start. `now` is the time of
//! the last report. [`Fused::Rate`] becomes `cwnd = rate · rtt` with the last mean RTT, and is
//! ignored before any RTT sample.
//!
//! # Parameters
//!
//! `init-cwnd` (10 packets, RFC 6928), `min-cwnd` (2 packets, RFC 5681), `c` (0.4, RFC 9438 §5.1),
//! `beta` (0.7, RFC 9438 §5.1 / §4.6), `fast-convergence` (true, §4.7), `tcp-friendly` (true, §4.3).
//! Out-of-range values are clamped: packets to ≥ 1, `beta` to [0, 1], `c` to ≥ 0.001.
//!
//! The loss epoch, the timeout state, the RTT, the MSS and the time of the last report are kept by
//! the shared [`WindowCore`]; this module only says how the window
//! reacts.

use crate::controller::{Controller, Decision, Measurement};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window::{self, WindowAlgorithm, WindowCore, packets};

/// The largest window a decision can carry, bytes.
const MAX_CWND: f64 = window::MAX_CWND as f64;

/// Smallest accepted `c` (a zero would make K infinite).
const MIN_C: f64 = 0.001;

/// Every parameter of CUBIC, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    window::INIT_CWND,
    window::MIN_CWND,
    ParamSpec {
        key: "c",
        unit: Unit::Number,
        default: 0.4,
        help: "cubic scaling constant C, in MSS/s^3",
        source: "RFC 9438 §5.1",
    },
    ParamSpec {
        key: "beta",
        unit: Unit::Number,
        default: 0.7,
        help: "multiplicative decrease factor beta_cubic",
        source: "RFC 9438 §4.6 and §5.1",
    },
    ParamSpec {
        key: "fast-convergence",
        unit: Unit::Bool,
        default: 1.0,
        help: "release bandwidth faster: a loss below the previous W_max sets W_max = cwnd*(1+beta)/2",
        source: "RFC 9438 §4.7",
    },
    ParamSpec {
        key: "tcp-friendly",
        unit: Unit::Bool,
        default: 1.0,
        help: "Reno-friendly region: grow at least as fast as the AIMD estimate W_est",
        source: "RFC 9438 §4.3",
    },
];

/// CUBIC, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "cubic",
    summary: "CUBIC (RFC 9438): cubic window growth around W_max, fast convergence, Reno-friendly region",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Cubic::new(CubicConfig::from_params(params)))
}

/// CUBIC's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct CubicConfig {
    /// Initial window, packets (≥ 1).
    pub init_cwnd_pkts: u32,
    /// Floor of `ssthresh` and of the window after a loss, packets (≥ 1).
    pub min_cwnd_pkts: u32,
    /// The cubic constant C, MSS/s³ (≥ 0.001).
    pub c: f64,
    /// β_cubic, in [0, 1].
    pub beta: f64,
    /// Fast convergence (§4.7).
    pub fast_convergence: bool,
    /// Reno-friendly region (§4.3).
    pub tcp_friendly: bool,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig::from_params(&ParamSet::defaults("cubic", PARAMS))
    }
}

impl CubicConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        CubicConfig {
            init_cwnd_pkts: packets(p.get("init-cwnd")),
            min_cwnd_pkts: packets(p.get("min-cwnd")),
            c: p.get("c").max(MIN_C),
            beta: p.get("beta").clamp(0.0, 1.0),
            fast_convergence: p.flag("fast-convergence"),
            tcp_friendly: p.flag("tcp-friendly"),
        }
    }

    /// α_cubic = 3(1−β)/(1+β), the Reno-friendly additive increase (RFC 9438 eq. 4 and §4.3).
    pub fn alpha(&self) -> f64 {
        3.0 * (1.0 - self.beta) / (1.0 + self.beta)
    }
}

/// The current congestion avoidance stage.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Epoch {
    /// t_epoch, µs (may lie ahead of now right after a calibration).
    start_us: f64,
    /// K, seconds.
    k: f64,
}

/// A CUBIC controller for one flow.
#[derive(Clone, Debug)]
pub struct Cubic {
    cfg: CubicConfig,
    /// MSS, RTT, time of the last report, loss epoch and timeout state.
    core: WindowCore,
    /// Congestion window, bytes (fractional: growth below a byte is kept).
    cwnd: f64,
    /// Slow-start threshold, bytes (infinite until the first congestion event).
    ssthresh: f64,
    /// W_max, bytes; `None` before any loss and after a timeout (then set at the epoch's start).
    w_max: Option<f64>,
    /// cwnd before the last reduction, bytes.
    cwnd_prior: f64,
    /// Reno-friendly estimate W_est, bytes.
    w_est: f64,
    epoch: Option<Epoch>,
}

impl Cubic {
    /// A controller with `cfg`, before its flow starts (assumes a 1448-byte MSS until then).
    pub fn new(cfg: CubicConfig) -> Self {
        let mut c = Cubic {
            cfg,
            core: WindowCore::new(),
            cwnd: 0.0,
            ssthresh: f64::INFINITY,
            w_max: None,
            cwnd_prior: 0.0,
            w_est: 0.0,
            epoch: None,
        };
        c.reset();
        c
    }

    /// The configuration.
    pub fn config(&self) -> &CubicConfig {
        &self.cfg
    }

    /// The slow-start threshold, bytes; `None` before the first congestion event.
    pub fn ssthresh(&self) -> Option<u64> {
        self.ssthresh
            .is_finite()
            .then(|| self.ssthresh.round() as u64)
    }

    /// W_max, bytes, if set.
    pub fn w_max(&self) -> Option<u64> {
        self.w_max.map(|w| w.round() as u64)
    }

    /// K of the running congestion avoidance epoch, seconds.
    pub fn k(&self) -> Option<f64> {
        self.epoch.map(|e| e.k)
    }

    /// The Reno-friendly estimate W_est, bytes.
    pub fn w_est(&self) -> u64 {
        self.w_est.round() as u64
    }

    /// Whether the window is below `ssthresh` (slow start).
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// The MSS in use, bytes.
    pub fn mss(&self) -> u32 {
        self.core.mss() as u32
    }

    /// W_cubic(t) of the running epoch, bytes (`t` in seconds since t_epoch).
    pub fn w_cubic(&self, t: f64) -> Option<f64> {
        let (e, w_max) = (self.epoch?, self.w_max?);
        Some(self.curve(e, w_max, t))
    }

    /// The MSS in use, bytes, for the formulas.
    fn mss_f(&self) -> f64 {
        self.core.mss() as f64
    }

    fn curve(&self, e: Epoch, w_max: f64, t: f64) -> f64 {
        self.mss_f() * self.cfg.c * (t - e.k).powi(3) + w_max
    }

    fn floor(&self) -> f64 {
        self.core.window_bytes(self.cfg.min_cwnd_pkts) as f64
    }

    fn reduced_ssthresh(&self) -> f64 {
        (self.cwnd * self.cfg.beta).max(self.floor())
    }

    fn start_epoch(&mut self, start_us: f64) -> (Epoch, f64) {
        let w_max = *self.w_max.get_or_insert(self.cwnd);
        let k = ((w_max - self.cwnd) / self.mss_f() / self.cfg.c).cbrt();
        let e = Epoch { start_us, k };
        self.epoch = Some(e);
        self.w_est = self.cwnd;
        (e, w_max)
    }

    fn congestion_avoidance(&mut self, acked: f64) {
        let now = self.core.now_us() as f64;
        let (e, w_max) = match (self.epoch, self.w_max) {
            (Some(e), Some(w_max)) => (e, w_max),
            _ => self.start_epoch(now),
        };
        let t = (now - e.start_us) / 1e6;
        let rtt = self.core.rtt_us() as f64 / 1e6;
        let cwnd = self.cwnd;
        let ahead = self.curve(e, w_max, t + rtt);
        let target = if ahead < cwnd {
            cwnd
        } else {
            ahead.min(1.5 * cwnd)
        };
        let mut next = cwnd + (target - cwnd) * (acked / cwnd).min(1.0);
        if self.cfg.tcp_friendly {
            let alpha = if self.w_est >= self.cwnd_prior {
                1.0
            } else {
                self.cfg.alpha()
            };
            self.w_est += alpha * self.mss_f() * acked / cwnd;
            if self.curve(e, w_max, t) < self.w_est {
                next = next.max(self.w_est);
            }
        }
        self.cwnd = next;
    }

    fn start_epoch_keeping_w_est(&mut self, start_us: f64) {
        let w_est = self.w_est;
        self.start_epoch(start_us);
        self.w_est = w_est;
    }
}

impl WindowAlgorithm for Cubic {
    type Window = f64;

    fn core_mut(&mut self) -> &mut WindowCore {
        &mut self.core
    }

    /// The window state of a fresh flow (the core's state is reset by `WindowCore::start`).
    fn reset(&mut self) {
        self.cwnd = (self.core.window_bytes(self.cfg.init_cwnd_pkts) as f64).max(self.floor());
        self.ssthresh = f64::INFINITY;
        self.w_max = None;
        self.cwnd_prior = 0.0;
        self.w_est = 0.0;
        self.epoch = None;
    }

    fn on_timeout(&mut self, repeated: bool) {
        if !repeated {
            self.cwnd_prior = self.cwnd;
            self.ssthresh = self.reduced_ssthresh();
        }
        self.w_max = None;
        self.epoch = None;
        self.cwnd = self.core.loss_window() as f64;
    }

    fn on_loss(&mut self) {
        self.epoch = None;
        self.cwnd_prior = self.cwnd;
        let below_last = self.w_max.is_some_and(|w| self.cwnd < w);
        self.w_max = Some(if self.cfg.fast_convergence && below_last {
            self.cwnd * (1.0 + self.cfg.beta) / 2.0
        } else {
            self.cwnd
        });
        self.ssthresh = self.reduced_ssthresh();
        self.cwnd = self.ssthresh;
    }

    fn grow(&mut self, acked: u64) {
        let mut acked = acked as f64;
        if self.cwnd < self.ssthresh {
            let room = self.ssthresh - self.cwnd;
            if acked >= room {
                self.cwnd = self.ssthresh;
                acked -= room;
            } else {
                self.cwnd += acked;
                acked = 0.0;
            }
        }
        if acked > 0.0 {
            self.congestion_avoidance(acked);
        }
        self.cwnd = self.cwnd.min(MAX_CWND);
    }

    fn window(&self) -> f64 {
        self.cwnd
    }

    fn adopt(&mut self, w: f64) {
        if (w - self.cwnd).abs() < 1.0 {
            return;
        }
        let w = w.clamp(self.floor(), MAX_CWND);
        self.cwnd = w;
        self.w_est = self.w_est.min(w);
        if self.epoch.is_some() {
            if w < self.ssthresh {
                self.epoch = None;
            } else {
                let start = self.core.now_us() as f64 + self.core.rtt_us() as f64;
                self.start_epoch_keeping_w_est(start);
            }
        }
    }

    fn threshold(&self) -> Option<u64> {
        self.ssthresh()
    }

    fn set_threshold(&mut self, bytes: u64) {
        self.ssthresh = (bytes as f64).max(self.floor());
    }
}

impl Controller for Cubic {
    window::window_controller!("cubic");

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        self.react(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{ControlMode, FlowStart, Fused};
    use crate::test_support::{MSS, report, started};

    const MSSF: f64 = MSS as f64;

    fn cubic(cfg: CubicConfig) -> Cubic {
        started(Cubic::new(cfg))
    }

    fn no_friendly() -> CubicConfig {
        CubicConfig {
            tcp_friendly: false,
            ..CubicConfig::default()
        }
    }

    /// A per-RTT report at `now` acknowledging the whole window.
    fn per_rtt(c: &mut Cubic, now: u64, rtt: u64) {
        let w = u64::from(c.cwnd());
        c.on_measurement(&report(now, w, 0, rtt));
    }

    /// Set the window to `w_max` MSS and lose a packet at `now`.
    fn loss_at(c: &mut Cubic, w_pkts: u64, now: u64, rtt: u64) {
        c.calibrate(Fused::Cwnd((w_pkts * MSS) as u32));
        assert_eq!(u64::from(c.cwnd()), w_pkts * MSS);
        c.on_measurement(&report(now, 0, 1, rtt));
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn starts_with_the_initial_window_and_slow_starts() {
        let mut c = cubic(CubicConfig::default());
        assert_eq!(c.cwnd(), 14480);
        assert_eq!(c.name(), "cubic");
        assert_eq!(c.mode(), ControlMode::Window);
        assert_eq!(c.rate(), None);
        assert_eq!(c.ssthresh(), None);
        for k in 1..=6u64 {
            per_rtt(&mut c, k * 100_000, 100_000);
            assert_eq!(u64::from(c.cwnd()), (10 * MSS) << k);
        }
    }

    #[test]
    fn loss_reduces_to_beta_and_sets_w_max() {
        let mut c = cubic(CubicConfig::default());
        loss_at(&mut c, 100, 1_000_000, 10_000);
        assert_eq!(u64::from(c.cwnd()), 70 * MSS);
        assert_eq!(c.ssthresh(), Some(70 * MSS));
        assert_eq!(c.w_max(), Some(100 * MSS));
        // Odd sizes: 0.7 of 12345 bytes.
        let mut c = cubic(CubicConfig::default());
        c.calibrate(Fused::Cwnd(12345));
        c.on_measurement(&report(1, 0, 1, 10_000));
        assert_eq!(c.cwnd(), 8642); // 8641.5 rounds up
    }

    #[test]
    fn k_is_the_cube_root_of_w_max_times_one_minus_beta_over_c() {
        let mut c = cubic(CubicConfig::default());
        loss_at(&mut c, 100, 1_000_000, 10_000);
        assert_eq!(c.k(), None, "the epoch starts after the recovery RTT");
        per_rtt(&mut c, 1_010_000, 10_000);
        let k = c.k().unwrap();
        assert!(close(k, (100.0f64 * 0.3 / 0.4).cbrt(), 1e-9), "K = {k}");
        assert!(close(k, 4.2172, 1e-4), "K = {k}");
    }

    #[test]
    fn window_follows_the_cubic_curve() {
        let rtt = 10_000u64;
        let mut c = cubic(no_friendly());
        let t_loss = 1_000_000;
        loss_at(&mut c, 100, t_loss, rtt);
        let t_epoch = t_loss + rtt;
        let k = (75.0f64).cbrt();
        let w = |t: f64| MSSF * (0.4 * (t - k).powi(3) + 100.0);
        let mut samples = vec![];
        let mut now = t_epoch;
        while now <= t_epoch + 8_000_000 {
            per_rtt(&mut c, now, rtt);
            let t = (now - t_epoch) as f64 / 1e6;
            let cwnd = f64::from(c.cwnd());
            // Per-RTT reports land exactly on W_cubic(t + RTT).
            assert!(
                close(cwnd, w(t + 0.01), 1.0),
                "t={t}: {cwnd} vs {}",
                w(t + 0.01)
            );
            // ... which is within 1 % of W_cubic(t).
            assert!((cwnd - w(t)).abs() / w(t) < 0.01, "t={t}");
            samples.push((t, cwnd));
            now += rtt;
        }
        let at = |t: f64| {
            samples
                .iter()
                .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
                .unwrap()
                .1
        };
        // Spot values of the formula (MSS), one RTT ahead: W(1.01 s) = 86.80, W(K) = 100,
        // W(6.01 s) = 102.31.
        assert!(close(at(1.0) / MSSF, 86.80, 0.01), "{}", at(1.0) / MSSF);
        assert!(close(at(4.21) / MSSF, 100.0, 0.01), "{}", at(4.21) / MSSF);
        assert!(close(at(6.0) / MSSF, 102.31, 0.01), "{}", at(6.0) / MSSF);
        // Concave, plateau, convex: growth per second.
        let g = |a: f64, b: f64| (at(b) - at(a)) / MSSF;
        assert!(g(0.0, 1.0) > 10.0, "{}", g(0.0, 1.0));
        assert!(g(1.0, 2.0) < g(0.0, 1.0));
        assert!(g(3.7, 4.7) < 0.11, "plateau {}", g(3.7, 4.7)); // 0.4·(0.493³ + 0.507³)
        assert!(g(6.0, 7.0) > g(5.0, 6.0));
        assert!(g(7.0, 8.0) > 5.0, "{}", g(7.0, 8.0));
    }

    #[test]
    fn growth_is_capped_at_half_the_window_per_rtt() {
        let cfg = CubicConfig {
            c: 400.0,
            beta: 0.2,
            tcp_friendly: false,
            ..CubicConfig::default()
        };
        let mut c = cubic(cfg);
        loss_at(&mut c, 100, 1_000_000, 100_000);
        assert_eq!(u64::from(c.cwnd()), 20 * MSS);
        per_rtt(&mut c, 1_100_000, 100_000); // W(0.1 s) = 54.4 MSS > 1.5 · 20
        assert_eq!(u64::from(c.cwnd()), 30 * MSS);
        per_rtt(&mut c, 1_200_000, 100_000); // W(0.2 s) = 77.2 MSS > 1.5 · 30
        assert_eq!(u64::from(c.cwnd()), 45 * MSS);
    }

    #[test]
    fn one_reduction_per_rtt() {
        let mut c = cubic(CubicConfig::default());
        loss_at(&mut c, 100, 1_000_000, 100_000);
        for dt in [1, 50_000, 99_999] {
            c.on_measurement(&report(1_000_000 + dt, 10 * MSS, 5, 100_000));
            assert_eq!(u64::from(c.cwnd()), 70 * MSS, "+{dt}us");
            assert_eq!(c.w_max(), Some(100 * MSS));
        }
        c.on_measurement(&report(1_100_000, 10 * MSS, 1, 100_000));
        assert_eq!(u64::from(c.cwnd()), 49 * MSS);
    }

    #[test]
    fn fast_convergence_lowers_w_max_below_the_previous_one() {
        for (fc, want_w_max) in [(true, 80.0 * 1.7 / 2.0), (false, 80.0)] {
            let cfg = CubicConfig {
                fast_convergence: fc,
                ..CubicConfig::default()
            };
            let mut c = cubic(cfg);
            loss_at(&mut c, 100, 1_000_000, 10_000);
            per_rtt(&mut c, 1_010_000, 10_000);
            loss_at(&mut c, 80, 1_020_000, 10_000);
            assert_eq!(
                c.w_max(),
                Some((want_w_max * MSSF).round() as u64),
                "fc={fc}"
            );
            assert_eq!(u64::from(c.cwnd()), 56 * MSS);
            // K from the new W_max and cwnd_epoch = 56 MSS.
            per_rtt(&mut c, 1_030_000, 10_000);
            let want_k = ((want_w_max - 56.0) / 0.4).cbrt();
            assert!(close(c.k().unwrap(), want_k, 1e-9), "fc={fc}");
        }
        // A loss above the previous W_max sets W_max = cwnd either way.
        let mut c = cubic(CubicConfig::default());
        loss_at(&mut c, 100, 1_000_000, 10_000);
        loss_at(&mut c, 120, 1_020_000, 10_000);
        assert_eq!(c.w_max(), Some(120 * MSS));
    }

    #[test]
    fn reno_friendly_region_dominates_short_rtts_and_small_windows() {
        // W_max = 20 MSS, RTT 20 ms: Reno's α·MSS per RTT (26 MSS/s) outgrows the cubic curve,
        // whose steepest slope here is 3·C·K² = 7.3 MSS/s.
        let rtt = 20_000;
        let alpha = 3.0 * 0.3 / 1.7;
        let mut f = cubic(CubicConfig::default());
        let mut p = cubic(no_friendly());
        loss_at(&mut f, 20, 1_000_000, rtt);
        loss_at(&mut p, 20, 1_000_000, rtt);
        let mut w_est = 14.0 * MSSF;
        for n in 1..=10u64 {
            let now = 1_000_000 + n * rtt;
            let acked = f.cwnd();
            per_rtt(&mut f, now, rtt);
            per_rtt(&mut p, now, rtt);
            w_est += alpha * MSSF * f64::from(acked) / (w_est.round());
            let (wf, wp) = (f64::from(f.cwnd()), f64::from(p.cwnd()));
            // The window is the Reno estimate: 14 MSS + α MSS per RTT.
            assert!(close(wf, w_est, 2.0), "RTT {n}: {wf} vs W_est {w_est}");
            assert!(close(wf, (14.0 + alpha * n as f64) * MSSF, 2.0), "RTT {n}");
            assert!(wf > wp, "RTT {n}: friendly {wf} vs pure cubic {wp}");
        }
        // Past cwnd_prior (20 MSS) the estimate grows by a full MSS per RTT.
        let mut now = 1_000_000 + 10 * rtt;
        while f.w_est() < 20 * MSS {
            now += rtt;
            per_rtt(&mut f, now, rtt);
        }
        for _ in 0..5 {
            let before = f64::from(f.cwnd());
            now += rtt;
            per_rtt(&mut f, now, rtt);
            assert!(close(f64::from(f.cwnd()) - before, MSSF, 2.0));
        }
    }

    #[test]
    fn timeout_restarts_from_one_mss_and_a_fresh_curve() {
        let rtt = 100_000;
        let mut c = cubic(CubicConfig::default());
        c.calibrate(Fused::Cwnd((40 * MSS) as u32));
        let mut m = report(1_000_000, 0, 0, rtt);
        m.timeout = true;
        c.on_measurement(&m);
        assert_eq!(u64::from(c.cwnd()), MSS);
        assert_eq!(c.ssthresh(), Some(28 * MSS));
        assert_eq!(c.w_max(), None);
        // Repeated before any ACK: ssthresh held.
        m.now_us = 1_300_000;
        c.on_measurement(&m);
        assert_eq!(c.ssthresh(), Some(28 * MSS));
        let mut now = 1_400_000;
        let mut seen = vec![];
        for _ in 0..6 {
            per_rtt(&mut c, now, rtt);
            seen.push(c.cwnd());
            now += rtt;
        }
        let mss = MSS as u32;
        assert_eq!(&seen[..4], &[2 * mss, 4 * mss, 8 * mss, 16 * mss]);
        // 32 MSS of ACKs: 12 reach ssthresh, the other 4 start congestion avoidance, where the
        // Reno estimate adds α·MSS·4/28 = 109.5 bytes (the cubic curve, flat at K = 0, adds < 1).
        assert_eq!(seen[4], 28 * mss + 110);
        // CA began at 28 MSS with W_max = 28 MSS and K = 0.
        assert_eq!(c.w_max(), Some(28 * MSS));
        assert_eq!(c.k(), Some(0.0));
    }

    #[test]
    fn min_cwnd_floors_losses() {
        let cfg = CubicConfig {
            min_cwnd_pkts: 4,
            ..CubicConfig::default()
        };
        let mut c = cubic(cfg);
        for i in 1..=20 {
            c.on_measurement(&report(i * 100_000, 0, 1, 100_000));
        }
        assert_eq!(u64::from(c.cwnd()), 4 * MSS);
        assert_eq!(c.ssthresh(), Some(4 * MSS));
    }

    #[test]
    fn per_ack_reports_follow_the_same_curve() {
        let rtt = 10_000u64;
        let mut a = cubic(no_friendly());
        let mut b = cubic(no_friendly());
        loss_at(&mut a, 100, 1_000_000, rtt);
        loss_at(&mut b, 100, 1_000_000, rtt);
        let mut now = 1_000_000;
        for _ in 0..600 {
            let n = u64::from(b.cwnd()) / MSS;
            for i in 1..=n {
                b.on_measurement(&report(now + rtt * i / n, MSS, 0, rtt));
            }
            now += rtt;
            per_rtt(&mut a, now, rtt);
            let (wa, wb) = (f64::from(a.cwnd()), f64::from(b.cwnd()));
            // Per-ACK trails the per-RTT window by at most about one RTT of curve growth.
            let slope = 3.0 * 0.4 * ((now - 1_010_000) as f64 / 1e6 - 75f64.cbrt()).powi(2);
            let tol = 2.0 * slope * 0.01 * MSSF + MSSF;
            assert!(
                wb <= wa + 1.0 && wa - wb <= tol,
                "{now}: {wa} vs {wb} (tol {tol})"
            );
        }
    }

    #[test]
    fn calibrate_restarts_the_epoch_from_the_fused_window() {
        let rtt = 10_000u64;
        let mut c = cubic(no_friendly());
        loss_at(&mut c, 100, 1_000_000, rtt);
        per_rtt(&mut c, 1_010_000, rtt);
        c.calibrate(Fused::Cwnd((90 * MSS) as u32));
        assert_eq!(u64::from(c.cwnd()), 90 * MSS);
        assert_eq!(c.w_max(), Some(100 * MSS), "W_max unchanged");
        assert!(
            close(c.k().unwrap(), 25f64.cbrt(), 1e-9),
            "K = cbrt((100 − 90)/0.4)"
        );
        // The next per-RTT report moves one RTT along the new curve.
        per_rtt(&mut c, 1_020_000, rtt);
        let want = MSSF * (0.4 * (0.01 - 25f64.cbrt()).powi(3) + 100.0);
        assert!(
            close(f64::from(c.cwnd()), want, 1.0),
            "{} vs {want}",
            c.cwnd()
        );
        // A fused window below ssthresh (70 MSS) means slow start again, then a new epoch.
        c.calibrate(Fused::Cwnd((30 * MSS) as u32));
        assert!(c.in_slow_start());
        assert_eq!(c.k(), None);
        per_rtt(&mut c, 1_030_000, rtt);
        assert_eq!(u64::from(c.cwnd()), 60 * MSS);
        per_rtt(&mut c, 1_040_000, rtt);
        assert!(close(c.k().unwrap(), (30.0f64 / 0.4).cbrt(), 1e-9));
        // A rate becomes rate · RTT with the last mean RTT.
        c.calibrate(Fused::Rate(MSS * 8000)); // 8000 MSS/s · 10 ms = 80 MSS
        assert_eq!(u64::from(c.cwnd()), 80 * MSS);
        assert!(close(c.k().unwrap(), 50f64.cbrt(), 1e-9));
    }

    #[test]
    fn calibrating_near_its_own_window_keeps_its_trajectory() {
        let rtt = 10_000u64;
        let mut a = cubic(no_friendly());
        let mut b = cubic(no_friendly());
        loss_at(&mut a, 100, 1_000_000, rtt);
        loss_at(&mut b, 100, 1_000_000, rtt);
        let mut now = 1_000_000;
        // Until t ≈ 6 s the curve is nowhere steeper than where b is nudged (t ≈ 1 s), so b,
        // the same curve a few ms ahead, stays within the nudge of a.
        for i in 0..600 {
            now += rtt;
            per_rtt(&mut a, now, rtt);
            per_rtt(&mut b, now, rtt);
            // Calibrate b to its own window every report, and nudge it by 100 bytes once.
            let nudge = if i == 100 { 100 } else { 0 };
            b.calibrate(Fused::Cwnd(b.cwnd() + nudge));
            let d = f64::from(b.cwnd()) - f64::from(a.cwnd());
            assert!((-1.0..=101.0).contains(&d), "report {i}: {d}");
        }
        assert!(a.cwnd() > 100 * MSS as u32, "past the plateau");
    }

    #[test]
    fn rate_before_any_rtt_is_ignored() {
        let mut c = cubic(CubicConfig::default());
        c.calibrate(Fused::Rate(1_000_000_000));
        assert_eq!(u64::from(c.cwnd()), 10 * MSS);
    }

    #[test]
    fn params_override_defaults() {
        let d = CubicConfig::default();
        assert_eq!(
            d,
            CubicConfig {
                init_cwnd_pkts: 10,
                min_cwnd_pkts: 2,
                c: 0.4,
                beta: 0.7,
                fast_convergence: true,
                tcp_friendly: true,
            }
        );
        assert!(close(d.alpha(), 0.9 / 1.7, 1e-12));
        let mut p = ParamSet::defaults("cubic", PARAMS);
        p.set(PARAMS, "init-cwnd", "20").unwrap();
        p.set(PARAMS, "min-cwnd", "1").unwrap();
        p.set(PARAMS, "c", "0.8").unwrap();
        p.set(PARAMS, "beta", "0.5").unwrap();
        p.set(PARAMS, "fast-convergence", "false").unwrap();
        p.set(PARAMS, "tcp-friendly", "off").unwrap();
        let cfg = CubicConfig::from_params(&p);
        assert_eq!(
            cfg,
            CubicConfig {
                init_cwnd_pkts: 20,
                min_cwnd_pkts: 1,
                c: 0.8,
                beta: 0.5,
                fast_convergence: false,
                tcp_friendly: false,
            }
        );
        let mut c = (SPEC.build)(&p);
        assert_eq!(
            c.on_start(&FlowStart {
                mss: 1000,
                init_cwnd: 10_000,
                now_us: 0
            })
            .cwnd,
            Some(20_000)
        );
        c.on_measurement(&report(10, 0, 1, 10_000));
        assert_eq!(c.cwnd(), 10_000, "beta 0.5");
        let mut c = Cubic::new(cfg);
        loss_at(&mut c, 100, 10, 10_000);
        per_rtt(&mut c, 10_010, 10_000);
        assert!(close(c.k().unwrap(), (50.0f64 / 0.8).cbrt(), 1e-9));
    }

    #[test]
    fn spec_declares_every_parameter_with_a_source() {
        assert_eq!(SPEC.name, "cubic");
        let keys: Vec<&str> = SPEC.params.iter().map(|p| p.key).collect();
        assert_eq!(
            keys,
            [
                "init-cwnd",
                "min-cwnd",
                "c",
                "beta",
                "fast-convergence",
                "tcp-friendly"
            ]
        );
        assert!(
            SPEC.params
                .iter()
                .all(|p| !p.source.is_empty() && !p.help.is_empty())
        );
    }
}
