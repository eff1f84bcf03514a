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
//!   unbounded, so by default (`hystart` off) the first slow start ends at the first loss; with
//!   `hystart` on, HyStart++ may end it earlier (see below).
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
//! # HyStart++ (RFC 9406), parameter `hystart`, off by default
//!
//! RFC 9438 §4.10 recommends HyStart++ for CUBIC's slow start. It is built here but **off by
//! default**: every figure measured with this module so far was measured without it, and the
//! project's algorithm specification does not ask for it. With `hystart` on:
//!
//! - **When**: only in the first slow start, while `ssthresh` still has its initial unbounded
//!   value (RFC 9406 §4.2: later slow starts, after a timeout, stop at the `ssthresh` they
//!   found). A loss, a timeout or a threshold handed over by a predecessor ends it, as in plain
//!   slow start.
//! - **Rounds** are packet-timed ([`RoundCounter`]): a round ends when the data in flight at its
//!   start has been acknowledged. A report acknowledges many packets; the report that ends a round
//!   counts wholly in the round it ends (as in [`crate::vegas`]). While HyStart++ runs the
//!   controller asks for [`HYSTART_REPORTS_PER_RTT`] reports per smoothed RTT (rather than one) so
//!   that a round's first samples arrive early in the round; once it is over it asks for one
//!   report per RTT again.
//! - **RTT samples**: the RFC takes one sample per ACK; a report carries `rtt_samples` samples and
//!   their minimum `rtt_min_us`. The round's `currentRoundMinRTT` is the minimum of its reports'
//!   minima and `rttSampleCount` the sum of their `rtt_samples`; the checks below run after each
//!   report once the round has `N_RTT_SAMPLE` = 8 samples. The approximation: the report that
//!   brings the 8th sample may carry later samples too, whose minimum can only be lower, so the
//!   delay-increase test sees the minimum of the first 8 samples or of a few more (it can fire
//!   later than per-ACK, never earlier). `lastRoundMinRTT` is the previous round's minimum.
//! - **Slow start exit**: with `RttThresh = clamp(lastRoundMinRTT / 8, 4 ms, 16 ms)`
//!   (MIN_RTT_DIVISOR, MIN_RTT_THRESH, MAX_RTT_THRESH), a round whose `currentRoundMinRTT ≥
//!   lastRoundMinRTT + RttThresh` enters **Conservative Slow Start** (CSS) with
//!   `cssBaselineMinRtt = currentRoundMinRTT`.
//! - **CSS**: the window grows by `acked / CSS_GROWTH_DIVISOR` (4) per report. A round of CSS whose
//!   minimum RTT (once it has 8 samples) falls below `cssBaselineMinRtt` was a false alarm: back to
//!   slow start. When `CSS_ROUNDS` = 5 rounds have ended in CSS (the round CSS began in counts as
//!   the first), `ssthresh = cwnd` and congestion avoidance starts, as RFC 9438 §4.10 says for a
//!   slow start left without a loss: `cwnd_prior = cwnd`, `W_max = cwnd` at the epoch's start,
//!   `K = 0`.
//! - **L** (the RFC's per-ACK growth cap of 8 MSS for an unpaced sender) is not applied: a report
//!   aggregates many ACKs and does not say how many bytes each acknowledged, so slow start (and
//!   CSS, divided by 4) grows by the report's acknowledged bytes, as plain slow start does here.
//!   With one or two packets per ACK the cap would not bind anyway.
//!
//! # Calibration (PolyCC)
//!
//! [`Fused::Cwnd`](crate::controller::Fused::Cwnd) sets `cwnd = w` (floored at `min_cwnd·mss`) and CUBIC continues its own law from
//! there: `W_max`, `cwnd_prior` and `ssthresh` are kept, `W_est` is capped at `w`, and if a cubic
//! epoch is running it restarts from `w` on the same curve shape — `K = cbrt((W_max − w)/C)` and
//! `t_epoch = now + RTT`, so the next per-RTT report moves to `W_cubic(RTT)` of the new curve, one
//! RTT further along it, exactly as if CUBIC had chosen `w` itself. A fused value equal to CUBIC's
//! own window (within a byte) changes nothing, so a copilot that keeps winning the fusion follows
//! plain CUBIC. A fused window below `ssthresh` sends CUBIC back to slow start. `now` is the time of
//! the last report. [`Fused::Rate`](crate::controller::Fused::Rate) becomes `cwnd = rate · rtt` with the last mean RTT, and is
//! ignored before any RTT sample.
//!
//! # Parameters
//!
//! `init-cwnd` (10 packets, RFC 6928), `min-cwnd` (2 packets, RFC 5681), `c` (0.4, RFC 9438 §5.1),
//! `beta` (0.7, RFC 9438 §5.1 / §4.6), `fast-convergence` (true, §4.7), `tcp-friendly` (true, §4.3),
//! `hystart` (false, RFC 9406 as RFC 9438 §4.10 recommends; off so that the measured figures stay
//! those of plain slow start), `limited-growth` (true: grow only while the window limits the flow,
//! RFC 9438 §5.8; see [`crate::window`]).
//! Out-of-range values are clamped: packets to ≥ 1, `beta` to [0, 1], `c` to ≥ 0.001.
//!
//! The loss epoch, the timeout state, the RTT, the MSS and the time of the last report are kept by
//! the shared [`WindowCore`]; this module only says how the window
//! reacts.

use crate::controller::{Controller, Decision, Measurement, ReportPeriod};
use crate::filters::{ReportClock, RoundCounter, Srtt};
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window::{self, WindowAlgorithm, WindowCore, WindowEvent, packets};

/// The largest window a decision can carry, bytes.
const MAX_CWND: f64 = window::MAX_CWND as f64;

/// Smallest accepted `c` (a zero would make K infinite).
const MIN_C: f64 = 0.001;

/// HyStart++: RTT samples a round needs before its minimum is compared (RFC 9406 §4.3).
pub const N_RTT_SAMPLE: u64 = 8;
/// HyStart++: smallest RttThresh, µs (RFC 9406 §4.3, 4 ms).
pub const MIN_RTT_THRESH_US: u64 = 4_000;
/// HyStart++: largest RttThresh, µs (RFC 9406 §4.3, 16 ms).
pub const MAX_RTT_THRESH_US: u64 = 16_000;
/// HyStart++: RttThresh is lastRoundMinRTT over this (RFC 9406 §4.3).
pub const MIN_RTT_DIVISOR: u64 = 8;
/// HyStart++: Conservative Slow Start grows by the acknowledged bytes over this (RFC 9406 §4.3).
pub const CSS_GROWTH_DIVISOR: f64 = 4.0;
/// HyStart++: rounds of Conservative Slow Start before congestion avoidance (RFC 9406 §4.3).
pub const CSS_ROUNDS: u64 = 5;
/// Reports asked for per smoothed RTT while HyStart++ runs (this module's choice: rounds' first
/// samples early in the round, as with Vegas's default).
pub const HYSTART_REPORTS_PER_RTT: u64 = 4;

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
    ParamSpec {
        key: "hystart",
        unit: Unit::Bool,
        default: 0.0,
        help: "HyStart++ in the first slow start: leave it on a round-trip delay increase \
               (Conservative Slow Start, then congestion avoidance) rather than at the first loss; \
               off by default: the project's measured figures are without it",
        source: "RFC 9406 §4, recommended by RFC 9438 §4.10",
    },
    window::LIMITED_GROWTH,
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
    /// HyStart++ in the first slow start (RFC 9406; off by default).
    pub hystart: bool,
    /// Grow only while the window limits the flow (RFC 9438 §5.8, [`window::LIMITED_GROWTH`]).
    pub limited_growth: bool,
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
            hystart: p.flag("hystart"),
            limited_growth: p.flag("limited-growth"),
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

/// HyStart++'s state (RFC 9406 §4.2), kept while the first slow start lasts.
#[derive(Clone, Debug)]
struct HyStart {
    rounds: RoundCounter,
    /// lastRoundMinRTT, µs (`u64::MAX`: none).
    last_round_min_rtt: u64,
    /// currentRoundMinRTT, µs (`u64::MAX`: none).
    current_round_min_rtt: u64,
    /// rttSampleCount of the current round.
    samples: u64,
    /// In Conservative Slow Start: cssBaselineMinRtt (µs) and the CSS rounds ended so far.
    css: Option<(u64, u64)>,
    srtt: Srtt,
    clock: ReportClock,
    /// Reports were asked at the HyStart++ period and the per-RTT default is not back yet.
    fine_reports: bool,
}

impl HyStart {
    fn new() -> Self {
        HyStart {
            rounds: RoundCounter::new(),
            last_round_min_rtt: u64::MAX,
            current_round_min_rtt: u64::MAX,
            samples: 0,
            css: None,
            srtt: Srtt::new(),
            clock: ReportClock::new(HYSTART_REPORTS_PER_RTT),
            fine_reports: false,
        }
    }

    /// Take in the samples of a report in slow start or CSS; returns whether the window should
    /// now leave HyStart++ for congestion avoidance (CSS_ROUNDS rounds done).
    fn on_report(&mut self, m: &Measurement) -> bool {
        if m.rtt_samples > 0 && m.rtt_min_us > 0 {
            self.current_round_min_rtt = self.current_round_min_rtt.min(m.rtt_min_us);
            self.samples += m.rtt_samples;
        }
        let measured = self.samples >= N_RTT_SAMPLE && self.current_round_min_rtt != u64::MAX;
        match self.css {
            None if measured && self.last_round_min_rtt != u64::MAX => {
                let thresh = (self.last_round_min_rtt / MIN_RTT_DIVISOR)
                    .clamp(MIN_RTT_THRESH_US, MAX_RTT_THRESH_US);
                if self.current_round_min_rtt >= self.last_round_min_rtt + thresh {
                    self.css = Some((self.current_round_min_rtt, 0));
                }
            }
            Some((baseline, _)) if measured && self.current_round_min_rtt < baseline => {
                self.css = None;
            }
            _ => {}
        }
        let mut done = false;
        if self.rounds.on_report(m.acked_bytes, m.bytes_in_flight) {
            if let Some((_, n)) = self.css.as_mut() {
                *n += 1;
                done = *n >= CSS_ROUNDS;
            }
            self.last_round_min_rtt = self.current_round_min_rtt;
            self.current_round_min_rtt = u64::MAX;
            self.samples = 0;
        }
        done
    }
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
    /// HyStart++ state (used only with `hystart` on).
    hystart: HyStart,
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
            hystart: HyStart::new(),
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

    /// Whether HyStart++ runs: `hystart` on and the first slow start (`ssthresh` unbounded).
    pub fn hystart_active(&self) -> bool {
        self.cfg.hystart && self.ssthresh.is_infinite()
    }

    /// Whether the flow is in HyStart++'s Conservative Slow Start.
    pub fn in_css(&self) -> bool {
        self.hystart_active() && self.hystart.css.is_some()
    }

    /// A report with HyStart++ on: the window reacts as without it (CSS growth divided by
    /// CSS_GROWTH_DIVISOR), then HyStart++ takes in the report's RTT samples and rounds.
    fn react_hystart(&mut self, m: &Measurement) -> Decision {
        let event = self.core.on_measurement(m);
        let srtt = self.hystart.srtt.update(m.rtt_mean_us);
        self.respond(event);
        if self.hystart_active()
            && matches!(event, WindowEvent::Grow(_))
            && self.hystart.on_report(m)
        {
            // RFC 9406 §4.2: CSS_ROUNDS rounds of CSS, ssthresh = cwnd; RFC 9438 §4.10.
            self.ssthresh = self.cwnd;
            self.cwnd_prior = self.cwnd;
            self.hystart.css = None;
        }
        let report = if self.hystart_active() {
            let p = self.hystart.clock.period(srtt);
            self.hystart.fine_reports |= p.is_some();
            p
        } else if std::mem::take(&mut self.hystart.fine_reports) {
            Some(ReportPeriod::PerRtt)
        } else {
            None
        };
        Decision {
            report,
            ..Decision::cwnd(self.cwnd())
        }
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
        self.hystart = HyStart::new();
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
        if self.in_css() {
            // RFC 9406 §4.2: Conservative Slow Start (ssthresh is unbounded here).
            self.cwnd = (self.cwnd + acked / CSS_GROWTH_DIVISOR).min(MAX_CWND);
            return;
        }
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

    fn limited_growth(&self) -> bool {
        self.cfg.limited_growth
    }

    /// RFC 9438 §5.8: no growth, and the time the window did not limit the flow is left out of
    /// `t` (the epoch's start moves by the report's interval, as Linux moves it by an idle
    /// period), so the curve does not run ahead of a window that could not be used.
    fn on_unlimited(&mut self, elapsed_us: u64) {
        if let Some(e) = self.epoch.as_mut() {
            e.start_us += elapsed_us as f64;
        }
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
        if self.cfg.hystart {
            self.react_hystart(m)
        } else {
            self.react(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{ControlMode, FlowStart, Fused};
    use crate::test_support::{MSS, report, started, window_full};

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

    /// CUBIC without the Reno-friendly region, cut by a loss at 100 MSS at 1 s.
    fn after_a_loss_at_100(rtt: u64) -> Cubic {
        let mut c = cubic(no_friendly());
        loss_at(&mut c, 100, 1_000_000, rtt);
        c
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
        let (mut a, mut b) = (after_a_loss_at_100(rtt), after_a_loss_at_100(rtt));
        let mut now = 1_000_000;
        for _ in 0..600 {
            let n = u64::from(b.cwnd()) / MSS;
            for i in 1..=n {
                let m = window_full(report(now + rtt * i / n, MSS, 0, rtt), b.cwnd());
                b.on_measurement(&m);
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
    fn time_not_limited_by_the_window_does_not_count_on_the_curve() {
        let rtt = 50_000u64;
        let (mut a, mut b) = (after_a_loss_at_100(rtt), after_a_loss_at_100(rtt));
        let mut now = 1_000_000;
        for _ in 0..20 {
            now += rtt;
            per_rtt(&mut a, now, rtt);
            per_rtt(&mut b, now, rtt);
        }
        // `b`'s application then keeps 20 MSS in flight for 4 s: no growth, K unchanged.
        let (w0, k0) = (b.cwnd(), b.k());
        let gap = 4_000_000;
        let mut t = now;
        while t < now + gap {
            t += rtt;
            b.on_measurement(&report(t, 20 * MSS, 0, rtt));
        }
        assert_eq!(b.cwnd(), w0);
        assert_eq!(b.k(), k0);
        // Window-limited again, `b` continues the curve from where it left it: RTT by RTT it
        // follows `a`, which never stopped (without the shift it would jump towards W(t + 4 s)).
        for _ in 0..40 {
            now += rtt;
            per_rtt(&mut a, now, rtt);
            per_rtt(&mut b, now + gap, rtt);
            assert!(
                a.cwnd().abs_diff(b.cwnd()) <= 1,
                "{now}: {} vs {}",
                a.cwnd(),
                b.cwnd()
            );
        }
        assert!(b.cwnd() > w0, "growth resumed");
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
        let (mut a, mut b) = (after_a_loss_at_100(rtt), after_a_loss_at_100(rtt));
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
                hystart: false,
                limited_growth: true,
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
        p.set(PARAMS, "hystart", "on").unwrap();
        p.set(PARAMS, "limited-growth", "off").unwrap();
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
                hystart: true,
                limited_growth: false,
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

    fn with_hystart() -> CubicConfig {
        CubicConfig {
            hystart: true,
            ..CubicConfig::default()
        }
    }

    /// One round of synthetic slow start: a report at `now` acknowledging the whole window with
    /// every sample at `rtt`, the window's worth still in flight (so every report ends a round).
    fn round(c: &mut Cubic, now: u64, rtt: u64) -> Decision {
        let w = u64::from(c.cwnd());
        c.on_measurement(&Measurement {
            bytes_in_flight: w,
            ..report(now, w, 0, rtt)
        })
    }

    #[test]
    fn hystart_off_changes_nothing_and_asks_no_report_period() {
        let mut c = cubic(CubicConfig::default());
        assert!(!c.config().hystart, "off by default");
        for k in 1..=12u64 {
            // The RTT rises by 10 ms per round: plain slow start does not look at it.
            let d = round(&mut c, k * 100_000, 40_000 + k * 10_000);
            assert_eq!(d.report, None);
            assert_eq!(u64::from(c.cwnd()), (10 * MSS) << k);
            assert!(!c.in_css() && !c.hystart_active());
        }
        assert_eq!(c.ssthresh(), None);
    }

    #[test]
    fn hystart_keeps_doubling_while_the_rtt_stays_flat() {
        let mut c = cubic(with_hystart());
        for k in 1..=14u64 {
            // 40 ms, with 3 ms of jitter every other round: below RttThresh = 40/8 = 5 ms.
            let rtt = 40_000 + (k % 2) * 3_000;
            round(&mut c, k * 50_000, rtt);
            assert_eq!(u64::from(c.cwnd()), (10 * MSS) << k, "round {k}");
            assert!(c.hystart_active() && !c.in_css(), "round {k}");
        }
        assert_eq!(c.ssthresh(), None);
    }

    #[test]
    fn hystart_enters_css_on_a_delay_increase_then_congestion_avoidance() {
        let mut c = cubic(with_hystart());
        let rtt = 40_000u64;
        // The first report asks for four reports per smoothed RTT.
        let d = round(&mut c, 40_000, rtt);
        assert_eq!(d.report, Some(ReportPeriod::Micros(10_000)));
        round(&mut c, 80_000, rtt);
        assert_eq!(u64::from(c.cwnd()), 40 * MSS);
        // +4.9 ms: below RttThresh (5 ms), still slow start.
        round(&mut c, 120_000, rtt + 4_900);
        assert_eq!(u64::from(c.cwnd()), 80 * MSS);
        assert!(!c.in_css());
        // +5 ms over the last round's minimum: CSS (this report grew the window in slow start).
        round(&mut c, 160_000, rtt + 10_600); // 44.9 ms + 44.9/8 ms = 50.5 ms
        assert_eq!(u64::from(c.cwnd()), 160 * MSS);
        assert!(c.in_css() && c.in_slow_start());
        // Rounds 2..5 of CSS grow by a quarter of the acknowledged bytes: ×1.25 per round.
        let mut w = 160.0 * MSSF;
        for n in 2..=CSS_ROUNDS {
            let d = round(&mut c, 160_000 + n * 50_000, rtt + 10_600);
            w *= 1.25;
            assert!(close(f64::from(c.cwnd()), w, 1.0), "CSS round {n}");
            if n < CSS_ROUNDS {
                assert!(c.in_css(), "CSS round {n}");
                assert_eq!(d.report, None, "period unchanged");
            } else {
                // Five rounds in CSS: ssthresh = cwnd, congestion avoidance, per-RTT reports.
                assert!(!c.in_css() && !c.hystart_active() && !c.in_slow_start());
                assert_eq!(c.ssthresh(), Some(c.cwnd().into()));
                assert_eq!(d.report, Some(ReportPeriod::PerRtt));
            }
        }
        // No loss happened; congestion avoidance starts with W_max = cwnd and K = 0 (RFC 9438
        // §4.10), then grows slowly.
        let exit = f64::from(c.cwnd());
        let d = round(&mut c, 500_000, rtt + 10_600);
        assert_eq!(d.report, None);
        assert_eq!(c.k(), Some(0.0));
        assert_eq!(c.w_max(), Some(exit.round() as u64));
        let grown = f64::from(c.cwnd()) - exit;
        assert!((0.0..=2.0 * MSSF).contains(&grown), "CA growth {grown}");
    }

    #[test]
    fn hystart_css_returns_to_slow_start_when_the_rtt_falls_back() {
        let mut c = cubic(with_hystart());
        let rtt = 40_000u64;
        round(&mut c, 40_000, rtt);
        round(&mut c, 80_000, rtt);
        round(&mut c, 120_000, rtt + 8_000); // CSS, baseline 48 ms
        assert!(c.in_css());
        assert_eq!(u64::from(c.cwnd()), 80 * MSS);
        round(&mut c, 170_000, rtt + 8_000);
        assert!(c.in_css());
        assert!(close(f64::from(c.cwnd()), 100.0 * MSSF, 1.0));
        // The RTT falls below the baseline: the increase was spurious, slow start again (this
        // report still grew at the CSS pace).
        round(&mut c, 220_000, rtt + 1_000);
        assert!(!c.in_css() && c.hystart_active());
        assert!(close(f64::from(c.cwnd()), 125.0 * MSSF, 1.0));
        round(&mut c, 270_000, rtt + 1_000);
        assert!(
            close(f64::from(c.cwnd()), 250.0 * MSSF, 1.0),
            "doubling again"
        );
        assert_eq!(c.ssthresh(), None);
    }

    #[test]
    fn hystart_needs_eight_samples_and_only_runs_in_the_first_slow_start() {
        // Rounds of fewer than N_RTT_SAMPLE samples are never compared.
        let mut c = cubic(with_hystart());
        for (k, rtt) in [40_000u64, 60_000, 80_000].into_iter().enumerate() {
            let now = 40_000 * (k as u64 + 1);
            c.on_measurement(&Measurement {
                rtt_samples: 7,
                bytes_in_flight: 1,
                ..report(now, MSS, 0, rtt)
            });
            assert!(!c.in_css(), "{rtt}");
        }
        // A loss ends HyStart++ as it ends slow start; the slow start after a timeout is plain.
        let mut c = cubic(with_hystart());
        round(&mut c, 40_000, 40_000);
        c.on_measurement(&report(80_000, 0, 1, 40_000));
        assert!(!c.hystart_active());
        let mut m = report(200_000, 0, 0, 40_000);
        m.timeout = true;
        c.on_measurement(&m);
        assert!(c.in_slow_start() && !c.hystart_active());
        round(&mut c, 300_000, 40_000);
        round(&mut c, 400_000, 60_000);
        assert!(!c.in_css());
        assert_eq!(u64::from(c.cwnd()), 4 * MSS, "plain doubling from one MSS");
    }

    #[test]
    fn hystart_leaves_slow_start_without_a_loss_on_a_packet_level_path() {
        // 20 Mbit/s, 40 ms: a BDP of 69 packets; the buffer is unlimited, so nothing is ever lost
        // and plain slow start never ends.
        use crate::filters::path::Path;
        let run = |hystart: bool| {
            let mut c = Cubic::new(CubicConfig {
                hystart,
                ..CubicConfig::default()
            });
            let mut path = Path::new(20.0, 40_000);
            path.start(&mut c);
            let mut css_window = None;
            path.run_observed(&mut c, 2e6, |c, _| {
                if c.in_css() && css_window.is_none() {
                    css_window = Some(f64::from(c.cwnd()) / MSSF);
                }
            });
            (c, css_window, path.bdp_pkts())
        };
        let (plain, _, bdp) = run(false);
        let (hy, css_window, _) = run(true);
        assert_eq!(plain.ssthresh(), None);
        // In ACK-clocked slow start the queue drains between a round's bursts until the window
        // is a few BDP; the first samples of a round see a queue of 5 ms (8.6 packets) only
        // then. Measured: CSS from 217 packets (3.1 BDP).
        let css = css_window.expect("entered CSS");
        assert!((bdp..=4.0 * bdp).contains(&css), "CSS at {css:.0} packets");
        // Five rounds of CSS at ×1.25 per round (the first one partly), then congestion
        // avoidance at ssthresh = cwnd. Measured: 642 packets (2.96 × the CSS window).
        let ssthresh = hy.ssthresh().expect("left slow start without a loss") as f64 / MSSF;
        assert!(!hy.in_slow_start());
        assert!(
            (1.25f64.powi(3) * css..=1.25f64.powi(5) * 1.1 * css).contains(&ssthresh),
            "ssthresh {ssthresh:.0} packets, CSS at {css:.0}, BDP {bdp:.0}"
        );
        // Plain slow start grows on by the link rate (1727 packets/s here).
        let (wp, wh) = (f64::from(plain.cwnd()), f64::from(hy.cwnd()));
        assert!(wp > 4.0 * wh, "plain {wp}, hystart {wh}");
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
                "tcp-friendly",
                "hystart",
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
