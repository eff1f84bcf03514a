//! RTCP, Regulated TCP (Huang, Li, Walrand, IFIP Networking 2020) as a CCP algorithm: a per-flow
//! counter H that grows at a desired rate γ and drains at the actual rate, compared on every
//! acknowledgement with a smoothed congestion estimate built from the sender's backlog and the
//! queueing delay; the window grows toward a doubling per epoch of a few RTTs while the counter
//! covers the congestion and toward a halving otherwise.
//!
//! # The algorithm as built
//!
//! - **Weight ω** (bytes). Each flow has a weight: flows with a larger ω tolerate more
//!   congestion before they back off, so they take bandwidth from flows with a smaller one (the
//!   paper's "urgent" and "high-volume" classes, §V-A: 2.4·10⁴ and 1.2·10⁴). A flow is urgent
//!   when its size, read at its first report as `bytes_pending + bytes_in_flight + acked` (the
//!   simulator and ccp-udp hand a sized flow to the transport at once), is at most
//!   `urgent-threshold` (the paper's 30 KB separating threshold); it then gets `urgent-weight`,
//!   every other flow (a long-lived one reports an unbounded backlog) gets `weight`. (A flow
//!   that ends before its first report is never classified; in the web-search fetching runs of
//!   docs/results/rtcp.md every flow of at most 30 KB does.) An operator
//!   may instead give weights per flow by rule or in the requested name
//!   (`rtcp:weight=24000,urgent-threshold=0`).
//! - **Counter H** (bytes, eq. 1): `H ← max(0, H + γ·Δt − acked)`: H grows at the desired rate
//!   and drains at the actual rate x. A report covers `Δt`, the agent time since the previous
//!   report (for the first report at most one smoothed RTT, and nothing before any RTT sample,
//!   so that a long start-up interval does not wind the counter up; later at most the larger of the smoothed RTT and the report's
//!   own period, as reports are at least 100 µs apart even where the RTT is shorter), and
//!   `acked` bytes; the counter is advanced through it in steps of about one
//!   packet with the delivery spread evenly, as the paper's per-ACK updates would (one step per
//!   report makes the counter oscillate: the discrete map is unstable once maxRate·Δt > ω).
//! - **Desired rate γ** (eq. 10), updated after each step of H: `γ = max-rate` if `H = 0`; `γ/2`
//!   if `H ≥ ω`; otherwise `max-rate · min(1, ω/H − 1)`. The paper writes `ω/H − 1` in its
//!   implementation's rate unit; here it is a fraction of `max-rate` (the "rate limit to γ that
//!   corresponds to the desired rate of the application", §III-A). Under a steady actual rate x
//!   the counter settles where γ = x, at `H = ω / (1 + x/max-rate)` ∈ [ω/2, ω]: a flow that gets
//!   less keeps a larger counter and tolerates more congestion, which pulls a class together.
//! - **Congestion estimate** (§IV-A, eq. 7): `N = Q_s + Q_d + δ·D` bytes, with
//!   `Q_s = min(bytes_pending, backlog-cap)` the sender-side backlog, `Q_d = 0` (no datapath
//!   reports a receiver backlog) and `D` the queueing delay. The paper measures D, "the delay
//!   experienced by flow i", with time stamps in the packet headers: a one-way delay. Where the
//!   datapath measures one (`Measurement::owd_mean_us`: the simulator and ccp-udp with its
//!   engine backend, whose receivers put their receive time stamp in every ACK), D is the
//!   report's mean relative one-way delay, the forward delay above the smallest the flow has
//!   seen. Elsewhere (ccp-udp with the C libccp backend, kernel datapaths, libccp; or with
//!   `one-way-delay=false`) D is the report's mean RTT minus the smallest RTT
//!   the flow has seen, which also counts the queueing of the flow's ACKs on the reverse path,
//!   e.g. behind the receiving host's own outgoing data: a flow whose receiver also sends then
//!   backs off for congestion that is not on its path (see `docs/results/rtcp.md`).
//!   Smoothing (eq. 8), `S ← q·S + (1 − q)·N` with q = 0.5, is applied once per RTT sample,
//!   as the paper's implementation does on every acknowledgement: a report with k samples
//!   applies `S ← q^k·S + (1 − q^k)·N`. (Once per report, with reports about one RTT apart, it
//!   would lag the queue by more than an RTT and overshoot.)
//! - **Window** (eq. 9): `cwnd ← cwnd/2` if `H < (α/1000)·S`, else `cwnd ← 2·cwnd`, clamped to
//!   [`min-cwnd`, `max-cwnd`], at the pace of an epoch of `epoch` smoothed RTTs (3), applied
//!   **on every acknowledgement** (`per-ack`, the default), as the paper's implementation
//!   adjusts the window "each time RTCP receives an acknowledgement packet" (§IV-C): the flow
//!   asks for a report on every ACK, and each report moves the window by its share of a
//!   doubling or a halving, `cwnd·2^(±acked/(epoch·cwnd))`, the sign from the comparison of H
//!   with the threshold at that report. A window whose acknowledgements all find the same side
//!   of the threshold for an epoch doubles or halves (to within the rounding of its steps, a
//!   growing window a little less, a shrinking one a little more), as one decision per epoch
//!   would; but each step answers the latest measurements, and a queue that builds stops the
//!   growth within about an RTT instead of after an epoch's decision. With `per-ack=false` the
//!   window doubles or halves at once, once per epoch (the earlier law). The epoch is 3 RTTs
//!   because the agent's answer reaches the datapath one IPC delay after the report, shows in
//!   the RTT samples of packets acknowledged one RTT later, and in a report after that: at one
//!   RTT, both laws act on measurements that predate their last change. On the spine-leaf of
//!   `tests/tests/rtcp.rs` (random sending, D from the one-way delay) the per-ACK law gives
//!   0.97 of DCTCP's mean throughput at 62 % of its mean packet delay and 28 % of its 99th
//!   percentile, against 0.92, 77 % and 45 % with one decision per epoch
//!   (`docs/results/rtcp.md`, where the epochs and the other laws tried are measured).
//! - **Pacing**: the window is paced at `pacing-gain · cwnd / srtt` (2, Linux's slow-start
//!   pacing ratio; 0: not paced). Without it, when the flow's ACKs come back bunched — behind
//!   other data on a loaded return path — each bunch releases a line-rate burst that queues
//!   behind itself at the bottleneck, and the per-ACK law reads that self-inflicted queue as
//!   congestion: on the emulator's 20 Mbit/s link with a reverse kernel Cubic flow, one RTCP
//!   flow got 3.6–17.5 Mbit/s from run to run unpaced (ACK-clocked bursts put 7 ms of forward
//!   queue in the stuck runs; 18 runs) and 16.8–17.7 paced (six runs). On the simulator's
//!   fabric it changes throughput by under 2 %.
//! - **Loss and timeout** stay TCP's ("leaves the other default standards unchanged", §IV-C): a
//!   loss halves the window once per loss epoch (holding it for the recovery RTT), a timeout
//!   sets the one-MSS loss window; both restart the RTT epoch. The loss epoch, timeout state, MSS
//!   and RTT are the shared [`WindowCore`]'s.
//!
//! # Units and the paper's values
//!
//! The paper gives α, δ and ω in its implementation's units without naming them. Here:
//!
//! - ω is in **bytes**: the paper's 1.2·10⁴ and 2.4·10⁴ are 12 KB and 24 KB of counter.
//! - δ is a **rate**: δ·D is the backlog a link of rate δ holds for a delay D. This is the
//!   paper's derivation (§III-B: an internal link's Lyapunov weight is δ/R_j, so δ = R_j counts
//!   its delay as its backlog). The paper's simulation value δ = 10⁴ is read as Mbit/s: 10
//!   Gbit/s, its host links' rate. (Its testbed value 125 would be 125 Mbit/s, or 1 Gbit/s —
//!   its testbed's links — if read as MB/s.) On a network whose rates are divided by k and
//!   delays multiplied by k (the same queues in packets), δ/k behaves alike.
//! - α is in **thousandths** (the weight of the backlog against the counter is α/1000), so the
//!   paper's α = 500 (random sending), 10³ (over-subscription), 5·10³ (incast) and 300–1000
//!   (Table II) are written as the paper writes them. With the defaults a high-volume flow
//!   (H ≈ 6–12 KB) backs off at 10–20 µs of queueing delay at 10 Gbit/s, 8–16 packets.
//! - `backlog-cap` bounds the backlog counted: the simulator and ccp-udp take a whole flow from
//!   the application at once (a long-lived flow reports an unbounded backlog) where a socket
//!   would hold at most its send buffer. Its default, 4 KB, weighs a backlogged flow's backlog
//!   like 3 µs of delay at the default δ.
//!
//! Time is the agent's [`Measurement::now_us`] (µs), never the wall clock.

use crate::controller::{Controller, Decision, Measurement, ReportPeriod};
use crate::filters::Srtt;
use crate::params::{ParamSet, ParamSpec, Unit};
use crate::registry::AlgorithmSpec;
use crate::window::{self, WindowAlgorithm, WindowCore, packets};

/// Every parameter of RTCP, with unit, default and source.
pub const PARAMS: &[ParamSpec] = &[
    window::INIT_CWND,
    window::MIN_CWND,
    ParamSpec {
        key: "max-cwnd",
        unit: Unit::Packets,
        default: 1000.0,
        help: "ceiling of the doubling window",
        source: "shared/ALGORITHMS.md (eq. (9) clamped); 1000 packets is far above a datacenter BDP",
    },
    ParamSpec {
        key: "alpha",
        unit: Unit::Number,
        default: 500.0,
        help: "utility-delay tradeoff alpha, in thousandths: the window halves while H < (alpha/1000)*S",
        source: "RTCP §V-B2 (alpha = 500 in random sending; 10^3 over-subscription, 5*10^3 incast), eqs. (7), (9)",
    },
    ParamSpec {
        key: "delta",
        unit: Unit::Rate,
        default: 1_250_000_000.0,
        help: "weight of the queueing delay D, as a rate: delta*D bytes join the backlog",
        source: "RTCP §V-B1 (delta = 10^4 in simulations, read as Mbit/s: 10 Gbit/s), eq. (7), §III-B (a_j = delta/R_j)",
    },
    ParamSpec {
        key: "q",
        unit: Unit::Number,
        default: 0.5,
        help: "exponential smoothing of the congestion estimate, per RTT sample: S = q*S + (1-q)*N",
        source: "RTCP §IV-B, eq. (8) (q = 0.5)",
    },
    ParamSpec {
        key: "weight",
        unit: Unit::Bytes,
        default: 12_000.0,
        help: "weight omega of high-volume flows (and of every flow when urgent-threshold = 0)",
        source: "RTCP §V-A (high-volume weight 1.2*10^4), eqs. (6), (10)",
    },
    ParamSpec {
        key: "urgent-weight",
        unit: Unit::Bytes,
        default: 24_000.0,
        help: "weight omega of urgent flows (size at most urgent-threshold)",
        source: "RTCP §V-A (urgent weight 2.4*10^4)",
    },
    ParamSpec {
        key: "urgent-threshold",
        unit: Unit::Bytes,
        default: 30_000.0,
        help: "flows of at most this size (read at their first report) are urgent; 0: none is",
        source: "RTCP §V-A (separating threshold 30 KB)",
    },
    ParamSpec {
        key: "max-rate",
        unit: Unit::Rate,
        default: 1_250_000_000.0,
        help: "desired rate gamma at H = 0, and its scale: gamma = max-rate*min(1, omega/H - 1)",
        source: "RTCP eq. (10) maxRate; 10 Gbit/s, the host links of §V-B1",
    },
    ParamSpec {
        key: "epoch",
        unit: Unit::Number,
        default: 3.0,
        help: "RTT epoch, in smoothed RTTs, over which eq. (9) doubles or halves the window (per-ack: spread over the epoch's acknowledgements; else one decision per epoch)",
        source: "shared/ALGORITHMS.md (eq. (9) once per RTT epoch); this project's control loop (see the rtcp module doc)",
    },
    ParamSpec {
        key: "per-ack",
        unit: Unit::Bool,
        default: 1.0,
        help: "apply eq. (9) on every acknowledgement (reports on every ACK; each moves the window by its share of a doubling or halving per epoch); false: one doubling or halving per epoch",
        source: "RTCP §IV-C (\"we adjust the window size each time RTCP receives an acknowledgement packet\"), eq. (9)",
    },
    ParamSpec {
        key: "one-way-delay",
        unit: Unit::Bool,
        default: 1.0,
        help: "take the queueing delay D from the one-way delay where the datapath measures it (else, and when false, from the RTT)",
        source: "RTCP §IV-A (D from time stamps in the packet headers), eq. (7); RTT fallback: shared/ALGORITHMS.md",
    },
    ParamSpec {
        key: "pacing-gain",
        unit: Unit::Number,
        default: 2.0,
        help: "pace at pacing-gain * cwnd / smoothed RTT (0: not paced, the window alone limits sending)",
        source: "this project (see the rtcp module doc); Linux paces TCP at 2 * cwnd / srtt in slow start (tcp_pacing_ss_ratio)",
    },
    ParamSpec {
        key: "backlog-cap",
        unit: Unit::Bytes,
        default: 4_000.0,
        help: "most sender backlog counted: Q_s = min(bytes_pending, backlog-cap)",
        source: "RTCP §IV-A (sender buffer in the estimate); this project (see the rtcp module doc)",
    },
];

/// RTCP, as the registry lists it.
pub const SPEC: AlgorithmSpec = AlgorithmSpec {
    name: "rtcp",
    summary: "Regulated TCP: counter H vs smoothed alpha*(backlog + delta*delay), cwnd toward x2 or /2 per epoch, on every ACK",
    params: PARAMS,
    build,
};

fn build(params: &ParamSet) -> Box<dyn Controller> {
    Box::new(Rtcp::new(RtcpConfig::from_params(params)))
}

/// RTCP's configuration, resolved from its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct RtcpConfig {
    /// Initial window, packets (≥ 1).
    pub init_cwnd_pkts: u32,
    /// Floor of the window, packets (≥ 1).
    pub min_cwnd_pkts: u32,
    /// Ceiling of the window, packets (≥ `min_cwnd_pkts`).
    pub max_cwnd_pkts: u32,
    /// α/1000, dimensionless (≥ 0).
    pub alpha: f64,
    /// δ, bytes/s (≥ 0).
    pub delta: f64,
    /// Smoothing weight of the old estimate, in [0, 1].
    pub q: f64,
    /// ω of high-volume flows, bytes (> 0).
    pub weight: f64,
    /// ω of urgent flows, bytes (> 0).
    pub urgent_weight: f64,
    /// Size up to which a flow is urgent, bytes (0: none).
    pub urgent_threshold: u64,
    /// maxRate, bytes/s (> 0).
    pub max_rate: f64,
    /// Most sender backlog counted, bytes.
    pub backlog_cap: u64,
    /// Epoch length, smoothed RTTs (> 0).
    pub epoch: f64,
    /// Take D from the datapath's one-way delay when it reports one.
    pub one_way_delay: bool,
    /// Eq. (9) on every acknowledgement (reports per ACK) instead of once per epoch.
    pub per_ack: bool,
    /// Pacing rate over cwnd / smoothed RTT (0: not paced).
    pub pacing_gain: f64,
}

impl Default for RtcpConfig {
    fn default() -> Self {
        RtcpConfig::from_params(&ParamSet::defaults("rtcp", PARAMS))
    }
}

impl RtcpConfig {
    /// Read the configuration from resolved parameters (clamping out-of-range values).
    pub fn from_params(p: &ParamSet) -> Self {
        let min_cwnd_pkts = packets(p.get("min-cwnd"));
        RtcpConfig {
            init_cwnd_pkts: packets(p.get("init-cwnd")),
            min_cwnd_pkts,
            max_cwnd_pkts: packets(p.get("max-cwnd")).max(min_cwnd_pkts),
            alpha: p.get("alpha").max(0.0) / 1000.0,
            delta: p.get("delta").max(0.0),
            q: p.get("q").clamp(0.0, 1.0),
            weight: p.get("weight").max(1.0),
            urgent_weight: p.get("urgent-weight").max(1.0),
            urgent_threshold: p.get("urgent-threshold").max(0.0) as u64,
            max_rate: p.get("max-rate").max(1.0),
            backlog_cap: p.get("backlog-cap").max(0.0) as u64,
            epoch: p.get("epoch").max(0.1),
            one_way_delay: p.get("one-way-delay") != 0.0,
            per_ack: p.get("per-ack") != 0.0,
            pacing_gain: p.get("pacing-gain").max(0.0),
        }
    }
}

/// The counter H and the desired rate γ of one flow (eqs. 1 and 10), apart from the window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Counter {
    /// ω, bytes.
    pub weight: f64,
    /// maxRate, bytes/s.
    pub max_rate: f64,
    /// H, bytes (≥ 0).
    pub h: f64,
    /// γ, bytes/s.
    pub gamma: f64,
}

impl Counter {
    /// An empty counter (H = 0, so γ = maxRate).
    pub fn new(weight: f64, max_rate: f64) -> Self {
        Counter {
            weight,
            max_rate,
            h: 0.0,
            gamma: max_rate,
        }
    }

    /// `dt_us` µs passed in which `acked` bytes were delivered: H grows at γ and drains at the
    /// actual rate (eq. 1), then γ follows the new H (eq. 10).
    pub fn update(&mut self, dt_us: f64, acked: u64) {
        self.h = (self.h + self.gamma * dt_us / 1e6 - acked as f64).max(0.0);
        self.gamma = self.desired_rate();
    }

    /// A report's worth of [`Counter::update`]s: the interval is cut into steps of about one
    /// packet (`mss` bytes delivered, or desired at maxRate; at most [`MAX_STEPS`]) with the
    /// delivery spread evenly, as if the counter were updated on every ACK, as the paper's
    /// implementation does. One update per report would overshoot: the discrete map
    /// `H ← H + (γ(H) − x)·Δt` is unstable once maxRate·Δt exceeds about ω.
    pub fn advance(&mut self, dt_us: f64, acked: u64, mss: u64) {
        let desired = self.max_rate * dt_us / 1e6;
        let n = ((acked as f64).max(desired) / mss.max(1) as f64).ceil();
        let n = n.clamp(1.0, MAX_STEPS as f64) as u64;
        let mut left = acked;
        for i in 0..n {
            let part = left / (n - i);
            left -= part;
            self.update(dt_us / n as f64, part);
        }
    }

    /// Eq. (10): maxRate at H = 0, half the current γ at H ≥ ω, else maxRate·min(1, ω/H − 1).
    pub fn desired_rate(&self) -> f64 {
        if self.h <= 0.0 {
            self.max_rate
        } else if self.h >= self.weight {
            self.gamma / 2.0
        } else {
            self.max_rate * (self.weight / self.h - 1.0).min(1.0)
        }
    }
}

/// Most counter steps per report (see [`Counter::advance`]).
pub const MAX_STEPS: u64 = 256;

/// An RTCP controller for one flow.
#[derive(Clone, Debug)]
pub struct Rtcp {
    cfg: RtcpConfig,
    /// MSS, RTT, loss epoch and timeout state.
    core: WindowCore,
    /// Congestion window, bytes.
    cwnd: u64,
    counter: Counter,
    /// Whether the flow's class has been decided (at its first report).
    classified: bool,
    urgent: bool,
    /// Smallest RTT seen, µs (0: none yet).
    base_rtt_us: u64,
    /// Last queueing delay measured, µs.
    delay_us: u64,
    /// Whether D comes from the one-way delay (once the datapath reported one).
    owd: bool,
    /// Smoothed congestion estimate S, bytes (None before the first report).
    smoothed: Option<f64>,
    /// Last congestion observation N, bytes.
    last_n: f64,
    /// Smoothed RTT, µs (0: none yet).
    srtt: Srtt,
    /// Agent time of the previous report, µs.
    last_report_us: u64,
    /// The next window decision is due at this time, µs.
    epoch_end_us: u64,
    /// Bytes acknowledged so far.
    acked_total: u64,
    /// The window after the last halving (eq. 9 or a loss), bytes; 0 before any. A successor
    /// taking the flow over (`set-algorithm`) gets it as its slow-start threshold.
    last_cut: u64,
}

impl Rtcp {
    /// A controller with `cfg`, before its flow starts (assumes a 1448-byte MSS until then).
    pub fn new(cfg: RtcpConfig) -> Self {
        let counter = Counter::new(cfg.weight, cfg.max_rate);
        let mut r = Rtcp {
            cfg,
            core: WindowCore::new(),
            cwnd: 0,
            counter,
            classified: false,
            urgent: false,
            base_rtt_us: 0,
            delay_us: 0,
            owd: false,
            smoothed: None,
            last_n: 0.0,
            srtt: Srtt::new(),
            last_report_us: 0,
            epoch_end_us: 0,
            acked_total: 0,
            last_cut: 0,
        };
        r.reset();
        r
    }

    /// The configuration.
    pub fn config(&self) -> &RtcpConfig {
        &self.cfg
    }

    /// The counter H, bytes.
    pub fn counter(&self) -> f64 {
        self.counter.h
    }

    /// The desired rate γ, bytes/s.
    pub fn desired_rate(&self) -> f64 {
        self.counter.gamma
    }

    /// The weight ω in use, bytes.
    pub fn weight(&self) -> f64 {
        self.counter.weight
    }

    /// Whether the flow was classified urgent.
    pub fn is_urgent(&self) -> bool {
        self.urgent
    }

    /// The smoothed congestion estimate S, bytes (0 before the first report).
    pub fn smoothed_congestion(&self) -> f64 {
        self.smoothed.unwrap_or(0.0)
    }

    /// The congestion threshold (α/1000)·S the counter is compared with, bytes.
    pub fn threshold(&self) -> f64 {
        self.cfg.alpha * self.smoothed_congestion()
    }

    /// The last queueing delay measured, µs.
    pub fn queueing_delay_us(&self) -> u64 {
        self.delay_us
    }

    /// Whether D is taken from the one-way delay (the datapath reported one).
    pub fn uses_one_way_delay(&self) -> bool {
        self.owd
    }

    /// The last congestion observation N = Q_s + Q_d + δ·D, bytes.
    pub fn last_observation(&self) -> f64 {
        self.last_n
    }

    fn floor(&self) -> u64 {
        self.core.window_bytes(self.cfg.min_cwnd_pkts)
    }

    fn ceiling(&self) -> u64 {
        self.core.window_bytes(self.cfg.max_cwnd_pkts)
    }

    /// At the first report: urgent if the flow's size is at most the threshold.
    fn classify(&mut self, m: &Measurement) {
        if self.classified {
            return;
        }
        self.classified = true;
        let size = m
            .bytes_pending
            .saturating_add(m.bytes_in_flight)
            .saturating_add(self.acked_total);
        self.urgent = self.cfg.urgent_threshold > 0
            && m.bytes_pending < u64::from(u32::MAX)
            && size <= self.cfg.urgent_threshold;
        self.counter.weight = if self.urgent {
            self.cfg.urgent_weight
        } else {
            self.cfg.weight
        };
    }

    /// Take in the report's RTT, backlog and delivery: queueing delay, smoothed estimate S,
    /// counter H and desired rate γ.
    fn observe(&mut self, m: &Measurement) {
        let srtt = self.srtt.update(m.rtt_mean_us) as f64;
        if m.rtt_min_us > 0 {
            self.base_rtt_us = match self.base_rtt_us {
                0 => m.rtt_min_us,
                b => b.min(m.rtt_min_us),
            };
        }
        match m.owd_mean_us.filter(|_| self.cfg.one_way_delay) {
            // The datapath subtracts the flow's smallest one-way delay already.
            Some(d) => {
                self.owd = true;
                self.delay_us = d;
            }
            None if !self.owd && m.rtt_mean_us > 0 && self.base_rtt_us > 0 => {
                self.delay_us = m.rtt_mean_us.saturating_sub(self.base_rtt_us);
            }
            None => {}
        }
        let backlog = m.bytes_pending.min(self.cfg.backlog_cap) as f64;
        let first = self.smoothed.is_none();
        let n = backlog + self.cfg.delta * self.delay_us as f64 / 1e6;
        self.last_n = n;
        // Eq. (8) once per acknowledgement, as the paper's implementation smooths: a report
        // of k RTT samples applies it k times with the report's observation.
        let k = m.rtt_samples.clamp(1, 64) as i32;
        let w = self.cfg.q.powi(k);
        self.smoothed = Some(match self.smoothed {
            None => n,
            Some(s) => w * s + (1.0 - w) * n,
        });
        let mut dt = m.now_us.saturating_sub(self.last_report_us) as f64;
        // The first report may cover a long start-up period: at most one RTT of it counts, and
        // none before any RTT sample (the report's own interval is then the whole start-up).
        // Later reports cover the report period, which is longer than the RTT on short paths
        // (reports are at least 100 µs apart); capping those at the RTT would let H grow at
        // only part of γ and drain at the full actual rate.
        match (first, srtt > 0.0) {
            (true, true) => dt = dt.min(srtt),
            (true, false) => dt = 0.0,
            (false, true) => dt = dt.min(srtt.max(m.interval_us as f64)),
            (false, false) => {}
        }
        self.last_report_us = m.now_us;
        self.counter.advance(dt, m.acked_bytes, self.core.mss());
    }

    /// Eq. (9): halve while the counter is below the congestion threshold, else double.
    fn decide(&mut self) {
        let halve = self.halving();
        self.cwnd = if halve {
            self.cwnd / 2
        } else {
            self.cwnd.saturating_mul(2)
        }
        .clamp(self.floor(), self.ceiling());
        if halve {
            self.last_cut = self.cwnd;
        }
    }

    /// The pacing rate, bytes/s: `pacing-gain · cwnd / srtt` (None: not paced, or no RTT yet).
    fn pacing_rate(&self) -> Option<u64> {
        let srtt = self.srtt.get();
        (self.cfg.pacing_gain > 0.0 && srtt > 0)
            .then(|| (self.cfg.pacing_gain * self.cwnd as f64 * 1e6 / srtt as f64) as u64)
    }

    /// Eq. (9)'s test: the counter is below the congestion threshold.
    fn halving(&self) -> bool {
        self.counter.h < self.threshold()
    }

    /// Eq. (9) for one report of `acked` bytes, per acknowledgement: the window moves by the
    /// report's share of a doubling or a halving per epoch, `cwnd·2^(±acked/(epoch·cwnd))`, so
    /// that an epoch of acknowledgements that all find the same side of the threshold doubles
    /// or halves it, as one decision per epoch would.
    fn step(&mut self, acked: u64) {
        if acked == 0 {
            return;
        }
        let share = acked as f64 / (self.cfg.epoch * self.cwnd.max(1) as f64);
        let halve = self.halving();
        let factor = if halve { -share } else { share }.exp2();
        self.cwnd = ((self.cwnd as f64 * factor) as u64).clamp(self.floor(), self.ceiling());
        if halve {
            self.last_cut = self.cwnd;
        }
    }

    fn next_epoch(&mut self, now_us: u64) {
        let len = match self.srtt.get() {
            0 => self.core.rtt_us(),
            s => s,
        };
        let len = (len as f64 * self.cfg.epoch) as u64;
        self.epoch_end_us = now_us.saturating_add(len);
    }
}

impl WindowAlgorithm for Rtcp {
    type Window = u64;

    fn core_mut(&mut self) -> &mut WindowCore {
        &mut self.core
    }

    fn reset(&mut self) {
        self.cwnd = self
            .core
            .window_bytes(self.cfg.init_cwnd_pkts)
            .clamp(self.floor(), self.ceiling());
        self.counter = Counter::new(self.cfg.weight, self.cfg.max_rate);
        self.classified = false;
        self.urgent = false;
        self.base_rtt_us = 0;
        self.delay_us = 0;
        self.owd = false;
        self.smoothed = None;
        self.last_n = 0.0;
        self.srtt = Srtt::new();
        self.last_report_us = self.core.now_us();
        self.epoch_end_us = 0;
        self.acked_total = 0;
        self.last_cut = 0;
    }

    fn on_timeout(&mut self, _repeated: bool) {
        self.cwnd = self.core.loss_window();
        self.next_epoch(self.core.now_us());
    }

    fn on_loss(&mut self) {
        self.cwnd = (self.cwnd / 2).clamp(self.floor(), self.ceiling());
        self.last_cut = self.cwnd;
        self.next_epoch(self.core.now_us());
    }

    /// Eq. (9): on every report's acknowledgements (per ACK), or once per decision epoch,
    /// whatever was acknowledged.
    fn grow(&mut self, acked: u64) {
        if self.cfg.per_ack {
            self.step(acked);
            return;
        }
        let now = self.core.now_us();
        if now >= self.epoch_end_us && self.core.rtt_us() > 0 {
            self.decide();
            self.next_epoch(now);
        }
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn adopt(&mut self, w: u64) {
        self.cwnd = w.clamp(self.floor(), self.ceiling());
    }

    /// RTCP keeps no slow-start threshold; the window after its last halving stands for one
    /// (the window at which its regulation last found congestion), so a window-based successor
    /// does not slow-start from RTCP's window.
    fn threshold(&self) -> Option<u64> {
        (self.last_cut > 0).then_some(self.last_cut)
    }
}

impl Controller for Rtcp {
    window::window_controller!("rtcp", paced);

    fn rate(&self) -> Option<u64> {
        self.pacing_rate()
    }

    fn on_measurement(&mut self, m: &Measurement) -> Decision {
        let event = self.core.on_measurement(m);
        // The first report's acknowledged bytes are part of the flow's size.
        self.acked_total = self.acked_total.saturating_add(m.acked_bytes);
        self.classify(m);
        self.observe(m);
        self.apply(event);
        Decision {
            cwnd: Some(self.cwnd()),
            rate: self.pacing_rate(),
            report: self.cfg.per_ack.then_some(ReportPeriod::PerAck),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{FlowStart, Fused};

    const MSS: u64 = 1448;
    const RTT: u64 = 100;

    fn cfg(overrides: &[(&str, &str)]) -> RtcpConfig {
        RtcpConfig::from_params(&SPEC.params_from(overrides.iter().copied()).unwrap())
    }

    fn started(c: RtcpConfig) -> Rtcp {
        let mut r = Rtcp::new(c);
        r.on_start(&FlowStart {
            mss: MSS as u32,
            init_cwnd: 10 * MSS as u32,
            now_us: 0,
        });
        r
    }

    /// A report at `now` after one RTT: `acked` bytes, mean RTT `rtt` (min RTT `RTT`), `pending`
    /// bytes of backlog.
    fn report(now: u64, acked: u64, rtt: u64, pending: u64) -> Measurement {
        Measurement {
            now_us: now,
            interval_us: RTT,
            acked_bytes: acked,
            rtt_min_us: RTT.min(rtt),
            rtt_mean_us: rtt,
            rtt_last_us: rtt,
            rtt_samples: 1,
            bytes_pending: pending,
            bytes_in_flight: 10 * MSS,
            mss: MSS as u32,
            ..Measurement::default()
        }
    }

    #[test]
    fn desired_rate_follows_eq_10() {
        let r = 1e9;
        let mut c = Counter::new(12_000.0, r);
        // H = 0: maxRate.
        assert_eq!(c.desired_rate(), r);
        // ω/H − 1 ≥ 1 (H ≤ ω/2): capped at maxRate.
        c.h = 4_000.0;
        assert_eq!(c.desired_rate(), r);
        // ω/2 < H < ω: maxRate·(ω/H − 1).
        c.h = 8_000.0;
        assert!((c.desired_rate() - 0.5 * r).abs() < 1e-3);
        c.h = 11_000.0;
        assert!((c.desired_rate() - r / 11.0).abs() < 1e-3);
        // H ≥ ω: the current γ halves at every update.
        c.h = 12_000.0;
        c.gamma = 0.3 * r;
        assert_eq!(c.desired_rate(), 0.15 * r);
    }

    #[test]
    fn a_first_report_without_an_rtt_sample_does_not_wind_the_counter_up() {
        // 30 ms of start-up before the first report, which carries no RTT sample (its interval
        // is the whole start-up, as a datapath reports it): none of it counts, where 30 ms at
        // maxRate would be hundreds of KB of counter.
        let mut r = started(cfg(&[]));
        let mut m = report(30_000, 0, 0, 0);
        m.interval_us = 30_000;
        m.rtt_samples = 0;
        m.rtt_mean_us = 0;
        m.rtt_last_us = 0;
        m.rtt_min_us = 0;
        r.on_measurement(&m);
        assert_eq!(r.counter(), 0.0, "after one report");
    }

    #[test]
    fn counter_grows_at_gamma_and_drains_at_the_actual_rate() {
        let rate = 1e9; // 1000 bytes/µs
        let mut c = Counter::new(1e9, rate);
        c.update(10.0, 4_000);
        assert!((c.h - 6_000.0).abs() < 1e-6, "{}", c.h);
        c.update(10.0, 7_000);
        assert!((c.h - 9_000.0).abs() < 1e-6, "{}", c.h);
        // Never below zero; at zero γ is maxRate again.
        c.update(1.0, 1_000_000);
        assert_eq!((c.h, c.gamma), (0.0, rate));
    }

    #[test]
    fn counter_settles_where_gamma_meets_the_actual_rate() {
        // Under a steady actual rate x the counter settles at H = ω/(1 + x/maxRate), γ = x.
        let (w, r) = (12_000.0, 1.25e9);
        for frac in [0.1, 0.5, 0.9] {
            let x = frac * r;
            let mut c = Counter::new(w, r);
            for _ in 0..20_000 {
                c.update(1.0, (x / 1e6) as u64);
            }
            let want = w / (1.0 + (x / 1e6).floor() * 1e6 / r);
            assert!(
                (c.h - want).abs() / want < 0.02,
                "x = {frac}·max: H {} want {want}",
                c.h
            );
            assert!((c.gamma - x).abs() / x < 0.05, "γ {} x {x}", c.gamma);
        }
        // A flow that gets nothing keeps the counter near ω and its desired rate decays.
        let mut c = Counter::new(w, r);
        for _ in 0..1_000 {
            c.update(10.0, 0);
        }
        // (γ halves at every update once H ≥ ω, so H overshoots ω by at most about ω.)
        assert!(c.h >= w && c.h < w * 2.5, "H {}", c.h);
        assert!(c.gamma < 1e-3 * r);
    }

    #[test]
    fn congestion_estimate_is_smoothed_with_q() {
        let mut r = started(cfg(&[("delta", "8gbit"), ("backlog-cap", "100KB")]));
        // Base RTT 100 µs, no delay, 2 KB backlog: N = 2000.
        r.on_measurement(&report(100, 0, RTT, 2_000));
        assert_eq!(r.last_observation(), 2_000.0);
        assert_eq!(r.smoothed_congestion(), 2_000.0);
        // 10 µs of queueing delay at δ = 8 Gbit/s (1000 bytes/µs): N = 2000 + 1000·10 = 12000; S = 0.5·2000 + 0.5·12000.
        r.on_measurement(&report(200, 0, RTT + 10, 2_000));
        assert_eq!(r.queueing_delay_us(), 10);
        assert_eq!(r.last_observation(), 12_000.0);
        assert_eq!(r.smoothed_congestion(), 7_000.0);
        // q = 0: no memory.
        let mut r = started(cfg(&[("delta", "8gbit"), ("q", "0")]));
        r.on_measurement(&report(100, 0, RTT, 0));
        r.on_measurement(&report(200, 0, RTT + 10, 0));
        assert_eq!(r.smoothed_congestion(), 10_000.0);
        // The backlog counted is capped at backlog_cap (long-lived flows report u32::MAX).
        let mut r = started(cfg(&[("backlog-cap", "8000")]));
        r.on_measurement(&report(100, 0, RTT, u64::from(u32::MAX)));
        assert_eq!(r.last_observation(), 8_000.0);
    }

    #[test]
    fn the_window_is_paced_at_the_gain_times_cwnd_over_the_smoothed_rtt() {
        let mut r = started(cfg(&[("backlog-cap", "0"), ("max-rate", "1gbit")]));
        // Before any RTT sample: not paced.
        assert_eq!(r.rate(), None);
        let d = r.on_measurement(&report(RTT, MSS, RTT, 0));
        let want = 2 * u64::from(r.cwnd()) * 1_000_000 / RTT;
        assert_eq!(d.rate, Some(want));
        assert_eq!(r.rate(), Some(want));
        let mut r = started(cfg(&[("pacing-gain", "0")]));
        let d = r.on_measurement(&report(RTT, MSS, RTT, 0));
        assert_eq!((d.rate, r.rate()), (None, None));
    }

    #[test]
    fn per_ack_the_window_doubles_or_halves_over_an_epoch_of_acknowledgements() {
        // One report per acknowledged packet, a window's worth per RTT; maxRate·RTT = 12.5 KB,
        // so H stays 0 without delay, and 100 µs of queueing puts the threshold above any H
        // (as in the per-epoch test below).
        let mut r = started(cfg(&[("backlog-cap", "0"), ("max-rate", "1gbit")]));
        let epoch = r.config().epoch;
        assert!(r.config().per_ack);
        let mut t = 0;
        // Rounds of one RTT: each acknowledges the window the round began with, packet by packet.
        fn rounds(r: &mut Rtcp, t: &mut u64, n: u32, rtt: u64) -> u64 {
            for _ in 0..n {
                let acks = u64::from(r.cwnd()) / MSS;
                for _ in 0..acks {
                    *t += rtt / acks;
                    let d = r.on_measurement(&report(*t, MSS, rtt, 0));
                    assert_eq!(d.report, Some(ReportPeriod::PerAck));
                }
            }
            u64::from(r.cwnd())
        }
        let w0 = u64::from(r.cwnd());
        // About doubled after an epoch: each step takes its share of the window it finds, which
        // grows within a round, so a round of a window's acknowledgements multiplies it by a
        // little less than 2^(1/epoch) (here 1.86 after three rounds).
        let w = rounds(&mut r, &mut t, epoch as u32, RTT);
        assert!(
            (1.8..=2.0).contains(&(w as f64 / w0 as f64)),
            "{w0} -> {w} after one epoch"
        );
        // Each step is the report's share: one packet of a window of about 19 packets at epoch 3
        // is 2^(1/56), 1.2 %.
        let before = u64::from(r.cwnd());
        let after = u64::from(r.on_measurement(&report(t + 1, MSS, RTT, 0)).cwnd.unwrap());
        let step = after as f64 / before as f64;
        let want = (MSS as f64 / (epoch * before as f64)).exp2();
        assert!((step - want).abs() < 1e-3, "{step} against {want}");
        // Under congestion: about halved after an epoch (a shrinking window makes each step a
        // little larger).
        let w1 = u64::from(r.cwnd());
        let w2 = rounds(&mut r, &mut t, epoch as u32, RTT + 100);
        let f = w2 as f64 / w1 as f64;
        assert!(
            (0.45..=0.55).contains(&f),
            "{w1} -> {w2} after one epoch of congestion"
        );
        // Floor: min-cwnd (2 packets).
        for _ in 0..200 {
            t += RTT + 100;
            r.on_measurement(&report(t, MSS, RTT + 100, 0));
        }
        assert_eq!(r.cwnd(), 2 * MSS as u32);
    }

    #[test]
    fn per_epoch_the_window_doubles_without_congestion_and_halves_under_it_once_per_rtt() {
        // maxRate·RTT = 12.5 KB: less than the 10 packets acknowledged per RTT, so H stays 0.
        let mut r = started(cfg(&[
            ("backlog-cap", "0"),
            ("max-rate", "1gbit"),
            ("epoch", "1"),
            ("per-ack", "false"),
        ]));
        let w0 = r.cwnd();
        // First report: the first RTT sample; decision at once (no epoch yet), no delay.
        let d = r.on_measurement(&report(RTT, 10 * MSS, RTT, 0));
        assert_eq!(d.cwnd, Some(2 * w0));
        // Within the same RTT epoch: no second decision.
        let d = r.on_measurement(&report(RTT + 50, 2 * MSS, RTT, 0));
        assert_eq!(d.cwnd, Some(2 * w0));
        let d = r.on_measurement(&report(2 * RTT + 10, 10 * MSS, RTT, 0));
        assert_eq!(d.cwnd, Some(4 * w0));
        // 100 µs of queueing at δ = 10 Gbit/s: δ·D = 125 KB, ×α/1000 = 62.5 KB, above any H
        // the counter reaches (about 2ω = 24 KB even for a flow that delivers nothing): halve
        // once per epoch.
        let mut t = 3 * RTT + 100;
        let mut windows = vec![];
        for _ in 0..4 {
            windows.push(r.on_measurement(&report(t, 10 * MSS, RTT + 100, 0)).cwnd);
            t += RTT + 100;
        }
        assert_eq!(
            windows,
            vec![Some(2 * w0), Some(w0), Some(w0 / 2), Some(w0 / 4)]
        );
        // Floor: min-cwnd (2 packets).
        for _ in 0..10 {
            r.on_measurement(&report(t, MSS, RTT + 100, 0));
            t += RTT + 100;
        }
        assert_eq!(r.cwnd(), 2 * MSS as u32);
    }

    #[test]
    fn larger_alpha_or_delta_backs_off_at_a_smaller_delay() {
        // The queueing delay (µs) at which a flow in steady state stops growing, for a setting.
        fn tolerated_delay(overrides: &[(&str, &str)]) -> u64 {
            (0..200u64)
                .find(|&d| {
                    let mut r = started(cfg(overrides));
                    let mut t = 0;
                    // Half of maxRate (62.5 bytes/µs): H settles at ω/1.5 = 8 KB.
                    for _ in 0..50 {
                        t += RTT + d;
                        r.on_measurement(&report(t, 125 * (RTT + d) / 2, RTT + d, 0));
                    }
                    r.counter() < r.threshold()
                })
                .unwrap_or(200)
        }
        let base = [
            ("backlog-cap", "0"),
            ("delta", "8gbit"),
            ("max-rate", "1gbit"),
            ("urgent-threshold", "0"),
        ];
        let with = |k: &'static str, v: &'static str| {
            let mut o = base.to_vec();
            o.push((k, v));
            tolerated_delay(&o)
        };
        let d_300 = with("alpha", "300");
        let d_500 = with("alpha", "500");
        let d_1000 = with("alpha", "1000");
        let d_delta_300 = with("delta", "2400mbit");
        println!(
            "tolerated delay: alpha 300/500/1000 → {d_300}/{d_500}/{d_1000} µs; delta 2.4 Gbit/s → {d_delta_300} µs"
        );
        assert!(d_300 > d_500 && d_500 > d_1000, "{d_300} {d_500} {d_1000}");
        assert!(d_delta_300 > d_500);
        // H ≈ 8 KB against 0.5·(1000 bytes/µs)·D: D ≈ 16 µs.
        assert!((14..=18).contains(&d_500), "{d_500}");
    }

    #[test]
    fn urgent_flows_tolerate_more_congestion() {
        // Classified at the first report by the flow's size.
        let mut small = started(RtcpConfig::default());
        small.on_measurement(&report(RTT, 0, RTT, 10_000));
        assert!(small.is_urgent());
        assert_eq!(small.weight(), 24_000.0);
        let mut large = started(RtcpConfig::default());
        large.on_measurement(&report(RTT, 0, RTT, 1_000_000));
        assert!(!large.is_urgent());
        assert_eq!(large.weight(), 12_000.0);
        // The size counts what the first report acknowledged: 14 KB pending, 10 MSS in flight
        // and 2 MSS acknowledged is a 31.4 KB flow, above the 30 KB threshold (without the
        // acknowledged part it read 28.5 KB, urgent); 12 KB pending makes 29.4 KB, urgent.
        let mut edge = started(RtcpConfig::default());
        edge.on_measurement(&report(RTT, 2 * MSS, RTT, 14_000));
        assert!(!edge.is_urgent(), "14 KB + 12 MSS is above 30 KB");
        let mut under = started(RtcpConfig::default());
        under.on_measurement(&report(RTT, 2 * MSS, RTT, 12_000));
        assert!(under.is_urgent(), "12 KB + 12 MSS is under 30 KB");
        // Long-lived flows report an unbounded backlog.
        let mut bulk = started(RtcpConfig::default());
        bulk.on_measurement(&report(RTT, 0, RTT, u64::from(u32::MAX)));
        assert!(!bulk.is_urgent());
        // Threshold 0: nobody is urgent.
        let mut none = started(cfg(&[("urgent-threshold", "0")]));
        none.on_measurement(&report(RTT, 0, RTT, 10));
        assert!(!none.is_urgent());
        // With the same delay (20 µs: α·δ·D = 12.5 KB at the defaults) and delivery (half of
        // maxRate: H settles at ω/1.5, 8 KB and 16 KB), the urgent weight keeps growing where the
        // high-volume one halves.
        let run = |weight: &'static str| {
            let mut r = started(cfg(&[
                ("weight", weight),
                ("urgent-threshold", "0"),
                ("backlog-cap", "0"),
                ("max-rate", "1gbit"),
            ]));
            let mut t = 0;
            let mut cw = vec![];
            for _ in 0..30 {
                t += RTT + 20;
                cw.push(
                    r.on_measurement(&report(t, 125 * (RTT + 20) / 2, RTT + 20, 0))
                        .cwnd
                        .unwrap(),
                );
            }
            (r.counter(), r.threshold(), cw)
        };
        let (h_hv, th, cw_hv) = run("12000");
        let (h_u, _, cw_u) = run("24000");
        println!("H {h_hv:.0} / {h_u:.0} against {th:.0}");
        assert!(h_hv < th && h_u > th, "H {h_hv} {h_u} threshold {th}");
        assert!(cw_u.last() > cw_hv.last());
    }

    #[test]
    fn loss_halves_once_per_epoch_and_timeout_sets_the_loss_window() {
        let mut r = started(RtcpConfig::default());
        r.on_measurement(&report(RTT, 10 * MSS, RTT, 0));
        let w = u64::from(r.cwnd());
        let lossy = |now| Measurement {
            lost_packets: 2,
            ..report(now, MSS, RTT, 0)
        };
        assert_eq!(
            u64::from(r.on_measurement(&lossy(RTT + 10)).cwnd.unwrap()),
            w / 2
        );
        // Same loss epoch: held.
        assert_eq!(
            u64::from(r.on_measurement(&lossy(RTT + 20)).cwnd.unwrap()),
            w / 2
        );
        let to = Measurement {
            timeout: true,
            ..report(5 * RTT, 0, RTT, 0)
        };
        assert_eq!(u64::from(r.on_measurement(&to).cwnd.unwrap()), MSS);
    }

    #[test]
    fn the_first_long_interval_does_not_wind_the_counter_up() {
        let mut r = started(RtcpConfig::default());
        // First report after 1 ms (the program's initial period), RTT 100 µs: Δt is capped at
        // one RTT, so H ≤ maxRate·100 µs = 125 KB rather than 1.25 MB.
        r.on_measurement(&report(1_000, 0, RTT, 0));
        assert!(r.counter() <= 125_000.0 + 1.0, "{}", r.counter());
    }

    #[test]
    fn reports_further_apart_than_the_rtt_advance_the_counter_by_their_period() {
        // A 64 µs path reported every 100 µs, delivering half of maxRate: H settles at
        // ω/1.5 = 8 KB, as with reports one RTT apart. (Capping Δt at the RTT would grow H at
        // 64 % of γ against the full delivery and hold it near 6.7 KB.)
        let mut r = started(cfg(&[("max-rate", "1gbit"), ("urgent-threshold", "0")]));
        let mut t = 0;
        for _ in 0..200 {
            t += 100;
            r.on_measurement(&Measurement {
                interval_us: 100,
                rtt_min_us: 64,
                rtt_mean_us: 64,
                rtt_last_us: 64,
                ..report(t, 125 * 100 / 2, 64, 0)
            });
        }
        assert!((r.counter() - 8_000.0).abs() < 400.0, "H {}", r.counter());
    }

    #[test]
    fn calibration_adopts_the_fused_window_within_bounds() {
        let mut r = started(RtcpConfig::default());
        r.calibrate(Fused::Cwnd(30_000));
        assert_eq!(r.cwnd(), 30_000);
        r.calibrate(Fused::Cwnd(1));
        assert_eq!(r.cwnd(), 2 * MSS as u32);
        // No RTT yet: a rate is ignored.
        r.calibrate(Fused::Rate(1_000_000_000));
        assert_eq!(r.cwnd(), 2 * MSS as u32);
        r.on_measurement(&report(RTT, 0, RTT, 0));
        r.calibrate(Fused::Rate(1_000_000_000));
        assert_eq!(r.cwnd(), 100_000);
    }

    #[test]
    fn the_one_way_delay_replaces_the_rtt_where_the_datapath_measures_it() {
        let with_owd = |rtt: u64, owd: Option<u64>| Measurement {
            owd_mean_us: owd,
            ..report(0, 0, rtt, 0)
        };
        // RTT 100 µs above its minimum (e.g. ACKs queued behind the receiver's own data), the
        // forward path 5 µs above its minimum: D is 5 µs.
        let mut r = started(cfg(&[("backlog-cap", "0")]));
        r.on_measurement(&Measurement {
            now_us: 100,
            ..with_owd(RTT, Some(0))
        });
        r.on_measurement(&Measurement {
            now_us: 200,
            ..with_owd(RTT + 100, Some(5))
        });
        assert!(r.uses_one_way_delay());
        assert_eq!(r.queueing_delay_us(), 5);
        // A report without samples keeps the last delay (no fallback to the RTT).
        r.on_measurement(&Measurement {
            now_us: 300,
            rtt_samples: 0,
            ..with_owd(0, None)
        });
        assert_eq!(r.queueing_delay_us(), 5);
        // one-way-delay=false, or a datapath without it: the RTT's 100 µs.
        for (c, owd) in [
            (cfg(&[("one-way-delay", "false")]), Some(5)),
            (RtcpConfig::default(), None),
        ] {
            let mut r = started(c);
            r.on_measurement(&Measurement {
                now_us: 100,
                ..with_owd(RTT, owd.map(|_| 0))
            });
            r.on_measurement(&Measurement {
                now_us: 200,
                ..with_owd(RTT + 100, owd)
            });
            assert!(!r.uses_one_way_delay());
            assert_eq!(r.queueing_delay_us(), 100);
        }
    }

    #[test]
    fn defaults_are_the_papers() {
        let c = RtcpConfig::default();
        assert_eq!(c.alpha, 0.5);
        assert_eq!(c.delta, 1.25e9);
        assert_eq!(c.epoch, 3.0);
        assert_eq!(c.q, 0.5);
        assert_eq!((c.weight, c.urgent_weight), (12_000.0, 24_000.0));
        assert_eq!(c.urgent_threshold, 30_000);
        assert_eq!(c.max_rate, 1.25e9);
        assert!(c.one_way_delay);
    }
}
