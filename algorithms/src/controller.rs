//! The algorithm seam: one measurement type in, one decision type out.
//!
//! Every congestion control algorithm of this library is a [`Controller`]. It never sees portus,
//! the IPC or the datapath program: the adapter (`crate::adapter`) decodes the shared measurement
//! program's reports into a [`Measurement`] and installs the [`Decision`] it gets back. That keeps
//! the plumbing in one place, lets unit tests drive an algorithm with synthetic measurements, and
//! lets a meta-algorithm (PolyCC) run several controllers on the same flow.
//!
//! Units: bytes, bytes per second and microseconds throughout, as libccp.

/// What a controller learns when its flow starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStart {
    /// Maximum segment size, bytes.
    pub mss: u32,
    /// The datapath's initial congestion window, bytes.
    pub init_cwnd: u32,
    /// Agent time at creation, µs.
    pub now_us: u64,
}

/// One report of the shared measurement program, aggregated over the report interval.
///
/// Counters (`acked_bytes`, `lost_packets`, ...) cover the interval since the previous report;
/// gauges (`bytes_in_flight`, `cwnd`, ...) are the values at the last ACK of the interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurement {
    /// Agent time when the report arrived, µs (monotonic, per agent).
    pub now_us: u64,
    /// Length of the interval this report covers, µs (datapath time).
    pub interval_us: u64,
    /// Bytes newly acknowledged in order.
    pub acked_bytes: u64,
    /// Packets newly acknowledged in order.
    pub acked_packets: u64,
    /// Bytes acknowledged out of order (SACKed).
    pub sacked_bytes: u64,
    /// Bytes acknowledged with an ECN-CE echo.
    pub ecn_bytes: u64,
    /// Packets acknowledged with an ECN-CE echo.
    pub ecn_packets: u64,
    /// Packets the datapath declared lost.
    pub lost_packets: u64,
    /// A retransmission timeout happened in the interval.
    pub timeout: bool,
    /// Smallest RTT sample of the interval, µs (0 if the interval had none).
    pub rtt_min_us: u64,
    /// Mean RTT sample of the interval, µs (0 if none).
    pub rtt_mean_us: u64,
    /// Largest RTT sample of the interval, µs (0 if none).
    pub rtt_max_us: u64,
    /// Last RTT sample of the interval, µs (0 if none).
    pub rtt_last_us: u64,
    /// Number of RTT samples in the interval.
    pub rtt_samples: u64,
    /// Mean relative one-way delay over the interval's RTT samples, µs: the forward one-way
    /// delay of each sampled packet minus the smallest of the flow (its forward queueing, free
    /// of clock offsets). None where the datapath does not measure one-way delays (only the
    /// simulator does).
    pub owd_mean_us: Option<u64>,
    /// Delivery rate, bytes/s: the sample of the interval's last ACK (bytes delivered while the
    /// newest acknowledged packet was out, over the longer of its send and ACK intervals; 0:
    /// none).
    pub delivery_rate: u64,
    /// The largest per-ACK delivery-rate sample of the interval, bytes/s (0: none).
    pub delivery_rate_max: u64,
    /// Bytes in flight at the last ACK.
    pub bytes_in_flight: u64,
    /// Packets in flight at the last ACK.
    pub packets_in_flight: u64,
    /// Bytes queued at the sender, not yet sent (sender-side backlog).
    pub bytes_pending: u64,
    /// The datapath's congestion window when it reported, bytes.
    pub cwnd: u64,
    /// The pacing rate the agent last installed for the flow, bytes/s (0: none; the datapath
    /// does not report its rate).
    pub rate: u64,
    /// Maximum segment size of the flow, bytes.
    pub mss: u32,
}

impl Measurement {
    /// Whether this report signals congestion by loss or timeout.
    pub fn has_loss(&self) -> bool {
        self.lost_packets > 0 || self.timeout
    }
}

/// How a controller drives its flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlMode {
    /// Window-based: the datapath is limited by `cwnd` (pacing optional).
    Window,
    /// Rate-based: the datapath paces at `rate`; `cwnd` only caps the data in flight.
    Rate,
}

/// When the shared measurement program should report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportPeriod {
    /// On every ACK (the CCP paper's per-ACK mode).
    PerAck,
    /// Once per smoothed RTT (the default).
    PerRtt,
    /// At a fixed period, µs.
    Micros(u64),
}

/// What a controller wants installed after a measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Decision {
    /// New congestion window, bytes.
    pub cwnd: Option<u32>,
    /// New pacing rate, bytes/s (capped at `u32::MAX` on the wire, about 34 Gbit/s).
    pub rate: Option<u64>,
    /// A change of report period.
    pub report: Option<ReportPeriod>,
}

impl Decision {
    /// A decision that only sets the window.
    pub fn cwnd(cwnd: u32) -> Self {
        Decision {
            cwnd: Some(cwnd),
            ..Decision::default()
        }
    }

    /// A decision that only sets the pacing rate.
    pub fn rate(rate: u64) -> Self {
        Decision {
            rate: Some(rate),
            ..Decision::default()
        }
    }

    /// A decision that changes nothing.
    pub fn none() -> Self {
        Decision::default()
    }
}

/// A value fused across several controllers (PolyCC) that every member is told to adopt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fused {
    /// A congestion window, bytes.
    Cwnd(u32),
    /// A pacing rate, bytes/s.
    Rate(u64),
}

/// What a controller is handed when it takes over a live flow from another algorithm (the agent's
/// `set-algorithm`), besides the smallest RTT the flow has seen (a report it is given next).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TakeOver {
    /// The flow's window, or its pacing rate for a rate-based successor of a paced flow.
    pub fused: Fused,
    /// The predecessor's slow-start threshold, bytes, if it had left slow start (see
    /// [`Controller::ssthresh`]).
    pub ssthresh: Option<u32>,
}

/// The [`Controller`] methods of a wrapper that adds hooks around another controller, to be
/// written inside its `impl Controller` block: `name`, `mode`, `on_start` and `set_params` go
/// to the wrapped controller in the field `inner`, and the rest of [`forward_state_to_inner`].
/// The block adds `on_measurement`, where the hooks run.
macro_rules! forward_to_inner {
    () => {
        fn name(&self) -> &'static str {
            self.inner.name()
        }

        fn mode(&self) -> $crate::controller::ControlMode {
            self.inner.mode()
        }

        fn on_start(
            &mut self,
            start: &$crate::controller::FlowStart,
        ) -> $crate::controller::Decision {
            self.inner.on_start(start)
        }

        fn set_params(&mut self, params: &$crate::params::ParamSet) -> Result<(), String> {
            self.inner.set_params(params)
        }

        $crate::controller::forward_state_to_inner!();
    };
}
pub(crate) use forward_to_inner;

/// The [`Controller`] methods that read or set the wrapped controller's window, rate and
/// threshold, for a wrapper whose controller is in the field `inner`: `calibrate`, `take_over`,
/// `ssthresh`, `cwnd` and `rate`.
macro_rules! forward_state_to_inner {
    () => {
        fn calibrate(&mut self, fused: $crate::controller::Fused) {
            self.inner.calibrate(fused)
        }

        fn take_over(&mut self, handed: &$crate::controller::TakeOver) {
            self.inner.take_over(handed)
        }

        fn ssthresh(&self) -> Option<u32> {
            self.inner.ssthresh()
        }

        fn cwnd(&self) -> u32 {
            self.inner.cwnd()
        }

        fn rate(&self) -> Option<u64> {
            self.inner.rate()
        }
    };
}
pub(crate) use forward_state_to_inner;

/// A congestion control algorithm, as the rest of the project sees it.
pub trait Controller: Send {
    /// The algorithm's registry name (e.g. "reno").
    fn name(&self) -> &'static str;

    /// Whether the algorithm controls a window or a rate.
    fn mode(&self) -> ControlMode;

    /// Called once when the flow is created; returns the initial decision.
    fn on_start(&mut self, start: &FlowStart) -> Decision;

    /// Called for every report of the measurement program.
    fn on_measurement(&mut self, m: &Measurement) -> Decision;

    /// Adopt an externally fused value as if the controller had chosen it itself.
    fn calibrate(&mut self, fused: Fused);

    /// Take over a live flow another algorithm ran until now, just after `on_start`: its window
    /// or rate and, for a window algorithm, its slow-start threshold. Linux keeps a socket's
    /// `ssthresh` when its congestion control is changed; a successor that keeps a threshold
    /// does the same, so a flow past its slow start does not start a second one from a full
    /// window. The default calibrates to `handed.fused` only.
    fn take_over(&mut self, handed: &TakeOver) {
        self.calibrate(handed.fused);
    }

    /// The slow-start threshold, bytes, once the algorithm has set one (None: still unbounded, or
    /// the algorithm keeps none).
    fn ssthresh(&self) -> Option<u32> {
        None
    }

    /// The controller's current window, bytes (what it would install now).
    fn cwnd(&self) -> u32;

    /// The controller's current pacing rate, bytes/s, if it paces.
    fn rate(&self) -> Option<u64>;

    /// Take new parameters on a live flow (the agent's pricing changes a flow's class), keeping
    /// the flow's state. `params` are a full set of this algorithm's parameters. Algorithms that
    /// cannot change on the fly keep the default, which refuses.
    fn set_params(&mut self, params: &crate::params::ParamSet) -> Result<(), String> {
        let _ = params;
        Err(format!(
            "{} does not take parameter changes on a live flow",
            self.name()
        ))
    }
}
