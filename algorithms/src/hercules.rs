//! Hercules (Rozen-Schiff, Navon, Pechtalt, Bruckman, "Hercules: Heterogeneous Requirements
//! Congestion Control Protocol") as a CCP algorithm: an online learner on the shared
//! monitor-interval engine ([`crate::mi`]) whose utility carries a *requirement penalty*, so that
//! flows with different bandwidth requirements `(a, b)` converge to the Heterogeneous
//! Requirements Fairness (HRF) allocation instead of a fair share.
//!
//! # Requirements and HRF
//!
//! Every flow has a minimum `a` and a maximum `b` rate (`min`, `max` parameters; `max` defaults to
//! `max-ratio · a` and is capped there, 1.5·a as the authors' code caps it). Its normalised rate is
//! `x̄ = (x − a)/(b − a)`: 0 at the minimum, 1 at the maximum. HRF (§III-A) is the lexicographic
//! max-min vector of the normalised rates; on one bottleneck it is a water-filling of a common
//! normalised level ([`hrf_allocation`]), which the tests and reports use as the reference.
//! An application is *bounded* (`bounded=true`: it never sends above `b`; the controller caps its
//! rate at `b`) or *unbounded* (it takes whatever the learner finds).
//!
//! # Utility (§III-B, eq. 2, as the authors' implementation computes it)
//!
//! `U = x^t − β·L·x − x·H(x̄)·(γ·max(0, dRTT/dt) + φ·σ(RTT))` with `x` the MI's sending rate in
//! Mbit/s, `L` its loss fraction, `dRTT/dt` the engine's filtered RTT gradient and `σ(RTT)` the
//! standard deviation of the MI's RTT points with the largest one dropped, in µs, counted as 0
//! below `sigma-floor` (500 µs). `H(x̄) = arctan(D·(x̄ − ½))/π + ½ ∈ (0, 1)` ([`penalty`]) with
//! `D = 2`: a flow below its minimum pays little for latency and keeps pushing, a flow above its
//! maximum pays almost the full price and yields. Constants `t = 0.9`, `β = 11.35`, `γ = 25`,
//! `φ = 7.5·10⁻⁵` per µs of σ.
//!
//! The paper prints the bracket as `x·H(x̄)·[β·L − γ·max(…) − φ·σ]` (which would *reward*
//! latency) and gives `φ = 750` without a unit. `paper-form=true` keeps the paper's grouping —
//! the loss term inside the bracket, weighted by `H` — with every term subtracted; `phi` then is
//! whatever per-µs weight the user gives it. The default is the implementation's form.
//!
//! `increase-only=true` charges the latency terms (gradient and σ) only to the higher-rate MI of
//! a probing pair, as the authors' implementation does for MIs that do not increase the rate
//! (their moving state also re-scores the previous MI; the engine here scores each MI once, so
//! moves keep both terms). Off by default: it moves the five-level figures a little toward HRF
//! but a Hercules flow then yields to a cubic flow of the same requirement (0.76 of its rate).
//!
//! `x̄` is computed from `min(ack-rate EWMA, sending rate)`: the EWMA (gain `ack-ewma` = 0.25) of
//! the delivery rate of completed MIs, updated once per MI when the MI is first scored (so an
//! MI's own delivery rate is in the EWMA that normalises it). A flow that sends more than it gets
//! delivered is normalised by what it gets.
//!
//! # States (§III-C; the engine's slow start, probing and moving state)
//!
//! - **Slow start** from `min(init-cwnd·MSS/init-rtt, a)` (IW10 over 100 ms, 1.16 Mbit/s with a
//!   1448-byte MSS, or the minimum requirement if lower; ALGORITHMS.md's start, where the
//!   paper's text starts from the lower of a predefined 5 kbit/s and `a`, §III-C), doubling
//!   every MI while the utility rises and the rate stays below `min(b, 1.5·a)` (the engine's
//!   `slow_start_cap`; `slow-start-ratio`, 1.5 as ALGORITHMS.md, whatever `max-ratio` is); when the
//!   utility drops it falls back to the previous MI's rate. A retransmission timeout before any
//!   MI is scored halves the rate but not below the starting rate (the engine's rule): at
//!   10 kbit/s a rate halved below it would make MIs of seconds.
//! - **Probing**: two pairs of MIs at `x(1 ± ε)`, `ε = 0.05`, in random order within a pair; a
//!   decision only when both pairs agree.
//! - **Moving**: in the decided direction, one MI per step, until the utility drops; then back to
//!   the previous rate and probing. Step sizes are PCC's (Hercules's code is built on PCC's):
//!   `θ₀ = 1` Mbit/s per unit of utility gradient, confidence amplifier, change boundary
//!   `ω = 0.05 + 0.05·k` of the rate — and at least `max(1 kbit/s, 1 % of the rate)`.
//! - **MI length** `max(min RTT, 20 ms)`, ×1.5 for flows whose minimum requirement is at most
//!   100 Mbit/s, and at least `mi-min-packets` (2) packets at the MI's rate: at 10 kbit/s with a
//!   1448-byte MSS one packet leaves every 1.16 s, and an MI must hold a packet to be scored (the
//!   QUIC implementation sends smaller packets; a CCP datapath sends MSS-sized ones).
//! - **Minimum rate** 5 kbit/s; a bounded flow's maximum is `b`.
//!
//! # Run-time requirement changes
//!
//! [`Controller::set_params`] takes a new parameter set on a live flow: the requirements, the
//! bound and the utility's constants change from the next MI; the learner's state (rate, state,
//! ack-rate EWMA) is kept, except that a bounded flow above its new maximum is brought down to it
//! at once.
//!
//! # Choices where the paper is silent
//!
//! Everything the engine documents (MI attribution in CCP, the RTT-gradient fit, the loss noise
//! filter, the slow-start loss allowance); σ(RTT) over the MI's per-report mean RTTs (the agent
//! sees reports, not packets); the 2-packet MI floor; the EWMA update per MI.
//!
//! `round-loss-test=true` makes the loss noise filter compare all `+` probes of a probing round
//! against all its `−` probes instead of each pair's ([`LossTest::Round`]): twice the packets, so
//! a loss the `+` probes cause stands out of the noise sooner. Off by default: against bbr it
//! moves Fig. 12's ratio from 0.72 to 0.63, further from the paper's band (with the BBR of
//! before its ProbeRTT fix, from 1.12 to 1.79; docs/results/hercules.md).

use crate::controller::{Controller, Decision, FlowStart, Fused};
use crate::mi::{
    Amplifier, GradientFilter, InitialRate, LossFilter, LossTest, MAX_RATE, MBIT, MiConfig,
    MiEngine, MiLength, MiStats, Role, RttBase, Utility,
};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window;

const SOURCE_PAPER: &str = "Hercules (Rozen-Schiff et al.) §III-B eq. 2";
const SOURCE_IMPL: &str = "Hercules authors' QUIC implementation (ALGORITHMS.md)";
const SOURCE_RC: &str = "Hercules §III-C; ALGORITHMS.md";

/// Every parameter of Hercules, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "min",
        unit: Unit::Rate,
        default: MBIT,
        help: "minimum requirement a of the flow",
        source: "Hercules §II-B (per-connection requirement; project default 1 Mbit/s)",
    },
    ParamSpec {
        key: "max",
        unit: Unit::Rate,
        default: 0.0,
        help: "maximum requirement b of the flow (0, or any value at or below min: max-ratio * min; capped at max-ratio * min)",
        source: "Hercules §II-B; the cap: ALGORITHMS.md (b capped at 1.5 a)",
    },
    ParamSpec {
        key: "bounded",
        unit: Unit::Bool,
        default: 0.0,
        help: "bounded application: never send above the maximum requirement b",
        source: "Hercules §V-A (bounded and unbounded applications)",
    },
    ParamSpec {
        key: "max-ratio",
        unit: Unit::Number,
        default: 1.5,
        help: "b is at most max-ratio * a (and defaults to it)",
        source: SOURCE_IMPL,
    },
    ParamSpec {
        key: "d",
        unit: Unit::Number,
        default: 2.0,
        help: "steepness D of the requirement penalty H = atan(D (x_norm - 1/2))/pi + 1/2",
        source: "Hercules §III-B eq. 1 and §V-B (D = 2 suggested)",
    },
    ParamSpec {
        key: "t",
        unit: Unit::Number,
        default: 0.9,
        help: "throughput exponent t of the utility (x in Mbit/s)",
        source: SOURCE_PAPER,
    },
    ParamSpec {
        key: "beta",
        unit: Unit::Number,
        default: 11.35,
        help: "loss penalty beta (tolerates up to 5 % random loss)",
        source: SOURCE_PAPER,
    },
    ParamSpec {
        key: "gamma",
        unit: Unit::Number,
        default: 25.0,
        help: "RTT-gradient penalty gamma (weighted by H)",
        source: SOURCE_PAPER,
    },
    ParamSpec {
        key: "phi",
        unit: Unit::Number,
        default: 7.5e-5,
        help: "RTT-deviation penalty phi per microsecond of sigma(RTT) (weighted by H)",
        source: "Hercules authors' implementation (the paper prints 750 without a unit)",
    },
    ParamSpec {
        key: "sigma-floor",
        unit: Unit::Micros,
        default: 500.0,
        help: "sigma(RTT) below this counts as 0",
        source: SOURCE_IMPL,
    },
    ParamSpec {
        key: "paper-form",
        unit: Unit::Bool,
        default: 0.0,
        help: "the paper's grouping: loss inside the H-weighted bracket (default: the implementation's, loss unweighted)",
        source: SOURCE_PAPER,
    },
    ParamSpec {
        key: "increase-only",
        unit: Unit::Bool,
        default: 0.0,
        help: "charge the latency terms (RTT gradient, sigma(RTT)) only to the higher-rate MI of a probing pair, not to the lower one",
        source: "Hercules authors' implementation (latency penalties only on increasing MIs); off by default, docs/results/hercules.md has both",
    },
    ParamSpec {
        key: "ack-ewma",
        unit: Unit::Number,
        default: 0.25,
        help: "gain of the ack-rate EWMA; the normalised rate uses min(ack-rate EWMA, sending rate)",
        source: SOURCE_IMPL,
    },
    ParamSpec {
        key: "epsilon",
        unit: Unit::Number,
        default: 0.05,
        help: "probing step: probe MIs send at x(1 + epsilon) and x(1 - epsilon)",
        source: SOURCE_RC,
    },
    ParamSpec {
        key: "probe-pairs",
        unit: Unit::Count,
        default: 2.0,
        help: "pairs of probe MIs that must agree before moving",
        source: SOURCE_RC,
    },
    ParamSpec {
        key: "theta0",
        unit: Unit::Number,
        default: 1.0,
        help: "Mbit/s of rate change per unit of utility gradient",
        source: "PCC Vivace §4.2 (Hercules's code is built on PCC's)",
    },
    ParamSpec {
        key: "omega0",
        unit: Unit::Number,
        default: 0.05,
        help: "initial change boundary: |change| <= omega * rate",
        source: "PCC Vivace §4.2 (Hercules's code is built on PCC's)",
    },
    ParamSpec {
        key: "omega-step",
        unit: Unit::Number,
        default: 0.05,
        help: "boundary increment per consecutive clipped move",
        source: "ALGORITHMS.md (vivace: omega = 0.05 + 0.05k)",
    },
    ParamSpec {
        key: "min-step",
        unit: Unit::Rate,
        default: 125.0,
        help: "smallest rate change (and min-step-fraction of the rate)",
        source: "ALGORITHMS.md (Hercules: max(1 kbit/s, 1 % of the rate))",
    },
    ParamSpec {
        key: "min-step-fraction",
        unit: Unit::Number,
        default: 0.01,
        help: "smallest rate change as a fraction of the rate",
        source: "ALGORITHMS.md (Hercules: max(1 kbit/s, 1 % of the rate))",
    },
    ParamSpec {
        key: "min-rate",
        unit: Unit::Rate,
        default: 625.0,
        help: "minimum sending rate",
        source: "ALGORITHMS.md; 5 kbit/s is the paper's predefined initial rate (§III-C)",
    },
    ParamSpec {
        key: "mi-floor",
        unit: Unit::Micros,
        default: 20_000.0,
        help: "an MI lasts at least this long (times the MI multiplier)",
        source: "ALGORITHMS.md (interval = max(min RTT, 20 ms))",
    },
    ParamSpec {
        key: "mi-rtts",
        unit: Unit::Number,
        default: 1.5,
        help: "MI length in max(min RTT, mi-floor) for flows with a <= 100 Mbit/s (1 above)",
        source: "ALGORITHMS.md (x 1.5 for requirements <= 100 Mbit/s)",
    },
    ParamSpec {
        key: "mi-min-packets",
        unit: Unit::Packets,
        default: 2.0,
        help: "an MI lasts long enough to send at least this many packets",
        source: "project choice (10 kbit/s flows send one MSS packet per 1.16 s)",
    },
    ParamSpec {
        key: "reports-per-mi",
        unit: Unit::Count,
        default: 8.0,
        help: "measurement reports per MI (RTT-gradient and sigma(RTT) points)",
        source: "project choice (as vivace)",
    },
    ParamSpec {
        key: "latency-filter",
        unit: Unit::Number,
        default: 0.01,
        help: "RTT gradients below this (and negative ones) count as 0",
        source: "PCC's latency noise filter (Hercules's code is built on PCC's)",
    },
    ParamSpec {
        key: "gradient-confidence",
        unit: Unit::Number,
        default: 2.0,
        help: "an RTT-gradient fit counts only if its slope is at least this many standard errors (0: every slope above latency-filter counts)",
        source: "project choice (as vivace; PCC's QUIC code, on which Hercules was built, counts a slope only above the fit's relative residual error)",
    },
    crate::mi::TREND_MIS,
    ParamSpec {
        key: "loss-confidence",
        unit: Unit::Number,
        default: 2.0,
        help: "compared MIs whose loss fractions differ by less than this many standard errors use their pooled fraction (0: off)",
        source: "project choice (as vivace)",
    },
    ParamSpec {
        key: "round-loss-test",
        unit: Unit::Bool,
        default: 0.0,
        help: "the loss noise filter compares all + probes of a probing round against all its - probes (twice one pair's packets) instead of each pair's",
        source: "project choice (off: per pair, as vivace; docs/results/hercules.md, Fig. 12)",
    },
    ParamSpec {
        key: "slow-start-ratio",
        unit: Unit::Number,
        default: 1.5,
        help: "slow start doubles while the rate is below min(b, slow-start-ratio * a), whatever max-ratio is (at least 1)",
        source: "ALGORITHMS.md (slow start while x < min(b, 1.5 a))",
    },
    ParamSpec {
        key: "slow-start-loss-allowance",
        unit: Unit::Packets,
        default: 50.0,
        help: "slow-start MIs do not count the first this many packets lost in them",
        source: "PCC's code (its starting state ignores up to 50 lost packets)",
    },
    window::INIT_CWND,
    ParamSpec {
        key: "init-rtt",
        unit: Unit::Micros,
        default: 100_000.0,
        help: "the first MI sends min(init-cwnd * MSS / init-rtt, min)",
        source: SOURCE_RC,
    },
    ParamSpec {
        key: "seed",
        unit: Unit::Count,
        default: 1.0,
        help: "seed of the probing order (mixed with the flow's start time)",
        source: "project choice (deterministic runs)",
    },
];

/// Hercules, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "hercules",
    summary: "Hercules: online learning toward heterogeneous-requirement fairness, requirements (min, max) per flow",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Hercules::new(HerculesConfig::from_params(params)))
}

/// MIs of flows whose minimum requirement is at most this are `mi-rtts` long (bytes/s).
const LONG_MI_BELOW: f64 = 100.0 * MBIT;

// ---------------------------------------------------------------------------------------------
// Requirements, H and HRF
// ---------------------------------------------------------------------------------------------

/// A flow's requirements, bytes/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Requirements {
    /// Minimum requirement a.
    pub min: f64,
    /// Maximum requirement b (> a).
    pub max: f64,
    /// The application never sends above b.
    pub bounded: bool,
}

impl Requirements {
    /// Requirements from a minimum, a maximum (≤ min: `ratio·min`) capped at `ratio·min`.
    pub fn new(min: f64, max: f64, ratio: f64, bounded: bool) -> Self {
        let min = min.max(1.0);
        let ratio = ratio.max(1.0 + 1e-6);
        let cap = ratio * min;
        let max = if max <= min { cap } else { max.min(cap) };
        Requirements { min, max, bounded }
    }

    /// The normalised rate `(x − a)/(b − a)` of `x` bytes/s.
    pub fn normalized(&self, x: f64) -> f64 {
        (x - self.min) / (self.max - self.min).max(1e-9)
    }
}

/// The requirement penalty `H(x̄) = arctan(D·(x̄ − ½))/π + ½` (eq. 1), in (0, 1).
pub fn penalty(d: f64, xbar: f64) -> f64 {
    (d * (xbar - 0.5)).atan() / std::f64::consts::PI + 0.5
}

/// The HRF allocation of one bottleneck of `capacity` bytes/s: the lexicographic max-min vector
/// of normalised rates, by water-filling a common normalised level λ with every rate
/// `x_i = clamp(a_i + λ·(b_i − a_i), 0, cap_i)` (`cap_i = b_i` for a bounded application, none
/// otherwise) and `Σ x_i = capacity` (or every bounded flow at its maximum if that is less).
/// On one link a flow's rate only ever trades against the common level, so this water-filling is
/// the lexicographic optimum: raising any flow above it lowers one at the level.
pub fn hrf_allocation(capacity: f64, reqs: &[Requirements]) -> Vec<f64> {
    let at = |lambda: f64| -> Vec<f64> {
        reqs.iter()
            .map(|r| {
                let x = r.min + lambda * (r.max - r.min);
                let hi = if r.bounded { r.max } else { f64::INFINITY };
                x.clamp(0.0, hi)
            })
            .collect()
    };
    let total = |lambda: f64| at(lambda).iter().sum::<f64>();
    if reqs.is_empty() {
        return vec![];
    }
    if reqs.iter().all(|r| r.bounded) && total(1.0) <= capacity {
        return at(1.0);
    }
    let mut lo = reqs
        .iter()
        .map(|r| -r.min / (r.max - r.min))
        .fold(f64::INFINITY, f64::min);
    let mut hi = 1.0;
    while total(hi) < capacity {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if total(mid) < capacity {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    at(0.5 * (lo + hi))
}

// ---------------------------------------------------------------------------------------------
// Utility
// ---------------------------------------------------------------------------------------------

/// Hercules's utility and the state it needs (the requirements and the ack-rate EWMA).
#[derive(Clone, Debug, PartialEq)]
pub struct HerculesUtility {
    pub t: f64,
    pub beta: f64,
    pub gamma: f64,
    /// Per µs of σ(RTT).
    pub phi: f64,
    /// σ(RTT) below this counts as 0, µs.
    pub sigma_floor_us: f64,
    pub d: f64,
    /// The paper's grouping (loss weighted by H).
    pub paper_form: bool,
    /// Latency terms only on the higher-rate MI of a probing pair.
    pub increase_only: bool,
    pub req: Requirements,
    /// Gain of the ack-rate EWMA.
    pub ack_gain: f64,
    /// The ack-rate EWMA, bytes/s.
    pub ack_rate: Option<f64>,
    /// The last MI folded into the EWMA.
    last_id: Option<u64>,
}

impl HerculesUtility {
    /// The utility of sending at `x_mbit` Mbit/s at normalised rate `xbar`, with loss fraction
    /// `loss`, RTT gradient `gradient` and σ(RTT) `sigma_us` (already floored).
    pub fn value(&self, x_mbit: f64, xbar: f64, loss: f64, gradient: f64, sigma_us: f64) -> f64 {
        let h = penalty(self.d, xbar);
        let latency = self.gamma * gradient.max(0.0) + self.phi * sigma_us;
        if self.paper_form {
            x_mbit.powf(self.t) - x_mbit * h * (self.beta * loss + latency)
        } else {
            x_mbit.powf(self.t) - self.beta * loss * x_mbit - x_mbit * h * latency
        }
    }

    /// σ(RTT) of an MI as the utility counts it: the standard deviation of its RTT points with
    /// the largest dropped, 0 below the floor (or with fewer than two points left).
    pub fn sigma_us(&self, mi: &MiStats) -> f64 {
        let mut v: Vec<f64> = mi.rtt.iter().map(|p| p.rtt_us).collect();
        if v.len() < 3 {
            return 0.0;
        }
        let (imax, _) =
            v.iter().enumerate().fold(
                (0, f64::NEG_INFINITY),
                |b, (i, &x)| if x > b.1 { (i, x) } else { b },
            );
        v.swap_remove(imax);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let s = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        if s < self.sigma_floor_us { 0.0 } else { s }
    }

    /// Fold an MI's delivery rate into the ack-rate EWMA (once per MI).
    fn observe(&mut self, mi: &MiStats) {
        if self.last_id.is_some_and(|l| mi.id <= l) {
            return;
        }
        self.last_id = Some(mi.id);
        let thr = mi.throughput();
        self.ack_rate = Some(match self.ack_rate {
            None => thr,
            Some(e) => e + self.ack_gain * (thr - e),
        });
    }

    /// The normalised rate an MI is scored at: of `min(ack-rate EWMA, sending rate)`.
    pub fn xbar(&self, mi: &MiStats) -> f64 {
        let x = self.ack_rate.map_or(mi.rate, |e| e.min(mi.rate));
        self.req.normalized(x)
    }
}

impl Utility for HerculesUtility {
    fn utility(&mut self, mi: &MiStats) -> Option<f64> {
        self.observe(mi);
        let xbar = self.xbar(mi);
        let lower_probe = matches!(
            mi.role,
            Role::Probe { up: false, .. } | Role::Check { up: false, .. }
        );
        let (gradient, sigma) = if self.increase_only && lower_probe {
            (0.0, 0.0)
        } else {
            (mi.rtt_gradient, self.sigma_us(mi))
        };
        Some(self.value(mi.rate_in(MBIT), xbar, mi.loss_fraction(), gradient, sigma))
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration and controller
// ---------------------------------------------------------------------------------------------

/// Hercules's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct HerculesConfig {
    pub utility: HerculesUtility,
    /// The rate control, with the requirement-dependent caps applied.
    pub mi: MiConfig,
    /// `init-cwnd` packets over `init-rtt` µs: the first MI's rate before the `min` cap.
    pub init_packets: f64,
    pub init_rtt_us: f64,
    /// Which probes a probing round's loss test compares (`round-loss-test`).
    pub loss_test: LossTest,
}

impl Default for HerculesConfig {
    fn default() -> Self {
        HerculesConfig::from_params(&ParamSet::defaults("hercules", PARAMS))
    }
}

impl HerculesConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        let count = |k: &str| p.get(k).clamp(1.0, 1e6) as u32;
        let req = Requirements::new(
            p.get("min"),
            p.get("max"),
            p.get("max-ratio"),
            p.flag("bounded"),
        );
        let mi_rtts = if req.min <= LONG_MI_BELOW {
            p.get("mi-rtts").max(0.01)
        } else {
            1.0
        };
        let init_packets: f64 = window::packets(p.get("init-cwnd")).into();
        let init_rtt_us = p.get("init-rtt").max(1.0);
        let min_rate = p.get("min-rate").clamp(1.0, MAX_RATE);
        let mi = MiConfig {
            epsilon: p.get("epsilon").clamp(1e-4, 0.5),
            probe_pairs: count("probe-pairs").min(16),
            random_order: true,
            theta0: p.get("theta0").max(0.0),
            amplifier: Amplifier::Vivace,
            omega0: p.get("omega0").clamp(1e-4, 1.0),
            omega_step: p.get("omega-step").max(0.0),
            min_step: p.get("min-step").max(0.0),
            min_step_fraction: p.get("min-step-fraction").max(0.0),
            double_check: false,
            min_rate,
            max_rate: if req.bounded { req.max } else { MAX_RATE },
            length: MiLength {
                base: RttBase::Min,
                rtts: mi_rtts,
                floor_us: p.get("mi-floor").max(0.0),
                min_packets: p.get("mi-min-packets").max(0.0),
            },
            reports_per_mi: count("reports-per-mi"),
            gradient: GradientFilter {
                threshold: p.get("latency-filter").max(0.0),
                min_t: p.get("gradient-confidence").max(0.0),
                trend_mis: p.get("trend-mis").clamp(0.0, 1000.0) as usize,
                ..GradientFilter::default()
            },
            loss_filter: LossFilter {
                min_z: p.get("loss-confidence").max(0.0),
            },
            slow_start: true,
            slow_start_cap: req.max.min(p.get("slow-start-ratio").max(1.0) * req.min),
            slow_start_loss_allowance: p.get("slow-start-loss-allowance").max(0.0),
            moving: true,
            initial_rate: InitialRate::Fixed(
                req.min.min(init_packets * 1448.0 * 1e6 / init_rtt_us),
            ),
            rate_unit: MBIT,
            seed: p.get("seed").max(0.0) as u64,
        };
        HerculesConfig {
            utility: HerculesUtility {
                t: p.get("t").clamp(0.0, 1.0),
                beta: p.get("beta").max(0.0),
                gamma: p.get("gamma").max(0.0),
                phi: p.get("phi").max(0.0),
                sigma_floor_us: p.get("sigma-floor").max(0.0),
                d: p.get("d").max(0.0),
                paper_form: p.flag("paper-form"),
                increase_only: p.flag("increase-only"),
                req,
                ack_gain: p.get("ack-ewma").clamp(0.0, 1.0),
                ack_rate: None,
                last_id: None,
            },
            mi,
            init_packets,
            init_rtt_us,
            loss_test: if p.flag("round-loss-test") {
                LossTest::Round
            } else {
                LossTest::Pair
            },
        }
    }
}

/// A Hercules controller for one flow.
pub struct Hercules {
    engine: MiEngine<HerculesUtility>,
    init_packets: f64,
    init_rtt_us: f64,
}

impl Hercules {
    /// A controller with `cfg`, before its flow starts.
    pub fn new(cfg: HerculesConfig) -> Self {
        let mut engine = MiEngine::new(cfg.mi, cfg.utility);
        engine.set_loss_test(cfg.loss_test);
        Hercules {
            engine,
            init_packets: cfg.init_packets,
            init_rtt_us: cfg.init_rtt_us,
        }
    }

    /// The monitor-interval engine (state, statistics of the last MIs, the utility).
    pub fn engine(&self) -> &MiEngine<HerculesUtility> {
        &self.engine
    }

    /// The flow's requirements.
    pub fn requirements(&self) -> Requirements {
        self.engine.utility().req
    }
}

impl Controller for Hercules {
    fn name(&self) -> &'static str {
        "hercules"
    }

    crate::mi::engine_controller!(delegate);

    fn on_start(&mut self, start: &FlowStart) -> Decision {
        let mss = if start.mss > 0 {
            f64::from(start.mss)
        } else {
            self.engine.mss()
        };
        let a = self.requirements().min;
        let r0 = a.min(self.init_packets * mss * 1e6 / self.init_rtt_us);
        self.engine.config_mut().initial_rate = InitialRate::Fixed(r0);
        self.engine.start(start)
    }

    fn set_params(&mut self, params: &ParamSet) -> Result<(), String> {
        if params.algorithm() != "hercules" {
            return Err(format!(
                "hercules cannot take parameters of {}",
                params.algorithm()
            ));
        }
        let new = HerculesConfig::from_params(params);
        let kept = self.engine.config().initial_rate;
        let u = self.engine.utility_mut();
        let (ack_rate, last_id) = (u.ack_rate, u.last_id);
        *u = HerculesUtility {
            ack_rate,
            last_id,
            ..new.utility
        };
        *self.engine.config_mut() = MiConfig {
            initial_rate: kept,
            ..new.mi
        };
        self.engine.set_loss_test(new.loss_test);
        self.init_packets = new.init_packets;
        self.init_rtt_us = new.init_rtt_us;
        let req = new.utility.req;
        if req.bounded && self.engine.rate() > req.max {
            self.engine.calibrate(Fused::Rate(req.max.round() as u64));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mi::testpath::FluidPath;
    use crate::mi::{Role, RttPoint, State};

    const KBIT: f64 = 125.0;

    fn stats(id: u64, rate_mbit: f64, delivered_mbit: f64, lost: f64, rtt: &[f64]) -> MiStats {
        // A 30 ms MI.
        let bytes = delivered_mbit * MBIT * 0.03;
        MiStats {
            id,
            role: Role::Move,
            rate: rate_mbit * MBIT,
            start_us: 0,
            end_us: 30_000,
            delivered_bytes: bytes,
            lost_packets: lost,
            excused_packets: 0.0,
            mss: 1448.0,
            rtt: rtt
                .iter()
                .enumerate()
                .map(|(i, &r)| RttPoint {
                    send_us: i as f64 * 3_000.0,
                    rtt_us: r,
                })
                .collect(),
            rtt_gradient: 0.0,
            pooled_loss: None,
        }
    }

    fn config(pairs: &[(&str, &str)]) -> HerculesConfig {
        HerculesConfig::from_params(&SPEC.params_from(pairs.iter().copied()).unwrap())
    }

    #[test]
    fn penalty_is_the_papers_arctan_by_hand() {
        // H(1/2) = 1/2 for every D; H(0) = atan(-1)/pi + 1/2 = 1/4 and H(1) = 3/4 at D = 2.
        assert!((penalty(2.0, 0.5) - 0.5).abs() < 1e-12);
        assert!((penalty(2.0, 0.0) - 0.25).abs() < 1e-12);
        assert!((penalty(2.0, 1.0) - 0.75).abs() < 1e-12);
        // D = 1 at 0: atan(-0.5)/pi + 0.5 = 0.352416...
        assert!((penalty(1.0, 0.0) - 0.352_416_382_349_566_7).abs() < 1e-12);
        // In (0, 1), increasing, steeper with D.
        let mut last = 0.0;
        for i in -100..=100 {
            let h = penalty(2.0, f64::from(i) / 10.0);
            assert!(h > 0.0 && h < 1.0 && h > last);
            last = h;
        }
        assert!(penalty(1000.0, 1.1) > 0.99 && penalty(1000.0, -0.1) < 0.01);
        assert!(penalty(1.0, 1.1) < penalty(2.0, 1.1));
    }

    #[test]
    fn requirements_cap_the_maximum_at_one_and_a_half_times_the_minimum() {
        let r = Requirements::new(10.0 * MBIT, 0.0, 1.5, false);
        assert_eq!(r.max, 15.0 * MBIT);
        let r = Requirements::new(10.0 * MBIT, 30.0 * MBIT, 1.5, true);
        assert_eq!((r.max, r.bounded), (15.0 * MBIT, true));
        let r = Requirements::new(10.0 * MBIT, 12.0 * MBIT, 1.5, false);
        assert_eq!(r.max, 12.0 * MBIT);
        assert!((r.normalized(11.0 * MBIT) - 0.5).abs() < 1e-12);
        assert!((r.normalized(10.0 * MBIT)).abs() < 1e-12);
        let c = config(&[
            ("min", "10Mbit/s"),
            ("max", "15Mbit/s"),
            ("bounded", "true"),
        ]);
        assert_eq!(c.utility.req, Requirements::new(1.25e6, 1.875e6, 1.5, true));
        assert_eq!((c.mi.max_rate, c.mi.slow_start_cap), (1.875e6, 1.875e6));
        assert_eq!(c.mi.length.rtts, 1.5);
        // Slow start stops at 1.5 a even when b may go higher; slow-start-ratio moves it.
        let wide = config(&[("min", "10mbit"), ("max-ratio", "3")]);
        assert_eq!(
            (wide.mi.max_rate, wide.mi.slow_start_cap),
            (MAX_RATE, 1.875e6)
        );
        let wide = config(&[
            ("min", "10mbit"),
            ("max-ratio", "3"),
            ("slow-start-ratio", "2"),
        ]);
        assert_eq!(wide.mi.slow_start_cap, 2.5e6);
        let big = config(&[("min", "200mbit")]);
        assert_eq!((big.mi.length.rtts, big.mi.max_rate), (1.0, MAX_RATE));
        assert_eq!(big.mi.length.floor_us, 20_000.0);
        assert!(big.mi.moving && big.mi.slow_start);
        assert_eq!((big.mi.min_rate, big.mi.min_step), (5.0 * KBIT, KBIT));
    }

    #[test]
    fn utility_matches_the_implementations_form_by_hand() {
        let mut u = HerculesConfig::default().utility; // a = 1, b = 1.5 Mbit/s
        assert_eq!(
            (u.t, u.beta, u.gamma, u.phi, u.d),
            (0.9, 11.35, 25.0, 7.5e-5, 2.0)
        );
        // No latency, no loss: x^0.9 whatever the requirement.
        let v = u.utility(&stats(0, 10.0, 10.0, 0.0, &[])).unwrap();
        assert!((v - 10f64.powf(0.9)).abs() < 1e-9, "{v}");
        // x = 1.25 Mbit/s (x_norm = 0.5, H = 0.5), gradient 0.04, sigma 1000 us, loss 2 %:
        // 1.25^0.9 - 11.35*0.02*1.25 - 1.25*0.5*(25*0.04 + 7.5e-5*1000).
        let by_hand = 1.25f64.powf(0.9) - 11.35 * 0.02 * 1.25 - 1.25 * 0.5 * (1.0 + 0.075);
        assert!((u.value(1.25, 0.5, 0.02, 0.04, 1000.0) - by_hand).abs() < 1e-12);
        // The paper's grouping weights the loss by H too.
        u.paper_form = true;
        let paper = 1.25f64.powf(0.9) - 1.25 * 0.5 * (11.35 * 0.02 + 1.0 + 0.075);
        assert!((u.value(1.25, 0.5, 0.02, 0.04, 1000.0) - paper).abs() < 1e-12);
        // Same congestion, different requirements: a flow below its minimum pays less for it.
        u.paper_form = false;
        let below = u.value(1.25, -0.5, 0.0, 0.04, 0.0);
        let above = u.value(1.25, 1.5, 0.0, 0.04, 0.0);
        assert!(below > above + 0.5, "{below} vs {above}");
    }

    #[test]
    fn increase_only_leaves_the_lower_probe_free_of_latency_terms() {
        let mut u = config(&[("min", "10mbit"), ("increase-only", "true")]).utility;
        let mut mi = stats(
            0,
            12.0,
            12.0,
            0.0,
            &[20_000.0, 21_000.0, 22_000.0, 30_000.0],
        );
        mi.rtt_gradient = 0.05;
        mi.role = Role::Probe { pair: 0, up: false };
        // x = 12 Mbit/s, no loss: the lower probe scores x^0.9 alone.
        assert!((u.utility(&mi).unwrap() - 12f64.powf(0.9)).abs() < 1e-9);
        // The higher one pays x·H·(γ·gradient + φ·σ) (x̄ = 0.4 from the EWMA of 12 Mbit/s).
        mi.role = Role::Probe { pair: 0, up: true };
        let sigma = (2.0f64 / 3.0).sqrt() * 1000.0;
        let want = 12f64.powf(0.9) - 12.0 * penalty(2.0, 0.4) * (25.0 * 0.05 + 7.5e-5 * sigma);
        assert!((u.utility(&mi).unwrap() - want).abs() < 1e-9);
        // Off (the default): the lower probe pays too.
        u.increase_only = false;
        mi.role = Role::Probe { pair: 0, up: false };
        assert!((u.utility(&mi).unwrap() - want).abs() < 1e-9);
    }

    #[test]
    fn sigma_drops_the_largest_sample_and_floors_at_500_us() {
        let u = HerculesConfig::default().utility;
        // Points 20, 21, 22, 30 ms: drop 30 ms; std-dev of 20, 21, 22 ms = sqrt(2/3) ms.
        let mi = stats(0, 1.0, 1.0, 0.0, &[20_000.0, 21_000.0, 22_000.0, 30_000.0]);
        assert!((u.sigma_us(&mi) - (2.0f64 / 3.0).sqrt() * 1000.0).abs() < 1e-6);
        // One outlier alone is dropped: 20, 20.2, 20.4 ms and 40 ms: sigma 163 us < 500 us -> 0.
        let mi = stats(0, 1.0, 1.0, 0.0, &[20_000.0, 20_200.0, 40_000.0, 20_400.0]);
        assert_eq!(u.sigma_us(&mi), 0.0);
        assert_eq!(u.sigma_us(&stats(0, 1.0, 1.0, 0.0, &[1.0, 9e9])), 0.0);
    }

    #[test]
    fn normalised_rate_uses_the_smaller_of_the_ack_rate_ewma_and_the_sending_rate() {
        let mut u = config(&[("min", "10mbit")]).utility; // b = 15 Mbit/s
        // First MI: sends 12, 12 delivered -> EWMA 12, x_norm(12) = 0.4.
        u.utility(&stats(0, 12.0, 12.0, 0.0, &[])).unwrap();
        assert!((u.ack_rate.unwrap() - 12.0 * MBIT).abs() < 1e-6);
        // Second MI: sends 14, 8 delivered -> EWMA 12 + 0.25 (8 - 12) = 11 Mbit/s: x_norm 0.2.
        let mi = stats(1, 14.0, 8.0, 0.0, &[]);
        u.utility(&mi).unwrap();
        assert!((u.ack_rate.unwrap() - 11.0 * MBIT).abs() < 1e-6);
        assert!((u.xbar(&mi) - 0.2).abs() < 1e-9);
        // Re-scoring the same MI (the loss filter's pooled fraction) does not fold it again.
        u.utility(&mi).unwrap();
        assert!((u.ack_rate.unwrap() - 11.0 * MBIT).abs() < 1e-6);
        // Sending below the EWMA: the sending rate counts.
        assert!((u.xbar(&stats(2, 10.5, 10.5, 0.0, &[])) - 0.1).abs() < 1e-9);
    }

    #[test]
    fn hrf_water_filling_matches_hand_computed_allocations() {
        let m = |x: f64| x * MBIT;
        let close = |got: &[f64], want: &[f64]| {
            got.iter()
                .zip(want)
                .all(|(g, w)| (g / MBIT - w).abs() < 1e-6)
        };
        // §II-B: (20, 30), (40, 60), (60, 90) Mbit/s on 120 Mbit/s: exactly the minima.
        let three: Vec<Requirements> = [20.0, 40.0, 60.0]
            .iter()
            .map(|&a| Requirements::new(m(a), 0.0, 1.5, false))
            .collect();
        assert!(close(
            &hrf_allocation(m(120.0), &three),
            &[20.0, 40.0, 60.0]
        ));
        // 135 Mbit/s: 15 left over, sum(b - a) = 60, level 1/4: 22.5, 45, 67.5.
        assert!(close(
            &hrf_allocation(m(135.0), &three),
            &[22.5, 45.0, 67.5]
        ));
        // §V-A's five levels on 95 Mbit/s: sum a = 111.11, sum(b - a) = 55.555, level
        // (95 - 111.11)/55.555 = -0.29: the 100 Mbit/s flow gets 85.5 % (the paper: "the optimal
        // throughput reaches only 85 % satisfaction").
        let five: Vec<Requirements> = [0.01, 0.1, 1.0, 10.0, 100.0]
            .iter()
            .map(|&a| Requirements::new(m(a), 0.0, 1.5, false))
            .collect();
        let x = hrf_allocation(m(95.0), &five);
        let level = (95.0 - 111.11) / 55.555;
        let want: Vec<f64> = [0.01, 0.1, 1.0, 10.0, 100.0]
            .iter()
            .map(|a| a * (1.0 + 0.5 * level))
            .collect();
        assert!(close(&x, &want), "{x:?}");
        assert!((x[4] / m(100.0) - 0.855).abs() < 0.001);
        // HRF equalises normalised rates: at 135 Mbit/s the level is (135 - 111.11)/55.555 =
        // 0.43 for every flow, bounded or not (no flow reaches b), the 100 Mbit/s flow 121.5.
        let mut single = five.clone();
        for r in single.iter_mut().take(4) {
            r.bounded = true;
        }
        let x = hrf_allocation(m(135.0), &single);
        assert!((x[4] / MBIT - (100.0 + 50.0 * (135.0 - 111.11) / 55.555)).abs() < 1e-6);
        // Bounds bind above the level 1: at 200 Mbit/s all unbounded share the level
        // (200 - 111.11)/55.555 = 1.6; single unbounded, the four bounded stop at b (16.665
        // together) and the 100 Mbit/s flow takes the other 183.335.
        let x = hrf_allocation(m(200.0), &single);
        assert!(close(&x, &[0.015, 0.15, 1.5, 15.0, 183.335]), "{x:?}");
        let x = hrf_allocation(m(200.0), &five);
        assert!(
            (x[0] / MBIT - 0.01 * (1.0 + 0.5 * 88.89 / 55.555)).abs() < 1e-9,
            "{x:?}"
        );
        // All bounded with room to spare: every flow at its maximum.
        let bounded: Vec<Requirements> = three
            .iter()
            .map(|r| Requirements {
                bounded: true,
                ..*r
            })
            .collect();
        assert!(close(
            &hrf_allocation(m(500.0), &bounded),
            &[30.0, 60.0, 90.0]
        ));
        // A rate cannot go below 0: (10, 15) and (1, 3) on 2 Mbit/s. Level L: 10 + 5L +
        // max(0, 1 + 2L) = 2; below L = -0.5 the second flow is at 0, so 10 + 5L = 2, L = -1.6.
        let two = [
            Requirements::new(m(10.0), 0.0, 1.5, false),
            Requirements::new(m(1.0), m(3.0), 3.0, false),
        ];
        assert!(close(&hrf_allocation(m(2.0), &two), &[2.0, 0.0]));
    }

    #[test]
    fn parameters_parse_with_units_and_change_on_a_live_flow() {
        let keys: Vec<&str> = SPEC.params.iter().map(|p| p.key).collect();
        assert!(keys.starts_with(&["min", "max", "bounded", "max-ratio", "d"]));
        assert!(SPEC.params_from([("min", "10ms")]).is_err());
        let mut h = Hercules::new(config(&[("min", "10mbit")]));
        let mut path = FluidPath::ideal(20_000);
        path.start(&mut h);
        path.run_until(&mut h, 3_000_000);
        // Unbounded on an ideal path: above b after 3 s.
        assert!(h.engine().rate() > 15.0 * MBIT, "{}", h.engine().rate());
        let ewma = h.engine().utility().ack_rate;
        let p = SPEC
            .params_from([("min", "2mbit"), ("bounded", "true")])
            .unwrap();
        h.set_params(&p).unwrap();
        assert_eq!(
            h.requirements(),
            Requirements::new(2.0 * MBIT, 0.0, 1.5, true)
        );
        assert_eq!(h.engine().utility().ack_rate, ewma, "state kept");
        assert!(h.engine().rate() <= 3.0 * MBIT + 1.0);
        path.run_until(&mut h, 6_000_000);
        assert!(
            path.rates
                .iter()
                .filter(|r| r.0 > 3_000_000)
                .all(|r| r.1 <= 3.0 * MBIT + 1.0)
        );
        let vivace = crate::vivace::SPEC.defaults();
        assert!(h.set_params(&vivace).is_err());
        // The round loss test: off by default, on when asked, and taken on a live flow.
        assert_eq!(h.engine().loss_test(), LossTest::Pair);
        assert_eq!(config(&[("min", "2mbit")]).loss_test, LossTest::Pair);
        let p = SPEC
            .params_from([("min", "2mbit"), ("round-loss-test", "true")])
            .unwrap();
        h.set_params(&p).unwrap();
        assert_eq!(h.engine().loss_test(), LossTest::Round);
        let h = Hercules::new(config(&[("min", "2mbit"), ("round-loss-test", "true")]));
        assert_eq!(h.engine().loss_test(), LossTest::Round);
    }

    #[test]
    fn slow_start_begins_at_the_minimum_and_ends_at_the_maximum_of_a_bounded_flow() {
        // a = 100 kbit/s < IW10/100 ms: the first MI sends a; slow start doubles up to b.
        let mut h = Hercules::new(config(&[("min", "100kbit"), ("bounded", "true")]));
        let mut path = FluidPath::ideal(20_000);
        let d = path.start(&mut h);
        assert_eq!(d.rate, Some(12_500));
        assert_eq!(h.engine().state(), State::SlowStart);
        path.run_until(&mut h, 10_000_000);
        assert_ne!(h.engine().state(), State::SlowStart);
        let max = path.rates.iter().map(|r| r.1).fold(0.0, f64::max);
        assert!(max <= 150.0 * KBIT + 1.0, "{max}");
        // No congestion: the utility rises with the rate, so the flow sits at its bound.
        let mean = path.mean_rate(5_000_000, 10_000_000);
        assert!(mean > 0.93 * 150.0 * KBIT, "{mean}");
        // IW10 over 100 ms when a is higher.
        let mut h = Hercules::new(config(&[("min", "10mbit")]));
        assert_eq!(FluidPath::ideal(20_000).start(&mut h).rate, Some(144_800));
    }

    #[test]
    fn the_state_machine_probes_then_moves_until_the_utility_drops() {
        // One unbounded flow, a = 20 Mbit/s, on a 50 Mbit/s fluid bottleneck: the learner leaves
        // slow start, probes, moves, and holds the link without a standing queue.
        let cap = 50.0 * MBIT;
        let mut h = Hercules::new(config(&[("min", "20mbit")]));
        let mut path = FluidPath::new(20_000, cap, 100_000.0);
        path.start(&mut h);
        let mut seen = std::collections::BTreeSet::new();
        let mut t = 0;
        while t < 20_000_000 {
            t += 10_000;
            path.run_until(&mut h, t);
            seen.insert(format!("{:?}", h.engine().state()));
        }
        for s in ["SlowStart", "Probing", "Moving"] {
            assert!(seen.contains(s), "{s} never seen: {seen:?}");
        }
        let mean = path.mean_rate(10_000_000, 20_000_000) / cap;
        assert!((0.85..=1.02).contains(&mean), "mean {mean:.3} of capacity");
    }

    #[test]
    fn equal_utilities_give_no_decision_and_the_rate_holds() {
        // A utility flat in the rate (t = 0, no penalties on an ideal path): every pair of probes
        // ties, no pair agrees, and the base rate never moves once slow start is over.
        let mut c = config(&[("min", "10mbit"), ("t", "0")]);
        c.mi.slow_start = false;
        let mut h = Hercules::new(c);
        let mut path = FluidPath::ideal(20_000);
        path.start(&mut h);
        path.run_until(&mut h, 5_000_000);
        assert_eq!(h.engine().state(), State::Probing);
        assert!((h.engine().base_rate() - 144_800.0).abs() < 1.0);
    }
}
