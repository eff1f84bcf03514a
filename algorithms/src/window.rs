//! What every window-based algorithm shares, written once: [`WindowCore`] owns the flow's MSS, the
//! RTT it last observed, the time of the last report, the once-per-RTT loss epoch (recovery with
//! its growth hold) and the timeout state, and classifies each [`Measurement`] into a
//! [`WindowEvent`] — timeout, loss, growth by the acknowledged bytes, or hold — so that an
//! algorithm ([`crate::reno`], [`crate::cubic`], ...) only says how its window reacts to each
//! ([`WindowAlgorithm`]).
//! [`WindowCore::fused_window`] converts a PolyCC [`Fused`] value (a window, or a rate times the
//! last RTT) into a window for `calibrate`; [`INIT_CWND`] and [`MIN_CWND`] are the window
//! parameters they declare alike.
//!
//! # The loss epoch, as built
//!
//! - **RTT**: each report's mean RTT sample, else its last sample; a report without samples keeps
//!   the last RTT seen.
//! - **Loss** (`lost_packets > 0`, no timeout, outside a loss epoch): a [`WindowEvent::Loss`]; the
//!   loss epoch lasts one RTT from now (the last RTT seen, else the report interval), and within it
//!   further losses are ignored and the window is held ([`WindowEvent::Hold`]), as in NewReno's fast
//!   recovery (RFC 6582).
//! - **Timeout** (`timeout`): a [`WindowEvent::Timeout`], `repeated` when no data was acknowledged
//!   since the previous timeout or the timeout falls inside a loss epoch (the algorithm then keeps
//!   its `ssthresh`, RFC 5681 §3.1). It starts a loss epoch too, but without the growth hold: slow
//!   start restarts at once.
//! - Otherwise (no loss, or a loss inside the epoch of a timeout): a [`WindowEvent::Grow`] with the
//!   report's newly acknowledged bytes.
//!
//! # Growth only while the window limits the flow
//!
//! An algorithm with the [`LIMITED_GROWTH`] parameter on (Reno, CUBIC, DCTCP and PACCP, by default)
//! grows only while its window is what limits the flow, as Linux does (`tcp_is_cwnd_limited`),
//! RFC 9438 §5.8 asks of CUBIC and RFC 7661 of TCP: a flow held back by its application, its
//! receiver or a pacing rate (a PolyCC copilot under a rate-based pilot) would otherwise raise
//! its window without bound, and release it as a burst once the limit lifts.
//!
//! - **The flight** of a report is the bytes in flight at its last ACK plus the bytes it
//!   acknowledged (SACKed included): what was out at the interval's start plus what was sent in
//!   it, an upper bound of the largest flight of the interval that needs no per-ACK field. The
//!   core keeps its maximum over the last RTT (a per-ACK report's flight is the flight before
//!   its ACK; the maximum over an RTT is the flight of the round, as Linux's `max_packets_out`).
//! - **Limited** when `cwnd ≤ flight + 3 MSS`, with 3 MSS of slack for a sender that cannot fill
//!   the last few bytes of its window at once (QUIC's `kMaxBurstBytes` in the Chromium stack the
//!   PolyCC paper used); in slow start also when `cwnd < 2 · flight` (Linux's rule: slow start
//!   may double what the flow uses). `cwnd` is the smaller of the algorithm's window and the one
//!   the datapath reports holding the flow to: a window just decided is not installed yet, and
//!   the flow cannot have filled it.
//! - **How tight.** With one report per RTT the flight estimate is about twice what the flow
//!   keeps out (what is out at the end plus a round of acknowledgements), so a window the flow
//!   does not fill stops growing at about twice what it uses, four times in slow start; with
//!   per-ACK reports, at what it uses plus 3 MSS (twice that in slow start). Either way bounded,
//!   where growing on every acknowledged byte is not; a tighter estimate would need the largest
//!   flight of the interval, a per-ACK field the shared program has no room for (portus allows
//!   16 report fields, all in use).
//! - Otherwise the report's growth is withheld ([`WindowAlgorithm::on_unlimited`]: CUBIC moves
//!   its epoch's start by the report's interval, so that the time the flow was not limited by its
//!   window does not count in `t`).
//!
//! Time is the agent's [`Measurement::now_us`] (µs), never the wall clock.

use crate::controller::{Controller, Decision, FlowStart, Fused, Measurement, TakeOver};
use crate::filters::WindowedFilter;
use crate::params::{ParamSpec, Unit};

/// MSS assumed until the flow tells us its own, bytes.
pub const DEFAULT_MSS: u64 = 1448;

/// The largest window a decision can carry, bytes.
pub const MAX_CWND: u64 = u32::MAX as u64;

/// The `init-cwnd` parameter of a window algorithm (packets, IW10).
pub const INIT_CWND: ParamSpec = ParamSpec {
    key: "init-cwnd",
    unit: Unit::Packets,
    default: 10.0,
    help: "initial congestion window",
    source: "RFC 6928 §2 (IW10)",
};

/// The `min-cwnd` parameter of a window algorithm (packets): the floor of `ssthresh` and of the
/// window after a loss.
pub const MIN_CWND: ParamSpec = ParamSpec {
    key: "min-cwnd",
    unit: Unit::Packets,
    default: 2.0,
    help: "floor of ssthresh and of the window after a loss (not of the 1-MSS timeout loss window)",
    source: "RFC 5681 §3.1 eq. (4) (ssthresh >= 2*SMSS)",
};

/// The `limited-growth` parameter of a window algorithm (boolean): grow only while the window
/// limits the flow (see the module documentation).
pub const LIMITED_GROWTH: ParamSpec = ParamSpec {
    key: "limited-growth",
    unit: Unit::Bool,
    default: 1.0,
    help: "grow the window only while it limits the flow (not while the application, the receiver \
           or a pacing rate does); off: grow on every acknowledged byte",
    source: "RFC 9438 §5.8, RFC 7661 §4.3; Linux tcp_is_cwnd_limited",
};

/// Slack of the window-limited test, packets: a flow within this many packets of its window is
/// limited by it.
pub const LIMITED_SLACK_PKTS: u64 = 3;

/// A parameter value in packets, clamped to `[1, u32::MAX]`.
pub fn packets(v: f64) -> u32 {
    v.clamp(1.0, u32::MAX as f64) as u32
}

/// What a measurement asks of a window algorithm, as [`WindowCore::on_measurement`] classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowEvent {
    /// A retransmission timeout: set the loss window. `repeated`: no data was acknowledged since
    /// the previous timeout, or the timeout falls inside a loss epoch; `ssthresh` stays as it is.
    Timeout {
        /// Whether this timeout repeats an earlier congestion event (keep `ssthresh`).
        repeated: bool,
    },
    /// The first loss of a new loss epoch: reduce the window once.
    Loss,
    /// Grow the window for this many newly acknowledged bytes (possibly 0).
    Grow(u64),
    /// Inside the recovery RTT after a loss: leave the window as it is.
    Hold,
}

/// The state every window algorithm keeps besides its window: MSS, last RTT, last report time,
/// loss epoch and timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowCore {
    /// MSS, bytes.
    mss: u64,
    /// Last RTT seen, µs (0: none yet).
    rtt_us: u64,
    /// Time of the last report (or of the start), µs.
    now_us: u64,
    /// Losses before this time (µs) belong to the epoch of the last reduction.
    epoch_end_us: u64,
    /// Hold the window until `epoch_end_us` (recovery after a loss, not after a timeout).
    hold_growth: bool,
    /// A timeout happened and no data has been acknowledged since.
    after_timeout: bool,
    /// Time since the previous report (or the start), µs.
    elapsed_us: u64,
    /// The largest flight of the reports of the last RTT, bytes (see the module documentation).
    peak_flight: WindowedFilter,
    /// The window the datapath held the flow to at the last report, bytes (0: not reported).
    installed: u64,
}

impl Default for WindowCore {
    fn default() -> Self {
        WindowCore::new()
    }
}

impl WindowCore {
    /// The state before the flow starts (a 1448-byte MSS, no RTT, no loss epoch).
    pub fn new() -> Self {
        WindowCore {
            mss: DEFAULT_MSS,
            rtt_us: 0,
            now_us: 0,
            epoch_end_us: 0,
            hold_growth: false,
            after_timeout: false,
            elapsed_us: 0,
            peak_flight: WindowedFilter::max(1),
            installed: 0,
        }
    }

    /// Begin the flow: adopt its MSS (if it names one), set the time, forget RTT, loss epoch and
    /// timeout.
    pub fn start(&mut self, start: &FlowStart) {
        if start.mss > 0 {
            self.mss = u64::from(start.mss);
        }
        *self = WindowCore {
            mss: self.mss,
            now_us: start.now_us,
            ..WindowCore::new()
        };
    }

    /// The MSS in use, bytes.
    pub fn mss(&self) -> u64 {
        self.mss
    }

    /// The last RTT seen, µs (0 before any sample).
    pub fn rtt_us(&self) -> u64 {
        self.rtt_us
    }

    /// The time of the last report (or of the start), µs.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// Whether `now_us` lies inside the loss epoch of the last reduction or timeout.
    pub fn in_epoch(&self, now_us: u64) -> bool {
        now_us < self.epoch_end_us
    }

    /// `pkts` packets of the current MSS, bytes, capped at [`MAX_CWND`].
    pub fn window_bytes(&self, pkts: u32) -> u64 {
        (u64::from(pkts) * self.mss).min(MAX_CWND)
    }

    /// The RFC 5681 loss window after a timeout: one MSS, bytes.
    pub fn loss_window(&self) -> u64 {
        self.mss.min(MAX_CWND)
    }

    /// Take in a report (time, MSS, RTT), update the loss epoch and timeout state, and say what
    /// the window should do.
    pub fn on_measurement(&mut self, m: &Measurement) -> WindowEvent {
        self.elapsed_us = m.now_us.saturating_sub(self.now_us);
        self.now_us = m.now_us;
        if m.mss > 0 {
            self.mss = u64::from(m.mss);
        }
        self.observe_rtt(m);
        let flight = m
            .bytes_in_flight
            .saturating_add(m.acked_bytes)
            .saturating_add(m.sacked_bytes);
        self.peak_flight.set_window(self.rtt_us.max(1));
        self.peak_flight.update(m.now_us, flight);
        self.installed = m.cwnd;
        let in_epoch = self.in_epoch(m.now_us);
        if m.timeout {
            let repeated = self.after_timeout || in_epoch;
            self.after_timeout = true;
            self.begin_epoch(m, false);
            return WindowEvent::Timeout { repeated };
        }
        if m.acked_bytes > 0 {
            self.after_timeout = false;
        }
        if m.lost_packets > 0 && !in_epoch {
            self.begin_epoch(m, true);
            WindowEvent::Loss
        } else if in_epoch && self.hold_growth {
            WindowEvent::Hold
        } else {
            self.hold_growth = false;
            WindowEvent::Grow(m.acked_bytes)
        }
    }

    /// Time between the last report and the one before it (or the start), µs.
    pub fn elapsed_us(&self) -> u64 {
        self.elapsed_us
    }

    /// Whether a window of `cwnd` bytes limited the flow over the last RTT of reports
    /// (`slow_start`: the window is below `ssthresh`); see the module documentation. A smaller
    /// window the datapath reports holding the flow to is the one tested: a window just decided
    /// is not installed yet, and the flow cannot have filled it.
    pub fn window_limited(&self, cwnd: u64, slow_start: bool) -> bool {
        let cwnd = match self.installed {
            0 => cwnd,
            held => cwnd.min(held),
        };
        let flight = self.peak_flight.get().unwrap_or(0);
        cwnd <= flight.saturating_add(LIMITED_SLACK_PKTS * self.mss)
            || (slow_start && cwnd < flight.saturating_mul(2))
    }

    /// A congestion signal other than loss (e.g. ECN marks) in the report `m`: begins a
    /// reduction epoch as a loss does, unless one is running; returns whether it began one.
    pub fn congestion_signal(&mut self, m: &Measurement) -> bool {
        if self.in_epoch(m.now_us) {
            return false;
        }
        self.begin_epoch(m, true);
        true
    }

    /// The window `fused` stands for: a fused window as is, a fused rate times the last RTT
    /// (`None` before any RTT sample).
    pub fn fused_window<W: WindowBytes>(&self, fused: Fused) -> Option<W> {
        match fused {
            Fused::Cwnd(w) => Some(W::from_cwnd(w)),
            Fused::Rate(rate) => (self.rtt_us > 0).then(|| W::from_rate(rate, self.rtt_us)),
        }
    }

    fn observe_rtt(&mut self, m: &Measurement) {
        let sample = if m.rtt_mean_us > 0 {
            m.rtt_mean_us
        } else {
            m.rtt_last_us
        };
        if sample > 0 {
            self.rtt_us = sample;
        }
    }

    /// Start a loss epoch of one RTT (the report interval before any RTT sample) at `m`.
    fn begin_epoch(&mut self, m: &Measurement, hold_growth: bool) {
        let len = if self.rtt_us > 0 {
            self.rtt_us
        } else {
            m.interval_us
        };
        self.epoch_end_us = m.now_us.saturating_add(len);
        self.hold_growth = hold_growth;
    }
}

/// A window algorithm on a [`WindowCore`]: how its own state starts and how its window reacts to
/// each [`WindowEvent`]. [`WindowAlgorithm::start_window`] and [`WindowAlgorithm::react`] do the
/// rest, alike for all.
pub trait WindowAlgorithm: Controller {
    /// The window as the algorithm keeps it: whole bytes (`u64`) or with fractions (`f64`).
    type Window: WindowBytes;

    /// The shared window state.
    fn core_mut(&mut self) -> &mut WindowCore;

    /// The congestion window, bytes.
    fn window(&self) -> Self::Window;

    /// Take the window `w` (bytes) from outside (PolyCC's `calibrate`), clamped as the algorithm
    /// bounds its window.
    fn adopt(&mut self, w: Self::Window);

    /// The algorithm's own state for a fresh flow (the core has just started).
    fn reset(&mut self);

    /// A retransmission timeout; `repeated`: keep `ssthresh`.
    fn on_timeout(&mut self, repeated: bool);

    /// The first loss of a loss epoch.
    fn on_loss(&mut self);

    /// Growth for `acked` newly acknowledged bytes (possibly 0).
    fn grow(&mut self, acked: u64);

    /// Whether the window grows only while it limits the flow ([`LIMITED_GROWTH`]); algorithms
    /// without the parameter grow on every acknowledged byte.
    fn limited_growth(&self) -> bool {
        false
    }

    /// A report whose growth is withheld because the window did not limit the flow;
    /// `elapsed_us`: the report's interval. Nothing to do by default.
    fn on_unlimited(&mut self, elapsed_us: u64) {
        let _ = elapsed_us;
    }

    /// Begin the flow: the core, then the algorithm's own state; decides the first window.
    fn start_window(&mut self, start: &FlowStart) -> Decision {
        self.core_mut().start(start);
        self.reset();
        Decision::cwnd(self.cwnd())
    }

    /// React to `event`: a hold leaves the window as it is.
    fn apply(&mut self, event: WindowEvent) {
        match event {
            WindowEvent::Timeout { repeated } => self.on_timeout(repeated),
            WindowEvent::Loss => self.on_loss(),
            WindowEvent::Grow(acked) => self.grow(acked),
            WindowEvent::Hold => {}
        }
    }

    /// React to `event` as [`WindowAlgorithm::apply`] does, except that growth is withheld
    /// while the window does not limit the flow, if the algorithm asks so
    /// ([`WindowAlgorithm::limited_growth`]).
    fn respond(&mut self, event: WindowEvent) {
        if let WindowEvent::Grow(acked) = event
            && acked > 0
            && self.limited_growth()
        {
            let cwnd = u64::from(self.window().to_cwnd());
            let slow_start = self.threshold().is_none_or(|t| cwnd < t);
            let core = self.core_mut();
            if !core.window_limited(cwnd, slow_start) {
                let elapsed = core.elapsed_us();
                self.on_unlimited(elapsed);
                return;
            }
        }
        self.apply(event);
    }

    /// Classify the report `m` by the core, react to it, and decide the window.
    fn react(&mut self, m: &Measurement) -> Decision {
        let event = self.core_mut().on_measurement(m);
        self.respond(event);
        Decision::cwnd(self.cwnd())
    }

    /// Adopt the window a fused value stands for ([`WindowCore::fused_window`]); a fused rate
    /// before any RTT sample changes nothing.
    fn calibrate_window(&mut self, fused: Fused) {
        if let Some(w) = self.core_mut().fused_window(fused) {
            self.adopt(w);
        }
    }

    /// The slow-start threshold, bytes, once set (None while unbounded). Algorithms without a
    /// threshold keep the default.
    fn threshold(&self) -> Option<u64> {
        None
    }

    /// Take the slow-start threshold `bytes` from a predecessor (floored as the algorithm floors
    /// its own). Algorithms without a threshold keep the default, which ignores it.
    fn set_threshold(&mut self, bytes: u64) {
        let _ = bytes;
    }

    /// Take over a live flow ([`Controller::take_over`]): its window, then its threshold.
    fn take_over_window(&mut self, handed: &TakeOver) {
        self.calibrate_window(handed.fused);
        if let Some(t) = handed.ssthresh {
            self.set_threshold(u64::from(t));
        }
    }
}

/// The [`Controller`] methods every [`WindowAlgorithm`] shares, to be written inside its
/// `impl Controller` block: `name` (the literal given), `mode` (`ControlMode::Window`),
/// `on_start` ([`WindowAlgorithm::start_window`]), `calibrate`
/// ([`WindowAlgorithm::calibrate_window`]), `take_over` ([`WindowAlgorithm::take_over_window`]),
/// `ssthresh` ([`WindowAlgorithm::threshold`]), `cwnd` ([`WindowAlgorithm::window`] as
/// [`WindowBytes::to_cwnd`] rounds it) and `rate` (none). The block adds `on_measurement` and
/// whatever else the algorithm overrides. `window_controller!("name", paced)` leaves `rate`
/// out, for an algorithm that paces its window and writes its own.
macro_rules! window_controller {
    ($name:literal) => {
        $crate::window::window_controller!($name, paced);

        fn rate(&self) -> Option<u64> {
            None
        }
    };
    ($name:literal, paced) => {
        fn name(&self) -> &'static str {
            $name
        }

        fn mode(&self) -> $crate::controller::ControlMode {
            $crate::controller::ControlMode::Window
        }

        fn on_start(
            &mut self,
            start: &$crate::controller::FlowStart,
        ) -> $crate::controller::Decision {
            $crate::window::WindowAlgorithm::start_window(self, start)
        }

        fn calibrate(&mut self, fused: $crate::controller::Fused) {
            $crate::window::WindowAlgorithm::calibrate_window(self, fused)
        }

        fn take_over(&mut self, handed: &$crate::controller::TakeOver) {
            $crate::window::WindowAlgorithm::take_over_window(self, handed)
        }

        fn ssthresh(&self) -> Option<u32> {
            $crate::window::WindowAlgorithm::threshold(self)
                .map(|t| t.min($crate::window::MAX_CWND) as u32)
        }

        fn cwnd(&self) -> u32 {
            $crate::window::WindowBytes::to_cwnd($crate::window::WindowAlgorithm::window(self))
        }
    };
}
pub(crate) use window_controller;

/// Take the window `w` (bytes) from outside (PolyCC's `calibrate`) into `cwnd`, clamped to
/// `floor..=MAX_CWND`, and keep the congestion-avoidance byte counter `ca_acked` below it. An
/// unchanged window changes nothing.
pub fn adopt(cwnd: &mut u64, ca_acked: &mut u64, w: u64, floor: u64) {
    if w == *cwnd {
        return;
    }
    *cwnd = w.clamp(floor, MAX_CWND);
    *ca_acked = (*ca_acked).min(cwnd.saturating_sub(1));
}

/// A window in bytes as an algorithm keeps it: whole bytes (`u64`) or with fractions (`f64`).
pub trait WindowBytes: Copy {
    /// A fused window, bytes.
    fn from_cwnd(w: u32) -> Self;

    /// `rate · rtt`: the window that sends `rate` bytes/s over one `rtt_us`.
    fn from_rate(rate: u64, rtt_us: u64) -> Self;

    /// The window a decision carries: whole bytes, capped at [`MAX_CWND`].
    fn to_cwnd(self) -> u32;
}

impl WindowBytes for u64 {
    fn from_cwnd(w: u32) -> Self {
        u64::from(w)
    }

    /// Exact, rounded down, capped at [`MAX_CWND`].
    fn from_rate(rate: u64, rtt_us: u64) -> Self {
        let w = u128::from(rate) * u128::from(rtt_us) / 1_000_000;
        w.min(u128::from(MAX_CWND)) as u64
    }

    fn to_cwnd(self) -> u32 {
        self.min(MAX_CWND) as u32
    }
}

impl WindowBytes for f64 {
    fn from_cwnd(w: u32) -> Self {
        f64::from(w)
    }

    /// Not capped: the algorithm clamps it as it adopts it.
    fn from_rate(rate: u64, rtt_us: u64) -> Self {
        rate as f64 * rtt_us as f64 / 1e6
    }

    /// Rounded to the nearest byte, within `0..=MAX_CWND`.
    fn to_cwnd(self) -> u32 {
        self.round().clamp(0.0, MAX_CWND as f64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;
    const RTT: u64 = 100_000;

    fn started() -> WindowCore {
        let mut c = WindowCore::new();
        c.start(&FlowStart {
            mss: MSS as u32,
            init_cwnd: 14480,
            now_us: 5,
        });
        c
    }

    fn report(now: u64, acked: u64, lost: u64, rtt: u64) -> Measurement {
        Measurement {
            now_us: now,
            interval_us: 30_000,
            acked_bytes: acked,
            lost_packets: lost,
            rtt_mean_us: rtt,
            rtt_last_us: rtt,
            mss: MSS as u32,
            ..Measurement::default()
        }
    }

    fn timeout(now: u64, acked: u64) -> Measurement {
        Measurement {
            timeout: true,
            ..report(now, acked, 0, RTT)
        }
    }

    #[test]
    fn starts_with_the_flow_mss_and_no_rtt() {
        let c = WindowCore::new();
        assert_eq!(c.mss(), DEFAULT_MSS);
        let mut c = started();
        assert_eq!((c.mss(), c.rtt_us(), c.now_us()), (MSS, 0, 5));
        assert_eq!(c.window_bytes(10), 10 * MSS);
        assert_eq!(c.window_bytes(u32::MAX), MAX_CWND);
        assert_eq!(c.loss_window(), MSS);
        // A start without an MSS keeps the one known; a report may change it.
        c.on_measurement(&report(10, 0, 0, RTT));
        c.start(&FlowStart {
            mss: 0,
            init_cwnd: 0,
            now_us: 7,
        });
        assert_eq!((c.mss(), c.rtt_us(), c.now_us()), (MSS, 0, 7));
        c.on_measurement(&Measurement {
            mss: 1000,
            ..report(20, 0, 0, 0)
        });
        assert_eq!((c.mss(), c.now_us()), (1000, 20));
    }

    #[test]
    fn rtt_is_the_mean_else_the_last_sample_else_kept() {
        let mut c = started();
        c.on_measurement(&report(1, 0, 0, RTT));
        assert_eq!(c.rtt_us(), RTT);
        c.on_measurement(&Measurement {
            rtt_mean_us: 0,
            ..report(2, 0, 0, 2 * RTT)
        });
        assert_eq!(c.rtt_us(), 2 * RTT);
        c.on_measurement(&report(3, 0, 0, 0));
        assert_eq!(c.rtt_us(), 2 * RTT);
    }

    #[test]
    fn one_loss_per_epoch_then_hold_then_growth() {
        let mut c = started();
        assert_eq!(
            c.on_measurement(&report(100, MSS, 0, RTT)),
            WindowEvent::Grow(MSS)
        );
        assert_eq!(
            c.on_measurement(&report(1_000, MSS, 2, RTT)),
            WindowEvent::Loss
        );
        assert!(c.in_epoch(1_000 + RTT - 1) && !c.in_epoch(1_000 + RTT));
        for now in [1_000, 50_000, 1_000 + RTT - 1] {
            assert_eq!(
                c.on_measurement(&report(now, MSS, 1, RTT)),
                WindowEvent::Hold
            );
        }
        assert_eq!(
            c.on_measurement(&report(1_000 + RTT, MSS, 0, RTT)),
            WindowEvent::Grow(MSS)
        );
        // The hold ended with the epoch: a new loss is a new epoch.
        assert_eq!(
            c.on_measurement(&report(1_000 + RTT, 0, 1, RTT)),
            WindowEvent::Loss
        );
    }

    #[test]
    fn the_first_epoch_lasts_the_report_interval_before_any_rtt() {
        let mut c = started();
        assert_eq!(c.on_measurement(&report(1_000, 0, 1, 0)), WindowEvent::Loss);
        assert!(c.in_epoch(1_000 + 29_999) && !c.in_epoch(1_000 + 30_000));
    }

    #[test]
    fn timeouts_repeat_until_data_is_acked_and_do_not_hold() {
        let mut c = started();
        let t0 = 1_000_000;
        assert_eq!(
            c.on_measurement(&timeout(t0, 0)),
            WindowEvent::Timeout { repeated: false }
        );
        // Later, but nothing acknowledged yet.
        assert_eq!(
            c.on_measurement(&timeout(t0 + 3 * RTT, 0)),
            WindowEvent::Timeout { repeated: true }
        );
        // A loss inside the timeout's epoch is no new reduction, and growth is not held.
        assert_eq!(
            c.on_measurement(&report(t0 + 3 * RTT + 10, MSS, 4, RTT)),
            WindowEvent::Grow(MSS)
        );
        assert_eq!(
            c.on_measurement(&timeout(t0 + 5 * RTT, 0)),
            WindowEvent::Timeout { repeated: false }
        );
        // Inside a loss epoch a timeout repeats the reduction already made.
        assert_eq!(
            c.on_measurement(&report(t0 + 7 * RTT, MSS, 1, RTT)),
            WindowEvent::Loss
        );
        assert_eq!(
            c.on_measurement(&timeout(t0 + 7 * RTT + 10, MSS)),
            WindowEvent::Timeout { repeated: true }
        );
        // A timeout report's own ACKs do not clear the timeout state.
        assert_eq!(
            c.on_measurement(&timeout(t0 + 9 * RTT, MSS)),
            WindowEvent::Timeout { repeated: true }
        );
    }

    #[test]
    fn fused_values_become_windows() {
        let mut c = started();
        assert_eq!(c.fused_window::<u64>(Fused::Cwnd(1234)), Some(1234));
        assert_eq!(c.fused_window::<f64>(Fused::Cwnd(1234)), Some(1234.0));
        // No RTT yet: a rate means nothing.
        assert_eq!(c.fused_window::<u64>(Fused::Rate(1_000_000)), None);
        assert_eq!(c.fused_window::<f64>(Fused::Rate(1_000_000)), None);
        c.on_measurement(&report(1, 0, 0, 10_001));
        assert_eq!(c.fused_window::<u64>(Fused::Rate(1_000_000)), Some(10_001));
        assert_eq!(c.fused_window::<u64>(Fused::Rate(999)), Some(9)); // 9.99 rounds down
        assert_eq!(
            c.fused_window::<f64>(Fused::Rate(999)),
            Some(999.0 * 10_001.0 / 1e6)
        );
        assert_eq!(c.fused_window::<u64>(Fused::Rate(u64::MAX)), Some(MAX_CWND));
    }

    #[test]
    fn packets_are_clamped() {
        assert_eq!(packets(0.0), 1);
        assert_eq!(packets(-3.0), 1);
        assert_eq!(packets(10.7), 10);
        assert_eq!(packets(1e12), u32::MAX);
    }
}
