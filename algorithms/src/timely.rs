//! TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter",
//! SIGCOMM 2015) as a CCP algorithm: a rate controller driven by the RTT and its gradient.
//!
//! # The algorithm as built (the paper's Algorithm 1)
//!
//! Every *completion event* carries one RTT sample `new_rtt`; then
//!
//! ```text
//! new_rtt_diff = new_rtt − prev_rtt;  prev_rtt = new_rtt
//! rtt_diff = (1 − α)·rtt_diff + α·new_rtt_diff
//! normalized_gradient = rtt_diff / minRTT
//! if new_rtt < T_low:   rate += δ
//! elif new_rtt > T_high: rate ·= 1 − β·(1 − T_high/new_rtt)
//! elif gradient ≤ 0:    rate += N·δ   (N = 5 once the gradient was negative for 5 events, else 1)
//! else:                 rate ·= 1 − β·normalized_gradient
//! ```
//!
//! - **Completion events.** In the paper a completion event is the ACK of a 16–64 KB segment. In
//!   CCP it is one report of the shared measurement program: per smoothed RTT by default, as the
//!   HPCC simulator's TIMELY (one update per RTT of feedback), or every `update-period` µs.
//!   The program also reports at once on every loss, often several times within one RTT; such
//!   a report covers only part of a period and is no completion event of its own: reports are
//!   gathered until together they cover at least half a period (`update-period`, or the RTT of
//!   the previous event) and then make one event. Counting each as an event would apply
//!   Algorithm 1 up to ten times per RTT during losses (1280 of 7003 events, and 591 of 723
//!   decreases, in the RTCP random-sending scenario when they did). `new_rtt` is the mean of
//!   the gathered RTT samples, the RTT of the data acknowledged since the last event; reports
//!   without RTT samples (timeout ticks) add no sample and change nothing by themselves. The
//!   first report with a sample is an event; it has no previous RTT: its `new_rtt_diff` is 0.
//! - **Gradient.** `minRTT` is the paper's fixed "minimum RTT of the network" (`min-rtt` = 20 µs);
//!   `min-rtt=0` uses the flow's own minimum RTT sample instead.
//! - **Hyperactive increase (HAI).** A counter of consecutive completion events whose normalised
//!   gradient is negative (computed on every event, in every region; any event with a gradient
//!   ≥ 0 resets it). In the gradient region a gradient ≤ 0 increases by `hai-factor`·δ (N = 5) when
//!   the counter has reached `hai-thresh` (5), else by δ.
//! - **Bounds.** The multiplicative factor of a decrease is clamped to [0, 1] (a gradient above
//!   1/β would otherwise make it negative), and the rate to [`min-rate`, `max-rate`]. So one
//!   event whose smoothed RTT rise exceeds minRTT/β (25 µs at the defaults) sends the rate to
//!   `min-rate`: Algorithm 1 as written, which flows that all start at line rate into a shared
//!   queue do (docs/results/rtcp.md).
//!   `max-rate` is the line rate (the paper's NICs: 10 Gbit/s); the flow starts at `init-rate`,
//!   the line rate by default, as RDMA NICs (and the HPCC simulator's TIMELY) start; the paper
//!   states no initial rate. `min-rate` (10 Mbit/s, = δ) is this module's choice; the paper gives
//!   none. Scale it with δ: at the floor a flow's completion events are as rare as its packets
//!   (one per 1.2 ms at 10 Mbit/s), each adds only δ, and a paced datapath holds the next
//!   packet one packet time at the rate the last one left at, so a lower floor leaves a flow
//!   there for much longer.
//! - **Losses** are no TIMELY signal (Algorithm 1 reads only RTTs): a loss or timeout changes
//!   nothing by itself; the RTT it comes with does.
//! - **Window.** The flow is paced at the rate (control mode [`ControlMode::Rate`]); its window is
//!   only a cap on the data in flight, `2 · rate · max(T_high, last RTT)` (at least 4 MSS), which
//!   does not bind while the RTT stays below T_high and bounds what is in flight if ACKs stop.
//!
//! # Parameters (paper defaults)
//!
//! `t-low` 50 µs, `t-high` 500 µs, `delta` 10 Mbit/s, `beta` 0.8, `alpha` 0.875, `hai-thresh` 5,
//! `hai-factor` 5, `min-rtt` 20 µs (the TIMELY paper's Algorithm 1 and the parameter values it
//! evaluates with; the HPCC ns-3 simulator's TIMELY uses the same values). The authors' later reference snippet uses α = 0.02 and T_high = 1 ms for per-packet
//! pacing; set `alpha=0.02,t-high=1ms` for that variant. Rates are bytes/s inside (δ = 1.25 MB/s).
//!
//! # Calibration (PolyCC)
//!
//! [`Fused::Rate`] sets the rate (clamped); [`Fused::Cwnd`] becomes `cwnd / last RTT` and is
//! ignored before any RTT sample. The RTT history and the HAI counter are kept.
//!
//! Time is the agent's [`Measurement::now_us`], never the wall clock.

use crate::controller::{
    ControlMode, Controller, Decision, FlowStart, Fused, Measurement, ReportPeriod,
};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window::{DEFAULT_MSS, MAX_CWND};

/// Every parameter of TIMELY, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "t-low",
        unit: Unit::Micros,
        default: 50.0,
        help: "below this RTT the rate increases additively whatever the gradient",
        source: "TIMELY (SIGCOMM 2015), Algorithm 1 and its parameter settings (T_low = 50 us)",
    },
    ParamSpec {
        key: "t-high",
        unit: Unit::Micros,
        default: 500.0,
        help: "above this RTT the rate decreases by beta*(1 - T_high/RTT) whatever the gradient",
        source: "TIMELY (SIGCOMM 2015), Algorithm 1 and its parameter settings (T_high = 500 us)",
    },
    ParamSpec {
        key: "delta",
        unit: Unit::Rate,
        default: 1_250_000.0,
        help: "additive increment per completion event",
        source: "TIMELY (SIGCOMM 2015) parameter settings (delta = 10 Mbps)",
    },
    ParamSpec {
        key: "beta",
        unit: Unit::Number,
        default: 0.8,
        help: "multiplicative decrement factor",
        source: "TIMELY (SIGCOMM 2015) parameter settings (beta = 0.8)",
    },
    ParamSpec {
        key: "alpha",
        unit: Unit::Number,
        default: 0.875,
        help: "EWMA weight of the newest RTT difference in rtt_diff",
        source: "TIMELY (SIGCOMM 2015), Algorithm 1 and its parameter settings (alpha = 0.875)",
    },
    ParamSpec {
        key: "hai-thresh",
        unit: Unit::Count,
        default: 5.0,
        help: "consecutive negative gradients before hyperactive increase",
        source: "TIMELY (SIGCOMM 2015) Algorithm 1 (HAI after five completion events)",
    },
    ParamSpec {
        key: "hai-factor",
        unit: Unit::Number,
        default: 5.0,
        help: "N: the additive increment in hyperactive increase is N*delta",
        source: "TIMELY (SIGCOMM 2015) Algorithm 1 (N = 5)",
    },
    ParamSpec {
        key: "min-rtt",
        unit: Unit::Micros,
        default: 20.0,
        help: "minRTT normalising the gradient; 0 uses the flow's smallest RTT sample",
        source: "TIMELY (SIGCOMM 2015) parameter settings (minRTT = 20 us)",
    },
    ParamSpec {
        key: "init-rate",
        unit: Unit::Rate,
        default: 1_250_000_000.0,
        help: "rate at the start of the flow (the line rate, as RDMA NICs start)",
        source: "not in the paper; line-rate start as the HPCC ns-3 simulator's TIMELY",
    },
    ParamSpec {
        key: "max-rate",
        unit: Unit::Rate,
        default: 1_250_000_000.0,
        help: "largest rate: the NIC line rate",
        source: "TIMELY (SIGCOMM 2015) testbed (10 Gbps NICs)",
    },
    ParamSpec {
        key: "min-rate",
        unit: Unit::Rate,
        default: 1_250_000.0,
        help: "smallest rate",
        source: "not in the paper; this module's choice (= delta)",
    },
    ParamSpec {
        key: "update-period",
        unit: Unit::Micros,
        default: 0.0,
        help: "one completion event per this period; 0: one per smoothed RTT",
        source: "CCP adaptation (the paper: one per 16-64 KB segment)",
    },
];

/// TIMELY, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "timely",
    summary: "TIMELY (SIGCOMM 2015): rate control on the RTT gradient between T_low and T_high, additive increase with HAI",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Timely::new(TimelyConfig::from_params(params)))
}

/// TIMELY's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelyConfig {
    /// T_low, µs.
    pub t_low_us: f64,
    /// T_high, µs (≥ T_low).
    pub t_high_us: f64,
    /// δ, bytes/s.
    pub delta: f64,
    /// β, in [0, 1].
    pub beta: f64,
    /// α, in [0, 1].
    pub alpha: f64,
    /// Consecutive negative gradients before HAI (≥ 1).
    pub hai_thresh: u32,
    /// N of HAI (≥ 1).
    pub hai_factor: f64,
    /// minRTT, µs; 0: the flow's own minimum RTT.
    pub min_rtt_us: f64,
    /// Initial rate, bytes/s.
    pub init_rate: f64,
    /// Largest rate, bytes/s.
    pub max_rate: f64,
    /// Smallest rate, bytes/s (≤ max_rate, ≥ 1).
    pub min_rate: f64,
    /// Report period, µs; 0: per smoothed RTT.
    pub update_period_us: u64,
}

impl Default for TimelyConfig {
    fn default() -> Self {
        TimelyConfig::from_params(&ParamSet::defaults("timely", PARAMS))
    }
}

impl TimelyConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        let t_low_us = p.get("t-low").max(0.0);
        let max_rate = p.get("max-rate").max(1.0);
        let min_rate = p.get("min-rate").clamp(1.0, max_rate);
        TimelyConfig {
            t_low_us,
            t_high_us: p.get("t-high").max(t_low_us),
            delta: p.get("delta").max(0.0),
            beta: p.get("beta").clamp(0.0, 1.0),
            alpha: p.get("alpha").clamp(0.0, 1.0),
            hai_thresh: p.get("hai-thresh").clamp(1.0, u32::MAX as f64) as u32,
            hai_factor: p.get("hai-factor").max(1.0),
            min_rtt_us: p.get("min-rtt").max(0.0),
            init_rate: p.get("init-rate").clamp(min_rate, max_rate),
            max_rate,
            min_rate,
            update_period_us: p.get("update-period").max(0.0) as u64,
        }
    }
}

/// Which branch of Algorithm 1 the last completion event took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    /// RTT < T_low: additive increase.
    Low,
    /// RTT > T_high: multiplicative decrease by the RTT's excess over T_high.
    High,
    /// Gradient ≤ 0: additive increase, N·δ in HAI.
    Increase {
        /// Hyperactive increase (N = `hai-factor`).
        hai: bool,
    },
    /// Gradient > 0: multiplicative decrease by β·gradient.
    Decrease,
}

/// A TIMELY controller for one flow.
#[derive(Clone, Debug)]
pub struct Timely {
    cfg: TimelyConfig,
    /// Sending rate, bytes/s.
    rate: f64,
    /// RTT of the previous completion event, µs.
    prev_rtt_us: Option<f64>,
    /// EWMA of the RTT differences, µs.
    rtt_diff_us: f64,
    /// Smallest RTT sample seen, µs (for `min-rtt=0`).
    seen_min_rtt_us: Option<f64>,
    /// Consecutive completion events with a negative gradient.
    negative_run: u32,
    /// MSS, bytes.
    mss: u64,
    last_region: Option<Region>,
    /// Reports gathered since the last completion event.
    pending: Pending,
}

/// What the reports since the last completion event carried.
#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    /// Datapath time they cover, µs.
    interval_us: u64,
    /// Sum of their RTT samples, µs.
    rtt_sum_us: f64,
    /// Number of their RTT samples.
    samples: u64,
}

impl Timely {
    /// A controller with `cfg`, before its flow starts.
    pub fn new(cfg: TimelyConfig) -> Self {
        Timely {
            rate: cfg.init_rate,
            cfg,
            prev_rtt_us: None,
            rtt_diff_us: 0.0,
            seen_min_rtt_us: None,
            negative_run: 0,
            mss: DEFAULT_MSS,
            last_region: None,
            pending: Pending::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TimelyConfig {
        &self.cfg
    }

    /// The smoothed RTT difference `rtt_diff`, µs.
    pub fn rtt_diff_us(&self) -> f64 {
        self.rtt_diff_us
    }

    /// The branch the last completion event took.
    pub fn last_region(&self) -> Option<Region> {
        self.last_region
    }

    /// Consecutive completion events with a negative gradient so far.
    pub fn negative_run(&self) -> u32 {
        self.negative_run
    }

    /// The minRTT the gradient is normalised by, µs.
    fn min_rtt_us(&self) -> f64 {
        if self.cfg.min_rtt_us > 0.0 {
            self.cfg.min_rtt_us
        } else {
            self.seen_min_rtt_us.unwrap_or(1.0).max(1.0)
        }
    }

    /// The shortest datapath time the reports of one completion event cover, µs: half the
    /// report period (`update-period`, or the RTT of the previous event when reports come per
    /// smoothed RTT); 0 before the first event. Periodic reports cover a whole period and are
    /// each an event; the reports the program sends at once on a loss, often several within one
    /// RTT, join the next event instead of each being one.
    fn min_event_spacing_us(&self) -> f64 {
        let Some(prev_rtt) = self.prev_rtt_us else {
            return 0.0;
        };
        let period = if self.cfg.update_period_us > 0 {
            self.cfg.update_period_us as f64
        } else {
            prev_rtt
        };
        period / 2.0
    }

    /// The rate, bytes/s, as installed.
    fn rate_u64(&self) -> u64 {
        self.rate.round() as u64
    }

    /// The window cap for the current rate, bytes.
    fn cwnd_cap(&self) -> u32 {
        let rtt = self.prev_rtt_us.unwrap_or(0.0).max(self.cfg.t_high_us);
        let w = 2.0 * self.rate * rtt / 1e6;
        w.max(4.0 * self.mss as f64).min(MAX_CWND as f64) as u32
    }

    fn decision(&self) -> Decision {
        Decision {
            cwnd: Some(self.cwnd_cap()),
            rate: Some(self.rate_u64()),
            report: None,
        }
    }

    /// One completion event with RTT `new_rtt` (µs): Algorithm 1.
    pub fn on_rtt(&mut self, new_rtt: f64) {
        let c = &self.cfg;
        let new_diff = self.prev_rtt_us.map_or(0.0, |prev| new_rtt - prev);
        self.prev_rtt_us = Some(new_rtt);
        self.seen_min_rtt_us = Some(self.seen_min_rtt_us.map_or(new_rtt, |m| m.min(new_rtt)));
        self.rtt_diff_us = (1.0 - c.alpha) * self.rtt_diff_us + c.alpha * new_diff;
        let gradient = self.rtt_diff_us / self.min_rtt_us();
        if gradient < 0.0 {
            self.negative_run = self.negative_run.saturating_add(1);
        } else {
            self.negative_run = 0;
        }
        let c = &self.cfg;
        let (rate, region) = if new_rtt < c.t_low_us {
            (self.rate + c.delta, Region::Low)
        } else if new_rtt > c.t_high_us {
            let factor = 1.0 - c.beta * (1.0 - c.t_high_us / new_rtt);
            (self.rate * factor.clamp(0.0, 1.0), Region::High)
        } else if gradient <= 0.0 {
            let hai = self.negative_run >= c.hai_thresh;
            let n = if hai { c.hai_factor } else { 1.0 };
            (self.rate + n * c.delta, Region::Increase { hai })
        } else {
            let factor = 1.0 - c.beta * gradient;
            (self.rate * factor.clamp(0.0, 1.0), Region::Decrease)
        };
        self.rate = rate.clamp(c.min_rate, c.max_rate);
        self.last_region = Some(region);
    }
}

impl Controller for Timely {
    fn name(&self) -> &'static str {
        "timely"
    }

    fn mode(&self) -> ControlMode {
        ControlMode::Rate
    }

    fn on_start(&mut self, start: &FlowStart) -> Decision {
        *self = Timely::new(self.cfg.clone());
        if start.mss > 0 {
            self.mss = u64::from(start.mss);
        }
        let mut d = self.decision();
        if self.cfg.update_period_us > 0 {
            d.report = Some(ReportPeriod::Micros(self.cfg.update_period_us));
        }
        d
    }

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        if m.mss > 0 {
            self.mss = u64::from(m.mss);
        }
        let spacing = self.min_event_spacing_us();
        let p = &mut self.pending;
        p.interval_us = p.interval_us.saturating_add(m.interval_us);
        if m.rtt_samples > 0 && m.rtt_mean_us > 0 {
            p.rtt_sum_us += m.rtt_mean_us as f64 * m.rtt_samples as f64;
            p.samples += m.rtt_samples;
        }
        if p.samples > 0 && p.interval_us as f64 >= spacing {
            let new_rtt = p.rtt_sum_us / p.samples as f64;
            self.pending = Pending::default();
            self.on_rtt(new_rtt);
        }
        self.decision()
    }

    fn calibrate(&mut self, fused: Fused) {
        let rate = match fused {
            Fused::Rate(r) => r as f64,
            Fused::Cwnd(w) => match self.prev_rtt_us {
                Some(rtt) if rtt > 0.0 => f64::from(w) / (rtt / 1e6),
                _ => return,
            },
        };
        self.rate = rate.clamp(self.cfg.min_rate, self.cfg.max_rate);
    }

    fn cwnd(&self) -> u32 {
        self.cwnd_cap()
    }

    fn rate(&self) -> Option<u64> {
        Some(self.rate_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{START, started};

    const MBIT: f64 = 125_000.0; // bytes/s
    const DELTA: f64 = 10.0 * MBIT;

    fn timely(cfg: TimelyConfig) -> Timely {
        started(Timely::new(cfg))
    }

    fn at(rate_mbit: f64) -> Timely {
        timely(TimelyConfig {
            init_rate: rate_mbit * MBIT,
            ..TimelyConfig::default()
        })
    }

    fn report(now: u64, rtt: u64) -> Measurement {
        Measurement {
            now_us: now,
            interval_us: rtt,
            acked_bytes: 14480,
            acked_packets: 10,
            rtt_min_us: rtt,
            rtt_mean_us: rtt,
            rtt_max_us: rtt,
            rtt_last_us: rtt,
            rtt_samples: 10,
            mss: 1448,
            ..Measurement::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn starts_at_line_rate_paced_with_a_cap() {
        let mut t = Timely::new(TimelyConfig::default());
        let d = t.on_start(&START);
        assert_eq!(d.rate, Some(1_250_000_000));
        // 2 · 10 Gbit/s · 500 µs.
        assert_eq!(d.cwnd, Some(1_250_000));
        assert_eq!(d.report, None, "per-RTT reports by default");
        assert_eq!((t.name(), t.mode()), ("timely", ControlMode::Rate));
        let c = TimelyConfig::default();
        assert_eq!(
            (c.t_low_us, c.t_high_us, c.delta, c.beta, c.alpha),
            (50.0, 500.0, DELTA, 0.8, 0.875)
        );
        assert_eq!((c.hai_thresh, c.hai_factor, c.min_rtt_us), (5, 5.0, 20.0));
        let mut t = timely(TimelyConfig {
            update_period_us: 30,
            ..TimelyConfig::default()
        });
        let d = t.on_start(&FlowStart {
            mss: 1448,
            init_cwnd: 0,
            now_us: 0,
        });
        assert_eq!(d.report, Some(ReportPeriod::Micros(30)));
    }

    #[test]
    fn below_t_low_adds_delta_whatever_the_gradient() {
        let mut t = at(1000.0);
        for (i, rtt) in [20, 40, 45, 49].into_iter().enumerate() {
            t.on_measurement(&report(i as u64 * 100, rtt));
            assert_eq!(t.last_region(), Some(Region::Low));
            assert!(close(t.rate, (1000.0 + 10.0 * (i as f64 + 1.0)) * MBIT));
        }
    }

    #[test]
    fn above_t_high_decreases_by_the_excess() {
        let mut t = at(5000.0);
        t.on_measurement(&report(100, 1000));
        assert_eq!(t.last_region(), Some(Region::High));
        // 1 − 0.8 · (1 − 500/1000) = 0.6, even though the gradient is 0 (first event).
        assert!(close(t.rate, 3000.0 * MBIT), "{}", t.rate);
        t.on_measurement(&report(200, 800)); // falling RTT, still above T_high
        assert_eq!(t.last_region(), Some(Region::High));
        assert!(close(
            t.rate,
            3000.0 * MBIT * (1.0 - 0.8 * (1.0 - 500.0 / 800.0))
        ));
    }

    #[test]
    fn in_between_the_gradient_decides() {
        let mut t = at(5000.0);
        t.on_measurement(&report(0, 100));
        // First event: diff 0, gradient 0: +δ.
        assert_eq!(t.last_region(), Some(Region::Increase { hai: false }));
        assert!(close(t.rate, 5010.0 * MBIT));
        // RTT +4 µs: rtt_diff = 0.875 · 4 = 3.5 µs, gradient 3.5/20 = 0.175, × (1 − 0.14).
        t.on_measurement(&report(100, 104));
        assert!(close(t.rtt_diff_us(), 3.5));
        assert_eq!(t.last_region(), Some(Region::Decrease));
        let r = 5010.0 * MBIT * (1.0 - 0.8 * 0.175);
        assert!(close(t.rate, r), "{} vs {r}", t.rate);
        // RTT −1 µs: rtt_diff = 0.125 · 3.5 − 0.875 = −0.4375: gradient < 0, +δ.
        t.on_measurement(&report(200, 103));
        assert!(close(t.rtt_diff_us(), -0.4375));
        assert_eq!(t.last_region(), Some(Region::Increase { hai: false }));
        assert!(close(t.rate, r + DELTA));
        // A steep rise: the factor is clamped at 0 and the rate floored at min-rate.
        t.on_measurement(&report(300, 400));
        assert_eq!(t.last_region(), Some(Region::Decrease));
        assert!(close(t.rate, t.config().min_rate));
    }

    #[test]
    fn hai_after_five_negative_gradients() {
        let mut t = at(2000.0);
        let mut rtt = 300;
        t.on_measurement(&report(0, rtt)); // gradient 0: not negative
        assert_eq!(t.negative_run(), 0);
        let mut rate = 2010.0 * MBIT;
        for k in 1..=8u32 {
            rtt -= 10;
            t.on_measurement(&report(u64::from(k) * 100, rtt));
            assert_eq!(t.negative_run(), k);
            let hai = k >= 5;
            assert_eq!(t.last_region(), Some(Region::Increase { hai }), "event {k}");
            rate += if hai { 5.0 * DELTA } else { DELTA };
            assert!(close(t.rate, rate), "event {k}: {} vs {rate}", t.rate);
        }
        // A rise ends the run (and decreases).
        t.on_measurement(&report(1000, rtt + 20));
        assert_eq!(t.negative_run(), 0);
        assert_eq!(t.last_region(), Some(Region::Decrease));
        // Negative gradients seen below T_low count towards HAI too.
        let mut t = at(2000.0);
        for (i, rtt) in [45, 40, 35, 30, 25].into_iter().enumerate() {
            t.on_measurement(&report(i as u64 * 100, rtt));
        }
        assert_eq!(t.negative_run(), 4);
        t.on_measurement(&report(600, 60));
        assert_eq!(t.negative_run(), 0, "60 after 25 is a rise");
    }

    /// A report the program sends at once on a loss, `interval` µs after the previous report,
    /// with one RTT sample.
    fn loss_report(now: u64, interval: u64, rtt: u64) -> Measurement {
        Measurement {
            interval_us: interval,
            acked_bytes: 0,
            acked_packets: 0,
            rtt_samples: 1,
            lost_packets: 1,
            ..report(now, rtt)
        }
    }

    #[test]
    fn loss_reports_within_a_period_make_one_completion_event() {
        let mut t = at(2000.0);
        t.on_measurement(&report(300, 300)); // first event: +δ
        let after_first = 2010.0 * MBIT;
        assert!(close(t.rate, after_first));
        // Four loss reports 20 µs apart (80 µs, less than half of the 300 µs RTT): no event.
        for (k, rtt) in [302, 304, 306, 308].into_iter().enumerate() {
            let d = t.on_measurement(&loss_report(320 + 20 * k as u64, 20, rtt));
            assert!(close(t.rate, after_first), "loss report {k}: {}", t.rate);
            assert_eq!(d.rate, Some(after_first.round() as u64));
        }
        assert_eq!(t.last_region(), Some(Region::Increase { hai: false }));
        // The periodic report closes the event: one decrease on the mean of all 14 samples,
        // (302 + 304 + 306 + 308 + 10 · 310) / 14 = 308.57 µs, rtt_diff 0.875 · 8.57 = 7.5 µs,
        // gradient 7.5 / 20 = 0.375, factor 1 − 0.8 · 0.375 = 0.7 (once, not five times).
        t.on_measurement(&report(600, 310));
        assert_eq!(t.last_region(), Some(Region::Decrease));
        assert!(close(t.rtt_diff_us(), 7.5), "{}", t.rtt_diff_us());
        assert!(close(t.rate, after_first * 0.7), "{}", t.rate);
        // A timeout tick without samples adds time but no sample; a loss report after it
        // completes the event.
        let mut tick = report(1000, 0);
        tick.rtt_samples = 0;
        tick.timeout = true;
        tick.interval_us = 200;
        t.on_measurement(&tick);
        assert_eq!(t.last_region(), Some(Region::Decrease));
        t.on_measurement(&loss_report(1010, 10, 300)); // 210 µs ≥ 155 µs: an event, RTT falls
        assert_eq!(t.last_region(), Some(Region::Increase { hai: false }));
        // With update-period, half of it is the shortest event.
        let mut t = timely(TimelyConfig {
            update_period_us: 100,
            init_rate: 2000.0 * MBIT,
            ..TimelyConfig::default()
        });
        t.on_measurement(&loss_report(30, 30, 300)); // the first sample: an event
        assert!(close(t.rate, 2010.0 * MBIT));
        t.on_measurement(&loss_report(60, 30, 300)); // 30 < 50: gathered
        assert!(close(t.rate, 2010.0 * MBIT));
        t.on_measurement(&loss_report(90, 30, 300)); // 60 ≥ 50: an event (+δ)
        assert!(close(t.rate, 2020.0 * MBIT));
    }

    #[test]
    fn min_rtt_zero_normalises_by_the_flows_minimum() {
        let mut t = timely(TimelyConfig {
            min_rtt_us: 0.0,
            init_rate: 5000.0 * MBIT,
            ..TimelyConfig::default()
        });
        t.on_measurement(&report(0, 100));
        t.on_measurement(&report(100, 108));
        // rtt_diff 7 µs over the minimum 100 µs: gradient 0.07.
        let r = 5010.0 * MBIT * (1.0 - 0.8 * 0.07);
        assert!(close(t.rate, r), "{} vs {r}", t.rate);
    }

    #[test]
    fn rate_stays_within_bounds_and_reports_without_rtts_are_ignored() {
        let mut t = timely(TimelyConfig::default());
        for i in 0..10 {
            t.on_measurement(&report(i * 100, 30));
        }
        assert_eq!(t.rate(), Some(1_250_000_000), "max-rate");
        let mut m = report(2000, 0);
        m.rtt_samples = 0;
        m.lost_packets = 5;
        m.timeout = true;
        let d = t.on_measurement(&m);
        assert_eq!(d.rate, Some(1_250_000_000));
        assert_eq!(t.last_region(), Some(Region::Low));
        for i in 0..10 {
            t.on_measurement(&report(3000 + i * 100, 100_000));
        }
        assert_eq!(t.rate(), Some(1_250_000), "min-rate");
    }

    #[test]
    fn the_window_cap_follows_rate_and_rtt() {
        let mut t = at(1000.0);
        assert_eq!(t.cwnd(), 125_000); // 2 · 125 MB/s · 500 µs
        // Above T_high the cap follows the RTT: 2 · 87.5 MB/s · 800 µs.
        let d = t.on_measurement(&report(0, 800));
        assert!(close(t.rate, 87.5e6));
        assert_eq!(d.cwnd, Some(140_000));
        let mut t = at(10.0);
        assert_eq!(t.cwnd(), 4 * 1448, "at least 4 MSS");
        t.calibrate(Fused::Rate(u64::MAX));
        assert_eq!(t.rate(), Some(1_250_000_000));
    }

    #[test]
    fn calibrate_sets_the_rate() {
        let mut t = at(1000.0);
        t.calibrate(Fused::Cwnd(100_000));
        assert_eq!(t.rate(), Some(125_000_000), "no RTT yet: ignored");
        t.calibrate(Fused::Rate(50_000_000));
        assert_eq!(t.rate(), Some(50_000_000));
        t.on_measurement(&report(0, 100)); // +δ
        t.calibrate(Fused::Cwnd(100_000)); // 100 kB per 100 µs
        assert_eq!(t.rate(), Some(1_000_000_000));
        t.calibrate(Fused::Rate(1));
        assert_eq!(t.rate(), Some(1_250_000), "min-rate");
    }

    #[test]
    fn params_override_defaults() {
        let mut p = ParamSet::defaults("timely", PARAMS);
        p.set(PARAMS, "t-low", "20us").unwrap();
        p.set(PARAMS, "t-high", "1ms").unwrap();
        p.set(PARAMS, "delta", "40mbit").unwrap();
        p.set(PARAMS, "alpha", "0.02").unwrap();
        p.set(PARAMS, "max-rate", "40gbit").unwrap();
        p.set(PARAMS, "init-rate", "1gbit").unwrap();
        p.set(PARAMS, "update-period", "25us").unwrap();
        assert!(p.set(PARAMS, "delta", "10ms").is_err());
        let c = TimelyConfig::from_params(&p);
        assert_eq!((c.t_low_us, c.t_high_us), (20.0, 1000.0));
        assert_eq!((c.delta, c.alpha), (5_000_000.0, 0.02));
        assert_eq!((c.max_rate, c.init_rate), (5e9, 125e6));
        assert_eq!(c.update_period_us, 25);
        let mut ctl = (SPEC.build)(&p);
        let d = ctl.on_start(&FlowStart {
            mss: 1448,
            init_cwnd: 0,
            now_us: 0,
        });
        assert_eq!(d.rate, Some(125_000_000));
        assert_eq!(d.report, Some(ReportPeriod::Micros(25)));
        // An init-rate above max-rate is clamped; T_high below T_low is raised to it.
        let mut p = ParamSet::defaults("timely", PARAMS);
        p.set(PARAMS, "init-rate", "100gbit").unwrap();
        p.set(PARAMS, "t-high", "10us").unwrap();
        let c = TimelyConfig::from_params(&p);
        assert_eq!((c.init_rate, c.t_high_us), (1.25e9, 50.0));
    }

    #[test]
    fn spec_declares_every_parameter_with_a_source() {
        assert_eq!(SPEC.name, "timely");
        assert!(
            SPEC.params
                .iter()
                .all(|p| !p.source.is_empty() && !p.help.is_empty())
        );
        assert_eq!(SPEC.params.len(), 12);
    }
}
