//! PACCP, the price-aware congestion control protocol (Sun et al., Journal of Cloud Computing
//! 10:55, 2021): Reno generalised by a pair (θ, ω), a minimum guaranteed rate θ and a utility
//! weight ω, that a price buys. Best effort (BE) is (0, 1) — exactly Reno —, differentiated
//! service (DS) is (0, ω > 1) and minimum rate guaranteed service (MRG) is (θ > 0, ω ≥ 1).
//!
//! # The algorithm as built
//!
//! The window laws are the paper's eqs. 17 (slow start) and 18 (congestion avoidance), each
//! stated per RTT epoch, with `W_min = θ·RTT/MSS` (eq. 16), `CD1` = no congestion and `W < W_min`,
//! `CD2` = no congestion and `W ≥ W_min`, `cg` = congestion (loss, or an ECN echo when `ecn` is
//! on), `r_cos` the acceleration below `W_min` (eq. 12):
//!
//! | phase | CD1 | CD2 | cg |
//! |---|---|---|---|
//! | slow start | `((3r_cos − 3^(1−ω))/2 + 1)·W` | `((3 − 3^(1−ω))/2 + 1)·W` | `(1 − 3^(1−ω)/2)·W` |
//! | congestion avoidance | `(r_cos+1)·W/2 + (r_cos − 1 + ω)` | `W + ω` | `W/2 + (ω − 1)` |
//!
//! Windows in the table are in packets. The per-epoch laws are spread over the epoch's
//! acknowledged bytes the way Reno spreads its own (RFC 3465 byte counting), so the window grows
//! the same whether the datapath reports every ACK or once per RTT:
//!
//! - **Slow start** (`W < ssthresh`): a multiplicative law `W ← g·W` becomes
//!   `W += (g − 1)·acked`. A report that crosses `W_min` or `ssthresh` spends only the bytes it
//!   takes to reach it under the current law; the rest counts under the next (CD2, then
//!   congestion avoidance).
//! - **Congestion avoidance**: `W ← W + a + m·W` per epoch becomes `W += m·acked` plus `a` for
//!   every `W` bytes acknowledged, with the fraction carried in a byte counter as Reno's
//!   (`m = (r_cos − 1)/2`, `a = (r_cos − 1 + ω)` MSS in CD1; `m = 0`, `a = ω` MSS in CD2). As in
//!   slow start, a report that would carry the window past `W_min` under CD1 stops it at
//!   `W_min` and counts the remaining bytes under CD2 (the laws switch at `W_min`, not once per
//!   report; otherwise an MRG flow halved just below `W_min` would double past it).
//! - **Congestion** (once per loss epoch, with NewReno's recovery hold, from the shared
//!   [`WindowCore`]): the cg law of the phase the flow is in; `ssthresh` = the new window, so the
//!   flow continues in congestion avoidance. Floor: `min-cwnd` packets.
//! - **Timeout**: `ssthresh` = the cg law of the phase (not lowered again by a repeated
//!   timeout), window = one MSS, slow start restarts (as Reno).
//! - `W_min` uses the last RTT the datapath measured (the report's mean sample), so a flow at
//!   `W_min` sends at θ whatever the queueing delay.
//!
//! With ω = 1 and θ = 0 every law above is Reno's with β = ½ (unit tests drive both with the
//! same reports and compare the windows report by report, with `limited-growth` on and off).
//! - **Growth only while the window limits the flow** (`limited-growth`, on by default, as
//!   [`crate::reno`]'s): the laws above apply to the bytes acknowledged while the window is
//!   what holds the flow back (the rule of [`crate::window`], Linux's `tcp_is_cwnd_limited`);
//!   a flow held back by its application, such as a VM's flow that sends less than its share,
//!   keeps its window instead of raising it without bound. The paper's eqs. 17–18 give the
//!   laws per epoch and say nothing of such flows; its testbed code, a modified Linux Reno,
//!   inherits Linux's check. Off: growth on every acknowledged byte.
//!
//! # Run-time parameter changes
//!
//! [`Controller::set_params`] takes new θ, ω and r_cos on a live flow without touching its
//! window, phase or loss epoch; the next report already uses them. This is how the agent's
//! pricing (`crate::agent::pricing`) re-splits a VM's (θ, ω) among its flows and applies class
//! upgrades and downgrades.
//!
//! # Parameters and units
//!
//! `theta` is a rate in bytes/s (`2gbit` on the command line), `omega` and `r-cos` plain numbers,
//! `init-cwnd` and `min-cwnd` packets. ω is clamped to [0.01, 1000] (VBP splits give ω < 1),
//! r_cos to [1, 100], θ to ≥ 0.

use crate::controller::{Controller, Decision, Measurement};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window::{self, MAX_CWND, WindowAlgorithm, WindowCore, WindowEvent, packets};

/// Every parameter of PACCP, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "theta",
        unit: Unit::Rate,
        default: 0.0,
        help: "minimum guaranteed rate θ (0: no guarantee, BE or DS class)",
        source: "PACCP eqs. 12 and 16 (θ; W_min = θ·RTT/MSS)",
    },
    ParamSpec {
        key: "omega",
        unit: Unit::Number,
        default: 1.0,
        help: "utility weight ω (1: best effort; 2: the paper's DS and MRG classes)",
        source: "PACCP eq. 6 (U_i = ω_i·U_TCP), §Pricing model",
    },
    ParamSpec {
        key: "r-cos",
        unit: Unit::Number,
        default: 3.0,
        help: "acceleration below W_min (r(x) of eq. 12 when x < θ)",
        source: "PACCP §The scalar parameter selection (r_cos = 3)",
    },
    window::INIT_CWND,
    window::MIN_CWND,
    window::LIMITED_GROWTH,
    ParamSpec {
        key: "ecn",
        unit: Unit::Bool,
        default: 0.0,
        help: "count an ECN echo as congestion (cg = 1) besides loss (off: exactly Reno's signals)",
        source: "PACCP eq. 10 (cg: path congestion indicator, loss or ECN)",
    },
];

/// PACCP, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "paccp",
    summary: "PACCP: price-aware Reno with a minimum guaranteed rate theta and a utility weight omega",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Paccp::new(PaccpConfig::from_params(params)))
}

/// PACCP's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct PaccpConfig {
    /// Minimum guaranteed rate θ, bytes/s (≥ 0).
    pub theta: f64,
    /// Utility weight ω, in [0.01, 1000].
    pub omega: f64,
    /// Acceleration r_cos below W_min, in [1, 100].
    pub r_cos: f64,
    /// Initial window, packets (≥ 1).
    pub init_cwnd_pkts: u32,
    /// Floor of `ssthresh` and of the window after congestion, packets (≥ 1).
    pub min_cwnd_pkts: u32,
    /// ECN echoes count as congestion.
    pub ecn: bool,
    /// Grow only while the window limits the flow ([`window::LIMITED_GROWTH`]).
    pub limited_growth: bool,
}

impl Default for PaccpConfig {
    fn default() -> Self {
        PaccpConfig::from_params(&ParamSet::defaults("paccp", PARAMS))
    }
}

impl PaccpConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        let mut c = PaccpConfig {
            theta: 0.0,
            omega: 1.0,
            r_cos: 3.0,
            init_cwnd_pkts: packets(p.get("init-cwnd")),
            min_cwnd_pkts: packets(p.get("min-cwnd")),
            ecn: p.flag("ecn"),
            limited_growth: p.flag("limited-growth"),
        };
        c.set_class(p);
        c
    }

    /// Take θ, ω and r_cos from `p` (clamped).
    fn set_class(&mut self, p: &ParamSet) {
        self.theta = p.get("theta").max(0.0);
        self.omega = p.get("omega").clamp(0.01, 1000.0);
        self.r_cos = p.get("r-cos").clamp(1.0, 100.0);
    }

    /// `3^(1−ω)`, the weight term of eq. 17.
    fn pow3(&self) -> f64 {
        3f64.powf(1.0 - self.omega)
    }

    /// Slow-start growth per acknowledged byte (`g − 1` of eq. 17), below or above W_min.
    fn ss_gain(&self, below_wmin: bool) -> f64 {
        let r = if below_wmin { self.r_cos } else { 1.0 };
        (3.0 * r - self.pow3()) / 2.0
    }
}

/// A PACCP controller for one flow.
#[derive(Clone, Debug)]
pub struct Paccp {
    cfg: PaccpConfig,
    /// MSS, RTT, loss epoch and timeout state.
    core: WindowCore,
    /// Congestion window, bytes.
    cwnd: u64,
    /// Slow-start threshold, bytes.
    ssthresh: u64,
    /// Bytes acknowledged in congestion avoidance since the last additive increase.
    ca_acked: u64,
    /// The window the current additive epoch started with: the epoch ends when that many bytes
    /// are acknowledged (0: not started; the next report takes the window it finds). Under CD1
    /// the window also grows by `m·acked` within the epoch, so the live window would recede
    /// before the counter at every ACK, and per-ACK reports would never earn `a`.
    ca_window: u64,
}

impl Paccp {
    /// A controller with `cfg`, before its flow starts (assumes a 1448-byte MSS until then).
    pub fn new(cfg: PaccpConfig) -> Self {
        let mut p = Paccp {
            cfg,
            core: WindowCore::new(),
            cwnd: 0,
            ssthresh: 0,
            ca_acked: 0,
            ca_window: 0,
        };
        p.reset();
        p
    }

    /// The configuration in force.
    pub fn config(&self) -> &PaccpConfig {
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

    /// `W_min` of eq. 16 in bytes: θ times the last RTT seen (0 before any RTT sample).
    pub fn w_min(&self) -> u64 {
        (self.cfg.theta * self.core.rtt_us() as f64 / 1e6).min(MAX_CWND as f64) as u64
    }

    fn floor(&self) -> u64 {
        self.core.window_bytes(self.cfg.min_cwnd_pkts)
    }

    /// The window after congestion (the cg laws of eqs. 17 and 18), floored.
    fn reduced(&self) -> u64 {
        let w = self.cwnd as f64;
        let next = if self.in_slow_start() {
            w * (1.0 - self.cfg.pow3() / 2.0)
        } else {
            w * 0.5 + (self.cfg.omega - 1.0) * self.core.mss() as f64
        };
        (next.max(0.0) as u64).max(self.floor())
    }

    /// Slow start on `acked` bytes; returns the bytes left for congestion avoidance.
    fn slow_start(&mut self, mut acked: u64) -> u64 {
        let w_min = self.w_min();
        while acked > 0 && self.cwnd < self.ssthresh {
            let below = self.cwnd < w_min;
            let gain = self.cfg.ss_gain(below);
            let limit = if below {
                w_min.min(self.ssthresh)
            } else {
                self.ssthresh
            };
            let room = limit - self.cwnd;
            let inc = (gain * acked as f64) as u64;
            if inc < room || gain <= 0.0 {
                self.cwnd += inc;
                return 0;
            }
            // Reach the limit with the bytes it takes; the rest goes on under the next law.
            let used = ((room as f64 / gain).ceil() as u64).min(acked);
            self.cwnd = limit;
            acked -= used;
        }
        acked
    }

    /// Congestion avoidance on `acked` bytes (eq. 18): CD1 below W_min, up to W_min, then CD2.
    fn avoid(&mut self, mut acked: u64) {
        let mss = self.core.mss() as f64;
        let w_min = self.w_min();
        if self.cwnd < w_min {
            // CD1: W ← W + m·W + a per epoch, i.e. m + a/W per acknowledged byte.
            let r = self.cfg.r_cos;
            let (mult, add) = ((r - 1.0) / 2.0, (r - 1.0 + self.cfg.omega) * mss);
            let per_byte = mult + add / self.cwnd.max(1) as f64;
            let room = w_min - self.cwnd;
            if per_byte * acked as f64 >= room as f64 {
                // Reach W_min with the bytes it takes; the rest goes on under CD2.
                let used = ((room as f64 / per_byte).ceil() as u64).min(acked);
                self.cwnd = w_min;
                self.ca_acked = 0;
                self.ca_window = 0;
                acked -= used;
            } else {
                self.additive(acked, add);
                self.cwnd = self
                    .cwnd
                    .saturating_add((mult * acked as f64) as u64)
                    .min(MAX_CWND);
                return;
            }
        }
        self.additive(acked, self.cfg.omega * mss);
    }

    /// `add` bytes for every window's worth of `acked` bytes, the fraction carried over in a
    /// byte counter (Reno's congestion avoidance; the counter uses the window the epoch
    /// started with, [`Paccp::ca_window`]).
    fn additive(&mut self, acked: u64, add: f64) {
        let add = (add as u64).max(1);
        if self.ca_window == 0 {
            self.ca_window = self.cwnd.max(1);
        }
        self.ca_acked = self.ca_acked.saturating_add(acked);
        loop {
            let epoch = if self.ca_window == 0 {
                self.cwnd.max(1)
            } else {
                self.ca_window
            };
            if self.ca_acked < epoch || self.cwnd >= MAX_CWND {
                break;
            }
            self.ca_acked -= epoch;
            self.cwnd = (self.cwnd + add).min(MAX_CWND);
            // The next epoch starts with the window the next report finds: within this one
            // CD1 still adds m·acked after this.
            self.ca_window = 0;
        }
    }
}

impl WindowAlgorithm for Paccp {
    type Window = u64;

    fn core_mut(&mut self) -> &mut WindowCore {
        &mut self.core
    }

    fn reset(&mut self) {
        let floor = self.floor();
        self.cwnd = self.core.window_bytes(self.cfg.init_cwnd_pkts).max(floor);
        self.ssthresh = MAX_CWND;
        self.ca_acked = 0;
        self.ca_window = 0;
    }

    fn on_timeout(&mut self, repeated: bool) {
        if !repeated {
            self.ssthresh = self.reduced();
        }
        self.cwnd = self.core.loss_window();
        self.ca_acked = 0;
        self.ca_window = 0;
    }

    fn on_loss(&mut self) {
        self.ssthresh = self.reduced();
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
        self.ca_window = 0;
    }

    fn grow(&mut self, acked: u64) {
        let rest = if self.cwnd < self.ssthresh {
            // Congestion avoidance starts a fresh epoch when it resumes (a threshold handed
            // over by `set_threshold` may send the flow back here).
            self.ca_window = 0;
            self.slow_start(acked)
        } else {
            acked
        };
        if rest > 0 {
            self.avoid(rest);
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
        // The epoch goes on, as the byte counter does (a pool calibrates on every report);
        // it cannot be longer than the window it now has.
        if self.ca_window > self.cwnd {
            self.ca_window = self.cwnd;
        }
    }

    fn threshold(&self) -> Option<u64> {
        (self.ssthresh < MAX_CWND).then_some(self.ssthresh)
    }

    fn set_threshold(&mut self, bytes: u64) {
        self.ssthresh = bytes.max(self.floor());
    }
}

impl Controller for Paccp {
    window::window_controller!("paccp");

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        match self.core.on_measurement(m) {
            // ECN marks outside a loss epoch reduce the window as a loss does.
            WindowEvent::Grow(_)
                if self.cfg.ecn && m.ecn_packets > 0 && self.core.congestion_signal(m) =>
            {
                self.on_loss()
            }
            event => self.respond(event),
        }
        Decision::cwnd(self.cwnd())
    }

    fn set_params(&mut self, params: &ParamSet) -> Result<(), String> {
        if params.algorithm() != "paccp" {
            return Err(format!(
                "paccp cannot take parameters of {}",
                params.algorithm()
            ));
        }
        self.cfg.set_class(params);
        Ok(())
    }
}

/// The optimal allocation of one bottleneck of capacity `b` among BE flows (0, 1), DS flows
/// (0, ω1) and MRG flows (θ, ω2), as the paper derives it (§Rate allocation examples, FBP):
/// each MRG flow gets `max(θ, b·ω2/(n_BE + ω1·n_DS + ω2·n_MRG))`, the rest
/// `B_BD = b − n_MRG·B_MRG` is shared by BE and DS flows in proportion to their weights.
/// Returns the per-flow rates `(BE, DS, MRG)` in the unit of `b` (0 for a class without flows).
pub fn optimal_allocation(
    b: f64,
    n: [u32; 3],
    omega_ds: f64,
    theta: f64,
    omega_mrg: f64,
) -> [f64; 3] {
    let [n_be, n_ds, n_mrg] = n.map(f64::from);
    let weights = n_be + omega_ds * n_ds + omega_mrg * n_mrg;
    if weights <= 0.0 {
        return [0.0; 3];
    }
    let mrg = if n_mrg > 0.0 {
        theta.max(b * omega_mrg / weights)
    } else {
        0.0
    };
    let bd = (b - n_mrg * mrg).max(0.0);
    let bd_weights = n_be + omega_ds * n_ds;
    let be = if bd_weights > 0.0 {
        bd / bd_weights
    } else {
        0.0
    };
    [
        if n_be > 0.0 { be } else { 0.0 },
        if n_ds > 0.0 { omega_ds * be } else { 0.0 },
        mrg,
    ]
}

/// Reno's utility in congestion avoidance (eq. 5): `U(x) = (μ/β + x)·[ln(μ + βx) − 1] −
/// x·[ln(βx) − 1]` with the rate `x` in packets/s, `β = 1/(2·RTT)` (multiplicative decrease
/// rate) and `μ = 1/RTT²` (one packet per RTT per RTT, the additive increase), §NUM eqs. 4–5.
pub fn tcp_utility(x_pkts_per_sec: f64, rtt_s: f64) -> f64 {
    let x = x_pkts_per_sec.max(1e-9);
    let beta = 1.0 / (2.0 * rtt_s);
    let mu = 1.0 / (rtt_s * rtt_s);
    (mu / beta + x) * ((mu + beta * x).ln() - 1.0) - x * ((beta * x).ln() - 1.0)
}

/// The total utility `V = Σ ω_i·U_TCP(x_i)` of eq. 6; `flows` are `(ω, rate in bytes/s)`,
/// `mss` in bytes, `rtt_s` the RTT in seconds.
pub fn total_utility(flows: &[(f64, f64)], mss: f64, rtt_s: f64) -> f64 {
    flows
        .iter()
        .map(|(w, x)| w * tcp_utility(x / mss, rtt_s))
        .sum()
}

/// The total utility of `measured` rates normalised to that of the `optimal` ones (both
/// `(ω, rate in bytes/s)`), as the paper's Figs. 4a/4c/5a plot it: 1 at the optimum. Note that
/// `U_TCP` is logarithmic with a large offset, so this ratio moves little (a class at half its
/// optimal rate costs about 2 %); compare per-class rates with the optimum as well.
pub fn normalized_utility(
    measured: &[(f64, f64)],
    optimal: &[(f64, f64)],
    mss: f64,
    rtt_s: f64,
) -> f64 {
    total_utility(measured, mss, rtt_s) / total_utility(optimal, mss, rtt_s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::Fused;
    use crate::reno::{Reno, RenoConfig};
    use crate::test_support::{self, MSS, START, report, window_full};

    const RTT: u64 = 100_000;

    /// The laws alone: growth on every acknowledged byte (the reports of these tests say
    /// nothing of the flight).
    fn cfg(theta: f64, omega: f64) -> PaccpConfig {
        PaccpConfig {
            theta,
            omega,
            limited_growth: false,
            ..PaccpConfig::default()
        }
    }

    fn started(c: PaccpConfig) -> Paccp {
        test_support::started(Paccp::new(c))
    }

    /// A deterministic pseudo-random sequence (xorshift), so the comparison covers many shapes.
    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    #[test]
    fn be_class_is_reno_exactly() {
        for seed in 1..=20u64 {
            let mut s = seed * 0x9E37_79B9;
            let mut p = started(cfg(0.0, 1.0));
            let mut r = Reno::new(RenoConfig {
                limited_growth: false,
                ..RenoConfig::default()
            });
            r.on_start(&START);
            let mut now = 0;
            for i in 0..3000 {
                now += 1 + xorshift(&mut s) % (2 * RTT);
                let w = u64::from(r.cwnd());
                let acked = match xorshift(&mut s) % 4 {
                    0 => MSS,
                    1 => w,
                    2 => w / 3,
                    _ => xorshift(&mut s) % (2 * w + 1),
                };
                let mut m = report(now, acked, 0, 50_000 + xorshift(&mut s) % RTT);
                match xorshift(&mut s) % 40 {
                    0 => m.lost_packets = 1 + xorshift(&mut s) % 5,
                    1 => m.timeout = true,
                    2 => m.rtt_samples = 0,
                    _ => {}
                }
                let a = r.on_measurement(&m);
                let b = p.on_measurement(&m);
                assert_eq!(a, b, "seed {seed}, report {i}: {m:?}");
                assert_eq!(r.ssthresh(), p.ssthresh(), "seed {seed}, report {i}");
            }
        }
    }

    #[test]
    fn with_limited_growth_the_be_class_is_renos_limited_growth_too() {
        // Reports as a datapath gives them: the window full before every other report's ACKs
        // (the flow limited by it), the others with next to nothing in flight (held back by its
        // application).
        let mut s = 7u64;
        let mut p = started(PaccpConfig {
            limited_growth: true,
            ..cfg(0.0, 1.0)
        });
        let mut r = Reno::new(RenoConfig::default());
        assert!(r.limited_growth());
        r.on_start(&START);
        let mut now = 0;
        for i in 0..1000 {
            now += RTT;
            let w = u64::from(r.cwnd());
            let acked = w / 2 + xorshift(&mut s) % (w / 2 + 1);
            let mut m = report(now, acked, 0, RTT);
            if i % 2 == 0 {
                m = window_full(m, r.cwnd());
            }
            if xorshift(&mut s).is_multiple_of(8) {
                m.lost_packets = 1;
            }
            assert_eq!(
                r.on_measurement(&m),
                p.on_measurement(&m),
                "report {i}: {m:?}"
            );
        }
    }

    #[test]
    fn an_application_limited_flow_keeps_its_window() {
        // An MRG flow far below W_min would grow by r_cos per epoch; with 2 packets in flight
        // and its window unfilled it holds the window, and grows once it fills it.
        let mut p = started(PaccpConfig {
            limited_growth: true,
            ..cfg(1e12, 2.0)
        });
        p.on_measurement(&report(1, 0, 0, RTT));
        let w0 = p.cwnd();
        let mut now = 1;
        for _ in 0..50 {
            now += RTT;
            let mut m = report(now, 2 * MSS, 0, RTT);
            m.bytes_in_flight = 0;
            p.on_measurement(&m);
        }
        assert_eq!(p.cwnd(), w0);
        now += RTT;
        p.on_measurement(&window_full(report(now, u64::from(w0), 0, RTT), w0));
        assert!(p.cwnd() > 2 * w0, "{} after {w0}", p.cwnd());
        // Without the rule the same unfilled reports raise it.
        let mut q = started(cfg(1e12, 2.0));
        q.on_measurement(&report(1, 0, 0, RTT));
        for k in 0..50 {
            let mut m = report(1 + (k + 1) * RTT, 2 * MSS, 0, RTT);
            m.bytes_in_flight = 0;
            q.on_measurement(&m);
        }
        assert!(q.cwnd() > 10 * w0, "{}", q.cwnd());
    }

    #[test]
    fn slow_start_follows_eq_17() {
        // CD2 with ω = 2: W ← ((3 − 1/3)/2 + 1)·W per RTT of ACKs.
        let mut p = started(cfg(0.0, 2.0));
        let w = u64::from(p.cwnd());
        p.on_measurement(&report(RTT, w, 0, RTT));
        let want = ((3.0 - 1.0 / 3.0) / 2.0 + 1.0) * w as f64;
        assert!(
            (p.cwnd() as f64 - want).abs() <= 1.0,
            "{} vs {want}",
            p.cwnd()
        );
        // CD1 (θ far above): ((3·3 − 3^(1−ω))/2 + 1)·W.
        let mut p = started(cfg(1e12, 1.0));
        p.on_measurement(&report(1, 0, 0, RTT)); // an RTT sample first
        let w = u64::from(p.cwnd());
        p.on_measurement(&report(RTT, w, 0, RTT));
        assert_eq!(u64::from(p.cwnd()), 5 * w);
        // Congestion in slow start: (1 − 3^(1−ω)/2)·W.
        let mut p = started(cfg(0.0, 2.0));
        p.calibrate(Fused::Cwnd(60 * MSS as u32));
        p.on_measurement(&report(RTT, MSS, 1, RTT));
        let want = (1.0 - 1.0 / 6.0) * 60.0 * MSS as f64;
        assert!((p.cwnd() as f64 - want).abs() <= 1.0);
        assert!(!p.in_slow_start());
    }

    /// Drive a flow into congestion avoidance at `w` packets.
    fn in_ca(c: PaccpConfig, w: u64) -> Paccp {
        let mut p = started(c);
        p.calibrate(Fused::Cwnd((w * MSS) as u32));
        p.on_measurement(&report(RTT, MSS, 1, RTT));
        p.calibrate(Fused::Cwnd((w * MSS) as u32));
        // Leave the loss epoch.
        p.on_measurement(&report(3 * RTT, 0, 0, RTT));
        assert!(!p.in_slow_start());
        p
    }

    #[test]
    fn cd1_grows_the_same_on_per_ack_reports_as_on_one_per_rtt() {
        // CD1 over one epoch of W = 20 packets: 2W + 3 packets (eq. 18 at r_cos = 3, ω = 1),
        // whether the epoch's bytes come in one report or one MSS per report.
        let theta = (100 * MSS) as f64 / (RTT as f64 / 1e6);
        let mut one = in_ca(cfg(theta, 1.0), 20);
        let mut each = in_ca(cfg(theta, 1.0), 20);
        let w = u64::from(one.cwnd());
        one.on_measurement(&report(4 * RTT, w, 0, RTT));
        for i in 0..w / MSS {
            each.on_measurement(&report(3 * RTT + (i + 1) * RTT * MSS / w, MSS, 0, RTT));
        }
        let want = 2 * w + 3 * MSS;
        for (how, p) in [("one report", &one), ("per ACK", &each)] {
            assert!(
                u64::from(p.cwnd()).abs_diff(want) <= 2,
                "{how}: {} vs {want}",
                p.cwnd()
            );
        }
    }

    #[test]
    fn congestion_avoidance_follows_eq_18() {
        // CD2: W + ω per RTT.
        let mut p = in_ca(cfg(0.0, 2.0), 40);
        let mut now = 3 * RTT;
        for _ in 0..10 {
            now += RTT;
            let w = u64::from(p.cwnd());
            p.on_measurement(&report(now, w, 0, RTT));
        }
        assert_eq!(u64::from(p.cwnd()), 60 * MSS);
        // cg: W/2 + (ω − 1).
        now += RTT;
        p.on_measurement(&report(now, MSS, 1, RTT));
        assert_eq!(u64::from(p.cwnd()), 30 * MSS + MSS);
        // CD1: (r+1)W/2 + (r − 1 + ω) per RTT, until W_min (θ·RTT = 100 packets here).
        let theta = (100 * MSS) as f64 / (RTT as f64 / 1e6);
        let mut p = in_ca(cfg(theta, 1.0), 20);
        let w = u64::from(p.cwnd());
        p.on_measurement(&report(4 * RTT, w, 0, RTT));
        let want = 2 * w + 3 * MSS; // (3+1)/2·W + (3 − 1 + 1)
        assert!(
            u64::from(p.cwnd()).abs_diff(want) <= 2,
            "{} vs {want}",
            p.cwnd()
        );
        assert_eq!(p.w_min(), 100 * MSS);
    }

    #[test]
    fn params_change_on_a_live_flow_without_touching_the_window() {
        let mut p = in_ca(cfg(0.0, 1.0), 40);
        let w = p.cwnd();
        let mut params = SPEC.defaults();
        params.set_value("omega", 3.0);
        p.set_params(&params).unwrap();
        assert_eq!(p.cwnd(), w);
        let now = 4 * RTT;
        p.on_measurement(&report(now, u64::from(w), 0, RTT));
        assert_eq!(u64::from(p.cwnd()), u64::from(w) + 3 * MSS);
        let reno = crate::reno::SPEC.defaults();
        assert!(p.set_params(&reno).is_err());
    }

    #[test]
    fn optimal_allocation_matches_the_papers_examples() {
        // §Rate allocation examples (FBP): one flow of each class per VM, ω1 = ω2 = 2.
        let b = 1.0;
        let a = optimal_allocation(b, [3, 3, 3], 2.0, b / 6.0, 2.0);
        for (x, want) in a.iter().zip([1.0 / 18.0, 1.0 / 9.0, 1.0 / 6.0]) {
            assert!((x - want).abs() < 1e-12, "{a:?}");
        }
        let a = optimal_allocation(b, [3, 3, 3], 2.0, b / 20.0, 2.0);
        for (x, want) in a.iter().zip([1.0 / 15.0, 2.0 / 15.0, 2.0 / 15.0]) {
            assert!((x - want).abs() < 1e-12, "{a:?}");
        }
        // §Optimality test: 4 BE, 2 DS, 2 MRG on a 40 Gbit/s link.
        let a = optimal_allocation(40.0, [4, 2, 2], 2.0, 2.0, 1.0);
        assert_eq!(a, [4.0, 8.0, 4.0]);
        let a = optimal_allocation(40.0, [4, 2, 2], 2.0, 7.0, 2.0);
        assert!((a[0] - 3.25).abs() < 1e-12 && (a[1] - 6.5).abs() < 1e-12 && a[2] == 7.0);
        // §Testbed: 1 Gbit/s, one flow of each class, MRG (400 Mbit/s, 2).
        let a = optimal_allocation(1000.0, [1, 1, 1], 2.0, 400.0, 2.0);
        assert_eq!(a, [200.0, 400.0, 400.0]);
    }

    #[test]
    fn normalized_utility_is_one_at_the_optimum_and_lower_elsewhere() {
        // 1 Gbit/s testbed: BE/DS/MRG at 200/400/400 Mbit/s is the optimum.
        let mbit = |x: f64| x * 125_000.0;
        let opt = [(1.0, mbit(200.0)), (2.0, mbit(400.0)), (2.0, mbit(400.0))];
        assert!((normalized_utility(&opt, &opt, 1448.0, 0.001) - 1.0).abs() < 1e-12);
        let off = [(1.0, mbit(300.0)), (2.0, mbit(300.0)), (2.0, mbit(400.0))];
        let u = normalized_utility(&off, &opt, 1448.0, 0.001);
        assert!(u < 1.0 && u > 0.9, "{u}");
        // Eq. 5 is increasing and concave in the rate.
        let (a, b, c) = (
            tcp_utility(1e4, 0.001),
            tcp_utility(2e4, 0.001),
            tcp_utility(3e4, 0.001),
        );
        assert!(a < b && b < c && b - a > c - b);
    }
}
