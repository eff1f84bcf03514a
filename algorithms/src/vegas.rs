//! TCP Vegas (Brakmo, O'Malley, Peterson, SIGCOMM 1994; Brakmo & Peterson, IEEE JSAC 1995) as a
//! CCP algorithm: keep between α and β packets of this flow queued at the bottleneck by comparing
//! the expected and the actual rate once per round trip.
//!
//! # The algorithm as built
//!
//! - **RTTs.** `baseRTT` is the smallest RTT sample the flow has seen (the paper's BaseRTT, the
//!   minimum of all measured RTTs; never reset, like Linux's `tcp_vegas`). A round's RTT is the
//!   smallest sample of the round (the reports' `rtt_min`), as Linux does to filter delayed ACKs;
//!   the paper times one segment per RTT, which the aggregated reports cannot name.
//! - **Rounds** are packet-timed ([`RoundCounter`]): a round ends when the data in flight at its
//!   start has been acknowledged. Reports come every srtt/4 (`reports-per-rtt`), so round
//!   boundaries fall within a quarter RTT of the true ones; with one report per RTT a boundary
//!   would straddle reports and rounds would alternate between one and two RTTs.
//! - **Diff.** At the end of a round, `diff = cwnd · (RTT − baseRTT) / RTT` packets, i.e. the
//!   paper's `(Expected − Actual) · baseRTT` with `Expected = cwnd/baseRTT`, `Actual = cwnd/RTT`:
//!   the number of this flow's packets sitting in queues. (Linux divides by baseRTT instead; the
//!   paper's form is used here.) `cwnd` is the window at the end of the round, in MSS.
//! - **Congestion avoidance** (`cwnd ≥ ssthresh`): once per round, `diff < α` → `cwnd += 1 MSS`,
//!   `diff > β` → `cwnd −= 1 MSS` (floored at `min-cwnd`; `ssthresh` follows it down, as Linux, so
//!   a decrease never re-enters slow start), else unchanged.
//! - **Slow start** (`cwnd < ssthresh`, initially unbounded), as in the paper: the window grows by
//!   the acknowledged bytes only every other round and is held fixed in the rounds in between, so
//!   that a valid comparison can be made. The packets acknowledged in a round were sent in the
//!   round before, so the round that follows a hold round measures the held window `W`: at its end
//!   `diff = W·(RTT − baseRTT)/RTT`, and `diff > γ` ends slow start with
//!   `cwnd = min(cwnd, W·baseRTT/RTT + 1 MSS)` (the window that keeps one packet queued, as Linux)
//!   and `ssthresh = cwnd`. (Comparing the current window instead — it has doubled since the
//!   measured data left — overshoots the pipe by up to 2×, which the unit tests check.)
//! - **Loss and timeout** exactly as [`crate::reno`]: a loss sets `ssthresh = cwnd = max(loss-beta ·
//!   cwnd, min-cwnd)` once per loss epoch, holding the window for the recovery RTT; a timeout sets
//!   `ssthresh` the same way (not again for a repeated timeout) and `cwnd` to one MSS, then slow
//!   start (with its γ exit) runs up to `ssthresh`. The loss epoch, timeout state, MSS and RTT are
//!   kept by the shared [`WindowCore`].
//!
//! # Calibration (PolyCC)
//!
//! [`Fused::Cwnd`](crate::controller::Fused::Cwnd) sets `cwnd` (floored at `min-cwnd`), keeping `ssthresh`, `baseRTT` and the round;
//! Vegas then continues its own law from there (one MSS per round towards the α..β band).
//! [`Fused::Rate`](crate::controller::Fused::Rate) becomes `rate · RTT` with the last mean RTT (ignored before any RTT sample).
//!
//! # Taking over a live flow (`set-algorithm`)
//!
//! Vegas starts in slow start from the window handed over, but its first round only measures it
//! (no growth), as the round after a hold round does: a predecessor that filled a deep buffer
//! leaves `diff` far above γ, and the γ exit brings the window down to one packet queued at
//! once instead of doubling it first. It ignores a handed `ssthresh` (which Reno and CUBIC keep,
//! as Linux keeps a socket's): from a window above it Vegas would be in congestion avoidance and
//! drain the queue it inherited by one MSS per round.
//!
//! # Parameters
//!
//! `alpha` 2, `beta` 4 (packets; the project's ALGORITHMS.md and Linux's `tcp_vegas`; the Vegas
//! papers also study α = 1, β = 3), `gamma` 1 packet (slow-start exit), `loss-beta` 0.5 and
//! `min-cwnd` 2 packets (Reno's), `init-cwnd` 10 packets, `reports-per-rtt` 4. Out-of-range values are clamped: packets to ≥ 1, `beta` to ≥ `alpha`,
//! `loss-beta` to [0, 1]. Time is the agent's [`Measurement::now_us`] (µs), never the wall clock.

use crate::controller::{Controller, Decision, Measurement, TakeOver};
use crate::filters::{ReportClock, RoundCounter, Srtt, count_param};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window::{self, MAX_CWND, WindowAlgorithm, WindowCore, WindowEvent, packets};

/// Every parameter of Vegas, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    window::INIT_CWND,
    window::MIN_CWND,
    ParamSpec {
        key: "alpha",
        unit: Unit::Number,
        default: 2.0,
        help: "packets queued below which the window grows by one MSS per round",
        source: "shared/ALGORITHMS.md and Linux tcp_vegas (alpha = 2); Brakmo & Peterson, JSAC 1995, also study 1",
    },
    ParamSpec {
        key: "beta",
        unit: Unit::Number,
        default: 4.0,
        help: "packets queued above which the window shrinks by one MSS per round",
        source: "shared/ALGORITHMS.md and Linux tcp_vegas (beta = 4); Brakmo & Peterson, JSAC 1995, also study 3",
    },
    ParamSpec {
        key: "gamma",
        unit: Unit::Number,
        default: 1.0,
        help: "packets queued above which slow start ends",
        source: "Brakmo & Peterson, JSAC 1995, slow start (gamma = 1 packet, as Linux tcp_vegas)",
    },
    ParamSpec {
        key: "loss-beta",
        unit: Unit::Number,
        default: 0.5,
        help: "multiplicative decrease on loss or timeout, as Reno: ssthresh = loss-beta * cwnd",
        source: "RFC 5681 §3.1 eq. (4); Vegas keeps Reno's loss handling",
    },
    ParamSpec {
        key: "reports-per-rtt",
        unit: Unit::Count,
        default: 4.0,
        help: "reports asked of the datapath per smoothed RTT (round boundaries within srtt/n)",
        source: "this project (CCP measurement program; see the vegas module doc)",
    },
];

/// Vegas, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "vegas",
    summary: "TCP Vegas: keep alpha..beta packets queued (diff = cwnd*(RTT-baseRTT)/RTT), +-1 MSS per RTT",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Vegas::new(VegasConfig::from_params(params)))
}

/// Vegas's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct VegasConfig {
    /// Initial window, packets (≥ 1).
    pub init_cwnd_pkts: u32,
    /// Floor of the window (and of `ssthresh`), packets (≥ 1).
    pub min_cwnd_pkts: u32,
    /// Lower bound of the queued packets, packets (≥ 0).
    pub alpha: f64,
    /// Upper bound of the queued packets, packets (≥ `alpha`).
    pub beta: f64,
    /// Slow-start exit threshold, packets (≥ 0).
    pub gamma: f64,
    /// Multiplicative decrease on loss, in [0, 1].
    pub loss_beta: f64,
    /// Reports per smoothed RTT (≥ 1).
    pub reports_per_rtt: u64,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig::from_params(&ParamSet::defaults("vegas", PARAMS))
    }
}

impl VegasConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        let alpha = p.get("alpha").max(0.0);
        VegasConfig {
            init_cwnd_pkts: packets(p.get("init-cwnd")),
            min_cwnd_pkts: packets(p.get("min-cwnd")),
            alpha,
            beta: p.get("beta").max(alpha),
            gamma: p.get("gamma").max(0.0),
            loss_beta: p.get("loss-beta").clamp(0.0, 1.0),
            reports_per_rtt: count_param(p.get("reports-per-rtt")),
        }
    }
}

/// A Vegas controller for one flow.
#[derive(Clone, Debug)]
pub struct Vegas {
    cfg: VegasConfig,
    /// MSS, RTT, loss epoch and timeout state.
    core: WindowCore,
    /// Congestion window, bytes.
    cwnd: u64,
    /// Slow-start threshold, bytes.
    ssthresh: u64,
    /// Smallest RTT ever seen, µs (0: none yet).
    base_rtt_us: u64,
    rounds: RoundCounter,
    /// Smallest RTT sample of the current round, µs (0: none yet).
    round_rtt_us: u64,
    /// In slow start: whether the current round grows the window (else it holds it to measure).
    growth_round: bool,
    /// In slow start: the window held through the last hold round, measured by the next round.
    hold_window: Option<u64>,
    /// The flow was taken over from another algorithm and its first round, which measures the
    /// window handed over, has not ended: no growth until it has.
    taken_over: bool,
    /// The last diff computed, packets (for inspection).
    last_diff: Option<f64>,
    srtt: Srtt,
    clock: ReportClock,
}

impl Vegas {
    /// A controller with `cfg`, before its flow starts (assumes a 1448-byte MSS until then).
    pub fn new(cfg: VegasConfig) -> Self {
        let clock = ReportClock::new(cfg.reports_per_rtt);
        let mut v = Vegas {
            cfg,
            core: WindowCore::new(),
            cwnd: 0,
            ssthresh: 0,
            base_rtt_us: 0,
            rounds: RoundCounter::new(),
            round_rtt_us: 0,
            growth_round: true,
            hold_window: None,
            taken_over: false,
            last_diff: None,
            srtt: Srtt::new(),
            clock,
        };
        v.reset();
        v
    }

    /// The configuration.
    pub fn config(&self) -> &VegasConfig {
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

    /// baseRTT, µs (0 before any sample).
    pub fn base_rtt_us(&self) -> u64 {
        self.base_rtt_us
    }

    /// The diff of the last completed round, packets.
    pub fn last_diff(&self) -> Option<f64> {
        self.last_diff
    }

    /// Rounds started so far.
    pub fn rounds(&self) -> u64 {
        self.rounds.rounds()
    }

    fn mss(&self) -> u64 {
        self.core.mss()
    }

    fn floor(&self) -> u64 {
        self.core.window_bytes(self.cfg.min_cwnd_pkts)
    }

    fn reduced_ssthresh(&self) -> u64 {
        ((self.cwnd as f64 * self.cfg.loss_beta) as u64).max(self.floor())
    }

    /// A round ended with `rtt` µs as its smallest RTT sample; `cwnd` is the window now.
    fn end_of_round(&mut self, rtt: u64) {
        self.taken_over = false;
        let base = self.base_rtt_us;
        let mss = self.mss() as f64;
        // The packets acknowledged in a round were sent in the previous one: in slow start only a
        // growth round that follows a hold round measured one fixed window.
        let measured = if self.in_slow_start() {
            let w = if self.growth_round {
                self.hold_window.take()
            } else {
                self.hold_window = Some(self.cwnd);
                None
            };
            self.growth_round = !self.growth_round;
            w
        } else {
            self.hold_window = None;
            Some(self.cwnd)
        };
        let Some(w) = measured else {
            return;
        };
        if base == 0 || rtt == 0 {
            return;
        }
        let diff = w as f64 / mss * rtt.saturating_sub(base) as f64 / rtt as f64;
        self.last_diff = Some(diff);
        if self.in_slow_start() {
            if diff > self.cfg.gamma {
                let target = (w as f64 * base as f64 / rtt as f64 + mss) as u64;
                self.cwnd = self.cwnd.min(target).max(self.floor());
                self.ssthresh = self.cwnd;
                self.growth_round = true;
            }
        } else if diff < self.cfg.alpha {
            self.cwnd = (self.cwnd + self.mss()).min(MAX_CWND);
        } else if diff > self.cfg.beta {
            self.cwnd = self.cwnd.saturating_sub(self.mss()).max(self.floor());
            // A decrease is no return to slow start (Linux: ssthresh = min(ssthresh, cwnd − 1)).
            self.ssthresh = self.ssthresh.min(self.cwnd);
        }
    }
}

impl WindowAlgorithm for Vegas {
    type Window = u64;

    fn core_mut(&mut self) -> &mut WindowCore {
        &mut self.core
    }

    fn reset(&mut self) {
        let floor = self.floor();
        self.cwnd = self.core.window_bytes(self.cfg.init_cwnd_pkts).max(floor);
        self.ssthresh = MAX_CWND;
        self.base_rtt_us = 0;
        self.rounds = RoundCounter::new();
        self.round_rtt_us = 0;
        self.growth_round = true;
        self.hold_window = None;
        self.taken_over = false;
        self.last_diff = None;
        self.srtt = Srtt::new();
        self.clock = ReportClock::new(self.cfg.reports_per_rtt);
    }

    fn on_timeout(&mut self, repeated: bool) {
        if !repeated {
            self.ssthresh = self.reduced_ssthresh();
        }
        self.cwnd = self.core.loss_window();
        self.growth_round = true;
        self.hold_window = None;
    }

    fn on_loss(&mut self) {
        self.ssthresh = self.reduced_ssthresh();
        self.cwnd = self.ssthresh;
    }

    /// Slow start only: congestion avoidance acts once per round.
    fn grow(&mut self, acked: u64) {
        if self.in_slow_start() && self.growth_round && !self.taken_over {
            self.cwnd = (self.cwnd + acked.min(self.ssthresh - self.cwnd)).min(MAX_CWND);
        }
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn adopt(&mut self, w: u64) {
        self.cwnd = w.clamp(self.floor(), MAX_CWND);
    }

    fn threshold(&self) -> Option<u64> {
        (self.ssthresh < MAX_CWND).then_some(self.ssthresh)
    }

    fn set_threshold(&mut self, bytes: u64) {
        self.ssthresh = bytes.max(self.floor());
    }

    /// The window handed over is measured first: the flow's first round is a measuring round
    /// (as the round after a hold round in slow start), without growth, and at its end the γ exit
    /// brings a queue Vegas did not build down to the window that queues one packet at once.
    /// Vegas keeps no threshold it is handed: it finds the pipe by its delay, and from a window at
    /// or above a handed threshold it would be in congestion avoidance and drain a deep queue by
    /// one MSS per round.
    fn take_over_window(&mut self, handed: &TakeOver) {
        self.calibrate_window(handed.fused);
        self.ssthresh = MAX_CWND;
        self.growth_round = true;
        self.hold_window = Some(self.cwnd);
        self.taken_over = true;
    }
}

impl Controller for Vegas {
    window::window_controller!("vegas");

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        let event = self.core.on_measurement(m);
        let srtt = self.srtt.update(m.rtt_mean_us);
        if m.rtt_min_us > 0 {
            self.base_rtt_us = match self.base_rtt_us {
                0 => m.rtt_min_us,
                b => b.min(m.rtt_min_us),
            };
            self.round_rtt_us = match self.round_rtt_us {
                0 => m.rtt_min_us,
                r => r.min(m.rtt_min_us),
            };
        }
        let round_start = self.rounds.on_report(m.acked_bytes, m.bytes_in_flight);
        // This report's ACKs belong to the round they end: grow before the round closes.
        self.apply(event);
        // Round 1 starts at the first acknowledgement: no round has ended before it.
        if matches!(event, WindowEvent::Grow(_)) && round_start && self.rounds.rounds() > 1 {
            let rtt = self.round_rtt_us;
            self.end_of_round(rtt);
        }
        if round_start {
            self.round_rtt_us = 0;
        }
        Decision {
            report: self.clock.period(srtt),
            ..Decision::cwnd(self.cwnd())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{ControlMode, Fused, ReportPeriod};
    use crate::filters::path::Path;
    use crate::test_support::{self, MSS, START, started};

    const BASE: u64 = 40_000;

    fn vegas(cfg: VegasConfig) -> Vegas {
        started(Vegas::new(cfg))
    }

    fn report(now: u64, acked: u64, inflight: u64, rtt: u64) -> Measurement {
        Measurement {
            interval_us: rtt / 4,
            bytes_in_flight: inflight,
            ..test_support::report(now, acked, 0, rtt)
        }
    }

    /// `(round, window in packets, in slow start)` at the start of every round until `until_us`.
    fn rounds_on(v: &mut Vegas, path: &mut Path, until_us: f64) -> Vec<(u64, f64, bool)> {
        let mut out: Vec<(u64, f64, bool)> = vec![];
        path.run_observed(v, until_us, |v, _| {
            if out.last().is_none_or(|r| r.0 != v.rounds()) {
                out.push((
                    v.rounds(),
                    f64::from(v.cwnd()) / MSS as f64,
                    v.in_slow_start(),
                ));
            }
        });
        out
    }

    #[test]
    fn starts_with_the_initial_window_and_asks_for_quarter_rtt_reports() {
        let mut v = Vegas::new(VegasConfig::default());
        let d = v.on_start(&START);
        assert_eq!(d.cwnd, Some(10 * MSS as u32));
        assert_eq!((d.rate, d.report), (None, None));
        assert_eq!(
            (v.name(), v.mode(), v.rate()),
            ("vegas", ControlMode::Window, None)
        );
        let d = v.on_measurement(&report(BASE, MSS, 9 * MSS, BASE));
        assert_eq!(d.report, Some(ReportPeriod::Micros(BASE / 4)));
        assert_eq!(v.base_rtt_us(), BASE);
    }

    #[test]
    fn slow_start_doubles_every_other_round_and_exits_above_gamma() {
        let mut v = vegas(VegasConfig::default());
        let mut path = Path::new(24.0, BASE); // 83 packets in flight fill the pipe
        path.start(&mut v);
        let rounds = rounds_on(&mut v, &mut path, 2e6);
        let ss: Vec<f64> = rounds.iter().filter(|r| r.2).map(|r| r.1).collect();
        assert!(ss.len() >= 6, "{rounds:?}");
        // Growth rounds double the window (a round acknowledges about one window; reports
        // every srtt/4 may add a quarter round: 2.1×), hold rounds keep it exactly.
        for (i, w) in ss.windows(2).enumerate() {
            if i % 2 == 0 {
                assert!(w[1] > 1.9 * w[0] && w[1] <= 2.1 * w[0], "{ss:?}");
            } else {
                assert_eq!(w[1], w[0], "hold round {i}: {ss:?}");
            }
        }
        // It left slow start at the window that queues about gamma packets (one past the pipe,
        // plus at most one for the smallest RTT's rounding and the report granularity), not at the
        // doubled window it had grown to meanwhile.
        let exit = rounds.iter().find(|r| !r.2).expect("left slow start").1;
        let bdp = path.bdp_pkts();
        assert!(
            (bdp + 1.0..=bdp + 3.0).contains(&exit),
            "exit at {exit} packets, BDP {bdp:.1}: {rounds:?}"
        );
    }

    #[test]
    fn steady_state_queues_between_alpha_and_beta_packets() {
        let mut v = vegas(VegasConfig::default());
        let mut path = Path::new(24.0, BASE);
        path.start(&mut v);
        path.run(&mut v, 5e6);
        let steps = path.run(&mut v, 15e6);
        let queued: Vec<u64> = steps.iter().map(|s| s.queued).collect();
        let inside = queued.iter().filter(|q| (2..=4).contains(*q)).count();
        assert!(
            inside as f64 >= 0.9 * queued.len() as f64,
            "{inside} of {} reports with 2..=4 packets queued: {queued:?}",
            queued.len()
        );
        let diff = v.last_diff().unwrap();
        assert!((1.0..=5.0).contains(&diff), "diff {diff}");
    }

    #[test]
    fn window_moves_one_mss_per_round_towards_the_band() {
        let mut v = vegas(VegasConfig::default());
        let mut path = Path::new(24.0, BASE);
        path.start(&mut v);
        path.run(&mut v, 2e6);
        // Far below the pipe in congestion avoidance: +1 MSS per round.
        v.calibrate(Fused::Cwnd(30 * MSS as u32));
        v.ssthresh = 0;
        path.run(&mut v, 2.2e6);
        let (r0, w0) = (v.rounds(), v.cwnd());
        path.run(&mut v, 2.6e6);
        let (r1, w1) = (v.rounds(), v.cwnd());
        assert!(r1 >= r0 + 5, "rounds {r0}..{r1}");
        assert_eq!(u64::from(w1 - w0), (r1 - r0) * MSS, "rounds {r0}..{r1}");
        // Far above: −1 MSS per round.
        v.calibrate(Fused::Cwnd(200 * MSS as u32));
        path.run(&mut v, 3.5e6);
        let (r0, w0) = (v.rounds(), v.cwnd());
        path.run(&mut v, 4.5e6);
        let (r1, w1) = (v.rounds(), v.cwnd());
        assert!(r1 >= r0 + 5, "rounds {r0}..{r1}");
        assert_eq!(u64::from(w0 - w1), (r1 - r0) * MSS, "rounds {r0}..{r1}");
    }

    #[test]
    fn loss_halves_like_reno_and_timeout_restarts_slow_start() {
        let mut v = vegas(VegasConfig::default());
        v.calibrate(Fused::Cwnd(40 * MSS as u32));
        let mut m = report(1_000_000, MSS, 40 * MSS, BASE);
        m.lost_packets = 1;
        v.on_measurement(&m);
        assert_eq!(u64::from(v.cwnd()), 20 * MSS);
        assert_eq!(v.ssthresh(), 20 * MSS);
        assert!(!v.in_slow_start());
        // Inside the loss epoch: held.
        v.on_measurement(&report(1_010_000, 10 * MSS, 20 * MSS, BASE));
        assert_eq!(u64::from(v.cwnd()), 20 * MSS);
        let mut t = report(2_000_000, 0, 0, BASE);
        t.timeout = true;
        v.on_measurement(&t);
        assert_eq!(u64::from(v.cwnd()), MSS);
        assert_eq!(v.ssthresh(), 10 * MSS);
        assert!(v.in_slow_start());
        // Slow start back towards ssthresh, a growth round first.
        v.on_measurement(&report(2_050_000, MSS, MSS, BASE));
        assert_eq!(u64::from(v.cwnd()), 2 * MSS);
    }

    #[test]
    fn decrease_stops_at_beta_and_at_min_cwnd() {
        // RTT ten times baseRTT: 90 % of the window is queued, diff = 0.9 cwnd.
        let run = |min_cwnd_pkts: u32| {
            let mut v = vegas(VegasConfig {
                min_cwnd_pkts,
                ..VegasConfig::default()
            });
            v.on_measurement(&report(BASE, MSS, MSS, BASE));
            v.ssthresh = 0;
            v.calibrate(Fused::Cwnd(20 * MSS as u32));
            let mut now = BASE;
            for _ in 0..40 {
                now += 10 * BASE;
                let w = u64::from(v.cwnd());
                v.on_measurement(&report(now, w, w, 10 * BASE));
            }
            v
        };
        // diff ≤ beta = 4 from 4 packets on (0.9 · 4 = 3.6).
        assert_eq!(u64::from(run(2).cwnd()), 4 * MSS);
        let mut v = run(6);
        assert_eq!(u64::from(v.cwnd()), 6 * MSS, "the 6-packet floor");
        assert!(!v.in_slow_start());
        v.calibrate(Fused::Cwnd(1));
        assert_eq!(u64::from(v.cwnd()), 6 * MSS);
    }

    #[test]
    fn rate_is_converted_with_the_last_rtt() {
        let mut v = vegas(VegasConfig::default());
        v.calibrate(Fused::Rate(1_000_000));
        assert_eq!(u64::from(v.cwnd()), 10 * MSS, "no RTT yet");
        v.on_measurement(&report(BASE, MSS, MSS, BASE));
        v.calibrate(Fused::Rate(MSS * 1000)); // 1000 packets/s · 40 ms = 40 packets
        assert_eq!(u64::from(v.cwnd()), 40 * MSS);
    }

    #[test]
    fn params_override_defaults() {
        let mut p = ParamSet::defaults("vegas", PARAMS);
        p.set(PARAMS, "alpha", "1").unwrap();
        p.set(PARAMS, "beta", "0.5").unwrap();
        p.set(PARAMS, "reports-per-rtt", "8").unwrap();
        let cfg = VegasConfig::from_params(&p);
        assert_eq!((cfg.alpha, cfg.beta, cfg.reports_per_rtt), (1.0, 1.0, 8));
        let c = (SPEC.build)(&p);
        assert_eq!(c.name(), "vegas");
        let keys: Vec<&str> = SPEC.params.iter().map(|p| p.key).collect();
        assert_eq!(
            keys,
            [
                "init-cwnd",
                "min-cwnd",
                "alpha",
                "beta",
                "gamma",
                "loss-beta",
                "reports-per-rtt"
            ]
        );
    }
}
