//! PCC Vivace (Dong et al., "PCC Vivace: Online-Learning Congestion Control", NSDI 2018) as a
//! CCP algorithm: rate-based online gradient ascent on a utility of the sending rate, the RTT
//! gradient and the loss fraction, measured per monitor interval (MI).
//!
//! # The algorithm as built
//!
//! The monitor intervals, the mapping of CCP reports onto them, the per-MI statistics, slow start,
//! probing, the decision rule, the confidence amplifier and the dynamic change boundary are the
//! shared engine of [`crate::mi`] (read its documentation for how each works in CCP); this module
//! supplies Vivace's utility and parameters:
//!
//! - **Utility** (§4.1): `u = x^t − b·x·dRTT/dT − c·x·L` with `t = 0.9`, `b = 900`, `c = 11.35`,
//!   `x` the MI's sending rate in Mbit/s (10⁶ bit/s), `dRTT/dT` the MI's RTT gradient (the
//!   least-squares slope of RTT over send time, dimensionless) and `L` its loss fraction. As
//!   ALGORITHMS.md states, negative gradients, gradients below `latency-filter` (0.01) and noisy
//!   fits count as 0 (a noisy fit: a slope below `gradient-confidence` = 2 standard errors, or
//!   fewer than three regression points).
//! - **Loss noise** (`loss-confidence` = 2): when two MIs are compared (probe pairs, consecutive
//!   slow-start MIs), loss fractions within 2 standard errors of each other count as their pooled
//!   fraction ([`crate::mi::LossFilter`]). The paper sets `c = 11.35` so that the utility still
//!   rises with the rate up to 5 % random loss (`0.9·x^−0.1 > c·L`), but that holds for the
//!   *expected* loss: at 3 % loss one MI of 250 packets measures 3 ± 1.1 %, which through `c·x·L`
//!   is worth ±12 utility units at 100 Mbit/s against a difference of about 2 between the
//!   `±5 %` probes. Unfiltered, every comparison is a coin flip, slow start ends at a few Mbit/s
//!   and the learner random-walks: 0.21 to 0.81 of a 100 Mbit/s link over 30 s at 3 % loss
//!   (mean 0.45) in the simulator; pooled, 0.92 to 0.93 on the same seeds.
//! - **MI** ≈ 1 min RTT (`mi-rtts`), and at least `mi-min-packets` (10) packets at the MI's rate:
//!   at 0.5 Mbit/s and a 30 ms RTT one RTT holds barely one packet, too few for a loss fraction.
//!   The engine asks for `reports-per-mi` (8) reports per MI, the regression points of the RTT
//!   gradient.
//! - **Starting state**: the first MI sends `init-cwnd · MSS / init-rtt` (10 packets per 100 ms,
//!   1.16 Mbit/s with a 1448-byte MSS); each MI doubles the rate until an MI's utility is below
//!   the previous one's; the rate then falls back to that previous MI's rate, and slow start is
//!   never entered again. The first `slow-start-loss-allowance` (50) packets lost in slow-start
//!   MIs are not counted, as in the authors' NSDI 2018 code: a slow-start MI at the initial rate
//!   holds 10 to 20 packets, and one or two random losses in it would end slow start there.
//! - **Probing**: two pairs (`probe-pairs`) of MIs at `r(1 + ε)` and `r(1 − ε)`, `ε = 0.05`, in
//!   random order within each pair (seeded by `seed` and the flow's start time); a decision only
//!   when both pairs agree on the direction, `γ` = the mean of the pairs' `(u₊ − u₋)/(2εr)`
//!   (r in Mbit/s). Disagreeing pairs start a new round around the same rate.
//! - **Rate change**: `Δr = m(τ)·θ₀·γ` Mbit/s, `θ₀ = 1`, `m(τ) = τ` for `τ ≤ 3` and `2τ − 3`
//!   above, `τ` the number of consecutive decisions in the same direction; bounded by
//!   `|Δr| ≤ ω·r` with `ω = ω₀ + k·δ`, `ω₀ = 0.05`, `δ = 0.05` (`omega-step`; ALGORITHMS.md's
//!   value for Vivace — the Vivace-Distributed paper's Table 1 lists 0.1), `k` the number of
//!   consecutive decisions the bound clipped; a change of direction resets `τ` and `k`. After each
//!   decision Vivace probes again around the new rate (no separate moving state).
//! - **Minimum rate** 0.5 Mbit/s (`min-rate`); the maximum is what a decision can carry (u32
//!   bytes/s, about 34 Gbit/s).
//! - **Double check** of anomalous probes (`double-check`) is Vivace-Distributed's rule; it is
//!   available here and off by default.
//!
//! Control mode is [`ControlMode::Rate`]: every decision sets the pacing rate and a window cap,
//! the engine's (`crate::mi`, "Control": about two RTTs at the fastest rate still in flight).
//!
//! [`ControlMode::Rate`]: crate::controller::ControlMode::Rate
//!
//! # Choices where the paper is silent
//!
//! Everything specific to CCP — MI attribution by shifting reports one RTT, completion when a
//! report's send window passes the MI's end, counting SACKed bytes as delivered when SACKed, the
//! `2·rate·srtt` window cap, timeouts — is documented in [`crate::mi`]. Here: the initial rate
//! (IW10 over 100 ms, as Hercules starts), the packet floor of an MI, the t-test of the RTT
//! regression, the z-test of the loss fractions, and the RNG (SplitMix64). Rates are bytes/s
//! everywhere except inside the utility (Mbit/s, as the paper's constants assume).
//!
//! # Calibration (PolyCC)
//!
//! [`Fused::Rate`] restarts the current state around the fused rate (slow start doubles on from
//! it; otherwise a new probing round, τ and k reset); [`Fused::Cwnd`] is converted with the
//! smoothed RTT and ignored before any RTT sample. Calibrating to Vivace's own rate changes
//! nothing.
//!
//! [`Fused::Rate`]: crate::controller::Fused::Rate
//! [`Fused::Cwnd`]: crate::controller::Fused::Cwnd

use crate::controller::{Controller, Decision, FlowStart};
use crate::mi::{
    Amplifier, GradientFilter, InitialRate, LossFilter, MAX_RATE, MBIT, MiConfig, MiEngine,
    MiLength, MiStats, RttBase, Utility,
};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window;

const SOURCE_UTILITY: &str = "PCC Vivace (Dong et al., NSDI 2018) §4.1";

/// Every parameter of Vivace, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "t",
        unit: Unit::Number,
        default: 0.9,
        help: "throughput exponent t of u = x^t - b*x*dRTT/dT - c*x*L (x in Mbit/s)",
        source: SOURCE_UTILITY,
    },
    ParamSpec {
        key: "b",
        unit: Unit::Number,
        default: 900.0,
        help: "RTT-gradient penalty b of the utility",
        source: SOURCE_UTILITY,
    },
    ParamSpec {
        key: "c",
        unit: Unit::Number,
        default: 11.35,
        help: "loss penalty c of the utility (tolerates up to 5 % random loss)",
        source: SOURCE_UTILITY,
    },
    ParamSpec {
        key: "epsilon",
        unit: Unit::Number,
        default: 0.05,
        help: "probing step: probe MIs send at r(1 + epsilon) and r(1 - epsilon)",
        source: "PCC Vivace §4.2; Vivace-Distributed (seeds/000) Table 1, epsilon = 0.05",
    },
    ParamSpec {
        key: "probe-pairs",
        unit: Unit::Count,
        default: 2.0,
        help: "pairs of probe MIs (random order within a pair) that must agree before a move",
        source: "PCC Vivace §4.2 (two pairs, randomized order); ALGORITHMS.md",
    },
    ParamSpec {
        key: "theta0",
        unit: Unit::Number,
        default: 1.0,
        help: "initial conversion factor: Mbit/s of rate change per unit of utility gradient",
        source: "PCC Vivace §4.2; Vivace-Distributed Table 1, theta0 = 1",
    },
    ParamSpec {
        key: "omega0",
        unit: Unit::Number,
        default: 0.05,
        help: "initial dynamic change boundary: |change| <= omega * rate",
        source: "PCC Vivace §4.2; Vivace-Distributed Table 1, omega0 = 0.05",
    },
    ParamSpec {
        key: "omega-step",
        unit: Unit::Number,
        default: 0.05,
        help: "boundary increment: omega = omega0 + k * omega-step after k consecutive clipped moves",
        source: "ALGORITHMS.md (vivace: omega = 0.05 + 0.05k); Vivace-Distributed Table 1 lists 0.1",
    },
    ParamSpec {
        key: "min-rate",
        unit: Unit::Rate,
        default: 0.5 * MBIT,
        help: "minimum sending rate",
        source: "ALGORITHMS.md (vivace: 0.5 Mbit/s)",
    },
    ParamSpec {
        key: "latency-filter",
        unit: Unit::Number,
        default: 0.01,
        help: "RTT gradients below this (and negative ones) count as 0",
        source: "PCC Vivace's latency noise filter; 0.01 as flt_latency in Vivace-Distributed Algorithm 1",
    },
    ParamSpec {
        key: "gradient-confidence",
        unit: Unit::Number,
        default: 2.0,
        help: "an RTT-gradient fit counts only if its slope is at least this many standard errors",
        source: "project choice (ALGORITHMS.md: noisy fits count as 0)",
    },
    ParamSpec {
        key: "loss-confidence",
        unit: Unit::Number,
        default: 2.0,
        help: "compared MIs whose loss fractions differ by less than this many standard errors are scored with their pooled loss fraction (0: off)",
        source: "project choice (two-proportion z-test); PCC Vivace's NSDI 2018 code pools the probes' loss at low loss",
    },
    ParamSpec {
        key: "mi-rtts",
        unit: Unit::Number,
        default: 1.0,
        help: "monitor interval length, in min RTTs",
        source: "ALGORITHMS.md (vivace: MI about 1 min RTT)",
    },
    ParamSpec {
        key: "mi-min-packets",
        unit: Unit::Packets,
        default: 10.0,
        help: "a monitor interval lasts long enough to send at least this many packets",
        source: "project choice (the paper is silent on MIs of a few packets)",
    },
    ParamSpec {
        key: "reports-per-mi",
        unit: Unit::Count,
        default: 8.0,
        help: "measurement reports asked for per monitor interval (RTT-gradient regression points)",
        source: "project choice",
    },
    ParamSpec {
        key: "double-check",
        unit: Unit::Bool,
        default: 0.0,
        help: "re-run an anomalous probe MI (lower loss at a higher rate, higher throughput at a lower rate) before trusting it",
        source: "Vivace-Distributed (seeds/000) §6 double check; not part of PCC Vivace",
    },
    ParamSpec {
        key: "slow-start-loss-allowance",
        unit: Unit::Packets,
        default: 50.0,
        help: "slow-start MIs do not count the first this many packets the flow loses in them",
        source: "PCC Vivace's NSDI 2018 code (its starting state ignores up to 50 lost packets)",
    },
    window::INIT_CWND,
    ParamSpec {
        key: "init-rtt",
        unit: Unit::Micros,
        default: 100_000.0,
        help: "RTT assumed for the first MI's rate, init-cwnd * MSS / init-rtt",
        source: "project choice (IW over 100 ms, as Hercules's slow start)",
    },
    ParamSpec {
        key: "seed",
        unit: Unit::Count,
        default: 1.0,
        help: "seed of the probing order (mixed with the flow's start time)",
        source: "project choice (deterministic runs)",
    },
    crate::mi::TREND_MIS,
];

/// Vivace, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "vivace",
    summary: "PCC Vivace (NSDI 2018): online gradient ascent on u = x^0.9 - 900 x dRTT/dT - 11.35 x L",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Vivace::new(VivaceConfig::from_params(params)))
}

/// Vivace's utility `u = x^t − b·x·dRTT/dT − c·x·L`, `x` in Mbit/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VivaceUtility {
    pub t: f64,
    pub b: f64,
    pub c: f64,
}

impl VivaceUtility {
    /// The utility of sending at `x_mbit` Mbit/s with RTT gradient `gradient` and loss fraction
    /// `loss`.
    pub fn value(&self, x_mbit: f64, gradient: f64, loss: f64) -> f64 {
        x_mbit.powf(self.t) - self.b * x_mbit * gradient - self.c * x_mbit * loss
    }
}

impl Utility for VivaceUtility {
    fn utility(&mut self, mi: &MiStats) -> Option<f64> {
        Some(self.value(mi.rate_in(MBIT), mi.rtt_gradient, mi.loss_fraction()))
    }
}

/// Vivace's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct VivaceConfig {
    pub utility: VivaceUtility,
    /// The rate control (probing, amplifier, boundary, MIs, slow start).
    pub mi: MiConfig,
}

impl Default for VivaceConfig {
    fn default() -> Self {
        VivaceConfig::from_params(&ParamSet::defaults("vivace", PARAMS))
    }
}

impl VivaceConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        let count = |k: &str| p.get(k).clamp(1.0, 1e6) as u32;
        VivaceConfig {
            utility: VivaceUtility {
                t: p.get("t").clamp(0.0, 1.0),
                b: p.get("b").max(0.0),
                c: p.get("c").max(0.0),
            },
            mi: MiConfig {
                epsilon: p.get("epsilon").clamp(1e-4, 0.5),
                probe_pairs: count("probe-pairs").min(16),
                random_order: true,
                theta0: p.get("theta0").max(0.0),
                amplifier: Amplifier::Vivace,
                omega0: p.get("omega0").clamp(1e-4, 1.0),
                omega_step: p.get("omega-step").max(0.0),
                min_step: 0.0,
                min_step_fraction: 0.0,
                double_check: p.flag("double-check"),
                min_rate: p.get("min-rate").clamp(1.0, MAX_RATE),
                max_rate: MAX_RATE,
                length: MiLength {
                    base: RttBase::Min,
                    rtts: p.get("mi-rtts").max(0.01),
                    floor_us: 0.0,
                    min_packets: p.get("mi-min-packets").max(0.0),
                },
                reports_per_mi: count("reports-per-mi"),
                gradient: GradientFilter {
                    threshold: p.get("latency-filter").max(0.0),
                    min_t: p.get("gradient-confidence").max(0.0),
                    min_points: 3,
                    trend_mis: p.get("trend-mis").clamp(0.0, 1000.0) as usize,
                },
                loss_filter: LossFilter {
                    min_z: p.get("loss-confidence").max(0.0),
                },
                slow_start: true,
                slow_start_cap: MAX_RATE,
                slow_start_loss_allowance: p.get("slow-start-loss-allowance").max(0.0),
                moving: false,
                initial_rate: InitialRate::Window {
                    packets: window::packets(p.get("init-cwnd")).into(),
                    rtt_us: p.get("init-rtt").max(1.0),
                },
                rate_unit: MBIT,
                seed: p.get("seed").max(0.0) as u64,
            },
        }
    }
}

/// A PCC Vivace controller for one flow.
pub struct Vivace {
    engine: MiEngine<VivaceUtility>,
}

impl Vivace {
    /// A controller with `cfg`, before its flow starts.
    pub fn new(cfg: VivaceConfig) -> Self {
        Vivace {
            engine: MiEngine::new(cfg.mi, cfg.utility),
        }
    }

    /// The monitor-interval engine (state, statistics of the last MIs).
    pub fn engine(&self) -> &MiEngine<VivaceUtility> {
        &self.engine
    }
}

impl Controller for Vivace {
    fn name(&self) -> &'static str {
        "vivace"
    }

    crate::mi::engine_controller!(delegate);

    fn on_start(&mut self, start: &FlowStart) -> Decision {
        self.engine.start(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ControlMode;
    use crate::mi::testpath::FluidPath;
    use crate::mi::{Role, State};

    fn stats(rate_mbit: f64, gradient: f64, delivered_pkts: f64, lost: f64) -> MiStats {
        MiStats {
            id: 0,
            role: Role::Start,
            rate: rate_mbit * MBIT,
            start_us: 0,
            end_us: 30_000,
            delivered_bytes: delivered_pkts * 1448.0,
            lost_packets: lost,
            excused_packets: 0.0,
            mss: 1448.0,
            rtt: vec![],
            rtt_gradient: gradient,
            pooled_loss: None,
        }
    }

    #[test]
    fn the_utility_matches_the_paper_by_hand() {
        let mut u = VivaceConfig::default().utility;
        assert_eq!((u.t, u.b, u.c), (0.9, 900.0, 11.35));
        // 10 Mbit/s, no latency inflation, no loss: 10^0.9.
        let v = u.utility(&stats(10.0, 0.0, 25.0, 0.0)).unwrap();
        assert!((v - 7.943_282_347_242_815).abs() < 1e-9, "{v}");
        // 100 Mbit/s, gradient 0.02, 3 lost of 100 packets:
        // 100^0.9 - 900*100*0.02 - 11.35*100*0.03 = 63.0957 - 1800 - 34.05.
        let v = u.utility(&stats(100.0, 0.02, 97.0, 3.0)).unwrap();
        assert!(
            (v - (63.095_734_448_019_32 - 1800.0 - 34.05)).abs() < 1e-9,
            "{v}"
        );
        // The 5 % loss the paper tolerates: at 100 Mbit/s the utility still rises with the
        // rate below 3 % loss (d/dx = 0.9 x^-0.1 - c L > 0) and falls at 6 %.
        let slope = |l: f64| 0.9 * 100f64.powf(-0.1) - u.c * l;
        assert!(slope(0.03) > 0.0 && slope(0.06) < 0.0);
    }

    #[test]
    fn parameters_have_paper_defaults_and_override() {
        let keys: Vec<&str> = SPEC.params.iter().map(|p| p.key).collect();
        assert_eq!(
            keys,
            [
                "t",
                "b",
                "c",
                "epsilon",
                "probe-pairs",
                "theta0",
                "omega0",
                "omega-step",
                "min-rate",
                "latency-filter",
                "gradient-confidence",
                "loss-confidence",
                "mi-rtts",
                "mi-min-packets",
                "reports-per-mi",
                "double-check",
                "slow-start-loss-allowance",
                "init-cwnd",
                "init-rtt",
                "seed",
                "trend-mis"
            ]
        );
        let d = VivaceConfig::default().mi;
        assert_eq!(
            (d.epsilon, d.probe_pairs, d.theta0, d.omega0, d.omega_step),
            (0.05, 2, 1.0, 0.05, 0.05)
        );
        assert_eq!(
            (d.min_rate, d.gradient.threshold, d.reports_per_mi),
            (62_500.0, 0.01, 8)
        );
        assert!(!d.double_check && d.slow_start && !d.moving && d.random_order);
        assert_eq!(
            (d.loss_filter.min_z, d.slow_start_loss_allowance),
            (2.0, 50.0)
        );
        assert_eq!(d, MiConfig::default(), "the engine's defaults are Vivace's");
        let p = SPEC
            .params_from([
                ("min-rate", "1mbit"),
                ("double-check", "true"),
                ("omega-step", "0.1"),
                ("probe-pairs", "1"),
                ("b", "1900"),
                ("mi-rtts", "1.5"),
                ("seed", "7"),
                ("loss-confidence", "0"),
                ("slow-start-loss-allowance", "0"),
                ("mi-min-packets", "2"),
            ])
            .unwrap();
        let c = VivaceConfig::from_params(&p);
        assert_eq!(c.mi.min_rate, 125_000.0);
        assert!(c.mi.double_check);
        assert_eq!((c.mi.omega_step, c.mi.probe_pairs, c.mi.seed), (0.1, 1, 7));
        assert_eq!((c.utility.b, c.mi.length.rtts), (1900.0, 1.5));
        assert_eq!(c.mi.loss_filter, LossFilter::OFF);
        assert_eq!(
            (c.mi.slow_start_loss_allowance, c.mi.length.min_packets),
            (0.0, 2.0)
        );
        assert!(SPEC.params_from([("min-rate", "10ms")]).is_err());
    }

    #[test]
    fn starts_at_ten_packets_per_100_ms_in_rate_mode() {
        let mut v = Vivace::new(VivaceConfig::default());
        assert_eq!((v.name(), v.mode()), ("vivace", ControlMode::Rate));
        let d = v.on_start(&FlowStart {
            mss: 1448,
            init_cwnd: 14_480,
            now_us: 0,
        });
        assert_eq!(d.rate, Some(144_800));
        assert_eq!(v.rate(), Some(144_800));
        assert!(d.cwnd.unwrap() >= 14_480);
        assert_eq!(v.engine().state(), State::SlowStart);
    }

    #[test]
    fn finds_and_holds_a_fluid_bottleneck_with_a_small_queue() {
        // 100 Mbit/s, 30 ms, 75 kB buffer, no random loss.
        let cap = 100.0 * MBIT;
        let mut path = FluidPath::new(30_000, cap, 75_000.0);
        let mut v = Vivace::new(VivaceConfig::default());
        path.start(&mut v);
        path.run_until(&mut v, 3_000_000);
        assert_ne!(v.engine().state(), State::SlowStart);
        path.queue_max = 0.0;
        path.run_until(&mut v, 20_000_000);
        // A +5 % probe above capacity raises the RTT by 5 % of an MI per MI, a gradient of
        // 0.05: far above the 0.01 filter, so the learner settles where r(1 + e) is about the
        // capacity: the mean rate sits within 10 % below it.
        let mean = path.mean_rate(3_000_000, 20_000_000) / cap;
        assert!(
            (0.9..=1.0).contains(&mean),
            "mean rate {mean:.3} of capacity"
        );
        // Two back-to-back +5 % probes (the end of one pair, the start of the next) at a base
        // rate equal to the capacity would queue 2 * 5 % of an MI's bytes, 37.5 kB; the learner
        // keeps r(1 + e) near the capacity, so the queue stays below that (half the buffer).
        assert!(path.queue_max < 37_500.0, "queue {}", path.queue_max);
    }
}
